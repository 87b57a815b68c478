/* Measurements for `dsinfer bench` on the GPU: the two ceilings every roofline is drawn against (a large
 * device-to-device copy, bytes read + written over time; a large BF16 GEMM through cuBLAS on random
 * data, fp32 accumulation) and the absorbed MLA decode op alone over a paged latent cache (distinct
 * shuffled pages, random latents). Times with CUDA events on the backend's stream, after a warm-up,
 * median of the repetitions. */
#include <stdio.h>
#include <stdlib.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_grid.h"
#include "backend/cuda/cuda_wgmma.h"
#include "backend/cuda/cuda_own.h"
#include "backend/cuda/cuda_lab.h"

__global__ void bench_fill_kernel(void *p, size_t n, uint64_t seed, int bf16) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        float u = (float)((z ^ (z >> 31)) >> 40) * (1.0f / 8388608.0f) - 1.0f;
        if (bf16) ((__nv_bfloat16 *)p)[i] = __float2bfloat16(u);
        else ((float *)p)[i] = u;
    }
}

/* n_tok entries of the FP8 KV layout (cuda.h): e4m3 bytes with |v| in [0.25, 3.75], scales 1/64, k_pe
 * bf16 in [-1, 1): finite values like a real cache, so the timing sees no NaN paths. */
__global__ void bench_fill_kv_fp8_kernel(unsigned char *cache, size_t n_tok, int C, int dr, size_t tb, uint64_t seed) {
    int nb = (C + 127) >> 7;
    for (size_t t = blockIdx.x; t < n_tok; t += gridDim.x) {
        unsigned char *e = cache + t * tb;
        for (int k = threadIdx.x; k < C + dr; k += blockDim.x) {
            uint64_t z = seed + (t * 4096 + k + 1) * 0x9e3779b97f4a7c15ull;
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
            z ^= z >> 31;
            if (k < C) {
                unsigned b = (unsigned)z & 0xff;
                e[k] = (unsigned char)((b & 0x80) | ((5 + ((b >> 3) & 3)) << 3) | (b & 7));
            } else {
                unsigned short h = cu_f32_to_bf16_bits((float)(z >> 40) * (1.0f / 8388608.0f) - 1.0f);
                e[C + 4 * nb + 2 * (k - C)] = (unsigned char)h;
                e[C + 4 * nb + 2 * (k - C) + 1] = (unsigned char)(h >> 8);
            }
        }
        for (int i = threadIdx.x; i < 4 * nb; i += blockDim.x)
            e[C + i] = (unsigned char)(__float_as_uint(1.0f / 64) >> (8 * (i & 3)));
    }
}

static void fill_random(void *p, size_t n, uint64_t seed, int bf16) {
    bench_fill_kernel<<<4096, 256, 0, cu_stream>>>(p, n, seed, bf16);
    CUDA_LAUNCH_CHECK();
}

static int cmp_f(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Reads n float4 (the L2 flush: the lines it leaves are clean, so the timed kernel's misses do not wait on
 * write-backs as after a memset); the sum is stored only if it equals an unlikely value. */
__global__ void bench_read_kernel(const float4 *p, size_t n, float *sink) {
    float acc = 0.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float4 v = p[i];
        acc += v.x + v.y + v.z + v.w;
    }
    if (acc == 1234.5678f) *sink = acc;
}

