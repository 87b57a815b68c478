/* The attention form per step (model/attn_cost.h, issue 8):
 *  - the multiply-add model: one decode token always absorbed; a fresh V3 prompt naive; a short chunk
 *    over a long V3 prefix absorbed (the spec 6.3 trade-off);
 *  - the measured model at engine open on the CPU backend: rates finite and non-negative, every KV page
 *    back in the pool, the engine's choice is the model's argmin over a grid of (new tokens, context);
 *  - opts.attn_no_measure keeps the multiply-add model;
 *  - the logits of a prompt are the same under the measured choice and with every step forced absorbed
 *    (both forms compute the same attention; test_golden checks each against the reference). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dsinfer.h"
#include "golden.h"
#include "model/engine.h"
#include "testutil.h"

static void check_mac_model(void) {
    ds_config c;
    char err[DS_ERRLEN];
    CHECKF(ds_config_load("configs/deepseek-v3.json", &c, err) == DS_OK, "%s", err);
    ds_attn_cost m = ds_attn_cost_model_only();
    CHECK(ds_attn_prefers_absorbed(&m, &c, 1, 100000) == 1);
    CHECK(ds_attn_prefers_absorbed(&m, &c, 1, 1) == 1);
    CHECK(ds_attn_prefers_absorbed(&m, &c, 4096, 4096) == 0);   /* fresh prompt: decompress once */
    CHECK(ds_attn_prefers_absorbed(&m, &c, 16, 8192) == 1);     /* short chunk over a long prefix */
    /* the model's counts: naive decompresses L tokens once, absorbed pays per new token */
    double n1 = ds_attn_macs_naive(&c, 1, 1000), n2 = ds_attn_macs_naive(&c, 2, 1000);
    double a1 = ds_attn_macs_absorbed(&c, 1, 1000), a2 = ds_attn_macs_absorbed(&c, 2, 1000);
    CHECK(n2 - n1 < a2 - a1);
    CHECK(ds_attn_macs_naive(&c, 1, 2000) - n1 > 0.5 * n1);
}

static void check_engine(const char *dir) {
    char err[DS_ERRLEN];
    ds_engine *e = NULL, *em = NULL, *ea = NULL;
    ds_engine_opts o = {.n_threads = 2, .kv_cache_dtype = "fp32"}, om = {.n_threads = 2, .kv_cache_dtype = "fp32", .attn_no_measure = 1};
    ds_engine_opts oa = {.n_threads = 2, .kv_cache_dtype = "fp32", .force_absorbed = 1};
    CHECKF(ds_engine_open(dir, &o, &e, err) == DS_OK, "%s", err);
    CHECKF(ds_engine_open(dir, &om, &em, err) == DS_OK, "%s", err);
    CHECKF(ds_engine_open(dir, &oa, &ea, err) == DS_OK, "%s", err);
    if (!e || !em || !ea) goto done;
    const ds_attn_cost *m = &e->attn_cost;
    printf("%s: measured naive %.3g s + %.3g s/MAC, absorbed %.3g s + %.3g s/MAC\n", dir, m->naive_fixed,
           m->naive_per_mac, m->abs_fixed, m->abs_per_mac);
    CHECK(ds_engine_attn_measured(e) == 1 && ds_engine_attn_measured(em) == 0);
    double v[4] = {m->naive_fixed, m->naive_per_mac, m->abs_fixed, m->abs_per_mac};
    for (int i = 0; i < 4; i++) CHECKF(isfinite(v[i]) && v[i] >= 0, "coefficient %d = %g", i, v[i]);
    CHECK(m->naive_per_mac > 0 || m->naive_fixed > 0);
    CHECK(m->abs_per_mac > 0 || m->abs_fixed > 0);
    CHECK(ds_engine_pages_free(e) == ds_engine_pages_total(e));
    CHECKF(ds_engine_check_pages(e, err) == DS_OK, "%s", err);
    ds_attn_cost mo = ds_attn_cost_model_only();
    int disagree = 0;
    for (int T = 1; T <= 1024; T *= 4)
        for (int L = T; L <= 8192; L *= 2) {
            CHECK(ds_engine_prefers_absorbed(e, T, L) == ds_attn_prefers_absorbed(m, &e->cfg, T, L));
            CHECK(ds_engine_prefers_absorbed(em, T, L) == ds_attn_prefers_absorbed(&mo, &e->cfg, T, L));
            CHECK(ds_engine_prefers_absorbed(ea, T, L) == 1);
            disagree += ds_engine_prefers_absorbed(e, T, L) != ds_engine_prefers_absorbed(em, T, L);
        }
    printf("%s: measured and multiply-add choices differ at %d grid points\n", dir, disagree);
    /* same logits whichever form each step takes */
    int V = ds_engine_vocab_size(e), T = 40;
    int32_t ids[40];
    for (int t = 0; t < T; t++) ids[t] = (t * 37 + 11) % V;
    float *x = malloc(sizeof(float) * (size_t)T * V), *y = malloc(sizeof(float) * (size_t)T * V);
    ds_seq *s1, *s2;
    ds_seq_new(e, &s1, err);
    ds_seq_new(ea, &s2, err);
    CHECK(golden_feed(e, s1, ids, T, 7, V, x, err) == DS_OK);
    CHECK(golden_feed(ea, s2, ids, T, 7, V, y, err) == DS_OK);
    diff_stats d = diff_f32(x, y, (size_t)T * V);
    CHECKF(d.rel_l2 <= 1e-5, "measured choice vs all absorbed: rel L2 %g", d.rel_l2);
    ds_seq_free(s1);
    ds_seq_free(s2);
    free(x);
    free(y);
done:
    ds_engine_free(e);
    ds_engine_free(em);
    ds_engine_free(ea);
}

int main(void) {
    check_mac_model();
    char dir[512];
    snprintf(dir, sizeof dir, "%s/tiny-v3", fixtures_dir());
    check_engine(dir);
    check_engine("models/demo");
    return test_result("test_attn_cost");
}
