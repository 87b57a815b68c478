/* Access to a fixture's golden outputs (golden.safetensors) for the tests. */
#ifndef DS_TEST_GOLDEN_H
#define DS_TEST_GOLDEN_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "loader/safetensors.h"

static inline const char *fixtures_dir(void) {
    const char *d = getenv("DSINFER_FIXTURES");
    return d ? d : "tests/fixtures";
}

/* The tensor "p<i>.<what>" of a golden set, or NULL. */
static inline const ds_st_tensor *golden_get(const ds_st_set *g, int prompt, const char *what) {
    char name[64];
    snprintf(name, sizeof name, "p%d.%s", prompt, what);
    return ds_st_find(g, name);
}

typedef struct { double max_abs, rel_l2; } diff_stats;

/* Max abs and relative L2 error of got against ref over n floats; NaN in got makes both infinite. */
static inline diff_stats diff_f32(const float *got, const float *ref, size_t n) {
    double num = 0, den = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - (double)ref[i];
        if (isnan(got[i])) return (diff_stats){INFINITY, INFINITY};
        num += d * d;
        den += (double)ref[i] * ref[i];
        if (fabs(d) > mx) mx = fabs(d);
    }
    return (diff_stats){mx, sqrt(num / (den > 0 ? den : 1))};
}

static inline int argmax_f32(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

#endif
