/* The environment check (core/env_check.c): the list made from the sources is in strcmp order and every name in it is
 * found; names the code reads and the harness's names are known, near misses and prefixes are not; a misspelt name gets
 * the nearest known one; the warning names each unknown DSINFER_* entry once and nothing else. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/env_check.h"
#include "testutil.h"

static int known(const char *s) { return ds_env_known(s, strlen(s)); }

static void check_list(void) {
    const size_t n = ds_env_count();
    CHECKF(n > 100, "%zu names", n);   /* the CUDA switches alone are over a hundred */
    for (size_t i = 0; i < n; i++) {
        const char *s = ds_env_name(i);
        CHECKF(strncmp(s, "DSINFER_", 8) == 0, "%s", s);
        CHECKF(known(s), "%s not found", s);
        if (i) CHECKF(strcmp(ds_env_name(i - 1), s) < 0, "%s before %s", ds_env_name(i - 1), s);
    }
    CHECK(ds_env_name(n) == NULL);
}

static void check_known(void) {
    CHECK(known("DSINFER_CACHE_DIR"));      /* core/tune_cache.c */
    CHECK(known("DSINFER_API_KEY"));        /* cli/cmd_serve.c */
    CHECK(known("DSINFER_CUDA_MOEO_TC"));   /* backend/cuda/cuda_backend.cu */
    CHECK(known("DSINFER_OPS_ONLY"));       /* a test program's (tests/unit/test_cuda_ops.c) */
    CHECK(known("DSINFER_BIN"));            /* the harness's (tests/run_tests.sh) */
    CHECK(!known("DSINFER_CACHE"));         /* a prefix of a name */
    CHECK(!known("DSINFER_CACHE_DIRX"));    /* a name and more */
    CHECK(!known("DSINFER_"));
    CHECK(!known("CACHE_DIR"));
    CHECK(ds_env_known("DSINFER_CACHE_DIR=/tmp", 17));   /* the name part of an entry */
}

static void check_nearest(void) {
    const char *s = "DSINFER_CACHE_DIRR";
    const char *n = ds_env_nearest(s, strlen(s));
    CHECKF(n && strcmp(n, "DSINFER_CACHE_DIR") == 0, "%s", n ? n : "(none)");
    s = "DSINFER_API_KYE";   /* two substitutions */
    n = ds_env_nearest(s, strlen(s));
    CHECKF(n && strcmp(n, "DSINFER_API_KEY") == 0, "%s", n ? n : "(none)");
    s = "DSINFER_QQQQQQQQQQQQQQQQQQQQQQQQ";
    CHECK(ds_env_nearest(s, strlen(s)) == NULL);
    s = "DSINFER_CACHE_DIR";   /* a known name is its own nearest */
    n = ds_env_nearest(s, strlen(s));
    CHECK(n && strcmp(n, s) == 0);
}

static void check_warning(void) {
    char *const env[] = {"PATH=/bin", "DSINFER_CACHE_DIR=/tmp", "DSINFER_NOPE_NOPE=1", "DSINFER_CACHE_DIRR=x",
                         "DSINFER_BIN=build/dsinfer", "XDSINFER_FOO=1", "DSINFER_NO_VALUE", NULL};
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    CHECK(out != NULL);
    if (!out) return;
    const int n = ds_env_warn_unknown(env, out);
    fclose(out);
    CHECKF(n == 3, "%d warnings: %s", n, buf);
    CHECKF(strstr(buf, "DSINFER_NOPE_NOPE is set") != NULL, "%s", buf);
    CHECKF(strstr(buf, "DSINFER_CACHE_DIRR is set") && strstr(buf, "did you mean DSINFER_CACHE_DIR?"), "%s", buf);
    CHECKF(strstr(buf, "DSINFER_NO_VALUE is set") != NULL, "%s", buf);
    CHECKF(!strstr(buf, "PATH") && !strstr(buf, "XDSINFER") && !strstr(buf, "DSINFER_BIN") &&
               !strstr(buf, "DSINFER_CACHE_DIR is set"), "%s", buf);
    int lines = 0;
    for (const char *p = buf; *p; p++) lines += *p == '\n';
    CHECKF(lines == 3, "%d lines: %s", lines, buf);
    free(buf);
    CHECK(ds_env_warn_unknown(NULL, stderr) == 0);
}

int main(void) {
    check_list();
    check_known();
    check_nearest();
    check_warning();
    return test_result("env_check");
}
