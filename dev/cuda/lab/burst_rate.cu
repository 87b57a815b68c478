/* burst_rate: how fast one launch of a block an SM reads a short burst of cold bytes (issue 7, batch 1; KERNELS.md
 * "Forty-fifth session"). The question the row-ownership linears (cuda_rowo.cu) left: their 32 .. 57 KB a block by bulk
 * copies took ~9 us a launch where gemv_v2_kernel's loads took ~6.7 for the same matrices. Two candidates: the TMA
 * unit's rate for a short burst, and the shared-memory carveout a launch asking 42 .. 227 KB of dynamic shared memory
 * sets (its neighbours ask none), which an SM can only change while idle.
 *
 * Forms, each launched REPS times back to back on one stream (each launch its own cold bytes: offsets walk a buffer of
 * BUF_BYTES, 40x the L2), timed by events (us a launch, launch gaps included as in a plain stream):
 *   empty      a block that only writes its sink word: the launch alone (no dynamic shared memory, or BIG of it)
 *   ldg        256 threads read the block's S bytes by 16-byte loads, 8 in flight a thread (gemv_v2's way)
 *   ldg+big    the same, launched asking BIG bytes of dynamic shared memory (the carveout alone)
 *   tma        a producer thread bulk-copies the S bytes in 16 KB stages into a ring of 12 (192 KB, all of S <= 192 KB in
 *              flight at once), 8 consumer warps add every word (rowo's and moeo_kernel's way)
 *   pairs      empty launches alternating without and with BIG (what a graph of mixed kernels does to the carveout),
 *              against the same count all without
 * Every form sums the words it read into its sink (the host checks the sums: a byte not read fails the lab). */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/cuda/cuda_wgmma.h"   /* the project's mbarriers and bulk copies */
#include "lab_check.h"


#define THREADS 288                 /* a producer warp and 8 consumer warps (the ldg form's warp 0 idles) */
#define STAGE (16 * 1024)
#define NST 12
#define BIG (200 * 1024)            /* the dynamic shared memory the big forms ask (the tma form's ring and barriers) */
#define BUF_BYTES (2048ull << 20)   /* 2 GB of source: each launch's bytes cold in the 50 MB L2 */
#define REPS 64

/* the 16-byte words [w0, w0 + n) of src added up (as unsigned sums of their 4 words) */
__device__ __forceinline__ unsigned add16(uint4 v) { return v.x + v.y + v.z + v.w; }

__global__ void __launch_bounds__(THREADS, 1) empty_kernel(unsigned *sink) {
    if (threadIdx.x == 32) sink[blockIdx.x] = blockIdx.x;
}

__global__ void __launch_bounds__(THREADS, 1) ldg_kernel(const uint4 *src, size_t off16, int n16, unsigned *sink) {
    if (threadIdx.x < 32) return;
    const int t = threadIdx.x - 32;
    const uint4 *p = src + off16 + (size_t)blockIdx.x * n16;
    unsigned acc = 0;
    for (int i = t; i < n16; i += 256 * 8) {
        uint4 v[8];
#pragma unroll
        for (int u = 0; u < 8; u++) v[u] = i + u * 256 < n16 ? __ldcs(p + i + u * 256) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < 8; u++) acc += add16(v[u]);
    }
    acc = __reduce_add_sync(0xffffffffu, acc);
    if ((t & 31) == 0) atomicAdd(sink + blockIdx.x, acc);
}

