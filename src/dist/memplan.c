#include "dist/memplan.h"

#include <math.h>

/* Bytes of a [rows, cols] linear weight: FP8 (1 byte + one fp32 per 128x128 block) or BF16. */
static double linear_bytes(double rows, double cols, int fp8) {
    return fp8 ? rows * cols + ceil(rows / 128) * ceil(cols / 128) * 4 : rows * cols * 2;
}

typedef struct {
    double attn, attn_split, dense, shared, experts, router, norms;   /* bytes per layer kind */
    double p_attn, p_dense, p_shared, p_expert, p_router, p_norms;    /* parameters */
} layer_sizes;

static layer_sizes sizes(const ds_config *c, int fp8) {
    double D = c->hidden_size, H = c->num_heads, C = c->kv_lora_rank, dr = c->qk_rope_head_dim;
    double dqk = c->qk_nope_head_dim + dr, dv = c->v_head_dim, Rq = c->q_lora_rank;
    double I = c->intermediate_size, mI = c->moe_intermediate_size, E = c->n_routed_experts;
    layer_sizes s = {0};
    /* attention: the per-head projections split under TP, q_a and kv_a do not */
    double rep = linear_bytes(C + dr, D, fp8) + (Rq ? linear_bytes(Rq, D, fp8) : 0);
    double split = (Rq ? linear_bytes(H * dqk, Rq, fp8) : linear_bytes(H * dqk, D, fp8)) +
                   linear_bytes(H * (dqk - dr + dv), C, fp8) + linear_bytes(D, H * dv, fp8);
    s.attn = rep + split;
    s.attn_split = split;
    s.p_attn = (C + dr) * D + (Rq ? Rq * D + H * dqk * Rq : H * dqk * D) + H * (dqk - dr + dv) * C + D * H * dv;
    s.p_norms = 2 * D + C + Rq;
    s.norms = s.p_norms * 2;
    s.dense = 3 * linear_bytes(I, D, fp8);
    s.p_dense = 3 * I * D;
    s.shared = c->n_shared_experts ? 3 * linear_bytes(mI * c->n_shared_experts, D, fp8) : 0;
    s.p_shared = 3 * mI * c->n_shared_experts * D;
    s.experts = E * 3 * linear_bytes(mI, D, fp8);
    s.p_expert = 3 * mI * D;
    s.router = E * D * 2 + E * 4;
    s.p_router = E * D + E;
    return s;
}

void ds_memory_plan(const ds_config *c, const ds_plan_input *in, ds_plan *o) {
    layer_sizes s = sizes(c, in->fp8_weights);
    double V = c->vocab_size, D = c->hidden_size, N = in->n_gpus, K = c->num_experts_per_tok;
    int n_moe = 0, n_dense = 0;
    for (int l = 0; l < c->num_layers; l++) ds_config_layer_is_moe(c, l) ? n_moe++ : n_dense++;
    double embed_head = 2 * V * D * 2 + D * 2;
    double p_layers = c->num_layers * (s.p_attn + s.p_norms) + n_dense * s.p_dense +
                      n_moe * (s.p_router + s.p_shared + c->n_routed_experts * s.p_expert);
    o->params_total = p_layers + 2 * V * D + D;
    o->params_active = o->params_total - n_moe * (c->n_routed_experts - K) * s.p_expert;
    double common = c->num_layers * (s.attn + s.norms) + n_dense * s.dense + n_moe * (s.router + s.shared);
    double experts = n_moe * s.experts;
    o->weight_bytes_total = embed_head + common + experts;
    if (in->mode == DS_PAR_DP_EP)      /* everything but the routed experts replicated; experts split */
        o->weight_bytes_per_gpu = embed_head + common + experts / N;
    else                               /* heads, MLP columns, experts' columns and the vocab split */
        o->weight_bytes_per_gpu = embed_head / N + c->num_layers * (s.attn - s.attn_split + s.attn_split / N + s.norms) +
                                  (n_dense * s.dense + n_moe * (s.router + s.shared) + experts) / N;
    double C = c->kv_lora_rank, dr = c->qk_rope_head_dim;
    double tok = in->kv_fp8 ? C + 4 * ceil(C / 128) + 2 * dr : 2 * (C + dr);
    o->kv_bytes_per_token = tok * c->num_layers;
    o->kv_bytes_per_gpu = in->gpu_bytes * in->utilization - o->weight_bytes_per_gpu - in->activation_bytes;
    o->fits = o->kv_bytes_per_gpu > 0;
    o->tokens_per_gpu = o->fits ? floor(o->kv_bytes_per_gpu / o->kv_bytes_per_token) : 0;
    /* DP: each GPU caches its own requests; TP: every GPU holds the same (whole) latent cache */
    o->tokens_total = in->mode == DS_PAR_DP_EP ? o->tokens_per_gpu * N : o->tokens_per_gpu;
}
