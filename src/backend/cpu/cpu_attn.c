/* CPU MLA attention over the paged latent cache, in both forms (spec 6.2 and 6.3).
 *
 * Naive: decompress k_nope and v of the whole context from the cached latents with kv_b, then causal
 * attention per head with head dim dqk for scores and dv for values.
 * Absorbed: fold W_UK into the query (q_lat = W_UK^T q_nope, [C]) and W_UV into the output, attending
 * directly over the cached [c_kv ; k_pe] rows. Scores use the same softmax scale in both forms. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "core/status.h"

/* The KV entry of context token p of batch sequence s as (C + dr) floats: a pointer into an fp32
 * cache, or the entry widened into tmp for an FP8 or BF16 cache. */
static const float *cache_row(const ds_cpu_backend *cb, const void *cache, int s, int p, float *tmp) {
    const ds_batch_meta *b = &cb->b;
    const ds_config *c = cb->base.cfg;
    int page = b->page_table[(size_t)s * b->pt_stride + p / b->page_size];
    const unsigned char *e = (const unsigned char *)cache +
                             ((size_t)page * b->page_size + (size_t)(p % b->page_size)) * ds_kv_token_bytes(c);
    if (!c->kv_fp8 && !c->kv_bf16) return (const float *)(const void *)e;
    cpu_kv_unpack(c, e, tmp);
    return tmp;
}

/* In-place softmax of x[0:n]; returns nothing, fp32 like the reference. */
static void softmax_inplace(float *x, int n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    float sum = 0.0f;
    for (int i = 0; i < n; i++) sum += (x[i] = expf(x[i] - mx));
    float inv = 1.0f / sum;
    for (int i = 0; i < n; i++) x[i] *= inv;
}

/* Copies the context's latents [L, C] and k_pe [L, dr] of sequence s out of the pages. */
static void gather_context(const ds_cpu_backend *cb, const void *cache, int s, float *lat, float *kpe, float *tmp) {
    const ds_config *c = cb->base.cfg;
    size_t C = (size_t)c->kv_lora_rank, dr = (size_t)c->qk_rope_head_dim;
    for (int p = 0; p < cb->b.seq_ctx[s]; p++) {
        const float *row = cache_row(cb, cache, s, p, tmp);
        memcpy(lat + (size_t)p * C, row, C * sizeof(float));
        memcpy(kpe + (size_t)p * dr, row + C, dr * sizeof(float));
    }
}

static void naive_one_seq(ds_cpu_backend *cb, float *out, const float *q, const void *cache, const ds_weight *kv_b,
                          int s) {
    const ds_config *c = cb->base.cfg;
    const ds_batch_meta *b = &cb->b;
    int L = b->seq_ctx[s], H = c->num_heads, dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim;
    int dv = c->v_head_dim, dqk = c->qk_head_dim, hw = dn + dv;
    float *lat = cb->work, *kpe = lat + (size_t)L * c->kv_lora_rank, *kvb = kpe + (size_t)L * dr;
    gather_context(cb, cache, s, lat, kpe, cb->thread_work);
    cpu_linear(&cb->base, kvb, lat, kv_b, L);   /* [L, H*(dn+dv)] */
    int t0 = b->seq_start[s], T = b->seq_start[s + 1] - t0;
#pragma omp parallel for collapse(2) num_threads(cb->n_threads) schedule(dynamic) if (CPU_PAR((double)H * T * L * (dn + dr + dv)))
    for (int h = 0; h < H; h++)
        for (int t = 0; t < T; t++) {
            float *sc = cpu_thread_scratch(cb);
            int m = t0 + t, n_ctx = b->positions[m] + 1;
            const float *qh = q + (size_t)m * H * dqk + (size_t)h * dqk;
            for (int j = 0; j < n_ctx; j++) {
                const float *kn = kvb + (size_t)j * H * hw + (size_t)h * hw;
                sc[j] = (cpu_dot(qh, kn, dn) + cpu_dot(qh + dn, kpe + (size_t)j * dr, dr)) * c->softmax_scale;
            }
            softmax_inplace(sc, n_ctx);
            float *o = out + (size_t)m * H * dv + (size_t)h * dv;
            memset(o, 0, (size_t)dv * sizeof(float));
            for (int j = 0; j < n_ctx; j++) cpu_axpy(o, sc[j], kvb + (size_t)j * H * hw + (size_t)h * hw + dn, dv);
        }
}

