/* Loading tokenizer.json + tokenizer_config.json into a ds_tokenizer.
 *
 * The JSON is parsed with cJSON, checked component by component (anything not supported is named in
 * the error), and turned into flat tables: token texts and decoded bytes by id, a vocab hash map, a
 * merge hash map keyed by (left id, right id), two added-token tries and the compiled pre-tokenizer
 * regexes. The cJSON tree is freed before returning. */
#include "tokenizer/tok_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- GPT-2 byte <-> char mapping ---- */
/* cp_of_byte[b]: the code point that byte b is written as in byte-level token texts. */
static void byte_level_map(uint32_t cp_of_byte[256]) {
    uint32_t extra = 0;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        cp_of_byte[b] = keep ? (uint32_t)b : 256 + extra++;
    }
}

static size_t put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    DS_CHECK(cp < 0x800);   /* byte-level chars are all below U+0144 */
    o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* ---- files ---- */
static ds_status read_file(const char *path, char **out, char *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return ds_seterr(err, DS_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    tok_buf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) tok_buf_put(&b, chunk, n);
    int bad = ferror(f);
    fclose(f);
    if (bad) { tok_buf_free(&b); return ds_seterr(err, DS_ERR_IO, "cannot read %s", path); }
    *out = tok_buf_take(&b, NULL);
    return DS_OK;
}

static ds_status parse_json_file(const char *path, cJSON **out, char *err) {
    char *text;
    ds_status st = read_file(path, &text, err);
    if (st) return st;
    *out = cJSON_Parse(text);
    free(text);
    if (!*out) return ds_seterr(err, DS_ERR_FORMAT, "%s: not valid JSON", path);
    return DS_OK;
}

static const char *json_type(const cJSON *o) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(t) ? t->valuestring : "(no type)";
}

static int json_true(const cJSON *o, const char *key) {
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, key));
}

/* ---- model: vocab and merges ---- */
static ds_status check_model(const cJSON *model, char *err) {
    if (!cJSON_IsObject(model)) return ds_seterr(err, DS_ERR_FORMAT, "tokenizer.json: no \"model\"");
    if (strcmp(json_type(model), "BPE"))
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "tokenizer.json: model type %s (only BPE)", json_type(model));
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (cJSON_IsNumber(d) && d->valuedouble != 0)
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "tokenizer.json: BPE dropout");
    const char *keys[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(model, keys[i]);
        if (cJSON_IsString(s) && s->valuestring[0])
            return ds_seterr(err, DS_ERR_UNSUPPORTED, "tokenizer.json: BPE %s", keys[i]);
    }
    if (json_true(model, "byte_fallback"))
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "tokenizer.json: BPE byte_fallback");
    return DS_OK;
}

/* Sets tok->n_ids from the largest id in vocab and added_tokens. */
static ds_status count_ids(ds_tokenizer *tok, const cJSON *vocab, const cJSON *added, char *err) {
    int max_id = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > 1e8)
            return ds_seterr(err, DS_ERR_FORMAT, "tokenizer.json: vocab entry %s has a bad id", e->string);
        if (e->valueint > max_id) max_id = e->valueint;
    }
    cJSON_ArrayForEach(e, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble > 1e8)
            return ds_seterr(err, DS_ERR_FORMAT, "tokenizer.json: added token with a bad id");
        if (id->valueint > max_id) max_id = id->valueint;
    }
    if (max_id < 0) return ds_seterr(err, DS_ERR_FORMAT, "tokenizer.json: empty vocab");
    tok->n_ids = max_id + 1;
    return DS_OK;
}

static ds_status load_vocab(ds_tokenizer *tok, const cJSON *vocab, char *err) {
    tok_strmap_init(&tok->vocab, (size_t)cJSON_GetArraySize(vocab));
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab) tok_strmap_put(&tok->vocab, e->string, strlen(e->string), e->valueint);
    (void)err;
    return DS_OK;
}

