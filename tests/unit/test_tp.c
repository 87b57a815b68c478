/* Tensor parallelism (issue 10) on the CPU: R engines (threads, dist/comm_local.c) each keep 1/R of the
 * heads and MLP / expert widths (dist/tp.c) and run the same tokens; every step's logits equal one
 * ordinary engine's within the fp32-reordering tolerance of the golden tests (max abs 1e-3, rel L2 1e-4),
 * the greedy picks identical. tiny-v3 (q-LoRA, sigmoid MoE) and tiny-v2 (no q-LoRA, 2 shared experts),
 * R = 2 and 4. The FP8 fixture, whose head slices do not fall on 128-row blocks, is refused with a
 * message saying so. The same through one handle (opts.tensor_parallel_size: followers behind the
 * engine): two sequences in one batch, chunked prefill, decode, a truncation and its re-feed, against
 * a plain engine; prefix sharing and fork refused. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dist/tp.h"
#include "golden.h"
#include "model/engine.h"
#include "testutil.h"

#define STEPS 6

typedef struct {
    const char *dir;
    ds_comm_local_group *g;
    int rank, V, failed;
    int one_rank;        /* opened as one rank (its share cut at open), then joined */
    int pp;              /* with one_rank: a pipeline stage instead of a TP rank (fixed tokens: the logits are
                            stage 0's only) */
    float *logits[STEPS];
    int32_t toks[STEPS][16];
    int n[STEPS];
    char err[DS_ERRLEN];
} tp_job;

/* An engine opened as one rank holds a share: it must not step before joining its group. */
static int refuses_before_join(ds_engine *e, char *err) {
    ds_seq *s;
    if (ds_seq_new(e, &s, err)) return 0;
    int32_t t = 1;
    ds_batch_item it = {.seq = s, .tokens = &t, .n_tokens = 1};
    float *row = malloc(sizeof(float) * (size_t)ds_engine_vocab_size(e));
    ds_status st = ds_engine_forward(e, &it, 1, row, err);
    free(row);
    ds_seq_free(s);
    if (st == DS_ERR_ARG && strstr(err, "only after joining")) return 1;
    snprintf(err, DS_ERRLEN, "a one-rank engine stepped before joining (status %d)", (int)st);
    return 0;
}

static void *rank_main(void *arg) {
    tp_job *j = arg;
    ds_comm *cm = ds_comm_local_new(j->g, j->rank);
    ds_engine *e = NULL;
    ds_engine_opts o = {.n_threads = 1, .attn_no_measure = 1};
    if (j->one_rank && !j->pp) {
        o.tensor_parallel_size = cm->size;
        o.tensor_parallel_one_rank = 1;
        o.tensor_parallel_rank = j->rank;
    }
    if (j->pp) {
        o.pipeline_parallel_size = cm->size;
        o.pipeline_parallel_one_rank = 1;
        o.pipeline_parallel_rank = j->rank;
    }
    if (ds_engine_open(j->dir, &o, &e, j->err)) {
        j->failed = 1;
    } else if (j->one_rank && !refuses_before_join(e, j->err)) {
        j->failed = 1;
    } else if (j->pp ? ds_engine_set_pipeline_stage(e, cm, j->err) : ds_engine_set_tensor_parallel(e, cm, 0, j->err)) {
        j->failed = 1;
    } else {
        j->V = ds_engine_vocab_size(e);
        ds_seq *s;
        ds_seq_new(e, &s, j->err);
        int32_t next = 0;
        for (int t = 0; t < STEPS && !j->failed; t++) {
            j->n[t] = t == 0 ? 12 : 1;
            for (int i = 0; i < j->n[t]; i++) j->toks[t][i] = t == 0 ? (int32_t)((11 * i + 3) % j->V) : next;
            j->logits[t] = malloc(sizeof(float) * (size_t)j->V);
            ds_batch_item it = {.seq = s, .tokens = j->toks[t], .n_tokens = j->n[t]};
            if (ds_engine_forward(e, &it, 1, j->logits[t], j->err)) j->failed = 1;
            next = j->pp ? (int32_t)((7 * t + 1) % j->V) : argmax_f32(j->logits[t], j->V);
        }
        ds_seq_free(s);
    }
    ds_engine_free(e);
    cm->destroy(cm);
    return NULL;
}

