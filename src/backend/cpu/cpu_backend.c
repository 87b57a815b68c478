/* CPU backend: the op table, memory, and the elementwise ops (embedding, RMSNorm, RoPE, KV store).
 * The GEMM-like ops live in cpu_linear.c, attention in cpu_attn.c, MoE in cpu_moe.c. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "core/dtype.h"
#include "core/status.h"

float *cpu_thread_scratch(ds_cpu_backend *cb) {
    int t = omp_get_thread_num();
    DS_CHECK(t < cb->n_threads);
    return cb->thread_work + (size_t)t * cb->thread_work_n;
}

static float *cpu_alloc(ds_backend *be, size_t n) {
    (void)be;
    return malloc(n * sizeof(float) + 1);
}

static void cpu_release(ds_backend *be, float *p) {
    (void)be;
    free(p);
}

static void cpu_fill_nan(ds_backend *be, float *p, size_t n) {
    (void)be;
    memset(p, 0xff, n * sizeof(float));
}

static void cpu_copy_bytes(ds_backend *be, void *dst, const void *src, size_t n) {
    (void)be;
    memcpy(dst, src, n);
}

static void cpu_to_host(ds_backend *be, float *dst, const float *src, size_t n) {
    (void)be;
    if (n) memcpy(dst, src, n * sizeof(float));
}

static void cpu_quant_rows_fp8(ds_backend *be, void *rec, const float *x, int n, int D) {
    ds_cpu_backend *cb = cpu_of(be);
    size_t rb = DS_FP8_ROW_BYTES(D);
#pragma omp parallel for num_threads(cb->n_threads) schedule(static) if (CPU_PAR((double)n * D * 8))
    for (int i = 0; i < n; i++) {
        unsigned char *r = (unsigned char *)rec + (size_t)i * rb;
        const float *xr = x + (size_t)i * D;
        for (int b = 0; b < D / 128; b++) {
            float amax = 0.0f;
            for (int k = 0; k < 128; k++) amax = fmaxf(amax, fabsf(xr[b * 128 + k]));
            float s = fmaxf(amax, 1e-4f) / 448.0f;
            memcpy(r + D + 4 * (size_t)b, &s, 4);
            for (int k = 0; k < 128; k++) r[b * 128 + k] = ds_f32_to_fp8_e4m3(xr[b * 128 + k] / s);
        }
    }
}

static void cpu_dequant_rows_fp8(ds_backend *be, float *x, const void *rec, int n, int D) {
    ds_cpu_backend *cb = cpu_of(be);
    size_t rb = DS_FP8_ROW_BYTES(D);
#pragma omp parallel for num_threads(cb->n_threads) schedule(static) if (CPU_PAR((double)n * D * 4))
    for (int i = 0; i < n; i++) {
        const unsigned char *r = (const unsigned char *)rec + (size_t)i * rb;
        for (int b = 0; b < D / 128; b++) {
            float s;
            memcpy(&s, r + D + 4 * (size_t)b, 4);
            for (int k = 0; k < 128; k++) x[(size_t)i * D + b * 128 + k] = ds_fp8_e4m3_to_f32(r[b * 128 + k]) * s;
        }
    }
}

static void cpu_combine_rows(ds_backend *be, float *out, const float *y, const float *w, int M, int K, int D,
                             int accumulate) {
    ds_cpu_backend *cb = cpu_of(be);
#pragma omp parallel for num_threads(cb->n_threads) schedule(static) if (CPU_PAR((double)M * K * D))
    for (int m = 0; m < M; m++) {
        float *o = out + (size_t)m * D;
        if (!accumulate) memset(o, 0, sizeof(float) * (size_t)D);
        for (int j = 0; j < K; j++) {
            const float *r = y + ((size_t)m * K + j) * D;
            float wj = w[(size_t)m * K + j];
            for (int d = 0; d < D; d++) o[d] += wj * r[d];
        }
    }
}

/* Largest row any linear op reads, so one weight row always fits the per-thread scratch. */
static size_t max_weight_cols(const ds_config *c) {
    size_t m = (size_t)c->hidden_size * 2;
    size_t cands[] = {(size_t)c->intermediate_size, (size_t)c->num_heads * c->v_head_dim, (size_t)c->q_lora_rank,
                      (size_t)c->kv_lora_rank, (size_t)c->moe_intermediate_size * (c->n_shared_experts + 1)};
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) m = cands[i] > m ? cands[i] : m;
    return m;
}

