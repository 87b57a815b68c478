/* The shared experts on a second stream (issue 7; opt.shared_stream, DSINFER_CUDA_SHARED_STREAM, opt-in: see cuda.h).
 *
 * A MoE layer's shared experts read the same input as its router and write the layer's output, to which the
 * combine then adds the routed experts' weighted outputs. They do not depend on the routing, so they can
 * stream their weights while the router GEMM, the top-k, the grouping and the routed experts' gather run:
 * small, latency-bound kernels that leave most of the GPU's memory bandwidth idle.
 *
 *   main:  fork ──> router ─> top-k ─> grouping ─> routed experts ──────> join ─> combine (out += w * y)
 *   side:      └─> shared experts (out = shared(x)) ─────────────────────┘
 *
 * The sum per output element keeps the CPU's order (shared first, then the routed experts by id): only when
 * the shared experts have finished does the combine add to `out`.
 *
 * Every kernel launch of the backend goes to the global cu_stream, and its cuBLAS calls to the handles in the
 * backend; cu_side_begin points both at the side stream's own (its own cuBLAS handles and one workspace
 * shared by them and cuBLASLt: work on one stream runs in order, so one workspace serves the three), so the
 * shared expert's code path is the same as on the main stream. The workspaces of the linear paths (ws_deq,
 * ws_tc, ws_fp8, ws_f8part, ws_f8xt) are swapped too: the router on the main stream is a linear as well (fp32 SGEMM on a
 * dequantized tile in ws_deq without the tensor cores, as the shared experts' GEMMs then are: sharing ws_deq
 * was a race that the tiny NVFP4 golden caught, RESULTS eleventh session run 4). The MLP's ws_mlp is the shared
 * experts' alone; routing and the routed experts use ws_moe, ws_moe2, ws_moe_tc, ws_moe_gemm. The split-K
 * tickets (f8_tickets) serve the shared experts' W8A8 linears only: the main stream's router is never W8A8.
 * Events and stream waits are captured into CUDA graphs as edges: the fork and join hold inside a decode step's
 * graph. */
#include <stdlib.h>

#include "backend/cuda/cuda.h"

int cu_side_ok(ds_cuda_backend *cb) { return cb->side.stream != NULL; }

/* DSINFER_CUDA_SIDE_LAB (lab, backend creation; what leaves later steps slower once the side stream ran: KERNELS.md,
 * twenty-eighth session): 1: where the shared experts would go to the side stream, only its fork and join are made (the
 * side runs nothing, or DSINFER_CUDA_SIDE_DELAY_NS's kernel alone) and the shared experts run in line; 2: the side stream
 * destroyed and made anew at each join outside a capture (the shared experts on it as usual); 3: the join made at once
 * by cu_side_end (the side's work in series with the main stream's) */
int cu_side_lab = 0;

/* DSINFER_CUDA_SIDE_DELAY_NS (tests only, read at backend creation): the side stream first spins this long, so
 * that the op tests see the shared experts finish after the routed ones; a missing join then shows as a wrong
 * sum instead of depending on which stream happens to win. */
__global__ void side_delay_kernel(long long ns) {
    long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < ns);
}

void cu_side_init(ds_cuda_backend *cb) {
    cu_side *s = &cb->side;
    /* non-blocking: ordered with the main stream only by the fork and join events (a blocking stream would also
     * wait on, and be waited on by, every legacy-stream copy, which hid a missing join from the op tests) */
    /* DSINFER_CUDA_SIDE_PRIO (lab): -1 the side stream at the greatest priority, 1 at the least, 0 the default */
    const char *pr = getenv("DSINFER_CUDA_SIDE_PRIO");
    int prio = pr && *pr ? atoi(pr) : 0, least = 0, greatest = 0;
    if (prio) CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    CUDA_CHECK(cudaStreamCreateWithPriority(&s->stream, cudaStreamNonBlocking, prio < 0 ? greatest : prio > 0 ? least : 0));
    CUDA_CHECK(cudaEventCreateWithFlags(&s->fork, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&s->join, cudaEventDisableTiming));
    CUBLAS_CHECK(cublasCreate(&s->cublas));
    CUBLAS_CHECK(cublasSetMathMode(s->cublas, CUBLAS_PEDANTIC_MATH));   /* as cb->cublas: plain fp32 */
    CUBLAS_CHECK(cublasCreate(&s->cublas_tc));
    cu_lt_init(cb);   /* the main stream's cuBLASLt workspace exists before the first swap */
    CUDA_CHECK(cudaMalloc(&s->lt_ws, LT_WS_BYTES));
    CUBLAS_CHECK(cublasSetStream(s->cublas, s->stream));
    CUBLAS_CHECK(cublasSetStream(s->cublas_tc, s->stream));
    CUBLAS_CHECK(cublasSetWorkspace(s->cublas, s->lt_ws, LT_WS_BYTES));
    CUBLAS_CHECK(cublasSetWorkspace(s->cublas_tc, s->lt_ws, LT_WS_BYTES));
    const char *d = getenv("DSINFER_CUDA_SIDE_DELAY_NS");
    s->delay_ns = d && *d ? atoll(d) : 0;
}

