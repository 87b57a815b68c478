/* The absorbed attention's q product at decode-sized batches, q_lat = W_UK^T q_nope (spec 6.3), as device code shared by
 * cuda_attn.cu's absorb_q_v3_kernel and cuda_backend.cu's qkv_absorb_kernel (qkv_finish and this product in one launch,
 * opt.qkv_absorb): the same arithmetic in the same order in both, so the same bits. */
#ifndef DS_CUDA_ABSORB_H
#define DS_CUDA_ABSORB_H

#include "backend/cuda/cuda.h"

#define AQ3_COLS 64   /* q_lat columns a 128-thread group */
/* row groups of a 128-thread group: its threads take CPR 16-byte chunks of a row of AQ3_COLS columns (EB bytes each) */
#define AQ3_RPP(EB) (128 / (AQ3_COLS * (EB) / 16))

/* q_lat columns [k0, k0 + AQ3_COLS) of head h for tokens i0 and i0 + 1 (those < T; token list tok, NULL: 0 .. T - 1), by
 * 128 threads (tid 0 .. 127; unsigned, as threadIdx.x: the same index arithmetic as the kernel had) with red [AQ3_RPP(EB)][2][AQ3_COLS] of shared memory their own. Thread tid reads 16-byte
 * chunk tid % CPR of kv_b rows tid / CPR + RPP u (u < 128 / RPP) of head h's W_UK (rows h hw .. + dn, C columns; BF16, or
 * FP8 with 128 x 128 block scales) and its q values straight from global memory, every load issued before any is used;
 * the RPP row groups' partial sums meet in red. Every thread of the block must call it (one __syncthreads). Needs
 * C % AQ3_COLS == 0 and dn <= 128. q: [., H dqk] rows, q_nope the first dn of each head; qlat [T, H, C]. */
template <int EB>   /* bytes an element: 1 FP8, 2 BF16 */
__device__ __forceinline__ void absorb_q_v3_cols(float (*red)[2][AQ3_COLS], float *qlat, const float *q, cu_wview kvb,
                                                 const int32_t *tok, int T, int H, int C, int dn, int dqk, int hw, int h,
                                                 int k0, int i0, unsigned tid) {
    constexpr int CPR = AQ3_COLS * EB / 16, RPP = 128 / CPR, VPC = 16 / EB, NU = 128 / RPP;
    int nt = T - i0 < 2 ? T - i0 : 2;
    int ch = tid % CPR, r0 = tid / CPR, col = k0 + ch * VPC;
    const float *q0 = q + (size_t)(tok ? tok[i0] : i0) * H * dqk + (size_t)h * dqk;
    const float *q1 = nt > 1 ? q + (size_t)(tok ? tok[i0 + 1] : i0 + 1) * H * dqk + (size_t)h * dqk : q0;
    uint4 raw[NU];
    float sc[NU], qa[NU], qb[NU];
#pragma unroll
    for (int u = 0; u < NU; u++) {   /* every load first */
        int d = r0 + RPP * u;
        raw[u] = make_uint4(0, 0, 0, 0);
        sc[u] = qa[u] = qb[u] = 0.0f;
        if (d < dn) {
            size_t r = (size_t)h * hw + d;
            raw[u] = __ldg((const uint4 *)((const char *)kvb.data + (r * C + col) * EB));
            if (EB == 1) sc[u] = kvb.scale ? __ldg(kvb.scale + (r >> 7) * (size_t)kvb.scale_cols + (size_t)(col >> 7)) : 1.0f;
            qa[u] = __ldg(q0 + d);
            qb[u] = __ldg(q1 + d);
        }
    }
    float a0[VPC], a1[VPC];
#pragma unroll
    for (int v = 0; v < VPC; v++) a0[v] = a1[v] = 0.0f;
#pragma unroll
    for (int u = 0; u < NU; u++) {
        float wv[VPC];
        if (EB == 2) {
            cu_bf16x8(raw[u], wv);
        } else {
            const uint32_t uu[4] = {raw[u].x, raw[u].y, raw[u].z, raw[u].w};
#pragma unroll
            for (int i = 0; i < 4; i++) cu_fp8x4(uu[i], sc[u], wv + 4 * i);
        }
#pragma unroll
        for (int v = 0; v < VPC; v++) {
            a0[v] = fmaf(qa[u], wv[v], a0[v]);
            a1[v] = fmaf(qb[u], wv[v], a1[v]);
        }
    }
#pragma unroll
    for (int v = 0; v < VPC; v++) {
        red[r0][0][ch * VPC + v] = a0[v];
        red[r0][1][ch * VPC + v] = a1[v];
    }
    __syncthreads();
    for (int x = (int)tid; x < 2 * AQ3_COLS; x += 128) {
        int t = x / AQ3_COLS, c = x % AQ3_COLS;
        if (t >= nt) continue;
        float v = 0.0f;
#pragma unroll
        for (int r = 0; r < RPP; r++) v += red[r][t][c];
        qlat[((size_t)(i0 + t) * H + h) * C + k0 + c] = v;
    }
}

#endif
