/* The engine against the reference implementation (transformers, fp32) on every fixture:
 *  - logits at every prompt position, prompt fed whole (naive attention);
 *  - the same fed in chunks of several sizes and token by token (paged cache; absorbed decode path);
 *  - the same with the absorbed form forced for prefill too;
 *  - the greedy continuation, step by step, teacher-forced with the golden ids so every step's logits
 *    are compared; the pick must equal the golden id unless the reference was at a near-tie;
 *  - all prompts in one batch, of different lengths, each fed in its own chunk sizes.
 * Tolerances (issue 2): max abs error 1e-3 and relative L2 error 1e-4. */
#include <stdlib.h>
#include <unistd.h>

#include "dsinfer.h"
#include "golden.h"
#include "testutil.h"

#define MAX_ABS 1e-3
#define MAX_REL 1e-4
#define KV_FORM_REL 5e-4
#define TIE 1e-2

typedef struct {
    const char *name;
    ds_st_set *g;
    int n_prompts;
    int V;
} fixture;

static void check_rows(const char *what, const fixture *fx, int p, const float *got, const float *ref, int rows) {
    for (int r = 0; r < rows; r++) {
        diff_stats d = diff_f32(got + (size_t)r * fx->V, ref + (size_t)r * fx->V, (size_t)fx->V);
        CHECKF(d.max_abs <= MAX_ABS && d.rel_l2 <= MAX_REL, "%s %s p%d row %d: max abs %.3g rel L2 %.3g", fx->name,
               what, p, r, d.max_abs, d.rel_l2);
    }
}

static void check_prompt_feeds(const fixture *fx, ds_engine *e, ds_engine *e_abs, int p) {
    const ds_st_tensor *ids = golden_get(fx->g, p, "input_ids"), *ref = golden_get(fx->g, p, "logits");
    int T = (int)ids->numel;
    const int chunks[] = {0, 1, 3, 7, 16};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        float *got = golden_prompt_logits(e, ids->data, T, chunks[c], fx->V);
        char what[32];
        snprintf(what, sizeof what, "chunk %d", chunks[c]);
        check_rows(what, fx, p, got, ref->data, T);
        free(got);
    }
    float *got = golden_prompt_logits(e_abs, ids->data, T, 0, fx->V);
    check_rows("absorbed prefill", fx, p, got, ref->data, T);
    free(got);
}

/* Greedy continuation, teacher-forced with the golden ids. */
static void check_greedy(const fixture *fx, ds_engine *e, int p) {
    const ds_st_tensor *ids = golden_get(fx->g, p, "input_ids"), *gids = golden_get(fx->g, p, "greedy_ids");
    const float *glog = golden_get(fx->g, p, "greedy_logits")->data;
    const int32_t *gid = gids->data;
    int T = (int)ids->numel, n = (int)gids->numel, V = fx->V;
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
        CHECK(top == gid[k]);
        if (pick != gid[k]) {
            float second = -INFINITY;
            for (int v = 0; v < V; v++)
                if (v != top && ref[v] > second) second = ref[v];
            CHECKF(ref[top] - second <= TIE && ref[top] - ref[pick] <= TIE,
                   "%s p%d step %d: picked %d, reference %d, not a near-tie", fx->name, p, k, pick, gid[k]);
        }
        it = (ds_batch_item){.seq = s, .tokens = &gid[k], .n_tokens = 1};
        CHECK(ds_engine_forward(e, &it, 1, row, err) == DS_OK);
    }
    ds_seq_free(s);
    free(row);
}

/* Every prompt in one batch; sequence i advances by chunk[i] tokens per step, so prefill chunks of
 * different sizes and single tokens mix in the same forward. */
static void check_batched(const fixture *fx, ds_engine *e) {
    float *got[8];
    char err[DS_ERRLEN];
    CHECKF(golden_feed_batched(e, fx->g, fx->n_prompts, fx->V, got, err) == DS_OK, "batched forward: %s", err);
    for (int i = 0; i < fx->n_prompts; i++) {
        const ds_st_tensor *ids = golden_get(fx->g, i, "input_ids");
        check_rows("batched", fx, i, got[i], golden_get(fx->g, i, "logits")->data, (int)ids->numel);
        free(got[i]);
    }
}

