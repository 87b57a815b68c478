/* The diagnostic builds' stamp printing (MLA_PROF, MOEO_PROF: per-block %globaltimer stamps of a kernel's last launch):
 * one line of quantiles (min, 10%, 50%, 90%, max) in us over a launch's blocks. Host code only. */
#ifndef DS_CUDA_PROF_H
#define DS_CUDA_PROF_H
#include <stdio.h>
#include <stdlib.h>

static int cu_prof_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* v [n] (n > 0) sorted in place, then "PREFIX NAME us: min .. max (n blocks)" on f; w: NAME's column width */
static inline void cu_prof_quantiles(FILE *f, const char *prefix, int w, const char *name, double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), cu_prof_cmp);
    fprintf(f, "%s %-*s us: min %7.2f  p10 %7.2f  p50 %7.2f  p90 %7.2f  max %7.2f  (%d blocks)\n", prefix, w, name, v[0],
            v[n / 10], v[n / 2], v[(n * 9) / 10], v[n - 1], n);
}
#endif
