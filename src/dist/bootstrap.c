/* TCP rendezvous: see bootstrap.h. Messages: a joiner sends its rank as 4 bytes (network order); rank 0
 * answers with the blob's length (4 bytes) and the blob. Every wait is bounded by the timeout (poll),
 * so a missing rank is an error naming who is missing, never a hang. */
#include "dist/bootstrap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/status.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits until fd is readable (events POLLIN) or writable, at most until deadline. 1 ready, 0 timeout. */
static int wait_fd(int fd, short events, double deadline) {
    for (;;) {
        double left = deadline - now_s();
        if (left <= 0) return 0;
        struct pollfd p = {fd, events, 0};
        int r = poll(&p, 1, (int)(left * 1000) + 1);
        if (r > 0) return 1;
        if (r < 0 && errno != EINTR) return 0;
    }
}

static int io_all(int fd, void *buf, size_t n, int sending, double deadline) {
    char *p = buf;
    while (n) {
        if (!wait_fd(fd, sending ? POLLOUT : POLLIN, deadline)) return -1;
        ssize_t k = sending ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k <= 0) {
            if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static ds_status resolve(const char *addr, int port, struct sockaddr_storage *sa, socklen_t *len, char *err) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int rc = getaddrinfo(addr, ps, &hints, &res);
    if (rc || !res) return ds_seterr(err, DS_ERR_ARG, "master address %s:%d: %s", addr, port, gai_strerror(rc));
    memcpy(sa, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return DS_OK;
}

ds_status ds_bootstrap_listen(const char *addr, int *port_inout, int *fd_out, char *err) {
    struct sockaddr_storage sa;
    socklen_t len;
    ds_status st = resolve(addr, *port_inout, &sa, &len, err);
    if (st) return st;
    int fd = socket(sa.ss_family, SOCK_STREAM, 0), one = 1;
    if (fd < 0) return ds_seterr(err, DS_ERR_IO, "bootstrap: socket: %s", strerror(errno));
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, len) || listen(fd, 64)) {
        int e = errno;
        close(fd);
        return ds_seterr(err, DS_ERR_IO, "bootstrap: cannot listen on %s:%d: %s", addr, *port_inout, strerror(e));
    }
    struct sockaddr_storage got;
    socklen_t gl = sizeof got;
    getsockname(fd, (struct sockaddr *)&got, &gl);
    *port_inout = ntohs(got.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&got)->sin6_port
                                                  : ((struct sockaddr_in *)&got)->sin_port);
    *fd_out = fd;
    return DS_OK;
}

ds_status ds_bootstrap_serve_fd(int fd, int n_ranks, const void *blob, size_t len, double timeout_s, char *err) {
    double deadline = now_s() + timeout_s;
    char *seen = calloc((size_t)n_ranks, 1);
    ds_status st = DS_OK;
    for (int got = 1; got < n_ranks && !st;) {
        if (!wait_fd(fd, POLLIN, deadline)) {
            int first = -1;
            for (int r = 1; r < n_ranks && first < 0; r++)
                if (!seen[r]) first = r;
            st = ds_seterr(err, DS_ERR_IO, "bootstrap: %d of %d ranks joined within %.0f s (rank %d missing)", got,
                           n_ranks, timeout_s, first);
            break;
        }
        int c = accept(fd, NULL, NULL);
        if (c < 0) continue;
        uint32_t r_net = 0, len_net = htonl((uint32_t)len);
        int r = -1;
        if (!io_all(c, &r_net, 4, 0, deadline)) r = (int)ntohl(r_net);
        if (r >= 1 && r < n_ranks && !seen[r] && !io_all(c, &len_net, 4, 1, deadline) &&
            !io_all(c, (void *)blob, len, 1, deadline)) {
            seen[r] = 1;
            got++;
        } else if (r >= 1 && r < n_ranks && seen[r]) {
            st = ds_seterr(err, DS_ERR_ARG, "bootstrap: rank %d joined twice", r);
        } else if (r == 0 || r >= n_ranks) {
            st = ds_seterr(err, DS_ERR_ARG, "bootstrap: a process joined as rank %d of %d", r, n_ranks);
        }
        close(c);
    }
    free(seen);
    return st;
}

