/* CUDA linear layers: out[M, N] = x[M, K] . W^T, W [N, K] in its stored dtype (F32, F16, BF16, or FP8
 * E4M3 with 128x128 block scales), fp32 accumulation, fp32 out.
 *
 * Two paths, both plain fp32 arithmetic like the CPU reference:
 *  - M <= GEMV_MAX_M (decode): one warp per weight row reads the row once in its stored dtype,
 *    converts and scales it on the fly and dots it with every activation row; memory-bound, reads each
 *    weight byte once.
 *  - larger M (prefill, experts with many tokens): the weight is dequantized to fp32 in tiles of rows
 *    (at most DEQ_TILE_FLOATS) and multiplied with cuBLAS SGEMM in pedantic fp32 (no TF32).
 *  - with DSINFER_CUDA_TC=1 (cu_opts.tc), larger M runs on the tensor cores instead: activations
 *    rounded to BF16, BF16 weights used in place (FP8 dequantized to BF16 tiles), cublasGemmEx with fp32
 *    accumulation and fp32 out. Not exact: bf16-level error (NMSE ~1e-5), so it is opt-in.
 * The vectorised GEMV (cu_gemv_group) is also the grouped expert kernel of the MoE and the W_UV
 * projection of the absorbed attention: one warp per output row, the row read once with 16-byte loads
 * and dotted with up to 8 activation rows at a time (more rows: the row is re-read from L1/L2). */
#include <limits.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_mma.h"

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

static void linear_tc(ds_cuda_backend *cb, float *out, const float *x, const ds_weight *w, int M);

/* The exact NVFP4 GEMM above GEMV_MAX_M rows, the weight decoded inside the kernel (issue 9): out[M, N] =
 * x[M, K] W^T for W NVFP4 [N, K], K % 32 == 0. A block of 256 threads owns a 64 x 64 output tile (4 x 4 a
 * thread); per 32 columns of K it stages the x tile and the weight tile, decoded to fp32 with cu_w_nvfp4's
 * values (e2m1 x (fp8(block) x global)), in shared memory, then fp32 FMAs. The decoded weight exists only
 * in the block's shared memory (the default exact path decodes a 32M-value fp32 tile into global memory
 * for cuBLAS SGEMM). Opt-in (DSINFER_CUDA_NVFP4_SIMT=1) until the op tests have run it on a GPU. */
#define NS_T 64
#define NS_K 32
__global__ void __launch_bounds__(256) nvfp4_sgemm_kernel(float *out, const float *x, cu_wview w, int M) {
    __shared__ float Xs[NS_K][NS_T + 4];
    __shared__ float Ws[NS_K][NS_T + 4];
    int N = w.rows, K = w.cols, m0 = blockIdx.y * NS_T, n0 = blockIdx.x * NS_T;
    int t = threadIdx.x, tx = t % 16, ty = t / 16;
    int lr = t / 4, lk = (t % 4) * 8;   /* the loads: row lr of the tile, 8 values from column lk */
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += NS_K) {
        float xv[8], wv[8];
        int m = m0 + lr, n = n0 + lr;
        if (m < M) {
            const float4 *p = (const float4 *)(x + (size_t)m * K + k0 + lk);
            float4 a = __ldg(p), b = __ldg(p + 1);
            xv[0] = a.x; xv[1] = a.y; xv[2] = a.z; xv[3] = a.w; xv[4] = b.x; xv[5] = b.y; xv[6] = b.z; xv[7] = b.w;
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++) xv[j] = 0.0f;
        }
        if (n < N) {   /* 8 codes (4 bytes, even element in the low nibble) of one 16-value scale block */
            uint32_t q = __ldg((const uint32_t *)((const unsigned char *)w.data + (((size_t)n * K + k0 + lk) >> 1)));
            float sc = cu_fp8_to_f32(w.bscale[(size_t)n * (size_t)(K >> 4) + (size_t)((k0 + lk) >> 4)]) * w.gscale;
#pragma unroll
            for (int j = 0; j < 8; j++) wv[j] = cu_e2m1((q >> (4 * j)) & 15u) * sc;
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++) wv[j] = 0.0f;
        }
#pragma unroll
        for (int j = 0; j < 8; j++) {
            Xs[lk + j][lr] = xv[j];
            Ws[lk + j][lr] = wv[j];
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < NS_K; kk++) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++) a[i] = Xs[kk][ty * 4 + i];
#pragma unroll
            for (int j = 0; j < 4; j++) b[j] = Ws[kk][tx * 4 + j];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int m = m0 + ty * 4 + i;
        if (m >= M) continue;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int n = n0 + tx * 4 + j;
            if (n < N) out[(size_t)m * N + n] = acc[i][j];
        }
    }
}
int cu_nvfp4_simt = 0;   /* DSINFER_CUDA_NVFP4_SIMT (read at backend creation) */

static void sgemm_rows(ds_cuda_backend *cb, float *out, int ldo, const float *x, const float *wf, int M, int nr, int K) {
    const float one = 1.0f, zero = 0.0f;
    /* column-major view: out^T[nr, M] (ld ldo) = wf^T ... i.e. C = op(A) B with A = wf as [K, nr] (ld K)
     * transposed and B = x as [K, M] (ld K). */
    CUBLAS_CHECK(cublasSgemm(cb->cublas, CUBLAS_OP_T, CUBLAS_OP_N, nr, M, K, &one, wf, K, x, K, &zero, out, ldo));
}

/* Whether an FP8 linear of M rows goes through the W8A8 path (opt.fp8_gemm from opt.fp8_gemm_min_m rows; the GEMVs
 * below that: by default batch 1 alone, fourteenth session) */
static int w8a8_rows(const ds_cuda_backend *cb, int M) { return cb->opt.fp8_gemm && M >= cb->opt.fp8_gemm_min_m; }

void cu_linear(ds_backend *be, float *out, const float *x, const ds_weight *w, int M) {
    ds_cuda_backend *cb = cu_of(be);
    int N = w->rows, K = w->cols;
    if (M <= 0 || N <= 0) return;
    cu_wview v = cu_view(w);
    int w8 = w8a8_rows(cb, M) && cu_fp8_gemm_ok(w);
    if (!w8 && M == 1 && cu_rowo(cb, out, NULL, x, w, NULL)) return;   /* (opt.rowo) */
    if (!w8 && M <= GEMV_MAX_M && cb->opt.vec_gemv) {
        cu_gemv_group(out, N, 0, x, K, 0, NULL, NULL, M, 1, NULL, NULL, v, v, 0, N, cu_gemv_flags(cb), 0, 0, 0);
        return;
    }
    if (w8 && cu_linear_fp8(cb, out, x, w, M)) return;
    /* NVFP4 on the tensor cores: always decoded in registers (the weight stays 4-bit, no BF16 copy, at every
     * M); FP8: in place up to SKINNY_MAX_M rows when opted in (slower than a BF16 copy + cuBLAS here) */
    int nv = w->dtype == DS_DTYPE_NVFP4;
    if (M > GEMV_MAX_M && cb->opt.tc && cu_skinny_tc_fits(&v) && (nv || (M <= SKINNY_MAX_M && cb->opt.skinny))) {
        cu_skinny_tc(out, x, M, &v, cu_ws_get(&cb->ws_tc, (size_t)M * (size_t)K * 2));
        return;
    }
    if (M > GEMV_MAX_M && cb->opt.tc) {
        linear_tc(cb, out, x, w, M);
        return;
    }
    if (M <= GEMV_MAX_M) {
        gemv_kernel<<<cu_blocks((size_t)N, GEMV_WARPS), GEMV_WARPS * 32, 0, cu_stream>>>(out, x, v, M);
        CUDA_LAUNCH_CHECK();
        return;
    }
    if (w->dtype == DS_DTYPE_F32 && !w->scale) {
        sgemm_rows(cb, out, N, x, (const float *)w->data, M, N, K);
        return;
    }
    if (cu_nvfp4_simt && w->dtype == DS_DTYPE_NVFP4 && K % 32 == 0 && ((uintptr_t)x & 15) == 0) {
        dim3 grid((unsigned)((N + NS_T - 1) / NS_T), (unsigned)((M + NS_T - 1) / NS_T));
        nvfp4_sgemm_kernel<<<grid, 256, 0, cu_stream>>>(out, x, v, M);
        CUDA_LAUNCH_CHECK();
        return;
    }
    size_t tile = DEQ_TILE_FLOATS / (size_t)K;
    int rows = tile >= (size_t)N ? N : (tile >= 128 ? (int)(tile / 128 * 128) : (tile ? (int)tile : 1));
    float *wf = (float *)cu_ws_get(&cb->ws_deq, (size_t)rows * (size_t)K * sizeof(float));
    for (int r0 = 0; r0 < N; r0 += rows) {
        int nr = N - r0 < rows ? N - r0 : rows;
        size_t blocks = cu_blocks((size_t)nr * (size_t)K, 256);
        dequant_kernel<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, cu_stream>>>(wf, v, r0, nr);
        CUDA_LAUNCH_CHECK();
        sgemm_rows(cb, out + r0, N, x, wf, M, nr, K);
    }
}

/* Two weights of one input (backend.h linear2): one launch for both where the path allows (DSINFER_CUDA_HFUSE,
 * default 1): the v2 GEMV up to GEMV_MAX_M rows, the W8A8 cp.async kernel up to 64 rows; else two linears. */
