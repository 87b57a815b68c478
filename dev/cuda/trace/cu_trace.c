/* cu_trace: a decode step's kernels on a timeline, inside CUDA graphs (a diagnostic, not part of dsinfer).
 *
 * Why: at batch 1 the step is ~88 us a layer against ~33 us of bytes (V2-Lite FP8, H100), and ncu times each kernel
 * alone, outside the graph and without PDL's overlap; the device has no nsys. CUPTI's activity records give every
 * graph node's start and end on the GPU's clock as the graph replays, so the step's time splits into kernels and
 * the gaps between them.
 *
 * Use: LD_PRELOAD=libcu_trace.so dsinfer bench ... (dev/cuda/trace/build.sh builds it; libcupti.so.13 beside it).
 * At exit it groups the graph nodes' records by their graph launch (the correlation id), keeps the launches with as
 * many nodes as the last one (the step being measured; the first such launch is dropped: the replay after capture),
 * and prints for node i of the step the medians over those launches of: its start from the step's first start, its
 * duration, and its gap (its start less the latest end of the nodes before it: negative where it overlapped, PDL).
 * DSINFER_TRACE_FILE=PATH: that per-node table (default: not written); stderr gets the per-kernel-name summary (count
 * a step, sum of durations, sum of gaps) and the step's span.
 * Overhead: CUPTI's kernel records add a little to each kernel (so compare spans only with this tool on). */
#define _GNU_SOURCE
#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUPTI_OK(call)                                                                          \
    do {                                                                                        \
        CUptiResult r_ = (call);                                                                \
        if (r_ != CUPTI_SUCCESS) {                                                              \
            const char *s_ = NULL;                                                              \
            cuptiGetResultString(r_, &s_);                                                      \
            fprintf(stderr, "cu_trace: %s failed: %s\n", #call, s_ ? s_ : "?");                 \
            return;                                                                             \
        }                                                                                       \
    } while (0)

typedef struct {
    uint64_t start, end;   /* ns, GPU clock */
    uint32_t corr;         /* the launch's correlation id (a graph launch: all its nodes share it) */
    uint32_t graph;        /* 0: not a graph node */
    const char *name;      /* CUPTI's (kept for the process) or a static "memset" / "memcpy" */
    int grid;              /* blocks (kernels) */
} rec;

static rec *recs;
static size_t n_recs, cap_recs;

static void add_rec(rec r) {
    if (n_recs == cap_recs) {
        size_t c = cap_recs ? cap_recs * 2 : 65536;
        rec *p = realloc(recs, c * sizeof(rec));
        if (!p) return;   /* (out of memory: records dropped, the summary covers what was kept) */
        recs = p;
        cap_recs = c;
    }
    recs[n_recs++] = r;
}

#define BUF_BYTES (8u << 20)
static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records) {
    *buf = aligned_alloc(8, BUF_BYTES);
    *size = *buf ? BUF_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid) {
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *a = NULL;
    while (cuptiActivityGetNextRecord(buf, valid, &a) == CUPTI_SUCCESS) {
        if (a->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || a->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)a;
            add_rec((rec){k->start, k->end, k->correlationId, k->graphId, k->name, k->gridX * k->gridY * k->gridZ});
        } else if (a->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)a;
            add_rec((rec){m->start, m->end, m->correlationId, m->graphId, "memset", 0});
        } else if (a->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)a;
            add_rec((rec){m->start, m->end, m->correlationId, m->graphId, "memcpy", 0});
        }
    }
    free(buf);
}

__attribute__((constructor)) static void trace_start(void) {
    CUPTI_OK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    CUPTI_OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CUPTI_OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
    CUPTI_OK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
}

/* "_Z11moeo_kernelILi1ELb0EEv7mo_args" -> "moeo_kernel<ILi1ELb0EE" (the identifier and its template arguments raw) */
static void short_name(const char *m, char *out, size_t n) {
    if (strncmp(m, "_Z", 2) != 0) {
        snprintf(out, n, "%s", m);
        return;
    }
    char *e;
    long len = strtol(m + 2, &e, 10);
    if (len <= 0 || (size_t)len > strlen(e)) {
        snprintf(out, n, "%s", m);
        return;
    }
    const char *rest = e + len;
    if (*rest == 'I') {
        int depth = 0;
        const char *t = rest;
        do {
            depth += *t == 'I' ? 1 : *t == 'E' ? -1 : 0;   /* (rough: nested names may end early; a label only) */
            t++;
        } while (*t && depth > 0);
        snprintf(out, n, "%.*s<%.*s>", (int)len, e, (int)(t - rest - 2 > 40 ? 40 : t - rest - 2), rest + 1);
    } else
        snprintf(out, n, "%.*s", (int)len, e);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}
static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}
static int cmp_rec(const void *a, const void *b) {   /* by launch, then start */
    const rec *x = a, *y = b;
    if (x->corr != y->corr) return x->corr < y->corr ? -1 : 1;
    return x->start < y->start ? -1 : x->start > y->start;
}

typedef struct {
    const char *name;
    int count;
    double dur, gap;   /* us, a step's sums of the medians */
} by_name;

