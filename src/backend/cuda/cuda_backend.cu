/* CUDA backend: the op table, device memory, the batch layout on the device, and the elementwise
 * ops (embedding, RMSNorm, add, RoPE, KV store, row gather, NaN fill). GEMMs live in cuda_linear.cu,
 * attention in cuda_attn.cu, MoE in cuda_moe.cu, weight upload in cuda_weights.cu, sampling in
 * cuda_sample.cu, decode-step graphs in cuda_graph.cu. All work goes to one stream (cu_stream), so ops
 * run in call order; the speed paths are switched by environment variables read here (cu_opts_read). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_absorb.h"

void ds_cuda_die(const char *file, int line, const char *what, const char *msg) {
    fprintf(stderr, "%s:%d: CUDA error in %s: %s\n"
                    "HINT: an illegal address usually means a bad page table or weight view; rerun under "
                    "compute-sanitizer --tool memcheck to find the kernel\n", file, line, what, msg);
    abort();
}

cudaStream_t cu_stream;
unsigned long cu_ws_epoch;

extern "C" void *ds_cuda_stream(void) {
    if (!cu_stream) CUDA_CHECK(cudaStreamCreate(&cu_stream));
    return (void *)cu_stream;
}

void *cu_ws_get(cu_ws *w, size_t bytes) {
    if (bytes <= w->bytes && w->p) return w->p;
    cu_ws_epoch++;
    if (w->p) CUDA_CHECK(cudaFree(w->p));
    size_t n = bytes < 256 ? 256 : bytes;
    CUDA_CHECK(cudaMalloc(&w->p, n));
    w->bytes = n;
    return w->p;
}

void cu_ws_free(cu_ws *w) {
    if (w->p) cudaFree(w->p);
    w->p = NULL;
    w->bytes = 0;
}

void cu_own(ds_cuda_backend *cb, void *p) {
    if (cb->n_owned == cb->cap_owned) {
        cb->cap_owned = cb->cap_owned ? 2 * cb->cap_owned : 64;
        cb->owned = (void **)ds_xrealloc(cb->owned, sizeof(void *) * (size_t)cb->cap_owned);
    }
    cb->owned[cb->n_owned++] = p;
}

int ds_cuda_available(char *why, size_t why_len) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(why, why_len, "no usable CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 0;
    }
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess || p.major != 9) {
        snprintf(why, why_len, "CUDA device 0 is not a Hopper GPU (compute capability %d.%d; this build is sm_90a)",
                 p.major, p.minor);
        return 0;
    }
    return 1;
}

ds_status ds_cuda_mem_info(size_t *free_bytes, size_t *total_bytes, char *err) {
    cudaError_t e = cudaMemGetInfo(free_bytes, total_bytes);
    if (e != cudaSuccess) return ds_seterr(err, DS_ERR_BACKEND, "cudaMemGetInfo: %s", cudaGetErrorString(e));
    return DS_OK;
}

/* ---- memory ------------------------------------------------------------------------------------ */
static float *cu_alloc(ds_backend *be, size_t n) {
    (void)be;
    void *p = NULL;
    if (cudaMalloc(&p, n * sizeof(float) + 16) != cudaSuccess) {
        cudaGetLastError();   /* clear the sticky-free error state of a failed allocation */
        return NULL;
    }
    return (float *)p;
}

void *ds_cuda_alloc_bytes(ds_backend *be, size_t n) { return cu_alloc(be, (n + 3) / 4); }

static void cu_release(ds_backend *be, float *p) {
    (void)be;
    if (p) CUDA_CHECK(cudaFree(p));
}

__global__ void fill_kernel(float *p, size_t n, float v) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = v;
}

static void cu_fill_nan(ds_backend *be, float *p, size_t n) {
    (void)be;
    if (!n) return;
    size_t blocks = cu_blocks(n, 256);
    fill_kernel<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, cu_stream>>>(p, n, NAN);
    CUDA_LAUNCH_CHECK();
}

static void cu_to_host(ds_backend *be, float *dst, const float *src, size_t n) {
    (void)be;
    if (n) CUDA_CHECK(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost));
}

/* page-locked host memory (to_host into it runs at the bus's rate); NULL when the allocation fails */
static void *cu_host_alloc(ds_backend *be, size_t bytes) {
    (void)be;
    void *p = NULL;
    if (cudaMallocHost(&p, bytes) != cudaSuccess) {
        (void)cudaGetLastError();   /* not sticky: clear it */
        return NULL;
    }
    return p;
}

static void cu_host_free(ds_backend *be, void *p) {
    (void)be;
    if (p) CUDA_CHECK(cudaFreeHost(p));
}

/* grid (M), block 256: out[m] = (acc ? out[m] : 0) + sum_j w[m*K+j] y[m*K+j], j in order (the CPU's). */
__global__ void combine_rows_kernel(float *out, const float *y, const float *w, int K, int D, int acc) {
    int m = blockIdx.x;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float o = acc ? out[(size_t)m * D + d] : 0.0f;
        for (int j = 0; j < K; j++) o += w[(size_t)m * K + j] * y[((size_t)m * K + j) * D + d];
        out[(size_t)m * D + d] = o;
    }
}

static void cu_combine_rows(ds_backend *be, float *out, const float *y, const float *w, int M, int K, int D, int acc) {
    (void)be;
    if (M <= 0) return;
    combine_rows_kernel<<<M, 256, 0, cu_stream>>>(out, y, w, K, D, acc);
    CUDA_LAUNCH_CHECK();
}

/* grid (D/128, n), block 128: one 128-column block of row i into its FP8 record (backend.h). */
__global__ void quant_rows_fp8_kernel(unsigned char *rec, const float *x, int n, int D) {
    __shared__ float red[4];
    int b = blockIdx.x;
    for (int i = blockIdx.y; i < n; i += gridDim.y) {
        float v = x[(size_t)i * D + b * 128 + threadIdx.x];
        float a = cu_warp_max(fabsf(v));
        __syncthreads();   /* red of the previous row read */
        if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = a;
        __syncthreads();
        float s = fmaxf(fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3])), 1e-4f) / 448.0f;
        unsigned char *r = rec + (size_t)i * DS_FP8_ROW_BYTES(D);
        r[b * 128 + threadIdx.x] = cu_f32_to_fp8(v / s);
        if (threadIdx.x < 4) r[D + 4 * b + threadIdx.x] = (unsigned char)(cu_f32_bits(s) >> (8 * threadIdx.x));
    }
}

__global__ void dequant_rows_fp8_kernel(float *x, const unsigned char *rec, int n, int D) {
    int b = blockIdx.x;
    for (int i = blockIdx.y; i < n; i += gridDim.y) {
        const unsigned char *r = rec + (size_t)i * DS_FP8_ROW_BYTES(D);
        x[(size_t)i * D + b * 128 + threadIdx.x] = cu_fp8_to_f32(r[b * 128 + threadIdx.x]) * cu_ld_f32_bytes(r + D + 4 * b);
    }
}

static void cu_quant_rows_fp8(ds_backend *be, void *rec, const float *x, int n, int D) {
    (void)be;
    if (n <= 0) return;
    quant_rows_fp8_kernel<<<dim3(D / 128, n < 65535 ? n : 65535), 128, 0, cu_stream>>>((unsigned char *)rec, x, n, D);
    CUDA_LAUNCH_CHECK();
}

static void cu_dequant_rows_fp8(ds_backend *be, float *x, const void *rec, int n, int D) {
    (void)be;
    if (n <= 0) return;
    dequant_rows_fp8_kernel<<<dim3(D / 128, n < 65535 ? n : 65535), 128, 0, cu_stream>>>(x, (const unsigned char *)rec, n, D);
    CUDA_LAUNCH_CHECK();
}

void ds_cuda_from_host(ds_backend *be, float *dst, const float *src, size_t n) {
    (void)be;
    if (n) CUDA_CHECK(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyHostToDevice));
}

void ds_cuda_upload_bytes(ds_backend *be, void *dst, const void *src, size_t n) {
    (void)be;
    if (n) CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
}

long ds_cuda_moe_shared_in_runs(ds_backend *be) { return cu_of(be)->moe_shared_in_runs; }
long ds_cuda_moe_duo_launches(ds_backend *be) { return cu_of(be)->moe_duo_launches; }
long ds_cuda_chain_fused_runs(ds_backend *be) { return cu_of(be)->chain_fused_runs; }
long ds_cuda_moe_wg_pdl_launches(ds_backend *be) { return cu_of(be)->moe_wg_pdl_launches; }
long ds_cuda_moe_wg_order_launches(ds_backend *be) { return cu_of(be)->moe_wg_order_launches; }
long ds_cuda_moe_wg_sx_launches(ds_backend *be) { return cu_of(be)->moe_wg_sx_launches; }
long ds_cuda_moe_wg_st2_launches(ds_backend *be) { return cu_of(be)->moe_wg_st2_launches; }
long ds_cuda_moe_wg_qfrow_launches(ds_backend *be) { return cu_of(be)->moe_wg_qfrow_launches; }
long ds_cuda_moe_wg_qfhold_launches(void) { return cu_moe_wg_qfhold_count; }
long ds_cuda_router_xs_launches(ds_backend *be) { return cu_of(be)->router_xs_launches; }
long ds_cuda_router_ks_launches(ds_backend *be) { return cu_of(be)->router_ks_launches; }
long ds_cuda_comb_norm_runs(ds_backend *be) { return cu_of(be)->comb_norm_runs; }
long ds_cuda_moe1_runs(ds_backend *be) { return cu_of(be)->moe1_runs; }
long ds_cuda_moeo_runs(ds_backend *be) { return cu_of(be)->moeo_runs; }
long ds_cuda_moeo_strips_runs(ds_backend *be) { return cu_of(be)->moeo_strips_runs; }
long ds_cuda_moeo_tc_runs(ds_backend *be) { return cu_of(be)->moeo_tc_runs; }
long ds_cuda_rowo_runs(ds_backend *be) { return cu_of(be)->rowo_runs; }
long ds_cuda_moeo_tail_runs(ds_backend *be) { return cu_of(be)->moeo_tail_runs; }
long ds_cuda_router_norm_runs(ds_backend *be) { return cu_of(be)->router_norm_runs; }
long ds_cuda_tail1_runs(ds_backend *be) { return cu_of(be)->tail1_runs; }
long ds_cuda_tail1_next_runs(ds_backend *be) { return cu_of(be)->tail1_next_runs; }
long ds_cuda_attn1_runs(ds_backend *be) { return cu_of(be)->attn1_runs; }
long ds_cuda_mla_fold_runs(ds_backend *be) { return cu_of(be)->mla_fold_runs; }
int ds_cuda_moe_wg_sx_fits(int nt, int K) { return cu_moe_wg_sx_fits(nt, K); }
long ds_cuda_qb_fused_runs(ds_backend *be) { return cu_of(be)->qb_fused_runs; }
long ds_cuda_moe_wg_nt48_launches(ds_backend *be) { return cu_of(be)->moe_wg_nt48_launches; }
long ds_cuda_qkv_split_launches(ds_backend *be) { return cu_of(be)->qkv_split_launches; }
long ds_cuda_qkv_absorb_runs(ds_backend *be) { return cu_of(be)->qkv_absorb_runs; }
long ds_cuda_norm_fold_runs(ds_backend *be) { return cu_of(be)->norm_fold_runs; }
long ds_cuda_normed_linear_folds(ds_backend *be) { return cu_of(be)->normed_linear_folds; }
long ds_cuda_comb_uv_runs(ds_backend *be) { return cu_of(be)->comb_uv_runs; }
long ds_cuda_qlat_taken_runs(ds_backend *be) { return cu_of(be)->qlat_taken_runs; }
int ds_cuda_moe_wg_chunk(ds_backend *be, int n_rows, int E) { return cu_moe_wg_chunk(n_rows, E, cu_of(be)->opt.moe_wg_nt48); }
long ds_cuda_moe_wg_pipe_launches(ds_backend *be) { return cu_of(be)->moe_wg_pipe_launches; }
long ds_cuda_gemv_t1_launches(void) { return cu_gemv_t1_launches; }
long ds_cuda_gemv_t2_launches(void) { return cu_gemv_t2_launches; }
long ds_cuda_gemv_t4_launches(void) { return cu_gemv_t4_launches; }
long ds_cuda_gemv_p4_launches(void) { return cu_gemv_p4_launches; }
long ds_cuda_f8_tm_xt_launches(void) { return cu_f8_tm_xt_launches; }
long ds_cuda_f8_tm_ring_launches(void) { return cu_f8_tm_ring_launches; }
long ds_cuda_moe_half_launches(void) { return cu_moe_half_launches; }
long ds_cuda_moe_dyn_launches(void) { return cu_moe_dyn_launches; }
long ds_cuda_moe_silu_launches(void) { return cu_moe_silu_launches; }
long ds_cuda_moe_y_bf16_launches(void) { return cu_moe_y_bf16_launches; }
long ds_cuda_moe_gu_bf16_launches(void) { return cu_moe_gu_bf16_launches; }

void ds_cuda_download_bytes(ds_backend *be, void *dst, const void *src, size_t n) {
    (void)be;
    if (n) CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
}

/* ---- batch layout -------------------------------------------------------------------------------- */
static void *grow_host(void *p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return p;
    *cap = need * 2;
    return ds_xrealloc(p, *cap * elem);
}

