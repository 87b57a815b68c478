/* CUDA MLA attention over the paged latent cache, both forms (spec 6.2, 6.3), fp32 throughout.
 *
 * Naive (prefill): per sequence, the context's latents and k_pe are gathered out of the pages, K_nope
 * and V of every context token are decompressed with one kv_b GEMM, then one block per (new token,
 * head) runs causal softmax attention with an online (chunked) softmax.
 * Absorbed (decode): one block per (token, head): q_lat = W_UK^T q_nope, scores over the cached
 * [c_kv ; k_pe] rows read straight from the pages, o_lat accumulated with an online softmax, then
 * o = W_UV o_lat. kv_b is read in its stored dtype.
 * The softmax is computed chunk by chunk (running max and sum), equal to the CPU's exact softmax up to
 * fp32 rounding; a NaN anywhere in the context's rows propagates to the output. */
#include <math.h>

#include "backend/cuda/cuda.h"

#define NAIVE_THREADS 128
#define NAIVE_CHUNK 128
#define NAIVE_MAX_DV (4 * NAIVE_THREADS)
#define ABS_THREADS 256
#define ABS_CHUNK 64
#define ABS_MAX_C (4 * ABS_THREADS)

/* grid (L): lat[p, 0:C] and kpe[p, 0:dr] of context token p of one sequence. */
__global__ void gather_ctx_kernel(float *lat, float *kpe, const float *cache, const int32_t *pt_row, int page_size,
                                  int C, int dr) {
    int p = blockIdx.x;
    const float *row = cache + ((size_t)pt_row[p / page_size] * page_size + (size_t)(p % page_size)) * (size_t)(C + dr);
    for (int i = threadIdx.x; i < C + dr; i += blockDim.x) {
        if (i < C) lat[(size_t)p * C + i] = row[i];
        else kpe[(size_t)p * dr + (i - C)] = row[i];
    }
}

