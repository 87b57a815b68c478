/* The routed experts of the grouped MoE on the tensor cores (issue 7, 8), with DSINFER_CUDA_TC=1 and more
 * than GEMV_MAX_M tokens: every expert's rows (tokens sorted by expert, offsets on the device, no host
 * sync) times its weight, in two launches for all experts: gate and up with SiLU(g) * u in the epilogue,
 * then down. BF16, FP8 (128 x 128 block-scaled) or NVFP4 weights are read once from memory in their stored form
 * (NVFP4 decoded in registers: Hopper has no FP4 MMA),
 * activations in BF16; mma.sync m16n8k16 with fp32 accumulation.
 *
 * The weight is the MMA's A operand (16 output rows), the tokens are its N (8 per group, up to MT_TG
 * groups a pass, so a weight row is read once for up to 32 tokens). Lane (g, t) loads 8 consecutive
 * values of weight rows g and g + 8 (k0 + 8t .. + 7) and the same 8 columns of token g's row; the two
 * MMAs of a 32-column chunk take them in a permuted k order, the same for A and B, which leaves each dot
 * product unchanged (k-step 0: logical k {2t, 2t+1 | 2t+8, 2t+9} = columns 8t + {0,1 | 2,3}; k-step 1:
 * 8t + {4,5 | 6,7}). So weights need no shared memory: 16-byte (BF16) or 8-byte (FP8) loads straight
 * into the fragments, four chunks in flight per lane.
 * FP8: codes become BF16 exactly (e4m3 fits); each 128-column block is summed apart and added times its
 * block scale (a 16-row tile and a 32-column chunk never straddle a scale block). */
#include "backend/cuda/cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "backend/cuda/cuda_mma.h"

#define MT_WARPS 4   /* warps per block, 16 output rows each */
#define MT_TG 4      /* token groups of 8 per pass */
#define MT_U 4       /* 32-column chunks loaded before use (= one 128-column scale block) */

/* two e4m3 codes (low byte first) -> BF16x2, exact */
__device__ __forceinline__ uint32_t fp8x2_to_bf16x2(uint32_t two) {
    __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(two & 0xffffu), __NV_E4M3);
    float2 f = __half22float2(__half2(h));
    __nv_bfloat162 b = __floats2bfloat162_rn(f.x, f.y);
    return *(uint32_t *)&b;
}

/* The stored weight kinds the kernel reads: BF16, FP8 (128 x 128 block scales, applied to the sums) and
 * NVFP4 (E2M1 codes, an e4m3 scale per 16 values and a global scale, applied to the values: spec 13). */
enum { MT_BF16 = 0, MT_FP8 = 1, MT_NVFP4 = 2, MT_FP8F = 3 };   /* MT_FP8F: FP8 decoded without cvt (cu_fp8_scaled) */

/* 8 weight values of row n at column c (multiple of 8) as four BF16x2 words: BF16 as stored, FP8 codes
 * exactly (unscaled), NVFP4 decoded as the CPU does (cu_w_nvfp4: code times fp8(block) * global) and
 * rounded to BF16 */
template <int WT>
__device__ __forceinline__ uint4 ld_w8(const cu_wview &w, int n, int c) {
    if (WT == MT_NVFP4) {
        uint32_t q = __ldg((const uint32_t *)((const unsigned char *)w.data + (((size_t)n * w.cols + c) >> 1)));
        float s = cu_fp8_to_f32(w.bscale[(size_t)n * (size_t)(w.cols >> 4) + (size_t)(c >> 4)]) * w.gscale;
        uint32_t o[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            unsigned b = (q >> (8 * i)) & 0xffu;
            __nv_bfloat162 v = __floats2bfloat162_rn(cu_e2m1(b & 15u) * s, cu_e2m1(b >> 4) * s);
            o[i] = *(uint32_t *)&v;
        }
        return make_uint4(o[0], o[1], o[2], o[3]);
    }
    if (WT == MT_FP8F) {   /* e4m3 value exact in fp32, its upper half is the BF16 (cuda.h cu_fp8_scaled) */
        uint2 r = __ldg((const uint2 *)((const unsigned char *)w.data + (size_t)n * w.cols + c));
        const uint32_t u[2] = {r.x, r.y};
        uint32_t o[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint32_t word = u[i >> 1] >> (16 * (i & 1));
            uint32_t lo = cu_f32_bits(cu_fp8_scaled(word & 0xffu, 1.0f, 0x1p120f));
            uint32_t hi = cu_f32_bits(cu_fp8_scaled((word >> 8) & 0xffu, 1.0f, 0x1p120f));
            o[i] = __byte_perm(lo, hi, 0x7632);   /* {hi[31:16], lo[31:16]} */
        }
        return make_uint4(o[0], o[1], o[2], o[3]);
    }
    if (WT == MT_FP8) {
        uint2 r = __ldg((const uint2 *)((const unsigned char *)w.data + (size_t)n * w.cols + c));
        return make_uint4(fp8x2_to_bf16x2(r.x), fp8x2_to_bf16x2(r.x >> 16), fp8x2_to_bf16x2(r.y),
                          fp8x2_to_bf16x2(r.y >> 16));
    }
    return __ldg((const uint4 *)((const __nv_bfloat16 *)w.data + (size_t)n * w.cols + c));
}

/* acc[q] += W[rows g, g+8][k0 .. k0+31] X[tokens of group q][same]^T for one 32-column chunk */
template <int TG>
__device__ __forceinline__ void mt_chunk(float (*acc)[4], const uint4 &wa, const uint4 &wb, const uint4 *xv, int ng) {
#pragma unroll
    for (int q = 0; q < TG; q++) {
        if (q >= ng) break;
        cu_mma_bf16(acc[q], wa.x, wb.x, wa.y, wb.y, xv[q].x, xv[q].y);
        cu_mma_bf16(acc[q], wa.z, wb.z, wa.w, wb.w, xv[q].z, xv[q].w);
    }
}

/* A pass's accumulators to the output, for both kernels below. a[q][i]: output row n0 + g (+ 8 for i >= 2),
 * token 8q + 2t (+ 1 for odd i) of the pass, i.e. row r0 + j of out with j = j0 + 8q + 2t (+1) < cnt;
 * outputs n >= N and groups from ng on (tokens past cnt) are skipped. PAIR: BF16 SiLU(a0) * a1 (the down
 * projection's input), else fp32 a0. */
template <bool PAIR, int NG>
__device__ __forceinline__ void mt_store(void *out, int ldo, const float (*a0)[4], const float (*a1)[4], int ng, int j0,
                                         int cnt, int r0, int n0, int N, int g, int t) {
#pragma unroll
    for (int q = 0; q < NG; q++) {
        if (q >= ng) break;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int j = j0 + 8 * q + 2 * t + (i & 1), n = n0 + g + 8 * (i >> 1);
            if (j >= cnt || n >= N) continue;
            size_t o = (size_t)(r0 + j) * ldo + n;
            if (PAIR) {
                float gv = a0[q][i];
                ((__nv_bfloat16 *)out)[o] = __float2bfloat16_rn(gv / (1.0f + expf(-gv)) * a1[q][i]);
            } else {
                ((float *)out)[o] = a0[q][i];
            }
        }
    }
}

/* Grouped (off != NULL): grid (ceil(N / (16 * MT_WARPS)), E); expert e's rows r0 = off[e] .. off[e+1]-1 of
 * xs ([*, ldx] BF16, K columns) -> out rows r0.. ([*, ldo]), weights tab0[e] (tab1[e]).
 * One weight (off == NULL, the skinny linear): grid (ceil(M / (8 * MT_TG)), 1, ceil(N / (16 * MT_WARPS))),
 * rows 0 .. M-1, weight v0; each block takes one chunk of 8 * MT_TG rows, chunks fastest in the grid so
 * the blocks reading the same weight rows run together (L2 hits).
 * PAIR: BF16 SiLU(xs W0^T) * (xs W1^T) (the down projection's input); else fp32 xs W0^T.
 * block MT_WARPS * 32. */
/* TG: token groups of 8 a pass (MT_TG at most; the host picks it from the mean rows per expert: at decode
 * an expert has few tokens, and a pass of 1-2 groups keeps fewer registers, so more warps stream weights).
 * With TG <= 2 a lane's token loads for the whole 128-column step are issued with its weight loads, not
 * one L2 round trip per 32-column chunk after them. */
