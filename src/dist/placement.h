/* Expert placement and routing tables for expert parallelism (issue 10), and shard ranges for tensor
 * parallelism: plain C, no GPU or NCCL code, so every rule is unit-tested on the CPU.
 *
 * Placement: each of the R ranks hosts its primary experts (a contiguous, balanced split of the E
 * experts, as DeepSeek's EP does) plus up to `redundant_slots` replicas of hot experts, chosen from a
 * per-expert load estimate so that the most loaded rank carries as little as possible.
 * Routing: a token's choice of expert e goes to one of e's replicas, picked deterministically from the
 * token's index so the load of a replicated expert splits evenly.
 * Dispatch plan: for the tokens of one rank, which (token, k) pairs go to which rank and local slot, in
 * a contiguous order per destination (the all-to-all's send layout), and the inverse for the combine. */
#ifndef DS_DIST_PLACEMENT_H
#define DS_DIST_PLACEMENT_H

#include <stdint.h>

#include "dsinfer.h"

typedef struct {
    int n_experts, n_ranks, redundant_slots;
    int *rank_n_slots;     /* [n_ranks] experts hosted (primary + replicas) */
    int *rank_experts;     /* [n_ranks, max_slots] expert id of each local slot; -1 = empty */
    int max_slots;         /* slots per rank: ceil(E / R) + redundant_slots */
    int *n_replicas;       /* [n_experts] */
    int *replica_rank;     /* [n_experts, n_ranks] rank of each replica (primary first) */
    int *replica_slot;     /* [n_experts, n_ranks] local slot on that rank */
} ds_ep_placement;

/* load: [n_experts] estimated tokens per expert (NULL = uniform). */
ds_status ds_ep_place(int n_experts, int n_ranks, int redundant_slots, const double *load, ds_ep_placement *p,
                      char *err);
void ds_ep_placement_free(ds_ep_placement *p);
/* Expected tokens on each rank ([n_ranks]) for the load, with replicated experts split evenly. */
void ds_ep_rank_load(const ds_ep_placement *p, const double *load, double *rank_load);

/* The replica (rank, local slot) serving pair k of token t choosing expert e. */
void ds_ep_route(const ds_ep_placement *p, int e, int t, int k, int *rank, int *slot);

typedef struct {
    int n_pairs;           /* M * K */
    int *send_count;       /* [n_ranks] pairs sent to each rank */
    int *send_offset;      /* [n_ranks + 1] prefix sums */
    int32_t *pair;         /* [n_pairs] (t * K + k) in send order: grouped by destination rank */
    int32_t *slot;         /* [n_pairs] local expert slot on the destination, same order */
} ds_ep_dispatch;

/* Plan for M tokens whose top-K experts are ids[M, K]. */
ds_status ds_ep_plan_dispatch(const ds_ep_placement *p, const int32_t *ids, int M, int K, ds_ep_dispatch *d, char *err);
void ds_ep_dispatch_free(ds_ep_dispatch *d);

/* Tensor parallelism: rank r's share [*begin, *end) of n items (heads, MLP columns) over R ranks;
 * DS_ERR_ARG unless n splits into equal parts of a multiple of `align`. */
ds_status ds_tp_shard(int n, int n_ranks, int rank, int align, int *begin, int *end, char *err);

#endif
