/* wgmma_rate: the FP8 tensor-core rate an SM reaches with each MMA schedule the W8A8 GEMM could use (issue 8 lab;
 * dev/cuda/KERNELS.md "Twenty-seventh session"). Not a GEMM: the operands are whatever bytes the stages hold, the
 * sums are thrown away (one float a thread to a sink so nothing is dead). What it times is the question KERNELS.md's
 * shared-memory arithmetic leaves open: f8_tma_kernel's 128 x 128 tiles (two consumer warpgroups of m64n128k32 from
 * shared memory) stay at 74 .. 77% of the FP8 peak; do 128 x 256 tiles (A read once a k-block by each warpgroup:
 * from registers, or one m64n256) reach more, with the per-k-block promotion and the TMA writes of the stages?
 *
 * A block an SM, 384 threads: warpgroup 0's first thread the producer (PROD: 1-D bulk copies of the stage's bytes
 * from a 4 MB window of a global buffer, full / empty mbarriers as f8_tma_kernel's ring; else the stages are filled once and
 * never waited for), warpgroups 1 and 2 consume 64 rows each. A stage: A [128 rows][128 B] then B [256 rows][128 B],
 * 128-byte swizzled K-major (the descriptors and ldmatrix addresses follow that layout; the bytes are arbitrary).
 * A k-block is 128 columns: 4 k32 steps. MODE (the consumers' schedule a k-block):
 *   0  n128 SS, two accumulators in turn (f8_tma_kernel's): issue i + 1, wait for i, promote i (64 FMAs)
 *   1  n256 SS, one accumulator: issue, wait, promote (128 FMAs into 64 sums: registers allow no more)
 *   2  n256 as two n128 halves, A from registers (ldmatrix once a k-block): issue half, wait, promote (64 FMAs)
 *   3  n256 as four n64 quarters, A from registers, two accumulators in turn across quarters and k-blocks
 *   4  n256 SS raw: one accumulator summed on, no waits in the loop (the instruction's own rate)
 *   5  n128 SS raw
 *   6  n64 RS raw (A registers loaded once)
 * Tile width: 128 for modes 0, 5; 256 for the others (the producer copies 32 or 48 KB a stage).
 * Prints TFLOP/s = 2 x MACs / time for each mode, with and without the producer. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/cuda/cuda_wgmma.h"   /* the project's descriptors, wgmma fences, mbarriers */
#include "lab_check.h"
#include "wgmma_ops.h"


#define NST 4
#define A_BYTES (128 * 128)
#define STAGE (A_BYTES + 256 * 128)   /* 48 KB */
#define SRC_BYTES (64u << 20)
#define WIN_BYTES (4u << 20)   /* the window the producers read: L2-resident, as a GEMM's tiles mostly are */

/* this thread's A fragment of k32 step j for the warp's 16 rows (rows0: the warp's first row's address in the stage's
 * swizzled A): ldmatrix x4 of (rows 0-7, k 0-15), (8-15, 0-15), (0-7, 16-31), (8-15, 16-31) = wgmma's a0 .. a3 */
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const unsigned char *rows0, int j, int lane) {
    int m = lane >> 3, r = (lane & 7) + 8 * (m & 1), chunk = 2 * j + (m >> 1);
    const unsigned char *p = rows0 + r * 128 + ((chunk ^ (r & 7)) << 4);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                 : "r"(cu_smem_addr(p)));
}

/* tot += acc s; acc pinned first (an empty asm that "writes" each register): without it the compiler may move these
 * FMAs above the wgmma.wait_group that retires acc (a register-only expression is not ordered by the wait's memory
 * clobber), and ptxas then serializes every MMA (C7514). CUTLASS's warpgroup_fence_operand does the same. */
template <int N>
__device__ __forceinline__ void promote(float (&tot)[64], float (&acc)[N], float s) {
#pragma unroll
    for (int q = 0; q < N; q++) asm volatile("" : "+f"(acc[q])::"memory");
#pragma unroll
    for (int q = 0; q < N; q++) tot[q % 64] += acc[q] * s;
}

/* the 4 k32 steps of a k-block as functions, not macros: a `_Pragma("unroll")` inside a macro body was not applied,
 * and a rolled loop among the MMAs serializes them (C7514) */