/* One merge "a b" or ["a", "b"] -> (left, right) ids and the merged id. */
static ds_status merge_ids(const ds_tokenizer *tok, const cJSON *m, int rank, int32_t ids[3], char *err) {
    const char *a, *b; size_t na, nb;
    if (cJSON_IsString(m)) {
        const char *sp = strchr(m->valuestring, ' ');
        if (!sp || strchr(sp + 1, ' '))
            return ds_seterr(err, DS_ERR_FORMAT, "tokenizer.json: merge %d \"%s\" is not \"a b\"", rank, m->valuestring);
        a = m->valuestring; na = (size_t)(sp - a); b = sp + 1; nb = strlen(b);
    } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
               cJSON_IsString(m->child->next)) {
        a = m->child->valuestring; na = strlen(a); b = m->child->next->valuestring; nb = strlen(b);
    } else {
        return ds_seterr(err, DS_ERR_FORMAT, "tokenizer.json: merge %d is neither \"a b\" nor [a, b]", rank);
    }
    char *ab = ds_xmalloc(na + nb);
    memcpy(ab, a, na); memcpy(ab + na, b, nb);
    ids[0] = tok_strmap_get(&tok->vocab, a, na);
    ids[1] = tok_strmap_get(&tok->vocab, b, nb);
    ids[2] = tok_strmap_get(&tok->vocab, ab, na + nb);
    free(ab);
    if (ids[0] < 0 || ids[1] < 0 || ids[2] < 0)
        return ds_seterr(err, DS_ERR_FORMAT, "tokenizer.json: merge %d uses a token not in the vocab", rank);
    return DS_OK;
}

static ds_status load_merges(ds_tokenizer *tok, const cJSON *merges, char *err) {
    int n = cJSON_GetArraySize(merges);
    uint32_t cap = 16;
    while (cap < 2 * (uint32_t)n) cap *= 2;
    tok->merge_cap = cap;
    tok->merges = ds_xcalloc(cap, sizeof *tok->merges);
    int rank = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, merges) {
        int32_t ids[3] = {-1, -1, -1};
        ds_status st = merge_ids(tok, m, rank, ids, err);
        if (st) return st;
        uint64_t key = (((uint64_t)(uint32_t)ids[0] << 32) | (uint32_t)ids[1]) + 1;
        for (uint32_t i = (uint32_t)tok_hash_u64(key) & (cap - 1);; i = (i + 1) & (cap - 1)) {
            tok_merge *e = &tok->merges[i];
            if (e->key == key) break;               /* duplicate merge: the first (lowest rank) wins */
            if (e->key == 0) { e->key = key; e->rank = rank; e->id = ids[2]; break; }
        }
        rank++;
    }
    return DS_OK;
}

/* ---- added tokens ---- */
static void trie_init(tok_trie *t) {
    memset(t, 0, sizeof *t);
    t->cap = 64;
    t->n = ds_xmalloc((size_t)t->cap * sizeof *t->n);
    t->n[0] = (tok_trie_node){.child = -1, .sibling = -1, .id = -1};
    t->len = 1;
}

static void trie_add(tok_trie *t, const char *s, size_t n, int32_t id) {
    int cur = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)s[i];
        int k = t->n[cur].child;
        while (k >= 0 && t->n[k].byte != c) k = t->n[k].sibling;
        if (k < 0) {
            if (t->len == t->cap) { t->cap *= 2; t->n = ds_xrealloc(t->n, (size_t)t->cap * sizeof *t->n); }
            k = t->len++;
            t->n[k] = (tok_trie_node){.child = -1, .sibling = t->n[cur].child, .id = -1, .byte = c};
            t->n[cur].child = k;
        }
        cur = k;
    }
    t->n[cur].id = id;
    if (n) t->first[(uint8_t)s[0]] = 1;
}

