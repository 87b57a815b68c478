/* Tokenizer edge cases on the fixtures' small tokenizer: invalid UTF-8, empty and 1 MB inputs, BOS,
 * decoding with skip_special_tokens, streaming decode of split UTF-8, unsupported tokenizer.json parts. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "tokenizer/tokenizer.h"

static const char *MODEL = "tests/fixtures/tiny-v3";

static void test_invalid_and_empty(const ds_tokenizer *tok) {
    const char *bad[] = {"abc\xff", "\xc3", "x\xe2\x96", "\xed\xa0\x80 surrogate", "\xc0\xaf overlong", "\xf4\x90\x80\x80"};
    char err[DS_ERRLEN];
    int32_t *ids;
    size_t n;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ds_status st = ds_tokenizer_encode(tok, bad[i], strlen(bad[i]), 0, &ids, &n, err);
        CHECKF(st == DS_ERR_ARG && strstr(err, "UTF-8") && ids == NULL, "case %zu: %s", i, err);
    }
    CHECK(ds_tokenizer_encode(tok, "", 0, 0, &ids, &n, err) == DS_OK && n == 0);
    free(ids);
    CHECK(ds_tokenizer_encode(tok, NULL, 0, 0, &ids, &n, err) == DS_OK && n == 0);
    free(ids);
    CHECK(ds_tokenizer_encode(tok, "", 0, 1, &ids, &n, err) == DS_OK && n == 1 && ids[0] == 0);
    free(ids);
    char *text; size_t len;
    CHECK(ds_tokenizer_decode(tok, NULL, 0, 0, &text, &len, err) == DS_OK && len == 0 && !strcmp(text, ""));
    free(text);
}

static void test_big(const ds_tokenizer *tok) {
    size_t n = 1 << 20;
    char *s = malloc(n + 1);
    const char *pat = "Hello, world! 12345 \xe4\xbd\xa0\xe5\xa5\xbd  \n\t<｜User｜>x ";   /* valid UTF-8 pieces */
    size_t k = strlen(pat), len = 0;
    while (len + k <= n) { memcpy(s + len, pat, k); len += k; }
    s[len] = 0;
    char err[DS_ERRLEN], *back;
    int32_t *ids; size_t m, blen;
    CHECK(ds_tokenizer_encode(tok, s, len, 0, &ids, &m, err) == DS_OK && m > 0);
    CHECK(ds_tokenizer_decode(tok, ids, m, 0, &back, &blen, err) == DS_OK && blen == len && !memcmp(back, s, len));
    free(ids); free(back);
    memset(s, ' ', n);   /* one 1 MB whitespace piece */
    CHECK(ds_tokenizer_encode(tok, s, n, 0, &ids, &m, err) == DS_OK && m > 0);
    CHECK(ds_tokenizer_decode(tok, ids, m, 0, &back, &blen, err) == DS_OK && blen == n);
    free(ids); free(back);
    free(s);
}

static void test_decode(const ds_tokenizer *tok) {
    char err[DS_ERRLEN], *t; size_t len;
    int32_t ids[] = {0, 5, 6, 1, 999999, -3};   /* BOS, <think>, </think>, EOS, unknown ids */
    CHECK(ds_tokenizer_decode(tok, ids, 6, 0, &t, &len, err) == DS_OK &&
          !strcmp(t, "<｜begin▁of▁sentence｜><think></think><｜end▁of▁sentence｜>"));
    free(t);
    CHECK(ds_tokenizer_decode(tok, ids, 6, 1, &t, &len, err) == DS_OK && !strcmp(t, "<think></think>"));
    free(t);
    CHECK(ds_tokenizer_is_special(tok, 0) && !ds_tokenizer_is_special(tok, 5));
    CHECK(ds_tokenizer_bos_id(tok) == 0 && ds_tokenizer_eos_id(tok) == 1 && ds_tokenizer_add_bos(tok) == 1);
    CHECK(ds_tokenizer_token_id(tok, "<think>") == 5 && ds_tokenizer_token_id(tok, "no such token") == -1);
    /* an emoji is split into byte tokens: streaming holds the partial bytes back */
    const char *emoji = "\xf0\x9f\x98\x80!";
    int32_t *e; size_t n;
    CHECK(ds_tokenizer_encode(tok, emoji, strlen(emoji), 0, &e, &n, err) == DS_OK && n >= 3);
    ds_detok *d = ds_detok_new(tok, 0);
    char acc[64] = "";
    for (size_t i = 0; i < n; i++) {
        size_t k;
        const char *p = ds_detok_push(d, e[i], &k);
        strncat(acc, p, k);
        size_t a = strlen(acc);
        CHECKF(a == 0 || a == 4 || a == 5, "emitted %zu bytes: a partial character", a);
    }
    size_t k;
    ds_detok_flush(d, &k);
    CHECK(k == 0 && !strcmp(acc, emoji));
    /* a stream cut inside a character ends with U+FFFD at flush */
    ds_detok_push(d, e[0], &k);
    const char *p = ds_detok_flush(d, &k);
    CHECK(k == 3 && !memcmp(p, "\xef\xbf\xbd", 3));
    ds_detok_free(d);
    free(e);
}