/* Keeps the GPU busy for `cycles` SM clocks (time_gpu_median: the host issues the timed work meanwhile). */
__global__ void bench_spin_kernel(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

/* Median milliseconds of `reps` runs of fn(ctx) timed with events (after one warm-up run). gpu_only: each
 * run from a cold L2 (flush: a buffer larger than the L2 read first, or NULL) and without the host's issue
 * time: a spin kernel of ~200 us runs while the host issues fn's launches behind the start event, so the
 * events bracket the kernels alone. Otherwise the figure includes the host's issue time when it exceeds the
 * kernels' (about 20 us for a cuBLASLt call). */
static double time_runs(void (*fn)(void *), void *ctx, int reps, int gpu_only, void *flush, size_t flush_bytes) {
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    fn(ctx);
    float t[64];
    if (reps > 64) reps = 64;
    for (int r = 0; r < reps; r++) {
        if (gpu_only && flush) {
            bench_read_kernel<<<1024, 256, 0, cu_stream>>>((const float4 *)flush, flush_bytes / 16 - 1,
                                                           (float *)flush + flush_bytes / 4 - 1);
            CUDA_LAUNCH_CHECK();
        }
        if (gpu_only) {
            bench_spin_kernel<<<1, 1, 0, cu_stream>>>(400000);
            CUDA_LAUNCH_CHECK();
        }
        CUDA_CHECK(cudaEventRecord(a, cu_stream));
        fn(ctx);
        CUDA_CHECK(cudaEventRecord(b, cu_stream));
        CUDA_CHECK(cudaEventSynchronize(b));
        CUDA_CHECK(cudaEventElapsedTime(&t[r], a, b));
    }
    qsort(t, (size_t)reps, sizeof(float), cmp_f);
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
    return t[reps / 2];
}
static double time_median(void (*fn)(void *), void *ctx, int reps) { return time_runs(fn, ctx, reps, 0, NULL, 0); }
static double time_gpu_median(void (*fn)(void *), void *ctx, int reps, void *flush, size_t flush_bytes) {
    return time_runs(fn, ctx, reps, 1, flush, flush_bytes);
}
double cu_lab_time_cold(void (*fn)(void *), void *ctx, int reps, void *flush, size_t flush_bytes) {
    return time_gpu_median(fn, ctx, reps, flush, flush_bytes);
}

typedef struct { void *dst; const void *src; size_t n; } copy_ctx;
static void do_copy(void *c) {
    copy_ctx *x = (copy_ctx *)c;
    CUDA_CHECK(cudaMemcpyAsync(x->dst, x->src, x->n, cudaMemcpyDeviceToDevice, cu_stream));
}

typedef struct { cublasHandle_t h; const void *A, *B; float *C; int n; } gemm_ctx;
static void do_gemm(void *c) {
    gemm_ctx *g = (gemm_ctx *)c;
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasGemmEx(g->h, CUBLAS_OP_T, CUBLAS_OP_N, g->n, g->n, g->n, &one, g->A, CUDA_R_16BF, g->n, g->B,
                              CUDA_R_16BF, g->n, &zero, g->C, CUDA_R_32F, g->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

extern "C" ds_status ds_cuda_ceilings(double *copy_gbs, double *bf16_tflops, char *err) {
    char why[256];
    if (!ds_cuda_available(why, sizeof why)) return ds_seterr(err, DS_ERR_BACKEND, "%s", why);
    if (!cu_stream) CUDA_CHECK(cudaStreamCreate(&cu_stream));
    size_t n = (size_t)2 << 30;   /* 2 GiB each way: far past the 50 MB L2 */
    void *a = NULL, *b = NULL;
    if (cudaMalloc(&a, n) != cudaSuccess || cudaMalloc(&b, n) != cudaSuccess) {
        cudaGetLastError();
        if (a) cudaFree(a);
        return ds_seterr(err, DS_ERR_NOMEM, "ceilings: cannot allocate 4 GiB on the GPU");
    }
    fill_random(a, n / 4, 1, 0);
    copy_ctx cc = {b, a, n};
    double ms = time_median(do_copy, &cc, 9);
    *copy_gbs = 2.0 * (double)n / (ms * 1e-3) / 1e9;
    CUDA_CHECK(cudaFree(b));
    int N = 8192;
    size_t e = (size_t)N * N;
    float *C = (float *)a;   /* 256 MiB of the 2 GiB */
    void *A, *B;
    CUDA_CHECK(cudaMalloc(&A, 2 * e * 2));
    B = (char *)A + e * 2;
    fill_random(A, 2 * e, 2, 1);
    gemm_ctx g = {NULL, A, B, C, N};
    CUBLAS_CHECK(cublasCreate(&g.h));
    CUBLAS_CHECK(cublasSetStream(g.h, cu_stream));
    ms = time_median(do_gemm, &g, 9);
    *bf16_tflops = 2.0 * (double)N * N * N / (ms * 1e-3) / 1e12;
    cublasDestroy(g.h);
    CUDA_CHECK(cudaFree(A));
    CUDA_CHECK(cudaFree(a));
    return DS_OK;
}

/* ---- launch gaps (bench --ceilings): what a kernel boundary costs inside a CUDA graph, plainly and with programmatic
 * dependent launch (PDL). The decode step at batch 1 is ~540 kernels, at batch 64 the experts' down launch follows the
 * quantizer of its input: the twenty-fourth session measured FP8's down launched with PDL after that quantizer 0.05 ..
 * 0.2 ms a step slower, where BF16's down with PDL after gate / up gained 0.17 ms (dev/cuda/KERNELS.md). The pairs here
 * have those kernels' shapes and no work: a wide short kernel (the quantizer's grid, 8 warps a block, one store a
 * thread, its PDL trigger at its start or after its store) followed by a persistent one (a block an SM holding the
 * shared memory of moe_wg_kernel, one store a block after griddepcontrol.wait). */
__global__ void gap_empty_kernel(int *p) {
    cu_pdl_trigger();
    cu_pdl_wait();
    if (p && threadIdx.x == 0 && blockIdx.x == 0) p[0] += 1;
}
__global__ void gap_wide_kernel(int *p, int late) {
    if (!late) cu_pdl_trigger();
    cu_pdl_wait();
    p[blockIdx.x * (size_t)blockDim.x + threadIdx.x] = (int)threadIdx.x;
    if (late) cu_pdl_trigger();
}
__global__ void gap_persist_kernel(int *p) {
    cu_pdl_trigger();
    cu_pdl_wait();
    extern __shared__ int gap_sm[];
    if (threadIdx.x == 0) {
        gap_sm[0] = p[blockIdx.x];
        p[blockIdx.x] = gap_sm[0] + 1;
    }
}

/* A grid-wide barrier of a cooperative (co-resident) grid: thread 0 of each block reads the generation, arrives on the
 * count; the last to arrive puts the count back to zero and moves the generation on, the others spin until it moves.
 * The cost a layer-persistent decode kernel would pay a phase boundary instead of a launch (dev/cuda/KERNELS.md, the
 * twenty-ninth session's next step 3). */
__device__ __forceinline__ void gap_grid_barrier(unsigned *count, unsigned *gen) {
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned g = *(volatile unsigned *)gen;   /* before arriving: the generation cannot move until this block has */
        __threadfence();
        if (atomicAdd(count, 1u) == gridDim.x - 1) {
            *(volatile unsigned *)count = 0;
            __threadfence();
            atomicAdd(gen, 1u);
        } else {
            while (*(volatile unsigned *)gen == g) {}
        }
        __threadfence();
    }
    __syncthreads();
}
/* The same barrier with acquire / release operations instead of full fences: the generation read with ld.acquire, the
 * arrival an atom.acq_rel, the last block's count reset (relaxed) ordered before its release of the generation; the
 * others spin on ld.acquire. A block arriving at the next barrier acquired the new generation, so it sees the reset
 * (cuda_grid.h cu_grid_sync without its fences). */
__device__ __forceinline__ void gap_grid_barrier_ar(unsigned *count, unsigned *gen) {
    cu_grid_sync(count, gen, 0, blockDim.x, threadIdx.x == 0, false);
}
/* n barriers (form 0: fences, 1: acquire / release) in one launch of a block an SM (moe_wg_kernel's shared memory), each
 * after a store a block; after each, the next block's count must have reached this one's (it may be one further: that
 * block may already be past the barrier and its next store), else bar[2] counts a barrier that let a block through early */
__global__ void gap_barrier_kernel(int *p, unsigned *bar, int n, int form) {
    extern __shared__ int gap_sm2[];
    const unsigned next = (blockIdx.x + 1) % gridDim.x;
    for (int i = 0; i < n; i++) {
        if (threadIdx.x == 0) {
            gap_sm2[0] = p[blockIdx.x] + 1;
            *(volatile int *)&p[blockIdx.x] = gap_sm2[0];
        }
        if (form) gap_grid_barrier_ar(bar, bar + 1);
        else gap_grid_barrier(bar, bar + 1);
        if (threadIdx.x == 0 && *(volatile int *)&p[next] < gap_sm2[0]) atomicAdd(&bar[2], 1u);
    }
}

/* The overlap argument for a layer-persistent kernel (KERNELS.md, thirtieth session): two GEMV-sized reads (a of na
 * 16-byte words, then b of nb; batch 1's q and o weights are ~6 and ~4 MB; each repetition of the pair reads its own
 * buffers, from DRAM) as two kernels, or as two phases of one cooperative launch around a grid barrier, optionally with
 * b's lines asked of L2 (prefetch.global.L2) before the barrier. The grid's threads read the words in a grid-stride
 * loop; a block's sum is stored only if it equals a value the zero-filled buffers never sum to, so that no load is left
 * out and nothing is written. */
__device__ __forceinline__ float gap_read(const uint4 *w, size_t n) {
    float s = 0.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = __ldcs(w + i);
        s += __uint_as_float(v.x) + __uint_as_float(v.y) + __uint_as_float(v.z) + __uint_as_float(v.w);
    }
    return s;
}
__global__ void gap_read_kernel(const uint4 *w, size_t n, float *out) {
    float s = gap_read(w, n);
    if (s == 12345.0f) out[blockIdx.x] = s;   /* never true for the zero-filled buffer: keeps the loads */
}
__global__ void gap_phases_kernel(const uint4 *a, size_t na, const uint4 *b, size_t nb, float *out, unsigned *bar, int pf) {
    float s = gap_read(a, na);
    if (pf)   /* b's 128-byte lines (8 words each) over the grid's threads, one request a line */
        for (size_t l = blockIdx.x * (size_t)blockDim.x + threadIdx.x; l < nb / 8; l += (size_t)gridDim.x * blockDim.x)
            asm volatile("prefetch.global.L2 [%0];" ::"l"(b + 8 * l));
    gap_grid_barrier_ar(bar, bar + 1);
    s += gap_read(b, nb);
    if (s == 12345.0f) out[blockIdx.x] = s;
}

#define GAP_PAIRS 64
#define GAP_WA_BYTES ((size_t)6 << 20)   /* batch 1's q weights' size */
#define GAP_WB_BYTES ((size_t)4 << 20)   /* its o weights' */
/* The streamed phases: the premise of a step-persistent batch-1 kernel (KERNELS.md, thirty-third session). The same
 * GAP_PAIRS x (6 MB + 4 MB) as above, but all in ONE cooperative launch of 2 GAP_PAIRS phases; a block's share of a
 * phase (its contiguous 1 / gridDim of the bytes, sp_range) comes into a ring of SP_ST shared-memory stages by one
 * producer thread's 1-D bulk copies, and 8 consumer warps sum each stage (an integer sum of its 32-bit words, so that
 * the host can check that every byte was read once) and give it back. Between two phases the consumers pass a grid
 * barrier, standing for a data dependency (norm -> GEMV). mode 0: no barriers (the stream alone); 1: barriers, the
 * producer runs ahead across them (weights do not depend on the phase before); 2: barriers, and the producer waits for
 * phase p's barrier before its copies (the routed experts' weights, known only after routing); 3: as 1, with each
 * barrier a counter instead (KERNELS.md, forty-second session): a block's consumer leader adds 1 to cnt with a release
 * reduction once the block's share of phase p is summed, and polls cnt (acquire) until every block's is, (p + 1) gridDim:
 * no returned atomic and no second hop through a generation word; cnt is zeroed before the launch. 4: as 3, with each
 * phase dealt by free blocks: the producer takes SP_CHUNK-byte chunks of the phase from take[p] (a returned atomic, two
 * taken ahead so that its latency hides under the copies) until none are left, and ends its share with an empty stage
 * (meta 0); so that every block ends a phase within about a chunk of the others (the skew mode 3's stamps measure).
 * With stamp (modes 3, 4), the consumers' leader stamps %globaltimer (ns) as it adds (stamp[2 (p gridDim + b)]) and as it
 * passes (+ 1), so that the host splits a counter's cost into skew (the last block's add less this block's) and
 * propagation (this block's pass less the last add). nst (2 .. SP_ST): the ring's stages used, so the bytes in flight an
 * SM (the forty-second session's lab: a dependency's propagation against the memory system's queues). 5 (forty-third
 * session): as 3, with each dependency kept inside a thread-block cluster of cl blocks (a clustered launch, not a
 * cooperative one): a phase's consumers need only their cluster's blocks. Each block keeps two mbarriers (count cl,
 * phases alternating between them); once a block's share of phase p is summed its consumers' leader arrives on
 * dep[p & 1] of every block of its cluster (mapa, a remote arrive with cluster-scope release) and waits on its own
 * (cluster-scope acquire). Two barriers, because a block may arrive for p + 1 before a slower block's arrives for p
 * have all landed elsewhere; its arrives for p + 2 come after it acquired every block's p + 1 arrives, which each block
 * released after its p arrives. No block leaves while another may still arrive on it: every arrive on a block is one
 * it waits for before its last phase. Stamped as 3 (skew and propagation against the cluster's last arrive). 6: as 3,
 * the leader's polls relaxed and one acquire fence after the count is seen (what an acquire a poll costs). 7: as 5,
 * with no release fence: the leader arms its own dep[p & 1] for cl 4-byte messages (one arrive with expect_tx, the
 * barrier's count 1) and sends each block of its cluster (itself included) p + 1 by st.async into slot[p & 1][its
 * rank] there, completing those bytes on that block's dep[p & 1]: the message's landing is the signal, as TMA's bytes
 * are a stage's (a peer's message may land before the local arm: the transaction count goes negative until it). After
 * the wait the leader checks that the cl slots hold p + 1 (else the word sum is spoiled). 8: as 3, with the counter's
 * add made by the async proxy, `cp.reduce.async.bulk ... add.u32` of 16 bytes {1, 0, 0, 0} from shared memory onto the
 * counter's 16 (no release fence in the generic proxy: what a bulk reduction of a block's partial sums into the layer's
 * output, then of its count, would cost), the leader's polls acquire loads as in 3. 9: as 8, with the block's partial
 * sums sent first: a bulk reduction (`.add.f32`) of SP_PART floats of shared memory (all 1.0f) onto acc, waited for until
 * complete, then the count's (the order a real kernel's consumers need: the sums before the count); the host checks acc
 * after the last launch (each float the launch's adds, 2 GAP_PAIRS - 1 a block). 10 (a clustered launch): as 9, with
 * the sums reduced inside the cluster first: block j of the cluster owns the row's floats [j pw, (j + 1) pw), pw =
 * SP_PART / cl; the 256 consumers send each 16-byte piece of the block's row to its owner by st.async (completing on the
 * owner's dep[p & 1], armed by its leader for the SP_PART * 4 bytes it receives), wait, add the cl pieces they own, and
 * the leader bulk-reduces those pw floats onto acc (cl-way contention a line instead of the grid's), waits for it, and
 * counts as 8 does: the grid's counter, so the whole grid must be resident at once (the launch is as many clusters as
 * fit, a block an SM). recv[p & 1] is written again at p + 2 only after every block counted p + 1, which this block does
 * after it read recv[p & 1]. */
#define SP_STAGE (32 * 1024)
#define SP_ST 6
#define SP_THREADS (32 + 256)
#define SP_CHUNK (16 * 1024)   /* mode 4's unit of a phase: 384 of a 6 MB phase, 256 of a 4 MB one */
#define SP_PART 2048   /* modes 9, 10: the floats of a block's partial sums (a V2-Lite hidden row) */
#define SP_SMEM (SP_ST * SP_STAGE + (2 * SP_ST + 2) * 8 + SP_ST * 4 + 16 + 2 * 16 * 4 + 3 * SP_PART * 4 + 1024)

/* block b's bytes [lo, hi) of a phase of n bytes over nb blocks: 16-byte multiples, the last block's share the short one */
__device__ __forceinline__ void sp_range(size_t n, int b, int nb, size_t *lo, size_t *hi) {
    size_t per = (n / 16 + (size_t)nb - 1) / (size_t)nb * 16;
    *lo = (size_t)b * per < n ? (size_t)b * per : n;
    *hi = *lo + per < n ? *lo + per : n;
}
/* phase p's buffer and bytes: the pairs' a (6 MB) then b (4 MB), each pair its own 10 MB */
__device__ __forceinline__ const unsigned char *sp_phase(const unsigned char *w, int p, size_t *n) {
    *n = p & 1 ? GAP_WB_BYTES : GAP_WA_BYTES;
    return w + (size_t)(p >> 1) * (GAP_WA_BYTES + GAP_WB_BYTES) + (p & 1 ? GAP_WA_BYTES : 0);
}
/* a consumer thread's (ct of 256) part of the 32-bit words' sum of a landed stage of `words` 16-byte words, added to
 * *sum; then its warp gives the stage back (lane 0 arrives on empty) */
__device__ __forceinline__ void sp_sum_stage(const unsigned char *stage, int words, int ct, int lane, uint64_t *empty,
                                             unsigned *sum) {
    const uint4 *v = (const uint4 *)stage;
    for (int i = ct; i < words; i += 256) {
        uint4 x = v[i];
        *sum += x.x + x.y + x.z + x.w;
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(empty);
}
/* modes 3, 4, 6, 8: add 1 to the grid's counter (release; or, with one16, by a bulk reduction of the 16 shared bytes
 * {1, 0, 0, 0} at one16 onto the counter's 16, waited for until its source is read) and poll it until it reaches need:
 * acquire polls, or relaxed polls and one acquire fence after (relaxed) */
__device__ __forceinline__ void sp_counter(unsigned *cnt, unsigned need, bool relaxed, const unsigned *one16) {
    unsigned v;
    if (one16) {
        asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32 [%0], [%1], 16;\n"
                     "cp.async.bulk.commit_group;\n"
                     "cp.async.bulk.wait_group.read 0;\n" ::"l"(cnt), "r"(cu_smem_addr(one16))
                     : "memory");
    } else {
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(cnt) : "memory");
    }
    if (relaxed) {
        do {
            asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(cnt) : "memory");
        } while (v < need);
        asm volatile("fence.acq_rel.gpu;" ::: "memory");
    } else {
        do {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(cnt) : "memory");
        } while (v < need);
    }
}
/* modes 9, 10: bulk-reduce (add.f32) the bytes of shared memory at src onto dst, and wait until it is complete */
__device__ __forceinline__ void sp_bulk_add_f32(float *dst, const float *src, int bytes) {
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n"
                 "cp.async.bulk.commit_group;\n"
                 "cp.async.bulk.wait_group 0;\n" ::"l"(dst), "r"(cu_smem_addr(src)), "r"(bytes)
                 : "memory");
}
/* the stamped forms: this block's signal (t0) and pass (now) times of dependency p */
__device__ __forceinline__ void sp_stamp(unsigned long long *stamp, int p, unsigned long long t0) {
    unsigned long long t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    stamp[2 * ((size_t)p * gridDim.x + blockIdx.x)] = t0;
    stamp[2 * ((size_t)p * gridDim.x + blockIdx.x) + 1] = t1;
}
/* mode 5: arrive (cluster-scope release) on the mbarrier at shared address d in each of the cluster's cl blocks */
__device__ __forceinline__ void sp_cluster_arrive(uint32_t d, int cl) {
    for (int r = 0; r < cl; r++) {
        uint32_t rd;
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(rd) : "r"(d), "r"(r));
        asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(rd) : "memory");
    }
}
/* mode 7: arm this block's mbarrier bar (shared address d) for cl 4-byte messages, then store v into slot[this block's
 * rank] (slots at shared address sl) of each of the cluster's blocks, each store completing its bytes on that block's
 * mbarrier at d */