void cu_linear2(ds_backend *be, float *out1, float *out2, const float *x, const ds_weight *w1, const ds_weight *w2, int M) {
    ds_cuda_backend *cb = cu_of(be);
    if (M <= 0) return;
    if (cb->opt.hfuse && w1->cols == w2->cols && w1->rows > 0 && w2->rows > 0) {
        int rows8 = w8a8_rows(cb, M), w8 = rows8 && cu_f8_wgmma_two_ok(w1, w2, M);
        if (!w8 && M == 1 && cu_rowo(cb, out1, out2, x, w1, w2)) return;   /* (opt.rowo) */
        if (!w8 && M <= GEMV_MAX_M && cb->opt.vec_gemv && cu_gemv_two(out1, out2, x, M, cu_view(w1), cu_view(w2), cu_gemv_flags(cb))) return;
        if (w8 && cu_f8_wgmma_linear2(cb, out1, out2, x, w1, w2, M)) return;
        if (cb->opt.w8_shared_x && rows8 && cu_f8_wgmma_pair_ok(w1, w2, M)) {
            cu_f8_wgmma_shared_x(cb, out1, out2, x, w1, w2, M);
            return;
        }
    }
    cu_linear(be, out1, x, w1, M);
    cu_linear(be, out2, x, w2, M);
}

/* cuda.h: cu_linear2's choice at one token (hfuse, no W8A8 GEMM, no row ownership, the vectorised GEMV), then
 * cu_gemv_two_norm's form */
int cu_linear2_norm(ds_backend *be, float *out1, float *out2, const float *h, const float *add, const ds_weight *nw, float eps,
                    const ds_weight *w1, const ds_weight *w2) {
    ds_cuda_backend *cb = cu_of(be);
    if (!cb->opt.hfuse || !cb->opt.vec_gemv || cb->opt.rowo || w8a8_rows(cb, 1) || w1->cols != w2->cols || w1->rows <= 0 ||
        w2->rows <= 0)
        return 0;
    return cu_gemv_two_norm(out1, out2, h, add, cu_view(nw), eps, cu_view(w1), cu_view(w2), cu_gemv_flags(cb));
}

/* cuda.h: cu_linear's choice at one token (no W8A8 GEMM, no row ownership, the vectorised GEMV), then cu_gemv_two_norm's
 * form with one weight */
int cu_linear_norm(ds_backend *be, float *out, const float *x, const ds_weight *nw, float eps, const ds_weight *w) {
    ds_cuda_backend *cb = cu_of(be);
    if (!cb->opt.vec_gemv || cb->opt.rowo || (w8a8_rows(cb, 1) && cu_fp8_gemm_ok(w)) || w->rows <= 0) return 0;
    const cu_wview v = cu_view(w);
    return cu_gemv_two_norm(out, NULL, x, NULL, cu_view(nw), eps, v, v, cu_gemv_flags(cb));
}

/* g = SiLU(g) * u, SiLU(z) = z / (1 + exp(-z)) as on the CPU. */
__global__ void silu_mul_kernel(float *g, const float *u, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        g[i] = cu_silu_mul(g[i], u[i]);
    }
}

void cu_mlp(ds_backend *be, float *out, const float *x, const ds_weight *gate, const ds_weight *up,
            const ds_weight *down, int M) {
    ds_cuda_backend *cb = cu_of(be);
    if (M <= 0) return;
    size_t n = (size_t)M * (size_t)gate->rows;
    float *g = (float *)cu_ws_get(&cb->ws_mlp, 2 * n * sizeof(float)), *u = g + n;
    int w8 = w8a8_rows(cb, M) && cu_fp8_gemm_ok(gate) && cu_fp8_gemm_ok(up) && cu_fp8_gemm_ok(down);
    if (w8 && cb->opt.mlp_fuse && cu_f8_mlp(cb, out, x, gate, up, down, M)) return;
    if (!w8 && M <= GEMV_MAX_M && cb->opt.vec_gemv) {   /* gate, up and SiLU*mul in one pass over both weights */
        cu_gemv_group(g, gate->rows, 0, x, gate->cols, 0, NULL, NULL, M, 1, NULL, NULL, cu_view(gate), cu_view(up),
                      1, gate->rows, cu_gemv_flags(cb), 0, 0, 0);
        cu_linear(be, out, g, down, M);
        return;
    }
    if (cb->opt.hfuse >= 2) {   /* gate and up as one launch where linear2 can (the default, hfuse 2) */
        cu_linear2(be, g, u, x, gate, up, M);
    } else {
        cu_linear(be, g, x, gate, M);
        cu_linear(be, u, x, up, M);
    }
    size_t blocks = cu_blocks(n, 256);
    silu_mul_kernel<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, cu_stream>>>(g, u, n);
    CUDA_LAUNCH_CHECK();
    cu_linear(be, out, g, down, M);
}

/* ---- vectorised grouped GEMV ---------------------------------------------------------------------- */
/* VT_FP8F: FP8 decoded without the conversion unit (cu_fp8_scaled, DSINFER_CUDA_FP8_FAST=1; the same values),
 * only in the v2 kernels */
/* VT_NVFP4: 32 E2M1 codes a 16-byte chunk with its two block scales (v2 kernels only) */
/* VT_FP8C: FP8 as VT_FP8 (the cvt path) with the block scale applied once a chunk and token: the chunk's 16 codes
 * dotted with x unscaled, then a += dot * scale (DSINFER_CUDA_GEMV_F8C=1, v2 kernels only; 16 multiplies fewer a
 * chunk, another rounding order: at THR_GEMM against the CPU) */
enum { VT_GEN = 0, VT_F32 = 1, VT_BF16 = 2, VT_FP8 = 3, VT_FP8F = 4, VT_NVFP4 = 5, VT_FP8C = 6 };
template <int VT> struct vt_traits { static constexpr int V = 1; };
template <> struct vt_traits<VT_F32> { static constexpr int V = 4; };
template <> struct vt_traits<VT_BF16> { static constexpr int V = 8; };
template <> struct vt_traits<VT_FP8> { static constexpr int V = 16; };
template <> struct vt_traits<VT_FP8F> { static constexpr int V = 16; };
template <> struct vt_traits<VT_NVFP4> { static constexpr int V = 32; };
template <> struct vt_traits<VT_FP8C> { static constexpr int V = 16; };

/* Loads values [c*V, c*V + V) of row n as fp32 (FP8 times its block scale; a 16-value chunk never crosses
 * a 128-column block). */
template <int VT>
__device__ __forceinline__ void ld_chunk(const cu_wview &w, int n, int c, float *v) {
    constexpr int V = vt_traits<VT>::V;
    if constexpr (VT == VT_GEN) {
        v[0] = cu_w(w, n, c);
    } else {
        const uint4 *p = (const uint4 *)((const char *)w.data + ((size_t)n * (size_t)w.cols + (size_t)c * V) *
                                                                   (VT == VT_F32 ? 4 : VT == VT_BF16 ? 2 : 1));
        uint4 raw = __ldg(p);
        const uint32_t u[4] = {raw.x, raw.y, raw.z, raw.w};
        if constexpr (VT == VT_F32) {
#pragma unroll
            for (int i = 0; i < 4; i++) v[i] = __uint_as_float(u[i]);
        } else if constexpr (VT == VT_BF16) {
            cu_bf16x8(raw, v);
        } else {
            float s = w.scale[(size_t)(n >> 7) * (size_t)w.scale_cols + (size_t)((c * V) >> 7)];
#pragma unroll
            for (int i = 0; i < 4; i++) cu_fp8x4(u[i], s, v + 4 * i);
        }
    }
}

/* a0[j] (+ a1[j] with pair) = W0[n] . xp[j] for j < TM (rows j >= nt are never read). */
template <int VT, int TM, bool PAIR>
__device__ __forceinline__ void warp_dots(float *a0, float *a1, const cu_wview &w0, const cu_wview &w1, int n,
                                          const float *const *xp, int nt, int lane) {
    constexpr int V = vt_traits<VT>::V;
    const int nc = w0.cols / V;
#pragma unroll 2
    for (int c = lane; c < nc; c += 32) {
        float wv[V], uv[V];
        ld_chunk<VT>(w0, n, c, wv);
        if (PAIR) ld_chunk<VT>(w1, n, c, uv);
#pragma unroll
        for (int j = 0; j < TM; j++) {
            if (j >= nt) break;
            const float *xr = xp[j] + (size_t)c * V;
            float s0 = 0.0f, s1 = 0.0f;
            if constexpr (V >= 4) {
#pragma unroll
                for (int i = 0; i < V; i += 4) {
                    float4 xv = __ldg((const float4 *)(xr + i));
                    s0 += wv[i] * xv.x + wv[i + 1] * xv.y + wv[i + 2] * xv.z + wv[i + 3] * xv.w;
                    if (PAIR) s1 += uv[i] * xv.x + uv[i + 1] * xv.y + uv[i + 2] * xv.z + uv[i + 3] * xv.w;
                }
            } else {
                s0 = wv[0] * xr[0];
                if (PAIR) s1 = uv[0] * xr[0];
            }
            a0[j] += s0;
            if (PAIR) a1[j] += s1;
        }
    }
}