/* Encoding is reentrant: threads sharing one tokenizer get the single-thread result. */
typedef struct { const ds_tokenizer *tok; const char *text; size_t len; int32_t *ids; size_t n; } enc_job;

static void *enc_thread(void *arg) {
    enc_job *j = arg;
    char err[DS_ERRLEN];
    for (int r = 0; r < 3; r++) {
        free(j->ids);
        if (ds_tokenizer_encode(j->tok, j->text, j->len, 0, &j->ids, &j->n, err)) j->n = (size_t)-1;
    }
    return NULL;
}

static void test_threads(const ds_tokenizer *tok) {
    size_t len = 0;
    char *text = malloc(200000);
    const char *pat = "Threads share the tokenizer; 2024 \xe6\x97\xa5\xe6\x9c\xac <｜Assistant｜> words repeat. ";
    while (len + strlen(pat) < 200000) { memcpy(text + len, pat, strlen(pat)); len += strlen(pat); }
    enc_job ref = {tok, text, len, NULL, 0}, jobs[4];
    enc_thread(&ref);
    pthread_t th[4];
    for (int i = 0; i < 4; i++) { jobs[i] = (enc_job){tok, text, len, NULL, 0}; pthread_create(&th[i], NULL, enc_thread, &jobs[i]); }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK(jobs[i].n == ref.n && !memcmp(jobs[i].ids, ref.ids, ref.n * sizeof(int32_t)));
        free(jobs[i].ids);
    }
    free(ref.ids);
    free(text);
}

/* Writes a tokenizer.json variant with `from` replaced by `to`, loads it, expects `want` in the error. */
static void check_unsupported(const char *from, const char *to, const char *want) {
    FILE *f = fopen("tests/fixtures/tiny-v3/tokenizer.json", "rb");
    char buf[1 << 17];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *at = strstr(buf, from);
    CHECKF(at != NULL, "fixture lacks %s", from);
    if (!at) return;
    char dir[] = "/tmp/tok_edge_XXXXXX", path[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    f = fopen(path, "wb");
    fwrite(buf, 1, (size_t)(at - buf), f);
    fputs(to, f);
    fputs(at + strlen(from), f);
    fclose(f);
    ds_tokenizer *tok = NULL;
    char err[DS_ERRLEN] = "";
    ds_status st = ds_tokenizer_load(dir, &tok, err);
    CHECKF(st != DS_OK && strstr(err, want), "replacing %s: status %d, \"%s\"", from, st, err);
    ds_tokenizer_free(tok);
    remove(path);
    rmdir(dir);
}

static void test_unsupported(void) {
    check_unsupported("\"type\": \"BPE\"", "\"type\": \"WordPiece\"", "model type WordPiece");
    check_unsupported("\"behavior\": \"Isolated\"", "\"behavior\": \"Sideways\"", "Split behavior Sideways");
    check_unsupported("\"decoder\": {\n  \"type\": \"ByteLevel\"", "\"decoder\": {\n  \"type\": \"Metaspace\"", "decoder Metaspace");
    check_unsupported("\"normalizers\": []", "\"normalizers\": [{\"type\": \"NFC\"}]", "normalizer NFC");
    check_unsupported("\\\\p{N}{1,3}", "(\\\\p{N}", "regex does not compile");
}

int main(void) {
    ds_tokenizer *tok;
    char err[DS_ERRLEN];
    ds_status st = ds_tokenizer_load(MODEL, &tok, err);
    CHECKF(st == DS_OK, "%s", err);
    if (st) return test_result("test_tok_edge");
    test_invalid_and_empty(tok);
    test_big(tok);
    test_decode(tok);
    test_threads(tok);
    ds_tokenizer_free(tok);
    test_unsupported();
    char *e2 = NULL;
    CHECK(ds_tokenizer_load("/nonexistent", &tok, err) == DS_ERR_IO && strstr(err, "/nonexistent/tokenizer.json"));
    free(e2);
    return test_result("test_tok_edge");
}
