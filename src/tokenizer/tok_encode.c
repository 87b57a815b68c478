/* Encoding: text -> ids, the same steps as HF tokenizers' encode(text, add_special_tokens=False).
 *
 *   1. added tokens: leftmost-longest literal matches of the normalized:false tokens, then, in the
 *      stretches between them, of the normalized:true ones (the normalizer is the identity);
 *   2. pre-tokenizer: each Split regex runs on every piece left by the previous one ("Isolated": matches
 *      and the gaps between them all become pieces; empty pieces vanish). A piece is its own subject, so
 *      a lookahead such as (?!\S) sees the end of the piece, as in HF;
 *   3. BPE on each piece: start from the byte-level char of each byte, repeatedly merge the adjacent pair
 *      of lowest merge rank (leftmost first on ties), emit the ids.
 * Pieces are spans of the input (no copies); the recursion walks them depth-first. BPE results of short
 * pieces are memoized for the duration of one call (natural text repeats its words), so the tokenizer
 * itself stays immutable and encode may run on several threads at once. */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>

typedef struct {
    int32_t id;
    int32_t prev, next;   /* neighbour symbol indices, -1 = none */
    int alive;
} bpe_sym;

typedef struct {
    int32_t rank, pos, id;
} bpe_cand;

/* Memo of one encode call: piece bytes -> its BPE ids. */
typedef struct {
    uint32_t hash, key_off, key_len, ids_off, n_ids;   /* key_len 0 = empty slot */
} memo_slot;

#define MEMO_MAX_PIECE 64         /* longer pieces are rare and not memoized */
#define MEMO_MAX_SLOTS (1u << 18)

typedef struct {
    memo_slot *slot;
    uint32_t cap, used;
    tok_buf keys;
    int32_t *ids; size_t n_ids, cap_ids;
} enc_memo;

typedef struct {
    const ds_tokenizer *tok;
    enc_memo memo;
    pcre2_match_data *md;
    int32_t *ids; size_t n, cap;       /* output */
    bpe_sym *sym; size_t sym_cap;      /* BPE scratch */
    bpe_cand *heap; size_t heap_cap;
    tok_buf scratch;                   /* ByteLevel prefix-space copy of a piece */
    ds_status st;
    char *err;
} enc_ctx;

static void push_id(enc_ctx *c, int32_t id) {
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 256;
        c->ids = ds_xrealloc(c->ids, c->cap * sizeof *c->ids);
    }
    c->ids[c->n++] = id;
}

/* ---- BPE ---- */
static int cand_less(const bpe_cand *a, const bpe_cand *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(enc_ctx *c, size_t *hn, bpe_cand v) {
    size_t i = (*hn)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&v, &c->heap[p])) break;
        c->heap[i] = c->heap[p];
        i = p;
    }
    c->heap[i] = v;
}

static bpe_cand heap_pop(enc_ctx *c, size_t *hn) {
    bpe_cand top = c->heap[0], last = c->heap[--*hn];
    size_t i = 0, n = *hn;
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        const bpe_cand *best = &last;
        if (l < n && cand_less(&c->heap[l], best)) { m = l; best = &c->heap[l]; }
        if (l + 1 < n && cand_less(&c->heap[l + 1], best)) m = l + 1;
        if (m == i) break;
        c->heap[i] = c->heap[m];
        i = m;
    }
    if (n) c->heap[i] = last;
    return top;
}

/* Queues the pair starting at symbol i if it has a merge. */
static void queue_pair(enc_ctx *c, size_t *hn, int32_t i) {
    if (i < 0 || c->sym[i].next < 0) return;
    const tok_merge *m = tok_merge_get(c->tok, c->sym[i].id, c->sym[c->sym[i].next].id);
    if (m) heap_push(c, hn, (bpe_cand){m->rank, i, m->id});
}

static void ensure_scratch(enc_ctx *c, size_t n) {
    if (n > c->sym_cap) {
        c->sym_cap = n;
        c->sym = ds_xrealloc(c->sym, n * sizeof *c->sym);
    }
    if (n * 2 + 8 > c->heap_cap) {   /* at most n initial pairs + 2 per merge */
        c->heap_cap = n * 3 + 8;
        c->heap = ds_xrealloc(c->heap, c->heap_cap * sizeof *c->heap);
    }
}