template <int WT, bool PAIR, int TG>
__global__ void __launch_bounds__(MT_WARPS * 32) moe_tc_kernel(void *out, int ldo, const __nv_bfloat16 *xs, int ldx,
                                                               const int32_t *off, const cu_wview *tab0,
                                                               const cu_wview *tab1, int N, int K, int M,
                                                               cu_wview v0) {
    int e = blockIdx.y, r0 = off ? off[e] : 0, cnt = off ? off[e + 1] - r0 : M;
    int tile = off ? blockIdx.x : blockIdx.z;
    int j_first = off ? 0 : blockIdx.x * 8 * TG, j_step = off ? 8 * TG : cnt;
    constexpr bool FP8 = WT == MT_FP8 || WT == MT_FP8F;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int n0 = (tile * MT_WARPS + warp) * 16;
    if (cnt <= 0 || n0 >= N) return;   /* no barriers below */
    const cu_wview w0 = off ? tab0[e] : v0, w1 = PAIR ? tab1[e] : w0;
    int ra = min(n0 + g, N - 1), rb = min(n0 + g + 8, N - 1);
    const float *sc0 = FP8 ? w0.scale + (size_t)(n0 >> 7) * w0.scale_cols : nullptr;
    const float *sc1 = FP8 && PAIR ? w1.scale + (size_t)(n0 >> 7) * w1.scale_cols : nullptr;
    for (int j0 = j_first; j0 < cnt; j0 += j_step) {
        int left = cnt - j0, ng = (left + 7) / 8 < TG ? (left + 7) / 8 : TG;
        const __nv_bfloat16 *xr[TG];
#pragma unroll
        for (int q = 0; q < TG; q++) {
            int j = j0 + 8 * q + g;
            xr[q] = j < cnt ? xs + (size_t)(r0 + j) * ldx : nullptr;   /* rows past the expert's: zeros */
        }
        float a0[TG][4], a1[TG][4];
#pragma unroll
        for (int q = 0; q < TG; q++)
#pragma unroll
            for (int i = 0; i < 4; i++) a0[q][i] = a1[q][i] = 0.0f;
        for (int kb = 0; kb < K; kb += 32 * MT_U) {
            uint4 wa[MT_U], wb[MT_U], ua[MT_U], ub[MT_U];
            int nu = (K - kb) / 32 < MT_U ? (K - kb) / 32 : MT_U;
#pragma unroll
            for (int u = 0; u < MT_U; u++) {
                if (u < nu) {
                    int c = kb + 32 * u + 8 * t;
                    wa[u] = ld_w8<WT>(w0, ra, c);
                    wb[u] = ld_w8<WT>(w0, rb, c);
                    if (PAIR) {
                        ua[u] = ld_w8<WT>(w1, ra, c);
                        ub[u] = ld_w8<WT>(w1, rb, c);
                    }
                }
            }
            constexpr int XP = TG <= 2 ? MT_U : 1;   /* chunks whose token loads go out with the weights' */
            uint4 xall[XP][TG];
            if (TG <= 2) {
#pragma unroll
                for (int u = 0; u < XP; u++)
#pragma unroll
                    for (int q = 0; q < TG; q++) {
                        int c = kb + 32 * u + 8 * t;
                        xall[u][q] = u < nu && xr[q] ? __ldg((const uint4 *)(xr[q] + c)) : make_uint4(0, 0, 0, 0);
                    }
            }
            float p0[TG][4], p1[TG][4];   /* FP8: this 128-column block's sums */
#pragma unroll
            for (int q = 0; q < TG; q++)
#pragma unroll
                for (int i = 0; i < 4; i++) p0[q][i] = p1[q][i] = 0.0f;
#pragma unroll
            for (int u = 0; u < MT_U; u++) {
                if (u >= nu) break;
                int c = kb + 32 * u + 8 * t;
                uint4 xv[TG];
#pragma unroll
                for (int q = 0; q < TG; q++)
                    xv[q] = TG <= 2 ? xall[TG <= 2 ? u : 0][q] : xr[q] ? __ldg((const uint4 *)(xr[q] + c)) : make_uint4(0, 0, 0, 0);
                mt_chunk<TG>(FP8 ? p0 : a0, wa[u], wb[u], xv, ng);
                if (PAIR) mt_chunk<TG>(FP8 ? p1 : a1, ua[u], ub[u], xv, ng);
            }
            if (FP8) {
                float s0 = __ldg(sc0 + (kb >> 7)), s1 = PAIR ? __ldg(sc1 + (kb >> 7)) : 0.0f;
#pragma unroll
                for (int q = 0; q < TG; q++)
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        a0[q][i] += s0 * p0[q][i];
                        if (PAIR) a1[q][i] += s1 * p1[q][i];
                    }
            }
        }
        mt_store<PAIR, TG>(out, ldo, a0, a1, TG, j0, cnt, r0, n0, N, g, t);
    }
}

/* grid (n): dst[i, :] = BF16(src[rows ? rows[i] : i, :]) */
/* row i >= nr (rows given): token (i - nr) % mt, the shared experts' virtual rows after the routed ones
 * (cu_rows_gather_sh); nr = the rows otherwise */
__device__ __forceinline__ size_t gather_row(const int32_t *rows, size_t i, int nr, int mt) {
    return !rows ? i : i < (size_t)nr ? (size_t)rows[i] : (i - (size_t)nr) % (size_t)mt;
}

__global__ void moe_rows_bf16_kernel(__nv_bfloat16 *dst, const float *src, const int32_t *rows, int D, int nr, int mt) {
    cu_pdl_trigger();   /* the experts' gate / up launch after it may start its weight stream (DSINFER_CUDA_MOE_WG_PDL=2) */
    cu_pdl_wait();
    const float *s = src + gather_row(rows, blockIdx.x, nr, mt) * D;
    __nv_bfloat16 *d = dst + (size_t)blockIdx.x * D;
    for (int c = threadIdx.x; c < D; c += blockDim.x) d[c] = __float2bfloat16_rn(s[c]);
}

/* ---- v2 for BF16 weights (DSINFER_CUDA_MOE_TC2, sixth session): the weights staged in shared memory ----
 * v1 above holds the weight chunks it has in flight in registers (124 registers a thread, 4 blocks of 4
 * warps an SM), and with one token group a pass (decode, a mean of <= 8 rows per expert) an expert with 9+
 * rows streams its weights twice from DRAM: ncu at batch 64 counted 3.83 TB/s of DRAM reads over the
 * gate/up kernel against 3.14 TB/s of weight bytes (bench/RESULTS.md, fourth session run 10).
 * v2: a block = 4 warps x 16 output rows (64 rows of W0, and of W1 with PAIR) and up to TOK tokens a pass
 * (32, or 64 at a mean above 16 rows per expert: all of an expert's rows at decode). Each 64-column stage
 * of the weights and the tokens goes to shared memory by cp.async, ST stages in a ring (ST - 1 in flight
 * while one is multiplied: with 4 stages 48 KB of weight rows in flight a block, two blocks an SM;
 * DSINFER_CUDA_MOE_TC2_ST = 3, 4 or 6), one barrier a stage. Fragments come by ldmatrix from 128-byte
 * rows whose 16-byte chunks are XOR-swizzled by the row (chunk ^ (row & 7): the 8 rows of an 8x8 tile hit
 * 8 different bank groups). Rows past N, columns past K and tokens past the expert's count are zero-filled
 * (cp.async with src-size 0). */
#define M2_BK 64                         /* columns a stage: 128 bytes of BF16 per row */
#define M2_ROWS (16 * MT_WARPS)          /* weight rows a block */
#define M2_STAGE_ELEMS(PAIR, TOK) ((PAIR ? 2 : 1) * M2_ROWS * M2_BK + (TOK) * M2_BK)

int cu_moe_tc2 = 1, cu_moe_tc2_st = 4, cu_moe_tc2_tok = 0;   /* DSINFER_CUDA_MOE_TC2, _ST, _TOK (backend creation) */

static size_t m2_smem_bytes(bool pair, int st, int tok) {
    return sizeof(__nv_bfloat16) * (size_t)st * M2_STAGE_ELEMS(pair, tok);
}