static ds_status load_added(ds_tokenizer *tok, const cJSON *added, char *err) {
    trie_init(&tok->trie_raw);
    trie_init(&tok->trie_norm);
    tok_strmap_init(&tok->added, (size_t)cJSON_GetArraySize(added));
    const cJSON *a;
    cJSON_ArrayForEach(a, added) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(a, "content");
        int id = cJSON_GetObjectItemCaseSensitive(a, "id")->valueint;
        if (!cJSON_IsString(c) || !c->valuestring[0])
            return ds_seterr(err, DS_ERR_FORMAT, "tokenizer.json: added token %d has no content", id);
        if (json_true(a, "single_word"))
            return ds_seterr(err, DS_ERR_UNSUPPORTED, "tokenizer.json: added token \"%s\" with single_word", c->valuestring);
        size_t n = strlen(c->valuestring);
        /* HF: a normalized token is matched on the normalized text; the normalizer is the identity here,
         * but the two sets are still matched in two passes (raw ones first). */
        trie_add(json_true(a, "normalized") ? &tok->trie_norm : &tok->trie_raw, c->valuestring, n, id);
        tok_strmap_put(&tok->added, c->valuestring, n, id);
        tok->flags[id] |= TOKF_VALID | TOKF_ADDED | (json_true(a, "special") ? TOKF_SPECIAL : 0) |
                          (json_true(a, "lstrip") ? TOKF_LSTRIP : 0) | (json_true(a, "rstrip") ? TOKF_RSTRIP : 0);
    }
    return DS_OK;
}

/* ---- token texts and decoded bytes by id ---- */
/* ByteLevel decoder rule (HF): a token whose every char is a byte-level char decodes to those bytes;
 * any other token (e.g. "<｜User｜>") decodes to its own UTF-8 text. */
static void decode_token(const char *s, size_t n, const int16_t byte_of_cp[512], tok_buf *out) {
    size_t start = out->len;
    for (size_t i = 0; i < n;) {
        uint8_t c = (uint8_t)s[i];
        uint32_t cp; size_t k;
        if (c < 0x80) { cp = c; k = 1; }
        else if ((c & 0xE0) == 0xC0 && i + 1 < n) { cp = ((c & 0x1Fu) << 6) | ((uint8_t)s[i + 1] & 0x3Fu); k = 2; }
        else cp = 512, k = 1;
        if (cp >= 512 || byte_of_cp[cp] < 0) { out->len = start; tok_buf_put(out, s, n); return; }
        uint8_t b = (uint8_t)byte_of_cp[cp];
        tok_buf_put(out, &b, 1);
        i += k;
    }
}

static void build_id_tables(ds_tokenizer *tok) {
    uint32_t cp_of_byte[256];
    int16_t byte_of_cp[512];
    byte_level_map(cp_of_byte);
    for (int i = 0; i < 512; i++) byte_of_cp[i] = -1;
    for (int b = 0; b < 256; b++) byte_of_cp[cp_of_byte[b]] = (int16_t)b;
    /* id -> text: added tokens win over the vocab (HF AddedVocabulary::id_to_token). */
    const char **txt = ds_xcalloc((size_t)tok->n_ids, sizeof *txt);
    uint32_t *len = ds_xcalloc((size_t)tok->n_ids, sizeof *len);
    const tok_strmap *maps[2] = {&tok->vocab, &tok->added};
    for (int k = 0; k < 2; k++)
        for (uint32_t i = 0; i < maps[k]->cap; i++) {
            const tok_strslot *e = &maps[k]->slot[i];
            if (e->id < 0) continue;
            txt[e->id] = maps[k]->blob.p + e->off; len[e->id] = e->len;
            tok->flags[e->id] |= TOKF_VALID;
        }
    tok_buf text = {0}, dec = {0};
    tok->text_off = ds_xmalloc((size_t)tok->n_ids * sizeof *tok->text_off);
    tok->text_len = ds_xcalloc((size_t)tok->n_ids, sizeof *tok->text_len);
    tok->dec_off = ds_xmalloc(((size_t)tok->n_ids + 1) * sizeof *tok->dec_off);
    for (int id = 0; id < tok->n_ids; id++) {
        tok->dec_off[id] = (uint32_t)dec.len;
        tok->text_off[id] = UINT32_MAX;
        if (!txt[id]) continue;
        tok->text_off[id] = (uint32_t)text.len; tok->text_len[id] = len[id];
        tok_buf_put(&text, txt[id], len[id]);
        tok_buf_put(&text, "", 1);
        decode_token(txt[id], len[id], byte_of_cp, &dec);
    }
    tok->dec_off[tok->n_ids] = (uint32_t)dec.len;
    tok->text = tok_buf_take(&text, NULL);
    tok->dec = (uint8_t *)tok_buf_take(&dec, NULL);
    free(txt); free(len);
    /* the one-char token of each byte */
    for (int b = 0; b < 256; b++) {
        char s[2];
        size_t n = put_utf8(s, cp_of_byte[b]);
        tok->byte_id[b] = tok_strmap_get(&tok->vocab, s, n);
    }
}