static void run_job(const char *fx, int R, int one_rank, int pp) {
    char dir[512], err[DS_ERRLEN];
    snprintf(dir, sizeof dir, "%s/%s", fixtures_dir(), fx);
    ds_comm_local_group *g = ds_comm_local_group_new(R);
    tp_job *jobs = calloc((size_t)R, sizeof *jobs);
    pthread_t *th = calloc((size_t)R, sizeof *th);
    for (int r = 0; r < R; r++) {
        jobs[r].dir = dir;
        jobs[r].g = g;
        jobs[r].rank = r;
        jobs[r].one_rank = one_rank;
        jobs[r].pp = pp;
        pthread_create(&th[r], NULL, rank_main, &jobs[r]);
    }
    for (int r = 0; r < R; r++) pthread_join(th[r], NULL);
    ds_engine *ref = NULL;
    ds_engine_opts o = {.n_threads = 1, .attn_no_measure = 1};
    CHECKF(ds_engine_open(dir, &o, &ref, err) == DS_OK, "%s", err);
    double worst = 0;
    if (ref) {
        int V = ds_engine_vocab_size(ref);
        float *row = malloc(sizeof(float) * (size_t)V);
        ds_seq *s;
        ds_seq_new(ref, &s, err);
        for (int t = 0; t < STEPS; t++) {
            ds_batch_item it = {.seq = s, .tokens = jobs[0].toks[t], .n_tokens = jobs[0].n[t]};
            CHECK(ds_engine_forward(ref, &it, 1, row, err) == DS_OK);
            for (int r = 0; r < R; r++) {
                CHECKF(!jobs[r].failed, "%s %s%d rank %d: %s", fx, pp ? "PP" : "TP", R, r, jobs[r].err);
                if (jobs[r].failed || !jobs[r].logits[t] || (pp && r > 0)) continue;   /* PP: stage 0 has the logits */
                diff_stats d = diff_f32(jobs[r].logits[t], row, (size_t)V);
                worst = d.rel_l2 > worst ? d.rel_l2 : worst;
                CHECKF(d.max_abs <= 1e-3 && d.rel_l2 <= 1e-4, "%s TP%d rank %d step %d: max abs %g rel L2 %g", fx, R, r, t,
                       d.max_abs, d.rel_l2);
                CHECKF(argmax_f32(jobs[r].logits[t], V) == argmax_f32(row, V), "%s TP%d rank %d step %d: greedy pick", fx,
                       R, r, t);
            }
        }
        ds_seq_free(s);
        free(row);
        ds_engine_free(ref);
    }
    printf("  %-8s %s%d%s: %d steps against one engine, worst rel L2 %.2e\n", fx, pp ? "PP" : "TP", R,
           pp ? " (each stage opened alone, its layers cut at open; stage 0's logits)"
              : one_rank ? " (each rank opened alone, its share cut at open)" : "", STEPS, worst);
    for (int r = 0; r < R; r++)
        for (int t = 0; t < STEPS; t++) free(jobs[r].logits[t]);
    free(jobs);
    free(th);
    ds_comm_local_group_free(g);
}

static void run_as(const char *fx, int R, int one_rank) { run_job(fx, R, one_rank, 0); }
static void run(const char *fx, int R) { run_as(fx, R, 0); }

/* A rank opened alone joining as another rank, or a group of another size: refused. */
static void check_one_rank_mismatch(void) {
    char dir[512], err[DS_ERRLEN];
    snprintf(dir, sizeof dir, "%s/tiny-v3", fixtures_dir());
    ds_engine *e = NULL;
    ds_engine_opts o = {.n_threads = 1, .attn_no_measure = 1, .tensor_parallel_size = 2, .tensor_parallel_one_rank = 1,
                        .tensor_parallel_rank = 1};
    CHECKF(ds_engine_open(dir, &o, &e, err) == DS_OK, "%s", err);
    ds_comm_local_group *g = ds_comm_local_group_new(2);
    ds_comm *cm = ds_comm_local_new(g, 0);
    if (e) CHECK(ds_engine_set_tensor_parallel(e, cm, 0, err) == DS_ERR_ARG && strstr(err, "opened as rank 1 of 2"));
    printf("  one rank joining as another: %s\n", err);
    cm->destroy(cm);
    ds_comm_local_group_free(g);
    ds_engine_free(e);
    ds_engine_opts bad = {.n_threads = 1, .tensor_parallel_size = 2, .tensor_parallel_one_rank = 1, .tensor_parallel_rank = 2};
    e = NULL;
    CHECK(ds_engine_open(dir, &bad, &e, err) == DS_ERR_ARG && strstr(err, "rank 2 of 2") && !e);
}

