/* Ranks as threads of one process (dist/comm.h): a collective posts this rank's send description in the
 * group's shared table, waits for every rank (barrier), copies its part from each peer's send buffer,
 * and waits again so no rank reuses its send buffer while a peer still reads it. Host memory only (the
 * CPU backend's); for tests of the parallel algorithms, never a multi-GPU transport. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "dist/comm.h"

typedef struct {
    const void *send;
    const size_t *send_bytes, *send_off;
    const int64_t *counts;
    const float *reduce;   /* all_reduce, all_gather, reduce_scatter: this rank's buffer */
    size_t reduce_n;
} posted;

struct ds_comm_local_group {
    int size;
    pthread_barrier_t bar;
    posted *post;   /* [size] */
};

typedef struct {
    ds_comm base;
    ds_comm_local_group *g;
} local_comm;

ds_comm_local_group *ds_comm_local_group_new(int size) {
    ds_comm_local_group *g = ds_xcalloc(1, sizeof *g);
    g->size = size;
    g->post = ds_xcalloc((size_t)size, sizeof(posted));
    pthread_barrier_init(&g->bar, NULL, (unsigned)size);
    return g;
}

void ds_comm_local_group_free(ds_comm_local_group *g) {
    if (!g) return;
    pthread_barrier_destroy(&g->bar);
    free(g->post);
    free(g);
}

static ds_status local_all_to_all_v(ds_comm *c, const void *send, const size_t *send_bytes, const size_t *send_off,
                                    void *recv, const size_t *recv_bytes, const size_t *recv_off, char *err) {
    ds_comm_local_group *g = ((local_comm *)c)->g;
    posted *me = &g->post[c->rank];
    me->send = send;
    me->send_bytes = send_bytes;
    me->send_off = send_off;
    pthread_barrier_wait(&g->bar);
    ds_status st = DS_OK;
    for (int s = 0; s < g->size; s++) {
        const posted *p = &g->post[s];
        size_t n = p->send_bytes[c->rank];
        if (n != recv_bytes[s]) {
            if (!st) st = ds_seterr(err, DS_ERR_ARG, "all_to_all_v: rank %d sends %zu bytes to rank %d, which expects %zu",
                                    s, n, c->rank, recv_bytes[s]);
            continue;
        }
        if (n) memcpy((char *)recv + recv_off[s], (const char *)p->send + p->send_off[c->rank], n);
    }
    pthread_barrier_wait(&g->bar);
    return st;
}

static ds_status local_exchange_counts(ds_comm *c, const int64_t *send, int64_t *recv, char *err) {
    (void)err;
    ds_comm_local_group *g = ((local_comm *)c)->g;
    g->post[c->rank].counts = send;
    pthread_barrier_wait(&g->bar);
    for (int s = 0; s < g->size; s++) recv[s] = g->post[s].counts[c->rank];
    pthread_barrier_wait(&g->bar);
    return DS_OK;
}

/* Every rank sums the posted buffers in rank order (so all get the same bits), then writes its own. */
static ds_status local_all_reduce_sum(ds_comm *c, float *buf, size_t n, char *err) {
    ds_comm_local_group *g = ((local_comm *)c)->g;
    g->post[c->rank].reduce = buf;
    g->post[c->rank].reduce_n = n;
    pthread_barrier_wait(&g->bar);
    ds_status st = DS_OK;
    float *sum = malloc(sizeof(float) * (n ? n : 1));
    for (int s = 0; s < g->size && !st; s++)
        if (g->post[s].reduce_n != n) st = ds_seterr(err, DS_ERR_ARG, "all_reduce: rank %d gives %zu floats, rank %d %zu", s,
                                                   g->post[s].reduce_n, c->rank, n);
    if (!st) {
        memcpy(sum, g->post[0].reduce, sizeof(float) * n);
        for (int s = 1; s < g->size; s++)
            for (size_t i = 0; i < n; i++) sum[i] += g->post[s].reduce[i];
    }
    pthread_barrier_wait(&g->bar);   /* every rank has read every buffer */
    if (!st) memcpy(buf, sum, sizeof(float) * n);
    free(sum);
    return st;
}

static ds_status local_all_gather(ds_comm *c, const float *send, float *recv, size_t n, char *err) {
    ds_comm_local_group *g = ((local_comm *)c)->g;
    g->post[c->rank].reduce = send;
    g->post[c->rank].reduce_n = n;
    pthread_barrier_wait(&g->bar);
    ds_status st = DS_OK;
    for (int s = 0; s < g->size; s++) {
        if (g->post[s].reduce_n != n) {
            if (!st) st = ds_seterr(err, DS_ERR_ARG, "all_gather: rank %d gives %zu floats, rank %d %zu", s,
                                    g->post[s].reduce_n, c->rank, n);
            continue;
        }
        memcpy(recv + (size_t)s * n, g->post[s].reduce, sizeof(float) * n);
    }
    pthread_barrier_wait(&g->bar);
    return st;
}

/* Each rank sums its part of every rank's buffer in rank order. */
static ds_status local_reduce_scatter_sum(ds_comm *c, const float *send, float *recv, size_t n, char *err) {
    ds_comm_local_group *g = ((local_comm *)c)->g;
    g->post[c->rank].reduce = send;
    g->post[c->rank].reduce_n = n;
    pthread_barrier_wait(&g->bar);
    ds_status st = DS_OK;
    for (int s = 0; s < g->size && !st; s++)
        if (g->post[s].reduce_n != n) st = ds_seterr(err, DS_ERR_ARG, "reduce_scatter: rank %d gives %zu floats, rank %d %zu",
                                                   s, g->post[s].reduce_n, c->rank, n);
    float *sum = malloc(sizeof(float) * (n ? n : 1));
    if (!st) {
        memcpy(sum, g->post[0].reduce + (size_t)c->rank * n, sizeof(float) * n);
        for (int s = 1; s < g->size; s++)
            for (size_t i = 0; i < n; i++) sum[i] += g->post[s].reduce[(size_t)c->rank * n + i];
    }
    pthread_barrier_wait(&g->bar);   /* every rank has read every buffer (recv may alias a send) */
    if (!st) memcpy(recv, sum, sizeof(float) * n);
    free(sum);
    return st;
}

static void local_destroy(ds_comm *c) { free(c); }

ds_comm *ds_comm_local_new(ds_comm_local_group *g, int rank) {
    local_comm *lc = ds_xcalloc(1, sizeof *lc);
    lc->g = g;
    lc->base.rank = rank;
    lc->base.size = g->size;
    lc->base.all_to_all_v = local_all_to_all_v;
    lc->base.exchange_counts = local_exchange_counts;
    lc->base.all_reduce_sum = local_all_reduce_sum;
    lc->base.all_gather = local_all_gather;
    lc->base.reduce_scatter_sum = local_reduce_scatter_sum;
    lc->base.destroy = local_destroy;
    return &lc->base;
}
