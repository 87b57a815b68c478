/* Where the time goes, per backend op (DSINFER_CUDA_OP_TIMES=1; a diagnostic, off by default).
 *
 * Wraps the backend's op entries: each call runs between two CUDA events on the backend's stream and the
 * host waits for the second, so every op is timed alone (this serialises what would overlap, e.g. the
 * shared expert's second stream, and adds a host round trip per op: totals are a breakdown, not a
 * throughput). Inside a CUDA graph capture nothing is timed (run with DSINFER_CUDA_GRAPHS=0 to see decode
 * steps). Linears are kept apart by weight shape and dtype, the other ops by name and by M <= 8 (decode-
 * like) or larger. The table prints to stderr when the backend is destroyed. */
#include "backend/cuda/cuda.h"

#define N_NAMES 256

typedef struct {
    char name[64];
    long calls;
    double ms;
} op_row;

struct cu_optimes {
    ds_backend orig;   /* the entries before wrapping */
    cudaEvent_t e0, e1;
    cudaEvent_t op0;   /* the op's own start (e0 moves with the phases) */
    int in_op;         /* inside a timed op: phases may be recorded */
    op_row row[N_NAMES];
    int n;
};

static struct cu_optimes *ot_of(ds_backend *be) { return cu_of(be)->optimes; }

/* 1 if this call is timed (not capturing): e0 recorded */
static int t_begin(struct cu_optimes *t) {
    if (cu_capturing()) return 0;
    CUDA_CHECK(cudaEventRecord(t->op0, cu_stream));
    CUDA_CHECK(cudaEventRecord(t->e0, cu_stream));
    t->in_op = 1;
    return 1;
}

/* adds the time from e0 (op: from op0) to now under name */
static void t_add(struct cu_optimes *t, const char *name, int whole_op) {
    CUDA_CHECK(cudaEventRecord(t->e1, cu_stream));
    CUDA_CHECK(cudaEventSynchronize(t->e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, whole_op ? t->op0 : t->e0, t->e1));
    op_row *r = NULL;
    for (int i = 0; i < t->n && !r; i++)
        if (!strcmp(t->row[i].name, name)) r = &t->row[i];
    if (!r && t->n < N_NAMES) {
        r = &t->row[t->n++];
        snprintf(r->name, sizeof r->name, "%s", name);
    }
    if (!r) r = &t->row[N_NAMES - 1];   /* full: the last row takes the rest */
    r->calls++;
    r->ms += ms;
}

static void t_end(struct cu_optimes *t, int timed, const char *name) {
    if (!timed) return;
    if (name[0] == ' ') {   /* a phase (cu_optimes_phase) */
        t_add(t, name, 0);
        return;
    }
    t_add(t, name, 1);
    t->in_op = 0;
}

/* Phases inside an op: the time since the op began or since the previous phase, under its own row (rows
 * whose names start with spaces are parts of the op row above them, not extra time). */
void cu_optimes_phase(ds_cuda_backend *cb, const char *name) {
    struct cu_optimes *t = cb->optimes;
    if (!t || !t->in_op) return;
    t_end(t, 1, name);
    CUDA_CHECK(cudaEventRecord(t->e0, cu_stream));
}

static const char *m_class(int M) { return M <= GEMV_MAX_M ? "M<=8" : "M>8"; }

#define TIMED(be, label, call)                        \
    do {                                              \
        struct cu_optimes *t_ = ot_of(be);            \
        int on_ = t_begin(t_);                        \
        call;                                         \
        t_end(t_, on_, label);                        \
    } while (0)

