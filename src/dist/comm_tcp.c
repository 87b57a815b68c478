/* Ranks as processes over TCP (dist/comm.h): host memory, a full mesh of sockets, every collective one
 * exchange in which each rank sends to and receives from every peer at once (poll, non-blocking, so two
 * ranks sending each other more than a socket buffer cannot deadlock); each message carries its length,
 * checked on arrival. For the CPU backend's replicas in processes (`serve --data-parallel-backend mp
 * --enable-expert-parallel`, server/remote.c) and their tests; GPUs use NCCL. The sums add in rank order,
 * so every rank gets the same bits, as comm_local does. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/status.h"
#include "dist/bootstrap.h"
#include "dist/comm.h"

#define TCP_TIMEOUT_S 600.0   /* a collective that makes no progress this long is an error, not a hang */

typedef struct {
    ds_comm base;
    int *fd;   /* [size]: the socket to each peer, -1 for this rank */
} tcp_comm;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Blocking send / receive of n bytes within the deadline (set-up only). */
static int io_full(int fd, void *buf, size_t n, int sending, double deadline) {
    char *p = buf;
    while (n) {
        struct pollfd q = {fd, sending ? POLLOUT : POLLIN, 0};
        double left = deadline - now_s();
        if (left <= 0 || poll(&q, 1, (int)(left * 1000) + 1) < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        ssize_t k = sending ? send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) : recv(fd, p, n, MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Every peer p: send sb[p] bytes at sp[p] and receive rb[p] bytes into rp[p], all at once. Each message is
 * its 8-byte length, then the bytes; a length other than the one expected is an error. */
static ds_status tcp_exchange(tcp_comm *t, const char *const *sp, const size_t *sb, char *const *rp, const size_t *rb,
                              const char *what, char *err) {
    int n = t->base.size, me = t->base.rank;
    size_t *sent = calloc((size_t)n, sizeof(size_t)), *got = calloc((size_t)n, sizeof(size_t));
    uint64_t *hout = calloc((size_t)n, 8), *hin = calloc((size_t)n, 8);
    struct pollfd *q = calloc((size_t)n, sizeof *q);
    int *peer = calloc((size_t)n, sizeof(int));
    ds_status st = DS_OK;
    for (int p = 0; p < n; p++) hout[p] = (uint64_t)sb[p];
    double deadline = now_s() + TCP_TIMEOUT_S;
    for (;;) {
        int nq = 0;
        for (int p = 0; p < n; p++) {
            if (p == me) continue;
            short ev = 0;
            if (sent[p] < 8 + sb[p]) ev |= POLLOUT;
            if (got[p] < 8 + rb[p]) ev |= POLLIN;
            if (!ev) continue;
            q[nq] = (struct pollfd){t->fd[p], ev, 0};
            peer[nq++] = p;
        }
        if (!nq) break;
        double left = deadline - now_s();
        int r = left > 0 ? poll(q, (nfds_t)nq, (int)(left * 1000) + 1) : 0;
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            st = ds_seterr(err, DS_ERR_IO, "%s: rank %d: no progress with rank %d in %.0f s", what, me, peer[0], TCP_TIMEOUT_S);
            break;
        }
        for (int i = 0; i < nq && !st; i++) {
            int p = peer[i];
            if (q[i].revents & (POLLERR | POLLHUP | POLLNVAL) && !(q[i].revents & POLLIN)) {
                st = ds_seterr(err, DS_ERR_IO, "%s: rank %d: the connection to rank %d broke", what, me, p);
                break;
            }
            if (q[i].revents & POLLOUT) {   /* the header, then the bytes */
                const char *src = sent[p] < 8 ? (const char *)&hout[p] + sent[p] : sp[p] + (sent[p] - 8);
                size_t len = sent[p] < 8 ? 8 - sent[p] : sb[p] - (sent[p] - 8);
                ssize_t k = send(t->fd[p], src, len, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (k > 0) sent[p] += (size_t)k;
                else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                    st = ds_seterr(err, DS_ERR_IO, "%s: rank %d: send to rank %d: %s", what, me, p, strerror(errno));
            }
            if (!st && (q[i].revents & POLLIN)) {
                char *dst = got[p] < 8 ? (char *)&hin[p] + got[p] : rp[p] + (got[p] - 8);
                size_t len = got[p] < 8 ? 8 - got[p] : rb[p] - (got[p] - 8);
                ssize_t k = recv(t->fd[p], dst, len, MSG_DONTWAIT);
                if (k > 0) {
                    got[p] += (size_t)k;
                    if (got[p] == 8 && hin[p] != (uint64_t)rb[p])
                        st = ds_seterr(err, DS_ERR_ARG, "%s: rank %d sends %llu bytes to rank %d, which expects %zu", what, p,
                                       (unsigned long long)hin[p], me, rb[p]);
                } else if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                    st = ds_seterr(err, DS_ERR_IO, "%s: rank %d: the connection to rank %d closed", what, me, p);
                }
            }
        }
        if (st) break;
    }
    free(sent); free(got); free(hout); free(hin); free(q); free(peer);
    return st;
}

static ds_status tcp_all_to_all_v(ds_comm *c, const void *send, const size_t *send_bytes, const size_t *send_off,
                                  void *recv, const size_t *recv_bytes, const size_t *recv_off, char *err) {
    int n = c->size, me = c->rank;
    if (send_bytes[me] != recv_bytes[me])
        return ds_seterr(err, DS_ERR_ARG, "all_to_all_v: rank %d sends itself %zu bytes and expects %zu", me, send_bytes[me],
                         recv_bytes[me]);
    if (send_bytes[me]) memmove((char *)recv + recv_off[me], (const char *)send + send_off[me], send_bytes[me]);
    const char **sp = calloc((size_t)n, sizeof(char *));
    char **rp = calloc((size_t)n, sizeof(char *));
    for (int p = 0; p < n; p++) {
        sp[p] = (const char *)send + send_off[p];
        rp[p] = (char *)recv + recv_off[p];
    }
    ds_status st = tcp_exchange((tcp_comm *)c, sp, send_bytes, rp, recv_bytes, "all_to_all_v", err);
    free(sp);
    free(rp);
    return st;
}

/* n bytes from peer p into dst + p * dst_stride, and to peer p the n bytes at src + p * src_stride (src_stride 0:
 * the same bytes to every peer); this rank's own part copied. */
static ds_status tcp_exchange_strided(ds_comm *c, const void *src, size_t src_stride, void *dst, size_t dst_stride,
                                      size_t n, const char *what, char *err) {
    int R = c->size;
    const char **sp = calloc((size_t)R, sizeof(char *));
    char **rp = calloc((size_t)R, sizeof(char *));
    size_t *len = calloc((size_t)R, sizeof(size_t));
    for (int p = 0; p < R; p++) {
        sp[p] = (const char *)src + (size_t)p * src_stride;
        rp[p] = (char *)dst + (size_t)p * dst_stride;
        len[p] = n;
    }
    memcpy(rp[c->rank], sp[c->rank], n);
    ds_status st = tcp_exchange((tcp_comm *)c, sp, len, rp, len, what, err);
    free(sp); free(rp); free(len);
    return st;
}

static ds_status tcp_exchange_counts(ds_comm *c, const int64_t *send, int64_t *recv, char *err) {
    return tcp_exchange_strided(c, send, sizeof(int64_t), recv, sizeof(int64_t), sizeof(int64_t), "exchange_counts", err);
}

static ds_status tcp_all_gather(ds_comm *c, const float *send, float *recv, size_t n, char *err) {
    return tcp_exchange_strided(c, send, 0, recv, n * sizeof(float), n * sizeof(float), "all_gather", err);
}

static ds_status tcp_all_reduce_sum(ds_comm *c, float *buf, size_t n, char *err) {
    float *all = malloc(sizeof(float) * (size_t)c->size * (n ? n : 1));
    ds_status st = tcp_exchange_strided(c, buf, 0, all, n * sizeof(float), n * sizeof(float), "all_reduce", err);
    if (!st)
        for (size_t i = 0; i < n; i++) {
            float s = all[i];
            for (int r = 1; r < c->size; r++) s += all[(size_t)r * n + i];
            buf[i] = s;
        }
    free(all);
    return st;
}

static ds_status tcp_reduce_scatter_sum(ds_comm *c, const float *send, float *recv, size_t n, char *err) {
    int R = c->size;
    float *parts = malloc(sizeof(float) * (size_t)R * (n ? n : 1));   /* [R][n]: rank r's segment for this rank */
    ds_status st = tcp_exchange_strided(c, send, n * sizeof(float), parts, n * sizeof(float), n * sizeof(float),
                                        "reduce_scatter", err);
    if (!st)
        for (size_t i = 0; i < n; i++) {
            float s = parts[i];
            for (int r = 1; r < R; r++) s += parts[(size_t)r * n + i];
            recv[i] = s;
        }
    free(parts);
    return st;
}

static void tcp_destroy(ds_comm *c) {
    tcp_comm *t = (tcp_comm *)c;
    for (int p = 0; p < c->size; p++)
        if (t->fd[p] >= 0) close(t->fd[p]);
    free(t->fd);
    free(t);
}

static void nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

ds_status ds_comm_tcp_new(int rank, int size, const char *addr, int port, int listen_fd, double timeout_s, ds_comm **out,
                          char *err) {
    *out = NULL;
    if (size < 1 || size > 64 || rank < 0 || rank >= size)
        return ds_seterr(err, DS_ERR_ARG, "tcp group: rank %d of %d (1 to 64 ranks)", rank, size);
    tcp_comm *t = ds_xcalloc(1, sizeof *t);
    t->fd = malloc(sizeof(int) * (size_t)size);
    for (int p = 0; p < size; p++) t->fd[p] = -1;
    double deadline = now_s() + timeout_s;
    ds_status st = DS_OK;
    uint32_t *ip = calloc((size_t)size, 4), *pt = calloc((size_t)size, 4);   /* network order */
    if (rank == 0) {   /* everyone's listening address, then the table to each */
        int own = listen_fd < 0, lfd = listen_fd, p0 = port;
        if (own) st = ds_bootstrap_listen(addr, &p0, &lfd, err);
        for (int got = 1; got < size && !st; got++) {
            int fd = -1, r = -1;
            st = ds_bootstrap_accept(lfd, deadline - now_s(), &fd, &r, err);
            if (st) break;
            uint32_t their = 0;
            struct sockaddr_in sa;
            socklen_t sl = sizeof sa;
            if (r < 1 || r >= size || t->fd[r] >= 0 || io_full(fd, &their, 4, 0, deadline) ||
                getpeername(fd, (struct sockaddr *)&sa, &sl) || sa.sin_family != AF_INET) {
                close(fd);
                st = ds_seterr(err, DS_ERR_IO, "tcp group: a bad join (rank %d of %d)", r, size);
                break;
            }
            t->fd[r] = fd;
            ip[r] = sa.sin_addr.s_addr;
            pt[r] = their;
        }
        if (own && lfd >= 0) close(lfd);
        for (int r = 1; r < size && !st; r++)
            if (io_full(t->fd[r], ip, 4 * (size_t)size, 1, deadline) || io_full(t->fd[r], pt, 4 * (size_t)size, 1, deadline))
                st = ds_seterr(err, DS_ERR_IO, "tcp group: cannot send the table to rank %d", r);
    } else {   /* a listener of its own, rank 0's table, then the mesh: connect below, accept above */
        int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        struct sockaddr_in me = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY), .sin_port = 0};
        socklen_t ml = sizeof me;
        if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
            bind(lfd, (struct sockaddr *)&me, sizeof me) || listen(lfd, 64) || getsockname(lfd, (struct sockaddr *)&me, &ml))
            st = ds_seterr(err, DS_ERR_IO, "tcp group: rank %d cannot listen: %s", rank, strerror(errno));
        if (!st) st = ds_bootstrap_connect(addr, port, rank, deadline - now_s(), &t->fd[0], err);
        uint32_t mp = (uint32_t)me.sin_port;
        if (!st && (io_full(t->fd[0], &mp, 4, 1, deadline) || io_full(t->fd[0], ip, 4 * (size_t)size, 0, deadline) ||
                    io_full(t->fd[0], pt, 4 * (size_t)size, 0, deadline)))
            st = ds_seterr(err, DS_ERR_IO, "tcp group: rank %d lost rank 0 while joining", rank);
        for (int p = 1; p < rank && !st; p++) {   /* lower ranks: their listeners took the connection in the backlog */
            struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = ip[p], .sin_port = (in_port_t)pt[p]};
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            uint32_t r_net = htonl((uint32_t)rank);
            if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) || io_full(fd, &r_net, 4, 1, deadline)) {
                if (fd >= 0) close(fd);
                st = ds_seterr(err, DS_ERR_IO, "tcp group: rank %d cannot reach rank %d", rank, p);
                break;
            }
            t->fd[p] = fd;
        }
        for (int k = rank + 1; k < size && !st; k++) {
            int fd = -1, r = -1;
            st = ds_bootstrap_accept(lfd, deadline - now_s(), &fd, &r, err);
            if (!st && (r <= rank || r >= size || t->fd[r] >= 0)) {
                close(fd);
                st = ds_seterr(err, DS_ERR_IO, "tcp group: rank %d got a connection from rank %d", rank, r);
            }
            if (!st) t->fd[r] = fd;
        }
        if (lfd >= 0) close(lfd);
    }
    free(ip);
    free(pt);
    if (st) {
        tcp_destroy(&t->base);
        return st;
    }
    for (int p = 0; p < size; p++)
        if (t->fd[p] >= 0) nodelay(t->fd[p]);
    t->base.rank = rank;
    t->base.size = size;
    t->base.all_to_all_v = tcp_all_to_all_v;
    t->base.exchange_counts = tcp_exchange_counts;
    t->base.all_reduce_sum = tcp_all_reduce_sum;
    t->base.all_gather = tcp_all_gather;
    t->base.reduce_scatter_sum = tcp_reduce_scatter_sum;
    t->base.destroy = tcp_destroy;
    *out = &t->base;
    return DS_OK;
}
