/* Prefill attention in the naive MLA form on the tensor cores (issue 8): FlashAttention-2 style, mma.sync
 * m16n8k16 BF16 with fp32 accumulation, for the DeepSeek head widths (q/k 128 + 64 rope, v 128).
 *
 * The contract is naive_attn_kernel's (cuda_attn.cu): for the T new tokens t0 .. t0+T-1 of one sequence,
 * out[m, h, :] = softmax_p(scale * q[m, h] . [k_nope[p, h] ; k_pe[p]]) v[p, h] over the context rows
 * p <= positions[m], with K_nope and V decompressed in kvb ([L, H * 256]: 128 k_nope then 128 v per head)
 * and k_pe in kpe ([L, 64]). What differs is the arithmetic: q, k, v and the probabilities are rounded to
 * BF16 before the products (sums fp32); the op test compares it with the fp32 CPU op at THR_TC.
 *
 * One block = 64 new tokens x one head, 4 warps of 16 rows. Each warp keeps its Q rows as A fragments in
 * registers; per 64-row tile of the context the block stages K [64][192] and V [64][128] in BF16 in shared
 * memory, and each warp computes S = Q K^T (16 x 64), the online softmax of its rows (max / sum across the
 * 4 lanes of a row), and O += P V with P taken straight from the S accumulators as A fragments (the
 * FA-2 register layout). Tiles past the block's last position are never loaded; positions above a row's
 * own are masked. Row strides of 200 (K, Q) and 136 (V) BF16 are 4 words mod 32, so ldmatrix's row
 * addresses fall in distinct banks. */
#include "backend/cuda/cuda.h"

#include <cuda_bf16.h>

#include "backend/cuda/cuda_mma.h"

#define FQ 64      /* new tokens per block */
#define FK 64      /* context rows per tile */
#define FDN 128
#define FDR 64
#define FDQK (FDN + FDR)
#define FDV 128
#define FHW (FDN + FDV)
#define FKS 200
#define FVS 136

int cu_fa_tc_fits(const ds_config *c) {
    return c->qk_nope_head_dim == FDN && c->qk_rope_head_dim == FDR && c->v_head_dim == FDV;
}

/* 4 fp32 -> 4 BF16 at dst (8-byte store) */
__device__ __forceinline__ void fa_st4(__nv_bfloat16 *dst, float4 v) {
    *(uint2 *)dst = make_uint2(cu_pack_bf16(v.x, v.y), cu_pack_bf16(v.z, v.w));
}

/* The block's nq query rows q0 .. (their positions into pos_s, -1 past T, the largest into *max_pos) in BF16
 * into Qs (row stride FKS, rows past T zero), then warp w's 16 rows as the A fragments qf of its MMAs.
 * Qs is the K staging area: the caller syncs before staging K over it. */
__device__ __forceinline__ void fa_load_q(__nv_bfloat16 *Qs, int *pos_s, int *max_pos, const float *q,
                                          const int32_t *positions, int t0, int T, int H, int h, int q0, int nq,
                                          int nthreads, uint32_t (*qf)[4], int warp, int a_row, int a_col) {
    int tid = threadIdx.x;
    if (tid < nq) pos_s[tid] = q0 + tid < T ? positions[t0 + q0 + tid] : -1;
    for (int x = tid; x < nq * (FDQK / 4); x += nthreads) {
        int r = x / (FDQK / 4), c = 4 * (x % (FDQK / 4));
        float4 v = q0 + r < T ? __ldg((const float4 *)(q + ((size_t)(t0 + q0 + r) * H + h) * FDQK + c))
                              : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        fa_st4(Qs + r * FKS + c, v);
    }
    __syncthreads();
    if (tid == 0) {
        int mx = -1;
        for (int r = 0; r < nq; r++) mx = pos_s[r] > mx ? pos_s[r] : mx;
        *max_pos = mx;
    }
#pragma unroll
    for (int ks = 0; ks < FDQK / 16; ks++) cu_ldsm_x4(qf[ks], Qs + (16 * warp + a_row) * FKS + 16 * ks + a_col);
}

