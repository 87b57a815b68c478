/* Decoding: ids -> text, whole (HF decode) and incremental (streaming).
 *
 * Every id's bytes were computed at load (ByteLevel decoder rule), so decoding is a concatenation
 * followed by a lossy UTF-8 pass. The streaming decoder holds back a trailing sequence that is valid so
 * far but incomplete (at most 3 bytes); everything before it is final, because the lossy pass never
 * looks past the start of such a sequence. */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>

/* Appends the bytes of id (nothing for unknown ids, or skipped special tokens). */
static void put_token(const ds_tokenizer *tok, int32_t id, int skip_special, tok_buf *out) {
    if (id < 0 || id >= tok->n_ids || !(tok->flags[id] & TOKF_VALID)) return;
    if (skip_special && (tok->flags[id] & TOKF_SPECIAL)) return;
    tok_buf_put(out, tok->dec + tok->dec_off[id], tok->dec_off[id + 1] - tok->dec_off[id]);
}

ds_status ds_tokenizer_decode(const ds_tokenizer *tok, const int32_t *ids, size_t n_ids,
                              int skip_special_tokens, char **text, size_t *len, char *err) {
    (void)err;
    tok_buf raw = {0}, out = {0};
    for (size_t i = 0; i < n_ids; i++) put_token(tok, ids[i], skip_special_tokens, &raw);
    tok_utf8_lossy(&out, (const uint8_t *)raw.p, raw.len);
    tok_buf_free(&raw);
    *text = tok_buf_take(&out, len);
    return DS_OK;
}

struct ds_detok {
    const ds_tokenizer *tok;
    int skip_special;
    tok_buf pending;   /* bytes not yet emitted: an incomplete UTF-8 sequence */
    tok_buf out;       /* the last returned piece */
};

ds_detok *ds_detok_new(const ds_tokenizer *tok, int skip_special_tokens) {
    ds_detok *d = ds_xcalloc(1, sizeof *d);
    d->tok = tok;
    d->skip_special = skip_special_tokens;
    return d;
}

void ds_detok_free(ds_detok *d) {
    if (!d) return;
    tok_buf_free(&d->pending);
    tok_buf_free(&d->out);
    free(d);
}

const char *ds_detok_push(ds_detok *d, int32_t id, size_t *len) {
    put_token(d->tok, id, d->skip_special, &d->pending);
    d->out.len = 0;
    tok_buf_put(&d->out, "", 0);
    size_t n = d->pending.len, keep = tok_utf8_incomplete_tail((const uint8_t *)d->pending.p, n);
    tok_utf8_lossy(&d->out, (const uint8_t *)d->pending.p, n - keep);
    if (keep) memmove(d->pending.p, d->pending.p + n - keep, keep);
    d->pending.len = keep;
    *len = d->out.len;
    return d->out.p;
}

const char *ds_detok_flush(ds_detok *d, size_t *len) {
    d->out.len = 0;
    tok_buf_put(&d->out, "", 0);
    tok_utf8_lossy(&d->out, (const uint8_t *)d->pending.p, d->pending.len);
    d->pending.len = 0;
    *len = d->out.len;
    return d->out.p;
}
