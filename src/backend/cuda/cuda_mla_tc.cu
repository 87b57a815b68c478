/* MLA decode attention on the tensor cores (issue 7, 9): the absorbed form over the paged latent cache,
 * mma.sync m16n8k16 BF16 with fp32 accumulation, for the DeepSeek widths (kv_lora_rank 512, rope 64).
 *
 * The contract is mla_decode_kernel's (cuda_attn.cu, fa_params): for list entry i (token m), head h and
 * split s, write the unnormalised o_lat partial part[i, s, h, 0:C] = sum_j exp(l_j - max) v_j and
 * ml[i, s, h] = (max, sum exp(l_j - max)) over the split's context rows j, where l_j = scale * (q_lat .
 * c_j + q_pe . k_pe_j); mla_combine_kernel merges the splits. What differs is the arithmetic: q, the
 * cache rows and the probabilities are rounded to BF16 before the products (the cache dequantised first,
 * so an FP8 cache costs one rounding more), sums stay fp32. The op test compares it with the fp32 CPU op
 * at a bf16-level threshold (THR_TC), not the exact one.
 *
 * One block = (entry i, split s, 16 heads), 8 warps. Per 64-row tile of the split's context:
 *   stage:  the rows (fp32 or the FP8 layout, 16-byte loads) -> BF16 tile Ks [64][576] in shared memory,
 *           rows past the context zeroed (unused pages may hold NaN, and 0 * NaN is NaN);
 *   scores: warp w: S[16 heads][8 rows 8w..8w+7] = Q Ks^T over k = 576 (36 MMAs);
 *   softmax: tile max per head across the warps (shared), running max / rescale as in FlashAttention-2,
 *           P = exp(S - max) in BF16 to shared memory;
 *   values: warp w: O[16 heads][128 columns (w & 3)] += P[:, rows of half w >> 2] V (2 x 16 MMAs).
 * The two halves' O are summed at the end. Two blocks fit on an SM (96 KB of shared memory each), so one
 * stages while the other multiplies.
 * Shared rows are 584 BF16 (1168 bytes = 292 words, 4 mod 32): ldmatrix's eight row addresses of one
 * 8x8 matrix fall in distinct banks. */
#include "backend/cuda/cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "backend/cuda/cuda_mma.h"
#include "backend/cuda/cuda_mla.h"

#define TC_TILE 64
#define TC_WARPS 8
#define TC_THREADS (32 * TC_WARPS)
#define TC_KS 584     /* Ks / Qs row stride in BF16 elements */
#define TC_PS 72      /* Ps row stride (36 words, 4 mod 32) */
#define TC_SMEM (sizeof(__nv_bfloat16) * (size_t)(TC_TILE * TC_KS + TC_HEADS * TC_KS + TC_HEADS * TC_PS) + \
                 sizeof(float) * TC_WARPS * TC_HEADS)

int cu_mla_tc_fits(const ds_config *c) { return c->kv_lora_rank == TC_C && c->qk_rope_head_dim == TC_DR; }

/* Rows base .. base + nc - 1 of the context into Ks (fp32 cache): warp w takes rows w + 8k, two at a
 * time, each lane 4-5 float4 of a row (144 per row), all loads issued before the conversions. */