/* element offset of (row, 16-byte chunk) in a [rows][64] BF16 tile with swizzled chunks */
__device__ __forceinline__ int m2_off(int row, int chunk) { return row * M2_BK + ((chunk ^ (row & 7)) << 3); }

/* one stage: columns kc0 .. kc0 + 63 of the block's weight rows (W0, W1: [N, >= K] BF16, rows ldw apart)
 * and of the pass's token rows */
template <bool PAIR>
__device__ __forceinline__ void m2_load_stage(__nv_bfloat16 *st, const __nv_bfloat16 *W0, const __nv_bfloat16 *W1,
                                              int ldw, int n_base, int N, const __nv_bfloat16 *xs, int ldx, int r0, int j0,
                                              int cnt, int ntok, int K, int kc0) {
    const int nw = PAIR ? 2 : 1;
    for (int x = threadIdx.x; x < nw * M2_ROWS * 8; x += MT_WARPS * 32) {
        int wsel = x / (M2_ROWS * 8), rem = x % (M2_ROWS * 8), row = rem >> 3, ch = rem & 7;
        int n = n_base + row, c = kc0 + 8 * ch, ok = n < N && c < K;
        const __nv_bfloat16 *src = (wsel ? W1 : W0) + (ok ? (size_t)n * ldw + c : 0);
        cu_cp_async16(st + wsel * M2_ROWS * M2_BK + m2_off(row, ch), src, ok ? 16 : 0);
    }
    __nv_bfloat16 *xt = st + nw * M2_ROWS * M2_BK;
    for (int x = threadIdx.x; x < ntok * 8; x += MT_WARPS * 32) {
        int row = x >> 3, ch = x & 7, j = j0 + row, c = kc0 + 8 * ch, ok = j < cnt && c < K;
        const __nv_bfloat16 *src = xs + (ok ? (size_t)(r0 + j) * ldx + c : 0);
        cu_cp_async16(xt + m2_off(row, ch), src, ok ? 16 : 0);
    }
}

/* Grouped only: grid (ceil(N / M2_ROWS), E), block MT_WARPS * 32, dynamic shared memory
 * m2_smem_bytes(PAIR, ST, TOK). Same contract as moe_tc_kernel's grouped form (BF16 weights). */
template <bool PAIR, int M2_ST, int TOK>
__global__ void __launch_bounds__(MT_WARPS * 32, 2) moe_tc2_kernel(void *out, int ldo, const __nv_bfloat16 *xs, int ldx,
                                                                   const int32_t *off, const cu_wview *tab0,
                                                                   const cu_wview *tab1, int N, int K) {
    extern __shared__ __align__(128) __nv_bfloat16 m2_smem[];
    int e = blockIdx.y, r0 = off[e], cnt = off[e + 1] - r0, n_base = blockIdx.x * M2_ROWS;
    if (cnt <= 0 || n_base >= N) return;   /* the whole block: no barrier reached */
    const __nv_bfloat16 *W0 = (const __nv_bfloat16 *)tab0[e].data, *W1 = PAIR ? (const __nv_bfloat16 *)tab1[e].data : W0;
    int ldw = tab0[e].cols;   /* a row's stride, as moe_tc_kernel (gate and up share the shape) */
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int nw = PAIR ? 2 : 1, nk = (K + M2_BK - 1) / M2_BK;
    /* ldmatrix row addresses: A tiles (rows 0-7 | 8-15) x (k 0-7 | 8-15) of this warp's 16 rows; B tiles:
     * 8 tokens x (k chunk 0 .. 3 of a 32-column half) */
    int a_row = 16 * warp + (lane & 7) + 8 * ((lane >> 3) & 1), a_hi = lane >> 4;
    int b_row = lane & 7, b_ch = lane >> 3;
    constexpr int NG = TOK / 8;   /* token groups of 8 a pass */
    for (int j0 = 0; j0 < cnt; j0 += TOK) {
        int ntok = cnt - j0 < TOK ? cnt - j0 : TOK, ng = (ntok + 7) >> 3, nrows = 8 * ng;
        float a0[NG][4], a1[NG][4];
#pragma unroll
        for (int q = 0; q < NG; q++)
#pragma unroll
            for (int i = 0; i < 4; i++) a0[q][i] = a1[q][i] = 0.0f;
#pragma unroll
        for (int s = 0; s < M2_ST - 1; s++) {
            if (s < nk)
                m2_load_stage<PAIR>(m2_smem + s * M2_STAGE_ELEMS(PAIR, TOK), W0, W1, ldw, n_base, N, xs, ldx, r0, j0, cnt, nrows,
                                    K, s * M2_BK);
            cu_cp_async_commit();
        }
        for (int kt = 0; kt < nk; kt++) {
            cu_cp_async_wait<M2_ST - 2>();   /* stage kt has landed (this thread's part) */
            __syncthreads();                 /* everyone's part; and stage kt - 1's readers are done */
            int pf = kt + M2_ST - 1;
            if (pf < nk)
                m2_load_stage<PAIR>(m2_smem + (pf % M2_ST) * M2_STAGE_ELEMS(PAIR, TOK), W0, W1, ldw, n_base, N, xs, ldx, r0, j0,
                                    cnt, nrows, K, pf * M2_BK);
            cu_cp_async_commit();
            const __nv_bfloat16 *st = m2_smem + (kt % M2_ST) * M2_STAGE_ELEMS(PAIR, TOK);
            const __nv_bfloat16 *xt = st + nw * M2_ROWS * M2_BK;
#pragma unroll
            for (int half = 0; half < 2; half++) {   /* 32 columns: two k-steps of 16 */
                uint32_t b[NG][4];
#pragma unroll
                for (int q = 0; q < NG; q++)
                    if (q < ng) cu_ldsm_x4(b[q], xt + m2_off(8 * q + b_row, 4 * half + b_ch));
#pragma unroll
                for (int ks = 0; ks < 2; ks++) {
                    int ch = 4 * half + 2 * ks + a_hi;
                    uint32_t fa[4], fb[4];
                    cu_ldsm_x4(fa, st + m2_off(a_row, ch));
                    if (PAIR) cu_ldsm_x4(fb, st + M2_ROWS * M2_BK + m2_off(a_row, ch));
#pragma unroll
                    for (int q = 0; q < NG; q++) {
                        if (q >= ng) break;
                        cu_mma_bf16(a0[q], fa, b[q][2 * ks], b[q][2 * ks + 1]);
                        if (PAIR) cu_mma_bf16(a1[q], fb, b[q][2 * ks], b[q][2 * ks + 1]);
                    }
                }
            }
        }
        cu_cp_async_wait<0>();
        __syncthreads();   /* the ring is free for the next pass */
        mt_store<PAIR, NG>(out, ldo, a0, a1, ng, j0, cnt, r0, n_base + 16 * warp, N, g, t);
    }
}

static void f8_init(void);

/* once per process, before any launch (and outside graph capture): v2's dynamic shared memory above 48 KB */
#define M2_SET_SMEM(ST, TOK)                                                                                          \
    do {                                                                                                              \
        CUDA_CHECK(cudaFuncSetAttribute(moe_tc2_kernel<true, ST, TOK>, cudaFuncAttributeMaxDynamicSharedMemorySize, \
                                        (int)m2_smem_bytes(true, ST, TOK)));                                          \
        CUDA_CHECK(cudaFuncSetAttribute(moe_tc2_kernel<false, ST, TOK>, cudaFuncAttributeMaxDynamicSharedMemorySize, \
                                        (int)m2_smem_bytes(false, ST, TOK)));                                         \
    } while (0)
void cu_moe_tc2_init(void) {
    f8_init();
    cu_f8_wgmma_init();
    cu_moe_wg_init();
    cu_router_init();
    M2_SET_SMEM(3, 32);
    M2_SET_SMEM(4, 32);
    M2_SET_SMEM(6, 32);
    M2_SET_SMEM(3, 64);
    M2_SET_SMEM(4, 64);
}
#undef M2_SET_SMEM

