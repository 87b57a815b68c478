/* The resident-phases lab of `dsinfer bench --ceilings` (issue 7, batch 1; KERNELS "Fifty-ninth session"): does a chain
 * of dependent GEMVs get faster when every phase's weight rows are already in shared memory when its input arrives?
 *
 * Batch 1's attention half is ~8 dependent kernels a layer of 3 .. 6 us each for ~16 MB (V2-Lite FP8): each kernel
 * fetches its weights only after the one before it is done. The weights depend on nothing, and one layer's attention
 * weights (~124 KB an SM over 132 SMs) fit in shared memory. The lab times P phases of the same work, x_{p+1}[r] =
 * tanh(s . sum_k W_p[r, k] x_p[k]) for p = 0 .. P - 1 (W_p [R, D] E4M3 codes in [0.25, 3.75], R = D = 2048: an o_proj),
 * block b owning rows b, b + G, .. (G: the SMs), in three forms, each from a cold L2:
 *  - chain: a kernel a phase in a CUDA graph (each kernel bulk-copies its rows into shared memory at its start, then
 *    reads x): the weights fetched after the dependency, as today;
 *  - chain with PDL: the same kernels as programmatic dependent launches, which copy their rows before griddepcontrol
 *    .wait: each kernel's rows stream while the kernels before it run;
 *  - resident: one cooperative launch that copies every phase's rows into shared memory at its start (an mbarrier a
 *    phase), with a grid counter between phases; and the same launch waiting for all its rows and one counter before
 *    it starts a clock (globaltimer, block 0), the phases alone.
 * Every form's x_P is checked against the host's chain in double (NMSE). Timing only: nothing here is the engine's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_api.h"
#include "backend/cuda/cuda_lab.h"
#include "backend/cuda/cuda_own.h"
#include "backend/cuda/cuda_wgmma.h"

#define RP_THREADS 256
#define RP_WARPS (RP_THREADS / 32)
#define RP_MAX_P 6
#define RP_REPS 15

/* thread 0, after its block's writes (a __syncthreads before): one more on the grid's counter, released at GPU scope */
__device__ __forceinline__ void rp_count_add(unsigned *cnt) {
    __threadfence();
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(cnt) : "memory");
}
__device__ __forceinline__ unsigned long long rp_now(void) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
/* thread 0: until the counter reaches need (acquire: the writes released before the adds are visible after), or 0.2 s
 * passed (a lab's error must not hang the GPU: the phases then read poisoned or stale inputs and the NMSE check fails) */
__device__ __forceinline__ void rp_count_wait(const unsigned *cnt, unsigned need) {
    const unsigned long long t0 = rp_now();
    unsigned v;
    do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(cnt) : "memory");
    } while ((int)(v - need) < 0 && rp_now() - t0 < 200000000ull);   /* (wraps after 2^32 adds: a difference) */
}

/* rows owned by block b of G over R rows: b, b + G, .. */
__device__ __forceinline__ int rp_rows_of(int b, int G, int R) { return b < R ? (R - 1 - b) / G + 1 : 0; }

/* thread 0: bulk-copy block b's rows of w [R, D] (row i of the block to dst + i D) onto bar, armed for their bytes */
__device__ __forceinline__ void rp_load_rows(unsigned char *dst, const unsigned char *w, int R, int D, uint64_t *bar) {
    const int n = rp_rows_of((int)blockIdx.x, (int)gridDim.x, R);
    mbar_expect_tx(bar, n * D);
    for (int i = 0; i < n; i++) bulk_load(dst + (size_t)i * D, w + (size_t)((int)blockIdx.x + i * (int)gridDim.x) * D, D, bar);
}

/* every thread: x [D] (another block's or kernel's output: read through L2, not L1) into xs */
__device__ __forceinline__ void rp_load_x(float *xs, const float *x, int D) {
    for (int i = threadIdx.x; i < D / 4; i += RP_THREADS) ((float4 *)xs)[i] = __ldcg((const float4 *)x + i);
}

/* the block's rows (in shared memory at rows) against xs: y[row] = tanh(s . dot), a warp a row */
__device__ __forceinline__ void rp_rows(float *y, const unsigned char *rows, const float *xs, int R, int D, float s) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, n = rp_rows_of((int)blockIdx.x, (int)gridDim.x, R);
    for (int i = warp; i < n; i += RP_WARPS) {
        float acc[1] = {0.0f};
        for (int c = lane; c < D / 16; c += 32) {
            const uint4 q[1] = {((const uint4 *)(rows + (size_t)i * D))[c]};
            mo_dot<1, 1>(q, 1.0f, xs + 16 * c, lane, acc);
        }
        for (int o = 16; o; o >>= 1) acc[0] += __shfl_xor_sync(0xffffffffu, acc[0], o);
        if (lane == 0) y[(int)blockIdx.x + i * (int)gridDim.x] = tanhf(s * acc[0]);
    }
}