static void w_embed(ds_backend *be, float *out, const ds_weight *emb) {
    TIMED(be, "embed", ot_of(be)->orig.embed(be, out, emb));
}
static void w_rmsnorm(ds_backend *be, float *out, int os, const float *x, int xs, const ds_weight *w, int M, int n,
                      float eps) {
    TIMED(be, "rmsnorm", ot_of(be)->orig.rmsnorm(be, out, os, x, xs, w, M, n, eps));
}
static void w_add(ds_backend *be, float *h, const float *x, size_t n) { TIMED(be, "add", ot_of(be)->orig.add(be, h, x, n)); }
static void w_add_rmsnorm(ds_backend *be, float *xn, float *h, const float *x, const ds_weight *w, int M, int n,
                          float eps) {
    TIMED(be, "add_rmsnorm", ot_of(be)->orig.add_rmsnorm(be, xn, h, x, w, M, n, eps));
}
static void w_linear(ds_backend *be, float *out, const float *x, const ds_weight *w, int M) {
    char name[64];
    snprintf(name, sizeof name, "linear %dx%d %s %s", w->rows, w->cols, ds_dtype_name(w->dtype), m_class(M));
    TIMED(be, name, ot_of(be)->orig.linear(be, out, x, w, M));
}
static void w_rope(ds_backend *be, float *x, int rs, int nh, int hs, int off) {
    TIMED(be, "rope", ot_of(be)->orig.rope(be, x, rs, nh, hs, off));
}
static void w_kv_store(ds_backend *be, void *cache, const float *kv) { TIMED(be, "kv_store", ot_of(be)->orig.kv_store(be, cache, kv)); }
static void w_attn_naive(ds_backend *be, float *out, const float *q, const void *cache, const ds_weight *kv_b,
                         const int *seqs, int n_seqs) {
    TIMED(be, "attn_naive (prefill form)", ot_of(be)->orig.attn_naive(be, out, q, cache, kv_b, seqs, n_seqs));
}
static void w_attn_absorbed(ds_backend *be, float *out, const float *q, const void *cache, const ds_weight *kv_b,
                            const int *seqs, int n_seqs) {
    TIMED(be, "attn_absorbed", ot_of(be)->orig.attn_absorbed(be, out, q, cache, kv_b, seqs, n_seqs));
}
static void w_mlp(ds_backend *be, float *out, const float *x, const ds_weight *g, const ds_weight *u, const ds_weight *d,
                  int M) {
    char name[64];
    snprintf(name, sizeof name, "mlp (dense) %s", m_class(M));
    TIMED(be, name, ot_of(be)->orig.mlp(be, out, x, g, u, d, M));
}
static void w_moe(ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int M) {
    char name[64];
    snprintf(name, sizeof name, "moe (routed + shared) %s", m_class(M));
    TIMED(be, name, ot_of(be)->orig.moe(be, out, x, L, M));
}
static void w_moe_routed(ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int M, int e0, int e1) {
    char name[64];
    snprintf(name, sizeof name, "moe_routed %s", m_class(M));
    TIMED(be, name, ot_of(be)->orig.moe_routed(be, out, x, L, M, e0, e1));
}
static void w_gather_rows(ds_backend *be, float *out, const float *x, const int32_t *rows, int n, int nc) {
    TIMED(be, "gather_rows", ot_of(be)->orig.gather_rows(be, out, x, rows, n, nc));
}
static void w_combine_rows(ds_backend *be, float *out, const float *y, const float *w, int M, int K, int D, int acc) {
    TIMED(be, "combine_rows", ot_of(be)->orig.combine_rows(be, out, y, w, M, K, D, acc));
}

void cu_optimes_install(ds_cuda_backend *cb) {
    struct cu_optimes *t = (struct cu_optimes *)ds_xcalloc(1, sizeof *t);
    ds_backend *be = &cb->base;
    t->orig = *be;
    CUDA_CHECK(cudaEventCreate(&t->e0));
    CUDA_CHECK(cudaEventCreate(&t->e1));
    CUDA_CHECK(cudaEventCreate(&t->op0));
    cb->optimes = t;
    be->embed = w_embed;
    be->rmsnorm = w_rmsnorm;
    be->add = w_add;
    if (be->add_rmsnorm) be->add_rmsnorm = w_add_rmsnorm;
    be->linear = w_linear;
    be->linear2 = NULL;   /* the model then calls linear twice: each timed */
    be->qkv_finish = NULL;   /* and the four steps one by one */
    be->attn_in = NULL;      /* the fused chains: their ops one by one */
    be->normed_linear = NULL;   /* the norm and the linear, each timed */
    be->moe_to_attn_in = NULL;
    be->layer_tail1 = NULL;
    be->layer1 = NULL;
    be->linear_add_rmsnorm = NULL;
    be->rope = w_rope;
    be->kv_store = w_kv_store;
    be->attn_naive = w_attn_naive;
    be->attn_absorbed = w_attn_absorbed;
    be->mlp = w_mlp;
    be->moe = w_moe;
    if (be->moe_routed) be->moe_routed = w_moe_routed;
    be->gather_rows = w_gather_rows;
    be->combine_rows = w_combine_rows;
}

static int by_ms(const void *a, const void *b) {
    double x = ((const op_row *)a)->ms, y = ((const op_row *)b)->ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

void cu_optimes_report_free(ds_cuda_backend *cb) {
    struct cu_optimes *t = cb->optimes;
    if (!t) return;
    qsort(t->row, (size_t)t->n, sizeof t->row[0], by_ms);
    double total = 0;
    for (int i = 0; i < t->n; i++)
        if (t->row[i].name[0] != ' ') total += t->row[i].ms;   /* phases are inside their op's time */
    if (t->n) {
        fprintf(stderr, "op times (DSINFER_CUDA_OP_TIMES: each op alone, host waits after each; %.3f ms in all)\n", total);
        fprintf(stderr, "  %-44s %8s %12s %7s %10s\n", "op", "calls", "ms", "%", "us/call");
        for (int i = 0; i < t->n; i++)
            fprintf(stderr, "  %-44s %8ld %12.3f %6.1f%% %10.1f\n", t->row[i].name, t->row[i].calls, t->row[i].ms,
                    total > 0 ? 100.0 * t->row[i].ms / total : 0.0, 1000.0 * t->row[i].ms / (double)t->row[i].calls);
    }
    cudaEventDestroy(t->e0);
    cudaEventDestroy(t->e1);
    cudaEventDestroy(t->op0);
    free(t);
    cb->optimes = NULL;
}