__device__ __forceinline__ void sp_cluster_send(uint32_t d, uint32_t sl, uint64_t *bar, int cl, unsigned v) {
    uint32_t me;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(me));
    mbar_expect_tx(bar, 4 * cl);
    for (int r = 0; r < cl; r++) {
        uint32_t rd, rs;
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(rd) : "r"(d), "r"(r));
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(rs) : "r"(sl + 4 * me), "r"(r));
        asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [%0], %1, [%2];\n" ::"r"(rs), "r"(v),
                     "r"(rd)
                     : "memory");
    }
}
/* modes 5, 7: wait (cluster-scope acquire) for the phase with this parity of the mbarrier at shared address d */
__device__ __forceinline__ void sp_cluster_wait(uint32_t d, int parity) {
    uint32_t done = 0;
    while (!done)
        asm volatile("{\n.reg .pred q;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 q, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, q;\n}\n"
                     : "=r"(done)
                     : "r"(d), "r"(parity)
                     : "memory");
}
/* total: the 32-bit words' sum over every block and launch (mod 2^32; the host's check) */
__global__ void __launch_bounds__(SP_THREADS, 1) sp_stream_kernel(const unsigned char *w, unsigned *total, unsigned *bar,
                                                                   unsigned *cnt, unsigned *take,
                                                                   unsigned long long *stamp, float *acc, int mode,
                                                                   int phases, int nst, int cl) {
    extern __shared__ unsigned char sp_raw[];
    unsigned char *ring = (unsigned char *)(((uintptr_t)sp_raw + 1023) & ~(uintptr_t)1023);
    uint64_t *full = (uint64_t *)(ring + SP_ST * SP_STAGE), *empty = full + SP_ST;
    uint64_t *dep = empty + SP_ST;       /* mode 5: [2] the cluster's arrives for the even / odd phases */
    int *meta = (int *)(dep + 2);   /* mode 4: [SP_ST] a stage's bytes, 0 at the end of the block's share of a phase */
    /* mode 7: [2][16] the cluster's messages, by sender rank; mode 8: slot[0 .. 3] = {1, 0, 0, 0}, the bulk add's source
     * (16-byte aligned, as a bulk copy's source must be) */
    unsigned *slot = (unsigned *)(((uintptr_t)(meta + SP_ST) + 15) & ~(uintptr_t)15);
    float *part = (float *)(slot + 2 * 16);   /* modes 9, 10: [SP_PART] the partial sums sent (16-byte aligned) */
    float *recv = part + SP_PART;             /* mode 10: [2][cl][SP_PART / cl] the pieces received, by sender rank */
    if (mode == 9 || mode == 10) {
        for (int i = threadIdx.x; i < SP_PART; i += blockDim.x) part[i] = 1.0f;
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");   /* seen by the async proxy */
    }
    if (threadIdx.x == 0) {
        for (int s = 0; s < SP_ST; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 8);   /* the 8 consumer warps */
        }
        mbar_init(&dep[0], mode == 7 || mode == 10 ? 1 : cl);
        mbar_init(&dep[1], mode == 7 || mode == 10 ? 1 : cl);
        slot[0] = 1u;
        slot[1] = slot[2] = slot[3] = 0u;
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");   /* the source seen by the async proxy */
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (mode == 5 || mode == 7 || mode == 10)   /* every block's dep initialised before any block arrives on it */
        asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
    if (threadIdx.x < 32) {   /* the producer: one thread */
        if (threadIdx.x) return;
        unsigned gen0;   /* the generation before this launch's first barrier (which needs this block's consumers, who
                          * need this thread's first copies: it cannot have moved yet) */
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(gen0) : "l"(bar + 1) : "memory");
        int it = 0;
        for (int p = 0; p < phases; p++) {
            if (mode == 2 && p > 0) {   /* phase p's addresses known only after barrier p - 1 */
                unsigned v;
                do {
                    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(bar + 1) : "memory");
                } while ((int)(v - gen0) < p);
            }
            size_t n, lo, hi;
            const unsigned char *src = sp_phase(w, p, &n);
            if (mode == 4) {   /* chunks taken as they come, two taken ahead; the share ended by an empty stage */
                const unsigned nch = (unsigned)((n + SP_CHUNK - 1) / SP_CHUNK);
                unsigned c0 = atomicAdd(&take[p], 1u), c1 = atomicAdd(&take[p], 1u);
                for (;; it++) {
                    int s = it % nst;
                    if (it >= nst) mbar_wait(&empty[s], (it / nst - 1) & 1);
                    if (c0 >= nch) {
                        meta[s] = 0;
                        mbar_arrive(&full[s]);
                        it++;
                        break;
                    }
                    const unsigned c2 = atomicAdd(&take[p], 1u);
                    const size_t o = (size_t)c0 * SP_CHUNK;
                    const int len = (int)(n - o < SP_CHUNK ? n - o : SP_CHUNK);
                    meta[s] = len;
                    mbar_expect_tx(&full[s], len);
                    bulk_load(ring + (size_t)s * SP_STAGE, src + o, len, &full[s]);
                    c0 = c1;
                    c1 = c2;
                }
                continue;
            }
            sp_range(n, blockIdx.x, gridDim.x, &lo, &hi);
            for (size_t o = lo; o < hi; o += SP_STAGE, it++) {
                int s = it % nst, len = (int)(hi - o < SP_STAGE ? hi - o : SP_STAGE);
                if (it >= nst) mbar_wait(&empty[s], (it / nst - 1) & 1);
                mbar_expect_tx(&full[s], len);
                bulk_load(ring + (size_t)s * SP_STAGE, src + o, len, &full[s]);
            }
        }
        return;
    }
    const int ct = threadIdx.x - 32, lane = threadIdx.x & 31;
    unsigned sum = 0;
    int it = 0;
    for (int p = 0; p < phases; p++) {
        size_t n, lo, hi;
        sp_phase(w, p, &n);
        if (mode == 4) {   /* the stages the producer filled, until its empty one */
            for (;; it++) {
                int s = it % nst;
                mbar_wait(&full[s], (it / nst) & 1);
                const int words = meta[s] / 16;
                sp_sum_stage(ring + (size_t)s * SP_STAGE, words, ct, lane, &empty[s], &sum);
                if (!words) {
                    it++;
                    break;
                }
            }
            lo = hi = 0;   /* the static share's loop below does nothing */
        } else {
            sp_range(n, blockIdx.x, gridDim.x, &lo, &hi);
        }
        for (size_t o = lo; o < hi; o += SP_STAGE, it++) {
            int s = it % nst, words = (int)(hi - o < SP_STAGE ? hi - o : SP_STAGE) / 16;
            mbar_wait(&full[s], (it / nst) & 1);
            sp_sum_stage(ring + (size_t)s * SP_STAGE, words, ct, lane, &empty[s], &sum);
        }
        if (mode == 10 && p + 1 < phases) {   /* the row reduced in the cluster, then counted (see above) */
            const int pw = SP_PART / cl;
            float *rv = recv + (p & 1) * SP_PART;
            const uint32_t d = cu_smem_addr(&dep[p & 1]);
            uint32_t me;
            asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(me));
            unsigned long long t0 = 0;
            asm volatile("bar.sync 1, 256;\n" ::: "memory");
            if (threadIdx.x == 32) {
                if (stamp) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
                mbar_expect_tx(&dep[p & 1], SP_PART * 4);
            }
            for (int c = ct; c < SP_PART / 4; c += 256) {
                const int r = 4 * c / pw, o = 4 * c - r * pw;
                const float4 v = *(const float4 *)(part + 4 * c);
                uint32_t ra, rb;
                asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(ra) : "r"(cu_smem_addr(rv + me * pw + o)), "r"(r));
                asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(rb) : "r"(d), "r"(r));
                asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];\n"
                             ::"r"(ra), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(rb)
                             : "memory");
            }
            sp_cluster_wait(d, (p >> 1) & 1);
            for (int i = ct; i < pw; i += 256) {   /* the owned floats' sums, in piece 0's place */
                float s = 0.0f;
                for (int r = 0; r < cl; r++) s += rv[r * pw + i];
                rv[i] = s;
            }
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");   /* the sums seen by the bulk reduction */
            asm volatile("bar.sync 1, 256;\n" ::: "memory");
            if (threadIdx.x == 32) {
                sp_bulk_add_f32(acc + me * pw, rv, pw * 4);
                sp_counter(cnt, (unsigned)(p + 1) * gridDim.x, false, slot);
                if (stamp) sp_stamp(stamp, p, t0);
            }
            asm volatile("bar.sync 1, 256;\n" ::: "memory");
        } else if (mode >= 3 && p + 1 < phases) {   /* a dependency: the 256 consumers meet, their leader signals and waits */
            asm volatile("bar.sync 1, 256;\n" ::: "memory");
            if (threadIdx.x == 32) {
                unsigned long long t0 = 0;
                if (stamp) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
                if (mode == 5 || mode == 7) {   /* the cluster's, on dep[p & 1] */
                    const uint32_t d = cu_smem_addr(&dep[p & 1]);
                    if (mode == 5) sp_cluster_arrive(d, cl);
                    else sp_cluster_send(d, cu_smem_addr(slot + (p & 1) * 16), &dep[p & 1], cl, (unsigned)p + 1);
                    sp_cluster_wait(d, (p >> 1) & 1);
                    if (mode == 7)
                        for (int r = 0; r < cl; r++)
                            if (slot[(p & 1) * 16 + r] != (unsigned)p + 1) sum += 1u;   /* a message lost or stale */
                } else {   /* the grid's counter (modes 3, 4, 6, 8, 9) */
                    if (mode == 9) sp_bulk_add_f32(acc, part, SP_PART * 4);   /* the sums first, complete before the count */
                    sp_counter(cnt, (unsigned)(p + 1) * gridDim.x, mode == 6, mode >= 8 ? slot : NULL);
                }
                if (stamp) sp_stamp(stamp, p, t0);
            }
            asm volatile("bar.sync 1, 256;\n" ::: "memory");
        } else if ((mode == 1 || mode == 2) && p + 1 < phases) {
            cu_grid_sync(bar, bar + 1, 1, 256, threadIdx.x == 32);   /* the 256 consumers */
        }
    }
    atomicAdd(total, sum);
}

#define GAP_WIDE_BLOCKS 704         /* rows_fp8_bf16_warp_kernel's grid at V2-Lite b64: 512 rows x 11 blocks / 8 */
#define GAP_SMEM (200 * 1024 + 4096)   /* about moe_wg_kernel's dynamic shared memory: one block an SM */

typedef struct {
    int kind, pdl, late, n_sm;
    int *p;
    unsigned *bar;   /* kind 2: the barrier's count and generation */
    int form;        /* kind 2: gap_barrier_kernel's form */
    void *w;         /* kinds 3 .. 8: GAP_PAIRS x (GAP_WA + GAP_WB) bytes to read */
    float *f;        /* kinds 3 .. 5: a float a block */
    float *acc;      /* mode 9: [SP_PART] the partial sums' target (zeroed before each launch) */
    unsigned *total; /* kinds 6 .. 9: sp_stream_kernel's word sum */
    unsigned *cnt;   /* modes 3, 4, 6, 8: the counter (16 bytes, zeroed before each launch) */
    unsigned *take;  /* mode 4: [2 GAP_PAIRS] the phases' chunks taken (zeroed before each launch) */
    unsigned long long *stamp;   /* the stamped kinds (sp_kinds): [2 GAP_PAIRS - 1][n_sm][2] add / pass times (ns) */
    int nst;         /* kinds 6 ..: sp_stream_kernel's stages used (SP_ST unless the ring-depth lab sets it) */
    int cl, cl_grid; /* the clustered kinds: the cluster's blocks and the launch's (a whole number of clusters) */
} gap_ctx;

