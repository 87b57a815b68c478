/* The routed experts of a prefill-sized batch as one cuBLAS GEMM per expert and projection (issue 8;
 * DSINFER_CUDA_MOE_GEMM, with the tensor-core options on and at least DSINFER_CUDA_MOE_GEMM_MIN_M tokens).
 *
 * Why: the grouped tensor-core expert kernel (cuda_moe_tc.cu) streams each expert's weight once per group
 * of tokens, the right shape for decode; at 8K prompt tokens it took 17.9 ms a V2-Lite MoE layer (57% of
 * the prefill, DSINFER_CUDA_OP_TIMES, bench/RESULTS.md fifth session), about 8% of the matrix rate, where
 * each expert has ~770 rows: a GEMM's size. The caller has routed and grouped the rows by expert (rows[]
 * sorted by expert, off[] on the host after one copy: prefill is not graph-captured).
 *
 * For the n_e rows of expert e (slots off[e] .. off[e+1]-1):
 *   xs[slot, :]        = bf16(x[rows[slot], :])                       one gather for all experts
 *   gu[slot, 0:I]      = xs . gate_e^T,  gu[slot, I:2I] = xs . up_e^T   fp32 out, fp32 accumulate
 *   act[slot, :]       = bf16(SiLU(gu[:, 0:I]) * gu[:, I:2I])          one kernel for all experts
 *   y[slot, :]         = act . down_e^T                                fp32, returned (workspace)
 * BF16 weights are used in place; FP8 / NVFP4 experts are dequantised to a BF16 copy of the expert first
 * (cu_weight_bf16, the values cu_w gives) - the same rounding points as the BF16 tensor-core path, so the
 * op test holds it to THR_TC. */
#include "backend/cuda/cuda.h"

/* grid n, block 256: xs[i, :] = bf16(x[rows[i], :]) */
__global__ void moe_gather_bf16_kernel(__nv_bfloat16 *xs, const float *x, const int32_t *rows, int D) {
    const float *src = x + (size_t)rows[blockIdx.x] * D;
    __nv_bfloat16 *dst = xs + (size_t)blockIdx.x * D;
    for (int c = threadIdx.x; c < D; c += blockDim.x) dst[c] = __float2bfloat16(src[c]);
}

/* act[r, j] = bf16(SiLU(gu[r, j]) * gu[r, I + j]) for r < n, j < I */
__global__ void moe_silu_mul_bf16_kernel(__nv_bfloat16 *act, const float *gu, size_t n, int I) {
    size_t total = n * (size_t)I;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / (size_t)I, j = i % (size_t)I;
        float g = gu[r * 2 * (size_t)I + j], u = gu[r * 2 * (size_t)I + (size_t)I + j];
        act[i] = __float2bfloat16(g / (1.0f + expf(-g)) * u);
    }
}

int cu_moe_gemm_on(const ds_cuda_backend *cb, int M) {
    return cb->opt.moe_gemm && cb->opt.tc && M >= cb->opt.moe_gemm_min_m && M > GEMV_MAX_M;
}

/* out[M, N] (ld ldo) = x[M, K] . A[N, K]^T, BF16 in, fp32 out and accumulate: a cuBLASLt plan kept per shape
 * (the heuristic's first algorithm, not timed); cublasGemmEx where cuBLASLt has none. The first version
 * called cublasGemmEx with each expert's exact row count: every new count cost cuBLAS a heuristic query on
 * the host (about 60 us, 192 calls a layer), which bounded the layer (V2-Lite 2K prefill 13194 -> 4897
 * tok/s, RESULTS fifth session run 8). Row counts are padded to ROW_PAD so few shapes recur. */