/* One 64-row K/V tile for a warp's 16 query rows (rows g and g + 8 of the A fragments; both kernels): S = Q K^T
 * over the 192 q/k columns, the causal mask from the rows' positions, the online-softmax update of (m, l) and
 * O = O * correction + P V with P in BF16 straight from the S accumulators (the FA-2 register layout). Kt
 * [64][FKS] and Vt [64][FVS] BF16 in shared memory; kb: the tile's first context row. */
__device__ __forceinline__ void fa_tile(const __nv_bfloat16 *Kt, const __nv_bfloat16 *Vt, const uint32_t (*qf)[4], int kb,
                                        int pos0, int pos1, float scale, int lane, float &m0, float &m1, float &l0,
                                        float &l1, float (*o)[4]) {
    const int t = lane & 3, a_row = (lane & 7) + 8 * ((lane >> 3) & 1), a_col = 8 * (lane >> 4);
    /* S = Q K^T: s[j] = rows g / g+8, keys kb + 8j + 2t (+1) */
    float s[FK / 8][4];
#pragma unroll
    for (int j = 0; j < FK / 8; j++) {
        s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
        for (int kp = 0; kp < FDQK / 32; kp++) {
            uint32_t b[4];
            cu_ldsm_x4(b, Kt + (8 * j + (lane & 7)) * FKS + 32 * kp + 8 * (lane >> 3));
            cu_mma_bf16(s[j], qf[2 * kp], b[0], b[1]);
            cu_mma_bf16(s[j], qf[2 * kp + 1], b[2], b[3]);
        }
    }
    /* causal mask, scale, row max */
    float x0 = -INFINITY, x1 = -INFINITY;
#pragma unroll
    for (int j = 0; j < FK / 8; j++) {
#pragma unroll
        for (int i = 0; i < 2; i++) {
            int key = kb + 8 * j + 2 * t + i;
            s[j][i] = key <= pos0 ? s[j][i] * scale : -INFINITY;
            s[j][2 + i] = key <= pos1 ? s[j][2 + i] * scale : -INFINITY;
            x0 = fmaxf(x0, s[j][i]);
            x1 = fmaxf(x1, s[j][2 + i]);
        }
    }
    x0 = fmaxf(x0, __shfl_xor_sync(0xffffffffu, x0, 1));
    x0 = fmaxf(x0, __shfl_xor_sync(0xffffffffu, x0, 2));
    x1 = fmaxf(x1, __shfl_xor_sync(0xffffffffu, x1, 1));
    x1 = fmaxf(x1, __shfl_xor_sync(0xffffffffu, x1, 2));
    float nm0 = fmaxf(m0, x0), nm1 = fmaxf(m1, x1);
    float cr0 = nm0 == -INFINITY ? 1.0f : expf(m0 - nm0), cr1 = nm1 == -INFINITY ? 1.0f : expf(m1 - nm1);
    m0 = nm0;
    m1 = nm1;
    /* P in BF16 as the A fragments of P V (k-step kk: keys 16kk .. 16kk + 15 = S tiles 2kk, 2kk+1) */
    uint32_t pf[FK / 16][4];
    float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
    for (int j = 0; j < FK / 8; j++) {
        float p00 = nm0 == -INFINITY ? 0.0f : expf(s[j][0] - nm0), p01 = nm0 == -INFINITY ? 0.0f : expf(s[j][1] - nm0);
        float p10 = nm1 == -INFINITY ? 0.0f : expf(s[j][2] - nm1), p11 = nm1 == -INFINITY ? 0.0f : expf(s[j][3] - nm1);
        __nv_bfloat162 b0 = __floats2bfloat162_rn(p00, p01), b1 = __floats2bfloat162_rn(p10, p11);
        ps0 += __low2float(b0) + __high2float(b0);   /* the sums add what the products use */
        ps1 += __low2float(b1) + __high2float(b1);
        pf[j >> 1][(j & 1) * 2] = *(uint32_t *)&b0;
        pf[j >> 1][(j & 1) * 2 + 1] = *(uint32_t *)&b1;
    }
    l0 = l0 * cr0 + ps0;
    l1 = l1 * cr1 + ps1;
#pragma unroll
    for (int n = 0; n < FDV / 8; n++) {
        o[n][0] *= cr0; o[n][1] *= cr0;
        o[n][2] *= cr1; o[n][3] *= cr1;
    }
    /* O += P V */
#pragma unroll
    for (int kk = 0; kk < FK / 16; kk++) {
#pragma unroll
        for (int n = 0; n < FDV / 8; n += 2) {
            uint32_t b[4];
            cu_ldsm_x4_trans(b, Vt + (16 * kk + a_row) * FVS + 8 * n + a_col);
            cu_mma_bf16(o[n], pf[kk], b[0], b[1]);
            cu_mma_bf16(o[n + 1], pf[kk], b[2], b[3]);
        }
    }
}

