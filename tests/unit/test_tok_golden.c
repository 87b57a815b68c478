/* Tokenizer against reference encodings: every line of a JSONL file {"text", "ids"[, "decoded"]} must
 * encode to exactly "ids" (HF encode(text, add_special_tokens=False)), decode back to "decoded" (or to
 * "text"), and stream-decode (one id at a time) to the same text.
 *
 *   test_tok_golden                          the fixtures' small tokenizer vs its golden file
 *   test_tok_golden --model DIR --golden F   any tokenizer folder vs any file (used by tests/scripts)
 *
 * "text_hex"/"decoded_hex" (UTF-8 as hex), when present, replace "text"/"decoded" (they keep U+0000);
 * "decoded_skip_hex", when present, is the reference decode with skip_special_tokens.
 * With --allow-new-unicode, a case whose ids differ only counts as a known difference (printed, not a
 * failure) when its text holds a character that this PCRE2's Unicode tables call unassigned: the
 * reference (Oniguruma) knows a newer Unicode, so it may class such a character as a letter or digit. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "testutil.h"
#include "tokenizer/tokenizer.h"

static int failed_cases = 0, allow_new_unicode = 0, unicode_diffs = 0;

/* Decodes a hex string into malloc'd bytes (NUL-terminated; *n excludes it). */
static char *unhex(const char *h, size_t *n) {
    size_t len = strlen(h) / 2;
    char *out = malloc(len + 1);
    for (size_t i = 0; i < len; i++) {   /* not sscanf: glibc's sscanf runs strlen on every call */
        int hi = h[2 * i] <= '9' ? h[2 * i] - '0' : (h[2 * i] | 0x20) - 'a' + 10;
        int lo = h[2 * i + 1] <= '9' ? h[2 * i + 1] - '0' : (h[2 * i + 1] | 0x20) - 'a' + 10;
        out[i] = (char)(hi << 4 | lo);
    }
    out[len] = 0;
    *n = len;
    return out;
}

/* 1 if s holds a code point that PCRE2's Unicode tables have as unassigned (Cn). */
static int has_unassigned(const char *s, size_t n) {
    int ec;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR) "\\p{Cn}", PCRE2_ZERO_TERMINATED, PCRE2_UTF, &ec, &off, NULL);
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    int rc = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return rc > 0;
}

static char *stream_decode(const ds_tokenizer *tok, const int32_t *ids, size_t n) {
    ds_detok *d = ds_detok_new(tok, 0);
    size_t cap = 64, len = 0, k;
    char *out = malloc(cap);
    for (size_t i = 0; i <= n; i++) {
        const char *p = i < n ? ds_detok_push(d, ids[i], &k) : ds_detok_flush(d, &k);
        /* a piece never ends inside a UTF-8 sequence (unless it's U+FFFD-replaced at the end) */
        if (k && i < n) CHECKF(((unsigned char)p[k - 1] & 0xC0) != 0xC0, "piece ends with a lead byte");
        while (len + k + 1 > cap) out = realloc(out, cap *= 2);
        memcpy(out + len, p, k);
        len += k;
    }
    out[len] = 0;
    ds_detok_free(d);
    return out;
}

static int same_ids(const int32_t *got, size_t n, const cJSON *ids) {
    const cJSON *e = ids->child;   /* walk the list: cJSON_GetArrayItem is O(i) */
    size_t i = 0;
    for (; e && i < n; e = e->next, i++)
        if (got[i] != e->valueint) return 0;
    return !e && i == n;
}

static void report(int line, const char *text, const int32_t *got, size_t n, const cJSON *ids) {
    if (failed_cases++ >= 10) return;
    char *want = cJSON_PrintUnformatted(ids);
    cJSON *t = cJSON_CreateString(text);
    char *tj = cJSON_PrintUnformatted(t);
    fprintf(stderr, "line %d: text %s\n  want %s\n  got  [", line, tj, want);
    for (size_t i = 0; i < n; i++) fprintf(stderr, i ? ",%d" : "%d", got[i]);
    fprintf(stderr, "]\n");
    free(want); free(tj); cJSON_Delete(t);
}

