/* W8A8 linear for FP8 block-scaled weights (issue 8; switch DSINFER_CUDA_FP8_GEMM=1, see cuda.h):
 *   1. activations quantized per token x 128 columns as the official kernel does (spec 12.2):
 *      s = max(amax, 1e-4) / 448, q = e4m3(x / s), round half to even (cu_f32_to_fp8, the CPU's encoder);
 *   2. cuBLASLt's block-scaled FP8 GEMM on Hopper (spec 12.5): A = the weight as stored (E4M3 [N, K]
 *      row-major, "T"), its weight_scale_inv as BLK128x128_32F scales used in place; B = the quantized
 *      activations (E4M3 [Mp, K], "N") with VEC128_32F scales stored [K/128][Mp] (token index
 *      contiguous); D fp32 [Mp, N] row-major. Mp = M rounded up to a multiple of 4 (cuBLASLt finds no
 *      algorithm otherwise); padded rows are zero and their output is dropped.
 * Y[m, n] = sum_b s_x[m, b] s_w[n / 128, b] sum_{k in b} q_x[m, k] q_w[n, k], fp32 between blocks; the
 * difference from the fp32-activation path is the activation quantization (measured in bench/RESULTS.md;
 * test_cuda_ops compares with a CPU reference that quantizes the same way). */
#include "backend/cuda/cuda.h"

#define ACT_AMAX_MIN 1e-4f
#define N_PLANS 64

/* grid (K / 128, Mp), block 128: block b of row m. Rows m >= M are padding: zeros with scale 1. A NaN in
 * x gives a NaN code (0x7f), so it reaches the output as with the fp32 path. */
__global__ void act_quant_kernel(unsigned char *q, float *s, const float *x, int M, int Mp, int K) {
    __shared__ float red[4];
    int b = blockIdx.x, m = blockIdx.y, k = b * 128 + threadIdx.x;
    float v = m < M ? x[(size_t)m * K + k] : 0.0f;
    float a = cu_warp_max(fabsf(v));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = a;
    __syncthreads();
    float amax = fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
    float scale = m < M ? fmaxf(amax, ACT_AMAX_MIN) / 448.0f : 1.0f;
    q[(size_t)m * K + k] = cu_f32_to_fp8(v / scale);
    if (threadIdx.x == 0) s[(size_t)b * Mp + m] = scale;
}

/* The algorithm cuBLASLt's heuristic picked per shape (host-side cache; the backend drives one device
 * from one thread). ok = 0: no algorithm, the caller takes another path. */
typedef struct {
    int N, K, Mp, ok;
    cublasLtMatmulAlgo_t algo;
} fp8_plan;
static fp8_plan plans[N_PLANS];
static int n_plans, next_plan;

int cu_fp8_gemm_ok(const ds_weight *w) {
    return w->dtype == DS_DTYPE_F8_E4M3 && w->scale && w->cols % 128 == 0 && w->rows % 4 == 0;
}

/* BLK128x128 scales need a row stride that is a multiple of 4 floats (spec 12.5). Weights whose
 * ceil(K/128) is not (V2-Lite's expert down: 11) get a re-packed copy, made once per weight and kept
 * for the backend's life (keyed by the scale pointer; the table is cleared with the backend). */
#define N_REPACK 4096
typedef struct {
    const float *src;
    float *dst;
} repack_entry;
static repack_entry repacked[N_REPACK];

__global__ void repack_scales_kernel(float *dst, const float *src, int rows, int L, int L4) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < rows * L4; i += gridDim.x * blockDim.x) {
        int r = i / L4, c = i % L4;
        dst[i] = c < L ? src[(size_t)r * L + c] : 0.0f;
    }
}

static const float *scales_for_lt(ds_cuda_backend *cb, const ds_weight *w) {
    if (w->scale_cols % 4 == 0) return w->scale;
    size_t h = ((uintptr_t)w->scale >> 4) % N_REPACK;
    for (size_t n = 0; n < N_REPACK; n++, h = (h + 1) % N_REPACK) {
        repack_entry *e = &repacked[h];
        if (e->src == w->scale) return e->dst;
        if (e->src) continue;
        int rows = (w->rows + 127) / 128, L4 = (w->scale_cols + 3) & ~3;
        CUDA_CHECK(cudaMalloc(&e->dst, sizeof(float) * (size_t)rows * L4));
        cu_own(cb, e->dst);
        repack_scales_kernel<<<cu_blocks((size_t)rows * L4, 256), 256, 0, cu_stream>>>(e->dst, w->scale, rows, w->scale_cols, L4);
        CUDA_LAUNCH_CHECK();
        e->src = w->scale;
        return e->dst;
    }
    return NULL;   /* table full: the caller takes another path */
}

void cu_fp8_free(ds_cuda_backend *cb) {
    cu_ws_free(&cb->ws_fp8);
    cu_ws_free(&cb->ws_f8part);
    if (cb->f8_tickets) cudaFree(cb->f8_tickets);
    cb->f8_tickets = NULL;
    cu_f8_wgmma_free();
    cu_moeo_free();
    if (cb->lt_ws) cudaFree(cb->lt_ws);
    if (cb->lt) cublasLtDestroy(cb->lt);
    cb->lt_ws = NULL;
    cb->lt = NULL;
    n_plans = next_plan = 0;
    memset(repacked, 0, sizeof repacked);   /* the copies were owned by the backend (cu_own) */
}

