/* CUDA MLA attention over the paged latent cache, both forms (spec 6.2, 6.3), fp32 throughout.
 *
 * Naive (prefill): per sequence, the context's latents and k_pe are gathered out of the pages, K_nope
 * and V of every context token are decompressed with one kv_b GEMM, then one block per (new token,
 * head) runs causal softmax attention with an online (chunked) softmax.
 * Absorbed (decode): one block per (token, head): q_lat = W_UK^T q_nope, scores over the cached
 * [c_kv ; k_pe] rows read straight from the pages, o_lat accumulated with an online softmax, then
 * o = W_UV o_lat. kv_b is read in its stored dtype.
 * The softmax is computed chunk by chunk (running max and sum), equal to the CPU's exact softmax up to
 * fp32 rounding; a NaN anywhere in the context's rows propagates to the output.
 * The cache is fp32, or the FP8 or BF16 layout (cfg->kv_fp8 / kv_bf16; cuda.h cu_kv_at): every reader widens an
 * entry exactly as the CPU does, so both backends attend over the same fp32 values. */
#include <math.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_absorb.h"

#define NAIVE_THREADS 128
#define NAIVE_CHUNK 128
#define NAIVE_MAX_DV (4 * NAIVE_THREADS)
#define ABS_THREADS 256
#define ABS_CHUNK 64
#define ABS_MAX_C (4 * ABS_THREADS)