/* ---- normalizer, pre-tokenizer, decoder ---- */
static ds_status check_normalizer(const cJSON *norm, char *err) {
    if (!norm || cJSON_IsNull(norm)) return DS_OK;
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(norm, "normalizers");
    if (!strcmp(json_type(norm), "Sequence") && cJSON_GetArraySize(list) == 0) return DS_OK;
    if (!strcmp(json_type(norm), "Sequence"))
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "tokenizer.json: normalizer %s", json_type(list->child));
    return ds_seterr(err, DS_ERR_UNSUPPORTED, "tokenizer.json: normalizer %s", json_type(norm));
}

/* GPT-2's pattern, used by ByteLevel with use_regex: true. */
static const char *GPT2_PATTERN =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* Compiles a pre-tokenizer pattern (a regex, or a literal string when literal). */
static ds_status compile_pattern(const char *pattern, int literal, pcre2_code **out, char *err) {
    int ec; PCRE2_SIZE off;
    uint32_t opts = literal ? PCRE2_LITERAL | PCRE2_UTF : PCRE2_UTF | PCRE2_UCP;
    if (!pattern[0]) return ds_seterr(err, DS_ERR_UNSUPPORTED, "tokenizer.json: empty Split pattern");
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, opts, &ec, &off, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "tokenizer.json: pre-tokenizer regex does not compile at %zu: %s",
                         (size_t)off, (char *)msg);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);   /* falls back to the interpreter if JIT is unavailable */
    *out = re;
    return DS_OK;
}

static tok_pretok_step *new_step(ds_tokenizer *tok, char *err) {
    if (tok->n_steps == TOK_MAX_STEPS) {
        ds_seterr(err, DS_ERR_UNSUPPORTED, "tokenizer.json: more than %d pre-tokenizer steps", TOK_MAX_STEPS);
        return NULL;
    }
    tok_pretok_step *st = &tok->steps[tok->n_steps++];
    memset(st, 0, sizeof *st);
    return st;
}

static ds_status parse_behavior(const cJSON *beh, tok_split_behavior *out, char *err) {
    static const struct { const char *name; tok_split_behavior b; } B[] = {
        {"Isolated", SPLIT_ISOLATED}, {"Removed", SPLIT_REMOVED}, {"MergedWithPrevious", SPLIT_MERGED_PREV},
        {"MergedWithNext", SPLIT_MERGED_NEXT}, {"Contiguous", SPLIT_CONTIGUOUS}};
    for (size_t i = 0; cJSON_IsString(beh) && i < sizeof B / sizeof B[0]; i++)
        if (!strcmp(beh->valuestring, B[i].name)) { *out = B[i].b; return DS_OK; }
    return ds_seterr(err, DS_ERR_UNSUPPORTED, "tokenizer.json: Split behavior %s", cJSON_IsString(beh) ? beh->valuestring : "?");
}

static ds_status add_split(ds_tokenizer *tok, const cJSON *p, char *err) {
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(p, "pattern");
    const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex"), *lit = cJSON_GetObjectItemCaseSensitive(pat, "String");
    if (!cJSON_IsString(re) && !cJSON_IsString(lit))
        return ds_seterr(err, DS_ERR_FORMAT, "tokenizer.json: Split without a Regex or String pattern");
    tok_split_behavior b = SPLIT_ISOLATED;
    ds_status st = parse_behavior(cJSON_GetObjectItemCaseSensitive(p, "behavior"), &b, err);
    if (st) return st;
    tok_pretok_step *step = new_step(tok, err);
    if (!step) return DS_ERR_UNSUPPORTED;
    step->kind = STEP_SPLIT;
    step->behavior = b;
    step->invert = json_true(p, "invert");
    return compile_pattern(cJSON_IsString(re) ? re->valuestring : lit->valuestring, !cJSON_IsString(re), &step->re, err);
}

