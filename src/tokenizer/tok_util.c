/* Byte buffers and UTF-8 validation / lossy conversion for the tokenizer.
 *
 * UTF-8 rules are those of Unicode Table 3-7 (no overlongs, no surrogates, nothing past U+10FFFF).
 * Lossy conversion replaces each "maximal subpart of an ill-formed subsequence" with one U+FFFD, as
 * Rust's String::from_utf8_lossy does (HF tokenizers' decode uses it). */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>

void tok_buf_put(tok_buf *b, const void *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1) cap *= 2;
        b->p = ds_xrealloc(b->p, cap);
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void tok_buf_free(tok_buf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

char *tok_buf_take(tok_buf *b, size_t *len) {
    if (!b->p) tok_buf_put(b, "", 0);
    char *p = b->p;
    if (len) *len = b->len;
    b->p = NULL;
    b->len = b->cap = 0;
    return p;
}

/* Classifies the UTF-8 sequence at s[0..n), n >= 1. Returns 1 (valid, *used = its length), 0 (invalid,
 * *used = length of the maximal invalid subpart, >= 1) or -1 (a valid but incomplete prefix that runs to
 * the end of the input, *used = n). */
static int utf8_seq(const uint8_t *s, size_t n, size_t *used) {
    uint8_t c = s[0];
    if (c < 0x80) { *used = 1; return 1; }
    int need; uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c >= 0xE0 && c <= 0xEF) { need = 2; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { need = 3; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else { *used = 1; return 0; }
    size_t i = 1;
    for (; i <= (size_t)need; i++) {
        if (i >= n) { *used = n; return -1; }
        uint8_t lim_lo = i == 1 ? lo : 0x80, lim_hi = i == 1 ? hi : 0xBF;
        if (s[i] < lim_lo || s[i] > lim_hi) { *used = i; return 0; }
    }
    *used = i;
    return 1;
}

size_t tok_utf8_valid_prefix(const uint8_t *s, size_t n) {
    size_t i = 0, used;
    while (i < n) {
        if (s[i] < 0x80) { i++; continue; }
        if (utf8_seq(s + i, n - i, &used) != 1) return i;
        i += used;
    }
    return n;
}

void tok_utf8_lossy(tok_buf *out, const uint8_t *s, size_t n) {
    size_t i = 0, run = 0, used;
    if (!n) return;   /* s may be NULL */
    while (i < n) {
        int r = s[i] < 0x80 ? 1 : utf8_seq(s + i, n - i, &used);
        if (r == 1) { i += s[i] < 0x80 ? 1 : used; continue; }
        tok_buf_put(out, s + run, i - run);
        tok_buf_put(out, "\xEF\xBF\xBD", 3);
        i += used;
        run = i;
    }
    tok_buf_put(out, s + run, n - run);
}

size_t tok_utf8_incomplete_tail(const uint8_t *s, size_t n) {
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        uint8_t c = s[n - k];
        if ((c & 0xC0) == 0x80) continue;          /* continuation byte: keep looking for the lead */
        size_t used;
        return utf8_seq(s + n - k, k, &used) == -1 ? k : 0;
    }
    return 0;
}

/* ---- string map ---- */
static uint32_t str_hash(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ULL;
    return (uint32_t)(h ^ (h >> 32));
}

void tok_strmap_init(tok_strmap *m, size_t n_entries) {
    uint32_t cap = 16;
    while (cap < 2 * n_entries) cap *= 2;
    m->cap = cap;
    m->slot = ds_xmalloc(cap * sizeof *m->slot);
    for (uint32_t i = 0; i < cap; i++) m->slot[i].id = -1;
    memset(&m->blob, 0, sizeof m->blob);
}

void tok_strmap_put(tok_strmap *m, const char *s, size_t n, int32_t id) {
    uint32_t h = str_hash(s, n), mask = m->cap - 1;
    for (uint32_t i = h & mask;; i = (i + 1) & mask) {
        tok_strslot *e = &m->slot[i];
        if (e->id >= 0 && (e->hash != h || e->len != n || memcmp(m->blob.p + e->off, s, n))) continue;
        if (e->id < 0) {
            DS_CHECK(m->blob.len + n < UINT32_MAX);
            e->off = (uint32_t)m->blob.len; e->len = (uint32_t)n; e->hash = h;
            tok_buf_put(&m->blob, s, n);
        }
        e->id = id;
        return;
    }
}

int tok_strmap_get(const tok_strmap *m, const char *s, size_t n) {
    uint32_t h = str_hash(s, n), mask = m->cap - 1;
    for (uint32_t i = h & mask;; i = (i + 1) & mask) {
        const tok_strslot *e = &m->slot[i];
        if (e->id < 0) return -1;
        if (e->hash == h && e->len == n && !memcmp(m->blob.p + e->off, s, n)) return e->id;
    }
}

void tok_strmap_free(tok_strmap *m) {
    free(m->slot);
    m->slot = NULL;
    tok_buf_free(&m->blob);
}

/* ---- Unicode White_Space ---- */
static int is_ws(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Decodes the (valid) UTF-8 char at s; *k = its length. */
static uint32_t cp_at(const uint8_t *s, size_t *k) {
    if (s[0] < 0x80) { *k = 1; return s[0]; }
    if (s[0] < 0xE0) { *k = 2; return ((s[0] & 0x1Fu) << 6) | (s[1] & 0x3Fu); }
    if (s[0] < 0xF0) { *k = 3; return ((s[0] & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu); }
    *k = 4;
    return ((s[0] & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
}

size_t tok_ws_prefix(const uint8_t *s, size_t n) {
    size_t i = 0, k;
    while (i < n && is_ws(cp_at(s + i, &k))) i += k;
    return i;
}

size_t tok_ws_suffix(const uint8_t *s, size_t n) {
    size_t i = n, k;
    while (i > 0) {
        size_t j = i - 1;
        while (j > 0 && (s[j] & 0xC0) == 0x80) j--;
        if (!is_ws(cp_at(s + j, &k))) break;
        i = j;
    }
    return n - i;
}
