/* `dsinfer logits`, `dsinfer generate` and `dsinfer chat`: argument parsing, then calls into the public
 * API (engine, sampler) and the tokenizer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/model_args.h"
#include "core/npy.h"
#include "core/status.h"
#include "tokenizer/tokenizer.h"

static int fail(ds_status st, const char *err) {
    fprintf(stderr, "dsinfer: error: %s\n", err);
    return ds_cli_exit_code(st);
}

/* Called with each generated token; returns 0 to go on, 1 to stop. */
typedef int (*token_fn)(int32_t tok, void *ctx);

/* Feeds ids[0:n] to seq (appending to what it holds), then samples up to max_new tokens, one decode step
 * each; stops at EOS unless ignore_eos, or when on_token says so. *n_gen counts the tokens produced. */
static ds_status generate_on(ds_engine *eng, ds_seq *seq, ds_sampler *smp, const int32_t *ids, int n, int max_new,
                             int ignore_eos, token_fn on_token, void *ctx, int *n_gen, char *err) {
    int V = ds_engine_vocab_size(eng);
    float *logits = malloc(sizeof(float) * (size_t)V);
    if (!logits) return ds_seterr(err, DS_ERR_NOMEM, "out of memory");
    *n_gen = 0;
    ds_batch_item item = {.seq = seq, .tokens = ids, .n_tokens = n, .all_logits = 0};
    ds_status st = n > 0 ? ds_engine_forward(eng, &item, 1, logits, err)
                         : ds_seterr(err, DS_ERR_ARG, "empty prompt");
    while (!st && *n_gen < max_new) {
        int32_t tok = ds_sampler_sample(smp, logits);
        ds_sampler_accept(smp, tok);
        (*n_gen)++;
        int stop = on_token(tok, ctx) || (tok == ds_engine_eos_id(eng) && !ignore_eos) || *n_gen == max_new;
        if (stop) break;
        if (ds_seq_len(seq) + 1 > ds_engine_max_context(eng)) break;   /* context full */
        item = (ds_batch_item){.seq = seq, .tokens = &tok, .n_tokens = 1, .all_logits = 0};
        st = ds_engine_forward(eng, &item, 1, logits, err);
    }
    free(logits);
    return st;
}

typedef struct {
    int count;
    ds_detok *detok;   /* NULL: print ids */
    int eos;
} print_ctx;

static int print_token(int32_t tok, void *p) {
    print_ctx *c = p;
    if (!c->detok) {
        printf("%s%d", c->count++ ? "," : "", tok);
    } else if (tok != c->eos) {
        size_t len;
        const char *txt = ds_detok_push(c->detok, tok, &len);
        fwrite(txt, 1, len, stdout);
    }
    fflush(stdout);
    return 0;
}

/* The prompt's ids: --ids as given, or --prompt encoded with BOS if the tokenizer config asks for it. */
static ds_status prompt_ids(const model_args *a, const ds_tokenizer *tok, int32_t **ids, int *n, char *err) {
    if (a->ids) return ds_cli_parse_ids(a->ids, ids, n) ? ds_seterr(err, DS_ERR_ARG, "bad --ids") : DS_OK;
    size_t cnt;
    ds_status st = ds_tokenizer_encode(tok, a->prompt, strlen(a->prompt), ds_tokenizer_add_bos(tok), ids, &cnt, err);
    *n = (int)cnt;
    return st;
}

static ds_status generate_cmd(ds_engine *eng, const model_args *a, char *err) {
    ds_tokenizer *tok = NULL;
    ds_seq *seq = NULL;
    ds_sampler *smp = NULL;
    int32_t *ids = NULL;
    int n = 0, n_gen = 0;
    print_ctx pc = {.eos = ds_engine_eos_id(eng)};
    ds_status st = a->prompt || !a->print_ids ? ds_tokenizer_load(a->model, &tok, err) : DS_OK;
    if (!st) st = prompt_ids(a, tok, &ids, &n, err);
    if (!st) st = ds_seq_new(eng, &seq, err);
    if (!st) st = ds_sampler_new(&a->sp, ds_engine_vocab_size(eng), &smp, err);
    for (int i = 0; !st && i < n; i++) ds_sampler_accept_prompt(smp, ids[i]);
    if (!st && !a->print_ids) {
        pc.detok = ds_detok_new(tok, 1);
        if (a->prompt) fputs(a->prompt, stdout);   /* echo the prompt; the continuation follows it */
    }
    if (!st) st = generate_on(eng, seq, smp, ids, n, a->n_new, a->ignore_eos, print_token, &pc, &n_gen, err);
    if (pc.detok) {
        size_t len;
        const char *rest = ds_detok_flush(pc.detok, &len);
        fwrite(rest, 1, len, stdout);
        ds_detok_free(pc.detok);
    }
    printf("\n");
    free(ids);
    ds_sampler_free(smp);
    ds_seq_free(seq);
    ds_tokenizer_free(tok);
    return st;
}

static ds_status logits_cmd(ds_engine *eng, const model_args *a, char *err) {
    ds_tokenizer *tok = NULL;
    ds_seq *seq = NULL;
    int32_t *ids = NULL;
    float *logits = NULL;
    int n = 0, V = ds_engine_vocab_size(eng);
    ds_status st = a->prompt ? ds_tokenizer_load(a->model, &tok, err) : DS_OK;
    if (!st) st = prompt_ids(a, tok, &ids, &n, err);
    if (!st && n == 0) st = ds_seterr(err, DS_ERR_ARG, "empty prompt");
    if (!st) st = ds_seq_new(eng, &seq, err);
    if (!st && !(logits = malloc(sizeof(float) * (size_t)n * (size_t)V)))
        st = ds_seterr(err, DS_ERR_NOMEM, "cannot allocate %d x %d logits", n, V);
    ds_batch_item item = {.seq = seq, .tokens = ids, .n_tokens = n, .all_logits = 1};
    if (!st) st = ds_engine_forward(eng, &item, 1, logits, err);
    if (!st) st = ds_npy_write_f32(a->out, logits, n, V, err);
    free(logits);
    free(ids);
    ds_seq_free(seq);
    ds_tokenizer_free(tok);
    return st;
}

int cli_logits(int argc, char **argv) {
    model_args a;
    int rc = model_args_parse(argc, argv, &a);
    if (rc) return rc;
    if (!a.out) { fprintf(stderr, "dsinfer logits: --out FILE.npy is required\n"); return 2; }
    /* logits is the tool that compares with a reference: its cache defaults to the reference's fp32 */
    if (!a.kv_cache_dtype) a.kv_cache_dtype = "fp32";
    char err[DS_ERRLEN];
    ds_engine *eng = NULL;
    ds_status st = model_args_open_engine(&a, &eng, err);
    if (!st) st = logits_cmd(eng, &a, err);
    rc = st ? fail(st, err) : 0;
    ds_engine_free(eng);
    return rc;
}

int cli_generate(int argc, char **argv) {
    model_args a;
    int rc = model_args_parse(argc, argv, &a);
    if (rc) return rc;
    char err[DS_ERRLEN];
    ds_engine *eng = NULL;
    ds_status st = model_args_open_engine(&a, &eng, err);
    if (!st) st = generate_cmd(eng, &a, err);
    rc = st ? fail(st, err) : 0;
    ds_engine_free(eng);
    return rc;
}