static const fp8_plan *find_plan(ds_cuda_backend *cb, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la,
                                 cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t ld, int N, int K, int Mp) {
    for (int i = 0; i < n_plans; i++)
        if (plans[i].N == N && plans[i].K == K && plans[i].Mp == Mp) return &plans[i];
    fp8_plan *p = &plans[next_plan];
    next_plan = (next_plan + 1) % N_PLANS;
    if (n_plans < N_PLANS) n_plans++;
    memset(p, 0, sizeof *p);
    p->N = N;
    p->K = K;
    p->Mp = Mp;
    cublasLtMatmulHeuristicResult_t res;
    p->ok = cu_lt_heuristics(cb, desc, la, lb, ld, 1, &res) > 0;
    if (p->ok) p->algo = res.algo;
    else fprintf(stderr, "dsinfer: cuBLASLt has no block-scaled FP8 algorithm for N=%d K=%d M=%d; using the "
                         "fp32-activation path for it\n", N, K, Mp);
    return p;
}

static void set_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void *v, size_t n) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, a, v, n));
}

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

int cu_lt_heuristics(ds_cuda_backend *cb, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                     cublasLtMatrixLayout_t ld, int want, cublasLtMatmulHeuristicResult_t *res) {
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    size_t wsb = LT_WS_BYTES;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
    int n = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(cb->lt, desc, la, lb, ld, ld, pref, want, res, &n);
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    return st == CUBLAS_STATUS_SUCCESS ? n : 0;
}

void cu_lt_init(ds_cuda_backend *cb) {
    if (cb->lt) return;
    CUBLAS_CHECK(cublasLtCreate(&cb->lt));
    CUDA_CHECK(cudaMalloc(&cb->lt_ws, LT_WS_BYTES));
}

/* d[Mp, N] = the block-scaled GEMM of quantized activations q [Mp, K] (scales s [K/128][Mp]) with w.
 * Returns 0 (nothing done) when cuBLASLt has no algorithm for the shape. */
int cu_fp8_gemm_quantized(ds_cuda_backend *cb, float *d, const unsigned char *q, const float *s, const ds_weight *w,
                          int Mp) {
    cu_lt_init(cb);
    int N = w->rows, K = w->cols;
    const float *wscale = scales_for_lt(cb, w);
    if (!wscale) return 0;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    int32_t am = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, bm = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    const void *ap = wscale, *bp = s;
    set_attr(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    set_attr(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    set_attr(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &am, sizeof am);
    set_attr(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &bm, sizeof bm);
    set_attr(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &ap, sizeof ap);
    set_attr(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &bp, sizeof bp);
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, (uint64_t)K, (uint64_t)N, (int64_t)K));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, (uint64_t)K, (uint64_t)Mp, (int64_t)K));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, (uint64_t)N, (uint64_t)Mp, (int64_t)N));
    const fp8_plan *p = find_plan(cb, desc, la, lb, ld, N, K, Mp);
    if (p->ok) {
        const float alpha = 1.0f, beta = 0.0f;
        CUBLAS_CHECK(cublasLtMatmul(cb->lt, desc, &alpha, w->data, la, q, lb, &beta, d, ld, d, ld, &p->algo, cb->lt_ws,
                                    LT_WS_BYTES, cu_stream));
    }
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(la));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lb));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(ld));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(desc));
    return p->ok;
}

void cu_act_quant_fp8(unsigned char *q, float *s, const float *x, int M, int Mp, int K) {
    act_quant_kernel<<<dim3((unsigned)(K / 128), (unsigned)Mp), 128, 0, cu_stream>>>(q, s, x, M, Mp, K);
    CUDA_LAUNCH_CHECK();
}

int cu_linear_fp8(ds_cuda_backend *cb, float *out, const float *x, const ds_weight *w, int M) {
    if (M <= 0 || M > 65535) return 0;   /* grid.y bound of the quantizer */
    if (cu_f8_linear(cb, out, x, w, M)) return 1;   /* up to 256 rows: the own FP8-MMA kernel (cuda_moe_tc.cu) */
    int N = w->rows, K = w->cols, L = K / 128, Mp = (M + 3) & ~3;
    size_t q_bytes = align256((size_t)Mp * K), s_bytes = align256(sizeof(float) * (size_t)L * Mp);
    size_t d_bytes = Mp != M ? sizeof(float) * (size_t)Mp * N : 0;
    char *ws = (char *)cu_ws_get(&cb->ws_fp8, q_bytes + s_bytes + d_bytes);
    unsigned char *q = (unsigned char *)ws;
    float *s = (float *)(ws + q_bytes), *d = Mp != M ? (float *)(ws + q_bytes + s_bytes) : out;
    cu_act_quant_fp8(q, s, x, M, Mp, K);
    if (!cu_fp8_gemm_quantized(cb, d, q, s, w, Mp)) return 0;   /* the quantizer's work is simply unused */
    if (d != out) CUDA_CHECK(cudaMemcpyAsync(out, d, sizeof(float) * (size_t)M * N, cudaMemcpyDeviceToDevice, cu_stream));
    return 1;
}