/* gate/up then down for all experts by moe_tc2_kernel with ST stages and TOK tokens a pass */
template <int ST, int TOK>
static void m2_pair(float *y, __nv_bfloat16 *inter, const __nv_bfloat16 *xs, const int32_t *off, int E, int D, int I,
                    const cu_wview *tab) {
    dim3 g1((unsigned)((I + M2_ROWS - 1) / M2_ROWS), (unsigned)E), g2((unsigned)((D + M2_ROWS - 1) / M2_ROWS), (unsigned)E);
    moe_tc2_kernel<true, ST, TOK><<<g1, MT_WARPS * 32, m2_smem_bytes(true, ST, TOK), cu_stream>>>(inter, I, xs, D, off, tab,
                                                                                                tab + E, I, D);
    CUDA_LAUNCH_CHECK();
    moe_tc2_kernel<false, ST, TOK><<<g2, MT_WARPS * 32, m2_smem_bytes(false, ST, TOK), cu_stream>>>(y, D, inter, I, off,
                                                                                                  tab + 2 * E, NULL, D, I);
    CUDA_LAUNCH_CHECK();
}

/* tokens a pass (DSINFER_CUDA_MOE_TC2_TOK: 32 or 64 fixed; 0: 32 at a mean of <= 16 rows per expert, else
 * 64) and stages (3, 4 or 6 with 32 tokens; 3 or 4 with 64) */
static void m2_run(float *y, __nv_bfloat16 *inter, const __nv_bfloat16 *xs, const int32_t *off, int E, int D, int I,
                   const cu_wview *tab, int mean) {
    int tok = cu_moe_tc2_tok ? cu_moe_tc2_tok : mean <= 16 ? 32 : 64;
    if (tok == 64) {
        if (cu_moe_tc2_st == 3) m2_pair<3, 64>(y, inter, xs, off, E, D, I, tab);
        else m2_pair<4, 64>(y, inter, xs, off, E, D, I, tab);
    } else if (cu_moe_tc2_st == 3) m2_pair<3, 32>(y, inter, xs, off, E, D, I, tab);
    else if (cu_moe_tc2_st == 6) m2_pair<6, 32>(y, inter, xs, off, E, D, I, tab);
    else m2_pair<4, 32>(y, inter, xs, off, E, D, I, tab);
}

/* ---- W8A8 for FP8 experts (DSINFER_MOE_W8A8, default 1, seventh session): FP8 MMAs, no conversion ----
 * The FP8 weights went through moe_tc_kernel, which turns every code into BF16 before the MMA: two
 * conversion-unit instructions per weight value, so FP8 decode ran at 24-30% of its bandwidth roofline,
 * slower per byte than BF16 (KERNELS.md). Here the activations are quantized too, as DeepSeek's own
 * inference does (spec 12.2): e4m3 per token x 128 columns with one fp32 scale (amax / 448, the W8A8
 * linear's rule, cuda_fp8gemm.cu), and mma.sync m16n8k32 e4m3 multiplies codes with codes (on sm_90 ptxas
 * emulates it: the codes become FP16 fragments for FP16 MMAs, exact, in registers; cheaper than v1's BF16
 * conversion of every weight, measured +29-37% at decode, but compute-heavy with many tokens). The structure is
 * moe_tc2_kernel's (a block = 4 warps x 16 weight rows and up to TOK tokens a pass, stages in a cp.async ring,
 * swizzled 128-byte rows, ldmatrix): a stage is 128 columns of codes, which is one scale block of both
 * operands, so each stage's sums are taken apart and added times (weight block scale x token scale) in
 * fp32, the promotion DeepGEMM does every 128 columns. The 8x8 b16 tiles of ldmatrix carry 8x16 codes, which
 * is the e4m3 fragments' layout (4 codes a register), so the addressing is moe_tc2_kernel's. The down
 * projection's input (SiLU(g) * u, BF16 from the gate/up epilogue) is quantized by a second pass.
 * The CPU backend emulates the same quantization under the same switch (cpu_moe.c), the op test's reference. */
#define F8_BK 128   /* columns (bytes) a stage */

/* byte offset of (row, 16-byte chunk) in a [rows][128] code tile with swizzled chunks */
__device__ __forceinline__ int f8_off(int row, int chunk) { return row * F8_BK + ((chunk ^ (row & 7)) << 4); }

/* d[16x8] += a[16x32] b[32x8], e4m3 codes (4 a register), fp32 d */
__device__ __forceinline__ void cu_mma_e4m3(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* The same product by FP16 MMAs with the conversions in the open (DSINFER_CUDA_MOE_F8_CVT, default 1): sm_90
 * has no FP8 mma.sync, and ptxas's emulation of cu_mma_e4m3 converts both fragments at every MMA, so a weight
 * fragment was converted once per token group and per gate / up MMA. Here each is converted once: the e4m3
 * fragment a0 (row g, codes 4t .. 4t+3 of the k32 step) becomes FP16 pairs (4t, 4t+1) and (4t+2, 4t+3), which
 * the k16 MMA takes as its k slots (2t, 2t+1) and (2t+8, 2t+9); the B fragment the same way, so every product
 * pairs the same codes as the e4m3 MMA (exact conversions, fp32 sums: the same result up to summation order). */
__device__ __forceinline__ void f8_frag_a16(const uint32_t a[4], uint32_t lo[4], uint32_t hi[4]) {
    cu_e4m3x4_f16(a[0], &lo[0], &lo[2]);   /* codes 0 .. 15 of the k32 step: rows g (a0), g + 8 (a1) */
    cu_e4m3x4_f16(a[1], &lo[1], &lo[3]);
    cu_e4m3x4_f16(a[2], &hi[0], &hi[2]);   /* codes 16 .. 31 (a2, a3) */
    cu_e4m3x4_f16(a[3], &hi[1], &hi[3]);
}

/* grid (K / 128, n): codes q[i, :] and scales s[i, K / 128] of row rows[i] (or i) of src ([*, K] fp32 or BF16),
 * per 128 columns: scale = max(amax, 1e-4) / 448, code = e4m3(v / scale); block 128 */
template <typename T>
__global__ void moe_rows_fp8_kernel(unsigned char *q, float *s, const T *src, const int32_t *rows, int K) {
    __shared__ float red[4];
    int b = blockIdx.x, i = blockIdx.y, k = b * 128 + threadIdx.x;
    float v = (float)src[(size_t)(rows ? rows[i] : i) * K + k];
    float a = cu_warp_max(fabsf(v));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = a;
    __syncthreads();
    float scale = fmaxf(fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3])), 1e-4f) / 448.0f;
    q[(size_t)i * K + k] = cu_f32_to_fp8(v / scale);
    if (threadIdx.x == 0) s[(size_t)i * (K / 128) + b] = scale;
}

/* one stage: columns kc0 .. kc0 + 127 of the block's weight rows (W0, W1: [N, K] codes, rows ldw bytes
 * apart) and of the pass's token rows (xq: [*, K] codes) */
template <bool PAIR>
__device__ __forceinline__ void f8_load_stage(unsigned char *st, const unsigned char *W0, const unsigned char *W1,
                                              int ldw, int n_base, int N, const unsigned char *xq, int r0, int j0,
                                              int cnt, int ntok, int K, int kc0) {
    const int nw = PAIR ? 2 : 1;
    for (int x = threadIdx.x; x < nw * M2_ROWS * 8; x += MT_WARPS * 32) {
        int wsel = x / (M2_ROWS * 8), rem = x % (M2_ROWS * 8), row = rem >> 3, ch = rem & 7;
        int n = n_base + row, c = kc0 + 16 * ch, ok = n < N;
        const unsigned char *src = (wsel ? W1 : W0) + (ok ? (size_t)n * ldw + c : 0);
        cu_cp_async16(st + wsel * M2_ROWS * F8_BK + f8_off(row, ch), src, ok ? 16 : 0);
    }
    unsigned char *xt = st + nw * M2_ROWS * F8_BK;
    for (int x = threadIdx.x; x < ntok * 8; x += MT_WARPS * 32) {
        int row = x >> 3, ch = x & 7, j = j0 + row, c = kc0 + 16 * ch, ok = j < cnt;
        const unsigned char *src = xq + (ok ? (size_t)(r0 + j) * K + c : 0);
        cu_cp_async16(xt + f8_off(row, ch), src, ok ? 16 : 0);
    }
}

