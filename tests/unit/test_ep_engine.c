/* Attention data parallelism with expert parallelism (issue 10), whole engines on the CPU: R ranks
 * (threads, dist/comm_local.c), each an engine with its own sequences and KV cache and a share of the
 * routed experts (ds_engine_set_expert_parallel), stepping together: a rank with nothing to do takes an
 * idle step (ds_engine_forward_idle: it still serves its experts). Every rank's logits at every step
 * equal those of a single ordinary engine fed the same tokens in the same chunks (greedy continuation
 * decided by the EP engines). Fixtures: tiny-v3 (sigmoid, noaux_tc) and tiny-v2-group (softmax,
 * group-limited); 2 ranks, and 3 ranks with one always idle and replicated hot experts. The agreement
 * round (ds_ep_agree: OR of flags, smallest mark) is checked on the way. Engines opened with only their
 * rank's experts (opts.expert_parallel_size / _rank) give the same logits, refuse to step before joining,
 * and refuse a placement that would make them serve an expert they did not load. Both exchange forms: the
 * gathered one (all-gather, own expert range, reduce-scatter) and the all-to-all one. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dist/ep_moe.h"
#include "golden.h"
#include "model/engine.h"
#include "testutil.h"

#define STEPS 8
#define MAXT 16

typedef struct {
    int n;               /* tokens this step on this rank (0: idle) */
    int32_t ids[MAXT];
} step_in;

typedef struct {
    const char *dir;
    ds_comm_local_group *g;
    const ds_ep_placement *pl;
    int rank, prompt_len, start_step;   /* the rank prefills prompt_len tokens at start_step, then decodes */
    int trim;                           /* open with only this rank's experts */
    step_in in[STEPS];
    float *logits[STEPS];               /* last-token logits of each step it worked */
    int V, failed;
    int gathered;                       /* the engine took the gathered form (ds_ep_moe_gathered) */
    char err[DS_ERRLEN];
} rank_job;

static void *rank_main(void *arg) {
    rank_job *j = arg;
    ds_engine *e = NULL;
    ds_engine_opts o = {.n_threads = 1, .attn_no_measure = 1, .expert_parallel_size = j->trim ? j->pl->n_ranks : 0,
                        .expert_parallel_rank = j->rank, .kv_cache_dtype = "fp32"};
    ds_comm *cm = ds_comm_local_new(j->g, j->rank);
    ds_ep ep = {cm, j->pl, 0, NULL};   /* buffers per call (the server's engines keep a workspace) */
    /* opening cannot fail differently on one rank than another here; if it fails the test fails and
     * the other ranks would wait: every rank opens the same fixture */
    if (ds_engine_open(j->dir, &o, &e, j->err) || ds_engine_set_expert_parallel(e, &ep, j->err) ||
        !(j->gathered = e->ep_gather, 1)) {
        j->failed = 1;
        return NULL;
    }
    j->V = ds_engine_vocab_size(e);
    /* the agreement round the server uses: OR of the flags, smallest mark */
    int any = -1;
    uint64_t oldest = 0;
    if (ds_ep_agree(e, j->rank == 1 ? 4 : 0, 100 + (uint64_t)j->rank, &any, &oldest, j->err) || any != 4 || oldest != 100) {
        snprintf(j->err, sizeof j->err, "ds_ep_agree: any %d (4 expected), oldest %llu (100 expected)", any,
                 (unsigned long long)oldest);
        j->failed = 1;
    }
    ds_seq *s;
    ds_seq_new(e, &s, j->err);
    int32_t next = 0;
    for (int t = 0; t < STEPS; t++) {
        step_in *in = &j->in[t];
        in->n = 0;
        if (t == j->start_step && j->prompt_len > 0) {
            in->n = j->prompt_len;
            for (int i = 0; i < in->n; i++) in->ids[i] = (int32_t)((7 * j->rank + 13 * i + 5) % j->V);
        } else if (t > j->start_step && j->prompt_len > 0) {
            in->n = 1;
            in->ids[0] = next;
        }
        ds_status st;
        if (in->n) {
            j->logits[t] = malloc(sizeof(float) * (size_t)j->V);
            ds_batch_item it = {.seq = s, .tokens = in->ids, .n_tokens = in->n};
            st = ds_engine_forward(e, &it, 1, j->logits[t], j->err);
            if (!st) next = argmax_f32(j->logits[t], j->V);
        } else {
            st = ds_engine_forward_idle(e, j->err);
        }
        if (st) j->failed = 1;
    }
    ds_seq_free(s);
    ds_engine_free(e);
    cm->destroy(cm);
    return NULL;
}