static ds_status add_pretok(ds_tokenizer *tok, const cJSON *p, int *saw_byte_level, char *err) {
    const char *type = json_type(p);
    if (*saw_byte_level)
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "tokenizer.json: pre-tokenizer %s after ByteLevel", type);
    if (!strcmp(type, "Split")) return add_split(tok, p, err);
    if (!strcmp(type, "ByteLevel")) {
        *saw_byte_level = 1;
        tok_pretok_step *step = new_step(tok, err);
        if (!step) return DS_ERR_UNSUPPORTED;
        step->kind = STEP_BYTELEVEL;
        step->add_prefix_space = json_true(p, "add_prefix_space");
        const cJSON *ur = cJSON_GetObjectItemCaseSensitive(p, "use_regex");
        if (!cJSON_IsFalse(ur)) return compile_pattern(GPT2_PATTERN, 0, &step->re, err);   /* default true */
        return DS_OK;
    }
    return ds_seterr(err, DS_ERR_UNSUPPORTED, "tokenizer.json: pre-tokenizer %s", type);
}

static ds_status load_pretok(ds_tokenizer *tok, const cJSON *pre, char *err) {
    if (!cJSON_IsObject(pre))
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "tokenizer.json: no pre-tokenizer (a ByteLevel one is required)");
    int saw = 0;
    ds_status st = DS_OK;
    if (!strcmp(json_type(pre), "Sequence")) {
        const cJSON *p;
        cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers"))
            if ((st = add_pretok(tok, p, &saw, err))) return st;
    } else if ((st = add_pretok(tok, pre, &saw, err))) {
        return st;
    }
    if (!saw) return ds_seterr(err, DS_ERR_UNSUPPORTED, "tokenizer.json: pre-tokenizer without ByteLevel");
    return DS_OK;
}

static ds_status check_decoder(const cJSON *dec, char *err) {
    if (!cJSON_IsObject(dec)) return ds_seterr(err, DS_ERR_UNSUPPORTED, "tokenizer.json: no decoder (need ByteLevel)");
    if (strcmp(json_type(dec), "ByteLevel"))
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "tokenizer.json: decoder %s (only ByteLevel)", json_type(dec));
    return DS_OK;
}

/* ---- tokenizer_config.json ---- */
/* bos_token / eos_token: a string or {"content": "..."}. */
static char *config_token(const cJSON *cfg, const char *key) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsObject(t)) t = cJSON_GetObjectItemCaseSensitive(t, "content");
    return cJSON_IsString(t) ? ds_xstrdup(t->valuestring) : NULL;
}

/* chat_template: a string, or a list of {name, template} (the "default" one is used). */
static char *config_template(const cJSON *cfg) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    if (cJSON_IsString(t)) return ds_xstrdup(t->valuestring);
    const cJSON *e;
    cJSON_ArrayForEach(e, t) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *body = cJSON_GetObjectItemCaseSensitive(e, "template");
        if (cJSON_IsString(name) && !strcmp(name->valuestring, "default") && cJSON_IsString(body))
            return ds_xstrdup(body->valuestring);
    }
    return NULL;
}

static ds_status load_config(ds_tokenizer *tok, const char *path, char *err) {
    cJSON *cfg;
    ds_status st = parse_json_file(path, &cfg, err);
    if (st) return st;
    tok->bos_text = config_token(cfg, "bos_token");
    tok->eos_text = config_token(cfg, "eos_token");
    tok->add_bos = json_true(cfg, "add_bos_token");
    tok->chat_template = config_template(cfg);
    cJSON_Delete(cfg);
    if (tok->bos_text) tok->bos_id = ds_tokenizer_token_id(tok, tok->bos_text);
    if (tok->eos_text) tok->eos_id = ds_tokenizer_token_id(tok, tok->eos_text);
    if (tok->chat_template && tok_chat_detect(tok->chat_template, &tok->tpl, &tok->tpl_sys_last, tok->tpl_err))
        tok->tpl = DS_CHAT_AUTO;
    return DS_OK;
}