__device__ __forceinline__ void ss128_kblock(float (&acc)[64], const unsigned char *a, const unsigned char *b) {
#pragma unroll
    for (int j = 0; j < 4; j++) wg_ss_n128(acc, wg_desc(a + 32 * j), wg_desc(b + 32 * j), j);
}
__device__ __forceinline__ void rs64_kblock(float (&acc)[32], const uint32_t (&a)[4][4], const unsigned char *b) {
#pragma unroll
    for (int j = 0; j < 4; j++) wg_rs_n64(acc, a[j], wg_desc(b + 32 * j), j);
}
__device__ __forceinline__ void load_a4(uint32_t (&a)[4][4], const unsigned char *rows0, int lane) {
#pragma unroll
    for (int j = 0; j < 4; j++) load_a(a[j], rows0, j, lane);
}
template <int N>
__device__ __forceinline__ void zero(float (&a)[N]) {
#pragma unroll
    for (int i = 0; i < N; i++) a[i] = 0.0f;
}

__device__ __forceinline__ int tile_bytes(int mode) { return (mode == 0 || mode == 5) ? (128 + 128) * 128 : STAGE; }

template <int MODE, bool PROD>
__global__ void __launch_bounds__(384, 1) rate_kernel(const unsigned char *src, int iters, float *sink) {
    extern __shared__ unsigned char raw[];
    unsigned char *sm = (unsigned char *)(((uintptr_t)raw + 1023) & ~(uintptr_t)1023);
    uint64_t *full = (uint64_t *)(sm + NST * STAGE), *empty = full + NST;
    const int bytes = tile_bytes(MODE);
    if (threadIdx.x == 0) {
        for (int s = 0; s < NST; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 8);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    for (int i = threadIdx.x; i < NST * STAGE / 4; i += blockDim.x) ((uint32_t *)sm)[i] = 0x30303030u ^ (i * 2654435761u & 0x0F0F0F0Fu);
    __syncthreads();
    int wg = threadIdx.x >> 7, lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        if (PROD && threadIdx.x == 0) {
            size_t off = (size_t)blockIdx.x * 7 * STAGE % WIN_BYTES / 16 * 16;
            for (int it = 0; it < iters; it++) {
                int s = it % NST;
                if (it >= NST) mbar_wait(&empty[s], (it / NST - 1) & 1);
                mbar_expect_tx(&full[s], bytes);
                if (off + bytes > WIN_BYTES) off = 0;
                bulk_load(sm + s * STAGE, src + off, bytes, &full[s]);
                off += bytes;
            }
        }
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int cw = wg - 1;
    float tot[64];
#pragma unroll
    for (int q = 0; q < 64; q++) tot[q] = 0.0f;
    const float sc = 1.0f + lane * 1e-3f;
    /* the stage of k-block it: waited for (PROD) */
#define STAGE_OF(it) (PROD ? (mbar_wait(&full[(it) % NST], ((it) / NST) & 1), sm + ((it) % NST) * STAGE) : sm + ((it) % NST) * STAGE)
/* accumulators start defined (the MMAs' first k32 step ignores them; ptxas serializes the MMAs otherwise, C7514) */
#define ZERO(A) zero(A)
#define RELEASE(it) \
    do { if (PROD && lane == 0) mbar_arrive(&empty[(it) % NST]); } while (0)
    if (MODE == 0) {   /* f8_tma_kernel's loop: straight-line pairs (a branch among the MMAs serializes them, C7514) */
        float aa[64], ab[64];
        ZERO(aa);
        ZERO(ab);
#define ISSUE128(ACC, IT)                                                                                                \
    do {                                                                                                                 \
        unsigned char *st_ = STAGE_OF(IT);                                                                              \
        wg_fence();                                                                                                         \
        ss128_kblock(ACC, st_ + cw * 8192, st_ + A_BYTES);                                                             \
        wg_commit();                                                                                                        \
    } while (0)
        ISSUE128(aa, 0);
        int it = 0;
        for (; it + 2 < iters; it += 2) {
            ISSUE128(ab, it + 1);
            wg_wait1();
            RELEASE(it);
            promote<64>(tot, aa, sc);
            ISSUE128(aa, it + 2);
            wg_wait1();
            RELEASE(it + 1);
            promote<64>(tot, ab, sc);
        }
        /* the tail as f8_tma_kernel's, both ways: with only the even-count way (iters is even) ptxas serializes every
         * MMA (C7514), its accumulator analysis following the path where the count is odd */
        if (it + 1 < iters) {
            ISSUE128(ab, it + 1);
            wg_wait1();
            RELEASE(it);
            promote<64>(tot, aa, sc);
            wg_wait0();
            RELEASE(it + 1);
            promote<64>(tot, ab, sc);
        } else {
            wg_wait0();
            RELEASE(it);
            promote<64>(tot, aa, sc);
        }
    } else if (MODE == 1) {
        float acc[128];
        ZERO(acc);
        for (int it = 0; it < iters; it++) {
            unsigned char *st = STAGE_OF(it);
            wg_fence();
#pragma unroll
            for (int j = 0; j < 4; j++) wg_ss_n256(acc, wg_desc(st + cw * 8192 + 32 * j), wg_desc(st + A_BYTES + 32 * j), j);
            wg_commit();
            wg_wait0();
            RELEASE(it);
            promote<128>(tot, acc, sc);
        }
    } else if (MODE == 2) {
        float acc[64];
        ZERO(acc);
        uint32_t a[4][4];
        for (int it = 0; it < iters; it++) {
            unsigned char *st = STAGE_OF(it);
#pragma unroll
            for (int j = 0; j < 4; j++) load_a(a[j], st + cw * 8192 + warp * 16 * 128, j, lane);
#pragma unroll
            for (int h = 0; h < 2; h++) {
                wg_fence();
#pragma unroll
                for (int j = 0; j < 4; j++) wg_rs_n128(acc, a[j], wg_desc(st + A_BYTES + h * 16384 + 32 * j), j);
                wg_commit();
                wg_wait0();
                if (h) RELEASE(it);
                promote<64>(tot, acc, sc + h);
            }
        }
    } else if (MODE == 3) {
        float qa[32], qb[32];
        ZERO(qa);
        ZERO(qb);
        uint32_t a0[4][4], a1[4][4];
        /* quarters g = 4 it + q in order; quarter g's MMAs into (g even ? qa : qb); after issuing g, wait for g - 1 and
         * promote it; k-block it's stage released once its last quarter is waited for (after the next k-block's first
         * quarter is issued). A of even k-blocks in a0, odd in a1: a load never overwrites registers a pending quarter
         * reads. Straight-line: k-block 0 peeled, then pairs (odd, even), then the last (odd) k-block. */
#define LOAD_A(A, ST) load_a4(A, (ST) + cw * 8192 + warp * 16 * 128, lane)
#define QUARTER(A, ST, Q)                                                                                                \
    do {                                                                                                                 \
        wg_fence();                                                                                                         \
        rs64_kblock((Q) & 1 ? qb : qa, A, (ST) + A_BYTES + (Q) * 8192);                                                 \
        wg_commit();                                                                                                        \
    } while (0)
#define QUARTER_W(A, ST, Q)                                                                                              \
    do {                                                                                                                 \
        QUARTER(A, ST, Q);                                                                                               \
        wg_wait1();                                                                                                         \
        if ((Q) & 1) promote<32>(tot, qa, sc);                                                                           \
        else promote<32>(tot, qb, sc);                                                                                   \
    } while (0)
#define KBLOCK(A, IT)                                                                                                    \
    do {                                                                                                                 \
        unsigned char *st_ = STAGE_OF(IT);                                                                              \
        LOAD_A(A, st_);                                                                                                  \
        QUARTER_W(A, st_, 0);                                                                                            \
        RELEASE((IT) - 1);                                                                                               \
        QUARTER_W(A, st_, 1);                                                                                            \
        QUARTER_W(A, st_, 2);                                                                                            \
        QUARTER_W(A, st_, 3);                                                                                            \
    } while (0)
        unsigned char *st = STAGE_OF(0);
        LOAD_A(a0, st);
        QUARTER(a0, st, 0);
        QUARTER_W(a0, st, 1);
        QUARTER_W(a0, st, 2);
        QUARTER_W(a0, st, 3);
        int it = 1;
        for (; it + 1 < iters; it += 2) {
            KBLOCK(a1, it);
            KBLOCK(a0, it + 1);
        }
        if (it < iters) {   /* (always: iters is even; both ways written for ptxas, as mode 0's tail) */
            KBLOCK(a1, it);
            wg_wait0();
            promote<32>(tot, qb, sc);
        } else {
            wg_wait0();
            promote<32>(tot, qb, sc);
        }
        RELEASE(iters - 1);
    } else if (MODE == 4) {
        float acc[128];
        ZERO(acc);
        for (int it = 0; it < iters; it++) {
            unsigned char *st = STAGE_OF(it);
            wg_fence();
#pragma unroll
            for (int j = 0; j < 4; j++) wg_ss_n256(acc, wg_desc(st + cw * 8192 + 32 * j), wg_desc(st + A_BYTES + 32 * j), it | j);
            wg_commit();
            if (PROD) {
                wg_wait1();
                if (it > 0) RELEASE(it - 1);
            }
        }
        wg_wait0();
        if (PROD) RELEASE(iters - 1);
        promote<128>(tot, acc, sc);
    } else if (MODE == 5) {
        float acc[64];
        ZERO(acc);
        for (int it = 0; it < iters; it++) {
            unsigned char *st = STAGE_OF(it);
            wg_fence();
#pragma unroll
            for (int j = 0; j < 4; j++) wg_ss_n128(acc, wg_desc(st + cw * 8192 + 32 * j), wg_desc(st + A_BYTES + 32 * j), it | j);
            wg_commit();
            if (PROD) {
                wg_wait1();
                if (it > 0) RELEASE(it - 1);
            }
        }
        wg_wait0();
        if (PROD) RELEASE(iters - 1);
        promote<64>(tot, acc, sc);
    } else {
        float acc[32];
        ZERO(acc);
        uint32_t a[4][4];
#pragma unroll
        for (int j = 0; j < 4; j++) load_a(a[j], sm + cw * 8192 + warp * 16 * 128, j, lane);
        for (int it = 0; it < iters; it++) {
            unsigned char *st = STAGE_OF(it);
            wg_fence();
#pragma unroll
            for (int q = 0; q < 4; q++)
#pragma unroll
                for (int j = 0; j < 4; j++) wg_rs_n64(acc, a[j], wg_desc(st + A_BYTES + q * 8192 + 32 * j), it | q | j);
            wg_commit();
            if (PROD) {
                wg_wait1();
                if (it > 0) RELEASE(it - 1);
            }
        }
        wg_wait0();
        if (PROD) RELEASE(iters - 1);
        promote<32>(tot, acc, sc);
    }
    float s = 0.0f;
#pragma unroll
    for (int q = 0; q < 64; q++) s += tot[q];
    sink[blockIdx.x * 256 + threadIdx.x - 128] = s;
}

typedef void (*kfn)(const unsigned char *, int, float *);
static const char *names[7] = {"n128 SS two acc (f8_tma_kernel)", "n256 SS one acc, wait each k-block",
                               "n256 = 2 x n128 RS (A ldmatrix), wait each half", "n256 = 4 x n64 RS, two acc across quarters",
                               "n256 SS raw", "n128 SS raw", "n64 RS raw"};

template <int MODE>
static void run(const unsigned char *src, float *sink, int n_sm, int iters, double peak) {
    kfn k[2] = {rate_kernel<MODE, false>, rate_kernel<MODE, true>};
    int width = (MODE == 0 || MODE == 5) ? 128 : 256;
    for (int p = 0; p < 2; p++) {
        size_t smem = NST * STAGE + 2 * NST * 8 + 1024;
        CK(cudaFuncSetAttribute(k[p], cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        k[p]<<<n_sm, 384, smem>>>(src, 64, sink);   /* warm-up */
        CK(cudaGetLastError());
        CK(cudaEventRecord(e0));
        k[p]<<<n_sm, 384, smem>>>(src, iters, sink);
        CK(cudaGetLastError());
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        double flop = 2.0 * n_sm * 128.0 * width * 128.0 * iters;
        double tf = flop / (ms * 1e-3) / 1e12;
        printf("mode %d %-48s %-8s %8.3f ms %7.1f TFLOP/s", MODE, names[MODE], p ? "TMA" : "no-load", ms, tf);
        if (peak > 0) printf("  %5.1f%% of %.0f", 100.0 * tf / peak, peak);
        printf("\n");
        CK(cudaEventDestroy(e0));
        CK(cudaEventDestroy(e1));
    }
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 4096;
    double peak = argc > 2 ? atof(argv[2]) : 0.0;   /* e.g. `dsinfer bench --ceilings`'s FP8 GEMM rate */
    if (iters < 2 || iters % 2) {
        fprintf(stderr, "usage: wgmma_rate [ITERS (even, >= 2)] [PEAK_TFLOPS]\n");
        return 2;
    }
    int n_sm;
    CK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, 0));
    unsigned char *src;
    float *sink;
    CK(cudaMalloc(&src, SRC_BYTES));
    CK(cudaMemset(src, 0x31, SRC_BYTES));
    CK(cudaMalloc(&sink, (size_t)n_sm * 256 * sizeof(float)));
    printf("wgmma_rate: %d SMs, %d k-blocks of 128 columns a consumer warpgroup, 2 consumer warpgroups of 64 rows an SM\n", n_sm,
           iters);
    run<5>(src, sink, n_sm, iters, peak);
    run<0>(src, sink, n_sm, iters, peak);
    run<4>(src, sink, n_sm, iters, peak);
    run<1>(src, sink, n_sm, iters, peak);
    run<6>(src, sink, n_sm, iters, peak);
    run<2>(src, sink, n_sm, iters, peak);
    run<3>(src, sink, n_sm, iters, peak);
    CK(cudaFree(src));
    CK(cudaFree(sink));
    return 0;
}