template <int VT, int TM, bool PAIR>
__device__ __forceinline__ void grp_rows(float *out, int ldo, int out_e, const float *x, int ldx, int x_e,
                                         const int32_t *xr, int e, int r, int nt, const cu_wview &w0,
                                         const cu_wview &w1, int wn, int n, int lane) {
    const float *xp[TM];
#pragma unroll
    for (int j = 0; j < TM; j++) {
        int row = j < nt ? (xr ? xr[r + j] : r + j) : 0;
        xp[j] = x + (size_t)row * ldx + (size_t)e * x_e;
    }
    float a0[TM], a1[TM];
#pragma unroll
    for (int j = 0; j < TM; j++) a0[j] = a1[j] = 0.0f;
    warp_dots<VT, TM, PAIR>(a0, a1, w0, w1, wn, xp, nt, lane);
#pragma unroll
    for (int j = 0; j < TM; j++) {
        if (j >= nt) break;
        float g = cu_warp_sum(a0[j]);
        float v = g;
        if (PAIR) {
            float u = cu_warp_sum(a1[j]);
            v = g / (1.0f + expf(-g)) * u;
        }
        if (lane == 0) out[(size_t)(r + j) * ldo + (size_t)e * out_e + n] = v;
    }
}

/* grid (ceil(max_rows / GEMV_WARPS), E), block GEMV_WARPS * 32. */
template <int VT, bool PAIR>
__global__ void gemv_group_kernel(float *out, int ldo, int out_e, const float *x, int ldx, int x_e,
                                  const int32_t *xr, const int32_t *off, int M, const cu_wview *tab0,
                                  const cu_wview *tab1, cu_wview v0, cu_wview v1, int n_rows, int row0, int row_e) {
    int e = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int r0 = 0, cnt = M;
    if (off) {
        r0 = off[e];
        cnt = off[e + 1] - r0;
    }
    if (cnt <= 0) return;
    cu_wview w0 = tab0 ? tab0[e] : v0, w1 = PAIR ? (tab1 ? tab1[e] : v1) : w0;
    int n = blockIdx.x * GEMV_WARPS + warp;
    if (n >= n_rows) return;   /* whole warp */
    int wn = row0 + e * row_e + n;   /* the weight row */
    for (int j0 = 0; j0 < cnt; j0 += 8) {
        int nt = cnt - j0 < 8 ? cnt - j0 : 8;
        if (nt == 1) grp_rows<VT, 1, PAIR>(out, ldo, out_e, x, ldx, x_e, xr, e, r0 + j0, nt, w0, w1, wn, n, lane);
        else if (nt <= 2) grp_rows<VT, 2, PAIR>(out, ldo, out_e, x, ldx, x_e, xr, e, r0 + j0, nt, w0, w1, wn, n, lane);
        else if (nt <= 4) grp_rows<VT, 4, PAIR>(out, ldo, out_e, x, ldx, x_e, xr, e, r0 + j0, nt, w0, w1, wn, n, lane);
        else grp_rows<VT, 8, PAIR>(out, ldo, out_e, x, ldx, x_e, xr, e, r0 + j0, nt, w0, w1, wn, n, lane);
    }
}

/* ---- GEMV v2: many 16-byte weight loads in flight per lane, split-K across warps ---------------------
 * Same contract as gemv_group_kernel. Each block of GEMV_WARPS warps owns GEMV_WARPS / KS weight rows;
 * the KS warps of a row split its 16-byte chunks (lane l of warp k reads chunks k*32 + l, + 32*KS, ...),
 * so a warp still reads 512 contiguous bytes per load. Each lane first issues U independent loads
 * (ld.global.nc.L1::no_allocate: weights are read once and stay out of L1, where the activation rows
 * are re-read), then converts and dots them; partial sums of the KS warps meet in shared memory.
 * KS is chosen on the host so that there are enough warps for the GPU (cu_gemv_sms) when rows are few
 * (kv_a, router, W_UV per head). fp32 accumulation; the order of additions differs from the CPU's. */
int cu_gemv_v2 = 1;       /* DSINFER_CUDA_GEMV2 (read at backend creation) */
int cu_fp8_fast = 0;      /* DSINFER_CUDA_FP8_FAST (read at backend creation) */
int cu_gemv_f8c = 0;      /* DSINFER_CUDA_GEMV_F8C (read at backend creation): VT_FP8C */
int cu_gemv_sms = 132;    /* SM count (set at backend creation) */

/* a weight chunk: read once a step, so not kept in L1 (where the activation rows are re-read); where ef (DSINFER_CUDA_L2EF
 * asks; kernel-uniform) with the L2 policy pol (cu_l2_evict_first; cuda_wgmma.h's tma_load_stream says why), else with
 * no L2 hint */
__device__ __forceinline__ uint4 ld_stream16(const void *p, int ef, uint64_t pol) {
    uint4 r;
    if (ef)
        asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
            : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
            : "l"(p), "l"(pol));
    else
        asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
            : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
            : "l"(p));
    return r;
}

/* 4 fp32 weights, values [4*i4, 4*i4 + 4) of a 16-byte chunk (times s for FP8). */
/* NVFP4: values 4*i4 .. 4*i4+3 of the chunk's 32 (bytes 2*i4, 2*i4 + 1, low nibble first), times s (the
 * first 16 values' block scale x the global scale) or t (the second 16's): cu_w_nvfp4's values. */
template <int VT>
__device__ __forceinline__ float4 cvt4(const uint4 &q, int i4, float s, float t = 0.0f) {
    const uint32_t u[4] = {q.x, q.y, q.z, q.w};
    if constexpr (VT == VT_NVFP4) {
        uint32_t word = u[i4 >> 1] >> (16 * (i4 & 1));
        float sc = i4 < 4 ? s : t;
        return make_float4(cu_e2m1(word & 15u) * sc, cu_e2m1((word >> 4) & 15u) * sc, cu_e2m1((word >> 8) & 15u) * sc,
                           cu_e2m1((word >> 12) & 15u) * sc);
    } else if constexpr (VT == VT_F32) {
        return make_float4(__uint_as_float(q.x), __uint_as_float(q.y), __uint_as_float(q.z), __uint_as_float(q.w));
    } else if constexpr (VT == VT_BF16) {
        uint32_t a = u[2 * i4], b = u[2 * i4 + 1];
        return make_float4(__uint_as_float(a << 16), __uint_as_float(a & 0xffff0000u), __uint_as_float(b << 16),
                           __uint_as_float(b & 0xffff0000u));
    } else if constexpr (VT == VT_FP8F) {
        uint32_t a = u[i4];
        float s120 = s * 0x1p120f;
        return make_float4(cu_fp8_scaled(a & 0xffu, s, s120), cu_fp8_scaled((a >> 8) & 0xffu, s, s120),
                           cu_fp8_scaled((a >> 16) & 0xffu, s, s120), cu_fp8_scaled(a >> 24, s, s120));
    } else {
        float v[4];
        cu_fp8x4(u[i4], s, v);
        return make_float4(v[0], v[1], v[2], v[3]);
    }
}

/* a0[j] (a1[j]) += the dot of 16-byte chunk c's values (cvt4: scaled by s / t) with row j's x, j < nt */
template <int VT, int TM, bool PAIR>
__device__ __forceinline__ void dot_chunk(float *a0, float *a1, const uint4 &q0, const uint4 &q1, float s0, float s1,
                                          float t0, float t1, const float *const *xp, int nt, int c) {
    constexpr int V = vt_traits<VT>::V;
#pragma unroll
    for (int i4 = 0; i4 < V / 4; i4++) {
        float4 wv = cvt4<VT>(q0, i4, s0, t0);
        float4 uv = PAIR ? cvt4<VT>(q1, i4, s1, t1) : wv;
#pragma unroll
        for (int j = 0; j < TM; j++) {
            if (j >= nt) break;
            float4 xv = __ldg((const float4 *)(xp[j] + (size_t)c * V + 4 * i4));
            a0[j] += wv.x * xv.x + wv.y * xv.y + wv.z * xv.z + wv.w * xv.w;
            if (PAIR) a1[j] += uv.x * xv.x + uv.y * xv.y + uv.z * xv.z + uv.w * xv.w;
        }
    }
}

