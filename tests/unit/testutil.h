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
#endif
