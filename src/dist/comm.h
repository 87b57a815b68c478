/* Collective communication between the ranks of a parallel group (issue 10).
 *
 * Implementations: NCCL over GPUs (comm_nccl.cu; the only one multi-GPU runs use), ranks as threads of
 * one process over host memory (comm_local.c), with which the CPU backend's tests check the parallel
 * algorithms (expert parallelism: dist/ep_moe.c) in CI, and ranks as processes over TCP (comm_tcp.c; the
 * CPU backend's server replicas in processes). Every rank of the group makes the same calls in
 * the same order; a call returns when this rank's part is done. */
#ifndef DS_DIST_COMM_H
#define DS_DIST_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "dsinfer.h"

typedef struct ds_comm ds_comm;
struct ds_comm {
    int rank, size;
    /* Variable all-to-all over backend memory: sends send_bytes[d] bytes at send + send_off[d] to each
     * rank d (itself included) and receives recv_bytes[s] bytes from each rank s at recv + recv_off[s].
     * The counts must agree pairwise (exchange them first); a mismatch is an error on the receiver. */
    ds_status (*all_to_all_v)(ds_comm *c, const void *send, const size_t *send_bytes, const size_t *send_off,
                              void *recv, const size_t *recv_bytes, const size_t *recv_off, char *err);
    /* Host memory: recv[s] = the value rank s gave for this rank in its send[] (both [size]). */
    ds_status (*exchange_counts)(ds_comm *c, const int64_t *send, int64_t *recv, char *err);
    /* buf[0:n] (backend memory) = the sum of every rank's buf, the same bits on every rank. */
    ds_status (*all_reduce_sum)(ds_comm *c, float *buf, size_t n, char *err);
    /* Backend memory, n floats a rank: recv[r * n + i] = rank r's send[i] (recv holds size * n). */
    ds_status (*all_gather)(ds_comm *c, const float *send, float *recv, size_t n, char *err);
    /* Backend memory: recv[i] = the sum over ranks r of r's send[rank * n + i] (send holds size * n), added
     * in the same order on every rank for a given element. */
    ds_status (*reduce_scatter_sum)(ds_comm *c, const float *send, float *recv, size_t n, char *err);
    void (*destroy)(ds_comm *c);
};

/* ---- ranks as threads (comm_local.c) ---- */
typedef struct ds_comm_local_group ds_comm_local_group;
/* A group of `size` ranks; each thread then takes its rank's communicator. */
ds_comm_local_group *ds_comm_local_group_new(int size);
void ds_comm_local_group_free(ds_comm_local_group *g);
ds_comm *ds_comm_local_new(ds_comm_local_group *g, int rank);

/* ---- ranks as processes over TCP (comm_tcp.c; host memory) ---- */
/* Joins a group of `size` ranks: rank 0 listens at addr:port (or on listen_fd when >= 0, which it leaves
 * open), the others connect there (retrying until timeout_s), then every pair gets a socket of its own. */
ds_status ds_comm_tcp_new(int rank, int size, const char *addr, int port, int listen_fd, double timeout_s, ds_comm **out,
                          char *err);

#endif