template <int VT, int TM, int U, bool PAIR>
__device__ __forceinline__ void dots_v2(float *a0, float *a1, const cu_wview &w0, const cu_wview &w1, int n, int n1,
                                        const float *const *xp, int nt, int c_first, int c_step, int ef, uint64_t pol) {
    constexpr int V = vt_traits<VT>::V;
    constexpr bool F4 = VT == VT_NVFP4;
    constexpr int EB = VT == VT_F32 ? 4 : VT == VT_BF16 ? 2 : 1;
    const int nc = w0.cols / V;
    /* row n's bytes: cols * EB, NVFP4 cols / 2 */
    const char *r0 = (const char *)w0.data + (F4 ? (size_t)n * (size_t)(w0.cols / 2) : (size_t)n * (size_t)w0.cols * EB);
    const char *r1 = (const char *)w1.data + (F4 ? (size_t)n1 * (size_t)(w1.cols / 2) : (size_t)n1 * (size_t)w1.cols * EB);
    constexpr bool F8 = VT == VT_FP8 || VT == VT_FP8F || VT == VT_FP8C;
    const float *sc0 = F8 ? w0.scale + (size_t)(n >> 7) * (size_t)w0.scale_cols : nullptr;
    const float *sc1 = F8 && PAIR ? w1.scale + (size_t)(n1 >> 7) * (size_t)w1.scale_cols : nullptr;
    const unsigned char *bs0 = F4 ? w0.bscale + (size_t)n * (size_t)(w0.cols >> 4) : nullptr;
    const unsigned char *bs1 = F4 && PAIR ? w1.bscale + (size_t)n1 * (size_t)(w1.cols >> 4) : nullptr;
    for (int cb = c_first; cb < nc; cb += U * c_step) {
        uint4 q0[U], q1[U];
        float s0[U], s1[U], t0[U], t1[U];   /* t: NVFP4's second block scale of the chunk */
#pragma unroll
        for (int u = 0; u < U; u++) {
            int c = cb + u * c_step;
            q0[u] = q1[u] = make_uint4(0, 0, 0, 0);
            s0[u] = s1[u] = t0[u] = t1[u] = 0.0f;
            if (c < nc) {
                q0[u] = ld_stream16(r0 + (size_t)c * 16, ef, pol);
                if (PAIR) q1[u] = ld_stream16(r1 + (size_t)c * 16, ef, pol);
                if (F8) {
                    s0[u] = __ldg(sc0 + ((c * V) >> 7));
                    if (PAIR) s1[u] = __ldg(sc1 + ((c * V) >> 7));
                }
                if (F4) {
                    s0[u] = cu_fp8_to_f32(__ldg(bs0 + 2 * c)) * w0.gscale;
                    t0[u] = cu_fp8_to_f32(__ldg(bs0 + 2 * c + 1)) * w0.gscale;
                    if (PAIR) {
                        s1[u] = cu_fp8_to_f32(__ldg(bs1 + 2 * c)) * w1.gscale;
                        t1[u] = cu_fp8_to_f32(__ldg(bs1 + 2 * c + 1)) * w1.gscale;
                    }
                }
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            int c = cb + u * c_step;
            if (c >= nc) break;
            if constexpr (VT == VT_FP8C) {   /* the codes' values unscaled (cvt4's multiply by 1 folds away) */
                float d0[TM], d1[TM];
#pragma unroll
                for (int j = 0; j < TM; j++) d0[j] = d1[j] = 0.0f;
                dot_chunk<VT_FP8, TM, PAIR>(d0, d1, q0[u], q1[u], 1.0f, 1.0f, 0.0f, 0.0f, xp, nt, c);
#pragma unroll
                for (int j = 0; j < TM; j++) {
                    a0[j] = fmaf(d0[j], s0[u], a0[j]);
                    if (PAIR) a1[j] = fmaf(d1[j], s1[u], a1[j]);
                }
            } else {
                dot_chunk<VT, TM, PAIR>(a0, a1, q0[u], q1[u], s0[u], s1[u], t0[u], t1[u], xp, nt, c);
            }
        }
    }
}

/* U0: the chunks a lane requests at once (0: the 8-row kernel's choice; the order of additions is the chunks' order
 * whatever U is, so U changes no bits) */
/* ROW2 (not PAIR, TM 1): the warp's two rows n and n + 1 of one weight (w0 == w1; rows wn, wn + 1 of the view) dotted with
 * one x row, each loaded chunk of x used for both (dots_v2's two-weight form): out[n] and, where valid1, out[n + 1].
 * Each row's sum is the one-row pass's, in its order. */
template <int VT, int TM, bool PAIR, int KS, int U0 = 0, bool ROW2 = false>
__device__ __forceinline__ void grp_rows_v2(float (*red)[8][2], float *out, int ldo, int out_e, const float *x,
                                            int ldx, int x_e, const int32_t *xr, int e, int r, int nt,
                                            const cu_wview &w0, const cu_wview &w1, int wn, int n, bool valid,
                                            int warp, int ks, int lane, int ef, uint64_t pol, bool valid1 = false) {
    constexpr bool B2 = PAIR || ROW2;
    constexpr int U = U0 ? U0 : PAIR ? 4 : (TM <= 2 ? 8 : 4);
    const float *xp[TM];
#pragma unroll
    for (int j = 0; j < TM; j++) {
        int row = j < nt ? (xr ? xr[r + j] : r + j) : 0;
        xp[j] = x + (size_t)row * ldx + (size_t)e * x_e;
    }
    float a0[TM], a1[TM];
#pragma unroll
    for (int j = 0; j < TM; j++) a0[j] = a1[j] = 0.0f;
    if (valid) dots_v2<VT, TM, U, B2>(a0, a1, w0, w1, wn, ROW2 ? (valid1 ? wn + 1 : wn) : wn, xp, nt, ks * 32 + lane, 32 * KS, ef, pol);
#pragma unroll
    for (int j = 0; j < TM; j++) {
        a0[j] = cu_warp_sum(a0[j]);
        if (B2) a1[j] = cu_warp_sum(a1[j]);
    }
    if (KS > 1) {
        if (lane == 0) {
#pragma unroll
            for (int j = 0; j < TM; j++) {
                red[warp][j][0] = a0[j];
                red[warp][j][1] = a1[j];
            }
        }
        __syncthreads();
        if (ks == 0 && lane == 0) {
#pragma unroll
            for (int j = 0; j < TM; j++) {
                float g = 0.0f, u = 0.0f;
                for (int k = 0; k < KS; k++) {
                    g += red[warp + k][j][0];
                    u += red[warp + k][j][1];
                }
                a0[j] = g;
                a1[j] = u;
            }
        }
        __syncthreads();   /* red is reused by the next group of rows */
    }
    if (!valid || ks != 0 || lane != 0) return;
#pragma unroll
    for (int j = 0; j < TM; j++) {
        if (j >= nt) break;
        float g = a0[j], v = g;
        if (PAIR) v = g / (1.0f + expf(-g)) * a1[j];
        out[(size_t)(r + j) * ldo + (size_t)e * out_e + n] = v;
        if (ROW2 && valid1) out[(size_t)(r + j) * ldo + (size_t)e * out_e + n + 1] = a1[j];
    }
}

/* grp_rows4's arithmetic for one chunk c of its four slots: a[i] += the dot of slot i's 16-byte chunk q[i] (cvt4: times
 * the scale of the slot's row block, lo where its row offset is below split, else hi; slots 2, 3 of PR from lo2 / hi2)
 * with x's values of the chunk: the same products and additions in the same order whichever form loaded the chunk */
template <int VT, bool PR>
__device__ __forceinline__ void rows4_chunk(float a[4], const uint4 q[4], float slo, float shi, float slo2, float shi2,
                                            int split, const float *xp, int c) {
    constexpr int V = vt_traits<VT>::V;
#pragma unroll
    for (int i4 = 0; i4 < V / 4; i4++) {
        float4 xv = __ldg((const float4 *)(xp + (size_t)c * V + 4 * i4));
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int ro = PR ? i % 2 : i;   /* the slot's row offset from wn */
            const float sc = PR && i >= 2 ? (ro < split ? slo2 : shi2) : (ro < split ? slo : shi);
            float4 wv = cvt4<VT>(q[i], i4, sc);
            a[i] += wv.x * xv.x + wv.y * xv.y + wv.z * xv.z + wv.w * xv.w;
        }
    }
}

/* rows4_chunk with the input norm folded in (cu_gemv_norm; opt.norm_fold): x's values of chunk c are v = h + add (add
 * NULL: h), v times the norm's weight g in place of xn = v / RMS(v) g, and ss gains the chunk's squares (rms_row_vec's
 * expression a float4); the caller scales the row's sums by 1 / RMS once ss is whole. The same products as rows4_chunk
 * otherwise, on xn's values before the 1 / RMS factor: the sums differ from the unfolded form's by fp32 rounding only */
/* the norm weight's values j .. j + 3 (F32 or BF16, cu_gemv_two_norm's check; j % 4 == 0): cu_w's values */
__device__ __forceinline__ float4 norm_w4(const cu_wview &g, int j) {
    return g.dtype == DS_DTYPE_F32 ? cu_vec4<false>(g.data, j >> 2) : cu_vec4<true>(g.data, j >> 2);
}

template <int VT>
__device__ __forceinline__ void rows4_chunk_norm(float a[4], float &ss, const uint4 q[4], float slo, float shi, int split,
                                                 const cu_gemv_norm &nm, int c) {
    constexpr int V = vt_traits<VT>::V;
#pragma unroll
    for (int i4 = 0; i4 < V / 4; i4++) {
        const int j = c * V + 4 * i4;
        float4 v = __ldg((const float4 *)(nm.h + j));
        if (nm.add) {
            float4 d = __ldg((const float4 *)(nm.add + j));
            v.x += d.x; v.y += d.y; v.z += d.z; v.w += d.w;
        }
        ss += __fmaf_rn(v.w, v.w, __fmaf_rn(v.z, v.z, __fmaf_rn(v.y, v.y, __fmul_rn(v.x, v.x))));
        const float4 g = norm_w4(nm.g, j);
        const float4 xv = make_float4(v.x * g.x, v.y * g.y, v.z * g.z, v.w * g.w);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float4 wv = cvt4<VT>(q[i], i4, i < split ? slo : shi);
            a[i] += wv.x * xv.x + wv.y * xv.y + wv.z * xv.z + wv.w * xv.w;
        }
    }
}

/* ROW2 with NR = 4 (opt.gemv_t1 = 4; FP8 and BF16, one x row): four weight rows a warp, each x chunk loaded once for the
 * four (x's L1 bytes a weight byte: FP8 4 -> 1 for one weight, ROW2's 2; 2 -> 1 for the gate / up pairs). Not PR: rows
 * n .. n + 3 of w (nv of them valid, 1 .. 4), out[n + i] their sums. PR (the pairs): rows n, n + 1 of the gate w and of
 * the up w1 (nv valid, 1 .. 2), out[n + i] = SiLU(g_i) u_i. Each row's sum is dots_v2's one-row pass: the same chunks in
 * the same order, the same products and additions of a chunk (dot_chunk's expression), then the warp's sum and the K
 * splits' sum in red as grp_rows_v2; U chunks a lane in flight for each row. Slot i of the four: row wn + (PR ? i % 2 : i)
 * of (PR && i >= 2 ? w1 : w); rows past the valid ones re-read the first (offset 0; not stored). */
