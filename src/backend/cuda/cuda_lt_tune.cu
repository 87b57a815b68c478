/* BF16 GEMMs with fp32 output through cuBLASLt, the algorithm searched once per shape and kept on disk
 * (issue 7: "cuBLASLt algorithm selection tuned per shape, searched once, cached on disk"). Used by the
 * tensor-core linear (cuda_linear.cu linear_tc) when DSINFER_CUDA_LT_TUNE is on.
 *
 * out[m, n] (row m at out + m * ldo, n < N) = sum_k x[m, k] A[n, k]: A [N, K] and x [M, K] BF16 row-major,
 * fp32 accumulate and output. In cuBLAS's column-major terms D (N x M, ld ldo) = A^T(op T, K x N, ld K) x
 * B (K x M, ld K).
 *
 * Search: the first LT_CANDIDATES algorithms cublasLtMatmulAlgoGetHeuristic gives for the shape (workspace
 * at most LT_WS_BYTES), each run once to warm up and then LT_REPS times, each run timed alone between CUDA
 * events after a write of twice the L2 size has evicted its operands (in a decode step the weights come
 * from DRAM: timed with a warm L2, the search picked algorithms that were fast on cached operands and
 * slower in the model, FP8 decode batch 256 -8%, bench/RESULTS.md fifth session run 4); the call's own
 * buffers, beta = 0, and the kept algorithm runs last so out holds its result; the fastest mean is kept. A search synchronises the host with the stream, so it only happens outside stream capture; decode
 * graphs run each batch size eagerly once before capturing it (cuda_graph.cu), which is when the search
 * happens. A shape first met during capture takes the heuristic's first algorithm and is not stored.
 *
 * tune = 0: the heuristic's first algorithm, nothing timed or stored; the plan (descriptors and algorithm)
 * is still kept per exact shape, which spares cuBLAS's per-call heuristic query (the MoE's per-expert GEMMs,
 * cuda_moe_gemm.cu, whose row counts vary call to call).
 * On disk (core/tune_cache.c): key "bf16f32:N<N>:K<K>:M<bucket>", the bucket being M rounded up to a power
 * of two (at least 16): the first M met in a bucket is searched, the other M of the bucket reuse its
 * algorithm once cublasLtMatmulAlgoCheck accepts it for their shape (else they are searched too, in memory
 * only). Values: the algorithm's 9 config attributes (id, tile, split-K, reduction scheme, CTA swizzle,
 * custom option, stages, inner shape, cluster shape). One file per device tag (GPU name, SM count,
 * cuBLASLt version), at ds_tune_cache_path("cublaslt", tag). A file that does not parse is reported once
 * and rewritten; one that cannot be written is reported once and the choices stay in memory. */
#include "backend/cuda/cuda.h"

extern "C" {
#include "core/tune_cache.h"
}

#define LT_CANDIDATES 8
#define LT_REPS 5
#define N_SLOTS 1024   /* exact shapes held in memory (open addressing); a full table falls back to cuBLAS */

typedef struct {
    int used, ok;
    int N, K, M, ldo;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
} lt_plan;

struct cu_lt_tune {
    lt_plan slot[N_SLOTS];
    ds_tune_cache disk;
    int disk_read, warned_read, warned_write;
    int searched, from_disk, untimed;
};

static int m_bucket(int M) {
    int b = 16;
    while (b < M && b < (1 << 30)) b *= 2;
    return b;
}

static void disk_key(char *k, size_t n, int N, int K, int M) {
    snprintf(k, n, "bf16f32:N%d:K%d:M%d", N, K, m_bucket(M));
}

/* "NVIDIA-H200-132sm-cublasLt130100": the algorithms a file holds are for this GPU and library only */
static void device_tag(char *tag, size_t n) {
    int dev = 0;
    cudaDeviceProp p;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
    char name[96];
    memcpy(name, p.name, sizeof name - 1);   /* a device name is short; keep the tag's bound explicit */
    name[sizeof name - 1] = 0;
    snprintf(tag, n, "%s-%dsm-cublasLt%zu", name, p.multiProcessorCount, cublasLtGetVersion());
}

