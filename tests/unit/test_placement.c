/* Expert placement, routing and dispatch plans (issue 10), and tensor-parallel shards: every expert
 * served, slots within bounds, replicas on distinct ranks, every (token, k) pair dispatched exactly once
 * to a rank hosting its expert, uneven loads flattened by redundant copies, bad inputs refused. */
#include <stdlib.h>
#include <string.h>

#include "dist/placement.h"
#include "testutil.h"

static void check_placement_invariants(const ds_ep_placement *p) {
    for (int e = 0; e < p->n_experts; e++) {
        CHECK(p->n_replicas[e] >= 1);
        for (int i = 0; i < p->n_replicas[e]; i++) {
            int r = p->replica_rank[e * p->n_ranks + i], s = p->replica_slot[e * p->n_ranks + i];
            CHECK(r >= 0 && r < p->n_ranks && s >= 0 && s < p->rank_n_slots[r]);
            CHECK(p->rank_experts[r * p->max_slots + s] == e);
            for (int j = 0; j < i; j++) CHECK(p->replica_rank[e * p->n_ranks + j] != r);
        }
    }
    for (int r = 0; r < p->n_ranks; r++) CHECK(p->rank_n_slots[r] <= p->max_slots);
}

static double max_of(const double *x, int n) {
    double m = x[0];
    for (int i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

static void test_uniform(void) {
    char err[DS_ERRLEN];
    ds_ep_placement p;
    CHECK(ds_ep_place(256, 8, 0, NULL, &p, err) == DS_OK);
    check_placement_invariants(&p);
    for (int r = 0; r < 8; r++) CHECK(p.rank_n_slots[r] == 32);
    CHECK(p.replica_rank[0] == 0 && p.replica_rank[255 * 8] == 7);   /* contiguous blocks */
    ds_ep_placement_free(&p);
    CHECK(ds_ep_place(64, 3, 0, NULL, &p, err) == DS_OK);   /* uneven split: 21/21/22 */
    check_placement_invariants(&p);
    int total = 0;
    for (int r = 0; r < 3; r++) {
        total += p.rank_n_slots[r];
        CHECK(p.rank_n_slots[r] >= 21 && p.rank_n_slots[r] <= 22);
    }
    CHECK(total == 64);
    ds_ep_placement_free(&p);
    CHECK(ds_ep_place(4, 8, 0, NULL, &p, err) == DS_ERR_ARG);
}

/* A skewed load (a few hot experts on one rank): redundant slots bring the max rank load down. */
static void test_hot_experts(void) {
    char err[DS_ERRLEN];
    enum { E = 64, R = 4 };
    double load[E], rl0[R], rl1[R];
    for (int e = 0; e < E; e++) load[e] = e < 4 ? 100.0 : 1.0;   /* experts 0-3 are hot, all on rank 0 */
    ds_ep_placement p0, p1;
    CHECK(ds_ep_place(E, R, 0, load, &p0, err) == DS_OK);
    CHECK(ds_ep_place(E, R, 2, load, &p1, err) == DS_OK);
    check_placement_invariants(&p1);
    ds_ep_rank_load(&p0, load, rl0);
    ds_ep_rank_load(&p1, load, rl1);
    double total = 0;
    for (int e = 0; e < E; e++) total += load[e];
    CHECKF(max_of(rl1, R) < 0.6 * max_of(rl0, R), "max rank load %.1f with replicas, %.1f without", max_of(rl1, R), max_of(rl0, R));
    CHECK(max_of(rl1, R) >= total / R - 1e-9);
    CHECK(p1.n_replicas[0] >= 2);
    printf("hot experts: max rank load %.1f -> %.1f (ideal %.1f)\n", max_of(rl0, R), max_of(rl1, R), total / R);
    ds_ep_placement_free(&p0);
    ds_ep_placement_free(&p1);
}

static void test_dispatch(void) {
    char err[DS_ERRLEN];
    enum { E = 16, R = 4, M = 37, K = 4 };
    double load[E];
    for (int e = 0; e < E; e++) load[e] = 1 + (e % 5 == 0) * 20;
    ds_ep_placement p;
    CHECK(ds_ep_place(E, R, 1, load, &p, err) == DS_OK);
    int32_t ids[M * K];
    srand(7);
    for (int i = 0; i < M * K; i++) ids[i] = rand() % E;
    ds_ep_dispatch d;
    CHECK(ds_ep_plan_dispatch(&p, ids, M, K, &d, err) == DS_OK);
    CHECK(d.send_offset[R] == M * K);
    char *seen = calloc(M * K, 1);
    for (int r = 0; r < R; r++)
        for (int i = d.send_offset[r]; i < d.send_offset[r + 1]; i++) {
            int pr = d.pair[i];
            CHECK(pr >= 0 && pr < M * K && !seen[pr]);
            seen[pr] = 1;
            CHECK(p.rank_experts[r * p.max_slots + d.slot[i]] == ids[pr]);   /* lands on its expert */
        }
    for (int i = 0; i < M * K; i++) CHECK(seen[i]);
    free(seen);
    ds_ep_dispatch_free(&d);
    ids[5] = E;   /* bad id refused */
    CHECK(ds_ep_plan_dispatch(&p, ids, M, K, &d, err) == DS_ERR_ARG);
    ds_ep_placement_free(&p);
}

static void test_tp(void) {
    char err[DS_ERRLEN];
    int b, e;
    CHECK(ds_tp_shard(128, 8, 3, 1, &b, &e, err) == DS_OK && b == 48 && e == 64);
    CHECK(ds_tp_shard(18432, 8, 7, 128, &b, &e, err) == DS_OK && e == 18432);
    CHECK(ds_tp_shard(16, 3, 0, 1, &b, &e, err) == DS_ERR_ARG);
    CHECK(ds_tp_shard(1408, 8, 0, 128, &b, &e, err) == DS_ERR_ARG);   /* 176 per rank: not a multiple of 128 */
}

int main(void) {
    test_uniform();
    test_hot_experts();
    test_dispatch();
    test_tp();
    return test_result("test_placement");
}