/* Grouped (ONE false): grid (ceil(N / M2_ROWS), E), block MT_WARPS * 32, dynamic shared memory
 * m2_smem_bytes(PAIR, ST, TOK) (a stage's bytes are moe_tc2_kernel's). Expert e's rows r0 = off[e] ..
 * off[e+1]-1 of xq ([*, K] codes) with scales xs ([*, K / 128]) -> out rows r0.. ([*, ldo]); weights tab0[e]
 * (tab1[e]): FP8 [N, K] with 128 x 128 block scales. K % 128 == 0. PAIR: BF16 SiLU(g) * u, else fp32.
 * One weight (ONE, the W8A8 linear of M rows): grid (ceil(M / TOK), ceil(N / M2_ROWS), KS), weight vw; block
 * (x, y, z) takes rows TOK x .. of xq, weight rows 64 y .. and columns kc z .. kc (z + 1) - 1 (split K, kc a
 * multiple of 128), and with KS > 1 writes its fp32 partial to out + z * M * ldo (summed by f8_reduce_kernel);
 * the token chunk is the fastest grid index so the blocks reading the same weight rows run together. */
template <bool PAIR, int ST, int TOK, bool ONE, bool CVT>
__global__ void __launch_bounds__(MT_WARPS * 32, 2) moe_f8_kernel(void *out, int ldo, const unsigned char *xq,
                                                                  const float *xsc, const int32_t *off,
                                                                  const cu_wview *tab0, const cu_wview *tab1, int N, int K,
                                                                  cu_wview vw, int M, int kc) {
    extern __shared__ __align__(128) unsigned char f8_smem[];
    int e = ONE ? 0 : blockIdx.y, r0 = ONE ? blockIdx.x * TOK : off[e];
    int cnt = ONE ? min(TOK, M - r0) : off[e + 1] - r0, n_base = (ONE ? blockIdx.y : blockIdx.x) * M2_ROWS;
    int kb0 = ONE ? blockIdx.z * (kc / F8_BK) : 0, kb1 = ONE ? min(K, (int)(blockIdx.z + 1) * kc) / F8_BK : K / F8_BK;
    if (ONE && gridDim.z > 1) out = (float *)out + (size_t)blockIdx.z * M * ldo;
    if (cnt <= 0 || n_base >= N) return;   /* the whole block: no barrier reached */
    const cu_wview v0 = ONE ? vw : tab0[e], v1 = PAIR ? tab1[e] : v0;
    const unsigned char *W0 = (const unsigned char *)v0.data, *W1 = (const unsigned char *)v1.data;
    const float *ws0 = v0.scale + (size_t)(n_base >> 7) * v0.scale_cols, *ws1 = v1.scale + (size_t)(n_base >> 7) * v1.scale_cols;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int nw = PAIR ? 2 : 1, nk = K / F8_BK, stage_bytes = (int)(2 * M2_STAGE_ELEMS(PAIR, TOK));   /* nk: scale stride */
    int a_row = 16 * warp + (lane & 7) + 8 * ((lane >> 3) & 1), a_hi = lane >> 4;
    int b_row = lane & 7, b_ch = lane >> 3;
    constexpr int NG = TOK / 8;
    for (int j0 = 0; j0 < cnt; j0 += TOK) {
        int ntok = cnt - j0 < TOK ? cnt - j0 : TOK, ng = (ntok + 7) >> 3, nrows = 8 * ng;
        float a0[NG][4], a1[NG][4];
        const float *tsc[NG][2];   /* the scales of this lane's two tokens of group q (NULL past the count) */
#pragma unroll
        for (int q = 0; q < NG; q++) {
#pragma unroll
            for (int i = 0; i < 4; i++) a0[q][i] = a1[q][i] = 0.0f;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                int j = j0 + 8 * q + 2 * t + h;
                tsc[q][h] = j < cnt ? xsc + (size_t)(r0 + j) * nk : nullptr;
            }
        }
#pragma unroll
        for (int s = 0; s < ST - 1; s++) {
            if (kb0 + s < kb1)
                f8_load_stage<PAIR>(f8_smem + s * stage_bytes, W0, W1, v0.cols, n_base, N, xq, r0, j0, cnt, nrows, K,
                                    (kb0 + s) * F8_BK);
            cu_cp_async_commit();
        }
        for (int kt = kb0; kt < kb1; kt++) {
            cu_cp_async_wait<ST - 2>();
            __syncthreads();
            int pf = kt + ST - 1;
            if (pf < kb1)
                f8_load_stage<PAIR>(f8_smem + ((pf - kb0) % ST) * stage_bytes, W0, W1, v0.cols, n_base, N, xq, r0, j0, cnt,
                                    nrows, K, pf * F8_BK);
            cu_cp_async_commit();
            /* the stage's scales first: their loads go out before the MMAs, not after them */
            float s0 = __ldg(ws0 + kt), s1 = PAIR ? __ldg(ws1 + kt) : 0.0f, xs[NG][2];
#pragma unroll
            for (int q = 0; q < NG; q++)
#pragma unroll
                for (int h = 0; h < 2; h++) xs[q][h] = q < ng && tsc[q][h] ? __ldg(tsc[q][h] + kt) : 0.0f;
            const unsigned char *st = f8_smem + ((kt - kb0) % ST) * stage_bytes, *xt = st + nw * M2_ROWS * F8_BK;
            float p0[NG][4], p1[NG][4];   /* this stage's (scale block's) sums */
#pragma unroll
            for (int q = 0; q < NG; q++)
#pragma unroll
                for (int i = 0; i < 4; i++) p0[q][i] = p1[q][i] = 0.0f;
#pragma unroll
            for (int half = 0; half < 2; half++) {   /* 64 columns: two k-steps of 32 */
                uint32_t b[NG][4];
#pragma unroll
                for (int q = 0; q < NG; q++)
                    if (q < ng) cu_ldsm_x4(b[q], xt + f8_off(8 * q + b_row, 4 * half + b_ch));
#pragma unroll
                for (int ks = 0; ks < 2; ks++) {
                    int ch = 4 * half + 2 * ks + a_hi;
                    uint32_t fa[4], fb[4];
                    cu_ldsm_x4(fa, st + f8_off(a_row, ch));
                    if (PAIR) cu_ldsm_x4(fb, st + M2_ROWS * F8_BK + f8_off(a_row, ch));
                    if (CVT) {
                        uint32_t al[4], ah[4], bl[4], bh[4];
                        f8_frag_a16(fa, al, ah);
                        if (PAIR) f8_frag_a16(fb, bl, bh);
#pragma unroll
                        for (int q = 0; q < NG; q++) {
                            if (q >= ng) break;
                            uint32_t x0, x1, y0, y1;   /* B: codes 0 .. 15 (x), 16 .. 31 (y) as FP16 pairs */
                            cu_e4m3x4_f16(b[q][2 * ks], &x0, &x1);
                            cu_e4m3x4_f16(b[q][2 * ks + 1], &y0, &y1);
                            cu_mma_f16(p0[q], al, x0, x1);
                            cu_mma_f16(p0[q], ah, y0, y1);
                            if (PAIR) {
                                cu_mma_f16(p1[q], bl, x0, x1);
                                cu_mma_f16(p1[q], bh, y0, y1);
                            }
                        }
                    } else {
#pragma unroll
                        for (int q = 0; q < NG; q++) {
                            if (q >= ng) break;
                            cu_mma_e4m3(p0[q], fa, b[q][2 * ks], b[q][2 * ks + 1]);
                            if (PAIR) cu_mma_e4m3(p1[q], fb, b[q][2 * ks], b[q][2 * ks + 1]);
                        }
                    }
                }
            }
#pragma unroll
            for (int q = 0; q < NG; q++) {
                if (q >= ng) break;
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    a0[q][h] += p0[q][h] * (s0 * xs[q][h]);
                    a0[q][2 + h] += p0[q][2 + h] * (s0 * xs[q][h]);
                    if (PAIR) {
                        a1[q][h] += p1[q][h] * (s1 * xs[q][h]);
                        a1[q][2 + h] += p1[q][2 + h] * (s1 * xs[q][h]);
                    }
                }
            }
        }
        cu_cp_async_wait<0>();
        __syncthreads();   /* the ring is free for the next pass */
        mt_store<PAIR, NG>(out, ldo, a0, a1, ng, j0, cnt, r0, n_base + 16 * warp, N, g, t);
    }
}

int cu_moe_w8a8 = 0;   /* DSINFER_MOE_W8A8 (read at backend creation) */

int cu_moe_f8_cvt = 1;   /* DSINFER_CUDA_MOE_F8_CVT (read at backend creation) */