/* ---- entry points ---- */
static ds_status load_tokenizer_json(ds_tokenizer *tok, const cJSON *j, char *err) {
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(j, "added_tokens");
    ds_status st;
    if ((st = check_model(model, err))) return st;
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges))
        return ds_seterr(err, DS_ERR_FORMAT, "tokenizer.json: BPE model without vocab object or merges array");
    if ((st = count_ids(tok, vocab, added, err))) return st;
    tok->flags = ds_xcalloc((size_t)tok->n_ids, 1);
    tok->ignore_merges = json_true(model, "ignore_merges");
    if ((st = load_vocab(tok, vocab, err))) return st;
    if ((st = load_merges(tok, merges, err))) return st;
    if ((st = load_added(tok, added, err))) return st;
    if ((st = check_normalizer(cJSON_GetObjectItemCaseSensitive(j, "normalizer"), err))) return st;
    if ((st = load_pretok(tok, cJSON_GetObjectItemCaseSensitive(j, "pre_tokenizer"), err))) return st;
    if ((st = check_decoder(cJSON_GetObjectItemCaseSensitive(j, "decoder"), err))) return st;
    build_id_tables(tok);
    return DS_OK;
}

ds_status ds_tokenizer_load_files(const char *tokenizer_json, const char *config_path, ds_tokenizer **out,
                                  char *err) {
    *out = NULL;
    cJSON *j;
    ds_status st = parse_json_file(tokenizer_json, &j, err);
    if (st) return st;
    ds_tokenizer *tok = ds_xcalloc(1, sizeof *tok);
    tok->bos_id = tok->eos_id = -1;
    st = load_tokenizer_json(tok, j, err);
    cJSON_Delete(j);
    if (!st && config_path) st = load_config(tok, config_path, err);
    if (st) { ds_tokenizer_free(tok); return st; }
    *out = tok;
    return DS_OK;
}

ds_status ds_tokenizer_load(const char *dir, ds_tokenizer **out, char *err) {
    size_t n = strlen(dir) + 32;
    char *tj = ds_xmalloc(n), *cfg = ds_xmalloc(n);
    snprintf(tj, n, "%s/tokenizer.json", dir);
    snprintf(cfg, n, "%s/tokenizer_config.json", dir);
    FILE *f = fopen(cfg, "rb");
    if (f) fclose(f);
    ds_status st = ds_tokenizer_load_files(tj, f ? cfg : NULL, out, err);
    free(tj); free(cfg);
    return st;
}

void ds_tokenizer_free(ds_tokenizer *tok) {
    if (!tok) return;
    for (int i = 0; i < tok->n_steps; i++) if (tok->steps[i].re) pcre2_code_free(tok->steps[i].re);
    free(tok->trie_raw.n); free(tok->trie_norm.n);
    free(tok->merges);
    tok_strmap_free(&tok->added);
    tok_strmap_free(&tok->vocab);
    free(tok->text); free(tok->text_off); free(tok->text_len);
    free(tok->dec); free(tok->dec_off); free(tok->flags);
    free(tok->bos_text); free(tok->eos_text); free(tok->chat_template);
    free(tok);
}

/* ---- accessors ---- */
int ds_tokenizer_n_vocab(const ds_tokenizer *tok) { return tok->n_ids; }
int ds_tokenizer_bos_id(const ds_tokenizer *tok) { return tok->bos_id; }
int ds_tokenizer_eos_id(const ds_tokenizer *tok) { return tok->eos_id; }
int ds_tokenizer_add_bos(const ds_tokenizer *tok) { return tok->add_bos; }
const char *ds_tokenizer_chat_template_text(const ds_tokenizer *tok) { return tok->chat_template; }

int ds_tokenizer_token_id(const ds_tokenizer *tok, const char *text) {
    int id = tok_strmap_get(&tok->added, text, strlen(text));
    return id >= 0 ? id : tok_strmap_get(&tok->vocab, text, strlen(text));
}

const char *ds_tokenizer_token_text(const ds_tokenizer *tok, int id) {
    if (id < 0 || id >= tok->n_ids || tok->text_off[id] == UINT32_MAX) return NULL;
    return tok->text + tok->text_off[id];
}

int ds_tokenizer_is_special(const ds_tokenizer *tok, int id) {
    return id >= 0 && id < tok->n_ids && (tok->flags[id] & TOKF_SPECIAL);
}
