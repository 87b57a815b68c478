/* Quantization: `dsinfer quantize --to fp8` of the demo model reproduces tools/make_fp8.py's FP8 copy
 * (models/demo-fp8) tensor for tensor, byte for byte; `--to fp4` writes an NVFP4 checkpoint (ModelOpt
 * layout) that loads, whose weights dequantize close to the originals, and whose logits stay close to
 * the BF16 model's; the element conversions round as the references do. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "dsinfer.h"
#include "model/quantize.h"
#include "model/weights.h"
#include "testutil.h"

static void test_elements(void) {
    ds_dtype_init();
    const float in[] = {0.25f, 0.26f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 5.1f, 100.0f, -0.6f, -3.0f};
    const float want[] = {0, 0.5f, 1, 1, 2, 2, 4, 4, 6, 6, -0.5f, -3};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        CHECKF(ds_e2m1_values[ds_f32_to_e2m1(in[i])] == want[i], "e2m1(%g) = %g", in[i], ds_e2m1_values[ds_f32_to_e2m1(in[i])]);
    CHECK(ds_f32_to_fp8_e4m3(1.0625f) == 0x38);   /* tie between 1 and 1.125 goes to even (1) */
    CHECK(ds_f32_to_fp8_e4m3(1.1875f) == 0x3a);   /* tie between 1.125 and 1.25 goes to even (1.25) */
    CHECK(ds_f32_to_fp8_e4m3(1000.0f) == 0x7e && ds_f32_to_fp8_e4m3(-1000.0f) == 0xfe);
    CHECK(ds_quant_is_linear("model.layers.3.mlp.experts.7.down_proj.weight"));
    CHECK(ds_quant_is_linear("model.layers.0.self_attn.kv_a_proj_with_mqa.weight"));
    CHECK(!ds_quant_is_linear("model.layers.3.mlp.gate.weight"));
    CHECK(!ds_quant_is_linear("model.layers.0.input_layernorm.weight"));
    CHECK(!ds_quant_is_linear("lm_head.weight") && !ds_quant_is_linear("model.embed_tokens.weight"));
}

static void test_fp8_matches_reference(const char *tmp) {
    char out[600], err[DS_ERRLEN];
    snprintf(out, sizeof out, "%s/demo-fp8", tmp);
    CHECKF(ds_quantize_checkpoint("models/demo", out, DS_QUANT_FP8, 0, err) == DS_OK, "%s", err);
    ds_st_set *a, *b;
    CHECK(ds_st_open_dir(out, &a, err) == DS_OK);
    CHECK(ds_st_open_dir("models/demo-fp8", &b, err) == DS_OK);
    CHECK(ds_st_count(a) == ds_st_count(b));
    int differ = 0;
    for (int i = 0; i < ds_st_count(b); i++) {
        const ds_st_tensor *r = ds_st_at(b, i), *t = ds_st_find(a, r->name);
        if (!t || t->dtype != r->dtype || t->nbytes != r->nbytes || memcmp(t->data, r->data, r->nbytes)) {
            if (differ++ < 5) fprintf(stderr, "tensor %s differs from tools/make_fp8.py's\n", r->name);
        }
    }
    CHECK(differ == 0);
    ds_st_close(a);
    ds_st_close(b);
}

/* NLL of BOS + ids predicting ids, and the logits of the last position. */
static double nll_q(const char *dir, const char *quant, const int32_t *ids, int n, float *last) {
    char err[DS_ERRLEN];
    ds_engine *e = NULL;
    /* the attention form by counted multiply-adds: measured at open, two engines could choose differently on a
     * loaded machine and the bitwise comparison below would then compare the forms, not the weights */
    ds_engine_opts o = {.n_threads = 2, .quantization = quant, .attn_no_measure = 1};
    if (ds_engine_open(dir, &o, &e, err) != DS_OK) { CHECKF(0, "%s: %s", dir, err); return NAN; }
    int V = ds_engine_vocab_size(e);
    float *lg = malloc(sizeof(float) * (size_t)n * V);
    ds_seq *s;
    ds_seq_new(e, &s, err);
    ds_batch_item it = {.seq = s, .tokens = ids, .n_tokens = n, .all_logits = 1};
    CHECK(ds_engine_forward(e, &it, 1, lg, err) == DS_OK);
    double sum = 0;
    for (int t = 0; t + 1 < n; t++) {
        const float *r = lg + (size_t)t * V;
        double mx = r[0], z = 0;
        for (int v = 1; v < V; v++) mx = r[v] > mx ? r[v] : mx;
        for (int v = 0; v < V; v++) z += exp(r[v] - mx);
        sum += log(z) + mx - r[ids[t + 1]];
    }
    memcpy(last, lg + (size_t)(n - 1) * V, sizeof(float) * V);
    free(lg);
    ds_seq_free(s);
    ds_engine_free(e);
    return sum / (n - 1);
}

static double nll(const char *dir, const int32_t *ids, int n, float *last) { return nll_q(dir, NULL, ids, n, last); }

/* --quantization at load gives the same model as the quantized file: same NLL, same logits. */
static void test_at_load(void) {
    int32_t ids[64];
    for (int i = 0; i < 64; i++) ids[i] = i ? (int32_t)((i * 104729) % 3500 + 200) : 0;
    float *a = malloc(sizeof(float) * 4096), *b = malloc(sizeof(float) * 4096);
    double x = nll_q("models/demo", "fp8", ids, 64, a), y = nll("models/demo-fp8", ids, 64, b);
    CHECKF(x == y && memcmp(a, b, sizeof(float) * 4096) == 0, "fp8 at load %.6f, from the file %.6f", x, y);
    free(a);
    free(b);
}