__attribute__((destructor)) static void trace_end(void) {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    size_t ng = 0;
    rec *g = malloc((n_recs ? n_recs : 1) * sizeof(rec));
    if (!g) return;
    for (size_t i = 0; i < n_recs; i++)
        if (recs[i].graph) g[ng++] = recs[i];
    if (!ng) {
        fprintf(stderr, "cu_trace: %zu records, none from a graph (graphs off?)\n", n_recs);
        free(g);
        return;
    }
    qsort(g, ng, sizeof(rec), cmp_rec);
    /* launches: [first index, count); the step measured = launches with the last launch's node count */
    size_t nl = 0, *lo = malloc(ng * sizeof(size_t)), *cnt = malloc(ng * sizeof(size_t));
    for (size_t i = 0; i < ng; i++) {
        if (i == 0 || g[i].corr != g[i - 1].corr) {
            lo[nl] = i;
            cnt[nl++] = 0;
        }
        cnt[nl - 1]++;
    }
    const size_t want = cnt[nl - 1];
    size_t *sel = malloc(nl * sizeof(size_t)), ns = 0;
    for (size_t l = 0; l < nl; l++)
        if (cnt[l] == want && strcmp(g[lo[l]].name, g[lo[nl - 1]].name) == 0) sel[ns++] = l;
    if (ns > 1) {   /* the first replay after the capture dropped */
        memmove(sel, sel + 1, (ns - 1) * sizeof(size_t));
        ns--;
    }
    uint64_t *off = malloc(ns * sizeof(uint64_t)), *dur = malloc(ns * sizeof(uint64_t));
    int64_t *gap = malloc(ns * sizeof(int64_t));
    uint64_t *span = malloc(ns * sizeof(uint64_t));
    by_name *bn = calloc(want, sizeof(by_name));
    size_t nbn = 0;
    const char *path = getenv("DSINFER_TRACE_FILE");
    FILE *f = path && *path ? fopen(path, "w") : NULL;
    if (path && *path && !f) fprintf(stderr, "cu_trace: cannot write %s\n", path);
    if (f) fprintf(f, "# node  start_us  dur_us  gap_us  grid  name   (medians over %zu launches of %zu nodes)\n", ns, want);
    double sum_dur = 0, sum_gap_pos = 0, sum_gap_neg = 0;
    for (size_t i = 0; i < want; i++) {
        for (size_t s = 0; s < ns; s++) {
            const rec *r = g + lo[sel[s]];
            uint64_t latest = 0;
            for (size_t j = 0; j < i; j++) latest = r[j].end > latest ? r[j].end : latest;
            off[s] = r[i].start - r[0].start;
            dur[s] = r[i].end - r[i].start;
            gap[s] = i ? (int64_t)r[i].start - (int64_t)latest : 0;
        }
        qsort(off, ns, sizeof(uint64_t), cmp_u64);
        qsort(dur, ns, sizeof(uint64_t), cmp_u64);
        qsort(gap, ns, sizeof(int64_t), cmp_i64);
        const double mo = off[ns / 2] * 1e-3, md = dur[ns / 2] * 1e-3, mg = gap[ns / 2] * 1e-3;
        const rec *r0 = g + lo[sel[0]] + i;
        char nm[96];
        short_name(r0->name, nm, sizeof nm);
        if (f) fprintf(f, "%5zu %9.2f %7.2f %7.2f %5d  %s\n", i, mo, md, mg, r0->grid, nm);
        sum_dur += md;
        if (mg > 0) sum_gap_pos += mg;
        else sum_gap_neg += mg;
        size_t b = 0;
        while (b < nbn && strcmp(bn[b].name, r0->name) != 0) b++;
        if (b == nbn) bn[nbn++].name = r0->name;
        bn[b].count++;
        bn[b].dur += md;
        bn[b].gap += mg;
    }
    if (f) fclose(f);
    for (size_t s = 0; s < ns; s++) {
        const rec *r = g + lo[sel[s]];
        uint64_t e = 0;
        for (size_t j = 0; j < want; j++) e = r[j].end > e ? r[j].end : e;
        span[s] = e - r[0].start;
    }
    qsort(span, ns, sizeof(uint64_t), cmp_u64);
    fprintf(stderr, "cu_trace: %zu graph launches, %zu of %zu nodes kept; step span median %.1f us (min %.1f); "
                    "durations sum %.1f us, gaps > 0 sum %.1f us, overlaps sum %.1f us\n",
            nl, ns, want, span[ns / 2] * 1e-3, span[0] * 1e-3, sum_dur, sum_gap_pos, sum_gap_neg);
    for (size_t b = 0; b < nbn; b++) {
        char nm[96];
        short_name(bn[b].name, nm, sizeof nm);
        fprintf(stderr, "cu_trace: %4d x  dur %8.1f us (%6.2f each)  gap %7.1f us (%5.2f each)  %s\n", bn[b].count,
                bn[b].dur, bn[b].dur / bn[b].count, bn[b].gap, bn[b].gap / bn[b].count, nm);
    }
    free(bn);
    free(span);
    free(gap);
    free(dur);
    free(off);
    free(sel);
    free(cnt);
    free(lo);
    free(g);
}
