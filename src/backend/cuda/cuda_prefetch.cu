/* The next layer's dense weights pulled into L2 on a stream of their own (issue 7; opt.l2_prefetch,
 * DSINFER_CUDA_L2_PREFETCH=1), or by a launch on the main stream itself (=2: the twenty-eighth session found kernels of
 * a second stream running beside the main stream's leaving later steps slower), up to DSINFER_CUDA_L2_PREFETCH_MAX_M
 * tokens (default 8).
 *
 * At small batches a decode step is a chain of latency-bound launches: each GEMV reads a few MB with too few
 * bytes in flight to reach the memory's bandwidth (ncu, fifteenth session: 0.34 eligible warps a scheduler), and
 * DRAM idles between and under them. The weights every token of the next layer reads (the attention's
 * projections, the router, the shared experts: ~33 MB a V2-Lite layer in FP8, within the H200's 50 MB L2) do not
 * depend on anything the step computes, so right after a layer's MoE (whose routed experts would evict them if
 * fetched earlier) the engine asks for the next layer's; a side stream streams them by bulk L2 prefetches
 * (cp.async.bulk.prefetch.L2: no registers, no completion) while the main stream runs the small kernels in
 * between, and the next layer's GEMVs then read from L2.
 *
 *   main:  ... MoE(l) ─ fork ─> add+norm ─> q / kv_a ─> attention ─> o ─> router ─> shared ─> ... ─> join (next fork)
 *   side:             └─> prefetch(l + 1) ──────────────────────────────────────────────┘
 *
 * A prefetch changes no value; the fork and join are events, captured into the decode step's graph as edges (the
 * graph's capture joins the last one before it ends: cu_prefetch_join). */
#include "backend/cuda/cuda.h"

#define PF_MAX 16            /* weights a layer's prefetch lists */
#define PF_CHUNK (64 << 10)  /* bytes a bulk prefetch instruction */
#define PF_BLOCKS 16

typedef struct {
    const char *p[PF_MAX];
    unsigned long long n[PF_MAX];   /* bytes, multiples of 16 */
    int count;
} pf_list;

/* block b's thread 0 issues the chunks b, b + PF_BLOCKS, ... of every listed range */
__global__ void l2_prefetch_kernel(pf_list l) {
    if (threadIdx.x) return;
    for (int s = 0; s < l.count; s++)
        for (unsigned long long o = (unsigned long long)blockIdx.x * PF_CHUNK; o < l.n[s]; o += (unsigned long long)PF_BLOCKS * PF_CHUNK) {
            unsigned long long n = l.n[s] - o < PF_CHUNK ? l.n[s] - o : PF_CHUNK;
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(l.p[s] + o), "r"((unsigned)n) : "memory");
        }
}

void cu_prefetch_init(ds_cuda_backend *cb) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&cb->pf.stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&cb->pf.fork, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&cb->pf.join, cudaEventDisableTiming));
}

void cu_prefetch_free(ds_cuda_backend *cb) {
    if (!cb->pf.stream) return;
    cudaEventDestroy(cb->pf.fork);
    cudaEventDestroy(cb->pf.join);
    cudaStreamDestroy(cb->pf.stream);
    memset(&cb->pf, 0, sizeof cb->pf);
}

/* the main stream waits for the last prefetch (before another fork, and before a capture ends) */
void cu_prefetch_join(ds_cuda_backend *cb) {
    if (!cb->pf.pending) return;
    CUDA_CHECK(cudaStreamWaitEvent(cu_stream, cb->pf.join, 0));
    cb->pf.pending = 0;
}

/* appends w's data (16-byte aligned start, whole 16-byte units) */
static void pf_add(pf_list *l, const ds_weight *w) {
    if (!w->data || l->count >= PF_MAX) return;
    size_t n = (size_t)w->rows * (size_t)w->cols;
    n = w->dtype == DS_DTYPE_NVFP4 ? n / 2 : n * ds_dtype_size(w->dtype);
    uintptr_t a = (uintptr_t)w->data, a16 = (a + 15) & ~(uintptr_t)15;
    if (n <= a16 - a) return;
    n = (n - (a16 - a)) & ~(size_t)15;
    if (!n) return;
    l->p[l->count] = (const char *)a16;
    l->n[l->count++] = n;
}

/* appends kv_b's BF16 copy where the upload made one (what the absorbed decode reads), else kv_b itself */
static void pf_add_kvb(const ds_cuda_backend *cb, pf_list *l, const ds_weight *kv_b) {
    for (int i = 0; i < cb->n_kvb16; i++)
        if (cb->kvb16[i].key == kv_b->data) {
            ds_weight c = *kv_b;
            c.data = cb->kvb16[i].bf16;
            c.dtype = DS_DTYPE_BF16;
            c.scale = NULL;
            pf_add(l, &c);
            return;
        }
    pf_add(l, kv_b);
}

void cu_prefetch_layer(ds_backend *be, const ds_layer_weights *L) {
    ds_cuda_backend *cb = cu_of(be);
    const int main_stream = cb->opt.l2_prefetch == 2;
    if (!cb->pf.stream && !main_stream) return;
    if (cb->b.n_tokens > cb->opt.l2_prefetch_max_m) return;
    pf_list l;
    memset(&l, 0, sizeof l);
    const ds_weight *w[] = {&L->q_a, &L->q_b, &L->q, &L->kv_a, &L->o, &L->router,
                            &L->sh_gate, &L->sh_up, &L->sh_down, &L->gate, &L->up, &L->down};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) pf_add(&l, w[i]);
    pf_add_kvb(cb, &l, &L->kv_b);
    if (!l.count) return;
    if (main_stream) {   /* =2: in line, between the MoE and the next layer's norm; nothing to join */
        l2_prefetch_kernel<<<PF_BLOCKS, 32, 0, cu_stream>>>(l);
        CUDA_LAUNCH_CHECK();
        return;
    }
    cu_prefetch_join(cb);
    CUDA_CHECK(cudaEventRecord(cb->pf.fork, cu_stream));
    CUDA_CHECK(cudaStreamWaitEvent(cb->pf.stream, cb->pf.fork, 0));
    l2_prefetch_kernel<<<PF_BLOCKS, 32, 0, cb->pf.stream>>>(l);
    CUDA_LAUNCH_CHECK();
    CUDA_CHECK(cudaEventRecord(cb->pf.join, cb->pf.stream));
    cb->pf.pending = 1;
}