extern "C" ds_status ds_cuda_lt_tune_path(char *out, size_t n, char *err) {
    char tag[160];
    device_tag(tag, sizeof tag);
    return ds_tune_cache_path(out, n, "cublaslt", tag, err);
}

static void read_disk(struct cu_lt_tune *t) {
    if (t->disk_read) return;
    t->disk_read = 1;
    char path[512], err[DS_ERRLEN];
    ds_status st = ds_cuda_lt_tune_path(path, sizeof path, err);
    if (!st) st = ds_tune_cache_load(&t->disk, path, err);
    if (st && !t->warned_read) {
        t->warned_read = 1;
        fprintf(stderr, "dsinfer: %s; the GEMM algorithms will be searched again%s\n", err,
                t->disk.path[0] ? " and the file rewritten" : "");
    }
}

/* ---- an algorithm as 9 integers and back --------------------------------------------------------- */
static const cublasLtMatmulAlgoConfigAttributes_t CONFIG_ATTR[DS_TUNE_NV] = {
    CUBLASLT_ALGO_CONFIG_ID, CUBLASLT_ALGO_CONFIG_TILE_ID, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
    CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION,
    CUBLASLT_ALGO_CONFIG_STAGES_ID, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID};
/* their storage sizes (bytes): int32 id and split-K, uint32 tile .. stages, uint16 inner and cluster shape */
static const int CONFIG_SIZE[DS_TUNE_NV] = {4, 4, 4, 4, 4, 4, 4, 2, 2};

static int algo_to_values(const cublasLtMatmulAlgo_t *a, int64_t v[DS_TUNE_NV]) {
    for (int i = 0; i < DS_TUNE_NV; i++) {
        uint32_t u32 = 0;
        uint16_t u16 = 0;
        size_t got = 0;
        void *buf = CONFIG_SIZE[i] == 4 ? (void *)&u32 : (void *)&u16;
        if (cublasLtMatmulAlgoConfigGetAttribute(a, CONFIG_ATTR[i], buf, (size_t)CONFIG_SIZE[i], &got) !=
                CUBLAS_STATUS_SUCCESS || got != (size_t)CONFIG_SIZE[i])
            return 0;
        v[i] = CONFIG_SIZE[i] == 4 ? (int64_t)(int32_t)u32 : (int64_t)u16;
    }
    return 1;
}

static int values_to_algo(cublasLtHandle_t lt, const int64_t v[DS_TUNE_NV], cublasLtMatmulAlgo_t *a) {
    if (v[0] < 0 || v[0] > INT32_MAX ||
        cublasLtMatmulAlgoInit(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16BF, CUDA_R_16BF, CUDA_R_32F, CUDA_R_32F,
                               (int)v[0], a) != CUBLAS_STATUS_SUCCESS)
        return 0;
    for (int i = 1; i < DS_TUNE_NV; i++) {
        uint32_t u32 = (uint32_t)v[i];
        uint16_t u16 = (uint16_t)v[i];
        if (v[i] < (i == 2 ? INT32_MIN : 0) || v[i] > (CONFIG_SIZE[i] == 4 ? (int64_t)UINT32_MAX : (int64_t)UINT16_MAX))
            return 0;
        const void *buf = CONFIG_SIZE[i] == 4 ? (const void *)&u32 : (const void *)&u16;
        if (cublasLtMatmulAlgoConfigSetAttribute(a, CONFIG_ATTR[i], buf, (size_t)CONFIG_SIZE[i]) != CUBLAS_STATUS_SUCCESS)
            return 0;
    }
    return 1;
}

/* ---- plans ---------------------------------------------------------------------------------------- */
static int fits(ds_cuda_backend *cb, const lt_plan *p, const cublasLtMatmulAlgo_t *a) {
    cublasLtMatmulHeuristicResult_t r;
    return cublasLtMatmulAlgoCheck(cb->lt, p->desc, p->la, p->lb, p->ld, p->ld, a, &r) == CUBLAS_STATUS_SUCCESS &&
           r.workspaceSize <= LT_WS_BYTES;
}

