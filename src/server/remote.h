/* Data-parallel replicas in processes of their own (remote.c): the parent's handle on one. */
#ifndef DS_SERVER_REMOTE_H
#define DS_SERVER_REMOTE_H

#include "server/srv_internal.h"

typedef struct srv_remote srv_remote;

/* Forks replica `index` of n (CUDA_VISIBLE_DEVICES set to its GPU on the cuda backend), which opens its
 * engine (cfg with one replica) and reports ready or its error. Spawn every replica before readying any:
 * a fork after the reader threads exist could copy a lock another thread holds. earlier[0 : index]: the
 * replicas spawned before (their sockets are closed in the new process). */
ds_status srv_remote_spawn(const server_config *cfg, int index, int n, srv_metrics *m, srv_dash *d,
                           srv_remote *const *earlier, srv_remote **out, char *err);
/* --enable-expert-parallel (cfg): the replicas are the ranks of one group, over NCCL (cuda) or TCP (cpu,
 * dist/comm_tcp.c). Call before spawning them: a free port on 127.0.0.1 (several nodes: the master port + 1 on
 * node 0), held open, where replica 0 meets the others (the NCCL id, or the TCP mesh); and ep_group_done after
 * the last spawn (the parent's copy of the socket closed). When a rank dies, the parent kills the others: they
 * would wait in a collective forever. */
ds_status srv_remote_ep_group(const server_config *cfg, char *err);
/* Several nodes (cfg->nnodes > 1). The front (node 0): listen at master_addr:master_port before the forks, then,
 * after spawning its own replicas, take the other nodes' (each connects and says its index; rem[index] set,
 * pid 0: not a child of ours). Another node: srv_remote_node_main forks its replicas, each connects to the
 * front and serves it like a local one; returns when they have all exited (0 when each exited 0). */
ds_status srv_remote_nodes_listen(const server_config *cfg, char *err);
ds_status srv_remote_adopt_all(const server_config *cfg, int n, srv_metrics *m, srv_dash *d, srv_remote **rem, char *err);
int srv_remote_node_main(const server_config *cfg, srv_metrics *m, srv_dash *d);
void srv_remote_ep_group_done(void);
/* Waits for the replica's ready report (its error, when its engine did not open) and starts the parent's
 * reader thread, which relays its requests' progress, stats and steps (to m and d), and the thread that
 * passes cancellations on. */
ds_status srv_remote_ready(srv_remote *x, int index, char *err);
/* Requests in flight there (a dead replica: a large number, so none goes to it). */
int srv_remote_load(srv_remote *x);
/* srv_engine_submit's contract: 0 queued (a reference taken), -1 full, -2 stopping or the process gone. */
int srv_remote_submit(srv_remote *x, srv_req *r);
void srv_remote_stats(srv_remote *x, sched_stats *st, int *pool_ok);
/* Its integrity check, run there between steps. */
ds_status srv_remote_check(srv_remote *x, sched_stats *st, char *err);
int srv_remote_max_context(const srv_remote *x);
int srv_remote_vocab(const srv_remote *x);
int srv_remote_max_tokens_in_pool(const srv_remote *x);
/* Every request there ends with "abort"; later submits fail. */
void srv_remote_abort_all(srv_remote *x);
/* Stops the process (its requests abort), joins, frees. */
void srv_remote_stop(srv_remote *x);

/* Set in a replica process: each step is also reported to the parent (worker.c step_done calls it). */
extern void (*srv_step_hook)(double now, double dur, int n_items, int n_tokens, int n_sampled, int n_decode);

#endif