/* Prefix sharing and rollback: B starts on A's full pages and computes only the rest; A truncated
 * and re-fed gives the same logits; the pool is intact afterwards and empty once all is freed. */
static void check_prefix_and_truncate(const fixture *fx, ds_engine *e, int p) {
    const ds_st_tensor *ids = golden_get(fx->g, p, "input_ids"), *ref = golden_get(fx->g, p, "logits");
    const int32_t *tok = ids->data;
    int T = (int)ids->numel, V = fx->V, ps = ds_engine_page_size(e), free0 = ds_engine_pages_free(e);
    char err[DS_ERRLEN];
    float *out = malloc(sizeof(float) * (size_t)T * V);
    ds_seq *a, *b;
    ds_seq_new(e, &a, err);
    ds_seq_new(e, &b, err);
    ds_batch_item it = {.seq = a, .tokens = tok, .n_tokens = T, .all_logits = 1};
    CHECK(ds_engine_forward(e, &it, 1, out, err) == DS_OK);
    int shared = (T - 1) / ps, pages[64];
    CHECK(shared >= 1);
    for (int i = 0; i < shared; i++) pages[i] = ds_seq_page(a, i);
    CHECKF(ds_seq_adopt_prefix(b, pages, shared, err) == DS_OK, "%s", err);
    CHECK(ds_engine_page_refcount(e, pages[0]) == 2 && ds_seq_len(b) == shared * ps);
    it = (ds_batch_item){.seq = b, .tokens = tok + shared * ps, .n_tokens = T - shared * ps, .all_logits = 1};
    CHECK(ds_engine_forward(e, &it, 1, out, err) == DS_OK);
    check_rows("adopted prefix", fx, p, out, (const float *)ref->data + (size_t)shared * ps * V, T - shared * ps);
    ds_seq_truncate(a, ps / 2 + 1);
    it = (ds_batch_item){.seq = a, .tokens = tok + ps / 2 + 1, .n_tokens = T - ps / 2 - 1, .all_logits = 1};
    CHECK(ds_engine_forward(e, &it, 1, out, err) == DS_OK);
    check_rows("after truncate", fx, p, out, (const float *)ref->data + (size_t)(ps / 2 + 1) * V, T - ps / 2 - 1);
    CHECKF(ds_engine_check_pages(e, err) == DS_OK, "%s", err);
    CHECK(ds_seq_adopt_prefix(b, pages, 1, err) == DS_ERR_ARG);   /* b is not empty */
    /* a fork has its own copy of the cache: both continue with the reference's logits */
    ds_seq *f;
    ds_seq_new(e, &f, err);
    CHECKF(ds_seq_fork(f, a, err) == DS_OK, "%s", err);
    CHECK(ds_seq_len(f) == T && ds_seq_page(f, 0) != ds_seq_page(a, 0));
    CHECK(ds_seq_fork(f, a, err) == DS_ERR_ARG);   /* f is not empty */
    int32_t next = ((const int32_t *)golden_get(fx->g, p, "greedy_ids")->data)[0];
    const float *gl = golden_get(fx->g, p, "greedy_logits")->data;
    ds_seq *both[2] = {a, f};
    for (int i = 0; i < 2; i++) {
        it = (ds_batch_item){.seq = both[i], .tokens = &next, .n_tokens = 1};
        CHECK(ds_engine_forward(e, &it, 1, out, err) == DS_OK);
        check_rows("after fork", fx, p, out, gl + V, 1);
    }
    ds_seq_free(f);
    ds_seq_free(a);
    ds_seq_free(b);
    CHECK(ds_engine_pages_free(e) == free0);
    CHECKF(ds_engine_check_pages(e, err) == DS_OK, "%s", err);
    free(out);
}

