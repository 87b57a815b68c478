/* Hopper's asynchronous pieces the wgmma kernels share (cuda_fp8_wgmma.cu, cuda_moe_wg.cu): shared-memory
 * matrix descriptors and the wgmma group fences (PTX ISA "asynchronous warpgroup level matrix instructions"),
 * mbarriers, and TMA 2-D tile loads completing on an mbarrier. */
#ifndef DS_CUDA_WGMMA_H
#define DS_CUDA_WGMMA_H

#include <cuda.h>
#include <stdint.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_mma.h"

/* shared-memory matrix descriptor (PTX ISA "matrix descriptor" for wgmma): start address >> 4 in bits
 * 0-13, leading byte offset 0 (unused for a swizzled K-major operand whose k32 slice lies inside one
 * 128-byte row), stride byte offset 1024 >> 4 (8 rows of 128 B) in bits 32-45, layout SWIZZLE_128B (1)
 * in bits 62-63 */
__device__ __forceinline__ uint64_t wg_desc(const void *p) {
    uint64_t a = cu_smem_addr(p);
    return ((a & 0x3FFFF) >> 4) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ void wg_fence(void) { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_wait0(void) { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
/* waits until at most one committed group of this warpgroup is pending */
__device__ __forceinline__ void wg_wait1(void) { asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); }
/* this thread's generic-proxy writes to shared memory (cp.async) made visible to the async proxy (wgmma) */
__device__ __forceinline__ void wg_fence_smem(void) { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

__device__ __forceinline__ void mbar_init(uint64_t *b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(cu_smem_addr(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t *b, int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(cu_smem_addr(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(cu_smem_addr(b)) : "memory");
}
/* returns once the phase with this parity has completed */
__device__ __forceinline__ void mbar_wait(uint64_t *b, int parity) {
    uint32_t done = 0;
    while (!done)
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(cu_smem_addr(b)), "r"(parity)
                     : "memory");
}
/* the map's box (its columns x rows) at (col, row) of the 2-D tensor map -> dst; completes its bytes on bar */
__device__ __forceinline__ void tma_load(void *dst, const CUtensorMap *map, int col, int row, uint64_t *bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                 ::"r"(cu_smem_addr(dst)), "l"((uint64_t)map), "r"(col), "r"(row), "r"(cu_smem_addr(bar))
                 : "memory");
}

/* bytes (a multiple of 16) from global src to shared dst, both 16-byte aligned, completing its bytes on bar (PTX ISA
 * cp.async.bulk, the non-tensor bulk copy; a CTA's own shared address is a valid shared::cluster one) */
__device__ __forceinline__ void bulk_load(void *dst, const void *src, int bytes, uint64_t *bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 ::"r"(cu_smem_addr(dst)), "l"((uint64_t)src), "r"(bytes), "r"(cu_smem_addr(bar))
                 : "memory");
}

/* The weight streams' copies (cuda_moeo.cu's gate / up rows and down strips, moe_wg_kernel's weight tiles): tma_load /
 * bulk_load, with the L2 policy pol (cu_l2_evict_first) where ef (DSINFER_CUDA_L2EF asks; block-uniform), so that bytes
 * read once a step do not push out of L2 what every kernel of the step reads again (code, parameters, activations, norm
 * weights, the KV cache). Why: at batch 1 a step streams 2.7 GB (FP8) through a 50 MB L2, ~100 MB a layer, and each of
 * the layer's nine small kernels took 2.6 .. 6.2 us for work of well under a microsecond at DRAM's rate; with the policy
 * FP8 b1 went 2.28 -> 2.17 ms on an H100 (KERNELS "Fifty-second session"). */
__device__ __forceinline__ void tma_load_stream(void *dst, const CUtensorMap *map, int col, int row, uint64_t *bar, int ef,
                                                uint64_t pol) {
    if (!ef) {
        tma_load(dst, map, col, row, bar);
        return;
    }
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5;\n"
                 ::"r"(cu_smem_addr(dst)), "l"((uint64_t)map), "r"(col), "r"(row), "r"(cu_smem_addr(bar)), "l"(pol)
                 : "memory");
}
__device__ __forceinline__ void bulk_load_stream(void *dst, const void *src, int bytes, uint64_t *bar, int ef, uint64_t pol) {
    if (!ef) {
        bulk_load(dst, src, bytes, bar);
        return;
    }
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n"
                 ::"r"(cu_smem_addr(dst)), "l"((uint64_t)src), "r"(bytes), "r"(cu_smem_addr(bar)), "l"(pol)
                 : "memory");
}

/* Host side (cuda_fp8_wgmma.cu). A 2-D map of a row-major [rows, K] byte matrix (16-byte aligned, K a multiple of
 * 16), boxes of 128 columns x box_rows rows, 128-byte swizzle, rows past the end read as zeros; 0 on failure
 * (no driver entry point, bad shape). */
int cu_tma_map(CUtensorMap *map, const void *p, int rows, int K, int box_rows);
/* A 2-D map of a row-major [rows, row_bytes] byte matrix (16-byte aligned) in boxes of box_bytes (16 .. 256, a multiple
 * of 16) x box_rows (<= 256), no swizzle: the box lands as box_rows rows of box_bytes one after another (a column strip
 * of the matrix: cuda_moeo.cu's down strips); 0 on failure. */
int cu_tma_map_strip(CUtensorMap *map, const void *p, int rows, int row_bytes, int box_bytes, int box_rows);
/* One layer's expert weight maps (boxes of 128 bytes x 128 rows) on the device, made on first use unless `create`
 * is 0 (inside a stream capture: cudaMalloc and the synchronous copies are not allowed there): *maps [3 E2] with
 * E2 = E + *ns: gate, up of expert e at 2e, 2e + 1, down at 2 E2 + e; *scales the same order (FP8: their 128 x 128
 * block scales; BF16: NULL). *ns: the layer's shared experts as virtual experts E .. E2 - 1, each a slice of I rows
 * of their gate / up and I columns of their down (a strided map; scale pointers at the slice's first block, rows
 * of sh_gate / sh_down's scale_cols), or 0 where they do not have the routed experts' dtype and layout. 0 when the
 * layer's experts do not all fit (all FP8 with scales or all BF16, 16-byte aligned, the shapes I x D and D x I) or
 * were not made. The prefill path (cu_moe_gemm_f8) asks for FP8 layers only. */
int cu_expert_maps(ds_cuda_backend *cb, const ds_layer_weights *L, int E, int D, int I, int create,
                   const CUtensorMap **maps, const float *const **scales, int *ns);

#endif