/* The end of a query block: the row sums across a row's 4 lanes, O / l to out (rows < T only). */
__device__ __forceinline__ void fa_store(float *out, float (*o)[4], float l0, float l1, int r0, int t0, int T, int H,
                                         int h, int lane) {
    const int t = lane & 3;
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    int r1 = r0 + 8;
#pragma unroll
    for (int n = 0; n < FDV / 8; n++) {
        int col = 8 * n + 2 * t;
        if (r0 < T) *(float2 *)(out + ((size_t)(t0 + r0) * H + h) * FDV + col) = make_float2(o[n][0] / l0, o[n][1] / l0);
        if (r1 < T) *(float2 *)(out + ((size_t)(t0 + r1) * H + h) * FDV + col) = make_float2(o[n][2] / l1, o[n][3] / l1);
    }
}

/* grid (ceil(T / FQ), H), block 128. */
__global__ void __launch_bounds__(128) fa_prefill_kernel(float *out, const float *q, const float *kvb, const float *kpe,
                                                         const int32_t *positions, int t0, int T, int H, float scale) {
    __shared__ __align__(16) __nv_bfloat16 Ks[FK * FKS];   /* also the Q staging area (FQ rows) */
    __shared__ __align__(16) __nv_bfloat16 Vs[FK * FVS];
    __shared__ int pos_s[FQ];
    __shared__ int max_pos;
    int q0 = blockIdx.x * FQ, h = blockIdx.y, tid = threadIdx.x;
    int warp = tid >> 5, lane = tid & 31, g = lane >> 2;
    const int a_row = (lane & 7) + 8 * ((lane >> 3) & 1), a_col = 8 * (lane >> 4);
    uint32_t qf[FDQK / 16][4];
    fa_load_q(Ks, pos_s, &max_pos, q, positions, t0, T, H, h, q0, FQ, 128, qf, warp, a_row, a_col);
    int pos0 = pos_s[16 * warp + g], pos1 = pos_s[16 * warp + g + 8];
    __syncthreads();   /* Q read out of Ks; max_pos written */
    int n_keys = max_pos + 1;
    float o[FDV / 8][4];
#pragma unroll
    for (int n = 0; n < FDV / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;   /* rows g, g + 8 */

    for (int kb = 0; kb < n_keys; kb += FK) {
        int nk = n_keys - kb < FK ? n_keys - kb : FK;
        /* K = [k_nope | k_pe] and V of rows kb .. kb + nk - 1 in BF16; rows past nk zero */
#pragma unroll 4
        for (int x = tid; x < FK * (FDQK / 4); x += 128) {
            int r = x / (FDQK / 4), c = 4 * (x % (FDQK / 4));
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (r < nk)
                v = c < FDN ? __ldg((const float4 *)(kvb + ((size_t)(kb + r) * H + h) * FHW + c))
                            : __ldg((const float4 *)(kpe + (size_t)(kb + r) * FDR + (c - FDN)));
            fa_st4(Ks + r * FKS + c, v);
        }
#pragma unroll 4
        for (int x = tid; x < FK * (FDV / 4); x += 128) {
            int r = x / (FDV / 4), c = 4 * (x % (FDV / 4));
            float4 v = r < nk ? __ldg((const float4 *)(kvb + ((size_t)(kb + r) * H + h) * FHW + FDN + c))
                              : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            fa_st4(Vs + r * FVS + c, v);
        }
        __syncthreads();

        fa_tile(Ks, Vs, qf, kb, pos0, pos1, scale, lane, m0, m1, l0, l1, o);
        __syncthreads();   /* the tile's readers are done before the next staging */
    }
    fa_store(out, o, l0, l1, q0 + 16 * warp + g, t0, T, H, h, lane);
}

void cu_fa_prefill_tc(float *out, const float *q, const float *kvb, const float *kpe, const int32_t *positions, int t0,
                      int T, int H, float scale) {
    dim3 grid((unsigned)((T + FQ - 1) / FQ), (unsigned)H);
    fa_prefill_kernel<<<grid, 128, 0, cu_stream>>>(out, q, kvb, kpe, positions, t0, T, H, scale);
    CUDA_LAUNCH_CHECK();
}

/* ---- v2 (fifth session): BF16 K/V in global memory, cp.async double buffering, 128 queries a block ------
 * Same contract and the same arithmetic as fa_prefill_kernel (the K/V values are the BF16 roundings that
 * kernel made while staging: kvb16 / kpe16 = bf16(kvb / kpe), made once per layer by the caller), so the
 * outputs match it up to the order of the softmax sums. What changes is the memory side: v1 read fp32
 * K/V (a block re-read its head's whole context: 8 GB a V2-Lite layer at 8K tokens) and converted them while
 * staging, with no overlap of the loads and the MMAs (6.8 ms a layer at 8K, about 5% of the BF16 rate).
 * v2 reads BF16 with cp.async into one of two stages while the MMAs run on the other, serves 128 queries (8
 * warps) per K/V tile, skips a warp's MMAs on tiles entirely above its rows' positions, and hands out the
 * longest (last) query blocks first. Dynamic shared memory: 2 stages x (K 64x200 + V 64x136) BF16 = 86 KB;
 * the Q staging at the start reuses the K stages (128 x 200). */
#define F2Q 128
#define F2_THREADS 256
#define F2_KSTAGE (FK * FKS)
#define F2_VSTAGE (FK * FVS)
#define F2_SMEM ((size_t)2 * (F2_KSTAGE + F2_VSTAGE) * 2)

/* stage the K [64][192] and V [64][128] BF16 rows kb .. kb + nk - 1 (rows past nk zero-filled) */
__device__ __forceinline__ void fa2_load_tile(__nv_bfloat16 *Ks, __nv_bfloat16 *Vs, const __nv_bfloat16 *kvb,
                                              const __nv_bfloat16 *kpe, int kb, int nk, int H, int h, int tid) {
    /* K: 24 chunks of 16 bytes a row (16 of k_nope, 8 of k_pe); V: 16 chunks a row */
    for (int x = tid; x < FK * 24; x += F2_THREADS) {
        int r = x / 24, c = 8 * (x % 24), ok = r < nk;
        int rr = ok ? kb + r : kb;   /* a valid address even when zero-filling */
        const __nv_bfloat16 *src = c < FDN ? kvb + ((size_t)rr * H + h) * FHW + c : kpe + (size_t)rr * FDR + (c - FDN);
        cu_cp_async16(Ks + r * FKS + c, src, ok ? 16 : 0);
    }
    for (int x = tid; x < FK * 16; x += F2_THREADS) {
        int r = x / 16, c = 8 * (x % 16), ok = r < nk;
        int rr = ok ? kb + r : kb;
        cu_cp_async16(Vs + r * FVS + c, kvb + ((size_t)rr * H + h) * FHW + FDN + c, ok ? 16 : 0);
    }
}

/* grid (ceil(T / F2Q), H), block F2_THREADS, dynamic smem F2_SMEM */
__global__ void __launch_bounds__(F2_THREADS) fa_prefill2_kernel(float *out, const float *q, const __nv_bfloat16 *kvb,
                                                                  const __nv_bfloat16 *kpe, const int32_t *positions,
                                                                  int t0, int T, int H, float scale) {
    extern __shared__ __align__(16) unsigned char f2_smem[];
    __nv_bfloat16 *Ks = (__nv_bfloat16 *)f2_smem, *Vs = Ks + 2 * F2_KSTAGE;
    __shared__ int pos_s[F2Q];
    __shared__ int max_pos;
    int q0 = (gridDim.x - 1 - blockIdx.x) * F2Q, h = blockIdx.y, tid = threadIdx.x;   /* longest blocks first */
    int warp = tid >> 5, lane = tid & 31, g = lane >> 2;
    const int a_row = (lane & 7) + 8 * ((lane >> 3) & 1), a_col = 8 * (lane >> 4);
    uint32_t qf[FDQK / 16][4];   /* the Q staging spans both K stages (128 x 200) */
    fa_load_q(Ks, pos_s, &max_pos, q, positions, t0, T, H, h, q0, F2Q, F2_THREADS, qf, warp, a_row, a_col);
    int pos0 = pos_s[16 * warp + g], pos1 = pos_s[16 * warp + g + 8];
    int wmax = -1;   /* the warp's largest position: tiles above it need no MMA */
    for (int r = 0; r < 16; r++) wmax = pos_s[16 * warp + r] > wmax ? pos_s[16 * warp + r] : wmax;
    __syncthreads();   /* Q read out of the K stages; max_pos written */
    int n_keys = max_pos + 1, n_tiles = (n_keys + FK - 1) / FK;
    float o[FDV / 8][4];
#pragma unroll
    for (int n = 0; n < FDV / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
    if (n_tiles > 0) {
        fa2_load_tile(Ks, Vs, kvb, kpe, 0, n_keys < FK ? n_keys : FK, H, h, tid);
        cu_cp_async_commit();
    }
    for (int it = 0; it < n_tiles; it++) {
        int kb = it * FK, st = it & 1;
        if (it + 1 < n_tiles) {   /* the next tile into the other stage, while this one computes */
            int kb1 = kb + FK, nk1 = n_keys - kb1 < FK ? n_keys - kb1 : FK;
            fa2_load_tile(Ks + (st ^ 1) * F2_KSTAGE, Vs + (st ^ 1) * F2_VSTAGE, kvb, kpe, kb1, nk1, H, h, tid);
            cu_cp_async_commit();
            cu_cp_async_wait<1>();
        } else {
            cu_cp_async_wait<0>();
        }
        __syncthreads();
        const __nv_bfloat16 *Kt = Ks + st * F2_KSTAGE, *Vt = Vs + st * F2_VSTAGE;
        if (kb <= wmax) fa_tile(Kt, Vt, qf, kb, pos0, pos1, scale, lane, m0, m1, l0, l1, o);
        __syncthreads();   /* this stage's readers are done before the next iteration's load refills it */
    }
    fa_store(out, o, l0, l1, q0 + 16 * warp + g, t0, T, H, h, lane);
}

/* n fp32 -> BF16 (n % 4 == 0, both 16-byte aligned) */
__global__ void fa2_to_bf16_kernel(__nv_bfloat16 *dst, const float *src, size_t n4) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x)
        fa_st4(dst + 4 * i, __ldg((const float4 *)src + i));
}