__device__ __forceinline__ void stage_f32(const fa_params &p, const int32_t *pt, int base, int nc, __nv_bfloat16 *Ks,
                                          int warp, int lane) {
    for (int r0 = warp; r0 < TC_TILE; r0 += 2 * TC_WARPS) {
        float4 v[2][5];
#pragma unroll
        for (int rr = 0; rr < 2; rr++) {
            int r = r0 + rr * TC_WARPS;
            const float4 *row = r < nc ? (const float4 *)(const void *)entry_of(p, pt, base + r) : NULL;
#pragma unroll
            for (int k = 0; k < 5; k++) {
                int q = lane + 32 * k;
                v[rr][k] = row && q < TC_W / 4 ? __ldg(row + q) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
        }
#pragma unroll
        for (int rr = 0; rr < 2; rr++) {
            int r = r0 + rr * TC_WARPS;
#pragma unroll
            for (int k = 0; k < 5; k++) {
                int q = lane + 32 * k;
                if (q < TC_W / 4) {
                    uint2 u = make_uint2(cu_pack_bf16(v[rr][k].x, v[rr][k].y), cu_pack_bf16(v[rr][k].z, v[rr][k].w));
                    *(uint2 *)(Ks + r * TC_KS + 4 * q) = u;
                }
            }
        }
    }
}

/* The FP8 layout (656 bytes a row for C = 512, 16-byte aligned: fa_params.fp8_vec): lane L decodes the
 * codes 16L .. 16L+15 with their block's scale (the CPU's value: e4m3 * scale in fp32), lanes 0-7 copy
 * the BF16 k_pe as it is. Four rows at a time per warp. */
__device__ __forceinline__ void stage_fp8(const fa_params &p, const int32_t *pt, int base, int nc, __nv_bfloat16 *Ks,
                                          int warp, int lane) {
    for (int r0 = warp; r0 < TC_TILE; r0 += 4 * TC_WARPS) {
        uint4 code[4], pe[4];
        float sc[4];
#pragma unroll
        for (int rr = 0; rr < 4; rr++) {
            int r = r0 + rr * TC_WARPS;
            code[rr] = make_uint4(0, 0, 0, 0);
            pe[rr] = make_uint4(0, 0, 0, 0);
            sc[rr] = 0.0f;
            if (r < nc) {
                const unsigned char *e = entry_of(p, pt, base + r);
                code[rr] = __ldg((const uint4 *)(e + 16 * lane));
                sc[rr] = __ldg((const float *)(e + TC_C) + (lane >> 3));
                if (lane < 8) pe[rr] = __ldg((const uint4 *)(e + TC_C + 4 * (TC_C / 128)) + lane);
            }
        }
#pragma unroll
        for (int rr = 0; rr < 4; rr++) {
            int r = r0 + rr * TC_WARPS;
            uint32_t o[8];
            fp8x16_bf16(code[rr], sc[rr], o);
            uint4 *dst = (uint4 *)(Ks + r * TC_KS + 16 * lane);
            dst[0] = make_uint4(o[0], o[1], o[2], o[3]);
            dst[1] = make_uint4(o[4], o[5], o[6], o[7]);
            if (lane < 8) *(uint4 *)(Ks + r * TC_KS + TC_C + 8 * lane) = pe[rr];
        }
    }
}

/* Shared by both kernels (NT threads a block, NW warps). */

/* Q tile Qs [16][TC_KS]: q_lat then q_pe per head, BF16; heads past nh zero (mla_fetch_q, cuda_mla.h) */

template <int NT>
__device__ __forceinline__ void mla_load_q(const fa_params &p, __nv_bfloat16 *Qs, int i, int m, int h0, int nh) {
    constexpr int QV = MLA_QV, QN = (TC_HEADS * QV + NT - 1) / NT;
    float4 qv[QN];
    mla_fetch_q<NT>(p, qv, i, m, h0, nh);
#pragma unroll
    for (int u = 0; u < QN; u++) {
        int x = threadIdx.x + u * NT, hh = x / QV, k = 4 * (x % QV);
        if (x < TC_HEADS * QV)
            *(uint2 *)(Qs + hh * TC_KS + k) = make_uint2(cu_pack_bf16(qv[u].x, qv[u].y), cu_pack_bf16(qv[u].z, qv[u].w));
    }
}

/* the tile's score max of heads g (sc[0..1]) and g + 8 (sc[2..3]) over all warps' rows: a quad's by
 * shuffles, the warps' through red [NW][16] after a barrier; every thread gets both */
template <int NW>
__device__ __forceinline__ void mla_tile_max(const float sc[4], float *red, int warp, int g, int t, float *tm0, float *tm1) {
    float x0 = fmaxf(sc[0], sc[1]), x1 = fmaxf(sc[2], sc[3]);
    x0 = fmaxf(x0, __shfl_xor_sync(0xffffffffu, x0, 1));
    x0 = fmaxf(x0, __shfl_xor_sync(0xffffffffu, x0, 2));
    x1 = fmaxf(x1, __shfl_xor_sync(0xffffffffu, x1, 1));
    x1 = fmaxf(x1, __shfl_xor_sync(0xffffffffu, x1, 2));
    if (t == 0) {
        red[warp * TC_HEADS + g] = x0;
        red[warp * TC_HEADS + g + 8] = x1;
    }
    __syncthreads();
    *tm0 = -INFINITY;
    *tm1 = -INFINITY;
#pragma unroll
    for (int w = 0; w < NW; w++) {
        *tm0 = fmaxf(*tm0, red[w * TC_HEADS + g]);
        *tm1 = fmaxf(*tm1, red[w * TC_HEADS + g + 8]);
    }
}

int cu_mla_async = 0;   /* DSINFER_CUDA_MLA_ASYNC (read at backend creation) */

/* The BF16 layout by cp.async (DSINFER_CUDA_MLA_ASYNC=1, written in the fifth session after its device time
 * ran out: op-tested next session, then timed with `bench --mla --kv-cache-dtype bf16`): every 16-byte chunk
 * of the 64-row tile (64 x 72) issued at once, one wait. The register path below keeps 2 rows of a warp in
 * flight (18 KB a block), which at 2 blocks an SM is under what the H200 needs in flight (~32 KB an SM at
 * 4.2 TB/s and ~1 us): the BF16 cache ran at 29% of the copy bandwidth against the fp32 cache's 51%
 * (bench/RESULTS.md, session 3 run 9). Rows past the context are zero-filled (src-size 0). */
__device__ __forceinline__ void stage_bf16_async(const fa_params &p, const int32_t *pt, int base, int nc,
                                                 __nv_bfloat16 *Ks) {
    for (int x = threadIdx.x; x < TC_TILE * (TC_W / 8); x += TC_THREADS) {
        int r = x / (TC_W / 8), q = x % (TC_W / 8), ok = r < nc;
        const unsigned char *row = entry_of(p, pt, base + (ok ? r : 0));
        cu_cp_async16(Ks + r * TC_KS + 8 * q, row + 16 * q, ok ? 16 : 0);
    }
    cu_cp_async_commit();
    cu_cp_async_wait<0>();
}

/* The BF16 layout (1152 bytes a row): copied as it is, 72 x 16 bytes a row, two rows at a time per warp. */
__device__ __forceinline__ void stage_bf16(const fa_params &p, const int32_t *pt, int base, int nc, __nv_bfloat16 *Ks,
                                           int warp, int lane) {
    for (int r0 = warp; r0 < TC_TILE; r0 += 2 * TC_WARPS) {
        uint4 v[2][3];
#pragma unroll
        for (int rr = 0; rr < 2; rr++) {
            int r = r0 + rr * TC_WARPS;
            const uint4 *row = r < nc ? (const uint4 *)(const void *)entry_of(p, pt, base + r) : NULL;
#pragma unroll
            for (int k = 0; k < 3; k++) {
                int q = lane + 32 * k;
                v[rr][k] = row && q < TC_W / 8 ? __ldg(row + q) : make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int rr = 0; rr < 2; rr++)
#pragma unroll
            for (int k = 0; k < 3; k++) {
                int q = lane + 32 * k;
                if (q < TC_W / 8) *(uint4 *)(Ks + (r0 + rr * TC_WARPS) * TC_KS + 8 * q) = v[rr][k];
            }
    }
}

__global__ void __launch_bounds__(TC_THREADS, 2) mla_decode_tc_kernel(fa_params p) {
    extern __shared__ __align__(16) unsigned char tc_smem[];
    __nv_bfloat16 *Ks = (__nv_bfloat16 *)tc_smem, *Qs = Ks + TC_TILE * TC_KS, *Ps = Qs + TC_HEADS * TC_KS;
    float *red = (float *)(Ps + TC_HEADS * TC_PS);   /* [TC_WARPS][TC_HEADS] */
    cu_pdl_trigger();
    cu_pdl_wait();
    const mla_work wk = mla_block_work(p, TC_HEADS, TC_TILE);
    const int h0 = wk.h0, i = wk.i, m = wk.m, c_begin = wk.c_begin, c_end = wk.c_end;
    const int32_t *pt = wk.pt;
    const size_t base_o = wk.base_o;
    int nh = p.H - h0 < TC_HEADS ? p.H - h0 : TC_HEADS;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    if (c_begin >= c_end) {
        mla_empty_split(p, base_o, nh);
        return;
    }

    mla_load_q<TC_THREADS>(p, Qs, i, m, h0, nh);
    /* ldmatrix addresses: A operands (16 rows) and the x4 B loads (8 rows, 4 column blocks / 2 row blocks) */
    const int a_row = (lane & 7) + 8 * ((lane >> 3) & 1), a_col = 8 * (lane >> 4);
    const int n0 = 8 * warp, slice = warp & 3, half = warp >> 2;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;   /* heads g, g + 8 */
    float o[16][4];
#pragma unroll
    for (int n = 0; n < 16; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

    for (int base = c_begin; base < c_end; base += TC_TILE) {
        int nc = c_end - base < TC_TILE ? c_end - base : TC_TILE;
        __syncthreads();   /* the previous tile's readers are done (and the Q tile is written) */
        if (p.kv_fp8) stage_fp8(p, pt, base, nc, Ks, warp, lane);
        else if (p.kv_layout == CU_KV_BF16 && p.bf16_async) stage_bf16_async(p, pt, base, nc, Ks);
        else if (p.kv_layout == CU_KV_BF16) stage_bf16(p, pt, base, nc, Ks, warp, lane);
        else stage_f32(p, pt, base, nc, Ks, warp, lane);
        __syncthreads();

        /* scores of rows n0 .. n0 + 7: sc[0..1] head g, rows n0 + 2t, +1; sc[2..3] head g + 8 */
        float sc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 6
        for (int k0 = 0; k0 < TC_W; k0 += 32) {
            uint32_t a[4], a2[4], b[4];
            cu_ldsm_x4(a, Qs + a_row * TC_KS + k0 + a_col);
            cu_ldsm_x4(a2, Qs + a_row * TC_KS + k0 + 16 + a_col);
            cu_ldsm_x4(b, Ks + (n0 + (lane & 7)) * TC_KS + k0 + 8 * (lane >> 3));
            cu_mma_bf16(sc, a, b[0], b[1]);
            cu_mma_bf16(sc, a2, b[2], b[3]);
        }
        int j = n0 + 2 * t;
        sc[0] = j < nc ? sc[0] * p.scale : -INFINITY;
        sc[1] = j + 1 < nc ? sc[1] * p.scale : -INFINITY;
        sc[2] = j < nc ? sc[2] * p.scale : -INFINITY;
        sc[3] = j + 1 < nc ? sc[3] * p.scale : -INFINITY;
        float tm0, tm1;
        mla_tile_max<TC_WARPS>(sc, red, warp, g, t, &tm0, &tm1);
        float nm0 = fmaxf(m0, tm0), nm1 = fmaxf(m1, tm1);
        /* a head with no finite score yet keeps factor 1 and probabilities 0 (its sums are still 0) */
        float cr0 = nm0 == -INFINITY ? 1.0f : expf(m0 - nm0), cr1 = nm1 == -INFINITY ? 1.0f : expf(m1 - nm1);
        __nv_bfloat162 p0 = __floats2bfloat162_rn(nm0 == -INFINITY ? 0.0f : expf(sc[0] - nm0),
                                                  nm0 == -INFINITY ? 0.0f : expf(sc[1] - nm0));
        __nv_bfloat162 p1 = __floats2bfloat162_rn(nm1 == -INFINITY ? 0.0f : expf(sc[2] - nm1),
                                                  nm1 == -INFINITY ? 0.0f : expf(sc[3] - nm1));
        /* the sums add the BF16 probabilities the products use */
        l0 = l0 * cr0 + __low2float(p0) + __high2float(p0);
        l1 = l1 * cr1 + __low2float(p1) + __high2float(p1);
        m0 = nm0;
        m1 = nm1;
        *(__nv_bfloat162 *)(Ps + g * TC_PS + j) = p0;
        *(__nv_bfloat162 *)(Ps + (g + 8) * TC_PS + j) = p1;
        __syncthreads();

        /* O[:, slice] += P[:, half's 32 rows] V[those rows, slice's 128 columns] */
#pragma unroll
        for (int n = 0; n < 16; n++) {
            o[n][0] *= cr0; o[n][1] *= cr0;
            o[n][2] *= cr1; o[n][3] *= cr1;
        }
#pragma unroll
        for (int kk = 0; kk < 2; kk++) {
            int tk = 32 * half + 16 * kk;
            uint32_t a[4];
            cu_ldsm_x4(a, Ps + a_row * TC_PS + tk + a_col);
#pragma unroll
            for (int n = 0; n < 16; n += 2) {
                uint32_t b[4];
                cu_ldsm_x4_trans(b, Ks + (tk + a_row) * TC_KS + 128 * slice + 8 * n + a_col);
                cu_mma_bf16(o[n], a, b[0], b[1]);
                cu_mma_bf16(o[n + 1], a, b[2], b[3]);
            }
        }
    }

    /* the halves' O summed through shared memory (Ks reused as fp32 [16][512]); sums over t and warps */
    __syncthreads();
    float *xs = (float *)(void *)Ks;
    if (half == 1) {
#pragma unroll
        for (int n = 0; n < 16; n++) {
            int col = 128 * slice + 8 * n + 2 * t;
            xs[g * TC_C + col] = o[n][0];
            xs[g * TC_C + col + 1] = o[n][1];
            xs[(g + 8) * TC_C + col] = o[n][2];
            xs[(g + 8) * TC_C + col + 1] = o[n][3];
        }
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    if (t == 0) {
        red[warp * TC_HEADS + g] = l0;
        red[warp * TC_HEADS + g + 8] = l1;
    }
    __syncthreads();
    if (half == 0) {
#pragma unroll
        for (int n = 0; n < 16; n++) {
            int col = 128 * slice + 8 * n + 2 * t;
            if (g < nh) {
                float *dst = p.part + (base_o + g) * TC_C + col;
                dst[0] = o[n][0] + xs[g * TC_C + col];
                dst[1] = o[n][1] + xs[g * TC_C + col + 1];
            }
            if (g + 8 < nh) {
                float *dst = p.part + (base_o + g + 8) * TC_C + col;
                dst[0] = o[n][2] + xs[(g + 8) * TC_C + col];
                dst[1] = o[n][3] + xs[(g + 8) * TC_C + col + 1];
            }
        }
    }
    if (warp == 0 && t == 0) {
        float s0 = 0.0f, s1 = 0.0f;
        for (int w = 0; w < TC_WARPS; w++) {
            s0 += red[w * TC_HEADS + g];
            s1 += red[w * TC_HEADS + g + 8];
        }
        if (g < nh) {
            p.ml[(base_o + g) * 2] = m0;
            p.ml[(base_o + g) * 2 + 1] = s0;
        }
        if (g + 8 < nh) {
            p.ml[(base_o + g + 8) * 2] = m1;
            p.ml[(base_o + g + 8) * 2 + 1] = s1;
        }
    }
}

/* ---- v2 (DSINFER_CUDA_MLA_TC2, default 1): the BF16 cache, rows by cp.async into a two-tile ring ------
 *
 * v1 keeps one tile buffer: stage, barrier, multiply, so a block's loads and its MMAs never overlap (and its
 * register staging has four load round trips a tile): the BF16 cache ran at 50% of the copy bandwidth in the
 * kernel alone. v2, for the BF16 layout (the rows are the MMA's operand type already, no conversion): one
 * block = (entry i, split s, 16 heads), 4 warps, 32-row tiles in a ring of two in shared memory filled by
 * cp.async (16 bytes a copy, no registers): tile k+1 is in flight while tile k multiplies. Per tile:
 *   wait for tile k, barrier (every warp is also done with tile k-1, whose buffer tile k+1 now takes);
 *   issue tile k+1: warp w copies rows 8w..8w+7; lanes 0-7 look up the eight rows' addresses (page
 *           table) and pass them by shuffle, so a copy costs no address arithmetic (a lookup per copy, 18
 *           a thread, was most of the instructions of the first cut: 55% of the bandwidth, KERNELS.md);
 *   scores: warp w: S[16 heads][rows 8w..8w+7] = Q Ks^T over k = 576, four accumulator chains (9 MMAs
 *           each instead of one of 36), each step's fragments loaded one step ahead;
 *   softmax: the tile max per head across the 4 warps (shared), FlashAttention-2 rescale, P in BF16 to
 *           shared memory, barrier (each lane exponentiates 4 scores: the softmax is not repeated per warp,
 *           which cost more than it saved in a variant with 8 warps and one block an SM, KERNELS.md);
 *   values: warp w: O[16 heads][columns 128w..128w+127] += P V over the tile's 32 rows (2 x 16 MMAs).
 * Shared memory 92.75 KB, two blocks an SM: two tiles (75 KB) in flight an SM while both multiply. Same
 * contract and rounding as v1 (q, rows and P in BF16, fp32 sums), so the same op-test threshold; the
 * arithmetic differs only in the order of the fp32 additions of the scores. */
#define T2_TILE 32
#define T2_WARPS 4
#define T2_THREADS (32 * T2_WARPS)
#define T2_ST 2
#define T2_PS 40      /* Ps row stride (20 words: ldmatrix's 8 row addresses in distinct 4-word bank groups) */
#define T2_SMEM (sizeof(__nv_bfloat16) * (size_t)(T2_ST * T2_TILE * TC_KS + TC_HEADS * TC_KS + TC_HEADS * T2_PS) + \
                 sizeof(float) * T2_WARPS * TC_HEADS)
/* the FP8 cache: a ring of raw 656-byte entries (cp.async), one BF16 tile they are decoded into */
#define T2_E8 (TC_C + 4 * (TC_C / 128) + 2 * TC_DR)
#define T2_SMEM8 ((size_t)T2_ST * T2_TILE * T2_E8 + \
                  sizeof(__nv_bfloat16) * (size_t)(T2_TILE * TC_KS + TC_HEADS * TC_KS + TC_HEADS * T2_PS) + \
                  sizeof(float) * T2_WARPS * TC_HEADS)

int cu_mla_tc2 = 1;   /* DSINFER_CUDA_MLA_TC2 (read at backend creation) */
int cu_mla_qreg = 36;   /* DSINFER_CUDA_MLA_QREG: 36 (all of Q in registers), 18 or 0 */
int cu_mla_tc2_fp8 = 2;   /* DSINFER_CUDA_MLA_TC2_FP8 (read at backend creation): 0 v1, 1 v2 (BF16 decode), 2 v3 (raw rows) */

static int tc2_on(int kv_layout) {
    return cu_mla_tc2 && (kv_layout == CU_KV_BF16 || (kv_layout == CU_KV_FP8 && cu_mla_tc2_fp8));
}

/* rows base + 8w .. base + 8w + 7 of the context into Ks (warp w; rows at or past nc zero-filled: unused
 * pages may hold NaN, and 0 * NaN is NaN) */
__device__ __forceinline__ void t2_issue(const fa_params &p, const int32_t *pt, int base, int nc, __nv_bfloat16 *Ks,
                                         int warp, int lane) {
    int r = 8 * warp + (lane & 7);
    const unsigned char *mine = entry_of(p, pt, base + (r < nc ? r : 0));
#pragma unroll
    for (int rr = 0; rr < 8; rr++) {
        int row = 8 * warp + rr, bytes = row < nc ? 16 : 0;
        const unsigned char *src = (const unsigned char *)__shfl_sync(0xffffffffu, (unsigned long long)mine, rr);
        __nv_bfloat16 *dst = Ks + row * TC_KS;
        cu_cp_async16(dst + 8 * lane, src + 16 * lane, bytes);
        cu_cp_async16(dst + 8 * (lane + 32), src + 16 * (lane + 32), bytes);
        if (lane < TC_W / 8 - 64) cu_cp_async16(dst + 8 * (lane + 64), src + 16 * (lane + 64), bytes);
    }
}

/* the FP8 cache's raw entries of rows base + 8w .. base + 8w + 7 into Raw [T2_TILE][T2_E8] (warp w; 41
 * 16-byte chunks a row; rows at or past nc zero-filled: zero codes and scales decode to 0, not NaN) */
__device__ __forceinline__ void t2_issue8(const fa_params &p, const int32_t *pt, int base, int nc, unsigned char *Raw,
                                          int warp, int lane) {
    int r = 8 * warp + (lane & 7);
    const unsigned char *mine = entry_of(p, pt, base + (r < nc ? r : 0));
#pragma unroll
    for (int rr = 0; rr < 8; rr++) {
        int row = 8 * warp + rr, bytes = row < nc ? 16 : 0;
        const unsigned char *src = (const unsigned char *)__shfl_sync(0xffffffffu, (unsigned long long)mine, rr);
        unsigned char *dst = Raw + row * T2_E8;
        cu_cp_async16(dst + 16 * lane, src + 16 * lane, bytes);
        if (lane < T2_E8 / 16 - 32) cu_cp_async16(dst + 16 * (lane + 32), src + 16 * (lane + 32), bytes);
    }
}

/* warp w's rows 8w .. 8w + 7 of Raw decoded into Ks as stage_fp8 does (lane L: codes 16L .. 16L + 15; lanes
 * 0-7 the BF16 k_pe) */
__device__ __forceinline__ void t2_decode8(const unsigned char *Raw, __nv_bfloat16 *Ks, int warp, int lane) {
#pragma unroll 4
    for (int rr = 0; rr < 8; rr++) {
        int row = 8 * warp + rr;
        const unsigned char *e = Raw + row * T2_E8;
        uint32_t o[8];
        fp8x16_bf16(*(const uint4 *)(e + 16 * lane), *(const float *)(e + TC_C + 4 * (lane >> 3)), o);
        uint4 *dst = (uint4 *)(Ks + row * TC_KS + 16 * lane);
        dst[0] = make_uint4(o[0], o[1], o[2], o[3]);
        dst[1] = make_uint4(o[4], o[5], o[6], o[7]);
        if (lane < 8) *(uint4 *)(Ks + row * TC_KS + TC_C + 8 * lane) = *(const uint4 *)(e + TC_C + 4 * (TC_C / 128) + 16 * lane);
    }
}

/* the split's (max, sum) of heads g, g + 8 from the kernels with T2_WARPS warps: the sums over t and warps */
__device__ __forceinline__ void t2_write_ml(const fa_params &p, float l0, float l1, float m0, float m1, float *red, size_t base_o,
                                            int nh, int warp, int g, int t) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    if (t == 0) {   /* every warp passed the last tile's P barrier: done reading red */
        red[warp * TC_HEADS + g] = l0;
        red[warp * TC_HEADS + g + 8] = l1;
    }
    __syncthreads();
    if (warp == 0 && t == 0) {
        float s0 = 0.0f, s1 = 0.0f;
        for (int w = 0; w < T2_WARPS; w++) {
            s0 += red[w * TC_HEADS + g];
            s1 += red[w * TC_HEADS + g + 8];
        }
        if (g < nh) {
            p.ml[(base_o + g) * 2] = m0;
            p.ml[(base_o + g) * 2 + 1] = s0;
        }
        if (g + 8 < nh) {
            p.ml[(base_o + g + 8) * 2] = m1;
            p.ml[(base_o + g + 8) * 2 + 1] = s1;
        }
    }
}

/* the split's partials of the kernels with T2_WARPS warps: every warp holds whole columns of all 16 heads
 * (o[n]: columns 128w + 8n + 2t, +1 of heads g, g + 8), written as they are; then (max, sum) */
__device__ __forceinline__ void t2_write(const fa_params &p, const float o[16][4], float l0, float l1, float m0, float m1,
                                         float *red, size_t base_o, int nh, int warp, int g, int t) {
#pragma unroll
    for (int n = 0; n < 16; n++) {
        int col = 128 * warp + 8 * n + 2 * t;
        if (g < nh) *(float2 *)(p.part + (base_o + g) * TC_C + col) = make_float2(o[n][0], o[n][1]);
        if (g + 8 < nh) *(float2 *)(p.part + (base_o + g + 8) * TC_C + col) = make_float2(o[n][2], o[n][3]);
    }
    t2_write_ml(p, l0, l1, m0, m1, red, base_o, nh, warp, g, t);
}

/* The split combine folded into the decode (p.tickets; opt.mla_fold): every block of entry i's head group hg takes a
 * ticket after its partials are written; the group's last (of n_splits) merges the splits of its nh heads into olat / ob,
 * with mla_combine_v3_kernel's arithmetic in its order (mx the max of all S splits' m, the live prefix, den = sum of
 * exp(m_s - mx) l_s, a = sum of exp(m_s - mx) p_s over it, a / den): the same bits, and no combine launch. The other
 * blocks' partials are read from L2 (__ldcg). scratch: shared memory free by now, 2 x 16 x S + 16 floats. Every thread of
 * the block calls it. */
__device__ void t2_fold_combine(const fa_params &p, int i, int h0, int nh, float *scratch) {
    __shared__ int last;
    const int S = p.n_splits, H = p.H, HGn = (H + TC_HEADS - 1) / TC_HEADS;
    __threadfence();   /* this block's partials visible before its ticket */
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned *tk = p.tickets + (size_t)i * HGn + h0 / TC_HEADS;
        unsigned t = atomicAdd(tk, 1u);
        last = t == (unsigned)S - 1;
        if (last) *tk = 0;   /* every split of the group has taken its ticket */
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    float *msh = scratch, *ssh = scratch + TC_HEADS * S, *mxs = ssh + TC_HEADS * S;
    int *nls = (int *)(mxs + TC_HEADS);
    for (int k = threadIdx.x; k < nh * S; k += blockDim.x) {
        int h = k / S, s = k - h * S;
        const float *mp = p.ml + (((size_t)i * S + s) * H + h0 + h) * 2;
        msh[k] = __ldcg(mp);
        ssh[k] = __ldcg(mp + 1);
    }
    __syncthreads();
    if ((int)threadIdx.x < nh) {
        const float *mh = msh + threadIdx.x * S;
        float mx = -INFINITY;
        for (int s = 0; s < S; s++) mx = fmaxf(mx, mh[s]);
        int nl = 0;
        while (nl < S && mh[nl] != -INFINITY) nl++;
        mxs[threadIdx.x] = mx;
        nls[threadIdx.x] = nl;
    }
    __syncthreads();
    const size_t step = (size_t)H * TC_C;   /* part: split s to s + 1 */
    for (int k = threadIdx.x; k < nh * (TC_C / 4); k += blockDim.x) {
        int h = k / (TC_C / 4), c = 4 * (k - h * (TC_C / 4)), nl = nls[h];
        const float *mh = msh + h * S, *sh = ssh + h * S;
        float mx = mxs[h], den = 0.0f, a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
        const float *p0 = p.part + ((size_t)i * S * H + h0 + h) * TC_C + c;   /* part[i, 0, h, c] */
        for (int s = 0; s < nl; s++) den += expf(mh[s] - mx) * sh[s];
        for (int s = 0; s < nl; s++) {
            float w = expf(mh[s] - mx);
            float4 v = __ldcg((const float4 *)(p0 + s * step));
            a0 += w * v.x;
            a1 += w * v.y;
            a2 += w * v.z;
            a3 += w * v.w;
        }
        size_t o = ((size_t)i * H + h0 + h) * TC_C + c;
        if (p.ob) {
            p.ob[o] = __float2bfloat16(a0 / den);
            p.ob[o + 1] = __float2bfloat16(a1 / den);
            p.ob[o + 2] = __float2bfloat16(a2 / den);
            p.ob[o + 3] = __float2bfloat16(a3 / den);
        } else {
            p.olat[o] = a0 / den;
            p.olat[o + 1] = a1 / den;
            p.olat[o + 2] = a2 / den;
            p.olat[o + 3] = a3 / den;
        }
    }
}

/* MLA_PROF (a diagnostic build, -DMLA_PROF; dev/cuda/build_prof.sh): every block of mla_decode_tc2_kernel stamps
 * %globaltimer (ns, one clock for all SMs) at its phases: [0] entry, [1] Q in registers, [2] the first tile landed,
 * [3] the last tile's values done, [4] its partials written; cu_mla_prof_print (bench --mla) prints each phase's
 * quantiles over the blocks of the last launch, from the launch's earliest entry. Why: at 64 x 1K the kernel runs at
 * ~60% of the copy rate against ~82% at 4K, so a fixed cost per launch or per block (KERNELS.md, thirty-seventh
 * session) is to be located before anything is built against it. */
#ifdef MLA_PROF
#include "backend/cuda/cuda_prof.h"
#define MLA_PROF_MAXB 8192
__device__ unsigned long long mla_prof_t[MLA_PROF_MAXB][5];
__device__ __forceinline__ void mla_prof_stamp(int k) {
    if (threadIdx.x == 0 && blockIdx.x < MLA_PROF_MAXB) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        mla_prof_t[blockIdx.x][k] = t;
    }
}
#define MLA_STAMP(k) mla_prof_stamp(k)
static int mla_prof_blocks;   /* the last tc2 launch's grid */
/* quantiles (min, 10%, 50%, 90%, max) in us of each stamp from the earliest entry, and of each phase's length */
extern "C" void cu_mla_prof_print(void) {
    static unsigned long long t[MLA_PROF_MAXB][5];
    int nblocks = mla_prof_blocks;
    if (nblocks <= 0) return;
    if (nblocks > MLA_PROF_MAXB) nblocks = MLA_PROF_MAXB;
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpyFromSymbol(t, mla_prof_t, sizeof(t)));
    unsigned long long t0 = ~0ull;
    for (int b = 0; b < nblocks; b++) t0 = t[b][0] < t0 ? t[b][0] : t0;
    static const char *name[9] = {"entry", "q ready", "tile 0 in", "loop done", "written",
                                  "  q phase", "  first wait", "  loop", "  write"};
    double *v = (double *)malloc(sizeof(double) * (size_t)nblocks);
    for (int k = 0; k < 9; k++) {
        for (int b = 0; b < nblocks; b++)
            v[b] = k < 5 ? (double)(t[b][k] - t0) * 1e-3 : (double)(t[b][k - 4] - t[b][k - 5]) * 1e-3;
        cu_prof_quantiles(stdout, "mla-prof", 12, name[k], v, nblocks);
    }
    free(v);
}
#else
#define MLA_STAMP(k) do { } while (0)
#endif

