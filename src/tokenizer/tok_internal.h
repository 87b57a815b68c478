/* Internals of src/tokenizer/: the loaded tokenizer and the helpers its files share.
 * Only the src/tokenizer .c files include this; everyone else uses tokenizer.h. */
#ifndef DS_TOK_INTERNAL_H
#define DS_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdint.h>
#include <string.h>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

/* ---- growable byte buffer ---- */
typedef struct {
    char *p;
    size_t len, cap;
} tok_buf;
void tok_buf_put(tok_buf *b, const void *s, size_t n);
static inline void tok_buf_puts(tok_buf *b, const char *s) { tok_buf_put(b, s, strlen(s)); }
void tok_buf_free(tok_buf *b);
/* Returns b's content NUL-terminated and owned by the caller; b is left empty. */
char *tok_buf_take(tok_buf *b, size_t *len);

/* ---- UTF-8 ---- */
/* Length of the longest valid UTF-8 prefix of s[0..n) (n if all valid). */
size_t tok_utf8_valid_prefix(const uint8_t *s, size_t n);
/* Appends s[0..n) to out with each maximal invalid subpart replaced by U+FFFD (Rust from_utf8_lossy). */
void tok_utf8_lossy(tok_buf *out, const uint8_t *s, size_t n);
/* Length of a trailing incomplete-but-valid-so-far UTF-8 sequence of s[0..n) (0..3). */
size_t tok_utf8_incomplete_tail(const uint8_t *s, size_t n);
/* Byte length of the run of Unicode White_Space chars (Rust char::is_whitespace) that starts s[0..n) /
 * ends s[0..n). s is valid UTF-8. */
size_t tok_ws_prefix(const uint8_t *s, size_t n);
size_t tok_ws_suffix(const uint8_t *s, size_t n);

/* ---- string -> id map (open addressing; owns a copy of its keys) ---- */
typedef struct {
    int32_t id;       /* -1 = empty */
    uint32_t off, len;/* key = blob[off .. off + len) */
    uint32_t hash;
} tok_strslot;
typedef struct {
    tok_strslot *slot;  /* [cap] */
    uint32_t cap;       /* power of two, >= 2 x entries */
    tok_buf blob;
} tok_strmap;
void tok_strmap_init(tok_strmap *m, size_t n_entries);
/* Inserts (or overwrites) key -> id. */
void tok_strmap_put(tok_strmap *m, const char *s, size_t n, int32_t id);
void tok_strmap_free(tok_strmap *m);

/* ---- (left id, right id) -> merge (open addressing) ---- */
typedef struct {
    uint64_t key;     /* (left << 32 | right) + 1; 0 = empty */
    int32_t rank;
    int32_t id;       /* id of the merged token */
} tok_merge;

/* Added-token trie: children as sibling lists (few hundred tokens, all bytes). */
typedef struct {
    int32_t child, sibling;  /* node indices, -1 = none */
    int32_t id;              /* token id ending here, -1 = none */
    uint8_t byte;
} tok_trie_node;
typedef struct {
    tok_trie_node *n;
    int len, cap;
    uint8_t first[256];      /* 1 if some token starts with this byte */
} tok_trie;

enum { TOKF_VALID = 1, TOKF_ADDED = 2, TOKF_SPECIAL = 4, TOKF_LSTRIP = 8, TOKF_RSTRIP = 16 };

/* One pre-tokenizer step. A Split cuts every piece by its regex (HF SplitDelimiterBehavior); ByteLevel
 * is last: it may prepend a space to each piece, then cuts it by GPT-2's regex when use_regex. */
typedef enum { STEP_SPLIT, STEP_BYTELEVEL } tok_step_kind;
typedef enum { SPLIT_ISOLATED, SPLIT_REMOVED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT, SPLIT_CONTIGUOUS } tok_split_behavior;
typedef struct {
    tok_step_kind kind;
    pcre2_code *re;              /* NULL: ByteLevel without use_regex */
    tok_split_behavior behavior;
    int invert;                  /* Split: matches and gaps swap roles */
    int add_prefix_space;        /* ByteLevel */
} tok_pretok_step;

#define TOK_MAX_STEPS 8

struct ds_tokenizer {
    int n_ids;                 /* max id + 1 */
    char *text;                /* all token texts, NUL-separated */
    uint32_t *text_off;        /* [n_ids] offset into text; UINT32_MAX = no token */
    uint32_t *text_len;        /* [n_ids] */
    uint8_t *dec;              /* decoded bytes of all tokens */
    uint32_t *dec_off;         /* [n_ids + 1] token i decodes to dec[dec_off[i] .. dec_off[i+1]) */
    uint8_t *flags;            /* [n_ids] TOKF_* */
    tok_strmap vocab;          /* model vocab text -> id */
    tok_strmap added;          /* added-token text -> id */
    tok_merge *merges;         /* [merge_cap] */
    uint32_t merge_cap;        /* power of two */
    int32_t byte_id[256];      /* id of the one-char token of each byte; -1 = absent (byte dropped) */
    int ignore_merges;
    tok_trie trie_raw;         /* added tokens with normalized: false (matched first) */
    tok_trie trie_norm;        /* added tokens with normalized: true */
    tok_pretok_step steps[TOK_MAX_STEPS];
    int n_steps;
    int bos_id, eos_id, add_bos;
    char *bos_text, *eos_text; /* NUL-terminated; may be NULL */
    char *chat_template;       /* may be NULL */
    ds_chat_template tpl;      /* detected family, DS_CHAT_AUTO if unknown */
    int tpl_sys_last;          /* the template keeps only the last system message (else joins with "\n\n") */
    char tpl_err[DS_ERRLEN];   /* why detection failed */
};

/* ds_chat_template_detect plus the variant flag: *sys_last = 1 when the template keeps only the last system
 * message (older DeepSeek templates) instead of joining them with "\n\n". */
ds_status tok_chat_detect(const char *jinja, ds_chat_template *out, int *sys_last, char *err);

/* Looks up a key of n bytes; -1 if absent. */
int tok_strmap_get(const tok_strmap *m, const char *s, size_t n);

static inline uint64_t tok_hash_u64(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33;
    return x;
}

/* Merge of (a, b) or NULL. */
static inline const tok_merge *tok_merge_get(const ds_tokenizer *tok, int32_t a, int32_t b) {
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    uint32_t mask = tok->merge_cap - 1;
    for (uint32_t i = (uint32_t)tok_hash_u64(key) & mask;; i = (i + 1) & mask) {
        const tok_merge *m = &tok->merges[i];
        if (m->key == key) return m;
        if (m->key == 0) return NULL;
    }
}

#endif
