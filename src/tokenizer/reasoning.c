/* R1 reasoning parsing (spec 16): generated text -> reasoning_content and content, streaming-safe.
 *
 * In reasoning mode the text is scanned for "<think>" (dropped: R1-0528 may emit it) and "</think>" (the
 * switch to content, also dropped). A tail of the text that is a proper prefix of either tag is held back
 * until the next feed decides it. In content mode text passes through untouched, later tags included. */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>

static const char THINK_OPEN[] = "<think>", THINK_CLOSE[] = "</think>";

struct ds_reasoning {
    int in_reasoning;
    tok_buf hold;     /* undecided text (a possible tag prefix), or text being scanned */
    tok_buf rbuf, cbuf;
};

ds_reasoning *ds_reasoning_new(int start_in_reasoning) {
    ds_reasoning *r = ds_xcalloc(1, sizeof *r);
    r->in_reasoning = start_in_reasoning;
    return r;
}

void ds_reasoning_free(ds_reasoning *r) {
    if (!r) return;
    tok_buf_free(&r->hold); tok_buf_free(&r->rbuf); tok_buf_free(&r->cbuf);
    free(r);
}

int ds_reasoning_in_reasoning(const ds_reasoning *r) { return r->in_reasoning; }

/* Length of the longest suffix of s[0..n) that is a proper prefix of tag. */
static size_t partial_tag(const char *s, size_t n, const char *tag) {
    size_t t = strlen(tag);
    for (size_t k = t - 1 < n ? t - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, tag, k)) return k;
    return 0;
}

static const char *find(const char *s, size_t n, const char *tag) {
    return memmem(s, n, tag, strlen(tag));
}

/* Consumes hold as far as it is decided, appending to rbuf/cbuf. */
static void scan(ds_reasoning *r, int final) {
    const char *s = r->hold.p;
    size_t n = r->hold.len, i = 0;
    while (i < n && r->in_reasoning) {
        const char *o = find(s + i, n - i, THINK_OPEN), *c = find(s + i, n - i, THINK_CLOSE);
        if (o && (!c || o < c)) {   /* a <think> inside reasoning: drop it */
            tok_buf_put(&r->rbuf, s + i, (size_t)(o - (s + i)));
            i = (size_t)(o - s) + strlen(THINK_OPEN);
        } else if (c) {
            tok_buf_put(&r->rbuf, s + i, (size_t)(c - (s + i)));
            i = (size_t)(c - s) + strlen(THINK_CLOSE);
            r->in_reasoning = 0;
        } else {
            size_t keep = final ? 0 : partial_tag(s + i, n - i, THINK_OPEN);
            size_t keep2 = final ? 0 : partial_tag(s + i, n - i, THINK_CLOSE);
            if (keep2 > keep) keep = keep2;
            tok_buf_put(&r->rbuf, s + i, n - i - keep);
            i = n - keep;
            break;
        }
    }
    if (!r->in_reasoning) { tok_buf_put(&r->cbuf, s + i, n - i); i = n; }
    memmove(r->hold.p, s + i, n - i);
    r->hold.len = n - i;
}

static void deliver(ds_reasoning *r, ds_reasoning_delta *d) {
    tok_buf_put(&r->rbuf, "", 0);
    tok_buf_put(&r->cbuf, "", 0);
    d->reasoning = r->rbuf.p; d->reasoning_len = r->rbuf.len;
    d->content = r->cbuf.p; d->content_len = r->cbuf.len;
}

void ds_reasoning_feed(ds_reasoning *r, const char *text, size_t len, ds_reasoning_delta *d) {
    r->rbuf.len = r->cbuf.len = 0;
    tok_buf_put(&r->hold, text, len);
    scan(r, 0);
    deliver(r, d);
}

void ds_reasoning_finish(ds_reasoning *r, ds_reasoning_delta *d) {
    r->rbuf.len = r->cbuf.len = 0;
    tok_buf_put(&r->hold, "", 0);
    scan(r, 1);
    deliver(r, d);
}