/* ignore_merges: a piece that is itself a vocab entry is emitted whole. */
static int whole_piece(enc_ctx *c, const uint8_t *s, size_t n) {
    const ds_tokenizer *tok = c->tok;
    tok_buf b = {0};
    size_t i = 0;
    for (; i < n && tok->byte_id[s[i]] >= 0; i++) {
        int32_t bid = tok->byte_id[s[i]];
        tok_buf_put(&b, tok->text + tok->text_off[bid], tok->text_len[bid]);
    }
    int id = i == n ? tok_strmap_get(&tok->vocab, b.p, b.len) : -1;
    tok_buf_free(&b);
    if (id >= 0) push_id(c, id);
    return id >= 0;
}

/* ---- memo ---- */
static uint32_t memo_hash(const uint8_t *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 16777619u;
    return h | 1;
}

static memo_slot *memo_find(enc_memo *m, const uint8_t *s, size_t n, uint32_t h) {
    uint32_t mask = m->cap - 1;
    for (uint32_t i = h & mask;; i = (i + 1) & mask) {
        memo_slot *e = &m->slot[i];
        if (!e->key_len || (e->hash == h && e->key_len == n && !memcmp(m->keys.p + e->key_off, s, n))) return e;
    }
}

static void memo_grow(enc_memo *m) {
    uint32_t old_cap = m->cap;
    memo_slot *old = m->slot;
    m->cap = old_cap ? 2 * old_cap : 256;
    m->slot = ds_xcalloc(m->cap, sizeof *m->slot);
    for (uint32_t i = 0; i < old_cap; i++) {
        if (!old[i].key_len) continue;
        uint32_t mask = m->cap - 1, j = old[i].hash & mask;
        while (m->slot[j].key_len) j = (j + 1) & mask;
        m->slot[j] = old[i];
    }
    free(old);
}

/* Records piece s -> ids[0..k). */
static void memo_put(enc_memo *m, const uint8_t *s, size_t n, uint32_t h, const int32_t *ids, size_t k) {
    if (2 * (m->used + 1) > m->cap) {
        if (m->cap >= MEMO_MAX_SLOTS) return;
        memo_grow(m);
    }
    memo_slot *e = memo_find(m, s, n, h);
    if (m->n_ids + k > m->cap_ids) {
        while (m->n_ids + k > m->cap_ids) m->cap_ids = m->cap_ids ? 2 * m->cap_ids : 512;
        m->ids = ds_xrealloc(m->ids, m->cap_ids * sizeof *m->ids);
    }
    *e = (memo_slot){h, (uint32_t)m->keys.len, (uint32_t)n, (uint32_t)m->n_ids, (uint32_t)k};
    tok_buf_put(&m->keys, s, n);
    memcpy(m->ids + m->n_ids, ids, k * sizeof *ids);
    m->n_ids += k;
    m->used++;
}

static void memo_free(enc_memo *m) {
    free(m->slot);
    free(m->ids);
    tok_buf_free(&m->keys);
}

static void bpe_merge(enc_ctx *c, const uint8_t *s, size_t n);

/* BPE of one piece, through the memo. */
static void bpe(enc_ctx *c, const uint8_t *s, size_t n) {
    const ds_tokenizer *tok = c->tok;
    if (n == 1) { if (tok->byte_id[s[0]] >= 0) push_id(c, tok->byte_id[s[0]]); return; }
    if (n > MEMO_MAX_PIECE) { bpe_merge(c, s, n); return; }
    uint32_t h = memo_hash(s, n);
    if (c->memo.cap) {
        memo_slot *e = memo_find(&c->memo, s, n, h);
        if (e->key_len) {
            for (uint32_t i = 0; i < e->n_ids; i++) push_id(c, c->memo.ids[e->ids_off + i]);
            return;
        }
    }
    size_t start = c->n;
    bpe_merge(c, s, n);
    memo_put(&c->memo, s, n, h, c->ids + start, c->n - start);
}

static void bpe_merge(enc_ctx *c, const uint8_t *s, size_t n) {
    const ds_tokenizer *tok = c->tok;
    if (tok->ignore_merges && whole_piece(c, s, n)) return;
    ensure_scratch(c, n);
    int32_t ns = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = tok->byte_id[s[i]];
        if (id < 0) continue;   /* no token for this byte and no unk: HF drops it */
        c->sym[ns] = (bpe_sym){id, ns - 1, -1, 1};
        if (ns > 0) c->sym[ns - 1].next = ns;
        ns++;
    }
    size_t hn = 0;
    for (int32_t i = 0; i + 1 < ns; i++) queue_pair(c, &hn, i);
    while (hn) {
        bpe_cand top = heap_pop(c, &hn);
        bpe_sym *a = &c->sym[top.pos];
        if (!a->alive || a->next < 0) continue;
        const tok_merge *m = tok_merge_get(tok, a->id, c->sym[a->next].id);
        if (!m || m->id != top.id) continue;   /* stale: a neighbour changed since it was queued */
        bpe_sym *b = &c->sym[a->next];
        a->id = top.id;
        a->next = b->next;
        b->alive = 0;
        if (b->next >= 0) c->sym[b->next].prev = top.pos;
        queue_pair(c, &hn, a->prev);
        queue_pair(c, &hn, top.pos);
    }
    for (int32_t i = ns ? 0 : -1; i >= 0; i = c->sym[i].next) push_id(c, c->sym[i].id);
}