/* gather: 1 lets the engines take the gathered form (all-gather, own expert range, reduce-scatter), which
 * they do exactly when the placement has no replicas; 0 keeps the all-to-all form (DSINFER_EP_GATHER=0). */
static void run(const char *fx, int R, int red, const int *prompt_len, const int *start, int trim, int gather) {
    setenv("DSINFER_EP_GATHER", gather ? "1" : "0", 1);
    char dir[512], err[DS_ERRLEN];
    snprintf(dir, sizeof dir, "%s/%s", fixtures_dir(), fx);
    ds_engine *ref = NULL;
    ds_engine_opts o = {.n_threads = 1, .attn_no_measure = 1, .kv_cache_dtype = "fp32"};   /* ranks as the reference: sums in fp32 */
    CHECKF(ds_engine_open(dir, &o, &ref, err) == DS_OK, "%s", err);
    if (!ref) return;
    int E = ref->cfg.n_routed_experts, V = ds_engine_vocab_size(ref);
    double *load = malloc(sizeof(double) * E);
    for (int e = 0; e < E; e++) load[e] = e < 2 ? 6.0 : 1.0;
    ds_ep_placement pl;
    CHECKF(ds_ep_place(E, R, red, red ? load : NULL, &pl, err) == DS_OK, "%s", err);
    ds_comm_local_group *g = ds_comm_local_group_new(R);
    rank_job *jobs = calloc((size_t)R, sizeof *jobs);
    pthread_t *th = calloc((size_t)R, sizeof *th);
    for (int r = 0; r < R; r++) {
        jobs[r].dir = dir;
        jobs[r].g = g;
        jobs[r].pl = &pl;
        jobs[r].rank = r;
        jobs[r].prompt_len = prompt_len[r];
        jobs[r].start_step = start[r];
        jobs[r].trim = trim;
        pthread_create(&th[r], NULL, rank_main, &jobs[r]);
    }
    for (int r = 0; r < R; r++) pthread_join(th[r], NULL);
    /* the reference: one ordinary engine, each rank's sequence fed the same tokens */
    double worst = 0;
    int steps_checked = 0;
    float *row = malloc(sizeof(float) * (size_t)V);
    for (int r = 0; r < R; r++) {
        CHECKF(!jobs[r].failed, "%s rank %d: %s", fx, r, jobs[r].err);
        if (jobs[r].failed) continue;
        CHECKF(jobs[r].gathered == (gather && !red), "%s R=%d rank %d: gathered form %d, expected %d", fx, R, r,
               jobs[r].gathered, gather && !red);
        ds_seq *s;
        ds_seq_new(ref, &s, err);
        for (int t = 0; t < STEPS; t++) {
            if (!jobs[r].in[t].n) continue;
            ds_batch_item it = {.seq = s, .tokens = jobs[r].in[t].ids, .n_tokens = jobs[r].in[t].n};
            CHECK(ds_engine_forward(ref, &it, 1, row, err) == DS_OK);
            diff_stats d = diff_f32(jobs[r].logits[t], row, (size_t)V);
            worst = d.rel_l2 > worst ? d.rel_l2 : worst;
            CHECKF(d.rel_l2 <= 1e-6 && d.max_abs <= 1e-5, "%s R=%d rank %d step %d: rel L2 %g max abs %g", fx, R, r, t,
                   d.rel_l2, d.max_abs);
            steps_checked++;
        }
        ds_seq_free(s);
        for (int t = 0; t < STEPS; t++) free(jobs[r].logits[t]);
    }
    printf("  %-14s R=%d (%d redundant slots)%s, %s: %d rank-steps against one engine, worst rel L2 %.2e\n", fx, R, red,
           trim ? ", own experts only" : "", gather && !red ? "gathered" : "all-to-all", steps_checked, worst);
    CHECK(steps_checked > 0);
    free(row);
    free(jobs);
    free(th);
    free(load);
    ds_comm_local_group_free(g);
    ds_ep_placement_free(&pl);
    ds_engine_free(ref);
}