/* A reduced KV cache, FP8 or BF16 (issue 9): the same logits whether fed whole, in chunks, or in the
 * absorbed form (all read the same dequantized cache), and the pool holds more pages in the same memory
 * (FP8: more than 2x the fp32 pages; BF16: 2x). The distance to the reference is printed, not checked:
 * these random-weight models amplify any perturbation (FP8: rel L2 0.04-0.4); the accuracy cost is
 * checked on the trained demo model (test_demo). */
static void check_kv_dtype(const fixture *fx, const char *dir, const char *dtype, double min_ratio) {
    char err[DS_ERRLEN];
    ds_engine *e = NULL, *ea = NULL, *e32 = NULL;
    ds_engine_opts o = {.n_threads = 2, .kv_cache_dtype = dtype, .kv_cache_bytes = 4u << 20};
    ds_engine_opts oa = o, o32 = {.n_threads = 2, .kv_cache_dtype = "fp32", .kv_cache_bytes = 4u << 20};
    oa.force_absorbed = 1;
    CHECKF(ds_engine_open(dir, &o, &e, err) == DS_OK, "%s", err);
    CHECKF(ds_engine_open(dir, &oa, &ea, err) == DS_OK, "%s", err);
    CHECKF(ds_engine_open(dir, &o32, &e32, err) == DS_OK, "%s", err);
    if (!e || !ea || !e32) goto done;
    CHECKF(ds_engine_pages_total(e) >= min_ratio * ds_engine_pages_total(e32), "%s pool %d pages, fp32 pool %d", dtype,
           ds_engine_pages_total(e), ds_engine_pages_total(e32));
    double worst = 0;
    for (int p = 0; p < fx->n_prompts; p++) {
        const ds_st_tensor *ids = golden_get(fx->g, p, "input_ids"), *ref = golden_get(fx->g, p, "logits");
        int T = (int)ids->numel;
        float *whole = golden_prompt_logits(e, ids->data, T, 0, fx->V);
        float *chunked = golden_prompt_logits(e, ids->data, T, 3, fx->V);
        float *abs_ = golden_prompt_logits(ea, ids->data, T, 0, fx->V);
        diff_stats d1 = diff_f32(chunked, whole, (size_t)T * fx->V), d2 = diff_f32(abs_, whole, (size_t)T * fx->V);
        /* 5e-4: fp32 op-order differences amplified by the random layers (up to 1.04e-4 seen with BF16); a
         * form that read unrounded values would be off by the cache's rounding itself (BF16: 3.5e-3 and up) */
        CHECKF(d1.rel_l2 <= KV_FORM_REL && d2.rel_l2 <= KV_FORM_REL, "%s p%d %s kv: chunked %g absorbed %g", fx->name, p,
               dtype, d1.rel_l2, d2.rel_l2);
        diff_stats d = diff_f32(whole, ref->data, (size_t)T * fx->V);
        worst = d.rel_l2 > worst ? d.rel_l2 : worst;
        free(whole);
        free(chunked);
        free(abs_);
    }
    printf("%s: %s KV cache, worst rel L2 vs reference %.2e\n", fx->name, dtype, worst);
done:
    ds_engine_free(e);
    ds_engine_free(ea);
    ds_engine_free(e32);
}

/* The default KV cache (kv_cache_dtype NULL, and "auto") is BF16, as vLLM's and SGLang's "auto" is the model's
 * dtype: the same pool size as "bf16" and bitwise the same logits; "fp32" holds half the pages. */