/* grid (L): lat[p, 0:C] and kpe[p, 0:dr] of context token p of one sequence; entries tb bytes. */
__global__ void gather_ctx_kernel(float *lat, float *kpe, const unsigned char *cache, const int32_t *pt_row,
                                  int page_size, int C, int dr, int fp8, size_t tb) {
    int p = blockIdx.x;
    const unsigned char *e = cache + ((size_t)pt_row[p / page_size] * page_size + (size_t)(p % page_size)) * tb;
    for (int i = threadIdx.x; i < C + dr; i += blockDim.x) {
        float v = cu_kv_at(e, fp8, C, i);
        if (i < C) lat[(size_t)p * C + i] = v;
        else kpe[(size_t)p * dr + (i - C)] = v;
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
    const unsigned char *cache = (const unsigned char *)cache_v;
    ds_cuda_backend *cb = cu_of(be);
    const ds_config *c = be->cfg;
    const ds_batch_meta *b = &cb->b;
    int H = c->num_heads, C = c->kv_lora_rank, dr = c->qk_rope_head_dim, dn = c->qk_nope_head_dim;
    int dv = c->v_head_dim, hw = dn + dv;
    size_t tb = ds_kv_token_bytes(c);
    DS_CHECK(dv <= NAIVE_MAX_DV);
    for (int i = 0; i < n_seqs; i++) {
        int s = seqs[i], L = b->seq_ctx[s], t0 = b->seq_start[s], T = b->seq_start[s + 1] - t0;
        if (T <= 0 || L <= 0) continue;
        size_t n_lat = (size_t)L * C, n_kpe = (size_t)L * dr, n_kvb = (size_t)L * H * hw;
        size_t n16 = (n_kvb + n_kpe + 16) / 2 + 8;   /* floats holding the BF16 copies of kvb and kpe (FA v2) */
        float *lat = (float *)cu_ws_get(&cb->ws_attn, (n_lat + n_kpe + n_kvb + n16) * sizeof(float));
        float *kpe = lat + n_lat, *kvb = kpe + n_kpe;
        __nv_bfloat16 *kvb16 = (__nv_bfloat16 *)(((uintptr_t)(kvb + n_kvb) + 15) & ~(uintptr_t)15);
        __nv_bfloat16 *kpe16 = (__nv_bfloat16 *)(((uintptr_t)(kvb16 + n_kvb) + 15) & ~(uintptr_t)15);
        gather_ctx_kernel<<<L, 128, 0, cu_stream>>>(lat, kpe, cache, cb->d_page_table + (size_t)s * b->pt_stride, b->page_size, C,
                                                    dr, cu_kv_layout(c), tb);
        CUDA_LAUNCH_CHECK();
        cu_linear(be, kvb, lat, kv_b, L);
        if (cb->opt.attn_tc && cu_fa_tc_fits(c) && ((uintptr_t)q & 15) == 0) {
            if (cu_fa2) cu_fa_prefill2_tc(out, q, kvb, kpe, kvb16, kpe16, cb->d_positions, t0, T, L, H, c->softmax_scale);
            else cu_fa_prefill_tc(out, q, kvb, kpe, cb->d_positions, t0, T, H, c->softmax_scale);
            continue;
        }
        dim3 grid(T, H);
        size_t smem = sizeof(float) * (size_t)(dn + dr + NAIVE_CHUNK);
        naive_attn_kernel<<<grid, NAIVE_THREADS, smem, cu_stream>>>(out, q, kvb, kpe, cb->d_positions, t0, H, dn, dr, dv,
                                                         c->softmax_scale);
        CUDA_LAUNCH_CHECK();
    }
}

/* grid (T, H), block ABS_THREADS; dynamic smem (dn + dr + 2C + ABS_CHUNK) floats. */
__global__ void absorbed_attn_kernel(float *out, const float *q, const unsigned char *cache, cu_wview kvb,
                                     const int32_t *positions, const int32_t *pt_row, int page_size, int t0, int H,
                                     int C, int dn, int dr, int dv, float scale, int fp8, size_t tb) {
    extern __shared__ float sm[];
    int m = t0 + blockIdx.x, h = blockIdx.y, dqk = dn + dr, hw = dn + dv;
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
            const unsigned char *row = cache + ((size_t)pt_row[pos / page_size] * page_size + (size_t)(pos % page_size)) * tb;
            float a = 0.0f;
            for (int k = lane; k < C; k += 32) a += q_lat[k] * cu_kv_at(row, fp8, C, k);
            for (int k = lane; k < dr; k += 32) a += qpe[k] * cu_kv_at(row, fp8, C, C + k);
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
                a += p[j] * cu_kv_at(cache + ((size_t)pt_row[pos / page_size] * page_size + (size_t)(pos % page_size)) * tb,
                                     fp8, C, k);
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

/* ---- fused absorbed decode (one launch for all tokens) ------------------------------------------------
 * Four launches per layer whatever the batch: (1) q_lat = W_UK^T q_nope for every (token, head); (2) the
 * attention core, grid (token, KV split, head group of 16): all heads of a group share one pass over the
 * token's latent cache rows (staged 32 rows at a time in shared memory), scores and an online softmax per
 * head, o_lat partials per split (blocks ordered head group fastest); (3) the splits combined (log-sum-exp); (4) o = W_UV o_lat as a grouped
 * GEMV over the heads. fp32 throughout like the CPU. The token list is NULL when every token of the batch
 * is attended here (decode), so nothing depends on the host between steps (CUDA graphs). */
#define FA_THREADS 256
#define FA_HG 16          /* heads per block */
#define FA_CHUNK 32       /* KV rows per shared-memory stage */
#define FA_MAX_C 512      /* C <= 2 * FA_THREADS */

/* grid (H, ceil(T / 8)), block 128: qlat[i, h, k] = sum_d W[h*hw + d, k] q[m_i, h*dqk + d]. */
__global__ void absorb_q_kernel(float *qlat, const float *q, cu_wview kvb, const int32_t *tok, int T, int H, int C,
                                int dn, int dqk, int hw) {
    __shared__ float qs[8][256];
    int h = blockIdx.x, i0 = blockIdx.y * 8, nt = T - i0 < 8 ? T - i0 : 8;
    for (int t = 0; t < nt; t++) {
        int m = tok ? tok[i0 + t] : i0 + t;
        for (int d = threadIdx.x; d < dn; d += blockDim.x) qs[t][d] = q[(size_t)m * H * dqk + (size_t)h * dqk + d];
    }
    __syncthreads();
    for (int k = threadIdx.x; k < C; k += blockDim.x) {
        float a[8];
#pragma unroll
        for (int t = 0; t < 8; t++) a[t] = 0.0f;
        for (int d = 0; d < dn; d++) {
            float wv = cu_w(kvb, h * hw + d, k);
#pragma unroll
            for (int t = 0; t < 8; t++) a[t] += qs[t][d] * wv;
        }
        for (int t = 0; t < nt; t++) qlat[((size_t)(i0 + t) * H + h) * C + k] = a[t];
    }
}

/* The same product, latency-bound no more: grid (H, ceil(C / 256), ceil(T / AQ_TG)), block 256 = 8 warps.
 * Warp w takes rows d = w, w + 8, ... of head h's W_UK block, lane l 8 adjacent columns (one 16-byte load
 * of BF16, 8 bytes of FP8 with its block scale), so a lane has dn / 8 independent loads in flight and a
 * warp reads 512 contiguous bytes per row; the 8 warps' partial sums meet in shared memory. Needs C % 8 == 0
 * (else the generic loads). Default on; DSINFER_CUDA_ABSORB2=0 selects absorb_q_kernel. */
#define AQ_TG 4
#define AQ_U 16   /* weight rows a lane loads at once */
__global__ void __launch_bounds__(256) absorb_q_v2_kernel(float *qlat, const float *q, cu_wview kvb, const int32_t *tok,
                                                          int T, int H, int C, int dn, int dqk, int hw, int prefetch) {
    __shared__ float qs[AQ_TG][256];
    __shared__ float red[8][AQ_TG][256];
    int h = blockIdx.x, k0 = blockIdx.y * 256, i0 = blockIdx.z * AQ_TG, nt = T - i0 < AQ_TG ? T - i0 : AQ_TG;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    cu_pdl_trigger();
    if (prefetch) {   /* W_UK rows of head h, this block's columns, towards L2 while the previous kernel runs */
        size_t eb = cu_row_bytes(kvb) / (size_t)C, seg = (size_t)(C - k0 < 256 ? C - k0 : 256) * eb;
        for (int d = warp; eb && d < dn; d += 8)
            cu_prefetch_l2((const char *)kvb.data + (((size_t)h * hw + d) * C + k0) * eb, seg, lane, 32);
    }
    cu_pdl_wait();
    for (int x = threadIdx.x; x < AQ_TG * 256; x += 256) {
        int t = x / 256, d = x % 256;
        float v = 0.0f;
        if (t < nt && d < dn) v = q[(size_t)(tok ? tok[i0 + t] : i0 + t) * H * dqk + (size_t)h * dqk + d];
        qs[t][d] = v;
    }
    __syncthreads();
    float a[AQ_TG][8];
#pragma unroll
    for (int t = 0; t < AQ_TG; t++)
#pragma unroll
        for (int c = 0; c < 8; c++) a[t][c] = 0.0f;
    int kc = k0 + lane * 8;   /* this lane's first column */
    bool vec = (C & 7) == 0 && (kvb.dtype == DS_DTYPE_BF16 || kvb.dtype == DS_DTYPE_F8_E4M3);
    bool f8 = kvb.dtype == DS_DTYPE_F8_E4M3;
    if (kc < C) {
        /* AQ_U rows (d, d + 8, ...) loaded before any is used: AQ_U loads in flight per lane (dn = 128:
         * all 16 of a warp's rows in one batch) */
        for (int d0 = warp; d0 < dn; d0 += 8 * AQ_U) {
            uint4 raw[AQ_U];
            float sc[AQ_U];
            if (vec) {
#pragma unroll
                for (int u = 0; u < AQ_U; u++) {
                    int d = d0 + 8 * u;
                    raw[u] = make_uint4(0, 0, 0, 0);
                    sc[u] = 0.0f;
                    if (d >= dn) continue;
                    size_t r = (size_t)h * hw + d;
                    if (!f8) {
                        raw[u] = __ldg((const uint4 *)((const __nv_bfloat16 *)kvb.data + r * C + kc));
                    } else {
                        uint2 v2 = __ldg((const uint2 *)((const uint8_t *)kvb.data + r * C + kc));
                        raw[u].x = v2.x;
                        raw[u].y = v2.y;
                        sc[u] = kvb.scale ? kvb.scale[(r >> 7) * (size_t)kvb.scale_cols + (size_t)(kc >> 7)] : 1.0f;
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < AQ_U; u++) {
                int d = d0 + 8 * u;
                if (d >= dn) break;
                size_t r = (size_t)h * hw + d;
                float wv[8];
                if (vec && !f8) {
                    cu_bf16x8(raw[u], wv);
                } else if (vec) {
                    cu_fp8x4(raw[u].x, sc[u], wv);
                    cu_fp8x4(raw[u].y, sc[u], wv + 4);
                } else {
#pragma unroll
                    for (int c = 0; c < 8; c++) wv[c] = kc + c < C ? cu_w(kvb, (int)r, kc + c) : 0.0f;
                }
#pragma unroll
                for (int t = 0; t < AQ_TG; t++) {
                    float qv = qs[t][d];
#pragma unroll
                    for (int c = 0; c < 8; c++) a[t][c] += qv * wv[c];
                }
            }
        }
    }
    /* this block's 256 columns: red[warp][t][lane * 8 + c] */
#pragma unroll
    for (int t = 0; t < AQ_TG; t++)
#pragma unroll
        for (int c = 0; c < 8; c++) red[warp][t][lane * 8 + c] = a[t][c];
    __syncthreads();
    for (int x = threadIdx.x; x < AQ_TG * 256; x += 256) {
        int t = x / 256, c = x % 256;
        if (t >= nt || k0 + c >= C) continue;
        float v = 0.0f;
#pragma unroll
        for (int w = 0; w < 8; w++) v += red[w][t][c];
        qlat[((size_t)(i0 + t) * H + h) * C + k0 + c] = v;
    }
}
/* v3 for 1 .. 8 tokens (decode batches 1 .. 8; DSINFER_CUDA_ABSORB2=2, the default; FP8 b1 3.43 -> 3.28 ms, b2
 * 3.93 -> 3.63, b4 4.78 -> 4.49, b8 6.19 -> 6.00; BF16 b1 3.37 -> 3.23, RESULTS fifteenth session runs 10, 12): v2 runs 16 x 2 blocks at V2-Lite's 16
 * heads (9.8 us a layer for 1 MB at batch 1, ncu fourteenth session: one SM in four busy, each with a long serial
 * chain: q to shared memory, a barrier, then the loads). Here a block (128 threads) takes 64 columns of one head:
 * 128 blocks at 16 heads. Thread x reads 16-byte chunk x % CPR of rows x / CPR + RPP u (u < 128 / RPP), and its q
 * values straight from global memory, every load issued before any is used; the RPP row groups' partial sums meet
 * in shared memory. Needs C % 64 == 0, dn <= 128 and a BF16 or FP8 (block-scaled) kv_b. (Its body is cuda_absorb.h's
 * absorb_q_v3_cols, shared with qkv_absorb_kernel.) */
template <int EB>   /* bytes an element: 1 FP8, 2 BF16 */
__global__ void __launch_bounds__(128) absorb_q_v3_kernel(float *qlat, const float *q, cu_wview kvb, const int32_t *tok,
                                                          int T, int H, int C, int dn, int dqk, int hw) {
    __shared__ float red[AQ3_RPP(EB)][2][AQ3_COLS];
    cu_pdl_trigger();
    cu_pdl_wait();
    absorb_q_v3_cols<EB>(red, qlat, q, kvb, tok, T, H, C, dn, dqk, hw, blockIdx.x, blockIdx.y * AQ3_COLS, blockIdx.z * 2,
                         threadIdx.x);
}

int cu_absorb_v2 = 2;   /* DSINFER_CUDA_ABSORB2 (read at backend creation): 2 (default since the fifteenth session) v3 for 1
                         * to 8 tokens (DSINFER_CUDA_ABSORB3_MAX_T), else v2; 1 v2; 0 absorb_q_kernel */
int cu_absorb3_max_t = 8;   /* DSINFER_CUDA_ABSORB3_MAX_T (backend creation): the most tokens v3 takes (a block pair of
                             * tokens each; above, v2 or the batched GEMMs); 8 since run 12 of the fifteenth session */


__global__ void __launch_bounds__(FA_THREADS) mla_decode_kernel(fa_params p) {
    extern __shared__ float sm[];
    const int W = p.C + p.dr, QS = (W + 3) & ~3, KS = W + 1;
    float *Qs = sm, *Ks = Qs + FA_HG * QS, *P = Ks + FA_CHUNK * KS, *st = P + FA_CHUNK * FA_HG;
    float *run_max = st, *run_sum = st + FA_HG, *corr = st + 2 * FA_HG;
    /* flat grid, head group fastest: the head groups of one (token, split) read the same cache rows close
     * in time, so with many heads (V3: 8 groups) all but the first read hit L2 */
    int HGn = (p.H + FA_HG - 1) / FA_HG, bx = blockIdx.x;
    int h0 = (bx % HGn) * FA_HG, split = (bx / HGn) % p.n_splits, i = bx / HGn / p.n_splits;
    int nh = p.H - h0 < FA_HG ? p.H - h0 : FA_HG;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int m = p.tok ? p.tok[i] : i, s = p.tok_seq[m], ctx = p.positions[m] + 1;
    const int32_t *pt = p.page_table + (size_t)s * p.pt_stride;
    int n_chunks = (ctx + FA_CHUNK - 1) / FA_CHUNK, per = (n_chunks + p.n_splits - 1) / p.n_splits;
    int c_begin = split * per * FA_CHUNK, c_end = min(ctx, (split + 1) * per * FA_CHUNK);
    for (int x = threadIdx.x; x < FA_HG * QS; x += FA_THREADS) {
        int hh = x / QS, k = x % QS;
        float v = 0.0f;
        if (hh < nh && k < p.C) v = p.qlat[((size_t)i * p.H + h0 + hh) * p.C + k];
        else if (hh < nh && k < W) v = p.q[(size_t)m * p.H * p.dqk + (size_t)(h0 + hh) * p.dqk + p.dn + (k - p.C)];
        Qs[x] = v;
    }
    if (threadIdx.x < FA_HG) {
        run_max[threadIdx.x] = -INFINITY;
        run_sum[threadIdx.x] = 0.0f;
    }
    float acc[2][FA_HG];
#pragma unroll
    for (int a = 0; a < 2; a++)
#pragma unroll
        for (int hh = 0; hh < FA_HG; hh++) acc[a][hh] = 0.0f;
    const int c0 = threadIdx.x, c1 = threadIdx.x + FA_THREADS;
    for (int base = c_begin; base < c_end; base += FA_CHUNK) {
        int nc = c_end - base < FA_CHUNK ? c_end - base : FA_CHUNK;
        __syncthreads();   /* the previous chunk's readers are done; Qs/stats written */
        for (int j = warp; j < nc; j += FA_THREADS / 32) {
            int pos = base + j;
            const unsigned char *e = p.cache + ((size_t)pt[pos / p.page_size] * p.page_size + (size_t)(pos % p.page_size)) * p.tb;
            const float *row = (const float *)(const void *)e;
            float *dst = Ks + j * KS;
            if (p.kv_fp8 && p.fp8_vec) {
                /* 16-byte loads: 16 e4m3 codes (one 128-block's scale) or 8 bf16 k_pe values per lane and
                 * step, decoded with the same conversions as cu_kv_at (so the same fp32 values) */
                const int nb = (p.C + 127) >> 7;
                for (int k = lane * 16; k < p.C; k += 32 * 16) {
                    uint4 u = __ldg((const uint4 *)(e + k));
                    float sc = __ldg((const float *)(e + p.C) + (k >> 7));
                    const uint32_t uu[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
                    for (int q = 0; q < 4; q++)
#pragma unroll
                        for (int b = 0; b < 4; b++) dst[k + 4 * q + b] = cu_fp8_to_f32((unsigned char)(uu[q] >> (8 * b))) * sc;
                }
                const unsigned char *pe = e + p.C + 4 * nb;
                for (int k = lane * 8; k < p.dr; k += 32 * 8) {
                    uint4 u = __ldg((const uint4 *)(pe + 2 * k));
                    const uint32_t uu[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
                    for (int q = 0; q < 4; q++) {
                        dst[p.C + k + 2 * q] = __uint_as_float(uu[q] << 16);
                        dst[p.C + k + 2 * q + 1] = __uint_as_float(uu[q] & 0xffff0000u);
                    }
                }
            } else if (p.kv_layout != CU_KV_F32) {
                for (int k = lane; k < W; k += 32) dst[k] = cu_kv_at(e, p.kv_layout, p.C, k);
            } else if ((W & 3) == 0) {
                for (int k = lane * 4; k < W; k += 128) {
                    float4 v = __ldg((const float4 *)(row + k));
                    dst[k] = v.x; dst[k + 1] = v.y; dst[k + 2] = v.z; dst[k + 3] = v.w;
                }
            } else {
                for (int k = lane; k < W; k += 32) dst[k] = row[k];
            }
        }
        __syncthreads();
        /* scores: warp w -> heads 2w, 2w+1; lane -> row j */
        {
            int ha = 2 * warp, hb = 2 * warp + 1, j = lane;
            float sa = 0.0f, sb = 0.0f;
            if (j < nc) {
                const float *kr = Ks + j * KS, *qa = Qs + ha * QS, *qb = Qs + hb * QS;
                int k = 0;
                for (; k + 4 <= W; k += 4) {
                    float4 a4 = *(const float4 *)(qa + k), b4 = *(const float4 *)(qb + k);
                    float k0 = kr[k], k1 = kr[k + 1], k2 = kr[k + 2], k3 = kr[k + 3];
                    sa += a4.x * k0 + a4.y * k1 + a4.z * k2 + a4.w * k3;
                    sb += b4.x * k0 + b4.y * k1 + b4.z * k2 + b4.w * k3;
                }
                for (; k < W; k++) {
                    sa += qa[k] * kr[k];
                    sb += qb[k] * kr[k];
                }
            }
            /* online softmax for heads ha, hb over this chunk */
            float sv[2] = {sa * p.scale, sb * p.scale};
#pragma unroll
            for (int u = 0; u < 2; u++) {
                int hh = 2 * warp + u;
                float v = j < nc ? sv[u] : -INFINITY;
                float cmax = cu_warp_max(v);
                float old = run_max[hh], nm = fmaxf(old, cmax), cr = expf(old - nm);
                float e = j < nc ? expf(sv[u] - nm) : 0.0f;
                float cs = cu_warp_sum(e);
                P[j * FA_HG + hh] = e;
                if (lane == 0) {
                    run_sum[hh] = run_sum[hh] * cr + cs;
                    run_max[hh] = nm;
                    corr[hh] = cr;
                }
            }
        }
        __syncthreads();
        float cr[FA_HG];
#pragma unroll
        for (int hh = 0; hh < FA_HG; hh++) cr[hh] = corr[hh];
#pragma unroll
        for (int hh = 0; hh < FA_HG; hh++) {
            acc[0][hh] *= cr[hh];
            acc[1][hh] *= cr[hh];
        }
        for (int j = 0; j < nc; j++) {
            const float *kr = Ks + j * KS;
            float v0 = c0 < p.C ? kr[c0] : 0.0f, v1 = c1 < p.C ? kr[c1] : 0.0f;
            const float4 *pj = (const float4 *)(P + j * FA_HG);
#pragma unroll
            for (int q4 = 0; q4 < FA_HG / 4; q4++) {
                float4 pv = pj[q4];
                acc[0][4 * q4] += pv.x * v0; acc[1][4 * q4] += pv.x * v1;
                acc[0][4 * q4 + 1] += pv.y * v0; acc[1][4 * q4 + 1] += pv.y * v1;
                acc[0][4 * q4 + 2] += pv.z * v0; acc[1][4 * q4 + 2] += pv.z * v1;
                acc[0][4 * q4 + 3] += pv.w * v0; acc[1][4 * q4 + 3] += pv.w * v1;
            }
        }
    }
    __syncthreads();
    size_t base_o = ((size_t)i * p.n_splits + split) * p.H + h0;
#pragma unroll
    for (int hh = 0; hh < FA_HG; hh++) {
        if (hh >= nh) break;
        if (c0 < p.C) p.part[(base_o + hh) * p.C + c0] = acc[0][hh];
        if (c1 < p.C) p.part[(base_o + hh) * p.C + c1] = acc[1][hh];
    }
    if (threadIdx.x < nh) {
        p.ml[(base_o + threadIdx.x) * 2] = run_max[threadIdx.x];
        p.ml[(base_o + threadIdx.x) * 2 + 1] = run_sum[threadIdx.x];
    }
}

/* a merged value: to ob in BF16 when the W_UV GEMM reads it (ob not NULL), else to olat */
__device__ __forceinline__ void combine_store(float *olat, __nv_bfloat16 *ob, size_t idx, float v) {
    if (ob) ob[idx] = __float2bfloat16(v);
    else olat[idx] = v;
}

/* grid (T, H, column blocks), block 128: olat[i, h, :] from the splits' partials (S <= 64); the columns
 * spread over gridDim.z blocks (at batch 1, 16 blocks of one head each were 14 us a layer). The splits' (max, sum) go to
 * shared memory first, read by S threads at once, and the split weights exp(m_s - max) are computed once
 * there: every loop below reads shared memory or issues independent loads (a per-column chain of S loads
 * and exps was 63 us a layer at batch 1, a serial loop over the sums in global memory still 20 us).
 * Splits with context rows are a prefix (split s covers tiles s * per .. : empty once past the context):
 * only those n_live are read; the rest may be unwritten (cuda_mla_tc.cu skips them). Same additions in
 * the same order as before. */
/* ob (NULL: not): the result rounded to BF16 into ob [T, H, C] instead of olat, for values_tc's GEMM (the
 * conversion to_bf16_kernel would make, in this launch: the same bits) */
__global__ void mla_combine_kernel(float *olat, __nv_bfloat16 *ob, const float *part, const float *ml, int S, int H, int C) {
    __shared__ float wgt[64], msh[64], ssh[64];
    __shared__ int n_live;
    cu_pdl_trigger();
    cu_pdl_wait();
    int i = blockIdx.x, h = blockIdx.y;
    if (threadIdx.x < S) {
        msh[threadIdx.x] = ml[(((size_t)i * S + threadIdx.x) * H + h) * 2];
        ssh[threadIdx.x] = ml[(((size_t)i * S + threadIdx.x) * H + h) * 2 + 1];
    }
    __syncthreads();
    float mx = -INFINITY;
    for (int s = 0; s < S; s++) mx = fmaxf(mx, msh[s]);
    if (threadIdx.x < S) wgt[threadIdx.x] = msh[threadIdx.x] == -INFINITY ? 0.0f : expf(msh[threadIdx.x] - mx);
    if (threadIdx.x == 0) {
        int n = 0;
        while (n < S && msh[n] != -INFINITY) n++;
        n_live = n;
    }
    __syncthreads();
    int nl = n_live;
    float den = 0.0f;
    for (int s = 0; s < nl; s++) den += wgt[s] * ssh[s];
    for (int c = blockIdx.z * blockDim.x + threadIdx.x; c < C; c += gridDim.z * blockDim.x) {
        float a = 0.0f;
#pragma unroll 8
        for (int s = 0; s < nl; s++) a += wgt[s] * part[(((size_t)i * S + s) * H + h) * C + c];
        combine_store(olat, ob, ((size_t)i * H + h) * C + c, a / den);
    }
}

/* The same merge with its chain of round trips cut (DSINFER_CUDA_COMBINE2, default 1; =0 the kernel above): at batch
 * 1 that one was ~10 us a layer in ncu (the (max, sum) loads; three serial loops over the splits in shared memory;
 * then the partials, 8 loads at a time). Here every thread issues all S loads of its first column at once, before
 * the split weights are known (those of empty splits are loaded and never added: they may be unwritten), while
 * warp 0 loads the (max, sum) pairs, split s in lane s % 32 (two a lane above 32 splits), and finds the max, the
 * weights, the live prefix (a ballot: the first empty split) and the denominator (the serial sum of the kernel
 * above, in its order, through shuffles). The same products and additions in the same order: the same bits as
 * mla_combine_kernel (test_cuda_ops run_combine2). Columns past the grid's first pass (large T) load as above. Its
 * 96 registers a thread (the 64 partials) cost occupancy: taken for small grids only (attn_fused). */
#define CB_MAX_S 64
/* The splits' weights of (token i, head h) by warp 0 (threads 0 .. 31, all of them): w_s = exp(m_s - max) into wgt
 * [CB_MAX_S] (0 past S), the live prefix nl (the splits before the first with no rows: m = -inf) and the denominator
 * sum of w_s l_s over it, in split order, into *den_sh and *nl_sh (shared). ml [T, S, H, 2]: each split's (max, sum). */
__device__ __forceinline__ void combine_weights(const float *ml, int i, int h, int S, int H, float *wgt, float *den_sh,
                                                int *nl_sh) {
    int l = threadIdx.x;
    const float *m0p = ml + ((size_t)i * S * H + h) * 2;   /* ml[i, 0, h, :]; split s at + s * H * 2 */
    float m0 = -INFINITY, s0 = 0.0f, m1 = -INFINITY, s1 = 0.0f;
    if (l < S) {
        m0 = m0p[(size_t)l * H * 2];
        s0 = m0p[(size_t)l * H * 2 + 1];
    }
    if (l + 32 < S) {
        m1 = m0p[(size_t)(l + 32) * H * 2];
        s1 = m0p[(size_t)(l + 32) * H * 2 + 1];
    }
    float mx = cu_warp_max(fmaxf(m0, m1));
    float w0 = m0 == -INFINITY ? 0.0f : expf(m0 - mx), w1 = m1 == -INFINITY ? 0.0f : expf(m1 - mx);
    unsigned e0 = __ballot_sync(0xffffffffu, l < S && m0 == -INFINITY);
    unsigned e1 = __ballot_sync(0xffffffffu, l + 32 < S && m1 == -INFINITY);
    int nl = e0 ? __ffs(e0) - 1 : e1 ? 32 + __ffs(e1) - 1 : S;
    float den = 0.0f;
#pragma unroll
    for (int s = 0; s < CB_MAX_S; s++) {
        if (s >= nl) break;   /* nl is the same in the whole warp */
        float ws = __shfl_sync(0xffffffffu, s < 32 ? w0 : w1, s & 31);
        float ss = __shfl_sync(0xffffffffu, s < 32 ? s0 : s1, s & 31);
        den += ws * ss;
    }
    wgt[l] = w0;
    wgt[l + 32] = w1;
    if (l == 0) {
        *den_sh = den;
        *nl_sh = nl;
    }
}

__global__ void __launch_bounds__(128) mla_combine_v2_kernel(float *olat, __nv_bfloat16 *ob, const float *part,
                                                             const float *ml, int S, int H, int C) {
    __shared__ float wgt[CB_MAX_S];
    __shared__ float den_sh;
    __shared__ int nl_sh;
    cu_pdl_trigger();
    cu_pdl_wait();
    int i = blockIdx.x, h = blockIdx.y, c = blockIdx.z * blockDim.x + threadIdx.x;
    const size_t step = (size_t)H * C;                          /* part: split s to s + 1 */
    const float *p0 = part + ((size_t)i * S * H + h) * C;       /* part[i, 0, h, :] */
    float pv[CB_MAX_S];
#pragma unroll
    for (int s = 0; s < CB_MAX_S; s++) pv[s] = s < S && c < C ? p0[s * step + c] : 0.0f;
    if (threadIdx.x < 32) combine_weights(ml, i, h, S, H, wgt, &den_sh, &nl_sh);
    __syncthreads();
    int nl = nl_sh;
    float den = den_sh;
    if (c < C) {
        float a = 0.0f;
#pragma unroll
        for (int s = 0; s < CB_MAX_S; s++) {
            if (s >= nl) break;
            a += wgt[s] * pv[s];
        }
        combine_store(olat, ob, ((size_t)i * H + h) * C + c, a / den);
    }
    for (c += gridDim.z * blockDim.x; c < C; c += gridDim.z * blockDim.x) {
        float a = 0.0f;
#pragma unroll 8
        for (int s = 0; s < nl; s++) a += wgt[s] * p0[s * step + c];
        combine_store(olat, ob, ((size_t)i * H + h) * C + c, a / den);
    }
}

/* The split combine and the values' product out = W_UV o_lat in one launch at decode-sized batches (opt.comb_uv,
 * DSINFER_CUDA_COMB_UV; the forty-ninth session): at batch 1 they were two dependent kernels of 4.2 and 3.4 us a layer
 * (mla_combine_v2_kernel, then the W_UV GEMV over o_lat in global memory). Block (token i, head h, row group z) of 256
 * threads: its W_UV rows' weights loaded first (no kernel writes them: before the PDL wait), then head h's o_lat made
 * whole in shared memory by mla_combine_v2_kernel's arithmetic (warp 0 the splits' weights and denominator, each thread
 * two columns, the first CU_PRE splits' partials loaded before the weights are known), then warp w's CU_RPW rows
 * z CU_ROWS + w CU_RPW .. of head h's dv: lane l the 16 columns [16 l, 16 l + 16) of each, in order, then the warp's tree.
 * o_lat has the combine's bits; the product's order of additions is not the GEMV's (NMSE against it: op test combuv).
 * C = 512 (16 columns a lane), dv % CU_ROWS == 0, S <= CB_MAX_S; kv_b BF16, or FP8 with 128 x 128 block scales (EB). */
#define CU_ROWS 32   /* W_UV rows a block */
#define CU_RPW 4     /* rows a warp */
#define CU_PRE 16    /* splits whose partials a thread loads before the splits' weights are known (the rest 8 at a time) */
/* lane's 16 columns [16 lane, 16 lane + 16) of W_UV rows rw .. rw + CU_RPW - 1 of head h (kv_b rows h hw + dn + ..; C = 512,
 * EB bytes an element) into wq, and each row's block scale (FP8) into sc */
template <int EB>
__device__ __forceinline__ void uv_weights(uint4 (&wq)[CU_RPW][EB], float (&sc)[CU_RPW], const cu_wview &kvb, int h, int hw,
                                           int dn, int rw, int lane) {
    constexpr int C = 512, NCH = EB;
#pragma unroll
    for (int r = 0; r < CU_RPW; r++) {
        const size_t row = (size_t)h * hw + dn + rw + r;
        const int col = lane * 16;
#pragma unroll
        for (int k = 0; k < NCH; k++) wq[r][k] = __ldg((const uint4 *)((const char *)kvb.data + (row * C + col) * EB) + k);
        sc[r] = EB == 1 && kvb.scale ? __ldg(kvb.scale + (row >> 7) * (size_t)kvb.scale_cols + (size_t)(col >> 7)) : 1.0f;
    }
}
/* orow[r] = W_UV row rw + r . xo for r < CU_RPW (xo [512] in shared memory): lane's 16 columns in order, then the warp's
 * tree; lane 0 stores */
template <int EB>
__device__ __forceinline__ void uv_products(const uint4 (&wq)[CU_RPW][EB], const float (&sc)[CU_RPW], const float *xo,
                                            float *orow, int lane) {
    constexpr int NCH = EB, VPC = 16 / EB;
    float xv[16];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const float4 v = *(const float4 *)(xo + lane * 16 + 4 * k);
        xv[4 * k] = v.x;
        xv[4 * k + 1] = v.y;
        xv[4 * k + 2] = v.z;
        xv[4 * k + 3] = v.w;
    }
#pragma unroll
    for (int r = 0; r < CU_RPW; r++) {
        float acc = 0.0f;
#pragma unroll
        for (int k = 0; k < NCH; k++) {
            float wv[VPC];
            if (EB == 2) {
                cu_bf16x8(wq[r][k], wv);
            } else {
                const uint32_t uu[4] = {wq[r][k].x, wq[r][k].y, wq[r][k].z, wq[r][k].w};
#pragma unroll
                for (int u = 0; u < 4; u++) cu_fp8x4(uu[u], sc[r], wv + 4 * u);
            }
#pragma unroll
            for (int v = 0; v < VPC; v++) acc = fmaf(wv[v], xv[k * VPC + v], acc);
        }
        acc = cu_warp_sum(acc);
        if (lane == 0) orow[r] = acc;
    }
}
template <int EB>
__global__ void __launch_bounds__(256) mla_comb_uv_kernel(float *out, const float *part, const float *ml, cu_wview kvb,
                                                          int S, int H, int dn, int dv, int hw) {
    constexpr int C = 512, NCH = 16 * EB / 16;   /* a lane's 16 columns: NCH 16-byte chunks */
    static_assert(CU_ROWS == 8 * CU_RPW, "eight warps");
    __shared__ float wgt[CB_MAX_S];
    __shared__ float den_sh;
    __shared__ int nl_sh;
    __shared__ __align__(16) float xo[C];
    const int i = blockIdx.x, h = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int rw = blockIdx.z * CU_ROWS + warp * CU_RPW;   /* the warp's first row of head h's dv */
    uint4 wq[CU_RPW][NCH];
    float sc[CU_RPW];
    uv_weights<EB>(wq, sc, kvb, h, hw, dn, rw, lane);
    cu_pdl_trigger();
    cu_pdl_wait();
    const size_t step = (size_t)H * C;                          /* part: split s to s + 1 */
    const float *p0 = part + ((size_t)i * S * H + h) * C;       /* part[i, 0, h, :] */
    float pv[2][CU_PRE];
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
        for (int s = 0; s < CU_PRE; s++) pv[j][s] = s < S ? p0[s * step + threadIdx.x + 256 * j] : 0.0f;
    if (threadIdx.x < 32) combine_weights(ml, i, h, S, H, wgt, &den_sh, &nl_sh);   /* (mla_combine_v2_kernel's) */
    __syncthreads();
    const int nl = nl_sh;
    const float den = den_sh;
#pragma unroll
    for (int j = 0; j < 2; j++) {   /* columns threadIdx.x and + 256: a = sum of w_s p_s over the live prefix, a / den */
        const int c = threadIdx.x + 256 * j;
        float a = 0.0f;
#pragma unroll
        for (int s = 0; s < CU_PRE; s++) {
            if (s >= nl) break;
            a += wgt[s] * pv[j][s];
        }
#pragma unroll 8
        for (int s = CU_PRE; s < nl; s++) a += wgt[s] * p0[s * step + c];
        xo[c] = a / den;
    }
    __syncthreads();
    uv_products<EB>(wq, sc, xo, out + ((size_t)i * H + h) * dv + rw, lane);
}

/* v3 (DSINFER_CUDA_COMBINE2=3): a block per (token, head), C / 4 threads of 4 adjacent columns. At batch 64 .. 256 v1 ran
 * (v2's 96 registers cost occupancy there) at 8 .. 11 us a layer (ncu19d): a thread's columns one after another, each a
 * chain of S loads, after the (max, sum) round trip. Here a thread requests the float4 of every split (CB3_S at a time)
 * before anything else, S threads the (max, sum) pairs meanwhile, so the block waits for about one round trip; then
 * every thread forms the weights, the live prefix and the denominator from shared memory (the few splits of a decode
 * batch: S expf a thread) and sums its four columns. The arithmetic of mla_combine_kernel in its order (w_s = exp(m_s -
 * max), den = sum w_s l_s, a = sum w_s p_s from 0 over the live prefix, a / den): the same bits. */
#define CB3_S 8
__global__ void __launch_bounds__(256) mla_combine_v3_kernel(float *olat, __nv_bfloat16 *ob, const float *part,
                                                             const float *ml, int S, int H, int C) {
    __shared__ float msh[CB_MAX_S], ssh[CB_MAX_S];
    cu_pdl_trigger();
    cu_pdl_wait();
    int i = blockIdx.x, h = blockIdx.y, c = 4 * threadIdx.x;
    const size_t step = (size_t)H * C;                          /* part: split s to s + 1 */
    const float *p0 = part + ((size_t)i * S * H + h) * C + c;   /* part[i, 0, h, c] */
    float4 pv[CB3_S];
#pragma unroll
    for (int s = 0; s < CB3_S; s++)
        if (s < S) pv[s] = *(const float4 *)(p0 + s * step);   /* empty splits' too (never added: may be unwritten) */
    if ((int)threadIdx.x < S) {
        const float *mp = ml + (((size_t)i * S + threadIdx.x) * H + h) * 2;
        msh[threadIdx.x] = mp[0];
        ssh[threadIdx.x] = mp[1];
    }
    __syncthreads();
    float mx = -INFINITY;
    for (int s = 0; s < S; s++) mx = fmaxf(mx, msh[s]);
    int nl = 0;
    while (nl < S && msh[nl] != -INFINITY) nl++;
    float den = 0.0f, a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    for (int s = 0; s < nl; s++) den += expf(msh[s] - mx) * ssh[s];
#pragma unroll
    for (int s = 0; s < CB3_S; s++) {
        if (s >= nl) break;
        float w = expf(msh[s] - mx);
        a0 += w * pv[s].x;
        a1 += w * pv[s].y;
        a2 += w * pv[s].z;
        a3 += w * pv[s].w;
    }
    for (int s = CB3_S; s < nl; s++) {
        float w = expf(msh[s] - mx);
        float4 v = *(const float4 *)(p0 + s * step);
        a0 += w * v.x;
        a1 += w * v.y;
        a2 += w * v.z;
        a3 += w * v.w;
    }
    size_t o = ((size_t)i * H + h) * C + c;
    combine_store(olat, ob, o, a0 / den);
    combine_store(olat, ob, o + 1, a1 / den);
    combine_store(olat, ob, o + 2, a2 / den);
    combine_store(olat, ob, o + 3, a3 / den);
}

int cu_combine_v2 = 1;   /* DSINFER_CUDA_COMBINE2 (read at backend creation): 0 v1, 1 v2 small grids and v3 above, 2 v2 always, 3 v3 always */

/* grid (T): out[tok[i], :] = src[i, :]. */
__global__ void scatter_rows_kernel(float *out, const float *src, const int32_t *tok, int n_cols) {
    int i = blockIdx.x;
    for (int c = threadIdx.x; c < n_cols; c += blockDim.x) out[(size_t)tok[i] * n_cols + c] = src[(size_t)i * n_cols + c];
}

/* The two per-head products of the absorbed form as strided batched BF16 GEMMs on the tensor cores (one
 * batch entry per head, fp32 accumulation and output), for every token of the batch (no token list):
 *   absorb:  q_lat[t, h, :] = W_UK[h]^T q_nope[t, h]    (C x dn times dn x T per head)
 *   values:  out[t, h * dv :] = W_UV[h] o_lat[t, h]      (dv x C times C x T per head)
 * in cuBLAS's column-major terms: W_UK[h] (rows h*hw .. h*hw+dn-1 of kv_b, row-major [., C]) is a C x dn
 * matrix with lda C; q_nope[., h] a dn x T matrix with ldb H*dqk; q_lat[., h] C x T with ldc H*C. Inputs
 * rounded to BF16 (the tensor-core contract, THR_TC); kv_b used in place when BF16, else its BF16 copy made at
 * upload (DSINFER_CUDA_KVB_BF16) or per call (cu_weight_bf16: 2 x 4 MB for V2-Lite). At 64 tokens the GEMV forms were 28 + 55 us a layer. */
static const __nv_bfloat16 *kvb_bf16(ds_cuda_backend *cb, const ds_weight *kv_b, __nv_bfloat16 *copy) {
    if (kv_b->dtype == DS_DTYPE_BF16 && !kv_b->scale) return (const __nv_bfloat16 *)kv_b->data;
    for (int i = 0; i < cb->n_kvb16; i++)   /* made once at upload (DSINFER_CUDA_KVB_BF16, cuda_weights.cu) */
        if (cb->kvb16[i].key == kv_b->data) return cb->kvb16[i].bf16;
    cu_weight_bf16(copy, cu_view(kv_b), 0, kv_b->rows);
    return copy;
}

/* (The two products as own mma.sync kernels, DSINFER_CUDA_ABSORB_OWN, thirty-seventh session: measured slower in the
 * thirty-eighth, 8.4 and 12.7 us against cuBLAS's 5.5 and 5.3 at FP8 b64, their fragments loaded from global memory a
 * k-step at a time; removed. dev/cuda/KERNELS.md has the design.) */
/* qb: q converted here, or (have_qb) already in BF16 there (qkv_finish_kernel's copy, opt.qb_fuse) */
static void absorb_q_tc(ds_cuda_backend *cb, float *qlat, const float *q, const __nv_bfloat16 *wb, __nv_bfloat16 *qb,
                        int T, int H, int C, int dn, int dqk, int hw, int have_qb) {
    const float one = 1.0f, zero = 0.0f;
    if (!have_qb) cu_to_bf16(qb, q, (size_t)T * H * dqk);
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(cb->cublas_tc, CUBLAS_OP_N, CUBLAS_OP_N, C, T, dn, &one, wb, CUDA_R_16BF, C,
                                            (long long)hw * C, qb, CUDA_R_16BF, H * dqk, dqk, &zero, qlat, CUDA_R_32F,
                                            H * C, C, H, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* olat NULL: ob already holds o_lat in BF16 (mla_combine_kernel wrote it, opt.combine_bf16) */
static void values_tc(ds_cuda_backend *cb, float *out, const float *olat, const __nv_bfloat16 *wb, __nv_bfloat16 *ob,
                      int T, int H, int C, int dn, int dv, int hw) {
    const float one = 1.0f, zero = 0.0f;
    if (olat) cu_to_bf16(ob, olat, (size_t)T * H * C);
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(cb->cublas_tc, CUBLAS_OP_T, CUBLAS_OP_N, dv, T, C, &one, wb + (size_t)dn * C,
                                            CUDA_R_16BF, C, (long long)hw * C, ob, CUDA_R_16BF, H * C, C, &zero, out,
                                            CUDA_R_32F, H * dv, dv, H, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

int cu_absorb_v3_eb(const ds_weight *kv_b, int T, int dn, int C) {
    if (cu_absorb_v2 != 2 || T > cu_absorb3_max_t || dn > 128 || C % AQ3_COLS) return 0;
    if (kv_b->dtype == DS_DTYPE_BF16 && !kv_b->scale) return 2;
    return kv_b->dtype == DS_DTYPE_F8_E4M3 ? 1 : 0;
}

/* (attn_fused's rules: cu_attn_absorbed's choice of it, then not the batched GEMMs, then absorb_q_v3_kernel's bytes an
 * element) */
int cu_absorb_v3_takes(const ds_cuda_backend *cb, const ds_weight *kv_b, int T) {
    const ds_config *c = cb->base.cfg;
    if (!cb->opt.fused_attn || c->kv_lora_rank > FA_MAX_C || c->qk_nope_head_dim > 256) return 0;
    if (cb->opt.tc && cb->opt.absorb_tc && T > GEMV_MAX_M) return 0;
    return cu_absorb_v3_eb(kv_b, T, c->qk_nope_head_dim, c->kv_lora_rank);
}

int cu_mla_ev_on = 0;
cudaEvent_t cu_mla_ev[2];

static void attn_fused(ds_cuda_backend *cb, float *out, const float *q, const unsigned char *cache, const ds_weight *kv_b,
                       const int *seqs, int n_seqs) {
    const ds_config *c = cb->base.cfg;
    const ds_batch_meta *b = &cb->b;
    int H = c->num_heads, C = c->kv_lora_rank, dr = c->qk_rope_head_dim, dn = c->qk_nope_head_dim;
    int dv = c->v_head_dim, dqk = dn + dr, hw = dn + dv, W = C + dr;
    /* the token list: NULL when every sequence of the batch is here (all tokens, in order) */
    int T = 0, all = n_seqs == b->n_seqs;
    for (int k = 0; k < n_seqs && all; k++) all = seqs[k] == k;
    for (int k = 0; k < n_seqs; k++) T += b->seq_start[seqs[k] + 1] - b->seq_start[seqs[k]];
    if (T <= 0) return;
    int HGn = (H + FA_HG - 1) / FA_HG;
    size_t tb = ds_kv_token_bytes(c);
    int fp8_vec = c->kv_fp8 && tb % 16 == 0 && C % 128 == 0 && (C + 4 * (C / 128)) % 16 == 0 && dr % 8 == 0 &&
                  ((uintptr_t)cache & 15) == 0;
    int tc = cb->opt.mla_tc && cu_mla_tc_fits(c) && (c->kv_fp8 ? fp8_vec : ((uintptr_t)cache & 15) == 0 && tb % 16 == 0);
    /* splits: enough blocks for two waves of the SMs, from the page-table width (a bound on any context,
     * the same for every step of a graph's key) */
    int max_ctx = b->pt_stride * b->page_size, max_chunks = (max_ctx + FA_CHUNK - 1) / FA_CHUNK;
    int want = (2 * cb->n_sm + T * HGn - 1) / (T * HGn);
    int S = want < 1 ? 1 : want;
    if (S > max_chunks) S = max_chunks;
    if (S > 64) S = 64;
    if (S < 1) S = 1;
    if (tc) S = cu_mla_tc_splits(T, H, max_ctx, cb->n_sm, cu_kv_layout(c));
    size_t n_q = (size_t)T * H * C, n_part = (size_t)T * S * H * C, n_ml = (size_t)T * S * H * 2;
    size_t n_ao = (size_t)T * H * dv;
    float *qlat = (float *)cu_ws_get(&cb->ws_abs, (2 * n_q + n_part + n_ml + n_ao + (size_t)T + 64) * sizeof(float));
    float *part = qlat + n_q, *ml = part + n_part, *olat = ml + n_ml, *ao = olat + n_q;
    int32_t *tok = NULL;
    if (!all) {
        int32_t *h = (int32_t *)ds_xmalloc(sizeof(int32_t) * (size_t)T);
        int n = 0;
        for (int k = 0; k < n_seqs; k++)
            for (int m = b->seq_start[seqs[k]]; m < b->seq_start[seqs[k] + 1]; m++) h[n++] = m;
        tok = (int32_t *)(ao + n_ao);
        CUDA_CHECK(cudaMemcpy(tok, h, sizeof(int32_t) * (size_t)T, cudaMemcpyHostToDevice));
        free(h);
    }
    cu_wview kv = cu_view(kv_b);
    /* the batched GEMMs: tensor cores on, more tokens than a GEMV takes, all of the batch's tokens */
    int gemm = cb->opt.tc && cb->opt.absorb_tc && all && T > GEMV_MAX_M;
    const int eb = gemm ? 0 : cu_absorb_v3_eb(kv_b, T, dn, C);
    /* q_lat made by qkv_finish's launch for this q, kv_b and batch (opt.qkv_absorb), where absorb_q_v3_kernel would make it */
    const int pre = eb && all && cb->qlat_of == q && cb->qlat_kvb == kv_b && cb->qlat_T == T;
    cb->qlat_of = NULL;   /* taken, or stale: a later call on this q (changed or not) makes its own */
    const __nv_bfloat16 *wb = NULL;
    __nv_bfloat16 *qb = NULL, *ob = NULL;
    if (gemm) {
        size_t nw = kv_b->dtype == DS_DTYPE_BF16 && !kv_b->scale ? 0 : (size_t)kv_b->rows * kv_b->cols;
        size_t nq = ((size_t)T * H * dqk + 127) / 128 * 128, no = ((size_t)T * H * C + 127) / 128 * 128;
        __nv_bfloat16 *ws = (__nv_bfloat16 *)cu_ws_get(&cb->ws_abs_tc, (nq + no + nw) * sizeof(__nv_bfloat16));
        qb = ws;
        ob = ws + nq;
        wb = kvb_bf16(cb, kv_b, ob + no);
        int have_qb = cb->qb_of == q && cb->qb_T == T;   /* the batch's q, converted by qkv_finish (opt.qb_fuse) */
        cb->qb_fused_runs += have_qb;
        if (have_qb) cb->qb_of = NULL;   /* taken: a later call on this q (changed or not) converts it itself */
        absorb_q_tc(cb, qlat, q, wb, have_qb ? (__nv_bfloat16 *)cb->ws_qb.p : qb, T, H, C, dn, dqk, hw, have_qb);
    } else if (pre) {   /* made with qkv_finish (qkv_absorb_kernel: absorb_q_v3_kernel's arithmetic) */
        qlat = (float *)cb->ws_qlat.p;
        cb->qlat_taken_runs++;
    } else if (eb == 2)
        cu_launch(absorb_q_v3_kernel<2>, dim3(H, C / AQ3_COLS, (T + 1) / 2), 128, 0, qlat, q, kv, tok, T, H, C, dn, dqk, hw);
    else if (eb == 1)
        cu_launch(absorb_q_v3_kernel<1>, dim3(H, C / AQ3_COLS, (T + 1) / 2), 128, 0, qlat, q, kv, tok, T, H, C, dn, dqk, hw);
    else if (cu_absorb_v2 && dn <= 256)
        cu_launch(absorb_q_v2_kernel, dim3(H, (C + 255) / 256, (T + AQ_TG - 1) / AQ_TG), 256, 0, qlat, q, kv, tok, T, H, C, dn, dqk, hw, cu_pdl_prefetch);
    else
        absorb_q_kernel<<<dim3(H, (T + 7) / 8), 128, 0, cu_stream>>>(qlat, q, kv, tok, T, H, C, dn, dqk, hw);
    CUDA_LAUNCH_CHECK();
    fa_params p = {qlat, q, cache, tb, c->kv_fp8, fp8_vec, cu_kv_layout(c), tok, cb->d_positions, cb->d_tok_seq, cb->d_page_table,
                   part, ml, H, C, dr, dn, dqk, b->pt_stride, b->page_size, S, c->softmax_scale};
    p.bf16_async = cu_mla_async;
    p.tickets = NULL;
    p.olat = olat;
    __nv_bfloat16 *comb16 = gemm && cb->opt.combine_bf16 ? ob : NULL;   /* the combine writes the GEMM's BF16 input */
    p.ob = comb16;
    /* the split combine folded into the decode (opt.mla_fold): its tickets cover T entries of 16-head groups */
    if (tc && cb->opt.mla_fold && C == 512 && S <= 64 && (size_t)T * ((H + 15) / 16) <= CU_MLA_TICKETS) p.tickets = cb->mla_tickets;
    int folded = 0;
    if (cu_mla_ev_on) CUDA_CHECK(cudaEventRecord(cu_mla_ev[0], cu_stream));
    if (tc) {
        folded = cu_mla_decode_tc(&p, T);
        cb->mla_fold_runs += folded;
    } else {
        size_t smem = sizeof(float) * ((size_t)FA_HG * ((W + 3) & ~3) + (size_t)FA_CHUNK * (W + 1) + FA_CHUNK * FA_HG + 3 * FA_HG);
        static size_t smem_set = 0;
        if (smem > smem_set) {
            CUDA_CHECK(cudaFuncSetAttribute(mla_decode_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
            smem_set = smem;
        }
        mla_decode_kernel<<<(unsigned)((size_t)T * S * HGn), FA_THREADS, smem, cu_stream>>>(p);
        CUDA_LAUNCH_CHECK();
    }
    if (cu_mla_ev_on) CUDA_CHECK(cudaEventRecord(cu_mla_ev[1], cu_stream));
    /* column blocks: enough blocks for the SMs at small T, one per head from T * H >= 2 waves */
    int cz = (C + 127) / 128, want_z = (2 * cb->n_sm + T * H - 1) / (T * H);
    if (want_z < cz) cz = want_z < 1 ? 1 : want_z;
    /* v2 where the grid is at most two blocks an SM: its 96 registers a thread leave a third of v1's warps resident,
     * which a large grid needs to keep its loads in flight (fourteenth session: batch 1 -0.1 ms, batch 64 +0.14,
     * batch 256 +0.34 with v2 at every size); DSINFER_CUDA_COMBINE2=2 takes it at every size */
    long cb_blocks = (long)T * H * cz;
    /* v3 (twentieth session run 2: FP8 b8 / b64 -0.05 .. -0.07 ms against v1; b1 +0.03 against v2) where v1 ran */
    int v3_fits = S <= CB_MAX_S && C % 128 == 0 && C <= 1024, small = cb_blocks <= 2L * cb->n_sm;
    float *dst = all ? out : ao;
    /* the combine and W_UV in one launch (opt.comb_uv) where the product would be the GEMV over the batch's tokens */
    const int uv_eb = !folded && all && cb->opt.comb_uv && C == 512 && dv % CU_ROWS == 0 && S <= CB_MAX_S ? eb : 0;
    if (uv_eb) {
        if (uv_eb == 2)
            cu_launch(mla_comb_uv_kernel<2>, dim3(T, H, dv / CU_ROWS), 256, 0, dst, (const float *)part, (const float *)ml, kv, S,
                      H, dn, dv, hw);
        else
            cu_launch(mla_comb_uv_kernel<1>, dim3(T, H, dv / CU_ROWS), 256, 0, dst, (const float *)part, (const float *)ml, kv, S,
                      H, dn, dv, hw);
        CUDA_LAUNCH_CHECK();
        cb->comb_uv_runs++;
        return;
    }
    if (!folded) {   /* (folded: made by the decode's last split blocks) */
        if (v3_fits && (cu_combine_v2 == 3 || (cu_combine_v2 == 1 && !small)))
            cu_launch(mla_combine_v3_kernel, dim3(T, H), C / 4, 0, olat, comb16, (const float *)part, (const float *)ml, S, H, C);
        else if (S <= CB_MAX_S && (cu_combine_v2 == 2 || (cu_combine_v2 == 1 && small)))
            cu_launch(mla_combine_v2_kernel, dim3(T, H, cz), 128, 0, olat, comb16, (const float *)part, (const float *)ml, S, H, C);
        else
            cu_launch(mla_combine_kernel, dim3(T, H, cz), 128, 0, olat, comb16, (const float *)part, (const float *)ml, S, H, C);
        CUDA_LAUNCH_CHECK();
    }
    if (gemm) values_tc(cb, dst, comb16 ? NULL : olat, wb, ob, T, H, C, dn, dv, hw);
    else cu_gemv_group(dst, H * dv, dv, olat, H * C, C, NULL, NULL, T, H, NULL, NULL, kv, kv, 0, dv, cu_gemv_flags(cb), dn, hw, 0);
    if (!all) {
        scatter_rows_kernel<<<T, 128, 0, cu_stream>>>(out, ao, tok, H * dv);
        CUDA_LAUNCH_CHECK();
    }
}

void cu_attn_absorbed(ds_backend *be, float *out, const float *q, const void *cache_v, const ds_weight *kv_b,
                      const int *seqs, int n_seqs) {
    if (cu_of(be)->opt.fused_attn && be->cfg->kv_lora_rank <= FA_MAX_C && be->cfg->qk_nope_head_dim <= 256) {
        attn_fused(cu_of(be), out, q, (const unsigned char *)cache_v, kv_b, seqs, n_seqs);
        return;
    }
    const unsigned char *cache = (const unsigned char *)cache_v;
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
        absorbed_attn_kernel<<<grid, ABS_THREADS, smem, cu_stream>>>(out, q, cache, cu_view(kv_b), cb->d_positions,
                                                          cb->d_page_table + (size_t)s * b->pt_stride, b->page_size,
                                                          t0, H, C, dn, dr, c->v_head_dim, c->softmax_scale, cu_kv_layout(c),
                                                          ds_kv_token_bytes(c));
        CUDA_LAUNCH_CHECK();
    }
}