/* The streamed kinds (6 and up): kind 6 + k is sp_kinds[k]: the kernel's mode, whether its leaders stamp, whether it is
 * a clustered launch (else a cooperative one of a block an SM) */
static const struct {
    int mode, stamped, clustered;
} sp_kinds[] = {
    {0, 0, 0}, {1, 0, 0}, {2, 0, 0}, {3, 0, 0}, {4, 0, 0},   /* 6 .. 10: modes 0 .. 4 */
    {3, 1, 0}, {4, 1, 0},                                    /* 11, 12: the counters, stamped */
    {5, 0, 1}, {5, 1, 1}, {0, 0, 1},                         /* 13 .. 15: the cluster's arrives, stamped; its free stream */
    {6, 0, 0}, {6, 1, 0},                                    /* 16, 17: relaxed polls */
    {7, 0, 1}, {7, 1, 1},                                    /* 18, 19: the cluster's messages */
    {8, 0, 0}, {8, 1, 0},                                    /* 20, 21: the bulk-reduction add */
    {9, 0, 0}, {9, 1, 0},                                    /* 22, 23: the same after the partial sums' */
    {10, 0, 1}, {10, 1, 1},                                  /* 24, 25: the sums reduced in the cluster first */
};

#define GAP_WA GAP_WA_BYTES   /* bytes of the first read */
#define GAP_WB GAP_WB_BYTES   /* of the second */
static void gap_launch_pairs(const gap_ctx *g) {
    if (g->kind >= 6 && sp_kinds[g->kind - 6].clustered) {   /* a clustered launch of 2 GAP_PAIRS phases */
        if (sp_kinds[g->kind - 6].mode == 10) {
            CUDA_CHECK(cudaMemsetAsync(g->cnt, 0, 4 * sizeof(unsigned), cu_stream));
            CUDA_CHECK(cudaMemsetAsync(g->acc, 0, sizeof(float) * SP_PART, cu_stream));
        }
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = (unsigned)g->cl;
        at[0].val.clusterDim.y = 1;
        at[0].val.clusterDim.z = 1;
        cu_launch_attrs(at, 1, sp_stream_kernel, dim3((unsigned)g->cl_grid), dim3(SP_THREADS), SP_SMEM,
                        (const unsigned char *)g->w, g->total, g->bar, g->cnt, g->take,
                        sp_kinds[g->kind - 6].stamped ? g->stamp : NULL, g->acc, sp_kinds[g->kind - 6].mode, 2 * GAP_PAIRS,
                        g->nst, g->cl);
        CUDA_LAUNCH_CHECK();
        return;
    }
    if (g->kind >= 6) {   /* a cooperative launch of 2 GAP_PAIRS phases */
        const int mode = sp_kinds[g->kind - 6].mode, stamped = sp_kinds[g->kind - 6].stamped;
        if (mode >= 3) CUDA_CHECK(cudaMemsetAsync(g->cnt, 0, 4 * sizeof(unsigned), cu_stream));
        if (mode == 4) CUDA_CHECK(cudaMemsetAsync(g->take, 0, sizeof(unsigned) * 2 * GAP_PAIRS, cu_stream));
        if (mode == 9) CUDA_CHECK(cudaMemsetAsync(g->acc, 0, sizeof(float) * SP_PART, cu_stream));
        cu_launch_coop(sp_stream_kernel, dim3((unsigned)g->n_sm), dim3(SP_THREADS), SP_SMEM, (const unsigned char *)g->w,
                       g->total, g->bar, g->cnt, g->take, stamped ? g->stamp : NULL, g->acc, mode, 2 * GAP_PAIRS, g->nst, 1);
        CUDA_LAUNCH_CHECK();
        return;
    }
    if (g->kind >= 3) {   /* GAP_PAIRS repetitions of the two reads: 3 two kernels, 4 one launch of two phases, 5 with b asked of L2 */
        for (int i = 0; i < GAP_PAIRS; i++) {   /* each repetition its own 10 MB (640 MB in all: from DRAM, not L2) */
            const uint4 *a = (const uint4 *)((const char *)g->w + (size_t)i * (GAP_WA + GAP_WB)), *b = a + GAP_WA / 16;
            if (g->kind == 3) {
                cu_launch_pdl(0, gap_read_kernel, dim3((unsigned)g->n_sm), dim3(512), 0, a, (size_t)GAP_WA / 16, g->f);
                cu_launch_pdl(0, gap_read_kernel, dim3((unsigned)g->n_sm), dim3(512), 0, b, (size_t)GAP_WB / 16, g->f);
            } else {
                cu_launch_coop(gap_phases_kernel, dim3((unsigned)g->n_sm), dim3(512), 0, a, (size_t)GAP_WA / 16, b,
                                (size_t)GAP_WB / 16, g->f, g->bar, g->kind == 5 ? 1 : 0);
            }
            CUDA_LAUNCH_CHECK();
        }
        return;
    }
    if (g->kind == 2) {   /* one cooperative launch of 2 GAP_PAIRS barriers (pdl: none, the launch alone) */
        cu_launch_coop(gap_barrier_kernel, dim3((unsigned)g->n_sm), dim3(384), GAP_SMEM, g->p, g->bar, g->pdl ? 0 : 2 * GAP_PAIRS,
                       g->form);
        CUDA_LAUNCH_CHECK();
        return;
    }
    for (int i = 0; i < GAP_PAIRS; i++) {
        if (g->kind == 0) {
            cu_launch_pdl(0, gap_empty_kernel, dim3(1), dim3(32), 0, g->p);
            cu_launch_pdl(g->pdl, gap_empty_kernel, dim3(1), dim3(32), 0, g->p);
        } else {
            cu_launch_pdl(0, gap_wide_kernel, dim3(GAP_WIDE_BLOCKS), dim3(256), 0, g->p, g->late);
            cu_launch_pdl(g->pdl, gap_persist_kernel, dim3((unsigned)g->n_sm), dim3(384), GAP_SMEM, g->p);
        }
        CUDA_LAUNCH_CHECK();
    }
}

/* microseconds a pair of the kind (0: two empty kernels, 1: wide then persistent), median of 15 replays of a graph of
 * GAP_PAIRS pairs */
/* milliseconds a replay of graph (instantiated, a warm-up replay, the median of 15 timed ones), graph destroyed after */
static float graph_replay_ms(cudaGraph_t graph) {
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    float t[15];
    CUDA_CHECK(cudaGraphLaunch(exec, cu_stream));   /* warm-up */
    for (int r = 0; r < 15; r++) {
        CUDA_CHECK(cudaEventRecord(a, cu_stream));
        CUDA_CHECK(cudaGraphLaunch(exec, cu_stream));
        CUDA_CHECK(cudaEventRecord(b, cu_stream));
        CUDA_CHECK(cudaEventSynchronize(b));
        CUDA_CHECK(cudaEventElapsedTime(&t[r], a, b));
    }
    qsort(t, 15, sizeof(float), cmp_f);
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    return t[7];
}
static double gap_pair_us(gap_ctx *g) {
    cudaGraph_t graph;
    CUDA_CHECK(cudaStreamBeginCapture(cu_stream, cudaStreamCaptureModeThreadLocal));
    gap_launch_pairs(g);
    CUDA_CHECK(cudaStreamEndCapture(cu_stream, &graph));
    return graph_replay_ms(graph) * 1e3 / GAP_PAIRS;
}

/* us a pair of a streamed form (gap_pair_us with g->kind = kind), its word sum over the 16 launches checked against want:
 * on a wrong sum *bad = code (a byte not read, or read twice), else *bad unchanged */
static double stream_form_us(gap_ctx *g, int kind, unsigned want, int *bad, int code) {
    CUDA_CHECK(cudaMemset(g->total, 0, sizeof(unsigned)));
    g->kind = kind;
    const double us = gap_pair_us(g);
    unsigned got = 0;
    CUDA_CHECK(cudaMemcpy(&got, g->total, sizeof got, cudaMemcpyDeviceToHost));
    if (got != want) *bad = code;
    return us;
}

/* One stamped launch of a dependency's form (a stamped kind of sp_kinds: the grid one group, or a clustered one's cluster
 * of g->cl blocks; its word sum checked as the others', a wrong one setting out->stream_bad = bad), and the quantiles (10%, 50%, 90%) over every
 * block and dependency of: skew, the group's last add (arrive) less this block's (the wait that a perfectly balanced
 * stream would not have), and propagation, this block's pass less the group's last add (what the dependency itself
 * costs: the release, the reduction at L2 or the remote arrives, the acquire seeing it) */
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static ds_status counter_stamps(gap_ctx *g, int kind, int bad, double *skew_q, double *prop_q, ds_launch_gaps *out,
                                char *err) {
    const int clustered = sp_kinds[kind - 6].clustered, grid_wide = sp_kinds[kind - 6].mode == 10;   /* 10: its count */
    const int nc = 2 * GAP_PAIRS - 1, nb = clustered ? g->cl_grid : g->n_sm, grp = clustered && !grid_wide ? g->cl : nb;
    const size_t n = (size_t)nc * (size_t)nb;
    g->kind = kind;
    CUDA_CHECK(cudaMemset(g->total, 0, sizeof(unsigned)));
    gap_launch_pairs(g);
    CUDA_CHECK(cudaStreamSynchronize(cu_stream));
    unsigned got = 0;
    CUDA_CHECK(cudaMemcpy(&got, g->total, sizeof got, cudaMemcpyDeviceToHost));
    if (got != (unsigned)((unsigned)((size_t)GAP_PAIRS * (GAP_WA + GAP_WB) / 4) * 0x01010101u)) {
        out->stream_bad = bad;
        return DS_OK;
    }
    unsigned long long *t = (unsigned long long *)malloc(sizeof(unsigned long long) * 2 * n);
    double *skew = (double *)malloc(sizeof(double) * n), *prop = (double *)malloc(sizeof(double) * n);
    if (!t || !skew || !prop) {
        free(t); free(skew); free(prop);
        return ds_seterr(err, DS_ERR_NOMEM, "launch gaps: out of host memory");
    }
    CUDA_CHECK(cudaMemcpy(t, g->stamp, sizeof(unsigned long long) * 2 * n, cudaMemcpyDeviceToHost));
    for (int c = 0; c < nc; c++) {
        const unsigned long long *tc = t + 2 * (size_t)c * nb;
        for (int b0 = 0; b0 < nb; b0 += grp) {
            unsigned long long last = 0;
            for (int b = b0; b < b0 + grp; b++) last = tc[2 * b] > last ? tc[2 * b] : last;
            for (int b = b0; b < b0 + grp; b++) {
                skew[(size_t)c * nb + b] = (double)(last - tc[2 * b]) * 1e-3;
                prop[(size_t)c * nb + b] = ((double)tc[2 * b + 1] - (double)last) * 1e-3;
            }
        }
    }
    qsort(skew, n, sizeof(double), cmp_d);
    qsort(prop, n, sizeof(double), cmp_d);
    const size_t at[3] = {n / 10, n / 2, (n * 9) / 10};
    for (int q = 0; q < 3; q++) {
        skew_q[q] = skew[at[q]];
        prop_q[q] = prop[at[q]];
    }
    free(t); free(skew); free(prop);
    return DS_OK;
}