/* The case's text (or decoded text) as bytes: from the _hex field when present. */
static char *field(const cJSON *c, const char *key, size_t *n) {
    char hk[32];
    snprintf(hk, sizeof hk, "%s_hex", key);
    const cJSON *h = cJSON_GetObjectItem(c, hk), *v = cJSON_GetObjectItem(c, key);
    if (cJSON_IsString(h)) return unhex(h->valuestring, n);
    if (!cJSON_IsString(v)) return NULL;
    *n = strlen(v->valuestring);
    return strdup(v->valuestring);
}

static void check_case(const ds_tokenizer *tok, const cJSON *c, int line) {
    const cJSON *ids = cJSON_GetObjectItem(c, "ids");
    size_t tlen, wlen;
    char *text = field(c, "text", &tlen), *want_text = field(c, "decoded", &wlen);
    if (!want_text && text) { want_text = strdup(text); wlen = tlen; }
    if (!text || !cJSON_IsArray(ids)) { CHECKF(0, "line %d: no text/ids", line); free(text); free(want_text); return; }
    char err[DS_ERRLEN];
    int32_t *got = NULL;
    size_t n = 0;
    ds_status st = ds_tokenizer_encode(tok, text, tlen, 0, &got, &n, err);
    CHECKF(st == DS_OK, "line %d: %s", line, err);
    if (!st && !same_ids(got, n, ids)) {
        if (allow_new_unicode && has_unassigned(text, tlen)) {
            if (unicode_diffs++ < 5) report(line, text, got, n, ids);
            failed_cases--;
            if (unicode_diffs <= 5) fprintf(stderr, "  (known: a character unassigned in this PCRE2's Unicode)\n");
            /* the decode checks below then decode the reference's ids: its text is what they must give */
            n = (size_t)cJSON_GetArraySize(ids);
            got = realloc(got, sizeof(int32_t) * (n + 1));
            for (size_t i = 0; i < n; i++) got[i] = (int32_t)cJSON_GetArrayItem(ids, (int)i)->valuedouble;
        } else {
            report(line, text, got, n, ids);
            CHECKF(0, "line %d: ids differ", line);
        }
    }
    if (!st) {
        char *back;
        size_t blen;
        ds_tokenizer_decode(tok, got, n, 0, &back, &blen, err);
        CHECKF(blen == wlen && !memcmp(back, want_text, wlen), "line %d: decode differs: \"%s\"", line, back);
        size_t slen;
        char *want_skip = field(c, "decoded_skip", &slen);
        if (want_skip) {
            char *skip;
            size_t klen;
            ds_tokenizer_decode(tok, got, n, 1, &skip, &klen, err);
            CHECKF(klen == slen && !memcmp(skip, want_skip, slen), "line %d: skip_special_tokens decode differs", line);
            free(skip);
            free(want_skip);
        }
        char *streamed = stream_decode(tok, got, n);
        CHECKF(!strcmp(streamed, back), "line %d: streamed decode differs", line);
        free(streamed);
        free(back);
    }
    free(got); free(text); free(want_text);
}

static void run_file(const char *model, const char *golden) {
    char err[DS_ERRLEN];
    ds_tokenizer *tok;
    ds_status st = ds_tokenizer_load(model, &tok, err);
    CHECKF(st == DS_OK, "load %s: %s", model, err);
    if (st) return;
    FILE *f = fopen(golden, "r");
    CHECKF(f != NULL, "cannot open %s", golden);
    if (!f) { ds_tokenizer_free(tok); return; }
    char *line = NULL;
    size_t cap = 0;
    int n = 0;
    while (getline(&line, &cap, f) > 0) {
        cJSON *c = cJSON_Parse(line);
        n++;
        CHECKF(c != NULL, "%s line %d: bad JSON", golden, n);
        if (c) check_case(tok, c, n);
        cJSON_Delete(c);
    }
    free(line);
    fclose(f);
    ds_tokenizer_free(tok);
    printf("%s: %d cases against %s", model, n, golden);
    if (unicode_diffs) printf(" (%d differ only on characters unassigned in PCRE2's Unicode tables)", unicode_diffs);
    printf("\n");
}

int main(int argc, char **argv) {
    const char *model = "tests/fixtures/tiny-v3", *golden = "tests/fixtures/tokenizer/mini/golden.jsonl";
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--golden")) golden = argv[i + 1];
    }
    for (int i = 1; i < argc; i++) allow_new_unicode |= !strcmp(argv[i], "--allow-new-unicode");
    run_file(model, golden);
    return test_result("test_tok_golden");
}
