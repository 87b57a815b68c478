/* Minimal test helpers: CHECK counts failures and keeps going; tests return test_result(). A test
 * that cannot run here calls test_skip(reason), which prints the reason and exits 77. */
#ifndef DS_TESTUTIL_H
#define DS_TESTUTIL_H
#include <stdio.h>
#include <stdlib.h>

static int test_failures = 0;
#define CHECK(cond) do { if (!(cond)) { test_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECKF(cond, ...) do { if (!(cond)) { test_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)
static inline int test_result(const char *name) {
    if (test_failures) { fprintf(stderr, "%s: %d check(s) failed\n", name, test_failures); return 1; }
    printf("%s: ok\n", name);
    return 0;
}
static inline void test_skip(const char *reason) { printf("SKIP: %s\n", reason); exit(77); }

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
#endif