/* whether every float of mode 9's acc is v (the adds of the last launch) */
static int acc_holds(gap_ctx *g, float v) {
    float h[SP_PART];
    CUDA_CHECK(cudaMemcpy(h, g->acc, sizeof h, cudaMemcpyDeviceToHost));
    for (int i = 0; i < SP_PART; i++)
        if (h[i] != v) return 0;
    return 1;
}


/* ---- batch 1's q + kv_a GEMV on few SMs (fifty-third session; `bench --ceilings`) ---------------------------------
 * The premise of batch 1's attention on one cluster, measured with a kernel's consumers rather than the stream lab's:
 * y = W x for V2-Lite's q and kv_a rows (CG_R x CG_D FP8 codes with 128 x 128 block scales, 7.5 MB), each block its
 * contiguous share of whole stages (CG_ROWS rows, 32 KB) streamed by one producer thread's bulk copies into a ring of
 * CG_ST stages, CG_CW consumer warps taking two rows of a stage each with moeo_kernel's mo_dot (x in shared memory read
 * once for both rows, rotated by lane; the scale once a chunk), a warp sum a row. Launches cycle through CG_COPIES
 * copies of the weights (120 MB: past the L2). Grids: a block an SM, 16 blocks spread by the scheduler, and 16 blocks as
 * one cluster (one GPC). cg_ref_kernel: a warp a row in fp32 from the codes' values (cu_fp8_to_f32), the check. */
#define CG_R 3648
#define CG_D 2048
#define CG_COPIES 16
#define CG_ST 6
#define CG_ROWS 16
#define CG_CW 8
#define CG_THREADS (32 + 32 * CG_CW)
#define CG_SMEM (1024 + CG_ST * CG_ROWS * CG_D + 2 * CG_ST * 8 + CG_D * 4)
__global__ void __launch_bounds__(CG_THREADS, 1) cg_gemv_kernel(const unsigned char *w, const float *sc, const float *x,
                                                                float *y) {
    extern __shared__ unsigned char cg_raw[];
    unsigned char *ring = (unsigned char *)(((uintptr_t)cg_raw + 1023) & ~(uintptr_t)1023);
    uint64_t *full = (uint64_t *)(ring + CG_ST * CG_ROWS * CG_D), *empty = full + CG_ST;
    float *xs = (float *)(empty + CG_ST);
    const int per = (CG_R / CG_ROWS + (int)gridDim.x - 1) / (int)gridDim.x * CG_ROWS;   /* rows a block: whole stages */
    const int r0 = (int)blockIdx.x * per, r1 = r0 + per < CG_R ? r0 + per : CG_R;
    if (threadIdx.x == 0) {
        for (int s = 0; s < CG_ST; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], CG_CW);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x < 32) {   /* the producer */
        if (threadIdx.x) return;
        int it = 0;
        for (int r = r0; r < r1; r += CG_ROWS, it++) {
            const int s = it % CG_ST, n = r1 - r < CG_ROWS ? r1 - r : CG_ROWS;
            if (it >= CG_ST) mbar_wait(&empty[s], (it / CG_ST - 1) & 1);
            mbar_expect_tx(&full[s], n * CG_D);
            bulk_load(ring + (size_t)s * CG_ROWS * CG_D, w + (size_t)r * CG_D, n * CG_D, &full[s]);
        }
        return;
    }
    const int ct = threadIdx.x - 32, cw = ct >> 5, lane = threadIdx.x & 31;
    for (int i = ct; i < CG_D / 4; i += 32 * CG_CW) ((float4 *)xs)[i] = __ldg((const float4 *)x + i);
    asm volatile("bar.sync 1, %0;\n" ::"n"(32 * CG_CW) : "memory");
    int it = 0;
    for (int r = r0; r < r1; r += CG_ROWS, it++) {
        const int s = it % CG_ST, n = r1 - r < CG_ROWS ? r1 - r : CG_ROWS, i0 = 2 * cw;
        const unsigned char *st = ring + (size_t)s * CG_ROWS * CG_D;
        mbar_wait(&full[s], (it / CG_ST) & 1);
        float p[2] = {0.0f, 0.0f};
        if (i0 < n) {
#pragma unroll
            for (int m = 0; m < CG_D / 16 / 32; m++) {
                const int c = lane + 32 * m;
                uint4 q[2];
                q[0] = *(const uint4 *)(st + (size_t)i0 * CG_D + (size_t)c * 16);
                q[1] = i0 + 1 < n ? *(const uint4 *)(st + (size_t)(i0 + 1) * CG_D + (size_t)c * 16) : make_uint4(0, 0, 0, 0);
                const float s8 = __ldg(sc + (size_t)((r + i0) >> 7) * (CG_D / 128) + (size_t)((c * 16) >> 7));
                mo_dot<1, 2>(q, s8, xs + c * 16, lane, p);
            }
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[s]);
        const float a = cu_warp_sum(p[0]), b = cu_warp_sum(p[1]);
        if (lane == 0 && i0 < n) {
            y[r + i0] = a;
            if (i0 + 1 < n) y[r + i0 + 1] = b;
        }
    }
}
__global__ void cg_ref_kernel(const unsigned char *w, const float *sc, const float *x, float *y) {
    const int r = (int)(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32), lane = threadIdx.x & 31;
    if (r >= CG_R) return;
    float a = 0.0f;
    for (int k = lane; k < CG_D; k += 32)
        a += cu_fp8_to_f32(w[(size_t)r * CG_D + k]) * sc[(size_t)(r >> 7) * (CG_D / 128) + (k >> 7)] * x[k];
    a = cu_warp_sum(a);
    if (lane == 0) y[r] = a;
}
/* the weights' copies: random e4m3 codes (no NaN), scales in [2^-9, 2^-7), x in [-1, 1) */
__global__ void cg_fill_kernel(unsigned char *w, size_t n, float *sc, int ns, float *x) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)(i * 2654435761u) ^ (uint32_t)(i >> 32) * 40503u;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        unsigned char b = (unsigned char)(h >> 8);
        w[i] = (b & 0x7f) == 0x7f ? (unsigned char)(b ^ 1) : b;
        if (i < (size_t)ns) sc[i] = ldexpf(1.0f + (float)(h & 1023) / 1024.0f, -9 + (int)((h >> 20) & 1));
        if (i < CG_D) x[i] = (float)((int)(h & 65535) - 32768) / 32768.0f;
    }
}
/* us a GEMV of form f (0: a block an SM; 1: 16 blocks; 2: one cluster of 16), median of 15 replays of a graph of
 * CG_COPIES launches (each its own copy), and the NMSE of copy 0's y against cg_ref_kernel's */
