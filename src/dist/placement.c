#include "dist/placement.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"

static void put(ds_ep_placement *p, int e, int r) {
    int slot = p->rank_n_slots[r]++;
    p->rank_experts[(size_t)r * p->max_slots + slot] = e;
    int i = p->n_replicas[e]++;
    p->replica_rank[(size_t)e * p->n_ranks + i] = r;
    p->replica_slot[(size_t)e * p->n_ranks + i] = slot;
}

static int hosts(const ds_ep_placement *p, int r, int e) {
    for (int i = 0; i < p->n_replicas[e]; i++)
        if (p->replica_rank[(size_t)e * p->n_ranks + i] == r) return 1;
    return 0;
}

void ds_ep_rank_load(const ds_ep_placement *p, const double *load, double *rank_load) {
    for (int r = 0; r < p->n_ranks; r++) rank_load[r] = 0;
    for (int e = 0; e < p->n_experts; e++)
        for (int i = 0; i < p->n_replicas[e]; i++)
            rank_load[p->replica_rank[(size_t)e * p->n_ranks + i]] += (load ? load[e] : 1.0) / p->n_replicas[e];
}

/* One more replica: the expert with the most load per replica, on the least loaded rank that has a
 * free slot and does not host it yet. Returns 0 when no replica can be added. */
static int add_replica(ds_ep_placement *p, const double *load, double *rank_load) {
    int best_e = -1;
    for (int e = 0; e < p->n_experts; e++) {
        if (p->n_replicas[e] >= p->n_ranks) continue;
        if (best_e < 0 || load[e] / p->n_replicas[e] > load[best_e] / p->n_replicas[best_e]) best_e = e;
    }
    if (best_e < 0) return 0;
    int best_r = -1;
    ds_ep_rank_load(p, load, rank_load);
    for (int r = 0; r < p->n_ranks; r++)
        if (p->rank_n_slots[r] < p->max_slots && !hosts(p, r, best_e) && (best_r < 0 || rank_load[r] < rank_load[best_r]))
            best_r = r;
    if (best_r < 0) return 0;
    put(p, best_e, best_r);
    return 1;
}

ds_status ds_ep_place(int E, int R, int redundant, const double *load, ds_ep_placement *p, char *err) {
    memset(p, 0, sizeof(*p));
    if (E <= 0 || R <= 0 || redundant < 0 || R > E)
        return ds_seterr(err, DS_ERR_ARG, "expert placement: %d experts over %d ranks (%d redundant slots) is not possible",
                         E, R, redundant);
    p->n_experts = E;
    p->n_ranks = R;
    p->redundant_slots = redundant;
    p->max_slots = (E + R - 1) / R + redundant;
    p->rank_n_slots = ds_xcalloc((size_t)R, sizeof(int));
    p->rank_experts = ds_xmalloc(sizeof(int) * (size_t)R * p->max_slots);
    for (size_t i = 0; i < (size_t)R * p->max_slots; i++) p->rank_experts[i] = -1;
    p->n_replicas = ds_xcalloc((size_t)E, sizeof(int));
    p->replica_rank = ds_xmalloc(sizeof(int) * (size_t)E * R);
    p->replica_slot = ds_xmalloc(sizeof(int) * (size_t)E * R);
    for (int e = 0; e < E; e++) put(p, e, (int)((long)e * R / E));   /* contiguous, balanced primaries */
    if (load && redundant) {
        double *rl = ds_xmalloc(sizeof(double) * (size_t)R);
        while (add_replica(p, load, rl)) {}
        free(rl);
    }
    return DS_OK;
}

void ds_ep_placement_free(ds_ep_placement *p) {
    free(p->rank_n_slots);
    free(p->rank_experts);
    free(p->n_replicas);
    free(p->replica_rank);
    free(p->replica_slot);
    memset(p, 0, sizeof(*p));
}

void ds_ep_route(const ds_ep_placement *p, int e, int t, int k, int *rank, int *slot) {
    int i = (int)(((unsigned)t * 2654435761u + (unsigned)k) % (unsigned)p->n_replicas[e]);
    *rank = p->replica_rank[(size_t)e * p->n_ranks + i];
    *slot = p->replica_slot[(size_t)e * p->n_ranks + i];
}

ds_status ds_ep_plan_dispatch(const ds_ep_placement *p, const int32_t *ids, int M, int K, ds_ep_dispatch *d, char *err) {
    memset(d, 0, sizeof(*d));
    int R = p->n_ranks, n = M * K;
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= p->n_experts)
            return ds_seterr(err, DS_ERR_ARG, "dispatch: expert id %d out of range [0, %d)", ids[i], p->n_experts);
    d->n_pairs = n;
    d->send_count = ds_xcalloc((size_t)R, sizeof(int));
    d->send_offset = ds_xcalloc((size_t)R + 1, sizeof(int));
    d->pair = ds_xmalloc(sizeof(int32_t) * (size_t)(n + 1));
    d->slot = ds_xmalloc(sizeof(int32_t) * (size_t)(n + 1));
    int *rank_of = ds_xmalloc(sizeof(int) * (size_t)(n + 1)), *slot_of = ds_xmalloc(sizeof(int) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) {
        ds_ep_route(p, ids[i], i / K, i % K, &rank_of[i], &slot_of[i]);
        d->send_count[rank_of[i]]++;
    }
    for (int r = 0; r < R; r++) d->send_offset[r + 1] = d->send_offset[r] + d->send_count[r];
    int *fill = ds_xcalloc((size_t)R, sizeof(int));
    for (int i = 0; i < n; i++) {
        int at = d->send_offset[rank_of[i]] + fill[rank_of[i]]++;
        d->pair[at] = i;
        d->slot[at] = slot_of[i];
    }
    free(fill);
    free(rank_of);
    free(slot_of);
    return DS_OK;
}

void ds_ep_dispatch_free(ds_ep_dispatch *d) {
    free(d->send_count);
    free(d->send_offset);
    free(d->pair);
    free(d->slot);
    memset(d, 0, sizeof(*d));
}

ds_status ds_tp_shard(int n, int R, int rank, int align, int *begin, int *end, char *err) {
    if (R <= 0 || rank < 0 || rank >= R || align <= 0)
        return ds_seterr(err, DS_ERR_ARG, "tensor parallel: rank %d of %d is not valid", rank, R);
    if (n % R || (n / R) % align)
        return ds_seterr(err, DS_ERR_ARG, "tensor parallel: %d does not split into %d equal parts of a multiple of %d",
                         n, R, align);
    *begin = n / R * rank;
    *end = *begin + n / R;
    return DS_OK;
}