static void run_algo(ds_cuda_backend *cb, const lt_plan *p, const cublasLtMatmulAlgo_t *a, float *out,
                     const __nv_bfloat16 *A, const __nv_bfloat16 *x) {
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(cb->lt, p->desc, &one, A, p->la, x, p->lb, &zero, out, p->ld, out, p->ld, a, cb->lt_ws,
                                LT_WS_BYTES, cu_stream));
}

/* Times the heuristic's candidates on this call's buffers; the fastest goes into p (0: none ran). */
static int search(ds_cuda_backend *cb, lt_plan *p, float *out, const __nv_bfloat16 *A, const __nv_bfloat16 *x,
                  double *best_us) {
    cublasLtMatmulHeuristicResult_t res[LT_CANDIDATES];
    int n = cu_lt_heuristics(cb, p->desc, p->la, p->lb, p->ld, LT_CANDIDATES, res);
    if (n <= 0) return 0;
    int dev = 0, l2 = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    size_t flush_bytes = 2 * (size_t)(l2 > 0 ? l2 : (64 << 20));
    void *flush = NULL;
    if (cudaMalloc(&flush, flush_bytes) != cudaSuccess) {   /* no room: time with whatever the L2 holds */
        cudaGetLastError();
        flush = NULL;
    }
    cudaEvent_t e0[LT_REPS], e1[LT_REPS];
    for (int r = 0; r < LT_REPS; r++) {
        CUDA_CHECK(cudaEventCreate(&e0[r]));
        CUDA_CHECK(cudaEventCreate(&e1[r]));
    }
    int best = -1;
    *best_us = 0;
    for (int i = 0; i < n; i++) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
        run_algo(cb, p, &res[i].algo, out, A, x);
        for (int r = 0; r < LT_REPS; r++) {
            if (flush) CUDA_CHECK(cudaMemsetAsync(flush, r & 1, flush_bytes, cu_stream));
            CUDA_CHECK(cudaEventRecord(e0[r], cu_stream));
            run_algo(cb, p, &res[i].algo, out, A, x);
            CUDA_CHECK(cudaEventRecord(e1[r], cu_stream));
        }
        CUDA_CHECK(cudaEventSynchronize(e1[LT_REPS - 1]));
        double us = 0;
        for (int r = 0; r < LT_REPS; r++) {
            float ms = 0;
            CUDA_CHECK(cudaEventElapsedTime(&ms, e0[r], e1[r]));
            us += 1000.0 * ms / LT_REPS;
        }
        if (best < 0 || us < *best_us) {
            best = i;
            *best_us = us;
        }
    }
    for (int r = 0; r < LT_REPS; r++) {
        CUDA_CHECK(cudaEventDestroy(e0[r]));
        CUDA_CHECK(cudaEventDestroy(e1[r]));
    }
    if (flush) CUDA_CHECK(cudaFree(flush));
    if (best < 0) return 0;
    p->algo = res[best].algo;
    run_algo(cb, p, &p->algo, out, A, x);   /* out holds the kept algorithm's result */
    return 1;
}

/* The heuristic's first algorithm (inside stream capture: nothing timed, nothing stored). */
static int first_heuristic(ds_cuda_backend *cb, lt_plan *p) {
    cublasLtMatmulHeuristicResult_t r;
    if (cu_lt_heuristics(cb, p->desc, p->la, p->lb, p->ld, 1, &r) <= 0) return 0;
    p->algo = r.algo;
    return 1;
}

static void make_descs(lt_plan *p) {
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_16BF, (uint64_t)p->K, (uint64_t)p->N, (int64_t)p->K));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_16BF, (uint64_t)p->K, (uint64_t)p->M, (int64_t)p->K));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->ld, CUDA_R_32F, (uint64_t)p->N, (uint64_t)p->M, (int64_t)p->ldo));
}

