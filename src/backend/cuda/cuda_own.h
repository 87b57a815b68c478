/* Device helpers shared by the ownership kernels of batch 1 (cuda_moeo.cu: the MoE block; cuda_rowo.cu: the dense
 * linears), where a block owns whole weight rows streamed into shared memory and x sits in shared memory. */
#ifndef DS_CUDA_OWN_H
#define DS_CUDA_OWN_H

#include "backend/cuda/cuda.h"

/* acc[r] += the dot of row r's 16-byte chunk q[r] (EB 1: 16 FP8 codes times the block scale s; 2: 8 BF16) with the
 * 16 / EB floats at v (shared memory), for NR rows of the same columns (v read once); the chunk's float4 pieces of v
 * taken in an order rotated by lane so that the 8 lanes of a shared-memory phase, whose chunks lie 64 (FP8) or 32
 * (BF16) bytes of x apart, read different bank groups */
template <int EB, int NR>
__device__ __forceinline__ void mo_dot(const uint4 (&q)[NR], float s, const float *v, int lane, float (&acc)[NR]) {
    constexpr int P = 4 / EB;
    const int rot = EB == 1 ? (lane >> 1) : (lane >> 2);
    float d[NR];   /* the chunk's dots of the codes, times the scale once (one 128-column block) */
#pragma unroll
    for (int r = 0; r < NR; r++) d[r] = 0.0f;
#pragma unroll
    for (int i = 0; i < P; i++) {
        const int jj = (i + rot) & (P - 1);
        const float4 xv = *(const float4 *)(v + 4 * jj);
#pragma unroll
        for (int r = 0; r < NR; r++) {
            float w[4];
            if constexpr (EB == 1) {
                const uint32_t word = jj == 0 ? q[r].x : jj == 1 ? q[r].y : jj == 2 ? q[r].z : q[r].w;
                cu_fp8x4_raw(word, w);
            } else {
                const uint32_t lo = jj == 0 ? q[r].x : q[r].z, hi = jj == 0 ? q[r].y : q[r].w;
                w[0] = __uint_as_float(lo << 16);
                w[1] = __uint_as_float(lo & 0xffff0000u);
                w[2] = __uint_as_float(hi << 16);
                w[3] = __uint_as_float(hi & 0xffff0000u);
            }
            d[r] += w[0] * xv.x + w[1] * xv.y + w[2] * xv.z + w[3] * xv.w;
        }
    }
#pragma unroll
    for (int r = 0; r < NR; r++) acc[r] += EB == 1 ? d[r] * s : d[r];
}

#endif