static void test_fp4(const char *tmp) {
    char out[600], err[DS_ERRLEN];
    snprintf(out, sizeof out, "%s/demo-fp4", tmp);
    CHECKF(ds_quantize_checkpoint("models/demo", out, DS_QUANT_FP4, 0, err) == DS_OK, "%s", err);
    /* dequantized weights close to the originals */
    ds_st_set *q, *o;
    CHECK(ds_st_open_dir(out, &q, err) == DS_OK && ds_st_open_dir("models/demo", &o, err) == DS_OK);
    const char *name = "model.layers.2.mlp.experts.5.up_proj.weight";
    const ds_st_tensor *src = ds_st_find(o, name), *pk = ds_st_find(q, name);
    char sn[200];
    snprintf(sn, sizeof sn, "%s_scale", name);
    const ds_st_tensor *bs = ds_st_find(q, sn);
    snprintf(sn, sizeof sn, "%s_scale_2", name);
    const ds_st_tensor *gs = ds_st_find(q, sn);
    CHECK(src && pk && bs && gs && pk->dtype == DS_DTYPE_U8 && bs->dtype == DS_DTYPE_F8_E4M3 && gs->numel == 1);
    if (src && pk && bs && gs) {
        ds_weight wo = {.data = src->data, .dtype = src->dtype, .rows = (int)src->shape[0], .cols = (int)src->shape[1]};
        ds_weight wq = {.data = pk->data, .dtype = DS_DTYPE_NVFP4, .rows = wo.rows, .cols = wo.cols, .block_scale = bs->data};
        memcpy(&wq.global_scale, gs->data, 4);
        float *a = malloc(sizeof(float) * wo.cols), *b = malloc(sizeof(float) * wo.cols);
        double num = 0, den = 0;
        for (int r = 0; r < wo.rows; r++) {
            ds_weight_row_f32(&wo, r, a);
            ds_weight_row_f32(&wq, r, b);
            for (int c = 0; c < wo.cols; c++) num += (a[c] - b[c]) * (a[c] - b[c]), den += a[c] * a[c];
        }
        CHECKF(sqrt(num / den) < 0.12, "NVFP4 relative weight error %.4f", sqrt(num / den));
        printf("NVFP4 relative weight error of %s: %.4f\n", name, sqrt(num / den));
        free(a);
        free(b);
    }
    ds_st_close(q);
    ds_st_close(o);
    /* the model still predicts nearly as well: NLL of a text within 3% of BF16's */
    int32_t ids[128];
    for (int i = 0; i < 128; i++) ids[i] = i ? (int32_t)((i * 7919) % 3000 + 300) : 0;
    float *l16 = malloc(sizeof(float) * 4096), *l4 = malloc(sizeof(float) * 4096);
    double n16 = nll("models/demo", ids, 128, l16), n4 = nll(out, ids, 128, l4);
    CHECKF(fabs(n4 - n16) < 0.03 * n16, "NLL bf16 %.4f fp4 %.4f", n16, n4);
    printf("NLL on a synthetic text: bf16 %.4f, nvfp4 %.4f\n", n16, n4);
    free(l16);
    free(l4);
}

/* Our NVFP4 quantizer and the PyTorch one that made tests/fixtures/tiny-v3-nvfp4
 * (tools/make_nvfp4_fixture.py, from spec 13.4) produce the same bytes from the same BF16 weights. */
static void test_fp4_matches_reference(const char *tmp) {
    char out[600], err[DS_ERRLEN];
    snprintf(out, sizeof out, "%s/tiny-v3-fp4", tmp);
    CHECKF(ds_quantize_checkpoint("tests/fixtures/tiny-v3", out, DS_QUANT_FP4, 0, err) == DS_OK, "%s", err);
    ds_st_set *a, *b;
    CHECK(ds_st_open_dir(out, &a, err) == DS_OK);
    CHECK(ds_st_open_dir("tests/fixtures/tiny-v3-nvfp4", &b, err) == DS_OK);
    int differ = 0, n = 0;
    for (int i = 0; i < ds_st_count(b); i++) {
        const ds_st_tensor *r = ds_st_at(b, i), *t = ds_st_find(a, r->name);
        n++;
        if (!t || t->dtype != r->dtype || t->nbytes != r->nbytes || memcmp(t->data, r->data, r->nbytes)) {
            if (differ++ < 5) fprintf(stderr, "tensor %s differs from the PyTorch quantizer's\n", r->name);
        }
    }
    CHECKF(differ == 0 && ds_st_count(a) == ds_st_count(b), "%d of %d tensors differ", differ, n);
    ds_st_close(a);
    ds_st_close(b);
}

int main(void) {
    char tmp[] = "/tmp/dsinfer-quant-XXXXXX";
    if (!mkdtemp(tmp)) return 1;
    test_elements();
    test_fp8_matches_reference(tmp);
    test_fp4(tmp);
    test_fp4_matches_reference(tmp);
    test_at_load();
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd)) fprintf(stderr, "cannot remove %s\n", tmp);
    return test_result("test_quantize");
}