/* QREG: the k-steps of 16 (even, at most 36) whose Q fragments stay in registers. FP8: the cache's rows
 * arrive raw (656 bytes: about half the BF16 row's 1152) and each warp decodes its own 8 rows of a tile into
 * the one BF16 tile before its score MMAs (a __syncwarp: the rows a warp's scores read are the rows it
 * decoded; the other warps' rows are read by the value MMAs only, after the softmax's barriers). */
template <int QREG, bool FP8>
__global__ void __launch_bounds__(T2_THREADS, 2) mla_decode_tc2_kernel(fa_params p) {
    extern __shared__ __align__(16) unsigned char tc_smem[];
    unsigned char *Raw = tc_smem;                                      /* FP8: [T2_ST][T2_TILE][T2_E8] */
    __nv_bfloat16 *Kr = (__nv_bfloat16 *)(tc_smem + (FP8 ? T2_ST * T2_TILE * T2_E8 : 0));   /* [T2_ST or 1][T2_TILE][TC_KS] */
    __nv_bfloat16 *Qs = Kr + (FP8 ? 1 : T2_ST) * T2_TILE * TC_KS;     /* [16][TC_KS] */
    __nv_bfloat16 *Ps = Qs + TC_HEADS * TC_KS;                        /* [16][T2_PS] */
    float *red = (float *)(Ps + TC_HEADS * T2_PS);                    /* [T2_WARPS][16] */
    MLA_STAMP(0);
    cu_pdl_trigger();
    cu_pdl_wait();
    const mla_work wk = mla_block_work(p, TC_HEADS, T2_TILE);
    const int h0 = wk.h0, i = wk.i, m = wk.m, c_begin = wk.c_begin, c_end = wk.c_end;
    const int32_t *pt = wk.pt;
    const size_t base_o = wk.base_o;
    int nh = p.H - h0 < TC_HEADS ? p.H - h0 : TC_HEADS;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    if (c_begin >= c_end) {
        mla_empty_split(p, base_o, nh);
        if (p.tickets) t2_fold_combine(p, i, h0, nh, (float *)tc_smem);
        return;
    }
    int nt = (c_end - c_begin + T2_TILE - 1) / T2_TILE;
    if (FP8) t2_issue8(p, pt, c_begin, min(T2_TILE, c_end - c_begin), Raw, warp, lane);   /* in flight while Q loads */
    else t2_issue(p, pt, c_begin, min(T2_TILE, c_end - c_begin), Kr, warp, lane);
    cu_cp_async_commit();
    mla_load_q<T2_THREADS>(p, Qs, i, m, h0, nh);
    const int a_row = (lane & 7) + 8 * ((lane >> 3) & 1), a_col = 8 * (lane >> 4), n0 = 8 * warp;
    /* Q's A fragments of the first QREG k-steps kept in registers: every warp read all of Q from shared
     * memory every tile (twice the tile's own bytes), and the shared-memory pipe was a top stall (mio) */
    uint32_t qf[QREG > 0 ? QREG : 1][4];
    __syncthreads();   /* the Q tile written */
#pragma unroll
    for (int q = 0; q < QREG; q++) cu_ldsm_x4(qf[q], Qs + a_row * TC_KS + 16 * q + a_col);
    MLA_STAMP(1);
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;   /* heads g, g + 8 */
    float o[16][4];
#pragma unroll
    for (int n = 0; n < 16; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

    for (int k = 0; k < nt; k++) {
        int base = c_begin + k * T2_TILE, nc = min(T2_TILE, c_end - base);
        const __nv_bfloat16 *Ks = FP8 ? Kr : Kr + (k % T2_ST) * T2_TILE * TC_KS;
        cu_cp_async_wait<0>();
        __syncthreads();   /* tile k (and the Q tile) visible to all; every reader of tile k-1 is done */
        if (k == 0) MLA_STAMP(2);
        if (k + 1 < nt) {
            int nn = min(T2_TILE, c_end - base - T2_TILE);
            if (FP8) t2_issue8(p, pt, base + T2_TILE, nn, Raw + ((k + 1) % T2_ST) * T2_TILE * T2_E8, warp, lane);
            else t2_issue(p, pt, base + T2_TILE, nn, Kr + ((k + 1) % T2_ST) * T2_TILE * TC_KS, warp, lane);
        }
        cu_cp_async_commit();
        if (FP8) {
            t2_decode8(Raw + (k % T2_ST) * T2_TILE * T2_E8, Kr, warp, lane);
            __syncwarp();
        }

        /* scores of rows n0 .. n0 + 7: acc[.][0..1] head g, rows n0 + 2t, +1; [2..3] head g + 8. Four
         * accumulator chains of 9 MMAs; the fragments of step k+1 are loaded before the MMAs of step k (the
         * asm statements keep their order, so the compiler cannot hoist the loads itself) */
        float acc[4][4];
#pragma unroll
        for (int c = 0; c < 4; c++) acc[c][0] = acc[c][1] = acc[c][2] = acc[c][3] = 0.0f;
        {
            const __nv_bfloat16 *qa = Qs + a_row * TC_KS + a_col, *kb = Ks + (n0 + (lane & 7)) * TC_KS + 8 * (lane >> 3);
            uint32_t fa[2][4], fa2[2][4], fb[2][4];
            cu_ldsm_x4(fb[0], kb);
            if (QREG == 0) {   /* step 0's Q from shared memory too */
                cu_ldsm_x4(fa[0], qa);
                cu_ldsm_x4(fa2[0], qa + 16);
            }
#pragma unroll
            for (int it = 0; it < TC_W / 32; it++) {
                const int cur = it & 1, nx = cur ^ 1;
                if (it + 1 < TC_W / 32) {
                    if (it + 1 >= QREG / 2) {
                        cu_ldsm_x4(fa[nx], qa + 32 * (it + 1));
                        cu_ldsm_x4(fa2[nx], qa + 32 * (it + 1) + 16);
                    }
                    cu_ldsm_x4(fb[nx], kb + 32 * (it + 1));
                }
                if (it < QREG / 2) {   /* the first k-steps' Q fragments live in registers */
                    cu_mma_bf16(acc[2 * cur], qf[2 * it], fb[cur][0], fb[cur][1]);
                    cu_mma_bf16(acc[2 * cur + 1], qf[2 * it + 1], fb[cur][2], fb[cur][3]);
                } else {
                    cu_mma_bf16(acc[2 * cur], fa[cur], fb[cur][0], fb[cur][1]);
                    cu_mma_bf16(acc[2 * cur + 1], fa2[cur], fb[cur][2], fb[cur][3]);
                }
            }
        }
        int j = n0 + 2 * t;
        float sc[4];
#pragma unroll
        for (int e = 0; e < 4; e++)
            sc[e] = j + (e & 1) < nc ? ((acc[0][e] + acc[1][e]) + (acc[2][e] + acc[3][e])) * p.scale : -INFINITY;
        float tm0, tm1;
        mla_tile_max<T2_WARPS>(sc, red, warp, g, t, &tm0, &tm1);
        float nm0 = fmaxf(m0, tm0), nm1 = fmaxf(m1, tm1);
        /* a head with no finite score yet keeps factor 1 and probabilities 0 (its sums are still 0) */
        /* __expf (ex2.approx, 2 ulp): P is rounded to BF16 (2^-9) right after */
        float cr0 = nm0 == -INFINITY ? 1.0f : __expf(m0 - nm0), cr1 = nm1 == -INFINITY ? 1.0f : __expf(m1 - nm1);
        __nv_bfloat162 p0 = __floats2bfloat162_rn(nm0 == -INFINITY ? 0.0f : __expf(sc[0] - nm0),
                                                  nm0 == -INFINITY ? 0.0f : __expf(sc[1] - nm0));
        __nv_bfloat162 p1 = __floats2bfloat162_rn(nm1 == -INFINITY ? 0.0f : __expf(sc[2] - nm1),
                                                  nm1 == -INFINITY ? 0.0f : __expf(sc[3] - nm1));
        l0 = l0 * cr0 + __low2float(p0) + __high2float(p0);   /* the sums add the BF16 values the MMAs use */
        l1 = l1 * cr1 + __low2float(p1) + __high2float(p1);
        m0 = nm0;
        m1 = nm1;
        *(__nv_bfloat162 *)(Ps + g * T2_PS + j) = p0;
        *(__nv_bfloat162 *)(Ps + (g + 8) * T2_PS + j) = p1;
        __syncthreads();

        /* O[:, 128w ..] += P[:, 32 rows] V[32 rows, 128w .. 128w + 127]; O rescaled only when a max of the
         * warp's heads moved (64 multiplies by exactly 1 skipped: after the first tiles the max rarely moves) */
        if (__any_sync(0xffffffffu, cr0 != 1.0f || cr1 != 1.0f)) {
#pragma unroll
            for (int n = 0; n < 16; n++) {
                o[n][0] *= cr0; o[n][1] *= cr0;
                o[n][2] *= cr1; o[n][3] *= cr1;
            }
        }
#pragma unroll
        for (int tk = 0; tk < T2_TILE; tk += 16) {   /* a k-step's fragments all loaded before its 16 MMAs */
            uint32_t a[4], b[8][4];
            cu_ldsm_x4(a, Ps + a_row * T2_PS + tk + a_col);
#pragma unroll
            for (int n = 0; n < 16; n += 2) cu_ldsm_x4_trans(b[n / 2], Ks + (tk + a_row) * TC_KS + 128 * warp + 8 * n + a_col);
#pragma unroll
            for (int n = 0; n < 16; n += 2) {
                cu_mma_bf16(o[n], a, b[n / 2][0], b[n / 2][1]);
                cu_mma_bf16(o[n + 1], a, b[n / 2][2], b[n / 2][3]);
            }
        }
    }

    MLA_STAMP(3);
    t2_write(p, o, l0, l1, m0, m1, red, base_o, nh, warp, g, t);
    MLA_STAMP(4);
    if (p.tickets) t2_fold_combine(p, i, h0, nh, (float *)tc_smem);
}

/* v3 for the FP8 cache (DSINFER_CUDA_MLA_TC2_FP8=2, the default). v2's FP8 form decodes every row (e4m3 ->
 * half -> float, times the scale, -> BF16: six instructions per two codes) into a BF16 tile before its score
 * MMAs, a chain of shared-memory round trips per tile at two warps per scheduler. Here:
 *   - the codes become FP16 without their scale, one cvt.rn.f16x2.e4m3x2 per two codes (exact: every e4m3
 *     value is an FP16 value); the scales go where they are constant: a row's block b scale multiplies that
 *     block's partial score (k-steps 8b .. 8b + 7 summed apart), and P per warp (warp w's value columns
 *     128w .. 128w + 127 are block w: P_w[h][j] = p[h][j] * scale[j][w], rounded to FP16 for the MMA);
 *   - the score MMAs take the codes straight from the raw rows: ldmatrix gives lane (g, t) the bytes 4t ..
 *     4t + 3 of a 16-code chunk of row g, converted to the B fragment's two pairs; the k order within a chunk
 *     is thus (0, 1, 4, 5, 8, 9, 12, 13 | 2, 3, 6, 7, 10, 11, 14, 15), and Q's latent part is stored in that
 *     order (t3_load_q), which leaves every dot product unchanged;
 *   - the value MMAs take them from the raw rows too: ldmatrix.trans over 16-byte chunks gives lane (g, t) the
 *     codes 2g, 2g + 1 of rows 2t, 2t + 1; a byte swap pairs them by column, so one load feeds two MMAs, one
 *     over the chunk's even columns and one over its odd columns (t3_write puts the columns back in order);
 *   - so there is no decoded tile at all: shared memory holds a ring of T3_ST raw stages (the last one is the
 *     Q tile's space, free once Q's latent fragments are in registers; q_pe waits in a small tile Qr), three
 *     tiles in flight.
 * q_lat is FP16 times 2^qe, qe chosen per block from the tile's largest |q_lat| (exact, and no FP16
 * overflow); q_pe and k_pe stay BF16 (k_pe is not normalised, its range is BF16's): the 4 RoPE k-steps are
 * BF16 MMAs, the 32 latent ones FP16 MMAs. Rounding: q_lat and P to FP16 (2^-11) where v2 has BF16 (2^-8),
 * the cache's values exact. */
#define T3_PS 40      /* Ps row stride in floats (P in fp32; 8 mod 32: a half-warp's float2 reads hit distinct banks) */
#define T3_RAW ((size_t)T2_TILE * T2_E8)                          /* one raw stage, 20,992 bytes */
#define T3_QU (T3_RAW > sizeof(__nv_bfloat16) * TC_HEADS * TC_KS ? T3_RAW : sizeof(__nv_bfloat16) * TC_HEADS * TC_KS)
#define T3_QR 72      /* Qr row stride in BF16 (36 words, 4 mod 32) */
/* raw stages: 4 x 21 KB + the small tiles = 88 KB, two blocks an SM (run 5 of the ninth session: 3 stages
 * as fast, 5 (110 KB) 7% slower) */
#define T3_STAGES 4
#define T3_SMEM(T3_ST) ((T3_ST - 1) * T3_RAW + T3_QU + sizeof(__nv_bfloat16) * (size_t)TC_HEADS * T3_QR + \
                 sizeof(float) * (size_t)(TC_HEADS * T3_PS + T2_WARPS * TC_HEADS))