template <bool CVT>
static void f8_init_cvt(void) {
    CUDA_CHECK(cudaFuncSetAttribute(moe_f8_kernel<true, 4, 32, false, CVT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)m2_smem_bytes(true, 4, 32)));
    CUDA_CHECK(cudaFuncSetAttribute(moe_f8_kernel<false, 4, 32, false, CVT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)m2_smem_bytes(false, 4, 32)));
    CUDA_CHECK(cudaFuncSetAttribute(moe_f8_kernel<true, 4, 64, false, CVT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)m2_smem_bytes(true, 4, 64)));
    CUDA_CHECK(cudaFuncSetAttribute(moe_f8_kernel<false, 4, 64, false, CVT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)m2_smem_bytes(false, 4, 64)));
    CUDA_CHECK(cudaFuncSetAttribute(moe_f8_kernel<false, 4, 32, true, CVT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)m2_smem_bytes(false, 4, 32)));
    CUDA_CHECK(cudaFuncSetAttribute(moe_f8_kernel<false, 4, 64, true, CVT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)m2_smem_bytes(false, 4, 64)));
}

static void f8_init(void) {
    f8_init_cvt<true>();
    f8_init_cvt<false>();
}

/* grid-stride: out[i] = sum over z < KS of part[z * n + i] (the split-K partials, in z order) */
__global__ void f8_reduce_kernel(float *out, const float *part, size_t n, int KS) {
    cu_pdl_trigger();
    cu_pdl_wait();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = part[i];
        for (int z = 1; z < KS; z++) v += part[(size_t)z * n + i];
        out[i] = v;
    }
}

/* DSINFER_CUDA_FP8_OWN (default 0), _FP8_OWN_MAX_M (backend creation). Measured slower than cuBLASLt's
 * block-scaled GEMM at 64 and 128 rows (bench/RESULTS.md seventh session run 11: geomean 46.5 vs 113 TFLOP/s):
 * sm_90 has no FP8 mma.sync, ptxas emulates m16n8k32 e4m3 by converting to FP16 MMAs, which is cheap with the
 * few tokens an expert has at decode but compute-bound with 64 rows. Kept opt-in and tested, the base for a
 * wgmma version. */
int cu_fp8_own = 2, cu_fp8_own_max_m = 65535;

/* moe_rows_fp8_kernel's result with a warp a 128-column block (4 values a lane, one 16-byte load, the
 * maximum by shuffles: no shared memory, no block barrier), 8 blocks a CTA, codes by the conversion unit:
 * the same codes and scales, at the bandwidth for large M (the software encoder and a block of 128 threads
 * per 128 values made it ~0.9 TB/s: 140 us of fp32 input at 4096 x 7168). */
__global__ void rows_fp8_warp_kernel(unsigned char *q, float *s, const float *x, const int32_t *rows, int M, int K, int nr,
                                     int mt) {
    cu_pdl_trigger();   /* (launched with PDL only under CU_F8_PDL) the GEMM after may start loading its weights */
    cu_pdl_wait();
    int LK = K / 128;
    size_t blk = (size_t)blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (blk >= (size_t)M * LK) return;
    size_t i = blk / LK, b = blk % LK, off = i * K + b * 128 + 4 * lane;
    float4 v = *(const float4 *)(x + (rows ? gather_row(rows, i, nr, mt) * K + b * 128 + 4 * lane : off));
    float a = cu_warp_max(fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
    float scale = fmaxf(a, 1e-4f) / 448.0f;
    uchar4 c = make_uchar4(cu_f32_to_fp8_hw(v.x / scale), cu_f32_to_fp8_hw(v.y / scale), cu_f32_to_fp8_hw(v.z / scale),
                           cu_f32_to_fp8_hw(v.w / scale));
    *(uchar4 *)(q + off) = c;
    if (lane == 0) s[i * LK + b] = scale;
}

void cu_rows_fp8_f32(unsigned char *q, float *s, const float *x, int M, int K) { cu_rows_fp8_gather(q, s, x, NULL, M, K); }

/* rows_fp8_warp_kernel over M rows of K (x 16-byte aligned), rows past nr as gather_row maps them */
static void rows_fp8_warp(unsigned char *q, float *s, const float *x, const int32_t *rows, int M, int K, int nr, int mt) {
    size_t blocks = ((size_t)M * (K / 128) + 7) / 8;
    cu_launch_pdl(CU_F8_PDL, rows_fp8_warp_kernel, dim3((unsigned)blocks), dim3(256), 0, q, s, x, rows, M, K, nr, mt);
}

void cu_rows_fp8_gather(unsigned char *q, float *s, const float *x, const int32_t *rows, int M, int K) {
    if (((uintptr_t)x & 15) == 0) {
        rows_fp8_warp(q, s, x, rows, M, K, M, 1);
    } else {
        moe_rows_fp8_kernel<float><<<dim3((unsigned)(K / 128), (unsigned)M), 128, 0, cu_stream>>>(q, s, x, rows, K);
    }
    CUDA_LAUNCH_CHECK();
}

void cu_rows_bf16_gather(void *dst, const float *src, const int32_t *rows, int M, int D) {
    moe_rows_bf16_kernel<<<M, 256, 0, cu_stream>>>((__nv_bfloat16 *)dst, src, rows, D, M, 1);
    CUDA_LAUNCH_CHECK();
}

int cu_rows_gather_sh(void *dst, float *s, const float *x, const int32_t *rows, int nr, int mt, int M, int K, int fp8) {
    if (!rows || nr < 0 || nr > M || mt < 1 || (fp8 && (((uintptr_t)x & 15) || K % 128))) return 0;
    if (fp8) rows_fp8_warp((unsigned char *)dst, s, x, rows, M, K, nr, mt);
    else moe_rows_bf16_kernel<<<M, 256, 0, cu_stream>>>((__nv_bfloat16 *)dst, x, rows, K, nr, mt);
    CUDA_LAUNCH_CHECK();
    return 1;
}

/* rows_fp8_warp_kernel for BF16 rows (the decode experts' down input, x [M, K] 8-byte aligned): a warp a 128-column
 * block, 4 values a lane from one 8-byte load, the block's maximum by shuffles, codes by the conversion unit: the codes
 * and scales of moe_rows_fp8_kernel<__nv_bfloat16>, which spends a block of 128 threads, a shared-memory round and a
 * barrier on each 128 values (17 us a layer at 1536 rows x 1408 in ncu, V2-Lite FP8 batch 256: RESULTS seventeenth
 * session). Grid ceil(M K / 128 / 8), 256 threads.
 * late 0: the block lets a PDL launch after it (the experts' down, DSINFER_CUDA_MOE_WG_PDL) start as it starts; 1
 * (DSINFER_CUDA_QUANT_WARP=2): after its stores, so the dependent's blocks queue for SMs only as this grid drains (the
 * twenty-fourth session's first hypothesis for FP8's loss with PDL: KERNELS.md). */
__global__ void rows_fp8_bf16_warp_kernel(unsigned char *q, float *s, const __nv_bfloat16 *x, int M, int K, int late) {
    if (!late) cu_pdl_trigger();
    cu_pdl_wait();
    int LK = K / 128;
    size_t blk = (size_t)blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (blk >= (size_t)M * LK) {
        if (late) cu_pdl_trigger();
        return;
    }
    size_t i = blk / LK, b = blk % LK, off = i * K + b * 128 + 4 * lane;
    uint2 raw = *(const uint2 *)(x + off);
    float v[4] = {__uint_as_float(raw.x << 16), __uint_as_float(raw.x & 0xffff0000u), __uint_as_float(raw.y << 16),
                  __uint_as_float(raw.y & 0xffff0000u)};
    float a = cu_warp_max(fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3]))));
    float scale = fmaxf(a, 1e-4f) / 448.0f;
    *(uchar4 *)(q + off) = make_uchar4(cu_f32_to_fp8_hw(v[0] / scale), cu_f32_to_fp8_hw(v[1] / scale),
                                       cu_f32_to_fp8_hw(v[2] / scale), cu_f32_to_fp8_hw(v[3] / scale));
    if (lane == 0) s[i * LK + b] = scale;
    if (late) cu_pdl_trigger();
}