static lt_plan *find_slot(struct cu_lt_tune *t, int N, int K, int M, int ldo) {
    uint64_t h = ((uint64_t)N * 2654435761u) ^ ((uint64_t)K * 40503u) ^ ((uint64_t)M * 97u) ^ (uint64_t)ldo;
    for (int i = 0; i < N_SLOTS; i++) {
        lt_plan *p = &t->slot[(h + (uint64_t)i) % N_SLOTS];
        if (!p->used || (p->N == N && p->K == K && p->M == M && p->ldo == ldo)) return p;
    }
    return NULL;
}

/* A new plan's algorithm: from the disk entry of its bucket, else searched (stored when M is the
 * bucket's first), else (capturing) the heuristic's first. 0: cuBLASLt has nothing for the shape. */
static int choose(ds_cuda_backend *cb, struct cu_lt_tune *t, lt_plan *p, float *out, const __nv_bfloat16 *A,
                  const __nv_bfloat16 *x, int *done) {
    char key[DS_TUNE_KEY], err[DS_ERRLEN];
    disk_key(key, sizeof key, p->N, p->K, p->M);
    read_disk(t);
    const ds_tune_entry *e = ds_tune_cache_find(&t->disk, key);
    if (e && values_to_algo(cb->lt, e->v, &p->algo) && fits(cb, p, &p->algo)) {
        t->from_disk++;
        return 1;
    }
    if (cu_capturing()) {
        t->untimed++;
        return first_heuristic(cb, p);
    }
    double us;
    if (!search(cb, p, out, A, x, &us)) return 0;
    *done = 1;
    t->searched++;
    int64_t v[DS_TUNE_NV];
    if (!e && algo_to_values(&p->algo, v) && !ds_tune_cache_put(&t->disk, key, v, us, err) && t->disk.path[0]) {
        if (ds_tune_cache_save(&t->disk, err) && !t->warned_write) {
            t->warned_write = 1;
            fprintf(stderr, "dsinfer: %s; the tuned GEMM algorithms stay in memory only\n", err);
        }
    }
    return 1;
}

extern "C" int cu_lt_gemm_bf16(ds_cuda_backend *cb, float *out, int ldo, const __nv_bfloat16 *A,
                               const __nv_bfloat16 *x, int N, int M, int K, int tune) {
    if (N <= 0 || M <= 0 || K <= 0) return 0;
    cu_lt_init(cb);
    if (!cb->lt_tune) cb->lt_tune = (struct cu_lt_tune *)ds_xcalloc(1, sizeof(struct cu_lt_tune));
    struct cu_lt_tune *t = cb->lt_tune;
    lt_plan *p = find_slot(t, N, K, M, ldo);
    if (!p) return 0;
    if (!p->used) {
        p->used = 1;
        p->N = N;
        p->K = K;
        p->M = M;
        p->ldo = ldo;
        make_descs(p);
        int done = 0;
        p->ok = tune ? choose(cb, t, p, out, A, x, &done) : first_heuristic(cb, p);
        if (done) return 1;   /* the search left the kept algorithm's result in out */
    }
    if (!p->ok) return 0;
    run_algo(cb, p, &p->algo, out, A, x);
    return 1;
}

void cu_lt_tune_free(ds_cuda_backend *cb) {
    struct cu_lt_tune *t = cb->lt_tune;
    if (!t) return;
    for (int i = 0; i < N_SLOTS; i++) {
        lt_plan *p = &t->slot[i];
        if (!p->used) continue;
        cublasLtMatrixLayoutDestroy(p->la);
        cublasLtMatrixLayoutDestroy(p->lb);
        cublasLtMatrixLayoutDestroy(p->ld);
        cublasLtMatmulDescDestroy(p->desc);
    }
    ds_tune_cache_free(&t->disk);
    free(t);
    cb->lt_tune = NULL;
}

extern "C" void ds_cuda_lt_tune_stats(ds_backend *be, int *searched, int *from_disk, int *untimed) {
    struct cu_lt_tune *t = cu_of(be)->lt_tune;
    *searched = t ? t->searched : 0;
    *from_disk = t ? t->from_disk : 0;
    *untimed = t ? t->untimed : 0;
}