__global__ void __launch_bounds__(THREADS, 1) tma_kernel(const unsigned char *src, size_t off, int bytes, unsigned *sink) {
    extern __shared__ unsigned char raw[];
    unsigned char *ring = (unsigned char *)(((uintptr_t)raw + 1023) & ~(uintptr_t)1023);
    uint64_t *full = (uint64_t *)(ring + (size_t)NST * STAGE), *empty = full + NST;
    const int n = bytes / STAGE;
    if (threadIdx.x == 0) {
        for (int s = 0; s < NST; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 8);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    const unsigned char *p = src + off + (size_t)blockIdx.x * bytes;
    if (threadIdx.x < 32) {
        if (threadIdx.x) return;
        for (int i = 0; i < n; i++) {
            const int s = i % NST;
            if (i >= NST) mbar_wait(&empty[s], (i / NST - 1) & 1);
            mbar_expect_tx(&full[s], STAGE);
            bulk_load(ring + (size_t)s * STAGE, p + (size_t)i * STAGE, STAGE, &full[s]);
        }
        return;
    }
    const int t = threadIdx.x - 32;
    unsigned acc = 0;
    for (int i = 0; i < n; i++) {
        const int s = i % NST;
        mbar_wait(&full[s], (i / NST) & 1);
        const uint4 *st = (const uint4 *)(ring + (size_t)s * STAGE);
#pragma unroll
        for (int k = 0; k < STAGE / 16 / 256; k++) acc += add16(st[t + k * 256]);
        __syncwarp();
        if ((t & 31) == 0) mbar_arrive(&empty[s]);
    }
    acc = __reduce_add_sync(0xffffffffu, acc);
    if ((t & 31) == 0) atomicAdd(sink + blockIdx.x, acc);
}

/* the host's sum of the bytes block b of a launch at off reads (the source's words are w(i) = i * 2654435761, i the
 * word's index in the buffer: made on the device by fill_kernel) */
static unsigned host_sum(size_t off, size_t bytes, int b) {
    unsigned acc = 0;
    const size_t w0 = (off + (size_t)b * bytes) / 4, n = bytes / 4;
    for (size_t i = w0; i < w0 + n; i++) acc += (unsigned)(i * 2654435761u);
    return acc;
}
__global__ void fill_kernel(unsigned *p, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (unsigned)(i * 2654435761u);
}

typedef struct { int form; size_t S; int big; } run_cfg;   /* form 0 empty, 1 ldg, 2 tma */

static size_t g_off;   /* where the next launch's bytes start (walks the buffer) */

static void launch(const run_cfg &c, const unsigned char *src, unsigned *sink, int n_sm, size_t *off_out) {
    const size_t per = (size_t)n_sm * c.S;
    if (g_off + per > BUF_BYTES) g_off = 0;
    *off_out = g_off;
    const size_t smem = c.big ? BIG : 0;
    if (c.form == 0) empty_kernel<<<n_sm, THREADS, smem>>>(sink);
    else if (c.form == 1) ldg_kernel<<<n_sm, THREADS, smem>>>((const uint4 *)src, g_off / 16, (int)(c.S / 16), sink);
    else tma_kernel<<<n_sm, THREADS, BIG>>>(src, g_off, (int)c.S, sink);
    CK(cudaGetLastError());
    g_off += per;
}

/* us a launch over REPS launches of c; 0 and a message where a sum is wrong (checked on the last launch) */
static double time_form(const run_cfg &c, const unsigned char *src, unsigned *sink, int n_sm) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    size_t off = 0;
    launch(c, src, sink, n_sm, &off);   /* warm-up (first launch of a kernel) */
    CK(cudaEventRecord(e0));
    for (int r = 0; r < REPS; r++) launch(c, src, sink, n_sm, &off);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    int ok = 1;
    if (c.form) {   /* one more launch with the sinks zeroed: its sums checked */
        CK(cudaMemset(sink, 0, (size_t)n_sm * sizeof(unsigned)));
        launch(c, src, sink, n_sm, &off);
        unsigned *h = (unsigned *)malloc((size_t)n_sm * sizeof(unsigned));
        CK(cudaMemcpy(h, sink, (size_t)n_sm * sizeof(unsigned), cudaMemcpyDeviceToHost));
        for (int b = 0; b < n_sm && ok; b += 17) ok = h[b] == host_sum(off, c.S, b);
        free(h);
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    if (!ok) {
        printf("  form %d S %zu KB: WRONG SUMS\n", c.form, c.S >> 10);
        return 0.0;
    }
    return ms * 1000.0 / REPS;
}

/* us a pair of empty launches: a (big or not) then b (big or not), REPS pairs */
static double time_pairs(int big_a, int big_b, unsigned *sink, int n_sm) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    empty_kernel<<<n_sm, THREADS, big_a ? BIG : 0>>>(sink);
    CK(cudaEventRecord(e0));
    for (int r = 0; r < REPS; r++) {
        empty_kernel<<<n_sm, THREADS, big_a ? BIG : 0>>>(sink);
        empty_kernel<<<n_sm, THREADS, big_b ? BIG : 0>>>(sink);
    }
    CK(cudaGetLastError());
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return ms * 1000.0 / REPS;
}

int main(void) {
    int n_sm;
    CK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, BIG));
    CK(cudaFuncSetAttribute(ldg_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, BIG));
    CK(cudaFuncSetAttribute(tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, BIG + 2048));
    unsigned char *src;
    unsigned *sink;
    CK(cudaMalloc(&src, BUF_BYTES));
    CK(cudaMalloc(&sink, (size_t)n_sm * sizeof(unsigned)));
    fill_kernel<<<4096, 256>>>((unsigned *)src, BUF_BYTES / 4);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    printf("burst_rate: %d SMs, a block an SM, %d launches a form, each launch's bytes cold (a 2 GB walk)\n", n_sm, REPS);
    printf("empty launch: %.2f us (no dynamic shared memory), %.2f us (asking %d KB)\n",
           time_form({0, 0, 0}, src, sink, n_sm), time_form({0, 0, 1}, src, sink, n_sm), BIG >> 10);
    printf("empty pairs: plain + plain %.2f us, big + big %.2f us, plain + big %.2f us (alternating carveouts)\n",
           time_pairs(0, 0, sink, n_sm), time_pairs(1, 1, sink, n_sm), time_pairs(0, 1, sink, n_sm));
    printf("%8s %10s %10s %10s %9s %9s %9s\n", "KB/block", "ldg us", "ldg+big", "tma us", "ldg GB/s", "l+b GB/s", "tma GB/s");
    const size_t sizes[] = {16, 32, 64, 128, 256, 512, 2048};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const size_t S = sizes[i] << 10;
        const double l = time_form({1, S, 0}, src, sink, n_sm), lb = time_form({1, S, 1}, src, sink, n_sm);
        const double t = time_form({2, S, 1}, src, sink, n_sm);
        const double gb = (double)n_sm * S / 1e3;   /* bytes a launch / 1e3: GB/s over us */
        printf("%8zu %10.2f %10.2f %10.2f %9.0f %9.0f %9.0f\n", sizes[i], l, lb, t, l > 0 ? gb / l : 0, lb > 0 ? gb / lb : 0,
               t > 0 ? gb / t : 0);
    }
    CK(cudaFree(src));
    CK(cudaFree(sink));
    return 0;
}