void cu_side_free(ds_cuda_backend *cb) {
    cu_side *s = &cb->side;
    if (!s->stream) return;
    for (int i = 0; i < 5; i++) cu_ws_free(&s->ws[i]);
    cublasDestroy(s->cublas);
    cublasDestroy(s->cublas_tc);
    cudaFree(s->lt_ws);
    cudaEventDestroy(s->fork);
    cudaEventDestroy(s->join);
    cudaStreamDestroy(s->stream);
    memset(s, 0, sizeof *s);
}

/* exchanges the stream, the cuBLAS handles, the cuBLASLt workspace and the linears' workspaces between the backend
 * and the side */
static void side_swap(ds_cuda_backend *cb) {
    cu_side *s = &cb->side;
    cudaStream_t st = cu_stream;
    cu_stream = s->stream;
    s->stream = st;
    cublasHandle_t h = cb->cublas;
    cb->cublas = s->cublas;
    s->cublas = h;
    h = cb->cublas_tc;
    cb->cublas_tc = s->cublas_tc;
    s->cublas_tc = h;
    void *w = cb->lt_ws;
    cb->lt_ws = s->lt_ws;
    s->lt_ws = w;
    cu_ws *mine[5] = {&cb->ws_deq, &cb->ws_tc, &cb->ws_fp8, &cb->ws_f8part, &cb->ws_f8xt};
    for (int i = 0; i < 5; i++) {
        cu_ws t = *mine[i];
        *mine[i] = s->ws[i];
        s->ws[i] = t;
    }
}

void cu_side_begin(ds_cuda_backend *cb) {
    cu_side *s = &cb->side;
    CUDA_CHECK(cudaEventRecord(s->fork, cu_stream));
    CUDA_CHECK(cudaStreamWaitEvent(s->stream, s->fork, 0));
    side_swap(cb);
    s->active = 1;
    if (s->delay_ns > 0) {
        side_delay_kernel<<<1, 1, 0, cu_stream>>>(s->delay_ns);
        CUDA_LAUNCH_CHECK();
    }
}

void cu_side_end(ds_cuda_backend *cb) {
    cu_side *s = &cb->side;
    CUDA_CHECK(cudaEventRecord(s->join, cu_stream));   /* cu_stream is the side stream here */
    side_swap(cb);
    s->active = 0;
    s->pending = 1;
    if (cu_side_lab == 3) cu_side_join(cb);
}

/* lab 2: the side stream (idle: its work joined) destroyed and made anew, its cuBLAS handles pointed at the new one */
static void side_renew(cu_side *s) {
    CUDA_CHECK(cudaStreamSynchronize(s->stream));
    CUDA_CHECK(cudaStreamDestroy(s->stream));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));   /* (lab: not with DSINFER_CUDA_SIDE_PRIO's) */
    CUBLAS_CHECK(cublasSetStream(s->cublas, s->stream));
    CUBLAS_CHECK(cublasSetStream(s->cublas_tc, s->stream));
}

void cu_side_join(ds_cuda_backend *cb) {
    cu_side *s = &cb->side;
    if (!s->pending) return;
    CUDA_CHECK(cudaStreamWaitEvent(cu_stream, s->join, 0));
    s->pending = 0;
    if (cu_side_lab == 2 && !cu_capturing()) side_renew(s);
}