void cpu_attn_naive(ds_backend *be, float *out, const float *q, const void *cache, const ds_weight *kv_b,
                    const int *seqs, int n_seqs) {
    for (int i = 0; i < n_seqs; i++) naive_one_seq(cpu_of(be), out, q, cache, kv_b, seqs[i]);
}

/* One head of one query token in absorbed form. wkv: the head's kv_b rows [dn+dv, C] in fp32. */
static void absorbed_head(ds_cpu_backend *cb, float *o, const float *qh, const float *wkv, const void *cache,
                          int s, int n_ctx, float *work) {
    const ds_config *c = cb->base.cfg;
    int C = c->kv_lora_rank, dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim, dv = c->v_head_dim;
    float *q_lat = work, *o_lat = q_lat + C, *tmp = o_lat + C, *sc = tmp + C + dr;
    memset(q_lat, 0, (size_t)C * sizeof(float));
    for (int d = 0; d < dn; d++) cpu_axpy(q_lat, qh[d], wkv + (size_t)d * C, C);   /* q_lat = W_UK^T q_nope */
    for (int j = 0; j < n_ctx; j++) {
        const float *row = cache_row(cb, cache, s, j, tmp);
        sc[j] = (cpu_dot(q_lat, row, C) + cpu_dot(qh + dn, row + C, dr)) * c->softmax_scale;
    }
    softmax_inplace(sc, n_ctx);
    memset(o_lat, 0, (size_t)C * sizeof(float));
    for (int j = 0; j < n_ctx; j++) cpu_axpy(o_lat, sc[j], cache_row(cb, cache, s, j, tmp), C);
    for (int d = 0; d < dv; d++) o[d] = cpu_dot(wkv + (size_t)(dn + d) * C, o_lat, C);  /* o = W_UV o_lat */
}

void cpu_attn_absorbed(ds_backend *be, float *out, const float *q, const void *cache, const ds_weight *kv_b,
                       const int *seqs, int n_seqs) {
    ds_cpu_backend *cb = cpu_of(be);
    const ds_config *c = be->cfg;
    const ds_batch_meta *b = &cb->b;
    int H = c->num_heads, C = c->kv_lora_rank, dqk = c->qk_head_dim, dv = c->v_head_dim;
    int hw = c->qk_nope_head_dim + dv;
    double work = 0;
    for (int i = 0; i < n_seqs; i++) {
        int s = seqs[i];
        work += (double)(b->seq_start[s + 1] - b->seq_start[s]) * (b->seq_ctx[s] + 2.0 * hw) * C;
    }
#pragma omp parallel for num_threads(cb->n_threads) schedule(dynamic) if (CPU_PAR(work * H))
    for (int h = 0; h < H; h++) {
        float *wkv = cpu_thread_scratch(cb), *work = wkv + (size_t)hw * C;
        for (int r = 0; r < hw; r++) ds_weight_row_f32(kv_b, h * hw + r, wkv + (size_t)r * C);
        for (int i = 0; i < n_seqs; i++) {
            int s = seqs[i];
            for (int m = b->seq_start[s]; m < b->seq_start[s + 1]; m++)
                absorbed_head(cb, out + (size_t)m * H * dv + (size_t)h * dv, q + (size_t)m * H * dqk + (size_t)h * dqk,
                              wkv, cache, s, b->positions[m] + 1, work);
        }
    }
}