int cu_fa2 = 1;   /* DSINFER_CUDA_FA2 (read at backend creation) */

void cu_fa_prefill2_tc(float *out, const float *q, const float *kvb, const float *kpe, __nv_bfloat16 *kvb16,
                       __nv_bfloat16 *kpe16, const int32_t *positions, int t0, int T, int L, int H, float scale) {
    CUDA_CHECK(cudaFuncSetAttribute(fa_prefill2_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)F2_SMEM));
    size_t n_kvb4 = (size_t)L * H * FHW / 4, n_kpe4 = (size_t)L * FDR / 4;
    size_t b1 = cu_blocks(n_kvb4, 256), b2 = cu_blocks(n_kpe4, 256);
    fa2_to_bf16_kernel<<<(unsigned)(b1 < 65536 ? b1 : 65536), 256, 0, cu_stream>>>(kvb16, kvb, n_kvb4);
    CUDA_LAUNCH_CHECK();
    fa2_to_bf16_kernel<<<(unsigned)(b2 < 65536 ? b2 : 65536), 256, 0, cu_stream>>>(kpe16, kpe, n_kpe4);
    CUDA_LAUNCH_CHECK();
    if (cu_mla_ev_on) CUDA_CHECK(cudaEventRecord(cu_mla_ev[0], cu_stream));   /* `dsinfer bench --fa`: the kernel alone */
    if (!cu_fa3 || !cu_fa_prefill3_tc(out, q, kvb16, kpe16, positions, t0, T, L, H, scale)) {
        dim3 grid((unsigned)((T + F2Q - 1) / F2Q), (unsigned)H);
        fa_prefill2_kernel<<<grid, F2_THREADS, F2_SMEM, cu_stream>>>(out, q, kvb16, kpe16, positions, t0, T, H, scale);
        CUDA_LAUNCH_CHECK();
    }
    if (cu_mla_ev_on) CUDA_CHECK(cudaEventRecord(cu_mla_ev[1], cu_stream));
}