/* two blocks an SM: 228 KB of shared memory, 1 KB of it reserved per block */
static_assert(2 * (T3_SMEM(T3_STAGES) + 1024) <= 228 * 1024, "mla_decode_f8h_kernel: two blocks must fit an SM");
static_assert(T3_QU >= T3_RAW, "the Q tile's space must hold a raw stage");

/* Q tile Qs [16][TC_KS]: q_lat * 2^qe in FP16 in the chunks' k order (above); Qr [16][T3_QR]: q_pe in BF16
 * (kept in shared memory: the registers hold the 32 latent k-steps' fragments); heads past nh zero; returns
 * 2^-qe. qe puts the block's largest |q_lat| in [2^14, 2^15) (clamped to +-100, and 0 for a
 * non-finite q: those give the reference's zero or non-finite scores anyway). red [T2_WARPS] is free when it
 * returns, and Qs written. */
__device__ __forceinline__ float t3_load_q(const fa_params &p, __nv_bfloat16 *Qs, __nv_bfloat16 *Qr, float *red, int i, int m,
                                           int h0, int nh, int warp, int lane) {
    constexpr int QV = MLA_QV, QN = (TC_HEADS * QV + T2_THREADS - 1) / T2_THREADS;
    float4 qv[QN];
    mla_fetch_q<T2_THREADS>(p, qv, i, m, h0, nh);
    float mx = 0.0f;
#pragma unroll
    for (int u = 0; u < QN; u++) {
        int x = threadIdx.x + u * T2_THREADS;
        if (x < TC_HEADS * QV && 4 * (x % QV) < TC_C)
            mx = fmaxf(mx, fmaxf(fmaxf(fabsf(qv[u].x), fabsf(qv[u].y)), fmaxf(fabsf(qv[u].z), fabsf(qv[u].w))));
    }
    for (int d = 16; d > 0; d >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, d));
    if (lane == 0) red[warp] = mx;
    __syncthreads();
    mx = fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
    int ex = 0;
    frexpf(mx, &ex);   /* mx < 2^ex */
    int qe = isfinite(mx) ? min(max(15 - ex, -100), 100) : 0;
    float up = ldexpf(1.0f, qe);
