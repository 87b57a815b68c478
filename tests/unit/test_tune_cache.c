/* The on-disk table of tuned choices (core/tune_cache.c; the CUDA backend keeps its cuBLASLt algorithm
 * choices in it): round trip through a file, replacement, a missing file is empty, malformed files and
 * bad keys give errors naming the file and line, the path follows DSINFER_CACHE_DIR / XDG_CACHE_HOME /
 * HOME, and a directory that cannot be written gives an error instead of a crash. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/tune_cache.h"
#include "testutil.h"

static char dir[256];

static void check_round_trip(void) {
    char err[512], path[512];
    snprintf(path, sizeof path, "%s/sub/dir/lt.txt", dir);   /* directories made by save */
    ds_tune_cache c = {0};
    CHECK(ds_tune_cache_load(&c, path, err) == DS_OK && c.n == 0);   /* missing: empty */
    int64_t a[DS_TUNE_NV] = {21, 18, 1, 0, 0, 0, 17, 0, -3}, b[DS_TUNE_NV] = {6, 1, 4, 2, 1, 0, 8, 0, 0};
    CHECK(ds_tune_cache_put(&c, "bf16f32:N2048:K1408:M64", a, 12.5, err) == DS_OK);
    CHECK(ds_tune_cache_put(&c, "bf16f32:N102400:K2048:M64", b, 171.25, err) == DS_OK);
    CHECK(ds_tune_cache_put(&c, "bf16f32:N2048:K1408:M64", b, 11.0, err) == DS_OK);   /* replaces */
    CHECK(c.n == 2);
    CHECK(ds_tune_cache_save(&c, err) == DS_OK);
    ds_tune_cache d = {0};
    CHECK(ds_tune_cache_load(&d, path, err) == DS_OK && d.n == 2);
    const ds_tune_entry *e = ds_tune_cache_find(&d, "bf16f32:N2048:K1408:M64");
    CHECK(e && !memcmp(e->v, b, sizeof b) && e->us == 11.0);
    e = ds_tune_cache_find(&d, "bf16f32:N102400:K2048:M64");
    CHECK(e && e->v[0] == 6 && e->v[3] == 2 && e->us == 171.25);
    CHECK(ds_tune_cache_find(&d, "bf16f32:N1:K1:M1") == NULL);
    ds_tune_cache_free(&c);
    ds_tune_cache_free(&d);
}

static void check_bad_input(void) {
    char err[512], path[512];
    ds_tune_cache c = {0};
    int64_t v[DS_TUNE_NV] = {0};
    CHECK(ds_tune_cache_put(&c, "has space", v, 1.0, err) == DS_ERR_ARG && strstr(err, "bad key"));
    CHECK(ds_tune_cache_put(&c, "", v, 1.0, err) == DS_ERR_ARG);
    CHECK(ds_tune_cache_put(&c, "k", v, 0.0, err) == DS_ERR_ARG && strstr(err, "not positive"));
    char longkey[DS_TUNE_KEY + 8];
    memset(longkey, 'x', sizeof longkey - 1);
    longkey[sizeof longkey - 1] = 0;
    CHECK(ds_tune_cache_put(&c, longkey, v, 1.0, err) == DS_ERR_ARG);
    CHECK(c.n == 0);

    snprintf(path, sizeof path, "%s/bad.txt", dir);
    const char *bad[] = {
        "not the header\nk 1 2 3 4 5 6 7 8 9 1.0\n",                          /* header */
        "# dsinfer tune cache v1\nk 1 2 3 4 5 6 7 8 1.0\n",                   /* one integer short */
        "# dsinfer tune cache v1\nk 1 2 3 4 5 6 7 8 9 -1.0\n",                /* time not positive */
        "# dsinfer tune cache v1\nk 1 2 3 4 5 6 7 8 9 1.0 extra\n",           /* trailing field */
        "# dsinfer tune cache v1\nk 1 2 3 4 x 6 7 8 9 1.0\n",                 /* not a number */
        "# dsinfer tune cache v1\nk 1 2 3 4 5 6 7 8 99999999999999999999 1.0\n",   /* overflow */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        test_write_text(path, bad[i]);
        ds_status st = ds_tune_cache_load(&c, path, err);
        CHECKF(st == DS_ERR_FORMAT && strstr(err, path) && c.n == 0, "case %zu: status %d, %s", i, (int)st, err);
        CHECKF(i == 0 || strstr(err, "line 2"), "case %zu names line 2: %s", i, err);
    }
    test_write_text(path, "# dsinfer tune cache v1\n# a comment\n\nk 1 2 3 4 5 6 7 8 9 2.5\n");   /* good */
    CHECK(ds_tune_cache_load(&c, path, err) == DS_OK && c.n == 1 && ds_tune_cache_find(&c, "k")->v[8] == 9);
    ds_tune_cache_free(&c);

    /* a path below a regular file cannot be made: an error, no crash */
    snprintf(c.path, sizeof c.path, "%s/bad.txt/below/lt.txt", dir);
    CHECK(ds_tune_cache_save(&c, err) == DS_ERR_IO && strstr(err, "mkdir"));
    ds_tune_cache empty = {0};
    CHECK(ds_tune_cache_save(&empty, err) == DS_ERR_ARG);
}

static void check_path(void) {
    char out[512], err[512];
    setenv("DSINFER_CACHE_DIR", "/x/cache", 1);
    CHECK(ds_tune_cache_path(out, sizeof out, "cublaslt", "NVIDIA H200/132sm", err) == DS_OK);
    CHECK(!strcmp(out, "/x/cache/cublaslt-NVIDIA-H200-132sm.txt"));
    unsetenv("DSINFER_CACHE_DIR");
    setenv("XDG_CACHE_HOME", "/y", 1);
    CHECK(ds_tune_cache_path(out, sizeof out, "cublaslt", "t", err) == DS_OK && !strcmp(out, "/y/dsinfer/cublaslt-t.txt"));
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/u", 1);
    CHECK(ds_tune_cache_path(out, sizeof out, "cublaslt", "t", err) == DS_OK &&
          !strcmp(out, "/home/u/.cache/dsinfer/cublaslt-t.txt"));
    unsetenv("HOME");
    CHECK(ds_tune_cache_path(out, sizeof out, "cublaslt", "t", err) == DS_ERR_ARG && strstr(err, "DSINFER_CACHE_DIR"));
    setenv("DSINFER_CACHE_DIR", "/z", 1);
    CHECK(ds_tune_cache_path(out, 12, "cublaslt", "t", err) == DS_ERR_ARG && strstr(err, "too long"));
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/dsinfer-tune-%d", (int)getpid());
    check_round_trip();
    check_bad_input();
    check_path();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    return test_result("test_tune_cache");
}