/* Keeps host copies of the layout (the attention ops loop over sequences on the host) and uploads it
 * with a token -> sequence map for the per-token kernels. */
static ds_status cu_set_batch(ds_backend *be, const ds_batch_meta *b, char *err) {
    ds_cuda_backend *cb = cu_of(be);
    (void)err;
    cb->qb_of = NULL;   /* a BF16 copy of q belongs to the batch it was made in */
    cb->qlat_of = NULL;   /* and so does a q_lat */
    cu_profile_hook(b->n_tokens);   /* DSINFER_CUDA_PROFILE_STEPS (cuda_graph.cu): one count per forward */
    size_t M = (size_t)b->n_tokens, S = (size_t)b->n_seqs, PT = S * (size_t)b->pt_stride;
    cb->h_tokens = (int32_t *)grow_host(cb->h_tokens, &cb->h_cap_tok, M + 1, 3 * sizeof(int32_t));
    cb->h_positions = cb->h_tokens + cb->h_cap_tok;
    int32_t *h_tok_seq = cb->h_positions + cb->h_cap_tok;
    cb->h_seq_start = (int32_t *)grow_host(cb->h_seq_start, &cb->h_cap_seq, S + 1, 2 * sizeof(int32_t));
    cb->h_seq_ctx = cb->h_seq_start + cb->h_cap_seq;
    cb->h_page_table = (int32_t *)grow_host(cb->h_page_table, &cb->h_cap_pt, PT + 1, sizeof(int32_t));
    memcpy(cb->h_tokens, b->tokens, M * sizeof(int32_t));
    memcpy(cb->h_positions, b->positions, M * sizeof(int32_t));
    memcpy(cb->h_seq_start, b->seq_start, (S + 1) * sizeof(int32_t));
    memcpy(cb->h_seq_ctx, b->seq_ctx, S * sizeof(int32_t));
    memcpy(cb->h_page_table, b->page_table, PT * sizeof(int32_t));
    cb->max_ctx = 0;
    for (size_t s = 0; s < S; s++) {
        cb->max_ctx = b->seq_ctx[s] > cb->max_ctx ? b->seq_ctx[s] : cb->max_ctx;
        for (int m = b->seq_start[s]; m < b->seq_start[s + 1]; m++) h_tok_seq[m] = (int32_t)s;
    }
    cb->b = *b;
    cb->b.tokens = cb->h_tokens;
    cb->b.positions = cb->h_positions;
    cb->b.seq_start = cb->h_seq_start;
    cb->b.seq_ctx = cb->h_seq_ctx;
    cb->b.page_table = cb->h_page_table;
    /* device copies, one allocation: tokens, positions, tok_seq [M]; seq_start [S+1]; seq_ctx [S]; pt */
    size_t n = 3 * M + (S + 1) + S + PT + 4;
    int32_t *d = (int32_t *)cu_ws_get(&cb->ws_meta, n * sizeof(int32_t));
    cb->d_tokens = d;
    cb->d_positions = d + M;
    cb->d_tok_seq = d + 2 * M;
    cb->d_seq_start = d + 3 * M;
    cb->d_seq_ctx = cb->d_seq_start + S + 1;
    cb->d_page_table = cb->d_seq_ctx + S;
    CUDA_CHECK(cudaMemcpy(cb->d_tokens, b->tokens, M * sizeof(int32_t), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(cb->d_positions, b->positions, M * sizeof(int32_t), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(cb->d_tok_seq, h_tok_seq, M * sizeof(int32_t), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(cb->d_seq_start, b->seq_start, (S + 1) * sizeof(int32_t), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(cb->d_seq_ctx, b->seq_ctx, S * sizeof(int32_t), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(cb->d_page_table, b->page_table, PT * sizeof(int32_t), cudaMemcpyHostToDevice));
    return DS_OK;
}

/* ---- elementwise ops ----------------------------------------------------------------------------- */
/* out[m, :] = emb[tokens[m], :]; grid (M), any block size. */
__global__ void embed_kernel(float *out, cu_wview emb, const int32_t *tokens) {
    int m = blockIdx.x, t = tokens[m];
    for (int c = threadIdx.x; c < emb.cols; c += blockDim.x) out[(size_t)m * emb.cols + c] = cu_w(emb, t, c);
}

static void cu_embed(ds_backend *be, float *out, const ds_weight *emb) {
    ds_cuda_backend *cb = cu_of(be);
    if (!cb->b.n_tokens) return;
    embed_kernel<<<cb->b.n_tokens, 256, 0, cu_stream>>>(out, cu_view(emb), cb->d_tokens);
    CUDA_LAUNCH_CHECK();
}

int cu_rms_vec = 1;   /* DSINFER_CUDA_RMS_VEC (read at backend creation): rmsnorm_vec_kernel */
int cu_pdl = 0;       /* DSINFER_CUDA_PDL (read at backend creation): cu_launch's programmatic dependent launch */
int cu_f8_pdl = 0;    /* DSINFER_CUDA_F8_PDL (read at backend creation): the W8A8 chain's launches too (cuda.h) */
int cu_pdl_prefetch = 0;   /* DSINFER_CUDA_PDL_PREFETCH (read at backend creation; cuda.h) */
int cu_l2ef = CU_L2EF_GEMV | CU_L2EF_MOEO;   /* DSINFER_CUDA_L2EF (read at backend creation; cuda.h) */

/* One block per row: sum of squares in fp32, then out = x * rsqrt(mean + eps) * w. In place is fine:
 * each element is read and written by one thread, the write after the block-wide reduction. */
__global__ void rmsnorm_kernel(float *out, int out_stride, const float *x, int x_stride, cu_wview w, int n,
                               float eps) {
    __shared__ float red[32];
    const float *xr = x + (size_t)blockIdx.x * x_stride;
    float *yr = out + (size_t)blockIdx.x * out_stride;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
    ss = cu_warp_sum(ss);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = threadIdx.x < (blockDim.x >> 5) ? red[threadIdx.x] : 0.0f;
        v = cu_warp_sum(v);
        if (threadIdx.x == 0) red[0] = v;
    }
    __syncthreads();
    float r = 1.0f / sqrtf(red[0] / (float)n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) yr[i] = xr[i] * r * cu_w(w, 0, i);
}

/* The latency-bound form (decode rows are few, one block each): a thread keeps its NV float4s of the row
 * in registers (n <= NV * 4 * RMS_THREADS, n % 4 == 0, 16-byte aligned rows), loads its weights before
 * the reduction, and writes once. With add (ADD): h += add first, written back to x (the residual
 * stream), then the norm of the sum; in place (out == x) is fine as above. */
#define RMS_THREADS 256
/* 1 / RMS of a row from each thread's sum of squares ss (RMS_THREADS threads): cu_rms_inv<RMS_THREADS / 32> (cuda.h) */
__device__ __forceinline__ float rms_inv(float ss, float *red, int n, float eps) {
    return cu_rms_inv<RMS_THREADS / 32>(ss, red, n, eps);
}

/* one row of rmsnorm_vec_kernel (RMS_THREADS threads; red: RMS_THREADS / 32 floats of shared memory) */
template <int NV, bool ADD>
__device__ __forceinline__ void rms_row_vec(float4 *yr, float4 *xr, const float4 *ar, const cu_wview &w, int n, float eps,
                                            float *red) {
    int n4 = n >> 2;
    float4 v[NV], g[NV];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; k++) {
        int j = threadIdx.x + k * RMS_THREADS;
        v[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (j < n4) {
            v[k] = xr[j];
            if (ADD) {
                float4 a = ar[j];
                v[k].x += a.x; v[k].y += a.y; v[k].z += a.z; v[k].w += a.w;
                xr[j] = v[k];
            }
            g[k] = make_float4(cu_w(w, 0, 4 * j), cu_w(w, 0, 4 * j + 1), cu_w(w, 0, 4 * j + 2), cu_w(w, 0, 4 * j + 3));
        }
        /* spelled out (fma(w, w, fma(z, z, fma(y, y, x*x)))), so that every kernel sharing this body rounds alike
         * (qkv_finish_kernel gives rmsnorm_vec_kernel's bits); before, nvcc chose the contraction of `x*x + y*y +
         * z*z + w*w` per instantiation (this one for <1, false>; others could differ by one rounding) */
        ss += __fmaf_rn(v[k].w, v[k].w, __fmaf_rn(v[k].z, v[k].z, __fmaf_rn(v[k].y, v[k].y, __fmul_rn(v[k].x, v[k].x))));
    }
    float r = rms_inv(ss, red, n, eps);
#pragma unroll
    for (int k = 0; k < NV; k++) {
        int j = threadIdx.x + k * RMS_THREADS;
        if (j < n4) yr[j] = make_float4(v[k].x * r * g[k].x, v[k].y * r * g[k].y, v[k].z * r * g[k].z, v[k].w * r * g[k].w);
    }
}

template <int NV, bool ADD>
__global__ void __launch_bounds__(RMS_THREADS) rmsnorm_vec_kernel(float *out, int out_stride, float *x, int x_stride,
                                                                  const float *add, cu_wview w, int n, float eps) {
    __shared__ float red[RMS_THREADS / 32];
    cu_pdl_trigger();
    cu_pdl_wait();
    float4 *xr = (float4 *)(x + (size_t)blockIdx.x * x_stride);
    float4 *yr = (float4 *)(out + (size_t)blockIdx.x * out_stride);
    const float4 *ar = ADD ? (const float4 *)(add + (size_t)blockIdx.x * x_stride) : nullptr;
    rms_row_vec<NV, ADD>(yr, xr, ar, w, n, eps, red);
}

/* The split-K sums of a thread's S float4 slots: out[s] = p_0 + p_1 + ... + p_{ks[s]-1}, p_z = src[s][z zstep[s]], added
 * in z order (f8_reduce_kernel's additions: the same bits). Where every ks[s] <= 4 every slot's partials are requested
 * before the first addition (one memory round trip; a loop with an addition after each load made ks of them, slot after
 * slot); else slot by slot. ok[s]: the slot is one of the row's. A slot's count is its tensor's (qkv_finish: q's and
 * kv's splits may differ above 64 rows, where each weight's TMA GEMM splits K for itself). */
template <int S>
__device__ __forceinline__ void sum_parts(float4 (&out)[S], const float4 *const (&src)[S], const size_t (&zstep)[S],
                                          const bool (&ok)[S], const int (&ks)[S]) {
    bool few = true;   /* every slot's count at most 4 */
#pragma unroll
    for (int s = 0; s < S; s++) few = few && ks[s] <= 4;
    if (few) {
        float4 p[S][4];
#pragma unroll
        for (int s = 0; s < S; s++)
#pragma unroll
            for (int z = 0; z < 4; z++)
                if (ok[s] && z < ks[s]) p[s][z] = src[s][(size_t)z * zstep[s]];
#pragma unroll
        for (int s = 0; s < S; s++) {
            if (!ok[s]) continue;
            float4 v = p[s][0];
#pragma unroll
            for (int z = 1; z < 4; z++)
                if (z < ks[s]) {
                    v.x += p[s][z].x; v.y += p[s][z].y; v.z += p[s][z].z; v.w += p[s][z].w;
                }
            out[s] = v;
        }
        return;
    }
#pragma unroll
    for (int s = 0; s < S; s++) {
        if (!ok[s]) continue;
        float4 v = src[s][0];
        for (int z = 1; z < ks[s]; z++) {
            float4 p = src[s][(size_t)z * zstep[s]];
            v.x += p.x; v.y += p.y; v.z += p.z; v.w += p.w;
        }
        out[s] = v;
    }
}

/* The residual add and RMSNorm of rmsnorm_vec_kernel<NV, true> with the added term given as the ks split-K partials of a
 * W8A8 GEMM (parts [ks][M][n], zs = M n apart: PARTS) or as one tensor (add: !PARTS), and xn's FP8 codes as well (Q):
 * the work of f8_reduce_kernel (+ rows_fp8_warp_kernel) and the add-norm in one launch (issue 7: the W8A8 chain's
 * launches). The sum a = p_0 + p_1 + ... in z order is f8_reduce_kernel's (written to ff), then h += a and the norm are
 * rms_row_vec's arithmetic in its order, and the codes of xn's 128-column blocks are rows_fp8_warp_kernel's (a warp a
 * block: the warp's 32 float4s of a k step are one block, b = warp + 8 k): the same bits as those launches. n % 128 == 0,
 * n / 4 <= NV RMS_THREADS, rows 16-byte aligned; add / parts NULL: the norm of h alone (h not written). Codes q [M, n],
 * scales qs [M][n / 128] (Q). Grid M, RMS_THREADS threads. */
/* COMB (with !PARTS; cu_norm_chain_comb): the added term is a MoE combine's sum, made here: for float4 column j of token m,
 * a = the ns shared experts' rows of ys in s order (ns == 0: ff's row, what the shared experts left there), then + w_k y[pos_k]
 * over the token's K choices in ascending expert id: moe_combine_sorted2_kernel's additions in its order (the same bits),
 * written to ff (its output) before h += a. K <= CU_COMB_MAX_K, ns <= CU_COMB_MAX_NS. */
typedef struct {
    const float *y, *w, *ys;   /* y [rows, n], w [M K], ys [ns mt, n] */
    const int32_t *ids, *pos;  /* [M K] */
    int K, ns, mt;
} nc_comb;
template <int NV, bool PARTS, bool Q, bool COMB = false>
__global__ void __launch_bounds__(RMS_THREADS) norm_chain_kernel(float *xn, float *h, const float *add, int ks, size_t zs,
                                                                 float *ff, cu_wview w, int n, float eps, unsigned char *q,
                                                                 float *qs, nc_comb cmb) {
    __shared__ float red[RMS_THREADS / 32];
    __shared__ int c_pos[COMB ? CU_COMB_MAX_K : 1];
    __shared__ float c_w[COMB ? CU_COMB_MAX_K : 1];
    cu_pdl_trigger();
    cu_pdl_wait();
    const size_t row = (size_t)blockIdx.x * n;
    if (COMB) {   /* the token's choices ranked by expert id, as the combine ranks them */
        cu_comb_rank(cmb.ids, cmb.pos, cmb.w, blockIdx.x, cmb.K, c_pos, c_w);
        __syncthreads();
    }
    float4 *xr = (float4 *)(h + row), *yr = (float4 *)(xn + row);
    const bool has_add = COMB || add != nullptr;
    int n4 = n >> 2;
    float4 v[NV], g[NV], a[NV];
    const float4 *src[NV];
    size_t zstep[NV];
    bool ok[NV];
#pragma unroll
    for (int k = 0; k < NV; k++) {
        int j = threadIdx.x + k * RMS_THREADS;
        ok[k] = has_add && j < n4;
        src[k] = add ? (const float4 *)(add + row) + j : nullptr;
        zstep[k] = zs / 4;
        v[k] = j < n4 ? xr[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (j < n4) g[k] = make_float4(cu_w(w, 0, 4 * j), cu_w(w, 0, 4 * j + 1), cu_w(w, 0, 4 * j + 2), cu_w(w, 0, 4 * j + 3));
    }
    int ksv[NV];
#pragma unroll
    for (int k = 0; k < NV; k++) ksv[k] = PARTS ? ks : 1;
    if (COMB) {
        const float4 *o4 = (const float4 *)(ff + row);
#pragma unroll
        for (int k = 0; k < NV; k++) {
            int j = threadIdx.x + k * RMS_THREADS;
            if (j < n4)
                a[k] = cu_comb_col<CU_COMB_MAX_NS, CU_COMB_MAX_K>((const float4 *)cmb.ys, cmb.ns, cmb.mt, blockIdx.x, cmb.y, c_pos,
                                                                  c_w, cmb.K, n, j, o4);
        }
    } else {
        sum_parts<NV>(a, src, zstep, ok, ksv);   /* every load of the row's terms before any addition */
    }
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; k++) {
        int j = threadIdx.x + k * RMS_THREADS;
        if (ok[k]) {
            if (PARTS || COMB) ((float4 *)(ff + row))[j] = a[k];
            v[k].x += a[k].x; v[k].y += a[k].y; v[k].z += a[k].z; v[k].w += a[k].w;
            xr[j] = v[k];
        }
        ss += __fmaf_rn(v[k].w, v[k].w, __fmaf_rn(v[k].z, v[k].z, __fmaf_rn(v[k].y, v[k].y, __fmul_rn(v[k].x, v[k].x))));
    }
    float r = rms_inv(ss, red, n, eps);
    const int lane = threadIdx.x & 31, LK = n / 128;
#pragma unroll
    for (int k = 0; k < NV; k++) {
        int j = threadIdx.x + k * RMS_THREADS;
        if (j >= n4) continue;   /* whole warps (n % 128 == 0) */
        float4 y = make_float4(v[k].x * r * g[k].x, v[k].y * r * g[k].y, v[k].z * r * g[k].z, v[k].w * r * g[k].w);
        yr[j] = y;
        if (Q) {
            float a = cu_warp_max(fmaxf(fmaxf(fabsf(y.x), fabsf(y.y)), fmaxf(fabsf(y.z), fabsf(y.w))));
            float scale = fmaxf(a, 1e-4f) / 448.0f;
            uchar4 c = make_uchar4(cu_f32_to_fp8_hw(y.x / scale), cu_f32_to_fp8_hw(y.y / scale), cu_f32_to_fp8_hw(y.z / scale),
                                   cu_f32_to_fp8_hw(y.w / scale));
            *(uchar4 *)(q + row + 4 * (size_t)j) = c;
            if (lane == 0) qs[(size_t)blockIdx.x * LK + j / 32] = scale;
        }
    }
}

int cu_norm_chain(float *xn, float *h, const float *add, const float *parts, int ks, float *ff, const ds_weight *w, int M,
                  int n, float eps, unsigned char *q, float *qs) {
    int n4 = n / 4, nv = (n4 + RMS_THREADS - 1) / RMS_THREADS;
    const float *a = parts ? parts : add;
    if (!cu_rms_vec || M < 1 || n % 128 || nv > 8 || ((uintptr_t)xn & 15) || ((uintptr_t)h & 15) || (a && ((uintptr_t)a & 15)) ||
        (parts && (ks < 1 || !ff || ((uintptr_t)ff & 15))) || (q && (!qs || ((uintptr_t)q & 3))))
        return 0;
    cu_wview wv = cu_view(w);
    size_t zs = (size_t)M * n;
    const nc_comb nc = {NULL, NULL, NULL, NULL, NULL, 0, 0, 0};
#define NC_LAUNCH(NV)                                                                                                  \
    do {                                                                                                               \
        if (parts && q) cu_launch(norm_chain_kernel<NV, true, true>, M, RMS_THREADS, 0, xn, h, a, ks, zs, ff, wv, n, eps, q, qs, nc); \
        else if (parts) cu_launch(norm_chain_kernel<NV, true, false>, M, RMS_THREADS, 0, xn, h, a, ks, zs, ff, wv, n, eps, q, qs, nc); \
        else if (q) cu_launch(norm_chain_kernel<NV, false, true>, M, RMS_THREADS, 0, xn, h, a, 1, zs, ff, wv, n, eps, q, qs, nc); \
        else cu_launch(norm_chain_kernel<NV, false, false>, M, RMS_THREADS, 0, xn, h, a, 1, zs, ff, wv, n, eps, q, qs, nc); \
    } while (0)
    if (nv <= 1) NC_LAUNCH(1);
    else if (nv <= 2) NC_LAUNCH(2);
    else if (nv <= 4) NC_LAUNCH(4);
    else NC_LAUNCH(8);
#undef NC_LAUNCH
    CUDA_LAUNCH_CHECK();
    return 1;
}

int cu_norm_chain_comb(float *xn, float *h, const cu_comb_pend *pc, const ds_weight *w, int n, float eps, unsigned char *q,
                       float *qs) {
    int M = pc->M, n4 = n / 4, nv = (n4 + RMS_THREADS - 1) / RMS_THREADS;
    if (!cu_rms_vec || M < 1 || n % 128 || nv > 8 || pc->D != n || pc->K < 1 || pc->K > CU_COMB_MAX_K || pc->ns < 0 ||
        pc->ns > CU_COMB_MAX_NS || ((uintptr_t)xn & 15) || ((uintptr_t)h & 15) || ((uintptr_t)pc->out & 15) ||
        ((uintptr_t)pc->y & 15) || (q && (!qs || ((uintptr_t)q & 3))))
        return 0;
    cu_wview wv = cu_view(w);
    /* the shared experts' rows after the M K routed ones (moe_combine's ys) */
    const nc_comb nc = {pc->y, pc->w, pc->y + (size_t)M * pc->K * n, pc->ids, pc->pos, pc->K, pc->ns, M};
#define NCC_LAUNCH(NV)                                                                                                  \
    do {                                                                                                               \
        if (q) cu_launch(norm_chain_kernel<NV, false, true, true>, M, RMS_THREADS, 0, xn, h, (const float *)NULL, 1, (size_t)0, pc->out, wv, n, eps, q, qs, nc); \
        else cu_launch(norm_chain_kernel<NV, false, false, true>, M, RMS_THREADS, 0, xn, h, (const float *)NULL, 1, (size_t)0, pc->out, wv, n, eps, q, qs, nc); \
    } while (0)
    if (nv <= 1) NCC_LAUNCH(1);
    else if (nv <= 2) NCC_LAUNCH(2);
    else if (nv <= 4) NCC_LAUNCH(4);
    else NCC_LAUNCH(8);
#undef NCC_LAUNCH
    CUDA_LAUNCH_CHECK();
    return 1;
}

/* launches rmsnorm_vec_kernel when the shape suits it (returns 0 otherwise) */
static int rmsnorm_vec(float *out, int out_stride, float *x, int x_stride, const float *add, const ds_weight *w, int M,
                       int n, float eps) {
    int n4 = n / 4, nv = (n4 + RMS_THREADS - 1) / RMS_THREADS;
    if (!cu_rms_vec || n % 4 || nv > 8 || x_stride % 4 || out_stride % 4 || ((uintptr_t)x & 15) || ((uintptr_t)out & 15) ||
        (add && ((uintptr_t)add & 15)))
        return 0;
    cu_wview wv = cu_view(w);
#define RMS_LAUNCH(NV)                                                                                            \
    do {                                                                                                          \
        if (add) cu_launch(rmsnorm_vec_kernel<NV, true>, M, RMS_THREADS, 0, out, out_stride, x, x_stride, add, wv, n, eps); \
        else cu_launch(rmsnorm_vec_kernel<NV, false>, M, RMS_THREADS, 0, out, out_stride, x, x_stride, add, wv, n, eps); \
    } while (0)
    if (nv <= 1) RMS_LAUNCH(1);
    else if (nv <= 2) RMS_LAUNCH(2);
    else if (nv <= 4) RMS_LAUNCH(4);
    else RMS_LAUNCH(8);
#undef RMS_LAUNCH
    CUDA_LAUNCH_CHECK();
    return 1;
}

static void cu_rmsnorm(ds_backend *be, float *out, int out_stride, const float *x, int x_stride, const ds_weight *w,
                       int M, int n, float eps) {
    (void)be;
    if (M <= 0) return;
    if (rmsnorm_vec(out, out_stride, (float *)x, x_stride, NULL, w, M, n, eps)) return;   /* x is only read */
    rmsnorm_kernel<<<M, 256, 0, cu_stream>>>(out, out_stride, x, x_stride, cu_view(w), n, eps);
    CUDA_LAUNCH_CHECK();
}

static void cu_add(ds_backend *be, float *h, const float *x, size_t n);

static void cu_add_rmsnorm(ds_backend *be, float *xn, float *h, const float *x, const ds_weight *w, int M, int n,
                           float eps) {
    if (M <= 0) return;
    if (rmsnorm_vec(xn, n, h, n, x, w, M, n, eps)) return;
    cu_add(be, h, x, (size_t)M * n);
    cu_rmsnorm(be, xn, n, h, n, w, M, n, eps);
}

__global__ void add_kernel(float *h, const float *x, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        h[i] += x[i];
}

static void cu_add(ds_backend *be, float *h, const float *x, size_t n) {
    (void)be;
    if (!n) return;
    size_t blocks = cu_blocks(n, 256);
    add_kernel<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, cu_stream>>>(h, x, n);
    CUDA_LAUNCH_CHECK();
}

/* (rope_pair: cuda.h) */

/* grid (M, n_heads), threads over the dr/2 pairs. Angles in fp32 as on the CPU (inv_freq fp32 times
 * the position as fp32); cosf/sinf are the accurate (non fast-math) versions. */
__global__ void rope_kernel(float *x, int row_stride, int head_stride, int offset, const int32_t *positions,
                            const float *inv_freq, int half, float amp) {
    cu_pdl_trigger();
    cu_pdl_wait();
    int m = blockIdx.x, h = blockIdx.y;
    float pos = (float)positions[m];
    float *v = x + (size_t)m * row_stride + (size_t)h * head_stride + offset;
    for (int i = threadIdx.x; i < half; i += blockDim.x) rope_pair(v, i, pos, inv_freq, amp);
}

static void cu_rope(ds_backend *be, float *x, int row_stride, int n_heads, int head_stride, int offset) {
    ds_cuda_backend *cb = cu_of(be);
    int half = be->cfg->qk_rope_head_dim / 2;
    if (!cb->b.n_tokens || !n_heads || !half) return;
    dim3 grid(cb->b.n_tokens, n_heads);
    cu_launch(rope_kernel, grid, 32, 0, x, row_stride, head_stride, offset, cb->d_positions, cb->inv_freq, half,
              be->cfg->rope_amplitude);
    CUDA_LAUNCH_CHECK();
}

/* token rows into their cache entries, one block a row: fp32 (a copy), the FP8 layout, BF16 */
__device__ __forceinline__ void kv_row_f32(float *dst, const float *src, int w) {
    for (int i = threadIdx.x; i < w; i += blockDim.x) dst[i] = src[i];
}

__device__ __forceinline__ void kv_row_fp8(unsigned char *dst, const float *src, int C, int dr) {
    int nb = (C + 127) >> 7, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int b0 = warp; b0 < nb; b0 += blockDim.x >> 5) {
        int lo = b0 * 128, hi = lo + 128 < C ? lo + 128 : C;
        float amax = 0.0f;
        for (int i = lo + lane; i < hi; i += 32) amax = fmaxf(amax, fabsf(src[i]));
        amax = cu_warp_max(amax);
        float scale = fmaxf(amax, 1e-12f) / 448.0f;
        if (lane < 4) dst[C + 4 * b0 + lane] = (unsigned char)(__float_as_uint(scale) >> (8 * lane));
        for (int i = lo + lane; i < hi; i += 32) dst[i] = cu_f32_to_fp8(src[i] / scale);
    }
    for (int i = threadIdx.x; i < dr; i += blockDim.x) {
        unsigned short h = cu_f32_to_bf16_bits(src[C + i]);
        dst[C + 4 * nb + 2 * i] = (unsigned char)h;
        dst[C + 4 * nb + 2 * i + 1] = (unsigned char)(h >> 8);
    }
}

__device__ __forceinline__ void kv_row_bf16(unsigned short *dst, const float *src, int w) {
    for (int i = threadIdx.x; i < w; i += blockDim.x) dst[i] = cu_f32_to_bf16_bits(src[i]);
}

/* grid (M): token m's row kv[m, 0:w] into its page slot. */
__global__ void kv_store_kernel(float *cache, const float *kv, int w, const int32_t *positions, const int32_t *tok_seq,
                                const int32_t *page_table, int pt_stride, int page_size) {
    cu_pdl_trigger();
    cu_pdl_wait();
    int m = blockIdx.x, p = positions[m], s = tok_seq[m];
    int page = page_table[(size_t)s * pt_stride + p / page_size];
    float *dst = cache + ((size_t)page * page_size + (size_t)(p % page_size)) * w;
    kv_row_f32(dst, kv + (size_t)m * w, w);
}

/* grid (M), block 128 (4 warps): token m's entry in the FP8 layout (cuda.h), the same bytes as the CPU's
 * cpu_kv_pack_fp8: per 128-column block of the latent, scale = max(amax, 1e-12) / 448 and each value
 * x / scale in e4m3; k_pe in bf16. One warp per block of columns. */
__global__ void kv_store_fp8_kernel(unsigned char *cache, const float *kv, int C, int dr, size_t tb,
                                    const int32_t *positions, const int32_t *tok_seq, const int32_t *page_table,
                                    int pt_stride, int page_size) {
    int m = blockIdx.x, p = positions[m], s = tok_seq[m];
    int page = page_table[(size_t)s * pt_stride + p / page_size];
    unsigned char *dst = cache + ((size_t)page * page_size + (size_t)(p % page_size)) * tb;
    kv_row_fp8(dst, kv + (size_t)m * (C + dr), C, dr);
}

/* grid (M): token m's row kv[m, 0:w] into its page slot in BF16 (ds_f32_to_bf16, as the CPU's cpu_kv_pack). */
__global__ void kv_store_bf16_kernel(unsigned short *cache, const float *kv, int w, const int32_t *positions,
                                     const int32_t *tok_seq, const int32_t *page_table, int pt_stride, int page_size) {
    int m = blockIdx.x, p = positions[m], s = tok_seq[m];
    int page = page_table[(size_t)s * pt_stride + p / page_size];
    unsigned short *dst = cache + ((size_t)page * page_size + (size_t)(p % page_size)) * w;
    kv_row_bf16(dst, kv + (size_t)m * w, w);
}

static void cu_kv_store(ds_backend *be, void *cache_v, const float *kv) {
    ds_cuda_backend *cb = cu_of(be);
    const ds_config *c = be->cfg;
    int w = c->kv_lora_rank + c->qk_rope_head_dim;
    if (!cb->b.n_tokens) return;
    if (c->kv_fp8)
        kv_store_fp8_kernel<<<cb->b.n_tokens, 128, 0, cu_stream>>>((unsigned char *)cache_v, kv, c->kv_lora_rank,
                                                                   c->qk_rope_head_dim, ds_kv_token_bytes(c),
                                                                   cb->d_positions, cb->d_tok_seq, cb->d_page_table,
                                                                   cb->b.pt_stride, cb->b.page_size);
    else if (c->kv_bf16)
        kv_store_bf16_kernel<<<cb->b.n_tokens, 128, 0, cu_stream>>>((unsigned short *)cache_v, kv, w, cb->d_positions,
                                                                    cb->d_tok_seq, cb->d_page_table, cb->b.pt_stride,
                                                                    cb->b.page_size);
    else
        cu_launch(kv_store_kernel, cb->b.n_tokens, 128, 0, (float *)cache_v, kv, w, cb->d_positions, cb->d_tok_seq,
                  cb->d_page_table, cb->b.pt_stride, cb->b.page_size);
    CUDA_LAUNCH_CHECK();
}

/* The MLA block's steps between the projections and the attention, for token m = blockIdx.x in one launch
 * (backend.h qkv_finish; opt.qkv_fuse): kv's latent part [0, C) RMS-normed in place (rms_row_vec<1>: C <= 4
 * RMS_THREADS), then RoPE on q's H rope parts (at dn of each dqk-wide head) and on kv's (at C), then kv's row into
 * its cache entry (LAYOUT: CU_KV_F32, _FP8 or _BF16). Each step is the device code of its own kernel (rmsnorm_vec,
 * rope, the kv_store of the layout) on the same token's rows, in the model's order: the same bits as the four
 * launches. Block RMS_THREADS. */
/* hpg (opt.qkv_split, DSINFER_CUDA_QKV_SPLIT): 0, one block a token does all of it (grid (M)); else grid (M, 1 + ceil(H /
 * hpg)): block (m, 0) kv's steps (its partials, the norm, its RoPE, the cache entry), block (m, 1 + g) q's heads g hpg ..
 * (their partials, their BF16 copy, their RoPE). The steps of q and of kv never read each other's values, and each
 * element's arithmetic is the one-block form's: the same bits, with the token's work over 1 + H / hpg SMs (one block a
 * token left 68 of 132 SMs idle at 64 tokens, and the whole step to one SM at batch 1). */
typedef struct {
    float *q, *kv;   /* [M, H dqk], [M, C + dr] */
    void *cache;
    cu_wview nw;     /* kv's norm weight [C] */
    float eps;
    int H, dn, dqk, C, dr;
    size_t tb;       /* the cache's bytes a token */
    const int32_t *positions, *tok_seq, *page_table;
    int pt_stride, page_size;
    const float *inv_freq;
    float amp;
    const float *pq, *pkv;   /* PARTS: the split-K partials [ksq][M][H dqk], [ksk][M][C + dr] */
    int ksq, ksk;
    __nv_bfloat16 *qb;       /* NULL, or q_nope's BF16 copy [M, H dqk] */
    int hpg;                 /* q's heads a block of their own (0: one block a token) */
} qf_args;

/* block (m, g) of qkv_finish_kernel's grid (M tokens), red [RMS_THREADS / 32] its shared memory */
template <int LAYOUT, bool PARTS>
__device__ __forceinline__ void qkv_finish_block(const qf_args &a, int m, int g, int M, float *red) {
    float *q = a.q, *kv = a.kv;
    void *cache = a.cache;
    const cu_wview nw = a.nw;
    const float eps = a.eps, amp = a.amp, *inv_freq = a.inv_freq, *pq = a.pq, *pkv = a.pkv;
    const int H = a.H, dn = a.dn, dqk = a.dqk, C = a.C, dr = a.dr, ksq = a.ksq, ksk = a.ksk, hpg = a.hpg;
    const size_t tb = a.tb;
    const int32_t *positions = a.positions, *tok_seq = a.tok_seq, *page_table = a.page_table;
    const int pt_stride = a.pt_stride, page_size = a.page_size;
    __nv_bfloat16 *qb = a.qb;
    int w = C + dr, half = dr / 2;
    float *kr = kv + (size_t)m * w;
    /* this block's share: q's heads [h0, h1) and kv or not (block-uniform) */
    const int do_kv = !hpg || g == 0;
    const int h0 = !hpg ? 0 : g == 0 ? 0 : (g - 1) * hpg, h1 = !hpg ? H : g == 0 ? 0 : h0 + hpg < H ? h0 + hpg : H;
    if (PARTS) {   /* q and kv are the ksq / ksk split-K partials' sums, in z order (f8_reduce2_kernel's additions): made here
                    * (a count of 1: the tensor's one partial, copied; it may be q or kv itself, each element read before
                    * the same thread writes it).
                    * A template argument: compiled into the one-tensor form, this prologue cost 3 us a layer at 256 rows
                    * (ncu, twenty-third session run 2) */
        const int nqa = H * dqk / 4, q0 = h0 * dqk / 4, nq4 = (h1 - h0) * dqk / 4, nk4 = do_kv ? w / 4 : 0;
        size_t zq = (size_t)(unsigned)M * nqa, zk = (size_t)(unsigned)M * (w / 4);   /* (M: gridDim.x) */
        const float4 *sq = (const float4 *)pq + (size_t)m * nqa + q0, *sk = (const float4 *)pkv + (size_t)m * (w / 4);
        float4 *dq = (float4 *)(q + (size_t)m * H * dqk) + q0;
        for (int i0 = 0; i0 < nq4 + nk4; i0 += 4 * RMS_THREADS) {   /* four float4s a thread at once (V2-Lite: one pass) */
            float4 v[4];
            const float4 *src[4];
            size_t zstep[4];
            bool ok[4];
            int ks[4];
#pragma unroll
            for (int s = 0; s < 4; s++) {
                int i = i0 + threadIdx.x + s * RMS_THREADS;
                ok[s] = i < nq4 + nk4;
                src[s] = i < nq4 ? sq + i : sk + (i - nq4);
                zstep[s] = i < nq4 ? zq : zk;
                ks[s] = i < nq4 ? ksq : ksk;
            }
            sum_parts<4>(v, src, zstep, ok, ks);
#pragma unroll
            for (int s = 0; s < 4; s++) {
                int i = i0 + threadIdx.x + s * RMS_THREADS;
                if (!ok[s]) continue;
                if (i < nq4) dq[i] = v[s];
                else ((float4 *)kr)[i - nq4] = v[s];
            }
        }
        __syncthreads();   /* every sum written before the norm and the RoPE read them */
    }
    if (qb) {   /* q_nope in BF16 [., H dqk] for the absorbed attention's batched GEMM (to_bf16_kernel's rounding; the nope
                 * columns are all that GEMM reads, and no step here changes them) */
        const float *qr = q + (size_t)m * H * dqk;
        __nv_bfloat16 *br = qb + (size_t)m * H * dqk;
        for (int t = h0 * dn + threadIdx.x; t < h1 * dn; t += blockDim.x) {
            size_t o = (size_t)(t / dn) * dqk + (size_t)(t % dn);
            br[o] = __float2bfloat16(qr[o]);
        }
    }
    if (do_kv) rms_row_vec<1, false>((float4 *)kr, (float4 *)kr, nullptr, nw, C, eps, red);
    __syncthreads();   /* the normed latent is in kr before the store reads it */
    float pos = (float)positions[m];
    /* pairs of q's heads h0 .. h1 - 1, then (do_kv) kv's: head H in the one-block form's numbering */
    const int nqp = (h1 - h0) * half;
    for (int t = threadIdx.x; t < nqp + (do_kv ? half : 0); t += blockDim.x) {
        int h = t < nqp ? h0 + t / half : H, i = t < nqp ? t % half : t - nqp;
        rope_pair(h < H ? q + (size_t)m * H * dqk + (size_t)h * dqk + dn : kr + C, i, pos, inv_freq, amp);
    }
    __syncthreads();
    if (!do_kv) return;
    int p = positions[m], s = tok_seq[m];
    size_t slot = (size_t)page_table[(size_t)s * pt_stride + p / page_size] * page_size + (size_t)(p % page_size);
    if (LAYOUT == CU_KV_FP8) kv_row_fp8((unsigned char *)cache + slot * tb, kr, C, dr);
    else if (LAYOUT == CU_KV_BF16) kv_row_bf16((unsigned short *)cache + slot * w, kr, w);
    else kv_row_f32((float *)cache + slot * w, kr, w);
}

template <int LAYOUT, bool PARTS>
__global__ void __launch_bounds__(RMS_THREADS) qkv_finish_kernel(float *q, float *kv, void *cache, cu_wview nw, float eps,
                                                                 int H, int dn, int dqk, int C, int dr, size_t tb,
                                                                 const int32_t *positions, const int32_t *tok_seq,
                                                                 const int32_t *page_table, int pt_stride, int page_size,
                                                                 const float *inv_freq, float amp, const float *pq,
                                                                 const float *pkv, int ksq, int ksk, __nv_bfloat16 *qb, int hpg) {
    __shared__ float red[RMS_THREADS / 32];
    const qf_args a = {q, kv, cache, nw, eps, H, dn, dqk, C, dr, tb, positions, tok_seq, page_table, pt_stride, page_size,
                       inv_freq, amp, pq, pkv, ksq, ksk, qb, hpg};
    qkv_finish_block<LAYOUT, PARTS>(a, (int)blockIdx.x, (int)blockIdx.y, (int)gridDim.x, red);
}

/* qkv_finish and the absorbed attention's q product in one launch (opt.qkv_absorb; backend.h qkv_finish with kv_b): the
 * product reads only q_nope, which no step of qkv_finish changes, so the two are independent and their chains run side
 * by side instead of one after the other (two dependent kernels of ~3.5 us each at batch 1: the forty-eighth session's
 * timeline). Flat grid: blocks [0, nf) are qkv_finish_kernel's grid (M, ny) (block b: token b % M, group b / M), the rest
 * absorb_q_v3_kernel's (H, C / AQ3_COLS, ceil(M / 2)) two column groups a block, a 128-thread half each (block b - nf:
 * head % H, then column pair, then token pair). Each value's arithmetic is its kernel's: the same bits as the two
 * launches. Needs C % (2 AQ3_COLS) == 0, no split-K partials (PARTS false) and no BF16 copy of q. */
/* NORM (opt.norm_fold): one block more, the last, makes the layer's input norm that the GEMV before folded in (h += add,
 * xn = RMSNorm(h): rmsnorm_vec_kernel's rms_row_vec, NV 8 for any n <= 8192: the same bits as its launch, whose unused
 * slots add zeros). Nothing else in the launch reads h or xn. */
template <int LAYOUT, int EB, bool NORM = false>
__global__ void __launch_bounds__(RMS_THREADS) qkv_absorb_kernel(qf_args a, int M, int ny, float *qlat, cu_wview kvb, int hw,
                                                                 cu_norm_job nj) {
    static_assert(RMS_THREADS == 256, "two 128-thread column groups a block");
    __shared__ float red[RMS_THREADS / 32];
    __shared__ float ared[2][AQ3_RPP(EB)][2][AQ3_COLS];
    cu_pdl_trigger();
    cu_pdl_wait();
    const int nf = M * ny, b = (int)blockIdx.x;
    if (NORM && b == (int)gridDim.x - 1) {
        if (nj.add) rms_row_vec<8, true>((float4 *)nj.xn, (float4 *)nj.h, (const float4 *)nj.add, nj.nw, nj.n, nj.eps, red);
        else rms_row_vec<8, false>((float4 *)nj.xn, (float4 *)nj.h, nullptr, nj.nw, nj.n, nj.eps, red);
        return;   /* (whole block) */
    }
    if (b < nf) {
        qkv_finish_block<LAYOUT, false>(a, b % M, b / M, M, red);
        return;   /* (whole block) */
    }
    const int ab = b - nf, half = (int)threadIdx.x >> 7, pairs = a.C / (2 * AQ3_COLS);
    const int h = ab % a.H, k0 = ((ab / a.H) % pairs * 2 + half) * AQ3_COLS, i0 = ab / (a.H * pairs) * 2;
    absorb_q_v3_cols<EB>(ared[half], qlat, a.q, kvb, NULL, M, a.H, a.C, a.dn, a.dqk, hw, h, k0, i0, threadIdx.x & 127u);
}

/* qkv_finish_kernel for the batch's tokens, with q and kv first summed from split-K partials pq [ksq][M][H dqk] and
 * pkv [ksk][M][C + dr] (16-byte aligned) where either count is above 1; 0 (nothing launched) where the kernel does not
 * fit. kv_b (NULL: none): the layer's, whose absorbed attention over the batch's tokens comes next (backend.h qkv_finish):
 * with opt.qkv_absorb its q product is made in the same launch where that attention would make it by absorb_q_v3_kernel
 * (qkv_absorb_kernel; q_lat into ws_qlat, taken by attn_fused). */
int cu_qkv_finish_parts(ds_backend *be, float *q, float *kv, void *cache, const ds_weight *kv_norm, float eps,
                        const float *pq, const float *pkv, int ksq, int ksk, const ds_weight *kv_b, const cu_norm_job *nj) {
    const int ks = ksq > ksk ? ksq : ksk;   /* above 1: the partials' prologue */
    ds_cuda_backend *cb = cu_of(be);
    const ds_config *c = be->cfg;
    int C = c->kv_lora_rank, dr = c->qk_rope_head_dim, H = c->num_heads, dn = c->qk_nope_head_dim, w = C + dr;
    int M = cb->b.n_tokens;
    /* the fused kernel where each of its steps is the vectorised one (rmsnorm_vec with one float4 a thread) */
    int fits = cb->opt.qkv_fuse && cu_rms_vec && C % 4 == 0 && C / 4 <= RMS_THREADS && w % 4 == 0 && dr % 2 == 0 &&
               ((uintptr_t)kv & 15) == 0;
    if (ks > 1)
        fits = fits && pq && pkv && (H * c->qk_head_dim) % 4 == 0 && ((uintptr_t)q & 15) == 0 && ((uintptr_t)pq & 15) == 0 &&
               ((uintptr_t)pkv & 15) == 0;
    if (!fits || M < 1) return 0;
    cu_wview nw = cu_view(kv_norm);
    size_t tb = ds_kv_token_bytes(c);
    /* the absorbed attention's GEMM input in BF16 too, where that attention will take the batched GEMMs (attn_fused's
     * rule: the tensor cores, more tokens than a GEMV takes), at decode-sized batches: a long prompt's chunk runs the
     * naive form, which would leave the copy unread (an 8K prompt: 32 MB a layer written for nothing) */
    __nv_bfloat16 *qb = NULL;
    cb->qb_of = NULL;
    if (cb->opt.qb_fuse && cb->opt.tc && cb->opt.absorb_tc && M > GEMV_MAX_M && M <= CU_QB_MAX_M) {
        qb = (__nv_bfloat16 *)cu_ws_get(&cb->ws_qb, (size_t)M * H * c->qk_head_dim * sizeof(__nv_bfloat16));
        cb->qb_of = q;
        cb->qb_T = M;
    }
    /* q's heads over blocks of their own (opt.qkv_split heads a block) where the heads' float4 runs stay whole; with
     * split-K partials to sum (the W8A8 chain) only when asked (opt.qkv_split_parts): FP8 b64 the same, b256 +0.18 ms, where
     * the one-tensor form (BF16) gains 0.02 .. 0.09 ms (RESULTS thirtieth session run 8) */
    const int hpg = cb->opt.qkv_split > 0 && c->qk_head_dim % 4 == 0 && cb->opt.qkv_split < H &&
                    (ks == 1 || cb->opt.qkv_split_parts) ? cb->opt.qkv_split : 0;
    const dim3 grid((unsigned)M, hpg ? 1 + (unsigned)((H + hpg - 1) / hpg) : 1);
    cb->qkv_split_launches += hpg > 0;
    cb->qlat_of = NULL;
    const int eb = kv_b && cb->opt.qkv_absorb && ks == 1 && !qb && C % (2 * AQ3_COLS) == 0 ? cu_absorb_v3_takes(cb, kv_b, M) : 0;
    if (nj && (!eb || nj->n % 4 || nj->n > 8 * 4 * RMS_THREADS || ((uintptr_t)nj->h & 15) || ((uintptr_t)nj->xn & 15) ||
               ((uintptr_t)nj->add & 15)))
        return 0;   /* (the norm job goes only into qkv_absorb_kernel; nothing launched) */
    if (eb) {
        const qf_args a = {q, kv, cache, nw, eps, H, dn, c->qk_head_dim, C, dr, tb, cb->d_positions, cb->d_tok_seq,
                           cb->d_page_table, cb->b.pt_stride, cb->b.page_size, cb->inv_freq, c->rope_amplitude, NULL, NULL,
                           1, 1, NULL, hpg};
        float *qlat = (float *)cu_ws_get(&cb->ws_qlat, (size_t)M * H * C * sizeof(float));
        const unsigned nb = grid.x * grid.y + (unsigned)(H * (C / (2 * AQ3_COLS)) * ((M + 1) / 2)) + (nj ? 1u : 0u);
        const cu_wview kvb = cu_view(kv_b);
        const int hw = dn + c->v_head_dim;
        const cu_norm_job nj0 = {};
#define QA_LAUNCH(L)                                                                                                  \
    do {                                                                                                              \
        if (nj && eb == 2) cu_launch(qkv_absorb_kernel<L, 2, true>, nb, RMS_THREADS, 0, a, M, (int)grid.y, qlat, kvb, hw, *nj); \
        else if (nj) cu_launch(qkv_absorb_kernel<L, 1, true>, nb, RMS_THREADS, 0, a, M, (int)grid.y, qlat, kvb, hw, *nj); \
        else if (eb == 2) cu_launch(qkv_absorb_kernel<L, 2>, nb, RMS_THREADS, 0, a, M, (int)grid.y, qlat, kvb, hw, nj0); \
        else cu_launch(qkv_absorb_kernel<L, 1>, nb, RMS_THREADS, 0, a, M, (int)grid.y, qlat, kvb, hw, nj0);         \
    } while (0)
        if (c->kv_fp8) QA_LAUNCH(CU_KV_FP8);
        else if (c->kv_bf16) QA_LAUNCH(CU_KV_BF16);
        else QA_LAUNCH(CU_KV_F32);
#undef QA_LAUNCH
        CUDA_LAUNCH_CHECK();
        cb->qlat_of = q;
        cb->qlat_kvb = kv_b;
        cb->qlat_T = M;
        cb->qkv_absorb_runs++;
        cb->norm_fold_runs += nj != NULL;
        return 1;
    }
#define QF_LAUNCH_P(L, P)                                                                                             \
    qkv_finish_kernel<L, P><<<grid, RMS_THREADS, 0, cu_stream>>>(q, kv, cache, nw, eps, H, dn, c->qk_head_dim, C, dr,   \
                                                                 tb, cb->d_positions, cb->d_tok_seq, cb->d_page_table,    \
                                                                 cb->b.pt_stride, cb->b.page_size, cb->inv_freq,          \
                                                                 c->rope_amplitude, pq, pkv, ks > 1 ? ksq : 1,          \
                                                                 ks > 1 ? ksk : 1, qb, hpg)
#define QF_LAUNCH(L)                                                                                                  \
    do {                                                                                                              \
        if (ks > 1) QF_LAUNCH_P(L, true);                                                                             \
        else QF_LAUNCH_P(L, false);                                                                                   \
    } while (0)
    if (c->kv_fp8) QF_LAUNCH(CU_KV_FP8);
    else if (c->kv_bf16) QF_LAUNCH(CU_KV_BF16);
    else QF_LAUNCH(CU_KV_F32);
#undef QF_LAUNCH
#undef QF_LAUNCH_P
    CUDA_LAUNCH_CHECK();
    return 1;
}

static void cu_qkv_finish(ds_backend *be, float *q, float *kv, void *cache, const ds_weight *kv_norm, float eps,
                          const ds_weight *kv_b) {
    ds_cuda_backend *cb = cu_of(be);
    const ds_config *c = be->cfg;
    int C = c->kv_lora_rank, dr = c->qk_rope_head_dim, H = c->num_heads, dn = c->qk_nope_head_dim, w = C + dr;
    int M = cb->b.n_tokens;
    cb->qb_of = NULL;   /* (set again where the fused kernel writes the copy) */
    cb->qlat_of = NULL;   /* (set again where the launch makes q_lat) */
    if (!M || cu_qkv_finish_parts(be, q, kv, cache, kv_norm, eps, NULL, NULL, 1, 1, kv_b, NULL)) return;
    cu_rmsnorm(be, kv, w, kv, w, kv_norm, M, C, eps);
    cu_rope(be, q, H * c->qk_head_dim, H, c->qk_head_dim, dn);
    cu_rope(be, kv, w, 1, 0, C);
    cu_kv_store(be, cache, kv);
}

/* the W8A8 chain's fused forms apply at M rows of these weights: both through the one-launch GEMM of linear2 (or of
 * linear, w2 == w1) at 2 .. 64 rows (cu_linear2's and cu_linear's choice there) */
static int chain_fits(const ds_cuda_backend *cb, const ds_weight *w1, const ds_weight *w2, int M) {
    return cb->opt.chain_fuse && cb->opt.fp8_gemm && M >= cb->opt.fp8_gemm_min_m && M == cb->b.n_tokens &&
           w1->cols == w2->cols && w1->rows > 0 && w2->rows > 0 && cu_f8_wgmma_two_ok(w1, w2, M);
}

/* the fused forms above 64 rows (opt.chain_fuse 2, up to opt.chain_tma_max_m rows) for these weights at M rows: where
 * cu_linear2 / cu_linear run each weight's W8A8 GEMM on one quantized x (cu_f8_wgmma_shared_x, or cu_f8_wgmma_linear);
 * cu_f8_tma_parts_plan then says, on the codes' buffer, whether that GEMM is the TMA path with a reduce after it, whose
 * partials the next kernel sums */
static int chain_tma_weights(const ds_cuda_backend *cb, const ds_weight *w1, const ds_weight *w2, int M) {
    return cb->opt.chain_fuse >= 2 && M > 64 && M <= cb->opt.chain_tma_max_m && cb->opt.fp8_gemm &&
           M >= cb->opt.fp8_gemm_min_m && M == cb->b.n_tokens && w1->cols == w2->cols && w1->rows > 0 && w2->rows > 0 &&
           (w1 == w2 || cb->opt.w8_shared_x) && cu_f8_wgmma_pair_ok(w1, w2, M);
}

/* attn_in's norm_chain_kernel (h += add, xn, its codes): with add the MoE combine moe_to_attn_in left (cb->comb), the
 * kernel that makes that sum too (cu_norm_chain_comb; the left combine launched first where it does not fit) */
static int attn_in_norm(ds_cuda_backend *cb, float *xn, float *h, const float *add, const ds_weight *in_norm, int M, int D,
                        float eps, unsigned char *codes, float *qs) {
    if (cb->comb.active && cb->comb.out == add && cb->comb.M == M) {
        if (cu_norm_chain_comb(xn, h, &cb->comb, in_norm, D, eps, codes, qs)) {
            cb->comb.active = 0;
            cb->comb_norm_runs++;
            return 1;
        }
        cu_comb_flush(cb);
    }
    return cu_norm_chain(xn, h, add, NULL, 1, NULL, in_norm, M, D, eps, codes, qs);
}

static void cu_normed_linear(ds_backend *be, float *out, float *xn, const float *x, const ds_weight *norm, float eps,
                             const ds_weight *w, int M);

/* attn_in for one token with the input norm folded into the q / kv_a GEMV (opt.norm_fold; q_a / kv_a with ql, V3, whose
 * q_b GEMV then folds q_a's norm too: cu_normed_linear): the GEMV reads h and add and scales its sums by 1 / RMS
 * (cu_linear2_norm), and the next launch, qkv_absorb_kernel, makes h += add and xn in one more block beside its own
 * chains, so no norm kernel stands between the layer's input and its projections. h and xn get
 * rmsnorm_vec's bits; q and kv the unfolded GEMV's up to fp32 rounding (op test nfold). 0 (nothing launched) where the
 * GEMV form does not apply; where qkv_absorb_kernel then does not, the norm and qkv_finish run as launches of their own
 * after the folded GEMV (it read h before them). */
static int attn_in_fold(ds_backend *be, float *xn, float *h, const float *add, const ds_weight *in_norm, float eps, float *q,
                        float *kv, const ds_weight *wq, const ds_weight *wkv, void *cache, const ds_weight *kv_norm,
                        float kv_eps, const ds_weight *kv_b, const ds_qlora_in *ql) {
    ds_cuda_backend *cb = cu_of(be);
    const int D = wq->cols;
    if (!cu_linear2_norm(be, ql ? ql->qa : q, kv, h, add, in_norm, eps, wq, wkv)) return 0;
    /* q_lora: q from qa (its norm folded into q_b's GEMV as well); reads neither h nor xn, so the norm block below may
     * still make them */
    if (ql) cu_normed_linear(be, q, ql->qa, ql->qa, ql->q_a_norm, ql->eps, ql->q_b, 1);
    const cu_norm_job nj = {xn, h, add, cu_view(in_norm), D, eps};
    if (cu_qkv_finish_parts(be, q, kv, cache, kv_norm, kv_eps, NULL, NULL, 1, 1, kv_b, &nj)) return 1;
    if (add) cu_add_rmsnorm(be, xn, h, add, in_norm, 1, D, eps);
    else cu_rmsnorm(be, xn, D, h, D, in_norm, 1, D, eps);
    cu_qkv_finish(be, q, kv, cache, kv_norm, kv_eps, kv_b);
    return 1;
}

/* backend.h normed_linear: at one token (opt.norm_fold) the norm folded into the GEMV (cu_linear_norm: x only read, xn
 * not written; V3's q_a norm before q_b, the final norm before the LM head), else the norm into xn and the linear */
static void cu_normed_linear(ds_backend *be, float *out, float *xn, const float *x, const ds_weight *norm, float eps,
                             const ds_weight *w, int M) {
    ds_cuda_backend *cb = cu_of(be);
    const int K = w->cols;
    if (M <= 0) return;
    if (M == 1 && cb->opt.norm_fold && cu_linear_norm(be, out, x, norm, eps, w)) {
        cb->normed_linear_folds++;
        return;
    }
    cu_rmsnorm(be, xn, K, x, K, norm, M, K, eps);
    cu_linear(be, out, xn, w, M);
}

/* backend.h attn_in. The fused form (chain_fits, cu_linear2's one launch: hfuse): norm_chain_kernel (h += add, xn and
 * its codes), the GEMM with its split-K partials kept, qkv_finish_kernel summing them first: three launches where the
 * composition takes five (the norm, the quantizer, the GEMM, the split-K sum, qkv_finish), the same bits (op test
 * attnin). Else the composition. */
static void cu_attn_in(ds_backend *be, float *xn, float *h, const float *add, const ds_weight *in_norm, float eps, float *q,
                       float *kv, const ds_weight *wq, const ds_weight *wkv, void *cache, const ds_weight *kv_norm, float kv_eps,
                       const ds_weight *kv_b, const ds_qlora_in *ql, int M) {
    ds_cuda_backend *cb = cu_of(be);
    int D = wq->cols;
    if (cb->comb.active && (cb->comb.out != add || cb->comb.M != M)) cu_comb_flush(cb);   /* not this call's add */
    if (M <= 0) return;
    /* (the W8A8 chains below sum q's split-K partials inside qkv_finish: without q_lora only, where q is wq's output) */
    if (!ql && cb->opt.hfuse && chain_fits(cb, wq, wkv, M)) {
        float *qs;
        unsigned char *codes = cu_f8_codes_buf(cb, M, D, &qs);
        if (attn_in_norm(cb, xn, h, add, in_norm, M, D, eps, codes, qs)) {
            cu_f8_parts pp;
            cu_f8_gemm1_parts(cb, codes, qs, M, wq, q, wkv, kv, &pp);
            if (pp.ks > 1 && cu_qkv_finish_parts(be, q, kv, cache, kv_norm, kv_eps, pp.p1, pp.p2, pp.ks, pp.ks, kv_b, NULL)) {
                cb->chain_fused_runs++;
                return;
            }
            if (pp.ks > 1) cu_f8_reduce_two(q, pp.p1, (size_t)M * wq->rows, kv, pp.p2, (size_t)M * wkv->rows, pp.ks);
            cu_qkv_finish(be, q, kv, cache, kv_norm, kv_eps, kv_b);
            return;
        }
    }
    if (!ql && cb->opt.hfuse && chain_tma_weights(cb, wq, wkv, M)) {   /* above 64 rows: the same with the TMA GEMM, a launch a weight */
        float *qs;
        unsigned char *codes = cu_f8_codes_buf(cb, M, D, &qs);
        cu_f8_tma_parts tp;
        if (cu_f8_tma_parts_plan(cb, codes, M, wq, wkv, &tp) && attn_in_norm(cb, xn, h, add, in_norm, M, D, eps, codes, qs)) {
            cu_f8_tma_parts_run(cb, codes, qs, M, wq, q, wkv, kv, &tp);
            if (cu_qkv_finish_parts(be, q, kv, cache, kv_norm, kv_eps, tp.p1, tp.p2, tp.ks1, tp.ks2, kv_b, NULL)) {
                cb->chain_fused_runs++;
                return;
            }
            if (tp.ks1 > 1) cu_f8_reduce(q, tp.p1, (size_t)M * wq->rows, tp.ks1);
            if (tp.ks2 > 1) cu_f8_reduce(kv, tp.p2, (size_t)M * wkv->rows, tp.ks2);
            cu_qkv_finish(be, q, kv, cache, kv_norm, kv_eps, kv_b);
            return;
        }
    }
    if (M == 1 && cb->opt.norm_fold && !cb->comb.active && attn_in_fold(be, xn, h, add, in_norm, eps, q, kv, wq, wkv, cache,
                                                                         kv_norm, kv_eps, kv_b, ql))
        return;
    /* the composition (batch 1's GEMVs among others): the left combine made by the norm kernel too, one launch fewer
     * (the same bits: cu_norm_chain_comb); else launched first, as the composition reads add as moe_combine leaves it */
    if (add && cb->comb.active && cb->comb.out == add && cb->comb.M == M &&
        cu_norm_chain_comb(xn, h, &cb->comb, in_norm, D, eps, NULL, NULL)) {
        cb->comb.active = 0;
        cb->comb_norm_runs++;
    } else {
        cu_comb_flush(cb);
        if (add) cu_add_rmsnorm(be, xn, h, add, in_norm, M, D, eps);
        else cu_rmsnorm(be, xn, D, h, D, in_norm, M, D, eps);
    }
    cu_linear2(be, ql ? ql->qa : q, kv, xn, wq, wkv, M);
    if (ql) cu_normed_linear(be, q, ql->qa, ql->qa, ql->q_a_norm, ql->eps, ql->q_b, M);
    cu_qkv_finish(be, q, kv, cache, kv_norm, kv_eps, kv_b);
}

/* backend.h linear_add_rmsnorm. The fused form (chain_fits): x quantized, the GEMM with its split-K partials kept,
 * norm_chain_kernel summing them into ff and h before the norm: one launch fewer than linear + add_rmsnorm, the same
 * bits (op test attnin). Else those two. */
static void cu_linear_add_rmsnorm(ds_backend *be, float *xn, float *h, float *ff, const float *x, const ds_weight *w,
                                  const ds_weight *norm, int M, float eps) {
    ds_cuda_backend *cb = cu_of(be);
    int D = w->rows, K = w->cols;
    if (M <= 0) return;
    if (chain_fits(cb, w, w, M) && ((uintptr_t)x & 15) == 0) {
        float *qs;
        unsigned char *codes = cu_f8_codes_buf(cb, M, K, &qs);
        cu_rows_fp8_f32(codes, qs, x, M, K);
        cu_f8_parts pp;
        cu_f8_gemm1_parts(cb, codes, qs, M, w, ff, NULL, NULL, &pp);
        if (pp.ks > 1 && cu_norm_chain(xn, h, NULL, pp.p1, pp.ks, ff, norm, M, D, eps, NULL, NULL)) {
            cb->chain_fused_runs++;
            return;
        }
        if (pp.ks > 1) cu_f8_reduce(ff, pp.p1, (size_t)M * D, pp.ks);
        cu_add_rmsnorm(be, xn, h, ff, norm, M, D, eps);
        return;
    }
    float *qs = NULL;
    unsigned char *codes = ((uintptr_t)x & 15) == 0 && chain_tma_weights(cb, w, w, M) ? cu_f8_codes_buf(cb, M, K, &qs) : NULL;
    cu_f8_tma_parts tp;
    if (codes && cu_f8_tma_parts_plan(cb, codes, M, w, NULL, &tp)) {   /* above 64 rows: the TMA GEMM's partials */
        cu_rows_fp8_f32(codes, qs, x, M, K);
        cu_f8_tma_parts_run(cb, codes, qs, M, w, ff, NULL, NULL, &tp);
        if (cu_norm_chain(xn, h, NULL, tp.p1, tp.ks1, ff, norm, M, D, eps, NULL, NULL)) {
            cb->chain_fused_runs++;
            return;
        }
        if (tp.ks1 > 1) cu_f8_reduce(ff, tp.p1, (size_t)M * D, tp.ks1);
    } else {
        cu_linear(be, ff, x, w, M);
    }
    cu_add_rmsnorm(be, xn, h, ff, norm, M, D, eps);
}

__global__ void gather_rows_kernel(float *out, const float *x, const int32_t *rows, int n_cols) {
    int i = blockIdx.x;
    const float *src = x + (size_t)rows[i] * n_cols;
    for (int c = threadIdx.x; c < n_cols; c += blockDim.x) out[(size_t)i * n_cols + c] = src[c];
}

static void cu_gather_rows(ds_backend *be, float *out, const float *x, const int32_t *rows, int n, int n_cols) {
    ds_cuda_backend *cb = cu_of(be);
    if (n <= 0) return;
    int32_t *d_rows = (int32_t *)cu_ws_get(&cb->ws_rows, (size_t)n * sizeof(int32_t));
    CUDA_CHECK(cudaMemcpy(d_rows, rows, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice));
    gather_rows_kernel<<<n, 256, 0, cu_stream>>>(out, x, d_rows, n_cols);
    CUDA_LAUNCH_CHECK();
}

/* ---- lifetime ------------------------------------------------------------------------------------ */
#ifdef MW_PROF
void cu_moe_wg_prof_print(void);   /* cuda_moe_wg.cu, MW_PROF builds only */
#endif
#ifdef RT_PROF
void cu_router_prof_print(void);   /* cuda_moe.cu, RT_PROF builds only */
#endif
#ifdef MOEO_PROF
extern "C" void cu_moeo_prof_print(void);   /* cuda_moeo.cu, MOEO_PROF builds only */
#endif
static void cu_destroy(ds_backend *be) {
    ds_cuda_backend *cb = cu_of(be);
    cudaDeviceSynchronize();
#ifdef MW_PROF
    cu_moe_wg_prof_print();
#endif
#ifdef RT_PROF
    cu_router_prof_print();
#endif
#ifdef MOEO_PROF
    cu_moeo_prof_print();
#endif
    cu_optimes_report_free(cb);
    cu_graphs_free(cb);
    cu_moe_tabs_free(cb);
    cu_side_free(cb);
    cu_prefetch_free(cb);
    cu_lt_tune_free(cb);   /* its plans before the cuBLASLt handle */
    cu_fp8_free(cb);
    cu_ws *ws[] = {&cb->ws_meta, &cb->ws_deq, &cb->ws_rows, &cb->ws_attn, &cb->ws_mlp, &cb->ws_moe, &cb->ws_sample,
                   &cb->ws_tc, &cb->ws_abs, &cb->ws_abs_tc, &cb->ws_qb, &cb->ws_qlat, &cb->ws_moe2, &cb->ws_moe_tc, &cb->ws_moe_gemm, &cb->ws_f8xt,
                   &cb->ws_router_part, &cb->ws_moe1};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) cu_ws_free(ws[i]);
    for (int i = 0; i < cb->n_owned; i++) cudaFree(cb->owned[i]);
    if (cb->weight_pool) cudaFree(cb->weight_pool);
    if (cb->inv_freq) cudaFree(cb->inv_freq);
    if (cb->cublas) cublasDestroy(cb->cublas);
    if (cb->cublas_tc) cublasDestroy(cb->cublas_tc);
    if (cb->cublas_ws) cudaFree(cb->cublas_ws);
    if (cb->route_tickets) cudaFree(cb->route_tickets);
    if (cb->mla_tickets) cudaFree(cb->mla_tickets);
    if (cb->moe1_bar) cudaFree(cb->moe1_bar);
    if (cb->moeo_cnt) cudaFree(cb->moeo_cnt);
    free(cb->owned);
    free(cb->kvb16);   /* the copies themselves are in owned */
    free(cb->h_tokens);
    free(cb->h_seq_start);
    free(cb->h_page_table);
    free(cb);
}

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static cu_opts cu_opts_read(void) {
    cu_opts o;
    o.tc = env_int("DSINFER_CUDA_TC", 0);
    o.moe_tc = env_int("DSINFER_CUDA_MOE_TC", 1);
    o.skinny = env_int("DSINFER_CUDA_SKINNY", 0);
    o.graphs = env_int("DSINFER_CUDA_GRAPHS", 1);
    o.fused_attn = env_int("DSINFER_CUDA_FUSED_ATTN", 1);
    o.mla_tc = env_int("DSINFER_CUDA_MLA_TC", 1);
    o.attn_tc = env_int("DSINFER_CUDA_ATTN_TC", 1);
    o.moe_grouped = env_int("DSINFER_CUDA_MOE_GROUPED", 1);
    o.moe_grouped_max_m = env_int("DSINFER_CUDA_MOE_GROUPED_MAX_M", 256);
    o.moe_live = env_int("DSINFER_CUDA_MOE_LIVE", 1);
    o.absorb_tc = env_int("DSINFER_CUDA_ABSORB_TC", 1);
    o.vec_gemv = env_int("DSINFER_CUDA_VEC_GEMV", 1);
    o.gemv_t1 = env_int("DSINFER_CUDA_GEMV_T1", 4);   /* 4: four rows a warp (RESULTS twenty-sixth session run 2; 2: twenty-third run 4) */
    o.fp8_gemm = env_int("DSINFER_CUDA_FP8_GEMM", o.tc);   /* W8A8 linears with the tensor-core paths */
    o.lt_tune = env_int("DSINFER_CUDA_LT_TUNE", 1);
    o.moe_gemm = env_int("DSINFER_CUDA_MOE_GEMM", 1);
    o.moe_gemm_min_m = env_int("DSINFER_CUDA_MOE_GEMM_MIN_M", 1024);
    /* opt-in: +2.5% at batch 64 (eleventh session), -4% a step at batch 1, but once its kernels have run beside the
     * main stream's, every later step of the process is slower (b64 +2.3%, b1 +6%: RESULTS twenty-eighth session runs
     * 4 .. 11, KERNELS.md) */
    o.shared_stream = env_int("DSINFER_CUDA_SHARED_STREAM", 0);
    cu_side_lab = env_int("DSINFER_CUDA_SIDE_LAB", 0);
    o.moe_wg_qf = env_int("DSINFER_CUDA_MOE_WG_QF", 0);
    o.moe_wg_pdl = env_int("DSINFER_CUDA_MOE_WG_PDL", -1);
    o.moe_wg_order = env_int("DSINFER_CUDA_MOE_WG_ORDER", -1);
    o.moe_wg_nt48 = env_int("DSINFER_CUDA_MOE_WG_NT48", 20);
    /* on by default since the thirty-first session (RESULTS runs 3 and 4: SX FP8 b64 -0.22 ms, b256 -0.67; ST2 b256 FP8
     * -0.08, BF16 -0.1) */
    o.moe_wg_sx = env_int("DSINFER_CUDA_MOE_WG_SX", 1);
    o.moe_wg_st2 = env_int("DSINFER_CUDA_MOE_WG_ST2", 1);
    /* opt-in: run 7 measured it faster, run 11 (three alternations) slower, and its kernel alone is 17% slower (ncu) */
    o.router_xs = env_int("DSINFER_CUDA_ROUTER_XS", 0);
    /* 2 K slices up to 128 tokens (RESULTS thirty-second session runs 1 and 3: FP8 b32 -0.07 .. -0.1 ms, b64 -0.05, b128
     * the same, b256 +0.05 .. +0.1 where 1024 blocks make more than one wave) */
    o.router_ks = env_int("DSINFER_CUDA_ROUTER_KS", 2);
    o.router_ks_max_m = env_int("DSINFER_CUDA_ROUTER_KS_MAX_M", 128);
    o.moe_wg_pipe = env_int("DSINFER_CUDA_MOE_WG_PIPE", 0);   /* opt-in: within the spread (twenty-sixth session run 2) */
    o.moe_half = env_int("DSINFER_CUDA_MOE_HALF", 0);         /* opt-in: no gain (twenty-sixth session run 2) */
    o.moe_dyn = env_int("DSINFER_CUDA_MOE_DYN", 2);           /* the same bits; V3 MoE layer at 4K: DRAM 1.38 -> 1.03x the
                                                                * weights, grouped GEMMs -15% (thirty-ninth session, H100) */
    o.moe_hist = env_int("DSINFER_CUDA_MOE_HIST", 0);
    o.moe_lab = env_int("DSINFER_CUDA_MOE_LAB", 0);   /* lab: wrong results */
    /* another rounding point (BF16 rows before the combine, NMSE 3e-8 .. 1.2e-6 against fp32 rows): 1 direct stores, 2
     * through shared memory and a bulk copy a row, the default (fortieth session, H100: V3 MoE layer at 4K down -15%, the
     * combine -42%, its prefill -4%; V2-Lite FP8 prefill 8K -5%) */
    o.moe_y_bf16 = env_int("DSINFER_CUDA_MOE_Y_BF16", 2);
    /* the same forms for gate / up's sums (BF16 before the SiLU kernel, as vLLM's and SGLang's FP8 MoE keep them; NMSE
     * 1.1e-4 against fp32 sums at V3, 2.7e-6 at V2-Lite, where a product's FP8 code moves a step): 2 the default since the
     * forty-second session (H100: V2-Lite FP8 prefill 8K -7.7%, the V3 MoE layer at 4K -1.2%) */
    o.moe_gu_bf16 = env_int("DSINFER_CUDA_MOE_GU_BF16", 2);
    o.moe_silu_epi = env_int("DSINFER_CUDA_MOE_SILU_EPI", 0);  /* the same bits; H200 6% slower (thirty-ninth session) */
    /* the same bits; RT_PROF: the routing tail -10 .. -25%; 2 (opt-in until measured): the choices by rank at E <= 64 */
    o.route_fast = env_int("DSINFER_CUDA_ROUTE_FAST", 1);
    /* opt-in, 1, 2 (the layer's tail) or 3 (and its attention); measured in the thirty-fourth session (RESULTS run 2): FP8
     * b1 the same at 1, +0.03 ms at 2, +0.24 at 3 (a grid barrier under the weight stream costs more than a launch) */
    o.moe1 = env_int("DSINFER_CUDA_MOE1", 0);
    o.moe1_pf = env_int("DSINFER_CUDA_MOE1_PF", 0);
    /* 1 the default since the forty-fifth session (H100: FP8 b1 -7.3%, BF16 -4.8% in two rotated rounds; the model test,
     * the goldens and the GPU suite with it on) */
    o.moeo = env_int("DSINFER_CUDA_MOEO", 1);
    o.moeo_strips = env_int("DSINFER_CUDA_MOEO_STRIPS", 0);   /* opt-in for its memory (RESULTS fifty-third session) */
    /* 1 the default since the fifty-ninth session (H100, V2-Lite b1 in two rounds: FP8 2.153 / 2.162 -> 2.067 / 2.069 ms,
     * BF16 2.743 -> 2.720; op test moeotc, the goldens and test_cuda_model with it on) */
    o.moeo_tc = env_int("DSINFER_CUDA_MOEO_TC", 1);
    o.router_norm = env_int("DSINFER_CUDA_ROUTER_NORM", 0) != 0;   /* opt-in (measured even with ROUTE_ZERO alone; =2's
                                                                     * folded form removed, fifty-fifth session) */
    o.route_zero = env_int("DSINFER_CUDA_ROUTE_ZERO", 1);   /* on since the forty-seventh session: FP8 b1 -0.036 ms (RESULTS run 3) */
    o.moeo_tail = env_int("DSINFER_CUDA_MOEO_TAIL", 0);   /* opt-in until measured (prepared in the forty-fifth session) */
    /* opt-in: FP8 b1 +0.11 ms at 1 (RESULTS, forty-eighth session, runs 1 .. 2); 2 / 3: the down piece earlier */
    o.rowo = env_int("DSINFER_CUDA_ROWO", 0);   /* opt-in: measured slower (RESULTS, forty-fifth session, runs 5 .. 11) */
    /* on from 65 tokens since the thirty-fourth session (RESULTS: FP8 b96 .. b256 -0.03 .. -0.16 ms in three rotated rounds,
     * b64 within the spread, b128 -0.02) */
    o.combine_norm = env_int("DSINFER_CUDA_COMBINE_NORM", 1);
    o.combine_norm_min_m = env_int("DSINFER_CUDA_COMBINE_NORM_MIN_M", 65);
    o.moe_duo = env_int("DSINFER_CUDA_MOE_DUO", 0);
    o.mla_fold = env_int("DSINFER_CUDA_MLA_FOLD", 0);   /* opt-in, measured slower (thirty-fourth session: FP8 b64 +0.25 ms) */
    o.l2_prefetch = env_int("DSINFER_CUDA_L2_PREFETCH", 0);
    o.l2_prefetch_max_m = env_int("DSINFER_CUDA_L2_PREFETCH_MAX_M", 8);
    /* on by default since the twelfth session's run 2 (FP8 batch 64 9.00 -> 8.54 ms with all four; RESULTS) */
    o.hfuse = env_int("DSINFER_CUDA_HFUSE", 2);
    o.mlp_fuse = env_int("DSINFER_CUDA_MLP_FUSE", 2);
    o.quant_warp = env_int("DSINFER_CUDA_QUANT_WARP", 1);
    /* on by default since the twentieth session's run 2 (FP8 b64 8.26 -> 8.12 ms, b1 / b8 -0.05 ms) */
    o.group3 = env_int("DSINFER_CUDA_GROUP3", 1);
    o.combine2 = env_int("DSINFER_CUDA_MOE_COMBINE2", -1);
    o.kvb_bf16 = env_int("DSINFER_CUDA_KVB_BF16", 1);
    o.qkv_fuse = env_int("DSINFER_CUDA_QKV_FUSE", 1);
    o.qkv_split = env_int("DSINFER_CUDA_QKV_SPLIT", 4);
    /* both on by default since the forty-ninth session (H100, V2-Lite b1: FP8 2.398 -> 2.296 ms, BF16 2.925 -> 2.818;
     * b2 .. b8 and a 4-layer V3 faster too; RESULTS runs 1 .. 3) */
    o.qkv_absorb = env_int("DSINFER_CUDA_QKV_ABSORB", 1);
    o.norm_fold = env_int("DSINFER_CUDA_NORM_FOLD", 1);   /* H100 FP8 b1 -0.035 ms, BF16 -0.07 (fifty-fourth session) */
    o.comb_uv = env_int("DSINFER_CUDA_COMB_UV", 1);
    o.qkv_split_parts = env_int("DSINFER_CUDA_QKV_SPLIT_PARTS", 0);
    o.router_fused = env_int("DSINFER_CUDA_ROUTER_FUSED", 1);
    /* from 9 tokens: at 1 and 8 the GEMV + routing kernel measured faster (twelfth session run 5: FP8 batch 1
     * 3.53 vs 3.61 ms, BF16 3.47 vs 3.57) */
    o.router_fused_min_m = env_int("DSINFER_CUDA_ROUTER_FUSED_MIN_M", GEMV_MAX_M + 1);
    o.fp8_gemm_min_m = env_int("DSINFER_CUDA_FP8_GEMM_MIN_M", 2);
    o.w8_shared_x = env_int("DSINFER_CUDA_W8_SHARED_X", 1);
    o.moe_tc_min_m = env_int("DSINFER_CUDA_MOE_TC_MIN_M", 0);   /* 0: by the experts' dtype (cuda_moe.cu) */
    o.combine_bf16 = env_int("DSINFER_CUDA_COMBINE_BF16", 1);
    o.router_fused_max_m = env_int("DSINFER_CUDA_ROUTER_FUSED_MAX_M", 256);
    o.router_tok = env_int("DSINFER_CUDA_ROUTER_TOK", 0);
    /* when on, where it was measured faster (RESULTS eleventh session run 2: batch 64, 128 +2%, 1 and 256 -1 to -2%) */
    o.shared_stream_min_m = env_int("DSINFER_CUDA_SHARED_STREAM_MIN_M", GEMV_MAX_M + 1);
    o.shared_stream_max_m = env_int("DSINFER_CUDA_SHARED_STREAM_MAX_M", 128);
    o.moe_shared_in = env_int("DSINFER_CUDA_MOE_SHARED_IN", 1);
    o.moe_shared_in_max_m = env_int("DSINFER_CUDA_MOE_SHARED_IN_MAX_M", 256);
    o.chain_fuse = env_int("DSINFER_CUDA_CHAIN_FUSE", 2);
    o.chain_tma_max_m = env_int("DSINFER_CUDA_CHAIN_TMA_MAX_M", 256);
    o.qb_fuse = env_int("DSINFER_CUDA_QB_FUSE", 1);
    return o;
}

static void cu_copy_bytes(ds_backend *be, void *dst, const void *src, size_t n) {
    (void)be;
    if (n) CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, cu_stream));
}

