/* Bad batches leave no trace: a token id out of range, an empty item, the same sequence twice, a
 * context past the model's limit, and a step that runs out of KV pages each fail with the right status
 * and a message, append nothing to any sequence, and give back every page they took; the engine then
 * serves the same prompt with the reference logits. */
#include <stdlib.h>
#include <string.h>

#include "dsinfer.h"
#include "golden.h"
#include "testutil.h"

static ds_engine *open_small(int max_pages) {
    char dir[512], err[DS_ERRLEN];
    snprintf(dir, sizeof dir, "%s/tiny-v3", fixtures_dir());
    ds_engine_opts o = {.n_threads = 1, .page_size = 16, .max_pages = max_pages, .kv_cache_dtype = "fp32"};
    ds_engine *e = NULL;
    CHECKF(ds_engine_open(dir, &o, &e, err) == DS_OK, "%s", err);
    return e;
}

static void expect_fail(ds_engine *e, const ds_batch_item *it, int n, ds_status want, const char *needle) {
    char err[DS_ERRLEN] = "";
    int free0 = ds_engine_pages_free(e), len[8];
    for (int i = 0; i < n; i++) len[i] = it[i].seq ? ds_seq_len(it[i].seq) : 0;
    float *lg = malloc(sizeof(float) * 1024 * 256);
    ds_status st = ds_engine_forward(e, it, n, lg, err);
    CHECKF(st == want && strstr(err, needle), "status %d message \"%s\", want %d \"%s\"", st, err, want, needle);
    CHECK(ds_engine_pages_free(e) == free0);
    for (int i = 0; i < n; i++) CHECK(!it[i].seq || ds_seq_len(it[i].seq) == len[i]);
    CHECK(ds_engine_check_pages(e, err) == DS_OK);
    free(lg);
}

int main(void) {
    char err[DS_ERRLEN];
    ds_engine *e = open_small(4);   /* 64 tokens of KV in all */
    if (!e) return test_result("test_engine_errors");
    ds_seq *a, *b;
    ds_seq_new(e, &a, err);
    ds_seq_new(e, &b, err);
    int32_t ids[300];
    for (int i = 0; i < 300; i++) ids[i] = (i * 37) % 1000 + 2;
    ids[0] = 0;
    ds_batch_item one = {.seq = a, .tokens = ids, .n_tokens = 10};
    int32_t bad[2] = {0, 1024};
    expect_fail(e, &(ds_batch_item){.seq = a, .tokens = bad, .n_tokens = 2}, 1, DS_ERR_ARG, "token id 1024 out of range");
    expect_fail(e, &(ds_batch_item){.seq = a, .tokens = ids, .n_tokens = 0}, 1, DS_ERR_ARG, "no tokens");
    expect_fail(e, (ds_batch_item[]){one, one}, 2, DS_ERR_ARG, "same sequence");
    expect_fail(e, &(ds_batch_item){.seq = a, .tokens = ids, .n_tokens = 257}, 1, DS_ERR_ARG, "exceeds the model's 256");
    /* out of pages: b's 30 tokens fit (2 pages), then a's 40 more do not (3 pages > 2 left): nothing kept */
    ds_batch_item two[2] = {{.seq = b, .tokens = ids, .n_tokens = 30}, {.seq = a, .tokens = ids, .n_tokens = 40}};
    expect_fail(e, two, 2, DS_ERR_NOMEM, "out of KV pages");
    CHECK(ds_engine_pages_free(e) == 4);
    /* and the engine still computes the reference logits afterwards */
    char gpath[600];
    snprintf(gpath, sizeof gpath, "%s/tiny-v3/golden.safetensors", fixtures_dir());
    ds_st_set *g;
    CHECK(ds_st_open_file(gpath, &g, err) == DS_OK);
    const ds_st_tensor *in = golden_get(g, 1, "input_ids"), *ref = golden_get(g, 1, "logits");
    int T = (int)in->numel;
    float *lg = ds_engine_logits_alloc(e, T);   /* the engine's own logits buffer (plain memory on the CPU) */
    CHECK(lg != NULL);
    ds_batch_item ok = {.seq = a, .tokens = in->data, .n_tokens = T, .all_logits = 1};
    CHECKF(ds_engine_forward(e, &ok, 1, lg, err) == DS_OK, "%s", err);
    diff_stats d = diff_f32(lg, ref->data, (size_t)T * 1024);
    CHECKF(d.max_abs <= 1e-3 && d.rel_l2 <= 1e-4, "after the failures: max abs %g rel %g", d.max_abs, d.rel_l2);
    ds_engine_logits_free(e, lg);
    ds_st_close(g);
    ds_seq_free(a);
    ds_seq_free(b);
    CHECK(ds_engine_pages_free(e) == 4 && ds_engine_check_pages(e, err) == DS_OK);
    ds_engine_free(e);
    return test_result("test_engine_errors");
}