#pragma unroll
    for (int u = 0; u < QN; u++) {
        int x = threadIdx.x + u * T2_THREADS, hh = x / QV, k = 4 * (x % QV);
        if (x >= TC_HEADS * QV) continue;
        if (k < TC_C) {   /* codes k .. k + 3 = 4t .. 4t + 3 of chunk k / 16: slots 2t, 2t + 1 and 2t + 8, 2t + 9 */
            __nv_bfloat16 *row = Qs + hh * TC_KS + (k & ~15) + 2 * ((k & 15) >> 2);
            *(uint32_t *)row = cu_pack_f16(qv[u].x * up, qv[u].y * up);
            *(uint32_t *)(row + 8) = cu_pack_f16(qv[u].z * up, qv[u].w * up);
        } else {
            *(uint2 *)(Qr + hh * T3_QR + k - TC_C) = make_uint2(cu_pack_bf16(qv[u].x, qv[u].y), cu_pack_bf16(qv[u].z, qv[u].w));
        }
    }
    __syncthreads();   /* every thread has read red; Qs complete */
    return ldexpf(1.0f, -qe);
}

/* scores of the warp's rows j = n0 + 2t, j + 1 (tot[0..1] head g, [2..3] head g + 8, before p.scale) from
 * the raw rows Rk: per 128-code block four chains of 2 MMAs, their sum times the row's block scale (times
 * 2^-qe) into tot; then the 4 RoPE k-steps (BF16). Fragments of group q + 1 loaded before group q's MMAs. */
