/* CPU reference backend: internals shared by its files. fp32 math on weights in their stored dtype,
 * threads with OpenMP. */
#ifndef DS_BACKEND_CPU_H
#define DS_BACKEND_CPU_H

#include "backend/backend.h"

typedef struct {
    ds_backend base;
    int n_threads;
    ds_batch_meta b;          /* current batch (pointers owned by the caller) */
    int max_ctx;              /* longest context in the current batch */
    float *work;              /* shared workspace, grown by set_batch */
    size_t work_n;
    float *thread_work;       /* [n_threads, thread_work_n] */
    size_t thread_work_n;
    float *mlp_work;          /* [2, M, I_max]: gate and up outputs of a dense MLP or an expert */
    float *moe_work;          /* MoE routing and gathered rows for M tokens (see cpu_moe.c) */
    size_t mlp_work_n, moe_work_n;
    int moe_w8a8;             /* DSINFER_MOE_W8A8=1 at creation: FP8 experts quantize their activations (cpu_moe.c) */
} ds_cpu_backend;

/* Work (multiply-adds or elements) below which an op runs on the calling thread: waking the team costs
 * more than small ops take, and on a loaded machine it costs much more. */
#define CPU_PAR_MIN_WORK (1 << 16)
#define CPU_PAR(work) ((double)(work) >= CPU_PAR_MIN_WORK)

static inline ds_cpu_backend *cpu_of(ds_backend *be) { return (ds_cpu_backend *)be; }

/* Per-thread scratch of thread_work_n floats for the calling OpenMP thread. */
float *cpu_thread_scratch(ds_cpu_backend *cb);

static inline float cpu_dot(const float *a, const float *b, int n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* y[0:n] += a * x[0:n] */
static inline void cpu_axpy(float *y, float a, const float *x, int n) {
#pragma omp simd
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}
/* Floats of moe_work needed for M tokens. */
size_t cpu_moe_work_floats(const ds_config *cfg, int M);
void cpu_reserve_rows(ds_cpu_backend *cb, int M);

/* Per-thread scratch floats cpu_linear needs for weights of max_cols columns. */
size_t cpu_linear_scratch_floats(int max_cols);
void cpu_linear(ds_backend *be, float *out, const float *x, const ds_weight *w, int M);
void cpu_mlp(ds_backend *be, float *out, const float *x, const ds_weight *gate, const ds_weight *up,
             const ds_weight *down, int M);
/* cpu_mlp with act_fp8: the down projection's input (SiLU(g) * u, rounded to BF16) quantized by
 * cpu_act_fp8 first, as the W8A8 experts do (cpu_moe.c). */
void cpu_mlp_act(ds_backend *be, float *out, const float *x, const ds_weight *gate, const ds_weight *up,
                 const ds_weight *down, int M, int act_fp8);
/* x [n, K] (K % 128 == 0) quantized in place to e4m3 per row x 128 columns with scale max(amax, 1e-4) / 448
 * (the W8A8 rule of the CUDA kernels): each value becomes e4m3(v / scale) * scale. */
void cpu_act_fp8(float *x, int n, int K);
void cpu_attn_naive(ds_backend *be, float *out, const float *q, const void *cache, const ds_weight *kv_b,
                    const int *seqs, int n_seqs);
void cpu_attn_absorbed(ds_backend *be, float *out, const float *q, const void *cache, const ds_weight *kv_b,
                       const int *seqs, int n_seqs);
/* One token's KV entry to and from the FP8 cache layout ((C + dr) floats <-> ds_kv_token_bytes). */
void cpu_kv_pack_fp8(const ds_config *cfg, const float *src, unsigned char *dst);
void cpu_kv_unpack_fp8(const ds_config *cfg, const unsigned char *src, float *dst);
/* One token's KV entry in the cache's layout (fp32, FP8 or BF16: ds_kv_token_bytes bytes) from / to
 * (C + dr) floats. */
void cpu_kv_pack(const ds_config *cfg, const float *src, unsigned char *dst);
void cpu_kv_unpack(const ds_config *cfg, const unsigned char *src, float *dst);
void cpu_moe(ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int M);
void cpu_moe_routed(ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int M, int e0, int e1);

/* Routing of one token (spec 9.2): router logits [E] (fp32) -> K expert ids and weights.
 * bias may be NULL. scratch holds 2*E floats. */
void ds_route_token(const ds_config *cfg, const float *logits, const float *bias, int32_t *ids, float *weights,
                    float *scratch);

#endif