#define CUBLAS_WS_BYTES ((size_t)32 << 20)

ds_backend *ds_backend_cuda_new(const ds_config *cfg, char *err) {
    char why[256];
    if (!ds_cuda_available(why, sizeof why)) {
        ds_seterr(err, DS_ERR_BACKEND, "backend cuda: %s", why);
        return NULL;
    }
    ds_cuda_backend *cb = (ds_cuda_backend *)ds_xcalloc(1, sizeof(*cb));
    CUDA_CHECK(cudaSetDevice(0));
    if (cublasCreate(&cb->cublas) != CUBLAS_STATUS_SUCCESS) {
        free(cb);
        ds_seterr(err, DS_ERR_BACKEND, "backend cuda: cublasCreate failed");
        return NULL;
    }
    /* plain fp32 SGEMM: no TF32 (the CPU reference is fp32) */
    CUBLAS_CHECK(cublasSetMathMode(cb->cublas, CUBLAS_PEDANTIC_MATH));
    if (!cu_stream) CUDA_CHECK(cudaStreamCreate(&cu_stream));   /* blocking: orders with the legacy stream */
    CUBLAS_CHECK(cublasCreate(&cb->cublas_tc));
    CUDA_CHECK(cudaMalloc(&cb->cublas_ws, 2 * CUBLAS_WS_BYTES));   /* fixed: GEMMs can be captured */
    CUDA_CHECK(cudaMalloc(&cb->route_tickets, sizeof(unsigned) * CU_ROUTE_TICKETS));   /* the fused router's, zero */
    CUDA_CHECK(cudaMemset(cb->route_tickets, 0, sizeof(unsigned) * CU_ROUTE_TICKETS));
    CUDA_CHECK(cudaMalloc(&cb->mla_tickets, sizeof(unsigned) * CU_MLA_TICKETS));   /* the folded MLA combine's, zero */
    CUDA_CHECK(cudaMemset(cb->mla_tickets, 0, sizeof(unsigned) * CU_MLA_TICKETS));
    CUBLAS_CHECK(cublasSetStream(cb->cublas, cu_stream));
    CUBLAS_CHECK(cublasSetStream(cb->cublas_tc, cu_stream));
    CUBLAS_CHECK(cublasSetWorkspace(cb->cublas, cb->cublas_ws, CUBLAS_WS_BYTES));
    CUBLAS_CHECK(cublasSetWorkspace(cb->cublas_tc, (char *)cb->cublas_ws + CUBLAS_WS_BYTES, CUBLAS_WS_BYTES));
    cb->opt = cu_opts_read();
    CUDA_CHECK(cudaDeviceGetAttribute(&cb->n_sm, cudaDevAttrMultiProcessorCount, 0));
    cu_gemv_sms = cb->n_sm > 0 ? cb->n_sm : 132;
    cu_gemv_v2 = env_int("DSINFER_CUDA_GEMV2", 1);
    cu_fp8_fast = env_int("DSINFER_CUDA_FP8_FAST", 0);
    cu_gemv_f8c = env_int("DSINFER_CUDA_GEMV_F8C", 0);
    cu_gemv_t1_ks = env_int("DSINFER_CUDA_GEMV_T1_KS", 0);
    cu_rms_vec = env_int("DSINFER_CUDA_RMS_VEC", 1);
    cu_group_v2 = env_int("DSINFER_CUDA_GROUP2", 1);
    cu_pdl = env_int("DSINFER_CUDA_PDL", 0);
    cu_f8_pdl = env_int("DSINFER_CUDA_F8_PDL", 0);
    cu_dequant_vec = env_int("DSINFER_CUDA_DEQUANT_VEC", 1);
    cu_nvfp4_simt = env_int("DSINFER_CUDA_NVFP4_SIMT", 0);
    cu_moe_tg = env_int("DSINFER_CUDA_MOE_TG", 0);
    if (cu_moe_tg != 1 && cu_moe_tg != 2 && cu_moe_tg != 4) cu_moe_tg = 0;
    cu_pdl_prefetch = cu_pdl && env_int("DSINFER_CUDA_PDL_PREFETCH", 1);
    cu_l2ef = env_int("DSINFER_CUDA_L2EF", CU_L2EF_GEMV | CU_L2EF_MOEO);
    cu_absorb_v2 = env_int("DSINFER_CUDA_ABSORB2", 2);
    cu_absorb3_max_t = env_int("DSINFER_CUDA_ABSORB3_MAX_T", 8);
    cu_combine_v2 = env_int("DSINFER_CUDA_COMBINE2", 1);
    cu_route_v2 = env_int("DSINFER_CUDA_ROUTE2", 1);
    cu_router_clamp = env_int("DSINFER_CUDA_ROUTER_CLAMP", 1);
    cu_fa2 = env_int("DSINFER_CUDA_FA2", 1);
    cu_fa3 = env_int("DSINFER_CUDA_FA3", 2);
    cu_group_wide = env_int("DSINFER_CUDA_GROUP_WIDE", 1);
    cu_group_wide_min = env_int("DSINFER_CUDA_GROUP_WIDE_MIN", 1024);
    cu_mla_async = env_int("DSINFER_CUDA_MLA_ASYNC", 0);
    cu_mla_tc2 = env_int("DSINFER_CUDA_MLA_TC2", 1);
    cu_mla_tc2_fp8 = env_int("DSINFER_CUDA_MLA_TC2_FP8", 2);
    cu_mla_wg = env_int("DSINFER_CUDA_MLA_WG", 2);
    cu_mla_wg_tma = env_int("DSINFER_CUDA_MLA_WG_TMA", 1);
    cu_mla_qreg = env_int("DSINFER_CUDA_MLA_QREG", 36);
    cu_moe_tc2 = env_int("DSINFER_CUDA_MOE_TC2", 1);
    cu_moe_w8a8 = env_int("DSINFER_MOE_W8A8", 1);
    cu_moe_f8_cvt = env_int("DSINFER_CUDA_MOE_F8_CVT", 1);
    cu_fp8_own = env_int("DSINFER_CUDA_FP8_OWN", 2);
    cu_fp8_tma = env_int("DSINFER_CUDA_FP8_TMA", 1);
    cu_f8_tickets = env_int("DSINFER_CUDA_F8_TICKETS", 0);
    cu_f8_preload = env_int("DSINFER_CUDA_F8_PRELOAD", 0);
    cu_f8_split_kb = env_int("DSINFER_CUDA_F8_SPLIT_KB", 4);
    cu_f8_reduce_vec = env_int("DSINFER_CUDA_F8_REDUCE_VEC", 0);
    cu_f8_reduce2 = env_int("DSINFER_CUDA_F8_REDUCE2", 1);
    cu_mla_max_splits = env_int("DSINFER_CUDA_MLA_MAX_SPLITS", 64);
    if (cu_mla_max_splits < 1 || cu_mla_max_splits > 64) {
        fprintf(stderr, "dsinfer: DSINFER_CUDA_MLA_MAX_SPLITS=%d is outside 1 .. 64; using 64\n", cu_mla_max_splits);
        cu_mla_max_splits = 64;
    }
    cu_mla_slots = env_int("DSINFER_CUDA_MLA_SLOTS", 2);
    if (cu_mla_slots < 1 || cu_mla_slots > 16) {
        fprintf(stderr, "dsinfer: DSINFER_CUDA_MLA_SLOTS=%d is outside 1 .. 16; using 2\n", cu_mla_slots);
        cu_mla_slots = 2;
    }
    cu_f8_tma1 = env_int("DSINFER_CUDA_F8_TMA1", 1);
    cu_f8_tm_pref = env_int("DSINFER_CUDA_F8_TM_PREF", 1);
    cu_f8_tm_store = env_int("DSINFER_CUDA_F8_TM_STORE", 1);
    cu_f8_tm_lab = env_int("DSINFER_CUDA_F8_TM_LAB", 0);
    cu_f8_tm_ss = env_int("DSINFER_CUDA_F8_TM_SS", 0);
    if (cu_f8_tm_lab)
        fprintf(stderr, "dsinfer: DSINFER_CUDA_F8_TM_LAB=%d is a timing lab: the W8A8 GEMM's results from 512 rows are wrong\n",
                cu_f8_tm_lab);
    cu_f8_tm_store_min_m = env_int("DSINFER_CUDA_F8_TM_STORE_MIN_M", 512);
    cu_moe_wgmma = env_int("DSINFER_CUDA_MOE_WGMMA", 1);
    cu_moe_wg = env_int("DSINFER_CUDA_MOE_WG", 1);
    cu_moe_wg_nt = env_int("DSINFER_CUDA_MOE_WG_NT", 0);
    cu_moe_wg_bf16 = env_int("DSINFER_CUDA_MOE_WG_BF16", 1);
    cu_moe_wg_pref = env_int("DSINFER_CUDA_MOE_WG_PREF", 1);
    cu_moe_wg_lab = env_int("DSINFER_CUDA_MOE_WG_LAB", 0);
    cu_moe_wg_grid = env_int("DSINFER_CUDA_MOE_WG_GRID", 0);
    cu_moe_wg_pref_max_m = env_int("DSINFER_CUDA_MOE_WG_PREF_MAX_M", 128);
    cu_f8_wg_max_m = env_int("DSINFER_CUDA_FP8_WG_MAX_M", 0);
    cu_fp8_own_max_m = env_int("DSINFER_CUDA_FP8_OWN_MAX_M", cu_fp8_own == 2 ? 65535 : 256);
    cu_moe_tc2_st = env_int("DSINFER_CUDA_MOE_TC2_ST", 4);
    cu_moe_tc2_tok = env_int("DSINFER_CUDA_MOE_TC2_TOK", 0);
    if (cu_moe_tc2_tok != 32 && cu_moe_tc2_tok != 64) cu_moe_tc2_tok = 0;
    cu_moe_tc2_init();
    int half = cfg->qk_rope_head_dim / 2;
    float f[DS_MAX_ROPE_DIM / 2];
    for (int i = 0; i < half; i++) f[i] = (float)cfg->inv_freq[i];
    CUDA_CHECK(cudaMalloc(&cb->inv_freq, sizeof(float) * (size_t)(half > 0 ? half : 1)));
    if (half) CUDA_CHECK(cudaMemcpy(cb->inv_freq, f, sizeof(float) * (size_t)half, cudaMemcpyHostToDevice));
    ds_backend *be = &cb->base;
    be->name = "cuda";
    be->cfg = cfg;
    be->destroy = cu_destroy;
    be->alloc = cu_alloc;
    be->release = cu_release;
    be->fill_nan = cu_fill_nan;
    be->to_host = cu_to_host;
    be->from_host = ds_cuda_from_host;
    be->host_alloc = cu_host_alloc;
    be->host_free = cu_host_free;
    be->set_batch = cu_set_batch;
    be->embed = cu_embed;
    be->rmsnorm = cu_rmsnorm;
    be->add = cu_add;
    be->add_rmsnorm = cu_add_rmsnorm;
    be->moe_routed = cu_moe_routed;
    be->linear = cu_linear;
    be->linear2 = cu_linear2;
    be->rope = cu_rope;
    be->kv_store = cu_kv_store;
    be->qkv_finish = cu_qkv_finish;
    be->attn_in = cu_attn_in;
    be->normed_linear = cu_normed_linear;
    be->linear_add_rmsnorm = cu_linear_add_rmsnorm;
    be->attn_naive = cu_attn_naive;
    be->attn_absorbed = cu_attn_absorbed;
    be->mlp = cu_mlp;
    be->moe = cu_moe;
    be->moe_to_attn_in = cu_moe_to_attn_in;
    be->layer_tail1 = cu_layer_tail1;
    be->layer1 = cu_layer1;
    be->gather_rows = cu_gather_rows;
    be->combine_rows = cu_combine_rows;
    be->quant_rows_fp8 = cu_quant_rows_fp8;
    be->dequant_rows_fp8 = cu_dequant_rows_fp8;
    be->prepare_weights = cu_prepare_weights;
    be->run_graph = cu_graph_run;
    be->copy_bytes = cu_copy_bytes;
    if (env_int("DSINFER_CUDA_OP_TIMES", 0)) cu_optimes_install(cb);   /* times ops one by one: no second stream */
    else if (cb->opt.shared_stream && cfg->n_shared_experts) cu_side_init(cb);
    if (cb->opt.l2_prefetch) {
        if (cb->opt.l2_prefetch == 1) cu_prefetch_init(cb);
        be->prefetch_layer = cu_prefetch_layer;
    }
    return be;
}