__device__ __forceinline__ void t3_scores(const unsigned char *Rk, const uint32_t qf[32][4], const __nv_bfloat16 *Qr,
                                          float q_down, int n0, int lane, float tot[4]) {
    const float *sj = (const float *)(Rk + (n0 + 2 * (lane & 3)) * T2_E8 + TC_C);   /* row j's block scales; j + 1's */
    const unsigned char *kr = Rk + (n0 + (lane & 7)) * T2_E8 + 16 * (lane >> 3);   /* chunk (lane >> 3) of row lane & 7 */
    const unsigned char *kp = Rk + (n0 + (lane & 7)) * T2_E8 + TC_C + 4 * (TC_C / 128) + 16 * (lane >> 3);   /* k_pe */
    uint32_t raw[2][4], pe[2][4];
    float acc[4][4];
    cu_ldsm_x4(raw[0], kr);
#pragma unroll
    for (int q = 0; q < TC_C / 64; q++) {   /* group q: chunks 4q .. 4q + 3 = k-steps 4q .. 4q + 3 */
        if (q + 1 < TC_C / 64) cu_ldsm_x4(raw[(q + 1) & 1], kr + 64 * (q + 1));
        else cu_ldsm_x4(pe[0], kp);
        if (q % 2 == 0) {
#pragma unroll
            for (int c = 0; c < 4; c++) acc[c][0] = acc[c][1] = acc[c][2] = acc[c][3] = 0.0f;
        }
#pragma unroll
        for (int c = 0; c < 4; c++) {
            uint32_t b0, b1;
            cu_e4m3x4_f16(raw[q & 1][c], &b0, &b1);
            cu_mma_f16(acc[c], qf[4 * q + c], b0, b1);
        }
        if (q % 2 == 1) {   /* block q / 2 done (scales read here: fewer live registers than all 8 held) */
            const float s0 = sj[q / 2] * q_down, s1 = sj[T2_E8 / 4 + q / 2] * q_down;
#pragma unroll
            for (int e = 0; e < 4; e++)
                tot[e] = fmaf(e & 1 ? s1 : s0, (acc[0][e] + acc[1][e]) + (acc[2][e] + acc[3][e]), tot[e]);
        }
    }
    cu_ldsm_x4(pe[1], kp + 64);
#pragma unroll
    for (int c = 0; c < 4; c++) acc[c][0] = acc[c][1] = acc[c][2] = acc[c][3] = 0.0f;
    const __nv_bfloat16 *qa = Qr + ((lane & 7) + 8 * ((lane >> 3) & 1)) * T3_QR + 8 * (lane >> 4);
#pragma unroll
    for (int c = 0; c < 4; c++) {   /* k-steps 32 .. 35: pe[c / 2] holds two */
        uint32_t a[4];
        cu_ldsm_x4(a, qa + 16 * c);
        cu_mma_bf16(acc[c], a, pe[c / 2][2 * (c & 1)], pe[c / 2][2 * (c & 1) + 1]);
    }
#pragma unroll
    for (int e = 0; e < 4; e++) tot[e] += (acc[0][e] + acc[1][e]) + (acc[2][e] + acc[3][e]);
}