static double cg_form_us(int f, int n_sm, const unsigned char *w, const float *sc, const float *x, float *y, const float *yr,
                         double *nmse) {
    const size_t per = (size_t)CG_R * CG_D;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = 16;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    const int grid = f == 0 ? n_sm : 16;
    cudaGraph_t graph;
    CUDA_CHECK(cudaStreamBeginCapture(cu_stream, cudaStreamCaptureModeThreadLocal));
    for (int k = 0; k < CG_COPIES; k++)
        cu_launch_attrs(at, f == 2 ? 1 : 0, cg_gemv_kernel, dim3((unsigned)grid), dim3(CG_THREADS), (size_t)CG_SMEM,
                        w + (size_t)k * per, sc, x, y);
    CUDA_CHECK(cudaStreamEndCapture(cu_stream, &graph));
    const double us = graph_replay_ms(graph) * 1e3 / CG_COPIES;
    /* copy 0 once more alone, against the reference */
    cu_launch_attrs(at, f == 2 ? 1 : 0, cg_gemv_kernel, dim3((unsigned)grid), dim3(CG_THREADS), (size_t)CG_SMEM, w, sc, x, y);
    CUDA_LAUNCH_CHECK();
    float hy[CG_R], hr[CG_R];
    CUDA_CHECK(cudaMemcpy(hy, y, sizeof hy, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(hr, yr, sizeof hr, cudaMemcpyDeviceToHost));
    double e = 0.0, q = 0.0;
    for (int i = 0; i < CG_R; i++) {
        e += ((double)hy[i] - hr[i]) * ((double)hy[i] - hr[i]);
        q += (double)hr[i] * hr[i];
    }
    *nmse = q > 0.0 ? e / q : (e > 0.0 ? 1.0 : 0.0);
    if (isnan(*nmse)) *nmse = 1.0;
    return us;
}
static void cluster_gemv(int n_sm, ds_launch_gaps *out) {
    const size_t per = (size_t)CG_R * CG_D;
    const int ns = (CG_R + 127) / 128 * (CG_D / 128);
    unsigned char *w;
    float *sc, *x, *y, *yr;
    CUDA_CHECK(cudaMalloc(&w, per * CG_COPIES));
    CUDA_CHECK(cudaMalloc(&sc, sizeof(float) * (size_t)ns));
    CUDA_CHECK(cudaMalloc(&x, sizeof(float) * CG_D));
    CUDA_CHECK(cudaMalloc(&y, sizeof(float) * CG_R));
    CUDA_CHECK(cudaMalloc(&yr, sizeof(float) * CG_R));
    cg_fill_kernel<<<1024, 256, 0, cu_stream>>>(w, per * CG_COPIES, sc, ns, x);
    CUDA_LAUNCH_CHECK();
    cg_ref_kernel<<<(CG_R + 7) / 8, 256, 0, cu_stream>>>(w, sc, x, yr);
    CUDA_LAUNCH_CHECK();
    CUDA_CHECK(cudaFuncSetAttribute(cg_gemv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, CG_SMEM));
    CUDA_CHECK(cudaFuncSetAttribute(cg_gemv_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    for (int f = 0; f < 3; f++) out->cg_us[f] = cg_form_us(f, n_sm, w, sc, x, y, yr, &out->cg_nmse[f]);
    CUDA_CHECK(cudaFree(w));
    CUDA_CHECK(cudaFree(sc));
    CUDA_CHECK(cudaFree(x));
    CUDA_CHECK(cudaFree(y));
    CUDA_CHECK(cudaFree(yr));
}

/* The cluster-scope dependencies (forty-third session): for clusters of 1, 2, 4, 8, 16 blocks, the most such clusters
 * that fit at once (a block an SM), the free stream on that grid (kind 15) and the cluster form (kind 13), us a pair, each
 * form's word sum checked against want (16 launches), then a stamped launch (kind 14): the skew and propagation p50 */
static ds_status cluster_forms(gap_ctx *g, unsigned want, ds_launch_gaps *out, char *err) {
    CUDA_CHECK(cudaFuncSetAttribute(sp_stream_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    for (int c = 0; c < DS_GAP_CLUSTERS && !out->stream_bad; c++) {
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = 1u << c;
        at[0].val.clusterDim.y = 1;
        at[0].val.clusterDim.z = 1;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3((unsigned)(g->n_sm >> c << c));   /* a whole number of clusters, as the launch needs */
        cfg.blockDim = dim3(SP_THREADS);
        cfg.dynamicSmemBytes = SP_SMEM;
        cfg.stream = cu_stream;
        cfg.attrs = at;
        cfg.numAttrs = 1;
        int n_cl = 0;
        if (cudaOccupancyMaxActiveClusters(&n_cl, sp_stream_kernel, &cfg) != cudaSuccess || n_cl < 1) {
            (void)cudaGetLastError();   /* a size this GPU cannot place: its row stays -1 */
            continue;
        }
        g->cl = 1 << c;
        g->cl_grid = n_cl * g->cl < g->n_sm ? n_cl * g->cl : g->n_sm / g->cl * g->cl;
        out->cl_blocks[c] = g->cl_grid;
        if (c >= 3) {   /* one cluster alone (8 and 16 blocks): what a GPC streams by itself */
            const int cl_grid = g->cl_grid;
            g->cl_grid = g->cl;
            out->one_cl_free_us[c - 3] = stream_form_us(g, 15, want, &out->stream_bad, 25);
            if (!out->stream_bad) out->one_cl_tx_us[c - 3] = stream_form_us(g, 18, want, &out->stream_bad, 26);
            g->cl_grid = cl_grid;
        }
        out->cl_free_us[c] = stream_form_us(g, 15, want, &out->stream_bad, 9);
        if (!out->stream_bad) out->cl_dep_us[c] = stream_form_us(g, 13, want, &out->stream_bad, 10);
        double skew_q[3] = {-1.0, -1.0, -1.0}, prop_q[3] = {-1.0, -1.0, -1.0};
        if (!out->stream_bad) {
            ds_status st = counter_stamps(g, 14, 11, skew_q, prop_q, out, err);
            if (st) return st;
        }
        out->cl_skew_us[c] = skew_q[1];
        out->cl_prop_us[c] = prop_q[1];
        if (!out->stream_bad) out->cl_tx_us[c] = stream_form_us(g, 18, want, &out->stream_bad, 14);
        if (!out->stream_bad) {
            ds_status st = counter_stamps(g, 19, 15, skew_q, prop_q, out, err);
            if (st) return st;
            out->cl_tx_prop_us[c] = prop_q[1];
        }
        if (!out->stream_bad) out->cl_red_us[c] = stream_form_us(g, 24, want, &out->stream_bad, 21);
        if (!out->stream_bad && !acc_holds(g, (float)((2 * GAP_PAIRS - 1) * g->cl_grid))) out->stream_bad = 22;
        if (!out->stream_bad) {
            ds_status st = counter_stamps(g, 25, 23, skew_q, prop_q, out, err);
            if (st) return st;
            out->cl_red_prop_us[c] = prop_q[1];
        }
    }
    return DS_OK;
}

extern "C" ds_status ds_cuda_launch_gaps(ds_launch_gaps *out, char *err) {
    char why[256];
    if (!ds_cuda_available(why, sizeof why)) return ds_seterr(err, DS_ERR_BACKEND, "%s", why);
    if (!cu_stream) CUDA_CHECK(cudaStreamCreate(&cu_stream));
    int dev, n_sm;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev));
    CUDA_CHECK(cudaFuncSetAttribute(gap_persist_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, GAP_SMEM));
    CUDA_CHECK(cudaFuncSetAttribute(gap_barrier_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, GAP_SMEM));
    CUDA_CHECK(cudaFuncSetAttribute(sp_stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SP_SMEM));
    gap_ctx g = {0, 0, 0, n_sm, NULL, NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, SP_ST, 1, 0};
    CUDA_CHECK(cudaMalloc(&g.p, sizeof(int) * (size_t)GAP_WIDE_BLOCKS * 256));
    CUDA_CHECK(cudaMemset(g.p, 0, sizeof(int) * (size_t)GAP_WIDE_BLOCKS * 256));
    CUDA_CHECK(cudaMalloc(&g.bar, 3 * sizeof(unsigned)));   /* count, generation, early passes */
    CUDA_CHECK(cudaMemset(g.bar, 0, 3 * sizeof(unsigned)));
    /* a grid barrier: one launch of 2 GAP_PAIRS barriers less one launch of none, over the barriers (gap_pair_us divides
     * by GAP_PAIRS: halved here); the grid must be co-resident (a block an SM: checked by the cooperative launch) */
    int coop = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
    out->grid_barrier_us = out->grid_barrier_ar_us = -1.0;
    for (int form = 0; form < 2 && coop; form++) {
        g.kind = 2;
        g.form = form;
        g.pdl = 0;
        double with = gap_pair_us(&g);
        g.pdl = 1;   /* no barriers */
        double none = gap_pair_us(&g);
        *(form ? &out->grid_barrier_ar_us : &out->grid_barrier_us) = (with - none) / 2.0;
        /* every block passed every barrier (16 launches, a warm-up and 15 timed, of 2 GAP_PAIRS stores each), none early */
        int *hp = (int *)malloc(sizeof(int) * (size_t)n_sm), bad = -1;
        unsigned early = 0;
        if (hp) {
            CUDA_CHECK(cudaMemcpy(hp, g.p, sizeof(int) * (size_t)n_sm, cudaMemcpyDeviceToHost));
            CUDA_CHECK(cudaMemcpy(&early, g.bar + 2, sizeof early, cudaMemcpyDeviceToHost));
            bad = early != 0;
            for (int b = 0; b < n_sm; b++) bad += hp[b] != 16 * 2 * GAP_PAIRS;
            free(hp);
        }
        if (bad) {
            CUDA_CHECK(cudaFree(g.p));
            CUDA_CHECK(cudaFree(g.bar));
            if (bad < 0) return ds_seterr(err, DS_ERR_NOMEM, "launch gaps: out of host memory");
            return ds_seterr(err, DS_ERR_BACKEND, "launch gaps: grid barrier form %d: %d blocks with stores lost, %u early passes",
                             form, bad - (early != 0), early);
        }
        CUDA_CHECK(cudaMemset(g.p, 0, sizeof(int) * (size_t)GAP_WIDE_BLOCKS * 256));
    }
    const int cases[5][3] = {{0, 0, 0}, {0, 1, 0}, {1, 0, 0}, {1, 1, 0}, {1, 1, 1}};   /* kind, pdl, late */
    double *dst[5] = {&out->empty_plain_us, &out->empty_pdl_us, &out->pair_plain_us, &out->pair_pdl_us, &out->pair_pdl_late_us};
    for (int c = 0; c < 5; c++) {
        g.kind = cases[c][0];
        g.pdl = cases[c][1];
        g.late = cases[c][2];
        *dst[c] = gap_pair_us(&g);
    }
    /* the two reads as two kernels, as two phases of one launch, and with the second asked of L2 before the barrier */
    out->reads_two_us = out->reads_phases_us = out->reads_phases_pf_us = -1.0;
    out->stream_free_us = out->stream_ahead_us = out->stream_wait_us = out->stream_counter_us = out->stream_dealt_us = -1.0;
    for (int q = 0; q < 3; q++) {
        out->counter_skew_us[q] = out->counter_prop_us[q] = out->dealt_skew_us[q] = out->dealt_prop_us[q] = -1.0;
        out->ring_free_us[q] = out->ring_counter_us[q] = out->ring_prop_us[q] = -1.0;
        out->relaxed_skew_us[q] = out->relaxed_prop_us[q] = out->bulk_skew_us[q] = out->bulk_prop_us[q] = -1.0;
        out->bulk_part_skew_us[q] = out->bulk_part_prop_us[q] = -1.0;
    }
    out->relaxed_counter_us = out->bulk_counter_us = out->bulk_part_us = -1.0;
    out->one_cl_free_us[0] = out->one_cl_free_us[1] = out->one_cl_tx_us[0] = out->one_cl_tx_us[1] = -1.0;
    for (int f = 0; f < 3; f++) out->cg_us[f] = out->cg_nmse[f] = -1.0;
    for (int f = 0; f < DS_GAP_FEW; f++) {
        out->few_blocks[f] = 0;
        out->few_free_us[f] = -1.0;
    }
    for (int c = 0; c < DS_GAP_CLUSTERS; c++) {
        out->cl_blocks[c] = 0;
        out->cl_free_us[c] = out->cl_dep_us[c] = out->cl_skew_us[c] = out->cl_prop_us[c] = -1.0;
        out->cl_tx_us[c] = out->cl_tx_prop_us[c] = out->cl_red_us[c] = out->cl_red_prop_us[c] = -1.0;
    }
    out->stream_bad = 0;
    if (coop) {
        CUDA_CHECK(cudaMalloc(&g.w, (size_t)GAP_PAIRS * (GAP_WA + GAP_WB)));
        CUDA_CHECK(cudaMemset(g.w, 0, (size_t)GAP_PAIRS * (GAP_WA + GAP_WB)));
        CUDA_CHECK(cudaMalloc(&g.f, sizeof(float) * (size_t)n_sm));
        double *rd[3] = {&out->reads_two_us, &out->reads_phases_us, &out->reads_phases_pf_us};
        for (int k = 3; k <= 5; k++) {
            g.kind = k;
            *rd[k - 3] = gap_pair_us(&g);
        }
        /* the streamed phases over the same bytes set to 0x01: every 32-bit word 0x01010101, so that a launch's word sum
         * is known (mod 2^32); gap_pair_us runs 16 launches (a warm-up and 15 timed) */
        CUDA_CHECK(cudaMemset(g.w, 1, (size_t)GAP_PAIRS * (GAP_WA + GAP_WB)));
        CUDA_CHECK(cudaMalloc(&g.total, sizeof(unsigned)));
        CUDA_CHECK(cudaMalloc(&g.cnt, 4 * sizeof(unsigned)));   /* mode 8's bulk add: 16 bytes */
        CUDA_CHECK(cudaMalloc(&g.acc, sizeof(float) * SP_PART));
        CUDA_CHECK(cudaMalloc(&g.take, sizeof(unsigned) * 2 * GAP_PAIRS));
        CUDA_CHECK(cudaMalloc(&g.stamp, sizeof(unsigned long long) * 2 * (2 * GAP_PAIRS - 1) * (size_t)n_sm));
        double *sp[5] = {&out->stream_free_us, &out->stream_ahead_us, &out->stream_wait_us, &out->stream_counter_us,
                         &out->stream_dealt_us};
        const unsigned want = (unsigned)(16u * (unsigned)((size_t)GAP_PAIRS * (GAP_WA + GAP_WB) / 4) * 0x01010101u);
        for (int k = 6; k <= 10 && !out->stream_bad; k++) *sp[k - 6] = stream_form_us(&g, k, want, &out->stream_bad, k - 5);
        ds_status cst = out->stream_bad ? DS_OK : counter_stamps(&g, 11, 6, out->counter_skew_us, out->counter_prop_us, out, err);
        if (!cst && !out->stream_bad) cst = counter_stamps(&g, 12, 7, out->dealt_skew_us, out->dealt_prop_us, out, err);
        /* the counters with relaxed polls (mode 6): timed, then stamped */
        if (!cst && !out->stream_bad) out->relaxed_counter_us = stream_form_us(&g, 16, want, &out->stream_bad, 12);
        if (!cst && !out->stream_bad) cst = counter_stamps(&g, 17, 13, out->relaxed_skew_us, out->relaxed_prop_us, out, err);
        /* the counters' add as a bulk reduction (mode 8): timed, then stamped */
        if (!cst && !out->stream_bad) out->bulk_counter_us = stream_form_us(&g, 20, want, &out->stream_bad, 16);
        if (!cst && !out->stream_bad) cst = counter_stamps(&g, 21, 17, out->bulk_skew_us, out->bulk_prop_us, out, err);
        /* the same after each block's partial sums (mode 9): timed, acc checked, then stamped */
        if (!cst && !out->stream_bad) out->bulk_part_us = stream_form_us(&g, 22, want, &out->stream_bad, 18);
        if (!cst && !out->stream_bad && !acc_holds(&g, (float)((2 * GAP_PAIRS - 1) * n_sm))) out->stream_bad = 19;
        if (!cst && !out->stream_bad) cst = counter_stamps(&g, 23, 20, out->bulk_part_skew_us, out->bulk_part_prop_us, out, err);
        /* the ring's depth: the free stream and the counters' form with 2, 3, 4 of the SP_ST stages (64 .. 128 KB in
         * flight an SM against 192), each form's word sum checked; the counters' propagation p50 of a stamped launch */
        for (int d = 0; d < 3 && !cst && !out->stream_bad; d++) {
            double skew_q[3] = {-1.0, -1.0, -1.0}, prop_q[3] = {-1.0, -1.0, -1.0};
            g.nst = 2 + d;
            out->ring_free_us[d] = stream_form_us(&g, 6, want, &out->stream_bad, 8);
            if (!out->stream_bad) out->ring_counter_us[d] = stream_form_us(&g, 9, want, &out->stream_bad, 8);
            if (!out->stream_bad) cst = counter_stamps(&g, 11, 6, skew_q, prop_q, out, err);
            out->ring_prop_us[d] = prop_q[1];
        }
        g.nst = SP_ST;
        /* the free stream by few SMs: what a cluster-sized part of the GPU streams while the rest is idle (the premise
         * of batch 1's attention on a few SMs beside the experts' preload on the others; KERNELS.md fifty-third session) */
        for (int f = 0; f < DS_GAP_FEW && !cst && !out->stream_bad; f++) {
            static const int few[DS_GAP_FEW - 1] = {8, 16, 24, 33, 66};
            g.n_sm = f < DS_GAP_FEW - 1 && few[f] < n_sm ? few[f] : n_sm;
            out->few_blocks[f] = g.n_sm;
            out->few_free_us[f] = stream_form_us(&g, 6, want, &out->stream_bad, 24);
        }
        g.n_sm = n_sm;
        if (!cst && !out->stream_bad) cst = cluster_forms(&g, want, out, err);
        if (!cst && !out->stream_bad) cluster_gemv(n_sm, out);
        CUDA_CHECK(cudaFree(g.total));
        CUDA_CHECK(cudaFree(g.cnt));
        CUDA_CHECK(cudaFree(g.acc));
        CUDA_CHECK(cudaFree(g.take));
        CUDA_CHECK(cudaFree(g.stamp));
        CUDA_CHECK(cudaFree(g.w));
        CUDA_CHECK(cudaFree(g.f));
        if (cst) {
            CUDA_CHECK(cudaFree(g.p));
            CUDA_CHECK(cudaFree(g.bar));
            return cst;
        }
    }
    CUDA_CHECK(cudaFree(g.p));
    CUDA_CHECK(cudaFree(g.bar));
    return DS_OK;
}

/* pt[0..n) = a permutation of 0..n-1: identity, then a Fisher-Yates shuffle by a fixed LCG (seed 12345). */
static void shuffle_pages(int32_t *pt, int n) {
    for (int i = 0; i < n; i++) pt[i] = i;
    uint64_t r = 12345;
    for (int i = n - 1; i > 0; i--) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        int j = (int)((r >> 33) % (uint64_t)(i + 1)), t = pt[i];
        pt[i] = pt[j];
        pt[j] = t;
    }
}

/* Median milliseconds between cu_mla_ev[0] / [1] (the attention kernel alone) over `reps` runs of fn(ctx),
 * no warm-up; creates the events, sets cu_mla_ev_on for the runs and destroys them after. */
static double time_attn_kernel(void (*fn)(void *), void *ctx, int reps) {
    float t[64];
    if (reps > 64) reps = 64;
    CUDA_CHECK(cudaEventCreate(&cu_mla_ev[0]));
    CUDA_CHECK(cudaEventCreate(&cu_mla_ev[1]));
    cu_mla_ev_on = 1;
    for (int r = 0; r < reps; r++) {
        fn(ctx);
        CUDA_CHECK(cudaEventSynchronize(cu_mla_ev[1]));
        CUDA_CHECK(cudaEventElapsedTime(&t[r], cu_mla_ev[0], cu_mla_ev[1]));
    }
    cu_mla_ev_on = 0;
    CUDA_CHECK(cudaEventDestroy(cu_mla_ev[0]));
    CUDA_CHECK(cudaEventDestroy(cu_mla_ev[1]));
    qsort(t, (size_t)reps, sizeof(float), cmp_f);
    return t[reps / 2];
}

#ifdef MLA_PROF
extern "C" void cu_mla_prof_print(void);   /* cuda_mla_tc.cu, MLA_PROF builds only */
#endif
typedef struct {
    ds_backend *be;
    float *out, *q;
    void *cache;
    ds_weight kvb;
    int *seqs, n;
} mla_ctx;
static void do_mla(void *c) {
    mla_ctx *m = (mla_ctx *)c;
    m->be->attn_absorbed(m->be, m->out, m->q, m->cache, &m->kvb, m->seqs, m->n);
}

/* The absorbed decode op alone: n_seqs sequences of ctx tokens each (one new token), pages shuffled. */
extern "C" ds_status ds_cuda_bench_mla(const ds_config *cfg, int n_seqs, int ctx, double *ms_out, double *gbs,
                                       double *kern_ms, double *kern_gbs, char *err) {
    ds_backend *be = ds_backend_cuda_new(cfg, err);
    if (!be) return DS_ERR_BACKEND;
    ds_cuda_backend *cb = cu_of(be);
    int H = cfg->num_heads, C = cfg->kv_lora_rank, dr = cfg->qk_rope_head_dim, dn = cfg->qk_nope_head_dim;
    int dv = cfg->v_head_dim, ps = 64;
    int pages_per = (ctx + ps - 1) / ps, n_pages = pages_per * n_seqs;
    size_t tb = ds_kv_token_bytes(cfg), cache_n = ((size_t)n_pages * ps * tb + 3) / 4;   /* floats */
    mla_ctx m;
    m.be = be;
    m.cache = be->alloc(be, cache_n);   /* fp32 cache, or the FP8 / BF16 layout with cfg->kv_fp8 / kv_bf16 */
    m.q = be->alloc(be, (size_t)n_seqs * H * (dn + dr));
    m.out = be->alloc(be, (size_t)n_seqs * H * dv);
    if (!m.cache || !m.q || !m.out) {
        be->destroy(be);
        return ds_seterr(err, DS_ERR_NOMEM, "bench mla: cannot allocate the cache (%zu floats)", cache_n);
    }
    if (cfg->kv_fp8) {
        bench_fill_kv_fp8_kernel<<<4096, 128, 0, cu_stream>>>((unsigned char *)m.cache, (size_t)n_pages * ps, C, dr, tb, 3);
        CUDA_LAUNCH_CHECK();
    } else {
        fill_random(m.cache, cfg->kv_bf16 ? 2 * cache_n : cache_n, 3, cfg->kv_bf16);   /* n elements of its dtype */
    }
    fill_random(m.q, (size_t)n_seqs * H * (dn + dr), 4, 0);
    void *kvb_d = NULL;
    size_t kvb_n = (size_t)H * (dn + dv) * C;
    CUDA_CHECK(cudaMalloc(&kvb_d, kvb_n * 2));
    fill_random(kvb_d, kvb_n, 5, 1);
    cu_own(cb, kvb_d);
    memset(&m.kvb, 0, sizeof m.kvb);
    m.kvb.data = kvb_d;
    m.kvb.dtype = DS_DTYPE_BF16;
    m.kvb.rows = H * (dn + dv);
    m.kvb.cols = C;
    /* the batch: one token per sequence at position ctx - 1; pages shuffled over the pool */
    int32_t *tok = (int32_t *)calloc((size_t)n_seqs, 4), *pos = (int32_t *)calloc((size_t)n_seqs, 4);
    int32_t *start = (int32_t *)calloc((size_t)n_seqs + 1, 4), *sctx = (int32_t *)calloc((size_t)n_seqs, 4);
    int32_t *pt = (int32_t *)calloc((size_t)n_pages, 4);
    m.seqs = (int *)calloc((size_t)n_seqs, sizeof(int));
    shuffle_pages(pt, n_pages);
    for (int s = 0; s < n_seqs; s++) {
        pos[s] = ctx - 1;
        start[s] = s;
        sctx[s] = ctx;
        m.seqs[s] = s;
    }
    start[n_seqs] = n_seqs;
    m.n = n_seqs;
    ds_batch_meta b = {n_seqs, n_seqs, tok, pos, start, sctx, pt, pages_per, ps};
    ds_status st = be->set_batch(be, &b, err);
    if (!st) {
        double ms = time_median(do_mla, &m, 20);
        double bytes = (double)n_seqs * ctx * tb + (double)kvb_n * 2 + (double)n_seqs * H * (dn + dr + dv) * 4;
        *ms_out = ms;
        *gbs = bytes / (ms * 1e-3) / 1e9;
        /* the attention kernel alone (between events attn_fused records around its launch): its bytes are
         * the cache rows, counted once (q in and the split partials out are not counted) */
        if (!cb->opt.fused_attn) {   /* one kernel per sequence: no single kernel to time */
            *kern_ms = ms;
            *kern_gbs = *gbs;
            goto done;
        }
        double kms = time_attn_kernel(do_mla, &m, 20);
#ifdef MLA_PROF
        do_mla(&m);   /* one more launch, its phases printed (cuda_mla_tc.cu) */
        cu_mla_prof_print();
#endif
        *kern_ms = kms;
        *kern_gbs = (double)n_seqs * ctx * tb / (kms * 1e-3) / 1e9;
    }
done:
    free(tok); free(pos); free(start); free(sctx); free(pt); free(m.seqs);
    be->release(be, (float *)m.cache);
    be->release(be, m.q);
    be->release(be, m.out);
    be->destroy(be);
    return st;
}

static void do_fa(void *c) {
    mla_ctx *m = (mla_ctx *)c;
    m->be->attn_naive(m->be, m->out, m->q, m->cache, &m->kvb, m->seqs, m->n);
}

extern "C" ds_status ds_cuda_bench_fa(const ds_config *cfg, int P, double *ms_out, double *kern_ms, char *err) {
    ds_backend *be = ds_backend_cuda_new(cfg, err);
    if (!be) return DS_ERR_BACKEND;
    ds_cuda_backend *cb = cu_of(be);
    int H = cfg->num_heads, C = cfg->kv_lora_rank, dr = cfg->qk_rope_head_dim, dn = cfg->qk_nope_head_dim;
    int dv = cfg->v_head_dim, ps = 64, n_pages = (P + ps - 1) / ps;
    size_t tb = ds_kv_token_bytes(cfg), cache_n = ((size_t)n_pages * ps * tb + 3) / 4;   /* floats */
    mla_ctx m;
    memset(&m, 0, sizeof m);
    m.be = be;
    m.cache = be->alloc(be, cache_n);
    m.q = be->alloc(be, (size_t)P * H * (dn + dr));
    m.out = be->alloc(be, (size_t)P * H * dv);
    int32_t *tok = (int32_t *)calloc((size_t)P, 4), *pos = (int32_t *)calloc((size_t)P, 4), *pt = (int32_t *)calloc((size_t)n_pages, 4);
    int32_t start[2] = {0, P}, sctx[1] = {P};
    int seq0 = 0;
    ds_status st = DS_OK;
    void *kvb_d = NULL;
    size_t kvb_n = (size_t)H * (dn + dv) * C;
    if (!m.cache || !m.q || !m.out || !tok || !pos || !pt) {
        st = ds_seterr(err, DS_ERR_NOMEM, "bench fa: cannot allocate %d tokens x %d heads", P, H);
        goto done;
    }
    if (cfg->kv_fp8) {
        bench_fill_kv_fp8_kernel<<<4096, 128, 0, cu_stream>>>((unsigned char *)m.cache, (size_t)n_pages * ps, C, dr, tb, 3);
        CUDA_LAUNCH_CHECK();
    } else {
        fill_random(m.cache, cfg->kv_bf16 ? 2 * cache_n : cache_n, 3, cfg->kv_bf16);
    }
    fill_random(m.q, (size_t)P * H * (dn + dr), 4, 0);
    CUDA_CHECK(cudaMalloc(&kvb_d, kvb_n * 2));
    fill_random(kvb_d, kvb_n, 5, 1);
    cu_own(cb, kvb_d);
    m.kvb.data = kvb_d;
    m.kvb.dtype = DS_DTYPE_BF16;
    m.kvb.rows = H * (dn + dv);
    m.kvb.cols = C;
    shuffle_pages(pt, n_pages);
    for (int i = 0; i < P; i++) pos[i] = i;
    m.seqs = &seq0;
    m.n = 1;
    {
        ds_batch_meta b = {P, 1, tok, pos, start, sctx, pt, n_pages, ps};
        st = be->set_batch(be, &b, err);
    }
    if (!st) {
        *ms_out = time_median(do_fa, &m, 10);
        *kern_ms = time_attn_kernel(do_fa, &m, 10);
    }
done:
    free(tok); free(pos); free(pt);
    if (m.cache) be->release(be, (float *)m.cache);
    if (m.q) be->release(be, m.q);
    if (m.out) be->release(be, m.out);
    be->destroy(be);
    return st;
}

/* ---- `dsinfer bench --ops`: the GEMMs of issue 8 alone ---------------------------------------------- */

/* n bytes of valid e4m3 codes (|v| in [0.25, 3.75], no NaN) */
__global__ void bench_fill_fp8_kernel(unsigned char *p, size_t n, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        unsigned b = (unsigned)(z ^ (z >> 31)) & 0xff;
        p[i] = (unsigned char)((b & 0x80) | ((5 + ((b >> 3) & 3)) << 3) | (b & 7));
    }
}

__global__ void bench_const_kernel(float *p, size_t n, float v) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = v;
}