/* ---- pre-tokenizer ---- */
static void pretok(enc_ctx *c, const uint8_t *s, size_t n, int step);

/* Next match of re in s[0..n) at or after *pos: 1 (match [*ms, *me)), 0 (none) or -1 (error, set in c).
 * After an empty match the search resumes one character further (Oniguruma's find_iter, used by HF). */
static int next_match(enc_ctx *c, pcre2_code *re, const uint8_t *s, size_t n, size_t *pos, size_t *ms, size_t *me) {
    if (*pos > n) return 0;
    int rc = pcre2_match(re, s, n, *pos, PCRE2_NO_UTF_CHECK, c->md, NULL);
    if (rc == PCRE2_ERROR_NOMATCH) return 0;
    if (rc < 0) {
        PCRE2_UCHAR msg[128];
        pcre2_get_error_message(rc, msg, sizeof msg);
        c->st = ds_seterr(c->err, DS_ERR_ARG, "pre-tokenizer regex failed: %s", (char *)msg);
        return -1;
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
    *ms = ov[0];
    *me = ov[1];
    *pos = *me;
    if (*me == *ms) {
        *pos = *me + 1;
        while (*pos < n && (s[*pos] & 0xC0) == 0x80) (*pos)++;
    }
    return 1;
}

/* Split(Isolated), the common case, streamed: recurse into every match and every gap. */
static void split_isolated(enc_ctx *c, pcre2_code *re, const uint8_t *s, size_t n, int next) {
    size_t pos = 0, prev = 0, ms, me;
    while (!c->st && next_match(c, re, s, n, &pos, &ms, &me) > 0) {
        if (ms > prev) pretok(c, s + prev, ms - prev, next);
        if (me > ms) pretok(c, s + ms, me - ms, next);
        prev = me;
    }
    if (prev < n && !c->st) pretok(c, s + prev, n - prev, next);
}

typedef struct { size_t start, end; int match; } split_piece;

static void pieces_push(split_piece **p, size_t *np, size_t *cap, size_t start, size_t end, int match) {
    if (*np == *cap) *p = ds_xrealloc(*p, (*cap = *cap ? 2 * *cap : 16) * sizeof **p);
    (*p)[(*np)++] = (split_piece){start, end, match};
}

/* HF NormalizedString::split for the other behaviors: list matches and gaps (flags flipped by invert),
 * merge them as the behavior says, recurse into the non-empty results. */
static void split_general(enc_ctx *c, const tok_pretok_step *st, const uint8_t *s, size_t n, int next) {
    split_piece *m = NULL, *out = NULL;
    size_t nm = 0, cm = 0, no = 0, co = 0, pos = 0, prev = 0, ms, me;
    while (!c->st && next_match(c, st->re, s, n, &pos, &ms, &me) > 0) {
        if (ms > prev) pieces_push(&m, &nm, &cm, prev, ms, 0);
        pieces_push(&m, &nm, &cm, ms, me, 1);
        prev = me;
    }
    if (prev < n) pieces_push(&m, &nm, &cm, prev, n, 0);
    for (size_t i = 0; i < nm; i++) m[i].match ^= st->invert;
    int prev_match = 0;
    if (st->behavior == SPLIT_MERGED_NEXT) {           /* walk backwards, merge a match into the next */
        for (size_t i = nm; i-- > 0;) {
            if (m[i].match && !prev_match && no) out[no - 1].start = m[i].start;
            else pieces_push(&out, &no, &co, m[i].start, m[i].end, 0);
            prev_match = m[i].match;
        }
        for (size_t i = 0; i < no / 2; i++) { split_piece t = out[i]; out[i] = out[no - 1 - i]; out[no - 1 - i] = t; }
    } else {
        for (size_t i = 0; i < nm; i++) {
            int merge = st->behavior == SPLIT_MERGED_PREV ? m[i].match && !prev_match
                      : st->behavior == SPLIT_CONTIGUOUS ? m[i].match == prev_match : 0;
            if (st->behavior == SPLIT_REMOVED && m[i].match) continue;
            if (merge && no) out[no - 1].end = m[i].end;
            else pieces_push(&out, &no, &co, m[i].start, m[i].end, 0);
            prev_match = m[i].match;
        }
    }
    for (size_t i = 0; i < no && !c->st; i++)
        if (out[i].end > out[i].start) pretok(c, s + out[i].start, out[i].end - out[i].start, next);
    free(m);
    free(out);
}

/* ByteLevel: optional prefix space (HF adds it to every piece that lacks one), optional GPT-2 split. */
static void byte_level(enc_ctx *c, const tok_pretok_step *st, const uint8_t *s, size_t n, int next) {
    if (st->add_prefix_space && s[0] != ' ') {
        c->scratch.len = 0;
        tok_buf_put(&c->scratch, " ", 1);
        tok_buf_put(&c->scratch, s, n);
        s = (const uint8_t *)c->scratch.p;   /* safe: nothing below re-enters this step */
        n = c->scratch.len;
    }
    if (st->re) split_isolated(c, st->re, s, n, next);
    else pretok(c, s, n, next);
}

static void pretok(enc_ctx *c, const uint8_t *s, size_t n, int step) {
    if (step == c->tok->n_steps) { bpe(c, s, n); return; }
    const tok_pretok_step *st = &c->tok->steps[step];
    if (st->kind == STEP_BYTELEVEL) byte_level(c, st, s, n, step + 1);
    else if (st->behavior == SPLIT_ISOLATED && !st->invert) split_isolated(c, st->re, s, n, step + 1);
    else split_general(c, st, s, n, step + 1);
}

/* ---- added tokens ---- */
/* Longest added token of t starting at s[0..n); returns its length (0 = none), id in *id. */
static size_t trie_longest(const tok_trie *t, const uint8_t *s, size_t n, int32_t *id) {
    int cur = 0;
    size_t best = 0;
    for (size_t i = 0; i < n; i++) {
        int k = t->n[cur].child;
        while (k >= 0 && t->n[k].byte != s[i]) k = t->n[k].sibling;
        if (k < 0) break;
        cur = k;
        if (t->n[k].id >= 0) { best = i + 1; *id = t->n[k].id; }
    }
    return best;
}

/* pass 0: normalized:false tokens; pass 1: normalized:true tokens; then the pre-tokenizer. */
static void split_added(enc_ctx *c, const uint8_t *s, size_t n, int pass) {
    if (pass == 2) { if (n) pretok(c, s, n, 0); return; }
    const tok_trie *t = pass == 0 ? &c->tok->trie_raw : &c->tok->trie_norm;
    size_t start = 0;
    for (size_t i = 0; i < n && !c->st;) {
        int32_t id;
        size_t len = t->first[s[i]] ? trie_longest(t, s + i, n - i, &id) : 0;
        if (!len) { i++; continue; }
        size_t ms = i, me = i + len;
        /* lstrip/rstrip: the token also takes the whitespace around it (not before the last split) */
        if (c->tok->flags[id] & TOKF_LSTRIP) ms -= tok_ws_suffix(s + start, ms - start);
        if (c->tok->flags[id] & TOKF_RSTRIP) me += tok_ws_prefix(s + me, n - me);
        split_added(c, s + start, ms - start, pass + 1);
        push_id(c, id);
        i = start = me;
    }
    if (!c->st) split_added(c, s + start, n - start, pass + 1);
}

ds_status ds_tokenizer_encode(const ds_tokenizer *tok, const char *text, size_t len, int add_bos,
                              int32_t **ids, size_t *n_ids, char *err) {
    *ids = NULL;
    *n_ids = 0;
    size_t ok = tok_utf8_valid_prefix((const uint8_t *)text, len);
    if (ok != len) return ds_seterr(err, DS_ERR_ARG, "input is not valid UTF-8 (byte offset %zu)", ok);
    if (add_bos && tok->bos_id < 0) return ds_seterr(err, DS_ERR_ARG, "this tokenizer has no BOS token");
    enc_ctx c = {.tok = tok, .err = err};
    if (add_bos) push_id(&c, tok->bos_id);
    if (!len) {   /* nothing to split (text may be NULL) */
        *ids = c.ids ? c.ids : ds_xmalloc(sizeof(int32_t));
        *n_ids = c.n;
        return DS_OK;
    }
    c.md = pcre2_match_data_create(1, NULL);
    split_added(&c, (const uint8_t *)text, len, 0);
    pcre2_match_data_free(c.md);
    memo_free(&c.memo);
    tok_buf_free(&c.scratch);
    free(c.sym);
    free(c.heap);
    if (c.st) { free(c.ids); return c.st; }
    *ids = c.ids ? c.ids : ds_xmalloc(sizeof(int32_t));
    *n_ids = c.n;
    return DS_OK;
}