/* O[:, 128w ..] += P_w[:, 32 rows] V[32 rows, 128w .. 128w + 127] from the raw rows Rk, P_w = P (fp32, Ps) times
 * the rows' block w scale, in FP16. o[2c] holds chunk c's even columns 16c + 2n, o[2c + 1] its odd ones. */
__device__ __forceinline__ void t3_values(const unsigned char *Rk, const float *Ps, float o[16][4], int warp, int lane) {
    const int g = lane >> 2, t = lane & 3;
    /* ldmatrix.trans row addresses: matrix j = lane >> 3: rows +8 for j odd, chunk +1 for j >= 2 */
    const unsigned char *vr = Rk + ((lane & 7) + 8 * ((lane >> 3) & 1)) * T2_E8 + 128 * warp + 16 * (lane >> 4);
#pragma unroll
    for (int tk = 0; tk < T2_TILE; tk += 16) {
        const int r0 = tk + 2 * t;
        const float *bs = (const float *)(Rk + TC_C) + warp;
        float s0 = bs[r0 * (T2_E8 / 4)], s1 = bs[(r0 + 1) * (T2_E8 / 4)];
        float s8 = bs[(r0 + 8) * (T2_E8 / 4)], s9 = bs[(r0 + 9) * (T2_E8 / 4)];
        float2 x00 = *(const float2 *)(Ps + g * T3_PS + r0), x10 = *(const float2 *)(Ps + (g + 8) * T3_PS + r0);
        float2 x01 = *(const float2 *)(Ps + g * T3_PS + r0 + 8), x11 = *(const float2 *)(Ps + (g + 8) * T3_PS + r0 + 8);
        const uint32_t a[4] = {cu_pack_f16(x00.x * s0, x00.y * s1), cu_pack_f16(x10.x * s0, x10.y * s1),
                               cu_pack_f16(x01.x * s8, x01.y * s9), cu_pack_f16(x11.x * s8, x11.y * s9)};
        uint32_t r[4][4];
#pragma unroll
        for (int c = 0; c < 8; c += 2) cu_ldsm_x4_trans(r[c / 2], vr + tk * T2_E8 + 16 * c);
#pragma unroll
        for (int c = 0; c < 8; c++) {   /* r[c / 2][2 (c & 1)]: rows 2t, 2t + 1; [.. + 1]: rows 2t + 8, 2t + 9 */
            uint32_t e0, d0, e1, d1;
            cu_e4m3x4_f16(cu_swap_mid_bytes(r[c / 2][2 * (c & 1)]), &e0, &d0);
            cu_e4m3x4_f16(cu_swap_mid_bytes(r[c / 2][2 * (c & 1) + 1]), &e1, &d1);
            cu_mma_f16(o[2 * c], a, e0, e1);
            cu_mma_f16(o[2 * c + 1], a, d0, d1);
        }
    }
}

/* t2_write's contract with t3_values' column order: lane (g, t) holds columns 16c + 4t .. 16c + 4t + 3 of
 * chunk c of the warp's 128 (even ones in o[2c], odd ones in o[2c + 1]), written as one float4 a head */
__device__ __forceinline__ void t3_write(const fa_params &p, const float o[16][4], float l0, float l1, float m0, float m1,
                                         float *red, size_t base_o, int nh, int warp, int g, int t) {
#pragma unroll
    for (int c = 0; c < 8; c++) {
        int col = 128 * warp + 16 * c + 4 * t;
        if (g < nh)
            *(float4 *)(p.part + (base_o + g) * TC_C + col) = make_float4(o[2 * c][0], o[2 * c + 1][0], o[2 * c][1], o[2 * c + 1][1]);
        if (g + 8 < nh)
            *(float4 *)(p.part + (base_o + g + 8) * TC_C + col) = make_float4(o[2 * c][2], o[2 * c + 1][2], o[2 * c][3], o[2 * c + 1][3]);
    }
    t2_write_ml(p, l0, l1, m0, m1, red, base_o, nh, warp, g, t);
}