/* (Measured slower at batch 1 and removed in the thirty-eighth session: ST, the chunks staged through shared memory by
 * cp.async, +0.33 ms; PF, every chunk of a lane asked of L2 first, +0.2 .. 0.4 ms.) */
/* NORM (not PR; cu_gemv_norm): x is nm's input norm folded in (rows4_chunk_norm), every chunk of the row read by the
 * block's KS warps of a row group, so their squares' sum is the row's and the sums are scaled by 1 / RMS at the end */
template <int VT, int KS, int U, bool PR, bool NORM = false>
__device__ __forceinline__ void grp_rows4(float (*red)[8][2], float *out, int ldo, int out_e, const float *x, int ldx,
                                          int x_e, const int32_t *xr, int e, int r, const cu_wview &w, const cu_wview &w1,
                                          int wn, int n, int nv, int warp, int ks, int lane, int ef, uint64_t pol,
                                          const cu_gemv_norm &nm = cu_gemv_norm()) {
    static_assert(!(NORM && PR), "the folded norm: one weight's rows");
    constexpr int V = vt_traits<VT>::V;
    constexpr bool F8 = VT == VT_FP8;
    constexpr int EB = VT == VT_BF16 ? 2 : 1;
    static_assert(VT == VT_FP8 || VT == VT_BF16, "four rows a warp: FP8 and BF16 weights");
    const float *xp = x + (size_t)(xr ? xr[r] : r) * ldx + (size_t)e * x_e;
    const int nc = w.cols / V, rs = w.cols * EB;   /* rs: a row's bytes */
    const char *base = (const char *)w.data + (size_t)wn * rs;
    const char *base2 = PR ? (const char *)w1.data + (size_t)wn * rs : base;   /* slots 2, 3 */
    const int o1 = nv > 1 ? rs : 0, o2 = PR ? 0 : nv > 2 ? 2 * rs : 0, o3 = PR ? o1 : nv > 3 ? 3 * rs : 0;
    /* the scales: a slot's rows lie in at most two 128-row blocks (lo: wn's, hi: the last valid row's); slot i is in hi
     * where its row offset (i, or i % 2 for PR) reaches split */
    const int last = wn + (nv > 0 ? nv - 1 : 0), split = F8 ? 128 - (wn & 127) : 4;
    const float *sl = F8 ? w.scale + (size_t)(wn >> 7) * (size_t)w.scale_cols : nullptr;
    const float *sh = F8 ? w.scale + (size_t)(last >> 7) * (size_t)w.scale_cols : nullptr;
    const float *sl2 = F8 && PR ? w1.scale + (size_t)(wn >> 7) * (size_t)w1.scale_cols : sl;
    const float *sh2 = F8 && PR ? w1.scale + (size_t)(last >> 7) * (size_t)w1.scale_cols : sh;
    float a[4] = {0.0f, 0.0f, 0.0f, 0.0f}, ss = 0.0f;
    if (nv > 0) {   /* (a row group's KS warps share nv: its squares' sum is whole wherever it is used) */
        const int c_first = ks * 32 + lane, c_step = 32 * KS;
        for (int cb = c_first; cb < nc; cb += U * c_step) {
            uint4 q[U][4];
            float slo[U], shi[U], slo2[U], shi2[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                int c = cb + u * c_step;
                q[u][0] = q[u][1] = q[u][2] = q[u][3] = make_uint4(0, 0, 0, 0);
                slo[u] = shi[u] = slo2[u] = shi2[u] = 0.0f;
                if (c < nc) {
                    const char *p = base + (size_t)c * 16, *p2 = base2 + (size_t)c * 16;
                    q[u][0] = ld_stream16(p, ef, pol);
                    q[u][1] = ld_stream16(p + o1, ef, pol);
                    q[u][2] = ld_stream16(p2 + o2, ef, pol);
                    q[u][3] = ld_stream16(p2 + o3, ef, pol);
                    if (F8) {
                        int sb = (c * V) >> 7;
                        slo[u] = __ldg(sl + sb);
                        shi[u] = __ldg(sh + sb);
                        if (PR) {
                            slo2[u] = __ldg(sl2 + sb);
                            shi2[u] = __ldg(sh2 + sb);
                        }
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                int c = cb + u * c_step;
                if (c >= nc) break;
                if constexpr (NORM) rows4_chunk_norm<VT>(a, ss, q[u], slo[u], shi[u], split, nm, c);
                else rows4_chunk<VT, PR>(a, q[u], slo[u], shi[u], slo2[u], shi2[u], split, xp, c);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < 4; i++) a[i] = cu_warp_sum(a[i]);
    if (NORM) ss = cu_warp_sum(ss);
    if (KS > 1) {
        if (lane == 0) {
#pragma unroll
            for (int i = 0; i < 4; i++) red[warp][i][0] = a[i];
            if (NORM) red[warp][4][0] = ss;
        }
        __syncthreads();
        if (ks == 0 && lane == 0) {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                float g = 0.0f;
                for (int k = 0; k < KS; k++) g += red[warp + k][i][0];
                a[i] = g;
            }
            if (NORM) {
                float t = 0.0f;
                for (int k = 0; k < KS; k++) t += red[warp + k][4][0];
                ss = t;
            }
        }
        __syncthreads();   /* red is reused by the next row of x */
    }
    if (nv <= 0 || ks != 0 || lane != 0) return;
    if (NORM) {   /* rms_inv's expression on the row's sum of squares */
        const float rinv = 1.0f / sqrtf(ss / (float)nm.n + nm.eps);
#pragma unroll
        for (int i = 0; i < 4; i++) a[i] *= rinv;
    }
    float *o = out + (size_t)r * ldo + (size_t)e * out_e + n;
    if (PR) {
#pragma unroll
        for (int i = 0; i < 2; i++)
            if (i < nv) o[i] = a[i] / (1.0f + expf(-a[i])) * a[2 + i];
    } else {
#pragma unroll
        for (int i = 0; i < 4; i++)
            if (i < nv) o[i] = a[i];
    }
}

/* grid (ceil(max_rows / (GEMV_WARPS / KS)), E or the live slots), block GEMV_WARPS * 32.
 * out2 (not PAIR, no groups; NULL otherwise): two weights of one x (horizontal fusion): rows n < v0.rows are v0's
 * into out, the next v1.rows v1's into out2 [M, ldo2] (n_rows = v0.rows + v1.rows).
 * TMAX: the rows of x a pass takes (8; 1 where the host knows a group has at most one row: batch 1). TMAX == 1 compiles
 * the one-row path alone, whose registers allow 4 blocks an SM (32 warps) where the 8-row paths' 97 .. 127 allowed 2
 * (ncu of an FP8 b1 step: 23% occupancy, 0.5 eligible warps, 550 .. 1600 GB/s); any row count stays correct (one
 * pass a row), and the one-row arithmetic is the TMAX == 8 kernel's nt == 1 pass: the same bits where both split K alike
 * (gemv_v2_ks sizes this form's split by its own occupancy, so o_proj, q, ... split otherwise: another order of the
 * partial sums, NMSE ~1e-12 between them; op test gemv1). */
#define GEMV_T1_U(VT, PAIR) ((PAIR) || (VT) == VT_NVFP4 ? 2 : (VT) == VT_BF16 || (VT) == VT_F32 ? 8 : 4)   /* within 64 registers */
/* ROW2 (TMAX 1, not PAIR; opt.gemv_t1 = 2): a warp takes two adjacent rows, each x chunk loaded once for both (the ncu of
 * the one-row form: L1 84% hits, 'Mem Busy' 72% at 28% of DRAM's rate: every warp re-reads all of x, 4 bytes of x a byte
 * of FP8 weight); rows per block 2 GEMV_WARPS / KS; with out2, v0.rows even (a warp's rows in one weight). */
/* NORM (ROW2 with NR 4, not PAIR, one row: cu_gemv_two_norm): x is nm's input norm folded in (grp_rows4's NORM) */
template <int VT, bool PAIR, int KS, int TMAX, bool ROW2 = false, int NR = 2, bool NORM = false>
__global__ void __launch_bounds__(GEMV_WARPS * 32, TMAX == 1 ? 4 : 1) gemv_v2_kernel(float *out, int ldo, int out_e, const float *x, int ldx,
                                                            int x_e, const int32_t *xr, const int32_t *off, int M,
                                                            const cu_wview *tab0, const cu_wview *tab1, cu_wview v0,
                                                            cu_wview v1, int n_rows, int row0, int row_e, int E,
                                                            int live, int prefetch, int l2ef, float *out2, int ldo2, cu_gemv_b pb,
                                                            cu_gemv_norm nm) {
    static_assert(!NORM || (ROW2 && NR == 4 && !PAIR && TMAX == 1), "the folded norm: gemv_v2_kernel's four-row form");
    __shared__ float red[GEMV_WARPS][8][2];
    int e = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (e >= pb.y0) {   /* a duo's second part: one group of one row, its own x, weights and output (block-uniform) */
        x = pb.x;
        out = pb.out;
        v0 = pb.v0;
        v1 = pb.v1;
        n_rows = pb.n_rows;
        tab0 = tab1 = nullptr;
        xr = off = nullptr;
        out2 = nullptr;
        M = 1;
        live = 0;
        e = row0 = row_e = out_e = x_e = 0;
    }
    constexpr int RW = ROW2 ? (PAIR ? NR / 2 : NR) : 1;   /* a warp's output rows (PAIR with NR 4: two rows of gate and up) */
    constexpr int RPB = GEMV_WARPS / KS * RW;
    cu_pdl_trigger();
    if (prefetch && !off && !out2) {   /* the rows are known before the previous kernel ends: start them towards L2 */
        cu_wview p0 = tab0 ? tab0[e] : v0;
        int nb = n_rows - (int)blockIdx.x * RPB < RPB ? n_rows - (int)blockIdx.x * RPB : RPB;
        cu_prefetch_rows(p0, row0 + e * row_e + (int)blockIdx.x * RPB, nb);
        if (PAIR) cu_prefetch_rows(tab1 ? tab1[e] : v1, row0 + e * row_e + (int)blockIdx.x * RPB, nb);
    }
    cu_pdl_wait();
    if (live) {   /* slot y: the y-th group with rows (off[E + 1] of them, listed from off[E + 2]) */
        if (e >= off[E + 1]) return;   /* whole block */
        e = off[E + 2 + e];
    }
    int r0 = 0, cnt = M;
    if (off) {
        r0 = off[e];
        cnt = off[e + 1] - r0;
    }
    if (cnt <= 0) return;   /* whole block */
    cu_wview w0 = tab0 ? tab0[e] : v0, w1 = PAIR ? (tab1 ? tab1[e] : v1) : w0;
    int ks = warp % KS, n = blockIdx.x * RPB + warp / KS * RW;
    bool valid = n < n_rows, valid1 = ROW2 && n + 1 < n_rows;
    if (KS == 1 && !valid) return;   /* no barriers when KS == 1 */
    if (!PAIR && out2 && n >= v0.rows) {   /* the second weight's rows (a warp's row, whole: KS warps agree) */
        w0 = w1 = v1;
        n -= v0.rows;
        out = out2;
        ldo = ldo2;
    }
    int wn = row0 + e * row_e + (valid ? n : 0);
    const uint64_t pol = cu_l2_evict_first();   /* (used where l2ef: cu_l2ef's GEMV bit) */
    if constexpr (ROW2 && NR == 4) {
        int nv = valid ? (n_rows - n < RW ? n_rows - n : RW) : 0;
        for (int j0 = 0; j0 < cnt; j0++)
            grp_rows4<VT, KS, 1, PAIR, NORM>(red, out, ldo, out_e, x, ldx, x_e, xr, e, r0 + j0, w0, w1, wn, n, nv, warp, ks, lane, l2ef, pol, nm);
    } else if constexpr (ROW2) {
        for (int j0 = 0; j0 < cnt; j0++)
            grp_rows_v2<VT, 1, false, KS, 2, true>(red, out, ldo, out_e, x, ldx, x_e, xr, e, r0 + j0, 1, w0, w1, wn, n, valid,
                                                   warp, ks, lane, l2ef, pol, valid1);
    } else if constexpr (TMAX == 1) {
        for (int j0 = 0; j0 < cnt; j0++)
            grp_rows_v2<VT, 1, PAIR, KS, GEMV_T1_U(VT, PAIR)>(red, out, ldo, out_e, x, ldx, x_e, xr, e, r0 + j0, 1, w0, w1, wn, n,
                                                            valid, warp, ks, lane, l2ef, pol);
    } else {
        for (int j0 = 0; j0 < cnt; j0 += 8) {
            int nt = cnt - j0 < 8 ? cnt - j0 : 8;   /* the same in the whole block */
            if (nt == 1) grp_rows_v2<VT, 1, PAIR, KS>(red, out, ldo, out_e, x, ldx, x_e, xr, e, r0 + j0, nt, w0, w1, wn, n, valid, warp, ks, lane, l2ef, pol);
            else if (nt <= 2) grp_rows_v2<VT, 2, PAIR, KS>(red, out, ldo, out_e, x, ldx, x_e, xr, e, r0 + j0, nt, w0, w1, wn, n, valid, warp, ks, lane, l2ef, pol);
            else if (nt <= 4) grp_rows_v2<VT, 4, PAIR, KS>(red, out, ldo, out_e, x, ldx, x_e, xr, e, r0 + j0, nt, w0, w1, wn, n, valid, warp, ks, lane, l2ef, pol);
            else grp_rows_v2<VT, 8, PAIR, KS>(red, out, ldo, out_e, x, ldx, x_e, xr, e, r0 + j0, nt, w0, w1, wn, n, valid, warp, ks, lane, l2ef, pol);
        }
    }
}

/* The split of K: the fewest warps per row that still give the GPU about cu_gemv_sms * 32 warps (grouped
 * calls with device offsets count at most 8 live groups), keeping at least one chunk per lane. resident > 0 (the
 * TMAX == 1 kernels): the warps an SM holds of the kernel; a split stops before its warps would need a second wave
 * (a lane's chunks are then all in flight at once: the TMAX == 8 rule, blind to occupancy, split o_proj at b1 into 4
 * waves of one 16-byte load a lane). */
static int gemv_v2_ks(int max_rows, int E, int has_off, int nc, int resident) {
    long eff = (long)max_rows * (has_off ? (E < 8 ? E : 8) : E), target = (long)cu_gemv_sms * 32;
    long cap = resident > 0 ? (long)cu_gemv_sms * resident : 0;
    int ks = 1;
    while (ks < GEMV_WARPS && eff * ks < target && nc >= 32 * 2 * ks && (!cap || eff * ks * 2 <= cap)) ks *= 2;
    return ks;
}

/* The warps of gemv_v2_kernel<VT, PAIR, 1, 1, R2, NR> an SM holds (the occupancy calculator, asked once per form) */
template <int VT, bool PAIR, bool R2 = false, int NR = 2>
static int gemv_t1_resident(void) {
    static int warps;
    if (!warps) {
        int nb = 0;
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, gemv_v2_kernel<VT, PAIR, 1, 1, R2, NR>, GEMV_WARPS * 32, 0));
        warps = (nb > 0 ? nb : 1) * GEMV_WARPS;
    }
    return warps;
}
long cu_gemv_t1_launches;   /* launches of the TMAX == 1 kernels (tests: ds_cuda_gemv_t1_launches) */
long cu_gemv_t2_launches;   /* ... of them with two rows a warp (ROW2; tests: ds_cuda_gemv_t2_launches) */
long cu_gemv_t4_launches;   /* ... of them with four weight rows a warp (ROW2, NR 4; tests: ds_cuda_gemv_t4_launches) */
long cu_gemv_p4_launches;   /* ... of those, the gate / up pairs' (tests: ds_cuda_gemv_p4_launches) */
int cu_gemv_t1_ks;           /* DSINFER_CUDA_GEMV_T1_KS (lab, process-wide, read at backend creation): the one-row form's
                              * split of K forced to 1, 2, 4 or 8 (0: gemv_v2_ks's choice) */

/* The vector type a weight can be read with: 16-byte rows and chunks (x rows must then be 16-byte
 * aligned too: ldx, x_e multiples of 4 and x itself aligned, checked by the caller). */
static int vt_of(const cu_wview &v) {
    if (v.dtype == DS_DTYPE_BF16 && v.cols % 8 == 0 && !v.scale) return VT_BF16;
    if (v.dtype == DS_DTYPE_F8_E4M3 && v.cols % 16 == 0 && v.scale) return VT_FP8;
    if (v.dtype == DS_DTYPE_F32 && v.cols % 4 == 0 && !v.scale) return VT_F32;
    if (v.dtype == DS_DTYPE_NVFP4 && v.cols % 32 == 0 && v.bscale && cu_gemv_v2) return VT_NVFP4;   /* v2 only */
    return VT_GEN;
}

/* cu_gemv_group's body; out2 / ldo2: the two-weight form of gemv_v2_kernel (NULL: not) */
static void gemv_group_launch(float *out, int ldo, int out_e, const float *x, int ldx, int x_e, const int32_t *xr,
                              const int32_t *off, int M, int E, const cu_wview *tab0, const cu_wview *tab1, cu_wview v0,
                              cu_wview v1, int pair, int max_rows, int vec, int row0, int row_e, int slots, float *out2,
                              int ldo2, cu_gemv_b *duo) {
    if (E <= 0 || max_rows <= 0 || (!off && M <= 0)) return;
    int live = off && slots > 0 && slots < E;   /* launch only the live groups' blocks (v2 kernel) */
    int t1 = (vec & CU_GEMV_T1) && M == 1;   /* (with off, M bounds a group's rows: moe_grouped passes its tokens) */
    int r2 = t1 && (vec & CU_GEMV_T2) && !pair && (!out2 || v0.rows % 2 == 0);   /* (FP8 / BF16 only: below) */
    int r4 = r2 && (vec & CU_GEMV_T4) && (!out2 || v0.rows % 4 == 0);            /* four rows a warp */
    int p4 = t1 && pair && (vec & CU_GEMV_T4);                                    /* two rows of each of the pair a warp */
    int vt = vec ? vt_of(v0) : VT_GEN;   /* v0: a representative view (every group has the same shape) */
    if (vt != VT_GEN && (((uintptr_t)x & 15) || ldx % 4 || x_e % 4)) vt = VT_GEN;
    unsigned th = GEMV_WARPS * 32;
    if (vt != VT_GEN && cu_gemv_v2) {   /* (out2 is only passed here: cu_gemv_two checked the v2 kernel takes it) */
        int V = vt == VT_BF16 ? 8 : vt == VT_FP8 ? 16 : vt == VT_NVFP4 ? 32 : 4;
        if (vt == VT_FP8 && cu_fp8_fast) vt = VT_FP8F;
        else if (vt == VT_FP8 && cu_gemv_f8c) vt = VT_FP8C;
        if (vt != VT_BF16 && vt != VT_FP8) r2 = r4 = p4 = 0;
        int resident = 0;
        if (t1) {
            cu_gemv_t1_launches++;
            cu_gemv_t2_launches += r2 && !r4;
            cu_gemv_t4_launches += r4 || p4;
            cu_gemv_p4_launches += p4;
#define T1_RES(VT) (pair ? gemv_t1_resident<VT, true>() : gemv_t1_resident<VT, false>())
            resident = p4 ? (vt == VT_BF16 ? gemv_t1_resident<VT_BF16, true, true, 4>() : gemv_t1_resident<VT_FP8, true, true, 4>())
                     : r4 ? (vt == VT_BF16 ? gemv_t1_resident<VT_BF16, false, true, 4>() : gemv_t1_resident<VT_FP8, false, true, 4>())
                     : r2 ? (vt == VT_BF16 ? gemv_t1_resident<VT_BF16, false, true>() : gemv_t1_resident<VT_FP8, false, true>())
                     : vt == VT_BF16 ? T1_RES(VT_BF16) : vt == VT_FP8 ? T1_RES(VT_FP8) : vt == VT_FP8F ? T1_RES(VT_FP8F)
                     : vt == VT_FP8C ? T1_RES(VT_FP8C) : vt == VT_NVFP4 ? T1_RES(VT_NVFP4) : T1_RES(VT_F32);
#undef T1_RES
        }
        int warp_rows = r4 ? (max_rows + 3) / 4 : r2 || p4 ? (max_rows + 1) / 2 : max_rows;   /* a warp's rows: 2 (r2, p4) or 4 (r4) */
        int ks = gemv_v2_ks(warp_rows, live ? slots : E, off != NULL, v0.cols / V, resident);
        if (t1 && (cu_gemv_t1_ks == 1 || cu_gemv_t1_ks == 2 || cu_gemv_t1_ks == 4 || cu_gemv_t1_ks == 8)) ks = cu_gemv_t1_ks;
        if (duo) ks = 1;   /* (the two parts' warps fill the GPU together; cu_gemv_group_duo checked the form) */
        const int rpb = GEMV_WARPS / ks * (r4 ? 4 : r2 || p4 ? 2 : 1);   /* rows a block */
        dim3 g2(cu_blocks((size_t)max_rows, rpb), live ? slots : E);
        cu_gemv_b pb = {NULL, NULL, v0, v1, 0, INT_MAX};   /* (no second part) */
        const cu_gemv_norm nm0 = {};                        /* (no folded norm) */
        const int pfl = cu_pdl_prefetch;   /* the rows asked of L2 before the PDL wait */
        const int l2ef = (cu_l2ef & CU_L2EF_GEMV) != 0;   /* the weights' loads L2 evict_first */
        if (duo) {   /* its blocks: one more grid row, as many columns as either part needs */
            unsigned bx = (unsigned)cu_blocks((size_t)duo->n_rows, rpb);
            g2.x = bx > g2.x ? bx : g2.x;
            duo->y0 = (int)g2.y;
            g2.y += 1;
            pb = *duo;
        }
#define V2_LAUNCH_T(VT, KS, T)                                                                                 \
    do {                                                                                                       \
        if (pair) cu_launch(gemv_v2_kernel<VT, true, KS, T>, g2, th, 0, out, ldo, out_e, x, ldx, x_e, xr, off, M, tab0, tab1, v0, v1, max_rows, row0, row_e, E, live, pfl, l2ef, out2, ldo2, pb, nm0); \
        else cu_launch(gemv_v2_kernel<VT, false, KS, T>, g2, th, 0, out, ldo, out_e, x, ldx, x_e, xr, off, M, tab0, tab1, v0, v1, max_rows, row0, row_e, E, live, pfl, l2ef, out2, ldo2, pb, nm0); \
    } while (0)
#define V2_LAUNCH(VT, KS, R2OK)                                                                                \
    do {                                                                                                       \
        if (R2OK && p4) cu_launch(gemv_v2_kernel<VT, true, KS, 1, R2OK, (R2OK ? 4 : 2)>, g2, th, 0, out, ldo, out_e, x, ldx, x_e, xr, off, M, tab0, tab1, v0, v1, max_rows, row0, row_e, E, live, pfl, l2ef, out2, ldo2, pb, nm0); \
        else if (R2OK && r4) cu_launch(gemv_v2_kernel<VT, false, KS, 1, R2OK, (R2OK ? 4 : 2)>, g2, th, 0, out, ldo, out_e, x, ldx, x_e, xr, off, M, tab0, tab1, v0, v1, max_rows, row0, row_e, E, live, pfl, l2ef, out2, ldo2, pb, nm0); \
        else if (R2OK && r2) cu_launch(gemv_v2_kernel<VT, false, KS, 1, R2OK>, g2, th, 0, out, ldo, out_e, x, ldx, x_e, xr, off, M, tab0, tab1, v0, v1, max_rows, row0, row_e, E, live, pfl, l2ef, out2, ldo2, pb, nm0); \
        else if (t1) V2_LAUNCH_T(VT, KS, 1);                                                                   \
        else V2_LAUNCH_T(VT, KS, 8);                                                                           \
    } while (0)
#define V2_KS(VT, R2OK)                                                                                        \
    do {                                                                                                       \
        if (ks == 1) V2_LAUNCH(VT, 1, R2OK);                                                                   \
        else if (ks == 2) V2_LAUNCH(VT, 2, R2OK);                                                              \
        else if (ks == 4) V2_LAUNCH(VT, 4, R2OK);                                                              \
        else V2_LAUNCH(VT, 8, R2OK);                                                                           \
    } while (0)
        if (vt == VT_BF16) V2_KS(VT_BF16, true);
        else if (vt == VT_FP8) V2_KS(VT_FP8, true);
        else if (vt == VT_FP8F) V2_KS(VT_FP8F, false);
        else if (vt == VT_FP8C) V2_KS(VT_FP8C, false);
        else if (vt == VT_NVFP4) V2_KS(VT_NVFP4, false);
        else V2_KS(VT_F32, false);
#undef V2_KS
#undef V2_LAUNCH
#undef V2_LAUNCH_T
        CUDA_LAUNCH_CHECK();
        return;
    }
    dim3 grid(cu_blocks((size_t)max_rows, GEMV_WARPS), E);
#define GRP_LAUNCH(VT)                                                                                         \
    do {                                                                                                       \
        if (pair) gemv_group_kernel<VT, true><<<grid, th, 0, cu_stream>>>(out, ldo, out_e, x, ldx, x_e, xr, off, M, tab0, tab1, v0, v1, max_rows, row0, row_e); \
        else gemv_group_kernel<VT, false><<<grid, th, 0, cu_stream>>>(out, ldo, out_e, x, ldx, x_e, xr, off, M, tab0, tab1, v0, v1, max_rows, row0, row_e); \
    } while (0)
    switch (vt) {
    case VT_BF16: GRP_LAUNCH(VT_BF16); break;
    case VT_FP8: GRP_LAUNCH(VT_FP8); break;
    case VT_F32: GRP_LAUNCH(VT_F32); break;
    default: GRP_LAUNCH(VT_GEN); break;
    }
#undef GRP_LAUNCH
    CUDA_LAUNCH_CHECK();
}

void cu_gemv_group(float *out, int ldo, int out_e, const float *x, int ldx, int x_e, const int32_t *xr,
                   const int32_t *off, int M, int E, const cu_wview *tab0, const cu_wview *tab1, cu_wview v0,
                   cu_wview v1, int pair, int max_rows, int vec, int row0, int row_e, int slots) {
    gemv_group_launch(out, ldo, out_e, x, ldx, x_e, xr, off, M, E, tab0, tab1, v0, v1, pair, max_rows, vec, row0, row_e,
                      slots, NULL, 0, NULL);
}

int cu_gemv_group_duo(float *out, int ldo, const float *x, int ldx, const int32_t *xr, const int32_t *off, int E, const cu_wview *tab0,
                      const cu_wview *tab1, cu_wview v0, cu_wview v1, int pair, int max_rows, int vec, int slots,
                      cu_gemv_b *b) {
    /* gemv_group_launch's one-row form with four weight rows a warp (p4 for pairs, r4 else), for both parts alike */
    int vt = vt_of(v0);
    if (!cu_gemv_v2 || !(vec & CU_GEMV_T1) || !(vec & CU_GEMV_T4) || (!pair && !(vec & CU_GEMV_T2)) ||
        (vt != VT_FP8 && vt != VT_BF16) || (vt == VT_FP8 && (cu_fp8_fast || cu_gemv_f8c)) || vt_of(b->v0) != vt ||
        (pair && (vt_of(v1) != vt || vt_of(b->v1) != vt || b->v1.cols != b->v0.cols || b->v1.rows < b->n_rows)) ||
        b->v0.rows < b->n_rows || b->n_rows <= 0 || max_rows <= 0 || E <= 0 || ((uintptr_t)x & 15) || ldx % 4 ||
        ((uintptr_t)b->x & 15))
        return 0;
    gemv_group_launch(out, ldo, 0, x, ldx, 0, xr, off, 1, E, tab0, tab1, v0, v1, pair, max_rows, vec, 0, 0, slots, NULL,
                      0, b);
    return 1;
}

/* out1 [M, w1.rows] and out2 [M, w2.rows] from one x [M, K] by one launch of gemv_v2_kernel (M <= GEMV_MAX_M);
 * 0 (nothing done) when the two weights are not read the same way by the v2 kernel */
int cu_gemv_two(float *out1, float *out2, const float *x, int M, cu_wview w1, cu_wview w2, int vec) {
    int vt = vt_of(w1);
    if (!cu_gemv_v2 || vt == VT_GEN || vt_of(w2) != vt || w1.cols != w2.cols || ((uintptr_t)x & 15) || w1.cols % 4) return 0;
    gemv_group_launch(out1, w1.rows, 0, x, w1.cols, 0, NULL, NULL, M, 1, NULL, NULL, w1, w2, 0, w1.rows + w2.rows, vec | 1, 0, 0, 0,
                      out2, w2.rows, NULL);
    return 1;
}

/* out1 [w1.rows] and out2 [w2.rows] of one token whose input is RMSNorm(h + add) nw (add NULL: h), the norm folded into
 * the GEMV (opt.norm_fold): gemv_v2_kernel's four-row form reads h, add and nw itself and scales each row's sum by the
 * row's 1 / RMS at the end (grp_rows4's NORM), so no norm kernel runs before it; h and xn are the caller's to make.
 * Where cu_gemv_two would take that form (FP8 or BF16 weights, opt.gemv_t1 4); 0 (nothing launched) otherwise. */
int cu_gemv_two_norm(float *out1, float *out2, const float *h, const float *add, cu_wview nw, float eps, cu_wview w1,
                     cu_wview w2, int vec) {
    if (!out2) w2 = w1;   /* (one weight: w2's rows are not launched, its view only passes the checks) */
    int vt = vt_of(w1);
    if (!cu_gemv_v2 || (vt != VT_FP8 && vt != VT_BF16) || (vt == VT_FP8 && (cu_fp8_fast || cu_gemv_f8c)) || vt_of(w2) != vt ||
        w1.cols != w2.cols || !(vec & CU_GEMV_T1) || !(vec & CU_GEMV_T2) || !(vec & CU_GEMV_T4) || (out2 && w1.rows % 4) ||
        nw.rows != 1 || nw.cols != w1.cols || nw.scale || (nw.dtype != DS_DTYPE_F32 && nw.dtype != DS_DTYPE_BF16) ||
        ((uintptr_t)nw.data & 15) || ((uintptr_t)h & 15) || ((uintptr_t)add & 15))
        return 0;
    const int max_rows = w1.rows + (out2 ? w2.rows : 0), V = vt == VT_BF16 ? 8 : 16;
    const int resident = vt == VT_BF16 ? gemv_t1_resident<VT_BF16, false, true, 4>() : gemv_t1_resident<VT_FP8, false, true, 4>();
    int ks = gemv_v2_ks((max_rows + 3) / 4, 1, 0, w1.cols / V, resident);
    if (cu_gemv_t1_ks == 1 || cu_gemv_t1_ks == 2 || cu_gemv_t1_ks == 4 || cu_gemv_t1_ks == 8) ks = cu_gemv_t1_ks;
    const int rpb = GEMV_WARPS / ks * 4;
    const dim3 g2(cu_blocks((size_t)max_rows, rpb), 1);
    const cu_gemv_b pb = {NULL, NULL, w1, w2, 0, INT_MAX};
    const cu_gemv_norm nm = {h, add, nw, w1.cols, eps};
    const int pfl = cu_pdl_prefetch, l2ef = (cu_l2ef & CU_L2EF_GEMV) != 0;
    cu_gemv_t1_launches++;
    cu_gemv_t4_launches++;
#define NF_LAUNCH(VT, KS) cu_launch(gemv_v2_kernel<VT, false, KS, 1, true, 4, true>, g2, GEMV_WARPS * 32, 0, out1, w1.rows, 0, \
                                    h, w1.cols, 0, (const int32_t *)NULL, (const int32_t *)NULL, 1, (const cu_wview *)NULL,  \
                                    (const cu_wview *)NULL, w1, w2, max_rows, 0, 0, 1, 0, pfl, l2ef, out2, w2.rows, pb, nm)
#define NF_KS(VT)                                                                                              \
    do {                                                                                                       \
        if (ks == 1) NF_LAUNCH(VT, 1);                                                                         \
        else if (ks == 2) NF_LAUNCH(VT, 2);                                                                    \
        else if (ks == 4) NF_LAUNCH(VT, 4);                                                                    \
        else NF_LAUNCH(VT, 8);                                                                                 \
    } while (0)
    if (vt == VT_BF16) NF_KS(VT_BF16);
    else NF_KS(VT_FP8);
#undef NF_KS
#undef NF_LAUNCH
    CUDA_LAUNCH_CHECK();
    return 1;
}