void cu_rows_fp8_bf16(unsigned char *q, float *s, const void *x, int M, int K, int warp) {
    if (warp && ((uintptr_t)x & 7) == 0 && K % 128 == 0) {
        size_t blocks = ((size_t)M * (K / 128) + 7) / 8;
        if (blocks)
            rows_fp8_bf16_warp_kernel<<<(unsigned)blocks, 256, 0, cu_stream>>>(q, s, (const __nv_bfloat16 *)x, M, K, warp == 2);
    } else {
        moe_rows_fp8_kernel<__nv_bfloat16><<<dim3((unsigned)(K / 128), (unsigned)M), 128, 0, cu_stream>>>(q, s, (const __nv_bfloat16 *)x,
                                                                                                        NULL, K);
    }
    CUDA_LAUNCH_CHECK();
}

/* f8_reduce_kernel four values a thread (n % 4 == 0, 16-byte aligned): the same additions in the same order, a
 * quarter of the instructions and four times the bytes in flight a thread */
__global__ void f8_reduce4_kernel(float4 *out, const float4 *part, size_t n4, int KS) {
    cu_pdl_trigger();
    cu_pdl_wait();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        float4 v = part[i];
        for (int z = 1; z < KS; z++) {
            float4 p = part[(size_t)z * n4 + i];
            v.x += p.x; v.y += p.y; v.z += p.z; v.w += p.w;
        }
        out[i] = v;
    }
}

int cu_f8_reduce_vec = 0;   /* DSINFER_CUDA_F8_REDUCE_VEC (backend creation) */
int cu_f8_reduce2 = 1;      /* DSINFER_CUDA_F8_REDUCE2 (backend creation) */

/* f8_reduce_kernel over two outputs in one launch (a linear2's two weights): index i < n1 is out1's, the rest out2's;
 * each value the same additions in the same order (the same bits as two launches) */
__global__ void f8_reduce2_kernel(float *out1, const float *p1, size_t n1, float *out2, const float *p2, size_t n2, int KS) {
    cu_pdl_trigger();
    cu_pdl_wait();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n1 + n2; i += (size_t)gridDim.x * blockDim.x) {
        int two = i >= n1;
        size_t j = two ? i - n1 : i, n = two ? n2 : n1;
        const float *part = two ? p2 : p1;
        float v = part[j];
        for (int z = 1; z < KS; z++) v += part[(size_t)z * n + j];
        (two ? out2 : out1)[j] = v;
    }
}

void cu_f8_reduce_two(float *out1, const float *p1, size_t n1, float *out2, const float *p2, size_t n2, int ks) {
    if (!cu_f8_reduce2 || cu_f8_reduce_vec) {
        cu_f8_reduce(out1, p1, n1, ks);
        cu_f8_reduce(out2, p2, n2, ks);
        return;
    }
    size_t blocks = cu_blocks(n1 + n2, 256);
    cu_launch_pdl(CU_F8_PDL, f8_reduce2_kernel, dim3((unsigned)(blocks < 4096 ? blocks : 4096)), dim3(256), 0, out1, p1, n1, out2,
                  p2, n2, ks);
    CUDA_LAUNCH_CHECK();
}

void cu_f8_reduce(float *out, const float *part, size_t n, int ks) {
    if (cu_f8_reduce_vec && n % 4 == 0 && ((uintptr_t)out & 15) == 0 && ((uintptr_t)part & 15) == 0) {
        size_t blocks = cu_blocks(n / 4, 256);
        cu_launch_pdl(CU_F8_PDL, f8_reduce4_kernel, dim3((unsigned)(blocks < 4096 ? blocks : 4096)), dim3(256), 0, (float4 *)out,
                      (const float4 *)part, n / 4, ks);
        CUDA_LAUNCH_CHECK();
        return;
    }
    size_t blocks = cu_blocks(n, 256);
    cu_launch_pdl(CU_F8_PDL, f8_reduce_kernel, dim3((unsigned)(blocks < 4096 ? blocks : 4096)), dim3(256), 0, out, part, n, ks);
    CUDA_LAUNCH_CHECK();
}

/* moe_f8_kernel as one weight's W8A8 linear (ONE), TOK tokens a block, the conversions per CVT */
template <int TOK, bool CVT>
static void f8_one(dim3 grid, float *part, const unsigned char *q, const float *qs, int N, int K, cu_wview v, int M, int kc) {
    moe_f8_kernel<false, 4, TOK, true, CVT><<<grid, MT_WARPS * 32, m2_smem_bytes(false, 4, TOK), cu_stream>>>(
        part, N, q, qs, NULL, NULL, NULL, N, K, v, M, kc);
}

int cu_f8_wgmma_pair_ok(const ds_weight *w1, const ds_weight *w2, int M) {
    const ds_weight *w[2] = {w1, w2};
    for (int i = 0; i < 2; i++)
        if (!cu_fp8_gemm_ok(w[i]) || w[i]->cols % 128) return 0;
    /* cu_linear_fp8 -> cu_f8_linear's choice below: own = 2 up to its rows, not the moe_wg dense form */
    return w1->cols == w2->cols && cu_fp8_own == 2 && M >= 1 && M <= 65535 && M <= cu_fp8_own_max_m && M > cu_f8_wg_max_m;
}

/* ... and of those, the cp.async kernel's sizes (at most 64 rows) */
int cu_f8_wgmma_two_ok(const ds_weight *w1, const ds_weight *w2, int M) { return M <= 64 && cu_f8_wgmma_pair_ok(w1, w2, M); }

int cu_f8_linear(ds_cuda_backend *cb, float *out, const float *x, const ds_weight *w, int M) {
    int N = w->rows, K = w->cols;
    if (!cu_fp8_own || M < 1 || M > cu_fp8_own_max_m || w->dtype != DS_DTYPE_F8_E4M3 || !w->scale || K % 128) return 0;
    if (cu_fp8_own == 2 && cu_f8_wg_linear(cb, out, x, w, M)) return 1;   /* the weight as wgmma's M (cuda_moe_wg.cu) */
    if (cu_fp8_own == 2) {   /* wgmma (cuda_fp8_wgmma.cu) */
        cu_f8_wgmma_linear(cb, out, x, w, M);
        return 1;
    }
    int tok = M <= 32 ? 32 : 64, mb = (M + tok - 1) / tok, nb = (N + M2_ROWS - 1) / M2_ROWS, nkb = K / 128;
    /* split K until the grid fills two blocks an SM, at least 4 stages (512 columns) a split */
    int ks = (2 * cb->n_sm + mb * nb - 1) / (mb * nb), max_ks = nkb / 4 > 0 ? nkb / 4 : 1;
    if (ks > max_ks) ks = max_ks;
    if (ks < 1) ks = 1;
    int kc = (nkb + ks - 1) / ks * 128;
    ks = (K + kc - 1) / kc;
    size_t qb = ((size_t)M * K + 255) / 256 * 256, sb = ((size_t)M * nkb * 4 + 255) / 256 * 256;
    size_t pb = ks > 1 ? (size_t)ks * M * N * 4 : 0;
    char *ws = (char *)cu_ws_get(&cb->ws_fp8, qb + sb + pb);
    unsigned char *q = (unsigned char *)ws;
    float *qs = (float *)(ws + qb), *part = ks > 1 ? (float *)(ws + qb + sb) : out;
    cu_rows_fp8_f32(q, qs, x, M, K);
    dim3 grid((unsigned)mb, (unsigned)nb, (unsigned)ks);
    cu_wview v = cu_view(w);
    if (tok == 32) (cu_moe_f8_cvt ? f8_one<32, true> : f8_one<32, false>)(grid, part, q, qs, N, K, v, M, kc);
    else (cu_moe_f8_cvt ? f8_one<64, true> : f8_one<64, false>)(grid, part, q, qs, N, K, v, M, kc);
    CUDA_LAUNCH_CHECK();
    if (ks > 1) cu_f8_reduce(out, part, (size_t)M * N, ks);
    return 1;
}

