/* The warp-level tensor-core pieces the hand-written kernels share (cuda_mla_tc.cu, cuda_fa_tc.cu,
 * cuda_moe_tc.cu): ldmatrix loads of 8x8 BF16 tiles from shared memory and the m16n8k16 BF16 MMA with fp32
 * accumulation (PTX ISA: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32; fragment layouts there). */
#ifndef DS_CUDA_MMA_H
#define DS_CUDA_MMA_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

__device__ __forceinline__ unsigned cu_smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }
/* The L2 evict_first policy of a weight stream's loads and copies where DSINFER_CUDA_L2EF asks (cuda_wgmma.h's
 * tma_load_stream says why; where it does not, they carry no hint: an explicit evict_normal policy measured slower than
 * none: FP8 b1 +0.13 ms, BF16 +0.26). Not volatile: one a thread where the compiler can hoist it. */
__device__ __forceinline__ uint64_t cu_l2_evict_first(void) {
    uint64_t p;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
    return p;
}

/* four 8x8 BF16 tiles: lanes 8j .. 8j+7 give the row addresses of tile j; r[j] holds this lane's pair */
__device__ __forceinline__ void cu_ldsm_x4(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(cu_smem_addr(p)));
}
/* the same, each tile transposed (B fragments of a row-major [k][n] tile) */
__device__ __forceinline__ void cu_ldsm_x4_trans(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(cu_smem_addr(p)));
}
/* d[16x8] += a[16x16] b[16x8]: a0..a3 the A fragment, b0 b1 the B fragment, BF16 pairs; fp32 d */
__device__ __forceinline__ void cu_mma_bf16(float d[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                            uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void cu_mma_bf16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    cu_mma_bf16(d, a[0], a[1], a[2], a[3], b0, b1);
}
/* the same with FP16 A and B (mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32) */
__device__ __forceinline__ void cu_mma_f16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
/* four e4m3 codes (byte 0 first) as two FP16 pairs, exactly (every e4m3 value is an FP16 value): one
 * cvt.rn.f16x2.e4m3x2 per pair, native from sm_89 on */
__device__ __forceinline__ void cu_e4m3x4_f16(uint32_t w, uint32_t *lo, uint32_t *hi) {
    asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
        : "=r"(*lo), "=r"(*hi) : "r"(w));
}
/* bytes (b0, b1, b2, b3) -> (b0, b2, b1, b3): a transposed 2x2 byte block */
__device__ __forceinline__ uint32_t cu_swap_mid_bytes(uint32_t w) { return __byte_perm(w, 0, 0x3120); }
__device__ __forceinline__ uint32_t cu_pack_f16(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *(uint32_t *)&v;
}
/* two floats rounded to a BF16 pair, lo in the low half */
/* 16 bytes global -> shared without the registers (cp.async.cg: L2 only); bytes 0 zero-fills the 16 */
__device__ __forceinline__ void cu_cp_async16(void *smem, const void *gmem, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(cu_smem_addr(smem)), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cu_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
/* waits until at most n of this thread's committed groups are pending */
template <int n> __device__ __forceinline__ void cu_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(n)); }

__device__ __forceinline__ uint32_t cu_pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}

/* 16 e4m3 codes times their block's scale (the CPU's value: e4m3 * scale in fp32) as 8 BF16 pairs, codes
 * in order (the FP8 cache's rows, FP8 weights dequantized for cuBLAS) */
__device__ __forceinline__ void fp8x16_bf16(uint4 code, float sc, uint32_t o[8]) {
    const uint32_t w4[4] = {code.x, code.y, code.z, code.w};
#pragma unroll
    for (int q = 0; q < 4; q++) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w4[q] >> (16 * h)), __NV_E4M3);
            float2 f = __half22float2(__half2(hr));
            o[2 * q + h] = cu_pack_bf16(f.x * sc, f.y * sc);
        }
    }
}

#endif