static void gemm_bf16(ds_cuda_backend *cb, float *out, int ldo, const __nv_bfloat16 *A, const __nv_bfloat16 *x, int N,
                      int M, int K) {
    if (cu_lt_gemm_bf16(cb, out, ldo, A, x, N, M, K, 0)) return;
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasGemmEx(cb->cublas_tc, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, A, CUDA_R_16BF, K, x, CUDA_R_16BF, K,
                              &zero, out, CUDA_R_32F, ldo, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* w in BF16: in place, or dequantised into tile (rows x cols BF16) */
static const __nv_bfloat16 *bf16_of(const ds_weight *w, __nv_bfloat16 *tile) {
    if (w->dtype == DS_DTYPE_BF16 && !w->scale) return (const __nv_bfloat16 *)w->data;
    cu_weight_bf16(tile, cu_view(w), 0, w->rows);
    return tile;
}

static void silu_mul(__nv_bfloat16 *act, const float *gu, size_t R, int I) {
    size_t blocks = cu_blocks(R * (size_t)I, 256);
    moe_silu_mul_bf16_kernel<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, cu_stream>>>(act, gu, R, I);
    CUDA_LAUNCH_CHECK();
}

/* Rows an expert's GEMMs are padded to. The padding rows of expert e are the first rows of the experts after
 * it (or scratch past the last one): e's GEMMs write them first and the owning expert's GEMMs, later on the
 * same stream, overwrite them; nothing reads a row past R but the last expert's padded GEMMs. */
#define ROW_PAD 64
static int padded(int n) { return (n + ROW_PAD - 1) / ROW_PAD * ROW_PAD; }

const void *cu_moe_gemm(ds_cuda_backend *cb, const float *x, const int32_t *rows, const int32_t *off, int E, int D,
                        int I, const ds_layer_weights *L, int *y_bf16) {
    size_t R = (size_t)off[E];
    if (!R) {
        *y_bf16 = 0;
        return NULL;
    }
    const void *y8 = cu_moe_gemm_f8(cb, x, rows, off, E, D, I, L, y_bf16);   /* FP8 experts as W8A8 on wgmma */
    if (y8) return y8;
    *y_bf16 = 0;
    size_t Rp = R + ROW_PAD;   /* room for the last expert's padding */
    size_t xs_b = (Rp * (size_t)D * 2 + 255) / 256 * 256, gu_b = Rp * 2 * (size_t)I * 4;
    size_t act_b = (Rp * (size_t)I * 2 + 255) / 256 * 256, y_b = Rp * (size_t)D * 4;
    size_t tile_b = (size_t)I * (size_t)D * 2;
    char *ws = (char *)cu_ws_get(&cb->ws_moe_gemm, xs_b + gu_b + act_b + y_b + 2 * tile_b);
    __nv_bfloat16 *xs = (__nv_bfloat16 *)ws, *act = (__nv_bfloat16 *)(ws + xs_b + gu_b);
    float *gu = (float *)(ws + xs_b), *yp = (float *)(ws + xs_b + gu_b + act_b);
    __nv_bfloat16 *t0 = (__nv_bfloat16 *)(ws + xs_b + gu_b + act_b + y_b), *t1 = t0 + (size_t)I * D;
    moe_gather_bf16_kernel<<<(unsigned)R, 256, 0, cu_stream>>>(xs, x, rows, D);
    CUDA_LAUNCH_CHECK();
    cu_optimes_phase(cb, "  moe: gather rows (bf16)");
    for (int e = 0; e < E; e++) {
        int n = off[e + 1] - off[e];
        if (!n) continue;
        const __nv_bfloat16 *g = bf16_of(&L->exp_gate[e], t0), *u = bf16_of(&L->exp_up[e], t1);
        const __nv_bfloat16 *xe = xs + (size_t)off[e] * D;
        if (u == g + (size_t)I * D) {   /* gate and up adjacent (the weight pool's order, or the tiles): one GEMM */
            gemm_bf16(cb, gu + (size_t)off[e] * 2 * I, 2 * I, g, xe, 2 * I, padded(n), D);
            continue;
        }
        gemm_bf16(cb, gu + (size_t)off[e] * 2 * I, 2 * I, g, xe, I, padded(n), D);
        gemm_bf16(cb, gu + (size_t)off[e] * 2 * I + I, 2 * I, u, xe, I, padded(n), D);
    }
    cu_optimes_phase(cb, "  moe: gate/up GEMMs");
    silu_mul(act, gu, R, I);
    cu_optimes_phase(cb, "  moe: SiLU * up");
    for (int e = 0; e < E; e++) {
        int n = off[e + 1] - off[e];
        if (!n) continue;
        const __nv_bfloat16 *d = bf16_of(&L->exp_down[e], t0);
        gemm_bf16(cb, yp + (size_t)off[e] * D, D, d, act + (size_t)off[e] * I, D, padded(n), I);
    }
    cu_optimes_phase(cb, "  moe: down GEMMs");
    return yp;
}
