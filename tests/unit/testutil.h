/* Minimal test helpers: CHECK counts failures and keeps going; tests return test_result(). A test
 * that cannot run here calls test_skip(reason), which prints the reason and exits 77. */
#ifndef DS_TESTUTIL_H
#define DS_TESTUTIL_H
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static int test_failures = 0;
static long test_checks = 0;   /* checks evaluated (a filtered run that evaluated none tested nothing) */
#define CHECK(cond) do { test_checks++; if (!(cond)) { test_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECKF(cond, ...) do { test_checks++; if (!(cond)) { test_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)
static inline int test_result(const char *name) {
    (void)test_checks;
    if (test_failures) { fprintf(stderr, "%s: %d check(s) failed\n", name, test_failures); return 1; }
    printf("%s: ok\n", name);
    return 0;
}
static inline void test_skip(const char *reason) { printf("SKIP: %s\n", reason); exit(77); }

/* path's content = text (a CHECK fails when the file cannot be written) */
static inline void test_write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* GPUs nvidia-smi lists (0 without it), without initializing CUDA in this process (tests that fork one
 * process per GPU must not have a CUDA context before the fork). */
static inline int test_gpus_listed(void) {
    FILE *p = popen("nvidia-smi -L 2>/dev/null", "r");
    if (!p) return 0;
    int n = 0;
    char line[512];
    while (fgets(line, sizeof line, p)) n += line[0] == 'G' && line[1] == 'P' && line[2] == 'U' && line[3] == ' ';
    pclose(p);
    return n;
}

/* The multi-GPU NCCL tests: skip (77) with fewer than two GPUs or no loadable libnccl.so.2. */
static inline void test_need_two_gpus_and_nccl(void) {
    if (test_gpus_listed() < 2) test_skip("needs two GPUs (nvidia-smi -L lists fewer)");
    const char *lib = getenv("DSINFER_NCCL_LIB");
    void *h = dlopen(lib && *lib ? lib : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) test_skip("libnccl.so.2 cannot be loaded (LD_LIBRARY_PATH or DSINFER_NCCL_LIB)");
    dlclose(h);
}
#endif
