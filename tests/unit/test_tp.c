/* Tensor parallelism (issue 10) on the CPU: R engines (threads, dist/comm_local.c) each keep 1/R of the
 * heads and MLP / expert widths (dist/tp.c) and run the same tokens; every step's logits equal one
 * ordinary engine's within the fp32-reordering tolerance of the golden tests (max abs 1e-3, rel L2 1e-4),
 * the greedy picks identical. tiny-v3 (q-LoRA, sigmoid MoE) and tiny-v2 (no q-LoRA, 2 shared experts),
 * R = 2 and 4. The FP8 fixture, whose head slices do not fall on 128-row blocks, is refused with a
 * message saying so. */
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
    float *logits[STEPS];
    int32_t toks[STEPS][16];
    int n[STEPS];
    char err[DS_ERRLEN];
} tp_job;

static void *rank_main(void *arg) {
    tp_job *j = arg;
    ds_comm *cm = ds_comm_local_new(j->g, j->rank);
    ds_engine *e = NULL;
    ds_engine_opts o = {.n_threads = 1, .attn_no_measure = 1};
    if (ds_engine_open(j->dir, &o, &e, j->err) || ds_engine_set_tensor_parallel(e, cm, j->err)) {
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
            next = argmax_f32(j->logits[t], j->V);
        }
        ds_seq_free(s);
    }
    ds_engine_free(e);
    cm->destroy(cm);
    return NULL;
}

static void run(const char *fx, int R) {
    char dir[512], err[DS_ERRLEN];
    snprintf(dir, sizeof dir, "%s/%s", fixtures_dir(), fx);
    ds_comm_local_group *g = ds_comm_local_group_new(R);
    tp_job *jobs = calloc((size_t)R, sizeof *jobs);
    pthread_t *th = calloc((size_t)R, sizeof *th);
    for (int r = 0; r < R; r++) {
        jobs[r].dir = dir;
        jobs[r].g = g;
        jobs[r].rank = r;
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
                CHECKF(!jobs[r].failed, "%s TP%d rank %d: %s", fx, R, r, jobs[r].err);
                if (jobs[r].failed || !jobs[r].logits[t]) continue;
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
    printf("  %-8s TP%d: %d steps on every rank against one engine, worst rel L2 %.2e\n", fx, R, STEPS, worst);
    for (int r = 0; r < R; r++)
        for (int t = 0; t < STEPS; t++) free(jobs[r].logits[t]);
    free(jobs);
    free(th);
    ds_comm_local_group_free(g);
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
        ds_status st = ds_engine_set_tensor_parallel(e, cm, err);
        printf("  tiny-v3-fp8 TP2: %s\n", err);
        CHECKF(st == DS_ERR_UNSUPPORTED && strstr(err, "128-row block") && strstr(err, "q_b"), "%d %s", st, err);
    }
    ds_engine_free(e);
    cm->destroy(cm);
    ds_comm_local_group_free(g);
}

int main(void) {
    run("tiny-v3", 2);
    run("tiny-v3", 4);
    run("tiny-v2", 2);
    check_refusal();
    return test_result("test_tp");
}