/* Sizes the workspaces for the batch: naive attention decompresses the longest context. */
/* The MLP and MoE scratch for M rows (set_batch's tokens, or more: the gathered rows of expert parallelism). */
void cpu_reserve_rows(ds_cpu_backend *cb, int M_rows) {
    const ds_config *c = cb->base.cfg;
    size_t M = (size_t)M_rows, I = (size_t)c->intermediate_size;
    size_t sI = (size_t)c->moe_intermediate_size * (size_t)(c->n_shared_experts > 1 ? c->n_shared_experts : 1);
    size_t mlp_need = 2 * M * (I > sI ? I : sI), moe_need = cpu_moe_work_floats(c, (int)M);
    if (mlp_need > cb->mlp_work_n) {
        free(cb->mlp_work);
        cb->mlp_work = ds_xmalloc(mlp_need * sizeof(float));
        cb->mlp_work_n = mlp_need;
    }
    if (moe_need > cb->moe_work_n) {
        free(cb->moe_work);
        cb->moe_work = ds_xmalloc(moe_need * sizeof(float));
        cb->moe_work_n = moe_need;
    }
}

static ds_status cpu_set_batch(ds_backend *be, const ds_batch_meta *b, char *err) {
    ds_cpu_backend *cb = cpu_of(be);
    const ds_config *c = be->cfg;
    (void)err;
    cb->b = *b;
    cb->max_ctx = 0;
    for (int s = 0; s < b->n_seqs; s++) cb->max_ctx = b->seq_ctx[s] > cb->max_ctx ? b->seq_ctx[s] : cb->max_ctx;
    size_t L = (size_t)cb->max_ctx, C = (size_t)c->kv_lora_rank, dr = (size_t)c->qk_rope_head_dim;
    size_t per_head = (size_t)c->qk_nope_head_dim + (size_t)c->v_head_dim;
    size_t need = L * (C + dr) + L * (size_t)c->num_heads * per_head;
    if (need > cb->work_n) {
        free(cb->work);
        cb->work = ds_xmalloc(need * sizeof(float));
        cb->work_n = need;
    }
    cpu_reserve_rows(cb, b->n_tokens);
    size_t tneed = cpu_linear_scratch_floats((int)max_weight_cols(c));
    size_t attn_need = per_head * C + 3 * C + dr + L + 2 * (size_t)c->n_routed_experts + 64;
    tneed = tneed > attn_need ? tneed : attn_need;
    if (tneed > cb->thread_work_n) {
        free(cb->thread_work);
        cb->thread_work = ds_xmalloc(tneed * (size_t)cb->n_threads * sizeof(float));
        cb->thread_work_n = tneed;
    }
    return DS_OK;
}

static void cpu_embed(ds_backend *be, float *out, const ds_weight *emb) {
    const ds_batch_meta *b = &cpu_of(be)->b;
    for (int m = 0; m < b->n_tokens; m++) ds_weight_row_f32(emb, b->tokens[m], out + (size_t)m * emb->cols);
}

static void cpu_rmsnorm(ds_backend *be, float *out, int out_stride, const float *x, int x_stride,
                        const ds_weight *w, int M, int n, float eps) {
    ds_cpu_backend *cb = cpu_of(be);
#pragma omp parallel num_threads(cb->n_threads) if (CPU_PAR((double)M * n))
    {
        float *wv = cpu_thread_scratch(cb);
        ds_weight_row_f32(w, 0, wv);
#pragma omp for schedule(static)
        for (int m = 0; m < M; m++) {
            const float *xr = x + (size_t)m * x_stride;
            float *yr = out + (size_t)m * out_stride;
            float ss = cpu_dot(xr, xr, n);
            float r = 1.0f / sqrtf(ss / (float)n + eps);
            for (int i = 0; i < n; i++) yr[i] = xr[i] * r * wv[i];
        }
    }
}

