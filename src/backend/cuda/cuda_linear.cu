/* CUDA linear layers: out[M, N] = x[M, K] . W^T, W [N, K] in its stored dtype (F32, F16, BF16, or FP8
 * E4M3 with 128x128 block scales), fp32 accumulation, fp32 out.
 *
 * Two paths, both plain fp32 arithmetic like the CPU reference:
 *  - M <= GEMV_MAX_M (decode): one warp per weight row reads the row once in its stored dtype,
 *    converts and scales it on the fly and dots it with every activation row; memory-bound, reads each
 *    weight byte once.
 *  - larger M (prefill, experts with many tokens): the weight is dequantized to fp32 in tiles of rows
 *    (at most DEQ_TILE_FLOATS) and multiplied with cuBLAS SGEMM in pedantic fp32 (no TF32).
 * Tensor-core paths (BF16 cublasGemmEx, the cuBLASLt FP8 block-scaled GEMM of spec 12.5) trade this
 * exactness for speed and belong to the speed work. */
#include "backend/cuda/cuda.h"

#define GEMV_MAX_M 8
#define GEMV_WARPS 8
#define DEQ_TILE_FLOATS ((size_t)64 << 20)

/* grid (ceil(N / GEMV_WARPS)), block GEMV_WARPS * 32. */
__global__ void gemv_kernel(float *out, const float *x, cu_wview w, int M) {
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int n = blockIdx.x * GEMV_WARPS + warp;
    if (n >= w.rows) return;   /* whole warp leaves together */
    int K = w.cols;
    float acc[GEMV_MAX_M];
#pragma unroll
    for (int m = 0; m < GEMV_MAX_M; m++) acc[m] = 0.0f;
    for (int k = lane; k < K; k += 32) {
        float wv = cu_w(w, n, k);
#pragma unroll
        for (int m = 0; m < GEMV_MAX_M; m++)
            if (m < M) acc[m] += wv * x[(size_t)m * K + k];
    }
#pragma unroll
    for (int m = 0; m < GEMV_MAX_M; m++) {
        float v = cu_warp_sum(acc[m]);
        if (lane == 0 && m < M) out[(size_t)m * w.rows + n] = v;
    }
}

/* dst[i, c] = W[r0 + i, c] in fp32, for i < nr. */
__global__ void dequant_kernel(float *dst, cu_wview w, int r0, int nr) {
    size_t n = (size_t)nr * (size_t)w.cols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int r = (int)(i / (size_t)w.cols), c = (int)(i % (size_t)w.cols);
        dst[i] = cu_w(w, r0 + r, c);
    }
}

static void sgemm_rows(ds_cuda_backend *cb, float *out, int ldo, const float *x, const float *wf, int M, int nr, int K) {
    const float one = 1.0f, zero = 0.0f;
    /* column-major view: out^T[nr, M] (ld ldo) = wf^T ... i.e. C = op(A) B with A = wf as [K, nr] (ld K)
     * transposed and B = x as [K, M] (ld K). */
    CUBLAS_CHECK(cublasSgemm(cb->cublas, CUBLAS_OP_T, CUBLAS_OP_N, nr, M, K, &one, wf, K, x, K, &zero, out, ldo));
}

void cu_linear(ds_backend *be, float *out, const float *x, const ds_weight *w, int M) {
    ds_cuda_backend *cb = cu_of(be);
    int N = w->rows, K = w->cols;
    if (M <= 0 || N <= 0) return;
    cu_wview v = cu_view(w);
    if (M <= GEMV_MAX_M) {
        gemv_kernel<<<cu_blocks((size_t)N, GEMV_WARPS), GEMV_WARPS * 32>>>(out, x, v, M);
        CUDA_LAUNCH_CHECK();
        return;
    }
    if (w->dtype == DS_DTYPE_F32 && !w->scale) {
        sgemm_rows(cb, out, N, x, (const float *)w->data, M, N, K);
        return;
    }
    size_t tile = DEQ_TILE_FLOATS / (size_t)K;
    int rows = tile >= (size_t)N ? N : (tile >= 128 ? (int)(tile / 128 * 128) : (tile ? (int)tile : 1));
    float *wf = (float *)cu_ws_get(&cb->ws_deq, (size_t)rows * (size_t)K * sizeof(float));
    for (int r0 = 0; r0 < N; r0 += rows) {
        int nr = N - r0 < rows ? N - r0 : rows;
        size_t blocks = cu_blocks((size_t)nr * (size_t)K, 256);
        dequant_kernel<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256>>>(wf, v, r0, nr);
        CUDA_LAUNCH_CHECK();
        sgemm_rows(cb, out + r0, N, x, wf, M, nr, K);
    }
}

/* g = SiLU(g) * u, SiLU(z) = z / (1 + exp(-z)) as on the CPU. */
__global__ void silu_mul_kernel(float *g, const float *u, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float z = g[i];
        g[i] = z / (1.0f + expf(-z)) * u[i];
    }
}

void cu_mlp(ds_backend *be, float *out, const float *x, const ds_weight *gate, const ds_weight *up,
            const ds_weight *down, int M) {
    ds_cuda_backend *cb = cu_of(be);
    if (M <= 0) return;
    size_t n = (size_t)M * (size_t)gate->rows;
    float *g = (float *)cu_ws_get(&cb->ws_mlp, 2 * n * sizeof(float)), *u = g + n;
    cu_linear(be, g, x, gate, M);
    cu_linear(be, u, x, up, M);
    size_t blocks = cu_blocks(n, 256);
    silu_mul_kernel<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256>>>(g, u, n);
    CUDA_LAUNCH_CHECK();
    cu_linear(be, out, g, down, M);
}