/* ---- BF16 tensor-core GEMM (opt-in) ----------------------------------------------------------------- */
__global__ void to_bf16_kernel(__nv_bfloat16 *dst, const float *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16(src[i]);
}

__global__ void dequant_bf16_kernel(__nv_bfloat16 *dst, cu_wview w, int r0, int nr) {
    size_t n = (size_t)nr * (size_t)w.cols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int r = (int)(i / (size_t)w.cols), c = (int)(i % (size_t)w.cols);
        dst[i] = __float2bfloat16(cu_w(w, r0 + r, c));
    }
}

/* The same values 16 at a time: thread i takes codes [16i, 16i + 16) of rows r0.. (one 16-byte load, two
 * 16-byte stores; a 16-code chunk never crosses a 128-column scale block). FP8 with scales, cols % 16 == 0.
 * The per-element kernel above was 3.8 ms of a 26.9 ms FP8 decode step at batch 64 (V2-Lite). */
__global__ void dequant_fp8_bf16_vec_kernel(__nv_bfloat16 *dst, cu_wview w, int r0, int nr) {
    size_t nc = (size_t)w.cols / 16, n = (size_t)nr * nc;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int r = r0 + (int)(i / nc), c = (int)(i % nc) * 16;
        uint4 q = __ldg((const uint4 *)((const uint8_t *)w.data + (size_t)r * w.cols + c));
        float sc = w.scale[(size_t)(r >> 7) * (size_t)w.scale_cols + (size_t)(c >> 7)];
        uint32_t o[8];
        fp8x16_bf16(q, sc, o);
        uint4 *d = (uint4 *)(dst + i * 16);
        d[0] = make_uint4(o[0], o[1], o[2], o[3]);
        d[1] = make_uint4(o[4], o[5], o[6], o[7]);
    }
}
int cu_dequant_vec = 1;   /* DSINFER_CUDA_DEQUANT_VEC (read at backend creation) */

