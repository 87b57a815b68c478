/* One process per GPU (issue 10): a group of `size` ranks over `nnodes` nodes, size / nnodes on each, rank
 * = node_rank * (size / nnodes) + local rank. ds_dp_launch forks this node's ranks; each child sees only
 * its GPU (CUDA_VISIBLE_DEVICES: the local rank, or the local-rank-th entry of the parent's list), joins
 * the group's NCCL communicator (the id from rank 0 over TCP at addr:port, dist/bootstrap.h) and runs
 * fn. The same code path on one node (addr 127.0.0.1, port 0: a free one) and on several (every node
 * started with the same size, nnodes, addr and port, and its own node_rank). The parent waits; when a
 * child fails, the others on this node are stopped (a rank cannot leave a collective half way). */
#ifndef DS_DIST_LAUNCH_H
#define DS_DIST_LAUNCH_H

#include "dist/comm.h"

typedef struct {
    int size, nnodes, node_rank;
    const char *addr;   /* rank 0's node; NULL = 127.0.0.1 */
    int port;           /* 0 with nnodes 1: a free port */
    double timeout_s;   /* the rendezvous; 0 = 300 s */
    int no_comm;        /* tests: no rendezvous and no communicator (fn gets comm NULL) */
} ds_dp_spec;

/* Sets CUDA_VISIBLE_DEVICES for local rank l: the l-th entry of the current list, or l (before any CUDA call
 * in the process; also the server's replica processes, server/remote.c). */
void ds_dp_pick_gpu(int l);

/* Checks a spec before anything starts (err names the wrong field). */
ds_status ds_dp_spec_check(const ds_dp_spec *s, char *err);

/* fn's return is the child's exit status (0 ok). Returns 0 when every local child exited 0, else 1 with
 * err saying which rank failed first. */
typedef int (*ds_dp_rank_fn)(int rank, ds_comm *comm, void *arg);
int ds_dp_launch(const ds_dp_spec *s, ds_dp_rank_fn fn, void *arg, char *err);

#endif