#define FLUSH_BYTES CU_LAB_FLUSH_BYTES   /* (cuda_lab.h) */

typedef struct {
    ds_backend *be;
    ds_weight w;               /* FP8 [N, K] with scales, on the device */
    float *x, *out;            /* [M, K], [Mp, N] */
    unsigned char *q;          /* [Mp, K] */
    float *s;                  /* [K/128][Mp] */
    unsigned char *oq;         /* [M, K]: the own GEMM's codes */
    float *os;                 /* [M][K/128]: and scales */
    const void *wb, *xb;       /* BF16 weight [N, K] and activations [M, K] */
    int M, Mp;
    int ok;
} ops_ctx;

static void do_w8a8(void *c) {
    ops_ctx *o = (ops_ctx *)c;
    o->be->linear(o->be, o->out, o->x, &o->w, o->M);
}
static void do_lt_only(void *c) {
    ops_ctx *o = (ops_ctx *)c;
    o->ok = cu_fp8_gemm_quantized(cu_of(o->be), o->out, o->q, o->s, &o->w, o->Mp);
}
static void do_own_only(void *c) {
    ops_ctx *o = (ops_ctx *)c;
    cu_f8_wgmma_gemm(cu_of(o->be), o->out, o->oq, o->os, &o->w, o->M);
}
static void do_bf16(void *c) {
    ops_ctx *o = (ops_ctx *)c;
    const float one = 1.0f, zero = 0.0f;
    ds_cuda_backend *cb = cu_of(o->be);
    CUBLAS_CHECK(cublasGemmEx(cb->cublas_tc, CUBLAS_OP_T, CUBLAS_OP_N, o->w.rows, o->M, o->w.cols, &one, o->wb, CUDA_R_16BF,
                              o->w.cols, o->xb, CUDA_R_16BF, o->w.cols, &zero, o->out, CUDA_R_32F, o->w.rows,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

extern "C" ds_status ds_cuda_bench_ops(const ds_config *cfg, int N, int K, const int *Ms, int nM, ds_ops_row *rows,
                                       char *err) {
    if (K % 128 || N % 4) return ds_seterr(err, DS_ERR_ARG, "bench ops: N %% 4 and K %% 128 must be 0 (N=%d K=%d)", N, K);
    setenv("DSINFER_CUDA_FP8_GEMM", "1", 1);
    ds_backend *be = ds_backend_cuda_new(cfg, err);
    unsetenv("DSINFER_CUDA_FP8_GEMM");
    if (!be) return DS_ERR_BACKEND;
    int Mmax = 4;
    for (int i = 0; i < nM; i++) Mmax = Ms[i] > Mmax ? Ms[i] : Mmax;
    int Mpmax = (Mmax + 3) & ~3, L = K / 128, SR = (N + 127) / 128;
    ops_ctx o;
    memset(&o, 0, sizeof o);
    o.be = be;
    void *wq = NULL, *ws = NULL, *wb = NULL, *xb = NULL, *q = NULL, *s = NULL, *oq = NULL, *os = NULL;
    size_t need = (size_t)N * K * 3 + (size_t)Mpmax * K * 8 + (size_t)Mpmax * N * 4;
    if (cudaMalloc(&wq, (size_t)N * K) != cudaSuccess || cudaMalloc(&ws, sizeof(float) * (size_t)SR * L) != cudaSuccess ||
        cudaMalloc(&wb, (size_t)N * K * 2) != cudaSuccess || cudaMalloc(&xb, (size_t)Mpmax * K * 2) != cudaSuccess ||
        cudaMalloc(&q, (size_t)Mpmax * K) != cudaSuccess || cudaMalloc(&s, sizeof(float) * (size_t)L * Mpmax) != cudaSuccess ||
        cudaMalloc(&oq, (size_t)Mpmax * K) != cudaSuccess || cudaMalloc(&os, sizeof(float) * (size_t)L * Mpmax) != cudaSuccess) {
        cudaGetLastError();
        be->destroy(be);
        return ds_seterr(err, DS_ERR_NOMEM, "bench ops: cannot allocate about %.1f GiB for N=%d K=%d M=%d", need / 1073741824.0,
                         N, K, Mmax);
    }
    void *own[] = {wq, ws, wb, xb, q, s, oq, os};
    for (int i = 0; i < 8; i++) cu_own(cu_of(be), own[i]);
    bench_fill_fp8_kernel<<<4096, 256, 0, cu_stream>>>((unsigned char *)wq, (size_t)N * K, 11);
    CUDA_LAUNCH_CHECK();
    bench_const_kernel<<<64, 256, 0, cu_stream>>>((float *)ws, (size_t)SR * L, 1.0f / 256);
    CUDA_LAUNCH_CHECK();
    fill_random(wb, (size_t)N * K, 12, 1);
    fill_random(xb, (size_t)Mpmax * K, 13, 1);
    o.w.dtype = DS_DTYPE_F8_E4M3;
    o.w.rows = N;
    o.w.cols = K;
    o.w.data = wq;
    o.w.scale = (const float *)ws;
    o.w.scale_cols = L;
    o.w.name = "bench";
    o.wb = wb;
    o.xb = xb;
    o.q = (unsigned char *)q;
    o.s = (float *)s;
    o.oq = (unsigned char *)oq;
    o.os = (float *)os;
    o.x = be->alloc(be, (size_t)Mpmax * K);
    o.out = be->alloc(be, (size_t)Mpmax * N);
    ds_status st = o.x && o.out ? DS_OK : ds_seterr(err, DS_ERR_NOMEM, "bench ops: cannot allocate activations");
    if (!st) fill_random(o.x, (size_t)Mpmax * K, 14, 0);
    void *flush = NULL;   /* the L2 (50 MB on an H200) emptied before each timed run, as in a decode step */
    if (!st && cudaMalloc(&flush, FLUSH_BYTES) != cudaSuccess) {
        cudaGetLastError();
        flush = NULL;
        fprintf(stderr, "bench ops: no memory for the L2 flush buffer; timing with a warm L2\n");
    }
    if (flush) {
        cu_own(cu_of(be), flush);
        CUDA_CHECK(cudaMemset(flush, 0, FLUSH_BYTES));
    }
    for (int i = 0; i < nM && !st; i++) {
        o.M = Ms[i];
        o.Mp = (o.M + 3) & ~3;
        ds_ops_row *r = &rows[i];
        memset(r, 0, sizeof *r);
        r->N = N;
        r->K = K;
        r->M = o.M;
        r->w8a8_us = 1e3 * time_gpu_median(do_w8a8, &o, 15, flush, FLUSH_BYTES);
        cu_rows_fp8_f32(o.oq, o.os, o.x, o.M, K);
        r->own_us = 1e3 * time_gpu_median(do_own_only, &o, 15, flush, FLUSH_BYTES);
        cu_act_quant_fp8(o.q, o.s, o.x, o.M, o.Mp, K);
        r->lt_us = 1e3 * time_gpu_median(do_lt_only, &o, 15, flush, FLUSH_BYTES);
        r->lt_ok = o.ok;
        r->bf16_us = 1e3 * time_gpu_median(do_bf16, &o, 15, flush, FLUSH_BYTES);
    }
    if (o.x) be->release(be, o.x);
    if (o.out) be->release(be, o.out);
    be->destroy(be);   /* frees the owned buffers */
    return st;
}

/* The FP8 matrix rate: cuBLASLt E4M3 GEMM 8192^3 (TN, per-tensor scale 1, BF16 out, fp32 compute). */
extern "C" ds_status ds_cuda_fp8_peak(double *tflops, char *err) {
    char why[256];
    if (!ds_cuda_available(why, sizeof why)) return ds_seterr(err, DS_ERR_BACKEND, "%s", why);
    if (!cu_stream) CUDA_CHECK(cudaStreamCreate(&cu_stream));
    const int n = 8192;
    void *A = NULL, *B = NULL, *D = NULL, *W = NULL;
    size_t wsb = (size_t)32 << 20;
    if (cudaMalloc(&A, (size_t)n * n) != cudaSuccess || cudaMalloc(&B, (size_t)n * n) != cudaSuccess ||
        cudaMalloc(&D, (size_t)n * n * 2) != cudaSuccess || cudaMalloc(&W, wsb) != cudaSuccess) {
        cudaGetLastError();
        return ds_seterr(err, DS_ERR_NOMEM, "fp8 peak: cannot allocate 256 MiB");
    }
    bench_fill_fp8_kernel<<<4096, 256, 0, cu_stream>>>((unsigned char *)A, (size_t)n * n, 1);
    CUDA_LAUNCH_CHECK();
    bench_fill_fp8_kernel<<<4096, 256, 0, cu_stream>>>((unsigned char *)B, (size_t)n * n, 2);
    CUDA_LAUNCH_CHECK();
    cublasLtHandle_t lt;
    CUBLAS_CHECK(cublasLtCreate(&lt));
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, n, n, n));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, n, n, n));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, n, n, n));
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
    cublasLtMatmulHeuristicResult_t res;
    int got = 0;
    ds_status st = DS_OK;
    if (cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 1, &res, &got) != CUBLAS_STATUS_SUCCESS || !got) {
        st = ds_seterr(err, DS_ERR_BACKEND, "fp8 peak: cuBLASLt has no E4M3 algorithm for 8192^3");
    } else {
        cudaEvent_t a, b;
        CUDA_CHECK(cudaEventCreate(&a));
        CUDA_CHECK(cudaEventCreate(&b));
        const float one = 1.0f, zero = 0.0f;
        float best = 1e30f;
        for (int r = 0; r < 8; r++) {
            CUDA_CHECK(cudaEventRecord(a, cu_stream));
            CUBLAS_CHECK(cublasLtMatmul(lt, desc, &one, A, la, B, lb, &zero, D, ld, D, ld, &res.algo, W, wsb, cu_stream));
            CUDA_CHECK(cudaEventRecord(b, cu_stream));
            CUDA_CHECK(cudaEventSynchronize(b));
            float ms;
            CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
            if (r > 0 && ms < best) best = ms;   /* the first run warms up */
        }
        *tflops = 2.0 * n * (double)n * n / (best * 1e-3) / 1e12;
        CUDA_CHECK(cudaEventDestroy(a));
        CUDA_CHECK(cudaEventDestroy(b));
    }
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(la));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lb));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(ld));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(desc));
    CUBLAS_CHECK(cublasLtDestroy(lt));
    cudaFree(A);
    cudaFree(B);
    cudaFree(D);
    cudaFree(W);
    return st;
}