/* dst[nr, cols] = rows r0 .. r0 + nr - 1 of w in BF16 (the values cu_w gives, rounded to nearest even) */
void cu_weight_bf16(__nv_bfloat16 *dst, const cu_wview &v, int r0, int nr) {
    if (cu_dequant_vec && v.dtype == DS_DTYPE_F8_E4M3 && v.scale && v.cols % 16 == 0) {
        size_t blocks = cu_blocks((size_t)nr * (size_t)(v.cols / 16), 256);
        dequant_fp8_bf16_vec_kernel<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, cu_stream>>>(dst, v, r0, nr);
    } else {
        size_t blocks = cu_blocks((size_t)nr * v.cols, 256);
        dequant_bf16_kernel<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, cu_stream>>>(dst, v, r0, nr);
    }
    CUDA_LAUNCH_CHECK();
}

void cu_to_bf16(__nv_bfloat16 *dst, const float *src, size_t n) {
    size_t blocks = cu_blocks(n, 256);
    to_bf16_kernel<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, cu_stream>>>(dst, src, n);
    CUDA_LAUNCH_CHECK();
}

static void linear_tc(ds_cuda_backend *cb, float *out, const float *x, const ds_weight *w, int M) {
    int N = w->rows, K = w->cols;
    size_t xb = ((size_t)M * K * 2 + 255) / 256 * 256;
    int bf = w->dtype == DS_DTYPE_BF16 && !w->scale;
    size_t tile_elems = bf ? 0 : ((size_t)32 << 20);
    int rows = bf ? N : (int)(tile_elems / (size_t)K >= (size_t)N ? N : (tile_elems / (size_t)K / 128 * 128 > 0 ? tile_elems / (size_t)K / 128 * 128 : 1));
    char *ws = (char *)cu_ws_get(&cb->ws_tc, xb + (bf ? 0 : (size_t)rows * K * 2));
    __nv_bfloat16 *xh = (__nv_bfloat16 *)ws, *wt = (__nv_bfloat16 *)(ws + xb);
    cu_to_bf16(xh, x, (size_t)M * K);
    const float one = 1.0f, zero = 0.0f;
    cu_wview v = cu_view(w);
    for (int r0 = 0; r0 < N; r0 += rows) {
        int nr = N - r0 < rows ? N - r0 : rows;
        const void *A = bf ? (const void *)w->data : (const void *)wt;
        if (!bf) cu_weight_bf16(wt, v, r0, nr);
        /* tuned cuBLASLt for BF16 weights read in place; a freshly dequantised tile (FP8, NVFP4) sits in L2, where
         * the algorithms searched for weights from DRAM were slower (FP8 decode -2.5% / -4.8%, RESULTS fifth session) */
        if (bf && cb->opt.lt_tune && cu_lt_gemm_bf16(cb, out + r0, N, (const __nv_bfloat16 *)A, xh, nr, M, K, 1)) continue;
        CUBLAS_CHECK(cublasGemmEx(cb->cublas_tc, CUBLAS_OP_T, CUBLAS_OP_N, nr, M, K, &one, A, CUDA_R_16BF, K, xh,
                                  CUDA_R_16BF, K, &zero, out + r0, CUDA_R_32F, N, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
    }
}
