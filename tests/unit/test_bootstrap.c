/* The TCP rendezvous of several processes (dist/bootstrap.c): 4 ranks (threads here) receive rank 0's
 * 128-byte blob intact; a missing rank makes rank 0 fail within its timeout naming the rank; a joiner
 * with nobody listening fails within its timeout; a bad address is a clear error. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist/bootstrap.h"
#include "testutil.h"

typedef struct {
    int port, rank;
    unsigned char blob[128];
    ds_status st;
    char err[DS_ERRLEN];
} joiner;

static void *join_main(void *arg) {
    joiner *j = arg;
    j->st = ds_bootstrap_join("127.0.0.1", j->port, j->rank, j->blob, sizeof j->blob, 10, j->err);
    return NULL;
}

typedef struct {
    int port, rank, fd;
    ds_status st;
    char err[DS_ERRLEN];
} channel;

static void *connect_main(void *arg) {
    channel *c = arg;
    c->st = ds_bootstrap_connect("127.0.0.1", c->port, c->rank, 10, &c->fd, c->err);
    if (!c->st) {   /* echo one message back on the kept socket */
        char b[8];
        if (read(c->fd, b, sizeof b) == (ssize_t)sizeof b && write(c->fd, b, sizeof b) == (ssize_t)sizeof b) {}
        close(c->fd);
    }
    return NULL;
}

/* The kept channel (ds_bootstrap_connect / accept, the server's replicas on other nodes): two connect, the
 * listener learns each one's rank and talks to it on the returned socket; nobody connecting is an error
 * within the timeout. */
static void check_channels(void) {
    char err[DS_ERRLEN];
    int port = 0, fd = -1;
    CHECKF(ds_bootstrap_listen("127.0.0.1", &port, &fd, err) == DS_OK, "%s", err);
    channel c[2] = {{.port = port, .rank = 7}, {.port = port, .rank = 3}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, connect_main, &c[i]);
    int seen = 0;
    for (int i = 0; i < 2; i++) {
        int cfd = -1, rank = -1;
        CHECKF(ds_bootstrap_accept(fd, 10, &cfd, &rank, err) == DS_OK, "%s", err);
        seen |= rank == 7 ? 1 : rank == 3 ? 2 : 4;
        char msg[8] = "abcdefg", back[8] = {0};
        CHECK(write(cfd, msg, sizeof msg) == (ssize_t)sizeof msg);
        CHECK(read(cfd, back, sizeof back) == (ssize_t)sizeof back && !memcmp(msg, back, sizeof msg));
        close(cfd);
    }
    CHECKF(seen == 3, "ranks seen: mask %d (7 and 3 expected)", seen);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        CHECKF(c[i].st == DS_OK, "rank %d: %s", c[i].rank, c[i].err);
    }
    int cfd = -1, rank = -1;
    ds_status st = ds_bootstrap_accept(fd, 0.3, &cfd, &rank, err);
    CHECKF(st == DS_ERR_IO && strstr(err, "nobody connected"), "%d %s", st, err);
    close(fd);
}

int main(void) {
    check_channels();
    unsigned char blob[128];
    for (int i = 0; i < 128; i++) blob[i] = (unsigned char)(i * 37 + 11);
    char err[DS_ERRLEN];
    int port = 0, fd = -1;
    CHECKF(ds_bootstrap_listen("127.0.0.1", &port, &fd, err) == DS_OK, "%s", err);
    CHECK(port > 0);
    joiner j[3];
    pthread_t th[3];
    for (int r = 0; r < 3; r++) {
        memset(&j[r], 0, sizeof j[r]);
        j[r].port = port;
        j[r].rank = r + 1;
        pthread_create(&th[r], NULL, join_main, &j[r]);
    }
    CHECKF(ds_bootstrap_serve_fd(fd, 4, blob, sizeof blob, 10, err) == DS_OK, "%s", err);
    close(fd);
    for (int r = 0; r < 3; r++) {
        pthread_join(th[r], NULL);
        CHECKF(j[r].st == DS_OK, "rank %d: %s", r + 1, j[r].err);
        CHECKF(!memcmp(j[r].blob, blob, sizeof blob), "rank %d: blob differs", r + 1);
    }
    /* rank 2 of 3 never comes */
    port = 0;
    CHECKF(ds_bootstrap_listen("127.0.0.1", &port, &fd, err) == DS_OK, "%s", err);
    joiner one = {.port = port, .rank = 1};
    pthread_create(&th[0], NULL, join_main, &one);
    ds_status st = ds_bootstrap_serve_fd(fd, 3, blob, sizeof blob, 1.0, err);
    close(fd);
    pthread_join(th[0], NULL);
    CHECKF(st == DS_ERR_IO && strstr(err, "rank 2 missing"), "missing rank: %d %s", st, err);
    CHECKF(one.st == DS_OK, "%s", one.err);
    /* nobody listening; a bad address */
    st = ds_bootstrap_join("127.0.0.1", port, 1, blob, sizeof blob, 0.3, err);
    CHECKF(st == DS_ERR_IO && strstr(err, "cannot reach rank 0"), "%d %s", st, err);
    st = ds_bootstrap_join("no.such.host.invalid", 29500, 1, blob, sizeof blob, 0.3, err);
    CHECKF(st == DS_ERR_ARG && strstr(err, "no.such.host.invalid"), "%d %s", st, err);
    printf("bootstrap: 4 ranks got the id; a missing rank: \"%s\"\n", "rank 2 missing");
    return test_result("test_bootstrap");
}