template <int T3_ST>
__global__ void __launch_bounds__(T2_THREADS, 2) mla_decode_f8h_kernel(fa_params p) {
    extern __shared__ __align__(16) unsigned char tc_smem[];
    unsigned char *qu = tc_smem + (T3_ST - 1) * T3_RAW;                   /* Qs, then raw stage T3_ST - 1 */
    __nv_bfloat16 *Qs = (__nv_bfloat16 *)qu;                              /* [16][TC_KS], FP16 */
    __nv_bfloat16 *Qr = (__nv_bfloat16 *)(qu + T3_QU);                   /* [16][T3_QR], BF16 */
    float *Ps = (float *)(Qr + TC_HEADS * T3_QR);                          /* [16][T3_PS] */
    float *red = Ps + TC_HEADS * T3_PS;                                    /* [T2_WARPS][16] */
    cu_pdl_trigger();
    cu_pdl_wait();
    const mla_work wk = mla_block_work(p, TC_HEADS, T2_TILE);
    const int h0 = wk.h0, i = wk.i, m = wk.m, c_begin = wk.c_begin, c_end = wk.c_end;
    const int32_t *pt = wk.pt;
    const size_t base_o = wk.base_o;
    int nh = p.H - h0 < TC_HEADS ? p.H - h0 : TC_HEADS;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    if (c_begin >= c_end) {
        mla_empty_split(p, base_o, nh);
        return;
    }
    int nt = (c_end - c_begin + T2_TILE - 1) / T2_TILE;
    /* tiles 0 .. T3_ST - 2 in flight while Q loads (the last stage is Q's until the loop starts) */
#pragma unroll
    for (int st = 0; st < T3_ST - 1; st++) {
        int b0 = c_begin + st * T2_TILE;
        if (st < nt) t2_issue8(p, pt, b0, min(T2_TILE, c_end - b0), tc_smem + st * T3_RAW, warp, lane);
        cu_cp_async_commit();
    }
    float q_down = t3_load_q(p, Qs, Qr, red, i, m, h0, nh, warp, lane);
    const int a_row = (lane & 7) + 8 * ((lane >> 3) & 1), a_col = 8 * (lane >> 4), n0 = 8 * warp;
    uint32_t qf[TC_C / 16][4];   /* the latent k-steps' A fragments */
#pragma unroll
    for (int q = 0; q < TC_C / 16; q++) cu_ldsm_x4(qf[q], Qs + a_row * TC_KS + 16 * q + a_col);
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;   /* heads g, g + 8 */
    float o[16][4];
#pragma unroll
    for (int n = 0; n < 16; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

    for (int k = 0; k < nt; k++) {
        int base = c_begin + k * T2_TILE, nc = min(T2_TILE, c_end - base);
        const unsigned char *Rk = tc_smem + (k % T3_ST) * T3_RAW;
        cu_cp_async_wait<T3_ST - 2>();   /* every group but the newest T3_ST - 2 (tiles k + 1 ..) done */
        __syncthreads();   /* tile k visible to all; every reader of tile k-1 (its stage; at k = 0, Qs) is done */
        int nb = base + (T3_ST - 1) * T2_TILE;   /* into tile k-1's stage (at k = 0 the Q tile's) */
        if (nb < c_end) t2_issue8(p, pt, nb, min(T2_TILE, c_end - nb), tc_smem + ((k + T3_ST - 1) % T3_ST) * T3_RAW, warp, lane);
        cu_cp_async_commit();   /* a group every iteration, empty or not: the wait's count stays right */

        int j = n0 + 2 * t;
        float tot[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sc[4];
        t3_scores(Rk, qf, Qr, q_down, n0, lane, tot);
#pragma unroll
        for (int e = 0; e < 4; e++) sc[e] = j + (e & 1) < nc ? tot[e] * p.scale : -INFINITY;
        float tm0, tm1;
        mla_tile_max<T2_WARPS>(sc, red, warp, g, t, &tm0, &tm1);
        float nm0 = fmaxf(m0, tm0), nm1 = fmaxf(m1, tm1);
        /* a head with no finite score yet keeps factor 1 and probabilities 0 (its sums are still 0) */
        float cr0 = nm0 == -INFINITY ? 1.0f : __expf(m0 - nm0), cr1 = nm1 == -INFINITY ? 1.0f : __expf(m1 - nm1);
        float2 p0 = make_float2(nm0 == -INFINITY ? 0.0f : __expf(sc[0] - nm0), nm0 == -INFINITY ? 0.0f : __expf(sc[1] - nm0));
        float2 p1 = make_float2(nm1 == -INFINITY ? 0.0f : __expf(sc[2] - nm1), nm1 == -INFINITY ? 0.0f : __expf(sc[3] - nm1));
        l0 = l0 * cr0 + p0.x + p0.y;
        l1 = l1 * cr1 + p1.x + p1.y;
        m0 = nm0;
        m1 = nm1;
        *(float2 *)(Ps + g * T3_PS + j) = p0;
        *(float2 *)(Ps + (g + 8) * T3_PS + j) = p1;
        __syncthreads();   /* P written */
        /* O rescaled only when a max of the warp's heads moved */
        if (__any_sync(0xffffffffu, cr0 != 1.0f || cr1 != 1.0f)) {
#pragma unroll
            for (int n = 0; n < 16; n++) {
                o[n][0] *= cr0; o[n][1] *= cr0;
                o[n][2] *= cr1; o[n][3] *= cr1;
            }
        }
        t3_values(Rk, Ps, o, warp, lane);
    }
    t3_write(p, o, l0, l1, m0, m1, red, base_o, nh, warp, g, t);
}

/* Splits for T entries: about two blocks per SM in one wave (both kernels' occupancy), at most one tile
 * of the layout's kernel (64 rows, 32 for v2) per split of the longest context the page table can hold, at
 * most 64 (mla_combine). */
int cu_mla_slots = 2;   /* DSINFER_CUDA_MLA_SLOTS (backend creation) */
int cu_mla_max_splits = 64;   /* DSINFER_CUDA_MLA_MAX_SPLITS (backend creation) */

int cu_mla_tc_splits(int T, int H, int max_ctx, int n_sm, int kv_layout) {
    if (cu_mla_wg_on(kv_layout, H)) return cu_mla_wg_splits(T, H, max_ctx, n_sm);
    int blocks = T * ((H + TC_HEADS - 1) / TC_HEADS), slots = cu_mla_slots * n_sm, tile = tc2_on(kv_layout) ? T2_TILE : TC_TILE;
    int S = blocks >= slots ? 1 : slots / blocks, max_tiles = (max_ctx + tile - 1) / tile;
    if (S > max_tiles) S = max_tiles;
    /* from 8 blocks, at least two tiles a split (twenty-first session runs 1-2: batch 8 at 1K, 32 splits of one tile ->
     * 16 of two, 5.49 / 5.54 -> 5.35 / 5.41 ms a step; a split's Q load, ring fill and partial store were most of a
     * one-tile block). Below 8 blocks (batch 1-4) not measured: as before. */
    if (blocks >= 8 && S > max_tiles / 2 && max_tiles >= 2) S = max_tiles / 2;
    if (S > cu_mla_max_splits) S = cu_mla_max_splits;
    return S < 1 ? 1 : S;
}

int cu_mla_decode_tc(const fa_params *p, int T) {
#ifdef MLA_PROF
    mla_prof_blocks = 0;   /* set again below where the launch is one of mla_decode_tc2_kernel's */
#endif
    if (cu_mla_wg_on(p->kv_layout, p->H)) {   /* 64 heads a block on wgmma (cuda_mla_wg.cu) */
        cu_mla_decode_wg(p, T);
        return 0;
    }
    static int smem_set = 0;
    if (!smem_set) {
        CUDA_CHECK(cudaFuncSetAttribute(mla_decode_tc_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)TC_SMEM));
        smem_set = 1;
    }
    int HGn = (p->H + TC_HEADS - 1) / TC_HEADS;
    if (tc2_on(p->kv_layout) && (p->kv_layout != CU_KV_FP8 || p->fp8_vec)) {
        static int smem2_set = 0;
        if (!smem2_set) {
            CUDA_CHECK(cudaFuncSetAttribute(mla_decode_tc2_kernel<36, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)T2_SMEM));
            CUDA_CHECK(cudaFuncSetAttribute(mla_decode_tc2_kernel<18, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)T2_SMEM));
            CUDA_CHECK(cudaFuncSetAttribute(mla_decode_tc2_kernel<0, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)T2_SMEM));
            CUDA_CHECK(cudaFuncSetAttribute(mla_decode_tc2_kernel<36, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)T2_SMEM8));
            CUDA_CHECK(cudaFuncSetAttribute(mla_decode_tc2_kernel<18, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)T2_SMEM8));
            CUDA_CHECK(cudaFuncSetAttribute(mla_decode_tc2_kernel<0, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)T2_SMEM8));
            smem2_set = 1;
        }
        unsigned blocks = (unsigned)((size_t)T * p->n_splits * HGn);
#ifdef MLA_PROF
        mla_prof_blocks = p->kv_layout == CU_KV_FP8 && cu_mla_tc2_fp8 == 2 ? 0 : (int)blocks;
#endif
        if (p->kv_layout == CU_KV_FP8 && cu_mla_tc2_fp8 == 2) {
            static int smem3_set = 0;
            if (!smem3_set) {
                CUDA_CHECK(cudaFuncSetAttribute(mla_decode_f8h_kernel<T3_STAGES>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                (int)T3_SMEM(T3_STAGES)));
                smem3_set = 1;
            }
            cu_launch(mla_decode_f8h_kernel<T3_STAGES>, blocks, T2_THREADS, T3_SMEM(T3_STAGES), *p);
        } else if (p->kv_layout == CU_KV_FP8) {
            if (cu_mla_qreg == 36) cu_launch(mla_decode_tc2_kernel<36, true>, blocks, T2_THREADS, T2_SMEM8, *p);
            else if (cu_mla_qreg == 18) cu_launch(mla_decode_tc2_kernel<18, true>, blocks, T2_THREADS, T2_SMEM8, *p);
            else cu_launch(mla_decode_tc2_kernel<0, true>, blocks, T2_THREADS, T2_SMEM8, *p);
        } else {
            if (cu_mla_qreg == 36) cu_launch(mla_decode_tc2_kernel<36, false>, blocks, T2_THREADS, T2_SMEM, *p);
            else if (cu_mla_qreg == 18) cu_launch(mla_decode_tc2_kernel<18, false>, blocks, T2_THREADS, T2_SMEM, *p);
            else cu_launch(mla_decode_tc2_kernel<0, false>, blocks, T2_THREADS, T2_SMEM, *p);
        }
        CUDA_LAUNCH_CHECK();
        /* the f8h kernel does not fold; the tc2 kernels do where tickets are given */
        return p->tickets && !(p->kv_layout == CU_KV_FP8 && cu_mla_tc2_fp8 == 2);
    }
    cu_launch(mla_decode_tc_kernel, (unsigned)((size_t)T * p->n_splits * HGn), TC_THREADS, TC_SMEM, *p);
    CUDA_LAUNCH_CHECK();
    return 0;
}