static void check_kv_default(const fixture *fx, const char *dir) {
    char err[DS_ERRLEN];
    const char *kinds[3] = {NULL, "auto", "fp32"};
    ds_engine *eb = NULL, *e[3] = {NULL, NULL, NULL};
    const char *names[7][2] = {{NULL, "bf16"}, {"auto", "bf16"}, {"bfloat16", "bf16"}, {"fp8_e4m3", "fp8"},
                               {"float32", "fp32"}, {"fp16", NULL}, {"", NULL}};
    for (int k = 0; k < 7; k++) {   /* the names the engine, the CLI and the server's /metrics resolve alike */
        const char *got = ds_kv_cache_dtype_resolve(names[k][0]);
        CHECKF(names[k][1] ? got && !strcmp(got, names[k][1]) : !got, "kv dtype \"%s\" resolved to %s",
               names[k][0] ? names[k][0] : "NULL", got ? got : "NULL");
    }
    /* attention form by counted multiply-adds in every engine: measured at open (the default), the choice of naive or
     * absorbed for a prompt can differ between two engines on a loaded machine, and so could their logits' bits (a
     * CI run with other work on the machine saw it) */
    ds_engine_opts ob = {.n_threads = 2, .kv_cache_dtype = "bf16", .kv_cache_bytes = 4u << 20, .attn_no_measure = 1};
    CHECKF(ds_engine_open(dir, &ob, &eb, err) == DS_OK, "%s", err);
    for (int k = 0; k < 3; k++) {
        ds_engine_opts o = ob;
        o.kv_cache_dtype = kinds[k];
        CHECKF(ds_engine_open(dir, &o, &e[k], err) == DS_OK, "%s", err);
    }
    if (eb && e[0] && e[1] && e[2]) {
        const ds_st_tensor *ids = golden_get(fx->g, 0, "input_ids");
        int T = (int)ids->numel;
        float *want = golden_prompt_logits(eb, ids->data, T, 0, fx->V);
        for (int k = 0; k < 2; k++) {
            float *got = golden_prompt_logits(e[k], ids->data, T, 0, fx->V);
            CHECKF(memcmp(got, want, sizeof(float) * (size_t)T * fx->V) == 0, "%s: kv_cache_dtype %s differs from bf16", fx->name,
                   kinds[k] ? kinds[k] : "NULL");
            CHECKF(ds_engine_pages_total(e[k]) == ds_engine_pages_total(eb), "%s: %s pool %d pages, bf16 %d", fx->name,
                   kinds[k] ? kinds[k] : "NULL", ds_engine_pages_total(e[k]), ds_engine_pages_total(eb));
            free(got);
        }
        CHECKF(2 * ds_engine_pages_total(e[2]) <= ds_engine_pages_total(eb) + 1, "%s: fp32 pool %d pages, bf16 %d", fx->name,
               ds_engine_pages_total(e[2]), ds_engine_pages_total(eb));
        CHECKF(strstr(ds_engine_describe(e[0]), ", KV cache bf16,") && strstr(ds_engine_describe(e[2]), ", KV cache fp32,"),
               "the description names the cache: %s / %s", ds_engine_describe(e[0]), ds_engine_describe(e[2]));
        free(want);
    }
    ds_engine_free(eb);
    for (int k = 0; k < 3; k++) ds_engine_free(e[k]);
}

static void check_fixture(const char *name) {
    char dir[512], gpath[600], err[DS_ERRLEN];
    snprintf(dir, sizeof dir, "%s/%s", fixtures_dir(), name);
    snprintf(gpath, sizeof gpath, "%s/golden.safetensors", dir);
    fixture fx = {.name = name};
    if (ds_st_open_file(gpath, &fx.g, err) != DS_OK) { CHECKF(0, "%s", err); return; }
    while (golden_get(fx.g, fx.n_prompts, "input_ids") && fx.n_prompts < 8) fx.n_prompts++;
    CHECK(fx.n_prompts > 0);
    ds_engine *e = NULL, *e_abs = NULL;
    ds_engine_opts o = {.n_threads = 2, .kv_cache_dtype = "fp32"}, oa = {.n_threads = 2, .kv_cache_dtype = "fp32", .force_absorbed = 1};
    CHECKF(ds_engine_open(dir, &o, &e, err) == DS_OK, "%s", err);
    CHECKF(ds_engine_open(dir, &oa, &e_abs, err) == DS_OK, "%s", err);
    if (e && e_abs) {
        fx.V = ds_engine_vocab_size(e);
        for (int p = 0; p < fx.n_prompts; p++) {
            check_prompt_feeds(&fx, e, e_abs, p);
            check_greedy(&fx, e, p);
        }
        check_batched(&fx, e);
        check_prefix_and_truncate(&fx, e, fx.n_prompts - 1);
        check_kv_dtype(&fx, dir, "fp8", 2.01);
        check_kv_dtype(&fx, dir, "bf16", 1.99);
        check_kv_default(&fx, dir);
        CHECK(ds_engine_pages_free(e) == ds_engine_pages_total(e));
        printf("%s: %d prompts checked (%s)\n", name, fx.n_prompts, ds_engine_describe(e));
    }
    ds_engine_free(e);
    ds_engine_free(e_abs);
    ds_st_close(fx.g);
}

