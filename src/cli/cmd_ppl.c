/* `dsinfer perplexity --model DIR --file TEXT [--ctx N]` and
 * `dsinfer compare --model DIR --ref-model DIR --file TEXT [--ctx N] [--kv-cache-dtype fp8]`.
 *
 * Procedure (tools/ppl_ref.py computes the same in PyTorch): the file's text is encoded without special
 * tokens; the ids are cut into consecutive windows of N-1 tokens (the last may be shorter); each window is
 * run as its own sequence with BOS prepended; every window token is predicted from BOS and the window
 * tokens before it. perplexity = exp(mean negative log-likelihood over all predicted tokens), the
 * log-softmax taken in double precision.
 *
 * compare runs the same windows through a reference configuration (--ref-model, default the same
 * folder, on the CPU, unquantized, with the fp32 KV cache) and the candidate (--model with the given options: a quantized copy,
 * --kv-cache-dtype fp8 or the default bf16, another backend) and reports, over every predicted position, the mean and max
 * KL divergence KL(ref || cand), top-1 agreement, the max absolute logit difference, and both
 * perplexities: what a choice of format costs in accuracy. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/model_args.h"
#include "core/file.h"
#include "core/status.h"
#include "tokenizer/tokenizer.h"

/* The text of path, or NULL with *st set. */
static char *read_file(const char *path, size_t *len, char *err, ds_status *st) {
    char *buf = ds_read_file(path, (size_t)1 << 31, len);
    *st = buf ? DS_OK : ds_seterr(err, DS_ERR_IO, "%s: cannot read", path);
    return buf;
}

/* -log softmax(row)[target], in double. */
static double nll(const float *row, int V, int target) {
    double mx = row[0], sum = 0;
    for (int v = 1; v < V; v++) mx = row[v] > mx ? row[v] : mx;
    for (int v = 0; v < V; v++) sum += exp((double)row[v] - mx);
    return log(sum) + mx - (double)row[target];
}

/* Sums the NLL of one window: BOS + ids[0:n], predicting ids[0:n]. */
static ds_status window_nll(ds_engine *eng, const int32_t *ids, int n, float *logits, int32_t *buf, double *sum,
                            char *err) {
    int V = ds_engine_vocab_size(eng);
    ds_seq *s = NULL;
    buf[0] = ds_engine_bos_id(eng);
    memcpy(buf + 1, ids, sizeof(int32_t) * (size_t)n);
    ds_status st = ds_seq_new(eng, &s, err);
    ds_batch_item it = {.seq = s, .tokens = buf, .n_tokens = n + 1, .all_logits = 1};
    if (!st) st = ds_engine_forward(eng, &it, 1, logits, err);
    for (int t = 0; !st && t < n; t++) *sum += nll(logits + (size_t)t * V, V, ids[t]);
    ds_seq_free(s);
    return st;
}

static ds_status perplexity(const model_args *a, ds_engine *eng, char *err) {
    size_t len = 0, n_ids = 0;
    ds_status st;
    char *text = read_file(a->file, &len, err, &st);
    ds_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    if (!st) st = ds_tokenizer_load(a->model, &tok, err);
    if (!st) st = ds_tokenizer_encode(tok, text, len, 0, &ids, &n_ids, err);
    if (!st && n_ids == 0) st = ds_seterr(err, DS_ERR_ARG, "%s: no tokens", a->file);
    int ctx = a->ctx ? a->ctx : ds_engine_max_context(eng);
    if (!st && ctx > ds_engine_max_context(eng))
        st = ds_seterr(err, DS_ERR_ARG, "--ctx %d exceeds the model's context %d", ctx, ds_engine_max_context(eng));
    int W = ctx - 1, V = ds_engine_vocab_size(eng), windows = 0;
    float *logits = st ? NULL : ds_xmalloc(sizeof(float) * (size_t)ctx * (size_t)V);
    int32_t *buf = st ? NULL : ds_xmalloc(sizeof(int32_t) * (size_t)ctx);
    double sum = 0;
    for (size_t i = 0; !st && i < n_ids; i += (size_t)W, windows++) {
        int n = n_ids - i < (size_t)W ? (int)(n_ids - i) : W;
        st = window_nll(eng, ids + i, n, logits, buf, &sum, err);
    }
    if (!st)
        printf("perplexity %.6f  mean_nll %.6f  tokens %zu  windows %d  ctx %d\n", exp(sum / (double)n_ids),
               sum / (double)n_ids, n_ids, windows, ctx);
    free(logits);
    free(buf);
    free(ids);
    free(text);
    ds_tokenizer_free(tok);
    return st;
}

typedef struct {
    double kl_sum, kl_max, nll_ref, nll_cand, max_abs;
    long agree, n;
} compare_stats;

/* Adds one position: rows of V logits. */
static void compare_row(const float *r, const float *c, int V, int target, compare_stats *st) {
    double mr = r[0], mc = c[0], zr = 0, zc = 0, kl = 0;
    int tr = 0, tc = 0;
    for (int v = 1; v < V; v++) {
        if (r[v] > r[tr]) tr = v;
        if (c[v] > c[tc]) tc = v;
    }
    mr = r[tr];
    mc = c[tc];
    for (int v = 0; v < V; v++) zr += exp(r[v] - mr), zc += exp(c[v] - mc);
    double lzr = log(zr) + mr, lzc = log(zc) + mc;
    for (int v = 0; v < V; v++) {
        double lpr = r[v] - lzr, lpc = c[v] - lzc;
        kl += exp(lpr) * (lpr - lpc);
        double d = fabs((double)r[v] - c[v]);
        if (d > st->max_abs) st->max_abs = d;
    }
    st->kl_sum += kl;
    if (kl > st->kl_max) st->kl_max = kl;
    st->agree += tr == tc;
    st->nll_ref += lzr - r[target];
    st->nll_cand += lzc - c[target];
    st->n++;
}