/* grid (T, H), block NAIVE_THREADS; dynamic smem (dqk + NAIVE_CHUNK) floats. kvb [L, H*(dn+dv)]. */
__global__ void naive_attn_kernel(float *out, const float *q, const float *kvb, const float *kpe,
                                  const int32_t *positions, int t0, int H, int dn, int dr, int dv, float scale) {
    extern __shared__ float sm[];
    int m = t0 + blockIdx.x, h = blockIdx.y, dqk = dn + dr, hw = dn + dv;
    float *qh = sm, *p = sm + dqk;
    int n_ctx = positions[m] + 1;
    for (int i = threadIdx.x; i < dqk; i += blockDim.x) qh[i] = q[(size_t)m * H * dqk + (size_t)h * dqk + i];
    __syncthreads();
    float acc[NAIVE_MAX_DV / NAIVE_THREADS];
#pragma unroll
    for (int i = 0; i < NAIVE_MAX_DV / NAIVE_THREADS; i++) acc[i] = 0.0f;
    float run_max = -INFINITY, run_sum = 0.0f;
    for (int c0 = 0; c0 < n_ctx; c0 += NAIVE_CHUNK) {
        int nc = n_ctx - c0 < NAIVE_CHUNK ? n_ctx - c0 : NAIVE_CHUNK;
        for (int j = threadIdx.x; j < nc; j += blockDim.x) {
            const float *kn = kvb + (size_t)(c0 + j) * H * hw + (size_t)h * hw;
            const float *kp = kpe + (size_t)(c0 + j) * dr;
            float a = 0.0f, b = 0.0f;
            for (int d = 0; d < dn; d++) a += qh[d] * kn[d];
            for (int d = 0; d < dr; d++) b += qh[dn + d] * kp[d];
            p[j] = (a + b) * scale;
        }
        __syncthreads();
        float cmax = -INFINITY;
        for (int j = 0; j < nc; j++) cmax = fmaxf(cmax, p[j]);
        float new_max = fmaxf(run_max, cmax), corr = expf(run_max - new_max);
        __syncthreads();
        for (int j = threadIdx.x; j < nc; j += blockDim.x) p[j] = expf(p[j] - new_max);
        __syncthreads();
        float csum = 0.0f;
        for (int j = 0; j < nc; j++) csum += p[j];
        run_sum = run_sum * corr + csum;
        run_max = new_max;
#pragma unroll
        for (int i = 0; i < NAIVE_MAX_DV / NAIVE_THREADS; i++) {
            int d = threadIdx.x + i * NAIVE_THREADS;
            if (d >= dv) break;
            float a = acc[i] * corr;
            for (int j = 0; j < nc; j++) a += p[j] * kvb[(size_t)(c0 + j) * H * hw + (size_t)h * hw + dn + d];
            acc[i] = a;
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < NAIVE_MAX_DV / NAIVE_THREADS; i++) {
        int d = threadIdx.x + i * NAIVE_THREADS;
        if (d < dv) out[(size_t)m * H * dv + (size_t)h * dv + d] = acc[i] / run_sum;
    }
}

void cu_attn_naive(ds_backend *be, float *out, const float *q, const void *cache_v, const ds_weight *kv_b,
                   const int *seqs, int n_seqs) {
    const float *cache = (const float *)cache_v;   /* fp32 cache (FP8 KV is not on the cuda backend yet) */
    ds_cuda_backend *cb = cu_of(be);
    const ds_config *c = be->cfg;
    const ds_batch_meta *b = &cb->b;
    int H = c->num_heads, C = c->kv_lora_rank, dr = c->qk_rope_head_dim, dn = c->qk_nope_head_dim;
    int dv = c->v_head_dim, hw = dn + dv;
    DS_CHECK(dv <= NAIVE_MAX_DV);
    for (int i = 0; i < n_seqs; i++) {
        int s = seqs[i], L = b->seq_ctx[s], t0 = b->seq_start[s], T = b->seq_start[s + 1] - t0;
        if (T <= 0 || L <= 0) continue;
        size_t n_lat = (size_t)L * C, n_kpe = (size_t)L * dr, n_kvb = (size_t)L * H * hw;
        float *lat = (float *)cu_ws_get(&cb->ws_attn, (n_lat + n_kpe + n_kvb) * sizeof(float));
        float *kpe = lat + n_lat, *kvb = kpe + n_kpe;
        gather_ctx_kernel<<<L, 128>>>(lat, kpe, cache, cb->d_page_table + (size_t)s * b->pt_stride, b->page_size, C, dr);
        CUDA_LAUNCH_CHECK();
        cu_linear(be, kvb, lat, kv_b, L);
        dim3 grid(T, H);
        size_t smem = sizeof(float) * (size_t)(dn + dr + NAIVE_CHUNK);
        naive_attn_kernel<<<grid, NAIVE_THREADS, smem>>>(out, q, kvb, kpe, cb->d_positions, t0, H, dn, dr, dv,
                                                         c->softmax_scale);
        CUDA_LAUNCH_CHECK();
    }
}

/* grid (T, H), block ABS_THREADS; dynamic smem (dn + dr + 2C + ABS_CHUNK) floats. */
__global__ void absorbed_attn_kernel(float *out, const float *q, const float *cache, cu_wview kvb,
                                     const int32_t *positions, const int32_t *pt_row, int page_size, int t0, int H,
                                     int C, int dn, int dr, int dv, float scale) {
    extern __shared__ float sm[];
    int m = t0 + blockIdx.x, h = blockIdx.y, dqk = dn + dr, hw = dn + dv, w = C + dr;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, n_warps = blockDim.x >> 5;
    float *qn = sm, *qpe = qn + dn, *q_lat = qpe + dr, *o_lat = q_lat + C, *p = o_lat + C;
    int n_ctx = positions[m] + 1;
    const float *qh = q + (size_t)m * H * dqk + (size_t)h * dqk;
    for (int i = threadIdx.x; i < dqk; i += blockDim.x) {
        if (i < dn) qn[i] = qh[i];
        else qpe[i - dn] = qh[i];
    }
    __syncthreads();
    for (int k = threadIdx.x; k < C; k += blockDim.x) {   /* q_lat = W_UK^T q_nope */
        float a = 0.0f;
        for (int d = 0; d < dn; d++) a += qn[d] * cu_w(kvb, h * hw + d, k);
        q_lat[k] = a;
    }
    __syncthreads();
    float acc[ABS_MAX_C / ABS_THREADS];
#pragma unroll
    for (int i = 0; i < ABS_MAX_C / ABS_THREADS; i++) acc[i] = 0.0f;
    float run_max = -INFINITY, run_sum = 0.0f;
    for (int c0 = 0; c0 < n_ctx; c0 += ABS_CHUNK) {
        int nc = n_ctx - c0 < ABS_CHUNK ? n_ctx - c0 : ABS_CHUNK;
        for (int j = warp; j < nc; j += n_warps) {
            int pos = c0 + j;
            const float *row = cache + ((size_t)pt_row[pos / page_size] * page_size + (size_t)(pos % page_size)) * w;
            float a = 0.0f;
            for (int k = lane; k < C; k += 32) a += q_lat[k] * row[k];
            for (int k = lane; k < dr; k += 32) a += qpe[k] * row[C + k];
            a = cu_warp_sum(a);
            if (lane == 0) p[j] = a * scale;
        }
        __syncthreads();
        float cmax = -INFINITY;
        for (int j = 0; j < nc; j++) cmax = fmaxf(cmax, p[j]);
        float new_max = fmaxf(run_max, cmax), corr = expf(run_max - new_max);
        __syncthreads();
        for (int j = threadIdx.x; j < nc; j += blockDim.x) p[j] = expf(p[j] - new_max);
        __syncthreads();
        float csum = 0.0f;
        for (int j = 0; j < nc; j++) csum += p[j];
        run_sum = run_sum * corr + csum;
        run_max = new_max;
#pragma unroll
        for (int i = 0; i < ABS_MAX_C / ABS_THREADS; i++) {
            int k = threadIdx.x + i * ABS_THREADS;
            if (k >= C) break;
            float a = acc[i] * corr;
            for (int j = 0; j < nc; j++) {
                int pos = c0 + j;
                a += p[j] * cache[((size_t)pt_row[pos / page_size] * page_size + (size_t)(pos % page_size)) * w + k];
            }
            acc[i] = a;
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < ABS_MAX_C / ABS_THREADS; i++) {
        int k = threadIdx.x + i * ABS_THREADS;
        if (k < C) o_lat[k] = acc[i] / run_sum;
    }
    __syncthreads();
    for (int d = warp; d < dv; d += n_warps) {   /* o = W_UV o_lat */
        float a = 0.0f;
        for (int k = lane; k < C; k += 32) a += cu_w(kvb, h * hw + dn + d, k) * o_lat[k];
        a = cu_warp_sum(a);
        if (lane == 0) out[(size_t)m * H * dv + (size_t)h * dv + d] = a;
    }
}

void cu_attn_absorbed(ds_backend *be, float *out, const float *q, const void *cache_v, const ds_weight *kv_b,
                      const int *seqs, int n_seqs) {
    const float *cache = (const float *)cache_v;   /* fp32 cache (FP8 KV is not on the cuda backend yet) */
    ds_cuda_backend *cb = cu_of(be);
    const ds_config *c = be->cfg;
    const ds_batch_meta *b = &cb->b;
    int H = c->num_heads, C = c->kv_lora_rank, dr = c->qk_rope_head_dim, dn = c->qk_nope_head_dim;
    DS_CHECK(C <= ABS_MAX_C);
    size_t smem = sizeof(float) * (size_t)(dn + dr + 2 * C + ABS_CHUNK);
    for (int i = 0; i < n_seqs; i++) {
        int s = seqs[i], t0 = b->seq_start[s], T = b->seq_start[s + 1] - t0;
        if (T <= 0) continue;
        dim3 grid(T, H);
        absorbed_attn_kernel<<<grid, ABS_THREADS, smem>>>(out, q, cache, cu_view(kv_b), cb->d_positions,
                                                          cb->d_page_table + (size_t)s * b->pt_stride, b->page_size,
                                                          t0, H, C, dn, dr, c->v_head_dim, c->softmax_scale);
        CUDA_LAUNCH_CHECK();
    }
}