/* FP8 fixture: 4 heads of 48 query rows, so a TP2 slice starts at row 96: refused, naming the tensor. */
static void check_refusal(void) {
    char dir[512], err[DS_ERRLEN];
    snprintf(dir, sizeof dir, "%s/tiny-v3-fp8", fixtures_dir());
    ds_comm_local_group *g = ds_comm_local_group_new(2);
    ds_comm *cm = ds_comm_local_new(g, 1);
    ds_engine *e = NULL;
    ds_engine_opts o = {.n_threads = 1, .attn_no_measure = 1};
    CHECKF(ds_engine_open(dir, &o, &e, err) == DS_OK, "%s", err);
    if (e) {
        ds_status st = ds_engine_set_tensor_parallel(e, cm, 0, err);
        printf("  tiny-v3-fp8 TP2: %s\n", err);
        CHECKF(st == DS_ERR_UNSUPPORTED && strstr(err, "128-row block") && strstr(err, "q_b"), "%d %s", st, err);
    }
    ds_engine_free(e);
    cm->destroy(cm);
    ds_comm_local_group_free(g);
}

static void feed2(ds_engine *e, ds_seq **s, const int32_t *const *tok, const int *n, float *out, char *err) {
    ds_batch_item it[2] = {{.seq = s[0], .tokens = tok[0], .n_tokens = n[0]}, {.seq = s[1], .tokens = tok[1], .n_tokens = n[1]}};
    CHECKF(ds_engine_forward(e, it, 2, out, err) == DS_OK, "%s", err);
}

/* pp: the handle drives R pipeline stages instead of R tensor-parallel ranks; tep: TP with the routed
 * experts split whole across the ranks (opts.tensor_expert_parallel) instead of by columns. */
static void check_handle_ep(const char *fx, int R, int pp, int tep) {
    char dir[512], err[DS_ERRLEN];
    snprintf(dir, sizeof dir, "%s/%s", fixtures_dir(), fx);
    ds_engine *tp = NULL, *ref = NULL;
    ds_engine_opts ot = {.n_threads = 1, .attn_no_measure = 1, .tensor_parallel_size = pp ? 0 : R,
                         .pipeline_parallel_size = pp ? R : 0, .tensor_expert_parallel = tep};
    ds_engine_opts o = {.n_threads = 1, .attn_no_measure = 1};
    CHECKF(ds_engine_open(dir, &ot, &tp, err) == DS_OK, "%s", err);
    CHECKF(ds_engine_open(dir, &o, &ref, err) == DS_OK, "%s", err);
    if (!tp || !ref) { ds_engine_free(tp); ds_engine_free(ref); return; }
    int V = ds_engine_vocab_size(ref), steps = 0;
    double worst = 0;
    float *a = malloc(sizeof(float) * 2 * (size_t)V), *b = malloc(sizeof(float) * 2 * (size_t)V);
    ds_seq *st[2], *sr[2];
    for (int i = 0; i < 2; i++) { ds_seq_new(tp, &st[i], err); ds_seq_new(ref, &sr[i], err); }
    int32_t p0[9], p1[6];
    for (int i = 0; i < 9; i++) p0[i] = (int32_t)((5 * i + 1) % V);
    for (int i = 0; i < 6; i++) p1[i] = (int32_t)((3 * i + 7) % V);
    /* chunked prefill of both, then decode; a truncation of the first after step 3 */
    const int32_t *t1[2] = {p0, p1}, *t2[2] = {p0 + 4, p1 + 3};
    int n1[2] = {4, 3}, n2[2] = {5, 3};
    for (int k = 0; k < 2; k++) {
        feed2(tp, st, k ? t2 : t1, k ? n2 : n1, a, err);
        feed2(ref, sr, k ? t2 : t1, k ? n2 : n1, b, err);
    }
    for (int step = 0; step < 6; step++) {
        diff_stats d = diff_f32(a, b, 2 * (size_t)V);
        worst = d.rel_l2 > worst ? d.rel_l2 : worst;
        CHECKF(d.max_abs <= 1e-3 && d.rel_l2 <= 1e-4, "%s TP%d handle step %d: max abs %g rel L2 %g", fx, R, step,
               d.max_abs, d.rel_l2);
        int32_t nx[2] = {argmax_f32(b, V), argmax_f32(b + V, V)};
        CHECK(argmax_f32(a, V) == nx[0] && argmax_f32(a + V, V) == nx[1]);
        if (step == 3) {   /* roll the first sequence back two tokens and feed them again */
            ds_seq_truncate(st[0], ds_seq_len(st[0]) - 2);
            ds_seq_truncate(sr[0], ds_seq_len(sr[0]) - 2);
        }
        const int32_t *tn[2] = {&nx[0], &nx[1]};
        int nn[2] = {1, 1};
        feed2(tp, st, tn, nn, a, err);
        feed2(ref, sr, tn, nn, b, err);
        steps++;
    }
    CHECK(ds_seq_len(st[0]) == ds_seq_len(sr[0]) && ds_seq_len(st[1]) == ds_seq_len(sr[1]));
    ds_seq *f;
    ds_seq_new(tp, &f, err);
    CHECK(ds_seq_fork(f, st[0], err) == DS_ERR_UNSUPPORTED);
    int page = ds_seq_page(st[1], 0);
    CHECK(ds_seq_adopt_prefix(f, &page, 1, err) == DS_ERR_UNSUPPORTED && strstr(err, "tensor parallel"));
    ds_seq_free(f);
    printf("  %-8s %s%d%s through one handle: %d batched steps, worst rel L2 %.2e\n", fx, pp ? "PP" : "TP", R,
           tep ? " (experts whole, EP inside)" : "", steps, worst);
    if (pp) {
        CHECKF(worst == 0, "%s PP%d: the stages compute exactly one engine's sums (rel L2 %g)", fx, R, worst);
        /* each stage keeps only its layers' KV: in the same bytes, L / ceil(L / R) times the pages */
        printf("  %-8s PP%d KV pages per stage %d, one engine %d\n", fx, R, ds_engine_pages_total(tp),
               ds_engine_pages_total(ref));
        CHECKF(ds_engine_pages_total(tp) > ds_engine_pages_total(ref), "%s PP%d: %d pages per stage, one engine %d", fx,
               R, ds_engine_pages_total(tp), ds_engine_pages_total(ref));
    }
    for (int i = 0; i < 2; i++) { ds_seq_free(st[i]); ds_seq_free(sr[i]); }
    CHECK(ds_engine_pages_free(tp) == ds_engine_pages_total(tp));
    free(a);
    free(b);
    ds_engine_free(tp);
    ds_engine_free(ref);
}