static void cpu_add(ds_backend *be, float *h, const float *x, size_t n) {
    (void)be;
    for (size_t i = 0; i < n; i++) h[i] += x[i];
}

static void cpu_add_rmsnorm(ds_backend *be, float *xn, float *h, const float *x, const ds_weight *w, int M, int n,
                            float eps) {
    cpu_add(be, h, x, (size_t)M * n);
    cpu_rmsnorm(be, xn, n, h, n, w, M, n, eps);
}

static void cpu_rope(ds_backend *be, float *x, int row_stride, int n_heads, int head_stride, int offset) {
    ds_cpu_backend *cb = cpu_of(be);
    const ds_config *c = be->cfg;
    int half = c->qk_rope_head_dim / 2;
    float A = c->rope_amplitude;
#pragma omp parallel for num_threads(cb->n_threads) schedule(static) if (CPU_PAR((double)cb->b.n_tokens * n_heads * half * 16))
    for (int m = 0; m < cb->b.n_tokens; m++) {
        float cs[DS_MAX_ROPE_DIM / 2], sn[DS_MAX_ROPE_DIM / 2];
        for (int i = 0; i < half; i++) {
            /* angle in fp32 like the reference: inv_freq (fp32) * position (fp32) */
            float ang = (float)c->inv_freq[i] * (float)cb->b.positions[m];
            cs[i] = cosf(ang) * A;
            sn[i] = sinf(ang) * A;
        }
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)m * row_stride + (size_t)h * head_stride + offset;
            for (int i = 0; i < half; i++) {
                float a = v[2 * i], bb = v[2 * i + 1];
                v[2 * i] = a * cs[i] - bb * sn[i];
                v[2 * i + 1] = a * sn[i] + bb * cs[i];
            }
        }
    }
}

/* One token's FP8 KV entry (layout: loader/config.h ds_kv_token_bytes): the latent in e4m3 with one
 * fp32 scale (amax / 448) per 128 values, k_pe in bf16. */
void cpu_kv_pack_fp8(const ds_config *c, const float *src, unsigned char *dst) {
    int C = c->kv_lora_rank, dr = c->qk_rope_head_dim, nb = (C + 127) / 128;
    for (int b0 = 0; b0 < nb; b0++) {
        int lo = b0 * 128, hi = lo + 128 < C ? lo + 128 : C;
        float amax = 0;
        for (int i = lo; i < hi; i++) amax = fmaxf(amax, fabsf(src[i]));
        float scale = fmaxf(amax, 1e-12f) / 448.0f;
        memcpy(dst + C + 4 * b0, &scale, 4);
        for (int i = lo; i < hi; i++) dst[i] = ds_f32_to_fp8_e4m3(src[i] / scale);
    }
    for (int i = 0; i < dr; i++) {
        uint16_t h = ds_f32_to_bf16(src[C + i]);
        memcpy(dst + C + 4 * nb + 2 * i, &h, 2);
    }
}

void cpu_kv_unpack_fp8(const ds_config *c, const unsigned char *src, float *dst) {
    int C = c->kv_lora_rank, dr = c->qk_rope_head_dim, nb = (C + 127) / 128;
    for (int b0 = 0; b0 < nb; b0++) {
        float scale;
        memcpy(&scale, src + C + 4 * b0, 4);
        int hi = b0 * 128 + 128 < C ? b0 * 128 + 128 : C;
        for (int i = b0 * 128; i < hi; i++) dst[i] = ds_fp8_e4m3_to_f32(src[i]) * scale;
    }
    for (int i = 0; i < dr; i++) {
        uint16_t h;
        memcpy(&h, src + C + 4 * nb + 2 * i, 2);
        dst[C + i] = ds_bf16_to_f32(h);
    }
}

void cpu_kv_pack(const ds_config *c, const float *src, unsigned char *dst) {
    size_t w = (size_t)c->kv_lora_rank + (size_t)c->qk_rope_head_dim;
    if (c->kv_fp8) {
        cpu_kv_pack_fp8(c, src, dst);
    } else if (c->kv_bf16) {
        for (size_t i = 0; i < w; i++) {
            uint16_t h = ds_f32_to_bf16(src[i]);
            memcpy(dst + 2 * i, &h, 2);
        }
    } else {
        memcpy(dst, src, w * sizeof(float));
    }
}