/* The CLI spellings the outside checks use: `generate --print-ids` prints the golden continuation and
 * `logits --out F.npy` writes the golden logits. Uses a prompt with no near-tie in its continuation. */
static void check_cli(const char *name, int p) {
    const char *bin = getenv("DSINFER_BIN");
    if (!bin) { printf("CLI checks skipped: DSINFER_BIN not set\n"); return; }
    char dir[512], gpath[600], err[DS_ERRLEN], ids[4096] = "", cmd[8192], npy[64] = "/tmp/dsinfer-golden-XXXXXX";
    snprintf(dir, sizeof dir, "%s/%s", fixtures_dir(), name);
    snprintf(gpath, sizeof gpath, "%s/golden.safetensors", dir);
    ds_st_set *g;
    if (ds_st_open_file(gpath, &g, err) != DS_OK) { CHECKF(0, "%s", err); return; }
    const ds_st_tensor *in = golden_get(g, p, "input_ids"), *gi = golden_get(g, p, "greedy_ids");
    const ds_st_tensor *ref = golden_get(g, p, "logits");
    for (int i = 0; i < in->numel; i++)
        snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%d", i ? "," : "", ((const int32_t *)in->data)[i]);
    snprintf(cmd, sizeof cmd, "%s generate --model %s --ids %s -n %d --temperature 0 --ignore-eos --print-ids --threads 2",
             bin, dir, ids, (int)gi->numel);
    FILE *f = popen(cmd, "r");
    char line[8192] = "", want[8192] = "";
    if (!fgets(line, sizeof line, f)) line[0] = 0;
    CHECK(pclose(f) == 0);
    for (int i = 0; i < gi->numel; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%d", i ? "," : "", ((const int32_t *)gi->data)[i]);
    strcat(want, "\n");
    CHECKF(strcmp(line, want) == 0, "generate printed %s want %s", line, want);
    int fd = mkstemp(npy);
    close(fd);
    snprintf(cmd, sizeof cmd, "%s logits --model %s --ids %s --out %s", bin, dir, ids, npy);
    CHECK(system(cmd) == 0);
    FILE *nf = fopen(npy, "rb");
    unsigned char hdr[10];
    CHECK(nf && fread(hdr, 1, 10, nf) == 10 && memcmp(hdr, "\x93NUMPY\x01\x00", 8) == 0);
    int hlen = hdr[8] | hdr[9] << 8;
    char *dict = calloc(1, (size_t)hlen + 1);
    CHECK(fread(dict, 1, (size_t)hlen, nf) == (size_t)hlen);
    char shape[64];
    snprintf(shape, sizeof shape, "'shape': (%d, %d)", (int)in->numel, (int)(ref->numel / in->numel));
    CHECKF(strstr(dict, "'descr': '<f4'") && strstr(dict, shape), "npy header %s", dict);
    float *got = malloc(sizeof(float) * (size_t)ref->numel);
    CHECK(fread(got, sizeof(float), (size_t)ref->numel, nf) == (size_t)ref->numel);
    diff_stats d = diff_f32(got, ref->data, (size_t)ref->numel);
    CHECKF(d.max_abs <= MAX_ABS && d.rel_l2 <= MAX_REL, "npy logits: max abs %g rel %g", d.max_abs, d.rel_l2);
    fclose(nf);
    unlink(npy);
    free(dict);
    free(got);
    ds_st_close(g);
}

int main(void) {
    const char *names[] = {"tiny-v3", "tiny-v3-fp8", "tiny-v2", "tiny-v2-group", "tiny-v3-nvfp4"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) check_fixture(names[i]);
    check_cli("tiny-v3", 1);
    check_cli("tiny-v2", 1);
    return test_result("test_golden");
}