static void check_handle(const char *fx, int R, int pp) { check_handle_ep(fx, R, pp, 0); }

/* A slice of a dummy weight keeps where it sits in the whole tensor (the device generates the whole
 * tensor's values there: test_nccl_tp compares TP2 with one GPU on V2-Lite dummy weights). */
static void check_dummy_slice(void) {
    char err[DS_ERRLEN];
    ds_weight w = {.data = DS_WEIGHT_DUMMY, .dtype = DS_DTYPE_BF16, .rows = 256, .cols = 512, .name = "w"}, a, b, c;
    CHECK(ds_weight_slice_rows(&w, 64, 192, &a, err) == DS_OK);
    CHECK(a.rows == 128 && a.dummy_r0 == 64 && a.dummy_c0 == 0 && a.dummy_full_cols == 512);
    CHECK(ds_weight_slice_cols(&a, 128, 384, &b, err) == DS_OK);
    CHECK(b.rows == 128 && b.cols == 256 && b.dummy_r0 == 64 && b.dummy_c0 == 128 && b.dummy_full_cols == 512);
    CHECK(ds_weight_slice_rows(&b, 32, 64, &c, err) == DS_OK);   /* offsets add up through nested slices */
    CHECK(c.rows == 32 && c.dummy_r0 == 96 && c.dummy_c0 == 128 && c.dummy_full_cols == 512);
    CHECK(ds_weight_slice_cols(&b, 0, 300, &c, err) == DS_ERR_ARG);   /* past the slice's own width */
}

int main(void) {
    check_dummy_slice();
    run("tiny-v3", 2);
    run("tiny-v3", 4);
    run("tiny-v2", 2);
    run_as("tiny-v3", 2, 1);   /* one engine per rank (the multi-process form), cut at open */
    run_as("tiny-v2", 4, 1);
    run_job("tiny-v3", 2, 1, 1);   /* pipeline stages opened alone (the multi-process form) */
    run_job("tiny-v2", 3, 1, 1);
    check_one_rank_mismatch();
    check_refusal();
    check_handle("tiny-v3", 2, 0);
    check_handle("tiny-v2", 4, 0);
    check_handle("tiny-v3", 2, 1);
    check_handle("tiny-v3", 3, 1);
    check_handle_ep("tiny-v3", 2, 0, 1);   /* TP attention, EP experts */
    check_handle_ep("tiny-v2", 4, 0, 1);
    {   /* more stages than layers, and TP with PP, are refused */
        char dir[512], err[DS_ERRLEN];
        snprintf(dir, sizeof dir, "%s/tiny-v2", fixtures_dir());
        ds_engine *e = NULL;
        ds_engine_opts o1 = {.n_threads = 1, .pipeline_parallel_size = 64}, o2 = {.n_threads = 1, .pipeline_parallel_size = 2,
                                                                                   .tensor_parallel_size = 2};
        CHECK(ds_engine_open(dir, &o1, &e, err) == DS_ERR_ARG && strstr(err, "layers") && !e);
        CHECK(ds_engine_open(dir, &o2, &e, err) == DS_ERR_UNSUPPORTED && !e);
    }
    return test_result("test_tp");
}