ds_status ds_bootstrap_serve(const char *addr, int *port_inout, int n_ranks, const void *blob, size_t len,
                             double timeout_s, char *err) {
    int fd;
    ds_status st = ds_bootstrap_listen(addr, port_inout, &fd, err);
    if (st) return st;
    st = ds_bootstrap_serve_fd(fd, n_ranks, blob, len, timeout_s, err);
    close(fd);
    return st;
}

ds_status ds_bootstrap_join(const char *addr, int port, int rank, void *blob, size_t len, double timeout_s, char *err) {
    struct sockaddr_storage sa;
    socklen_t sl;
    ds_status st = resolve(addr, port, &sa, &sl, err);
    if (st) return st;
    double deadline = now_s() + timeout_s;
    for (;;) {   /* rank 0 may not listen yet: retry until the deadline */
        int fd = socket(sa.ss_family, SOCK_STREAM, 0);
        if (fd < 0) return ds_seterr(err, DS_ERR_IO, "bootstrap: socket: %s", strerror(errno));
        if (!connect(fd, (struct sockaddr *)&sa, sl)) {
            uint32_t r_net = htonl((uint32_t)rank), len_net = 0;
            int ok = !io_all(fd, &r_net, 4, 1, deadline) && !io_all(fd, &len_net, 4, 0, deadline);
            if (ok && ntohl(len_net) != len) {
                close(fd);
                return ds_seterr(err, DS_ERR_FORMAT, "bootstrap: rank 0 sends %u bytes, %zu expected", ntohl(len_net), len);
            }
            ok = ok && !io_all(fd, blob, len, 0, deadline);
            close(fd);
            if (ok) return DS_OK;
            return ds_seterr(err, DS_ERR_IO, "bootstrap: rank %d: the connection to %s:%d broke", rank, addr, port);
        }
        close(fd);
        if (now_s() > deadline)
            return ds_seterr(err, DS_ERR_IO, "bootstrap: rank %d cannot reach rank 0 at %s:%d within %.0f s", rank, addr,
                             port, timeout_s);
        usleep(50 * 1000);
    }
}

ds_status ds_bootstrap_connect(const char *addr, int port, int rank, double timeout_s, int *fd_out, char *err) {
    struct sockaddr_storage sa;
    socklen_t sl;
    ds_status st = resolve(addr, port, &sa, &sl, err);
    if (st) return st;
    double deadline = now_s() + timeout_s;
    for (;;) {   /* the listener may not be up yet: retry until the deadline */
        int fd = socket(sa.ss_family, SOCK_STREAM, 0);
        if (fd < 0) return ds_seterr(err, DS_ERR_IO, "bootstrap: socket: %s", strerror(errno));
        if (!connect(fd, (struct sockaddr *)&sa, sl)) {
            uint32_t r_net = htonl((uint32_t)rank);
            if (io_all(fd, &r_net, 4, 1, deadline)) {
                close(fd);
                return ds_seterr(err, DS_ERR_IO, "bootstrap: rank %d: the connection to %s:%d broke", rank, addr, port);
            }
            *fd_out = fd;
            return DS_OK;
        }
        close(fd);
        if (now_s() > deadline)
            return ds_seterr(err, DS_ERR_IO, "bootstrap: rank %d cannot reach %s:%d within %.0f s", rank, addr, port, timeout_s);
        usleep(50 * 1000);
    }
}

ds_status ds_bootstrap_accept(int listen_fd, double timeout_s, int *fd_out, int *rank_out, char *err) {
    double deadline = now_s() + timeout_s;
    for (;;) {
        if (!wait_fd(listen_fd, POLLIN, deadline))
            return ds_seterr(err, DS_ERR_IO, "bootstrap: nobody connected within %.0f s", timeout_s);
        int c = accept(listen_fd, NULL, NULL);
        if (c < 0) continue;
        uint32_t r_net = 0;
        if (io_all(c, &r_net, 4, 0, deadline)) {
            close(c);
            continue;
        }
        *fd_out = c;
        *rank_out = (int)ntohl(r_net);
        return DS_OK;
    }
}
