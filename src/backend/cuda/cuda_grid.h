/* A grid-wide barrier for kernels whose blocks are all resident at once (cooperative launches: cu_launch_coop). Used by
 * the one-token MoE launch (cuda_moe1.cu) and the streamed-phases lab (cuda_bench.cu). */
#ifndef DS_CUDA_GRID_H
#define DS_CUDA_GRID_H

#include "backend/cuda/cuda.h"

/* The nthreads threads of the block that take part meet at named barrier id (0 with blockDim.x threads: __syncthreads'
 * barrier); the leader (one of them) fences (gpu scope: cumulative over the block's writes ordered before it by the
 * barrier), reads the generation, arrives on count; the last block to arrive puts count back to zero and moves the
 * generation on (release), the others spin (acquire) until it moves; the threads meet again. So every write a block
 * made before the barrier is visible to every block after it. count and gen: zero once; count is zero again after each
 * barrier, so one pair serves any number of barriers and launches (never two grids at once). fenced false: the
 * acquire / release operations alone, without the two fences (the form `bench --ceilings` times as "acquire /
 * release"; for barriers that order no data of the threads but the leader's). */
__device__ __forceinline__ void cu_grid_sync(unsigned *count, unsigned *gen, int id, int nthreads, bool leader,
                                             bool fenced = true) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(nthreads) : "memory");
    if (leader) {
        unsigned g, old, v;
        if (fenced) __threadfence();
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(g) : "l"(gen) : "memory");
        asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(count) : "memory");
        if (old == gridDim.x - 1) {
            asm volatile("st.relaxed.gpu.global.u32 [%0], 0;" ::"l"(count) : "memory");
            asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(gen) : "memory");
        } else {
            do {
                asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(gen) : "memory");
            } while (v == g);
        }
        if (fenced) __threadfence();
    }
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(nthreads) : "memory");
}

#endif