template <int TOK, bool CVT>
static void f8_pair(float *y, __nv_bfloat16 *inter, unsigned char *q, float *qs, const int32_t *off, int n_rows, int E,
                    int D, int I, const cu_wview *tab) {
    dim3 g1((unsigned)((I + M2_ROWS - 1) / M2_ROWS), (unsigned)E), g2((unsigned)((D + M2_ROWS - 1) / M2_ROWS), (unsigned)E);
    moe_f8_kernel<true, 4, TOK, false, CVT><<<g1, MT_WARPS * 32, m2_smem_bytes(true, 4, TOK), cu_stream>>>(inter, I, q, qs, off, tab,
                                                                                                    tab + E, I, D, cu_wview{}, 0, D);
    CUDA_LAUNCH_CHECK();
    /* the gathered rows' codes are done with: the down projection's input quantized over them */
    unsigned char *iq = q;
    float *is = (float *)(iq + (size_t)n_rows * I);
    cu_rows_fp8_bf16(iq, is, inter, n_rows, I, 0);
    moe_f8_kernel<false, 4, TOK, false, CVT><<<g2, MT_WARPS * 32, m2_smem_bytes(false, 4, TOK), cu_stream>>>(y, D, iq, is, off,
                                                                                                     tab + 2 * E, NULL, D, I,
                                                                                                     cu_wview{}, 0, I);
    CUDA_LAUNCH_CHECK();
}

/* the W8A8 form fits: FP8 weights with block scales, D and I multiples of 128, and the down projection's
 * codes and scales (n_rows x I x 33/32 bytes) fit where the gathered rows' BF16 would be (n_rows x D x 2) */
static int f8_fits(const cu_wview *gate, int D, int I) {
    return cu_moe_w8a8 && gate->dtype == DS_DTYPE_F8_E4M3 && gate->scale && D % 128 == 0 && I % 128 == 0 &&
           (size_t)I * 33 / 32 <= (size_t)D * 2;
}

int cu_moe_tg = 0;   /* DSINFER_CUDA_MOE_TG (read at backend creation) */

int cu_moe_tc_fits(const cu_wview *gate, const cu_wview *down) {
    const cu_wview *v[2] = {gate, down};
    for (int i = 0; i < 2; i++) {
        if (v[i]->dtype == DS_DTYPE_BF16 && !v[i]->scale && v[i]->cols % 32 == 0) continue;
        if (v[i]->dtype == DS_DTYPE_F8_E4M3 && v[i]->scale && v[i]->cols % 128 == 0) continue;
        if (v[i]->dtype == DS_DTYPE_NVFP4 && v[i]->bscale && v[i]->cols % 32 == 0) continue;
        return 0;
    }
    return gate->dtype == down->dtype;
}

/* The routed experts for n_rows = M * K sorted rows: xs_ws holds BF16 [n_rows, D] (the gathered
 * tokens) then BF16 [n_rows, I] (the down projection's input); y: fp32 [n_rows, D]. */
void cu_moe_tc(float *y, const float *x, const int32_t *rows, const int32_t *off, int n_rows, int E, int D, int I,
               const cu_wview *tab, const cu_wview *gate, void *xs_ws) {
    __nv_bfloat16 *xs = (__nv_bfloat16 *)xs_ws, *inter = xs + (size_t)n_rows * D;
    int mean = (n_rows + E - 1) / E;
    if (f8_fits(gate, D, I)) {   /* W8A8: the gathered rows as codes + scales where their BF16 would be */
        unsigned char *q = (unsigned char *)xs_ws;
        float *qs = (float *)(q + (size_t)n_rows * D);
        moe_rows_fp8_kernel<float><<<dim3((unsigned)(D / 128), (unsigned)n_rows), 128, 0, cu_stream>>>(q, qs, x, rows, D);
        CUDA_LAUNCH_CHECK();
        int tok = cu_moe_tc2_tok ? cu_moe_tc2_tok : mean <= 16 ? 32 : 64;
        if (tok == 64) (cu_moe_f8_cvt ? f8_pair<64, true> : f8_pair<64, false>)(y, inter, q, qs, off, n_rows, E, D, I, tab);
        else (cu_moe_f8_cvt ? f8_pair<32, true> : f8_pair<32, false>)(y, inter, q, qs, off, n_rows, E, D, I, tab);
        return;
    }
    cu_rows_bf16_gather(xs, x, rows, n_rows, D);
    dim3 g1((unsigned)((I + 16 * MT_WARPS - 1) / (16 * MT_WARPS)), (unsigned)E);
    dim3 g2((unsigned)((D + 16 * MT_WARPS - 1) / (16 * MT_WARPS)), (unsigned)E);
    /* token groups a pass from the mean rows per expert (DSINFER_CUDA_MOE_TG: 1, 2 or 4 fixed, 0 auto) */
    int tg = cu_moe_tg ? cu_moe_tg : mean <= 8 ? 1 : mean <= 16 ? 2 : MT_TG;
#define MT_PAIR_TG(WT, TG)                                                                                               \
    do {                                                                                                                 \
        moe_tc_kernel<WT, true, TG><<<g1, MT_WARPS * 32, 0, cu_stream>>>(inter, I, xs, D, off, tab, tab + E, I, D, 0, *gate); \
        CUDA_LAUNCH_CHECK();                                                                                             \
        moe_tc_kernel<WT, false, TG><<<g2, MT_WARPS * 32, 0, cu_stream>>>(y, D, inter, I, off, tab + 2 * E, NULL, D, I, 0, *gate); \
        CUDA_LAUNCH_CHECK();                                                                                             \
    } while (0)
#define MT_PAIR(WT)                                                                                                      \
    do {                                                                                                                 \
        if (tg == 1) MT_PAIR_TG(WT, 1);                                                                                  \
        else if (tg == 2) MT_PAIR_TG(WT, 2);                                                                             \
        else MT_PAIR_TG(WT, MT_TG);                                                                                      \
    } while (0)
    /* v2 for BF16 weights (measured against v1, bench/RESULTS.md sixth session: decode batch 64 +8%, 256
     * +12%; prefill 256 / 512 tokens +30% / +42% with 64 tokens a pass, where 32 a pass was 21% slower) */
    if (gate->dtype == DS_DTYPE_BF16 && cu_moe_tc2) m2_run(y, inter, xs, off, E, D, I, tab, mean);
    else if (gate->dtype == DS_DTYPE_F8_E4M3 && cu_fp8_fast) MT_PAIR(MT_FP8F);
    else if (gate->dtype == DS_DTYPE_F8_E4M3) MT_PAIR(MT_FP8);
    else if (gate->dtype == DS_DTYPE_NVFP4) MT_PAIR(MT_NVFP4);
    else MT_PAIR(MT_BF16);
#undef MT_PAIR
#undef MT_PAIR_TG
}

int cu_skinny_tc_fits(const cu_wview *w) {
    return (w->dtype == DS_DTYPE_F8_E4M3 && w->scale && w->cols % 128 == 0) ||
           (w->dtype == DS_DTYPE_NVFP4 && w->bscale && w->cols % 32 == 0);
}

/* out[M, N] (fp32, ld N) = x[M, K] (fp32) W^T for an FP8 or NVFP4 weight, W read in place and decoded in
 * registers (no BF16 copy of it): x rounded to BF16 into xs_ws ([M, K] BF16), then the kernel above with
 * one weight. */
void cu_skinny_tc(float *out, const float *x, int M, const cu_wview *w, void *xs_ws) {
    __nv_bfloat16 *xs = (__nv_bfloat16 *)xs_ws;
    int N = w->rows, K = w->cols;
    moe_rows_bf16_kernel<<<M, 256, 0, cu_stream>>>(xs, x, NULL, K, M, 1);
    CUDA_LAUNCH_CHECK();
    dim3 grid((unsigned)((M + 8 * MT_TG - 1) / (8 * MT_TG)), 1, (unsigned)((N + 16 * MT_WARPS - 1) / (16 * MT_WARPS)));
    if (w->dtype == DS_DTYPE_NVFP4)
        moe_tc_kernel<MT_NVFP4, false, MT_TG><<<grid, MT_WARPS * 32, 0, cu_stream>>>(out, N, xs, K, NULL, NULL, NULL, N, K, M, *w);
    else if (cu_fp8_fast)
        moe_tc_kernel<MT_FP8F, false, MT_TG><<<grid, MT_WARPS * 32, 0, cu_stream>>>(out, N, xs, K, NULL, NULL, NULL, N, K, M, *w);
    else
        moe_tc_kernel<MT_FP8, false, MT_TG><<<grid, MT_WARPS * 32, 0, cu_stream>>>(out, N, xs, K, NULL, NULL, NULL, N, K, M, *w);
    CUDA_LAUNCH_CHECK();
}