void cpu_kv_unpack(const ds_config *c, const unsigned char *src, float *dst) {
    size_t w = (size_t)c->kv_lora_rank + (size_t)c->qk_rope_head_dim;
    if (c->kv_fp8) {
        cpu_kv_unpack_fp8(c, src, dst);
    } else if (c->kv_bf16) {
        for (size_t i = 0; i < w; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            dst[i] = ds_bf16_to_f32(h);
        }
    } else {
        memcpy(dst, src, w * sizeof(float));
    }
}

static void cpu_kv_store(ds_backend *be, void *cache, const float *kv) {
    const ds_batch_meta *b = &cpu_of(be)->b;
    const ds_config *c = be->cfg;
    size_t w = (size_t)c->kv_lora_rank + (size_t)c->qk_rope_head_dim, tb = ds_kv_token_bytes(c);
    for (int s = 0; s < b->n_seqs; s++)
        for (int m = b->seq_start[s]; m < b->seq_start[s + 1]; m++) {
            int p = b->positions[m];
            int page = b->page_table[(size_t)s * b->pt_stride + p / b->page_size];
            unsigned char *dst = (unsigned char *)cache + ((size_t)page * b->page_size + (size_t)(p % b->page_size)) * tb;
            cpu_kv_pack(c, kv + (size_t)m * w, dst);
        }
}

static void cpu_gather_rows(ds_backend *be, float *out, const float *x, const int32_t *rows, int n, int n_cols) {
    (void)be;
    for (int i = 0; i < n; i++)
        memcpy(out + (size_t)i * n_cols, x + (size_t)rows[i] * n_cols, (size_t)n_cols * sizeof(float));
}

static void cpu_destroy(ds_backend *be) {
    ds_cpu_backend *cb = cpu_of(be);
    free(cb->work);
    free(cb->thread_work);
    free(cb->mlp_work);
    free(cb->moe_work);
    free(cb);
}

ds_backend *ds_backend_cpu_new(const ds_config *cfg, int n_threads) {
    ds_cpu_backend *cb = ds_xcalloc(1, sizeof(*cb));
    cb->n_threads = n_threads > 0 ? n_threads : omp_get_num_procs();
    const char *w8 = getenv("DSINFER_MOE_W8A8");
    cb->moe_w8a8 = w8 && atoi(w8) == 1;
    ds_backend *be = &cb->base;
    be->name = "cpu";
    be->cfg = cfg;
    be->destroy = cpu_destroy;
    be->alloc = cpu_alloc;
    be->release = cpu_release;
    be->fill_nan = cpu_fill_nan;
    be->to_host = cpu_to_host;
    be->from_host = cpu_to_host;   /* one memory */
    be->copy_bytes = cpu_copy_bytes;
    be->set_batch = cpu_set_batch;
    be->embed = cpu_embed;
    be->rmsnorm = cpu_rmsnorm;
    be->add = cpu_add;
    be->add_rmsnorm = cpu_add_rmsnorm;
    be->moe_routed = cpu_moe_routed;
    be->linear = cpu_linear;
    be->rope = cpu_rope;
    be->kv_store = cpu_kv_store;
    be->attn_naive = cpu_attn_naive;
    be->attn_absorbed = cpu_attn_absorbed;
    be->mlp = cpu_mlp;
    be->moe = cpu_moe;
    be->gather_rows = cpu_gather_rows;
    be->combine_rows = cpu_combine_rows;
    be->quant_rows_fp8 = cpu_quant_rows_fp8;
    be->dequant_rows_fp8 = cpu_dequant_rows_fp8;
    /* scratch for an empty batch: the per-thread GEMM rows (set_batch grows what a step needs); an
     * expert-parallel rank may run its experts before it ever has a batch of its own */
    int32_t none = 0, start[1] = {0};
    ds_batch_meta empty = {.n_tokens = 0, .n_seqs = 0, .tokens = &none, .positions = &none, .seq_start = start,
                           .seq_ctx = &none, .page_table = &none, .pt_stride = 1, .page_size = 1};
    cpu_set_batch(be, &empty, NULL);
    return be;
}
