/* Access to a fixture's golden outputs (golden.safetensors) for the tests. */
#ifndef DS_TEST_GOLDEN_H
#define DS_TEST_GOLDEN_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsinfer.h"
#include "loader/safetensors.h"
#include "testutil.h"

static inline const char *fixtures_dir(void) {
    const char *d = getenv("DSINFER_FIXTURES");
    return d ? d : "tests/fixtures";
}

/* The tensor "p<i>.<what>" of a golden set, or NULL. */
static inline const ds_st_tensor *golden_get(const ds_st_set *g, int prompt, const char *what) {
    char name[64];
    snprintf(name, sizeof name, "p%d.%s", prompt, what);
    return ds_st_find(g, name);
}

typedef struct { double max_abs, rel_l2; } diff_stats;

/* Max abs and relative L2 error of got against ref over n floats; NaN in got makes both infinite. */
static inline diff_stats diff_f32(const float *got, const float *ref, size_t n) {
    double num = 0, den = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)ref[i];
        if (isnan(got[i])) return (diff_stats){INFINITY, INFINITY};
        num += d * d;
        den += (double)ref[i] * ref[i];
        if (fabs(d) > mx) mx = fabs(d);
    }
    return (diff_stats){mx, sqrt(num / (den > 0 ? den : 1))};
}

/* Feeds ids[0:T] to seq in chunks of `chunk` tokens (0 = whole); out [T, V] gets every position's logits. */
static inline ds_status golden_feed(ds_engine *e, ds_seq *s, const int32_t *ids, int T, int chunk, int V, float *out,
                                    char *err) {
    for (int t = 0; t < T;) {
        int n = chunk && T - t > chunk ? chunk : T - t;
        ds_batch_item it = {.seq = s, .tokens = ids + t, .n_tokens = n, .all_logits = 1};
        ds_status st = ds_engine_forward(e, &it, 1, out + (size_t)t * V, err);
        if (st) return st;
        t += n;
    }
    return DS_OK;
}

/* A new sequence of e fed ids[0:T] in chunks of `chunk` tokens (0 = whole), then freed: every position's logits [T, V]
 * (malloc'd; the caller frees them). A failed forward or a length other than T fails a CHECK. */
static inline float *golden_prompt_logits(ds_engine *e, const int32_t *ids, int T, int chunk, int V) {
    float *out = (float *)malloc(sizeof(float) * (size_t)T * V);
    ds_seq *s;
    char err[DS_ERRLEN];
    CHECK(ds_seq_new(e, &s, err) == DS_OK);
    CHECKF(golden_feed(e, s, ids, T, chunk, V, out, err) == DS_OK, "forward: %s", err);
    CHECK(ds_seq_len(s) == T);
    ds_seq_free(s);
    return out;
}

/* Every prompt of golden set g (n <= 8) in one batch per step: prompt i advances by 1 token (i = 0) or
 * 5i + 2, so prefill chunks of different sizes and single tokens mix in the same forward. got[i] gets
 * prompt i's logits [T_i, V] (malloc'd; the caller frees them). */
static inline ds_status golden_feed_batched(ds_engine *e, const ds_st_set *g, int n, int V, float **got, char *err) {
    ds_seq *seqs[8];
    int T[8], done[8];
    const int32_t *ids[8];
    ds_status st = DS_OK;
    for (int i = 0; i < n; i++) {
        ds_seq_new(e, &seqs[i], err);
        const ds_st_tensor *t = golden_get(g, i, "input_ids");
        ids[i] = (const int32_t *)t->data;
        T[i] = (int)t->numel;
        done[i] = 0;
        got[i] = (float *)malloc(sizeof(float) * (size_t)T[i] * V);
    }
    float *out = (float *)malloc(sizeof(float) * 512 * (size_t)V);
    while (!st) {
        ds_batch_item items[8];
        int m = 0, who[8];
        for (int i = 0; i < n; i++) {
            int chunk = i == 0 ? 1 : 5 * i + 2, k = T[i] - done[i] < chunk ? T[i] - done[i] : chunk;
            if (k == 0) continue;
            who[m] = i;
            items[m++] = (ds_batch_item){.seq = seqs[i], .tokens = ids[i] + done[i], .n_tokens = k, .all_logits = 1};
        }
        if (!m) break;
        st = ds_engine_forward(e, items, m, out, err);
        size_t off = 0;
        for (int j = 0; !st && j < m; j++) {
            memcpy(got[who[j]] + (size_t)done[who[j]] * V, out + off, sizeof(float) * (size_t)items[j].n_tokens * V);
            off += (size_t)items[j].n_tokens * V;
            done[who[j]] += items[j].n_tokens;
        }
    }
    for (int i = 0; i < n; i++) ds_seq_free(seqs[i]);
    free(out);
    return st;
}

/* Fixture `name`'s golden set (*g) and two engines of it whose attention form is chosen by counted multiply-adds, so that
 * their choices (and bits) agree: a test wraps one engine's backend and compares the two. 1 when all three opened, else
 * 0 with a CHECK failed and nothing left open. */
static inline int golden_engine_pair(const char *name, ds_st_set **g, ds_engine **a, ds_engine **b) {
    char dir[512], path[600], err[DS_ERRLEN];
    snprintf(dir, sizeof dir, "%s/%s", fixtures_dir(), name);
    snprintf(path, sizeof path, "%s/golden.safetensors", dir);
    *g = NULL;
    *a = *b = NULL;
    CHECKF(ds_st_open_file(path, g, err) == DS_OK, "%s", err);
    if (!*g) return 0;
    ds_engine_opts o = {.n_threads = 1, .kv_cache_dtype = "fp32", .kv_cache_bytes = 4u << 20, .attn_no_measure = 1};
    CHECKF(ds_engine_open(dir, &o, a, err) == DS_OK, "%s", err);
    CHECKF(ds_engine_open(dir, &o, b, err) == DS_OK, "%s", err);
    if (*a && *b) return 1;
    ds_engine_free(*a);
    ds_engine_free(*b);
    ds_st_close(*g);
    *a = *b = NULL;
    *g = NULL;
    return 0;
}

/* The prompt's logits by engines a and b (golden_prompt_logits, chunk tokens a step) compared bit for bit: how many of
 * the T x V values differ (golden_engine_pair's engines, one of them with wrapped backend ops) */
static inline size_t golden_pair_differ(ds_engine *a, ds_engine *b, const int32_t *ids, int T, int chunk, int V) {
    float *x = golden_prompt_logits(a, ids, T, chunk, V), *y = golden_prompt_logits(b, ids, T, chunk, V);
    size_t differ = 0;
    for (size_t i = 0; i < (size_t)T * V; i++) differ += memcmp(&x[i], &y[i], sizeof(float)) != 0;
    free(x);
    free(y);
    return differ;
}

static inline int argmax_f32(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

#endif