/* An engine opened as rank 1 of 2 with its experts only: no step before joining; a placement with
 * replicas (which may ask it to serve an expert it did not load) or another rank number is refused. */
static void check_trim_errors(void) {
    char dir[512], err[DS_ERRLEN];
    snprintf(dir, sizeof dir, "%s/tiny-v3", fixtures_dir());
    ds_engine *e = NULL;
    ds_engine_opts o = {.n_threads = 1, .attn_no_measure = 1, .expert_parallel_size = 2, .expert_parallel_rank = 1};
    CHECKF(ds_engine_open(dir, &o, &e, err) == DS_OK, "%s", err);
    if (!e) return;
    ds_seq *s;
    ds_seq_new(e, &s, err);
    int32_t tok[2] = {1, 2};
    float *row = malloc(sizeof(float) * (size_t)ds_engine_vocab_size(e));
    ds_batch_item it = {.seq = s, .tokens = tok, .n_tokens = 2};
    ds_status st = ds_engine_forward(e, &it, 1, row, err);
    CHECKF(st == DS_ERR_ARG && strstr(err, "after joining"), "step before joining: %d %s", st, err);
    CHECK(ds_seq_len(s) == 0);
    ds_comm_local_group *g = ds_comm_local_group_new(2);
    ds_comm *c0 = ds_comm_local_new(g, 0), *c1 = ds_comm_local_new(g, 1);
    ds_ep_placement pl_red, pl;
    double load[16];
    for (int x = 0; x < 16; x++) load[x] = x < 2 ? 9 : 1;
    CHECK(ds_ep_place(16, 2, 2, load, &pl_red, err) == DS_OK);
    CHECK(ds_ep_place(16, 2, 0, NULL, &pl, err) == DS_OK);
    ds_ep ep_red = {c1, &pl_red, 0, NULL}, ep_wrong = {c0, &pl, 0, NULL};
    st = ds_engine_set_expert_parallel(e, &ep_red, err);
    printf("  own experts only, placement with replicas: %s\n", err);
    CHECKF(st == DS_ERR_ARG && strstr(err, "did not load"), "%d %s", st, err);
    st = ds_engine_set_expert_parallel(e, &ep_wrong, err);
    CHECKF(st == DS_ERR_ARG && strstr(err, "opened as rank 1 of 2"), "%d %s", st, err);
    free(row);
    ds_seq_free(s);
    ds_engine_free(e);
    c0->destroy(c0);
    c1->destroy(c1);
    ds_comm_local_group_free(g);
    ds_ep_placement_free(&pl_red);
    ds_ep_placement_free(&pl);
}

int main(void) {
    const int p2[] = {12, 7}, s2[] = {0, 2};
    const int p3[] = {9, 0, 5}, s3[] = {1, 0, 0};   /* rank 1 never has tokens */
    const char *fx[] = {"tiny-v3", "tiny-v2-group"};
    for (int i = 0; i < 2; i++) {
        for (int gather = 0; gather < 2; gather++) {
            run(fx[i], 2, 0, p2, s2, 0, gather);
            run(fx[i], 3, 0, p3, s3, 1, gather);   /* rank 1 idle every step: zero rows only */
        }
        run(fx[i], 3, 1, p3, s3, 0, 1);   /* replicas: the all-to-all form either way */
        run(fx[i], 2, 0, p2, s2, 1, 1);
    }
    unsetenv("DSINFER_EP_GATHER");
    check_trim_errors();
    return test_result("test_ep_engine");
}