static ds_status run_window(ds_engine *eng, const int32_t *buf, int n, float *logits, char *err) {
    ds_seq *s = NULL;
    ds_status st = ds_seq_new(eng, &s, err);
    ds_batch_item it = {.seq = s, .tokens = buf, .n_tokens = n, .all_logits = 1};
    if (!st) st = ds_engine_forward(eng, &it, 1, logits, err);
    ds_seq_free(s);
    return st;
}

static ds_status compare(const model_args *a, ds_engine *cand, ds_engine *ref, char *err) {
    size_t len = 0, n_ids = 0;
    ds_status st;
    char *text = read_file(a->file, &len, err, &st);
    ds_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    int V = ds_engine_vocab_size(ref);
    if (!st && ds_engine_vocab_size(cand) != V)
        st = ds_seterr(err, DS_ERR_ARG, "the models have different vocabularies (%d and %d)", ds_engine_vocab_size(cand), V);
    if (!st) st = ds_tokenizer_load(a->ref_model ? a->ref_model : a->model, &tok, err);
    if (!st) st = ds_tokenizer_encode(tok, text, len, 0, &ids, &n_ids, err);
    if (!st && n_ids == 0) st = ds_seterr(err, DS_ERR_ARG, "%s: no tokens", a->file);
    int ctx = a->ctx ? a->ctx : ds_engine_max_context(ref);
    if (!st && (ctx > ds_engine_max_context(ref) || ctx > ds_engine_max_context(cand)))
        st = ds_seterr(err, DS_ERR_ARG, "--ctx %d exceeds a model's context", ctx);
    int W = ctx - 1;
    float *lr = st ? NULL : ds_xmalloc(sizeof(float) * (size_t)ctx * V), *lc = st ? NULL : ds_xmalloc(sizeof(float) * (size_t)ctx * V);
    int32_t *buf = st ? NULL : ds_xmalloc(sizeof(int32_t) * (size_t)ctx);
    compare_stats cs = {0};
    for (size_t i = 0; !st && i < n_ids; i += (size_t)W) {
        int m = n_ids - i < (size_t)W ? (int)(n_ids - i) : W;
        buf[0] = ds_engine_bos_id(ref);
        memcpy(buf + 1, ids + i, sizeof(int32_t) * (size_t)m);
        st = run_window(ref, buf, m + 1, lr, err);
        if (!st) st = run_window(cand, buf, m + 1, lc, err);
        for (int t = 0; !st && t < m; t++) compare_row(lr + (size_t)t * V, lc + (size_t)t * V, V, ids[i + t], &cs);
    }
    if (!st)
        printf("positions %ld  kl_mean %.6g  kl_max %.6g  top1_agreement %.4f  max_abs_logit_diff %.6g  "
               "ppl_ref %.6f  ppl_cand %.6f\n", cs.n, cs.kl_sum / (double)cs.n, cs.kl_max, (double)cs.agree / (double)cs.n,
               cs.max_abs, exp(cs.nll_ref / (double)cs.n), exp(cs.nll_cand / (double)cs.n));
    free(lr);
    free(lc);
    free(buf);
    free(ids);
    free(text);
    ds_tokenizer_free(tok);
    return st;
}

int cli_compare(int argc, char **argv) {
    model_args a;
    int rc = model_args_parse(argc, argv, &a);
    if (rc) return rc;
    if (!a.file) { fprintf(stderr, "dsinfer compare: --file TEXT is required\n"); return 2; }
    model_args r = a;
    r.model = a.ref_model ? a.ref_model : a.model;
    r.kv_cache_dtype = "fp32";   /* the reference's numbers: the default (BF16) cache is a candidate like FP8 */
    r.quantization = NULL;
    r.backend = "cpu";
    char err[DS_ERRLEN];
    ds_engine *cand = NULL, *ref = NULL;
    ds_status st = model_args_open_engine(&a, &cand, err);
    if (!st) st = model_args_open_engine(&r, &ref, err);
    if (!st) st = compare(&a, cand, ref, err);
    if (st) fprintf(stderr, "dsinfer: error: %s\n", err);
    ds_engine_free(cand);
    ds_engine_free(ref);
    return st ? ds_cli_exit_code(st) : 0;
}

int cli_perplexity(int argc, char **argv) {
    model_args a;
    int rc = model_args_parse(argc, argv, &a);
    if (rc) return rc;
    if (!a.file) { fprintf(stderr, "dsinfer perplexity: --file TEXT is required\n"); return 2; }
    char err[DS_ERRLEN];
    ds_engine *eng = NULL;
    ds_status st = model_args_open_engine(&a, &eng, err);
    if (!st) st = perplexity(&a, eng, err);
    if (st) fprintf(stderr, "dsinfer: error: %s\n", err);
    ds_engine_free(eng);
    return st ? ds_cli_exit_code(st) : 0;
}
