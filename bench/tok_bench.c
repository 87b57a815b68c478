/* Tokenizer benchmark: encode throughput (MB/s) of ds_tokenizer_encode on a text file, best of 3, one
 * thread, plus decode throughput. Run through bench/tok_bench.sh, which builds it and runs the reference
 * (bench/tok_bench.js) on the same text.   tok_bench MODEL_DIR TEXT_FILE */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokenizer/tokenizer.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: tok_bench MODEL_DIR TEXT_FILE\n"); return 2; }
    char err[DS_ERRLEN];
    ds_tokenizer *tok;
    double t0 = now();
    if (ds_tokenizer_load(argv[1], &tok, err)) { fprintf(stderr, "%s\n", err); return 1; }
    double load_s = now() - t0;
    FILE *f = fopen(argv[2], "rb");
    if (!f) { perror(argv[2]); return 1; }
    fseek(f, 0, SEEK_END);
    size_t len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc(len + 1);
    if (fread(text, 1, len, f) != len) return 1;
    fclose(f);
    double mb = (double)len / 1e6, best = 1e9, best_dec = 1e9;
    int32_t *ids = NULL;
    size_t n = 0;
    for (int r = 0; r < 3; r++) {
        free(ids);
        t0 = now();
        if (ds_tokenizer_encode(tok, text, len, 0, &ids, &n, err)) { fprintf(stderr, "%s\n", err); return 1; }
        double dt = now() - t0;
        if (dt < best) best = dt;
        char *back;
        size_t blen;
        t0 = now();
        ds_tokenizer_decode(tok, ids, n, 0, &back, &blen, err);
        dt = now() - t0;
        if (dt < best_dec) best_dec = dt;
        if (blen != len || memcmp(back, text, len)) { fprintf(stderr, "round trip failed\n"); return 1; }
        free(back);
    }
    printf("dsinfer encode (1 thread, whole text): %.2f MB/s  (%zu tokens, %.2f MB, %.3f s; load %.2f s)\n",
           mb / best, n, mb, best, load_s);
    printf("dsinfer decode: %.2f MB/s\n", mb / best_dec);
    /* one call per paragraph (as a server encodes requests): no memo carried between calls */
    best = 1e9;
    for (int r = 0; r < 3; r++) {
        t0 = now();
        size_t total = 0;
        for (const char *p = text, *end = text + len; p < end;) {
            const char *q = strstr(p, "\n\n");
            q = q ? q + 2 : end;
            int32_t *pi;
            size_t pn;
            if (ds_tokenizer_encode(tok, p, (size_t)(q - p), 0, &pi, &pn, err)) { fprintf(stderr, "%s\n", err); return 1; }
            total += pn;
            free(pi);
            p = q;
        }
        double dt = now() - t0;
        if (dt < best) best = dt;
        if (r == 0) n = total;
    }
    printf("dsinfer encode (1 thread, one call per paragraph): %.2f MB/s  (%zu tokens)\n", mb / best, n);
    free(ids);
    free(text);
    ds_tokenizer_free(tok);
    return 0;
}