/* chain: one phase, x -> y; the rows copied before cu_pdl_wait (a no-op without the launch attribute) */
__global__ void __launch_bounds__(RP_THREADS) rp_phase_kernel(float *y, const float *x, const unsigned char *w, int R, int D, float s) {
    extern __shared__ __align__(1024) unsigned char rp_raw[];
    uint64_t *bar = (uint64_t *)rp_raw;
    float *xs = (float *)(rp_raw + 16);
    unsigned char *rows = rp_raw + 16 + (size_t)D * 4;
    if (threadIdx.x == 0) {
        mbar_init(bar, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        rp_load_rows(rows, w, R, D, bar);
    }
    cu_pdl_trigger();
    cu_pdl_wait();
    rp_load_x(xs, x, D);
    __syncthreads();
    mbar_wait(bar, 0);
    rp_rows(y, rows, xs, R, D, s);
}

/* resident: every phase in one cooperative launch; xb [P + 1][D] (x_0 given); cnt: the grid's counter, base its value at
 * this launch's start (each phase adds G). clock: wait for every phase's rows and one counter, then block 0 writes the
 * phases' nanoseconds (globaltimer) to *ns */
__global__ void __launch_bounds__(RP_THREADS, 1) rp_resident_kernel(float *xb, const unsigned char *w, int P, int R, int D,
                                                                     float s, unsigned *cnt, unsigned base, int clock,
                                                                     unsigned long long *ns) {
    extern __shared__ __align__(1024) unsigned char rp_raw[];
    uint64_t *bar = (uint64_t *)rp_raw;   /* [RP_MAX_P] */
    float *xs = (float *)(rp_raw + 8 * RP_MAX_P);
    unsigned char *rows = rp_raw + 8 * RP_MAX_P + (size_t)D * 4;
    const size_t slice = (size_t)rp_rows_of(0, (int)gridDim.x, R) * D;   /* a phase's rows (block 0 has the most) */
    const unsigned G = gridDim.x;
    if (threadIdx.x == 0) {
        for (int p = 0; p < P; p++) mbar_init(&bar[p], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        for (int p = 0; p < P; p++) rp_load_rows(rows + p * slice, w + (size_t)p * R * D, R, D, &bar[p]);
    }
    __syncthreads();
    unsigned long long t0 = 0;
    unsigned need = base;
    if (clock) {
        for (int p = 0; p < P; p++) mbar_wait(&bar[p], 0);
        __syncthreads();
        need += G;
        if (threadIdx.x == 0) {
            rp_count_add(cnt);
            rp_count_wait(cnt, need);
        }
        __syncthreads();
        t0 = rp_now();
    }
    for (int p = 0; p < P; p++) {
        if (p > 0) {
            need += G;
            if (threadIdx.x == 0) rp_count_wait(cnt, need);
            __syncthreads();
        }
        rp_load_x(xs, xb + (size_t)p * D, D);
        __syncthreads();
        mbar_wait(&bar[p], 0);
        rp_rows(xb + (size_t)(p + 1) * D, rows + p * slice, xs, R, D, s);
        __syncthreads();   /* (xs is read again by the next phase's loads only after this) */
        if (p + 1 < P && threadIdx.x == 0) rp_count_add(cnt);
    }
    if (clock) {
        __syncthreads();
        if (threadIdx.x == 0) {   /* every block's last phase done */
            rp_count_add(cnt);
            rp_count_wait(cnt, need + G);
        }
        if (blockIdx.x == 0 && threadIdx.x == 0) *ns = rp_now() - t0;
    } else if (threadIdx.x == 0) {
        rp_count_add(cnt);   /* (each launch adds P G in all, (P + 1) G clocked: the next launch's base) */
    }
}

typedef struct {
    int P, R, D, G;
    float s;
    unsigned char *w;       /* [P][R][D] */
    float *xb;              /* [P + 1][D] */
    unsigned *cnt;
    unsigned base;          /* the counter's value before the next resident launch */
    unsigned long long *ns; /* the clocked form's last figure */
    size_t smem_phase, smem_res;
    cudaGraphExec_t chain, chain_pdl;
    int clock;
} rp_ctx;

static void rp_launch_chain(rp_ctx *c, int pdl) {
    for (int p = 0; p < c->P; p++) {
        cu_launch_pdl(pdl, rp_phase_kernel, dim3((unsigned)c->G), dim3(RP_THREADS), c->smem_phase, c->xb + (size_t)(p + 1) * c->D,
                      (const float *)c->xb + (size_t)p * c->D, (const unsigned char *)c->w + (size_t)p * c->R * c->D, c->R, c->D, c->s);
        CUDA_LAUNCH_CHECK();
    }
}

static cudaGraphExec_t rp_capture(rp_ctx *c, int pdl) {
    cudaGraph_t g;
    cudaGraphExec_t e;
    CUDA_CHECK(cudaStreamBeginCapture(cu_stream, cudaStreamCaptureModeThreadLocal));
    rp_launch_chain(c, pdl);
    CUDA_CHECK(cudaStreamEndCapture(cu_stream, &g));
    CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
    CUDA_CHECK(cudaGraphDestroy(g));
    return e;
}

static void rp_run_chain(void *v) { CUDA_CHECK(cudaGraphLaunch(((rp_ctx *)v)->chain, cu_stream)); }
static void rp_run_chain_pdl(void *v) { CUDA_CHECK(cudaGraphLaunch(((rp_ctx *)v)->chain_pdl, cu_stream)); }
static void rp_run_resident(void *v) {
    rp_ctx *c = (rp_ctx *)v;
    cu_launch_coop(rp_resident_kernel, dim3((unsigned)c->G), dim3(RP_THREADS), c->smem_res, c->xb, (const unsigned char *)c->w,
                   c->P, c->R, c->D, c->s, c->cnt, c->base, c->clock, c->ns);
    CUDA_LAUNCH_CHECK();
    c->base += (unsigned)(c->P + (c->clock ? 1 : 0)) * (unsigned)c->G;
}

/* E4M3 codes with |v| in [0.25, 3.75] (no NaN, no subnormal), a fixed sequence */
static void rp_fill_codes(unsigned char *h, size_t n) {
    uint64_t z = 0x243f6a8885a308d3ull;
    for (size_t i = 0; i < n; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        unsigned b = (unsigned)(z >> 56);
        h[i] = (unsigned char)((b & 0x80) | ((5 + ((b >> 3) & 3)) << 3) | (b & 7));
    }
}

/* the host's chain in double from x0 [D]; returns x_P in out [D] */
static void rp_host_chain(double *out, const float *x0, const unsigned char *w, int P, int R, int D, float s) {
    double *x = (double *)malloc(sizeof(double) * D), *y = (double *)malloc(sizeof(double) * R);
    float lut[256];
    for (int i = 0; i < 256; i++) lut[i] = cu_fp8_to_f32((unsigned char)i);
    for (int k = 0; k < D; k++) x[k] = x0[k];
    for (int p = 0; p < P; p++) {
        for (int r = 0; r < R; r++) {
            const unsigned char *row = w + ((size_t)p * R + r) * D;
            double a = 0.0;
            for (int k = 0; k < D; k++) a += (double)lut[row[k]] * x[k];
            y[r] = tanh((double)s * a);
        }
        for (int k = 0; k < D; k++) x[k] = y[k];
    }
    memcpy(out, x, sizeof(double) * D);
    free(x);
    free(y);
}

/* NMSE of the device's x_P against ref */
static double rp_nmse(const rp_ctx *c, const double *ref) {
    float *h = (float *)malloc(sizeof(float) * c->D);
    CUDA_CHECK(cudaMemcpy(h, c->xb + (size_t)c->P * c->D, sizeof(float) * c->D, cudaMemcpyDeviceToHost));
    double e = 0.0, n = 0.0;
    for (int k = 0; k < c->D; k++) {
        e += (h[k] - ref[k]) * (h[k] - ref[k]);
        n += ref[k] * ref[k];
    }
    free(h);
    return n > 0.0 ? e / n : 1.0;
}

/* One run of a form after x_1 .. x_P are poisoned (NaN): its NMSE against ref. A form that skips a phase or reads an
 * input before it is written reads NaN (the timed runs rewrite the same values, so they alone could not tell). */
static double rp_check(rp_ctx *c, void (*run)(void *), const double *ref) {
    CUDA_CHECK(cudaMemset(c->xb + c->D, 0xff, sizeof(float) * c->P * c->D));
    run(c);
    CUDA_CHECK(cudaStreamSynchronize(cu_stream));
    return rp_nmse(c, ref);
}

static int rp_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* the lab's buffers, device (NULL where never allocated: cudaFree(NULL) does nothing) and host */
static void rp_release(rp_ctx *c, void *flush, unsigned char *hw, float *hx, double *ref) {
    void *dev[] = {c->w, c->xb, c->cnt, c->ns, flush};
    for (int i = 0; i < 5; i++) CUDA_CHECK(cudaFree(dev[i]));
    free(hw);
    free(hx);
    free(ref);
}

extern "C" ds_status ds_cuda_resident_lab(ds_resident_lab *out, char *err) {
    memset(out, 0, sizeof *out);
    if (!cu_stream) CUDA_CHECK(cudaStreamCreate(&cu_stream));
    int dev, n_sm, max_smem;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    rp_ctx c;
    memset(&c, 0, sizeof c);
    c.R = c.D = 2048;
    c.G = n_sm;
    const size_t slice = (size_t)((c.R + c.G - 1) / c.G) * c.D, head = 8 * RP_MAX_P + (size_t)c.D * 4;
    c.P = RP_MAX_P;
    while (c.P > 1 && head + c.P * slice > (size_t)max_smem) c.P--;
    c.smem_res = head + c.P * slice;
    c.smem_phase = 16 + (size_t)c.D * 4 + slice;
    c.s = (float)(1.0 / sqrt(c.D * 2.6 / 3.0));   /* the dots ~N(0, 1): E v^2 ~2.6 for these codes, E x^2 1/3 */
    const size_t wbytes = (size_t)c.P * c.R * c.D;
    unsigned char *hw = (unsigned char *)malloc(wbytes);
    float *hx = (float *)malloc(sizeof(float) * c.D);
    double *ref = (double *)malloc(sizeof(double) * c.D);
    void *flush = NULL;
    if (!hw || !hx || !ref || cudaMalloc(&c.w, wbytes) != cudaSuccess ||
        cudaMalloc(&c.xb, sizeof(float) * (c.P + 1) * c.D) != cudaSuccess || cudaMalloc(&c.cnt, sizeof(unsigned)) != cudaSuccess ||
        cudaMalloc(&c.ns, sizeof(unsigned long long)) != cudaSuccess || cudaMalloc(&flush, CU_LAB_FLUSH_BYTES) != cudaSuccess) {
        cudaGetLastError();
        rp_release(&c, flush, hw, hx, ref);
        return ds_seterr(err, DS_ERR_NOMEM, "resident lab: cannot allocate %.1f MB", (wbytes + CU_LAB_FLUSH_BYTES) / 1e6);
    }
    rp_fill_codes(hw, wbytes);
    for (int k = 0; k < c.D; k++) hx[k] = (float)((k * 2654435761u) % 2001u) / 1000.0f - 1.0f;
    rp_host_chain(ref, hx, hw, c.P, c.R, c.D, c.s);
    CUDA_CHECK(cudaMemcpy(c.w, hw, wbytes, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(c.xb, hx, sizeof(float) * c.D, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(c.cnt, 0, sizeof(unsigned)));
    CUDA_CHECK(cudaMemset(flush, 0, CU_LAB_FLUSH_BYTES));
    CUDA_CHECK(cudaFuncSetAttribute(rp_resident_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)c.smem_res));
    CUDA_CHECK(cudaFuncSetAttribute(rp_phase_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)c.smem_phase));
    c.chain = rp_capture(&c, 0);
    c.chain_pdl = rp_capture(&c, 1);
    out->phases = c.P;
    out->rows = c.R;
    out->cols = c.D;
    out->mb = wbytes / 1e6;
    out->nmse_chain = rp_check(&c, rp_run_chain, ref);
    out->chain_us = 1e3 * cu_lab_time_cold(rp_run_chain, &c, RP_REPS, flush, CU_LAB_FLUSH_BYTES);
    out->nmse_chain_pdl = rp_check(&c, rp_run_chain_pdl, ref);
    out->chain_pdl_us = 1e3 * cu_lab_time_cold(rp_run_chain_pdl, &c, RP_REPS, flush, CU_LAB_FLUSH_BYTES);
    out->nmse_resident = rp_check(&c, rp_run_resident, ref);
    out->resident_us = 1e3 * cu_lab_time_cold(rp_run_resident, &c, RP_REPS, flush, CU_LAB_FLUSH_BYTES);
    c.clock = 1;
    out->nmse_clocked = rp_check(&c, rp_run_resident, ref);
    double v[RP_REPS];   /* the clocked form: the median of its launches' own figures */
    for (int r = 0; r < RP_REPS; r++) {
        rp_run_resident(&c);
        unsigned long long ns;
        CUDA_CHECK(cudaMemcpy(&ns, c.ns, sizeof ns, cudaMemcpyDeviceToHost));
        v[r] = ns / 1e3;
    }
    qsort(v, RP_REPS, sizeof v[0], rp_cmp_double);
    out->phases_alone_us = v[RP_REPS / 2];
    CUDA_CHECK(cudaGraphExecDestroy(c.chain));
    CUDA_CHECK(cudaGraphExecDestroy(c.chain_pdl));
    rp_release(&c, flush, hw, hx, ref);
    return DS_OK;
}
