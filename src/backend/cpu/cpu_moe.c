/* CPU MoE (spec 9): router in fp32, routing per token, tokens grouped by expert, each expert's MLP run
 * over its tokens, outputs combined with the routing weights (fp32), plus the shared experts. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "core/status.h"

/* Indices of the k largest values of v[0:n] (descending; ties to the lower index, like torch.topk on
 * CPU in practice). */
static void topk_indices(const float *v, int n, int k, int32_t *idx) {
    for (int i = 0; i < k; i++) {
        int best = -1;
        for (int j = 0; j < n; j++) {
            int taken = 0;
            for (int t = 0; t < i && !taken; t++) taken = idx[t] == j;
            if (taken) continue;
            if (best < 0 || v[j] > v[best]) best = j;
        }
        idx[i] = best;
    }
}

/* Group restriction (step 4): experts outside the topk_group best groups get -inf choice scores. */
static void restrict_groups(const ds_config *c, const float *s, float *b) {
    int G = c->n_group, per = c->n_routed_experts / G;
    float gscore[1024] = {0};
    int32_t keep[1024];
    DS_CHECK(G <= 1024);
    for (int g = 0; g < G; g++) {
        const float *bg = b + g * per, *sg = s + g * per;
        if (c->topk_method == DS_TOPK_NOAUX_TC) {   /* sum of the two largest biased scores */
            float m1 = -INFINITY, m2 = -INFINITY;
            for (int j = 0; j < per; j++) {
                if (bg[j] > m1) { m2 = m1; m1 = bg[j]; }
                else if (bg[j] > m2) m2 = bg[j];
            }
            gscore[g] = per > 1 ? m1 + m2 : m1;
        } else {                                    /* max of the unbiased scores */
            float m = -INFINITY;
            for (int j = 0; j < per; j++) m = sg[j] > m ? sg[j] : m;
            gscore[g] = m;
        }
    }
    topk_indices(gscore, G, c->topk_group, keep);
    for (int g = 0; g < G; g++) {
        int kept = 0;
        for (int t = 0; t < c->topk_group && !kept; t++) kept = keep[t] == g;
        if (!kept)
            for (int j = 0; j < per; j++) b[g * per + j] = -INFINITY;
    }
}

void ds_route_token(const ds_config *c, const float *logits, const float *bias, int32_t *ids, float *w,
                    float *scratch) {
    int E = c->n_routed_experts, K = c->num_experts_per_tok;
    float *s = scratch, *b = scratch + E;
    if (c->scoring == DS_SCORE_SIGMOID) {
        for (int e = 0; e < E; e++) s[e] = 1.0f / (1.0f + expf(-logits[e]));
    } else {
        float mx = -INFINITY, sum = 0.0f;
        for (int e = 0; e < E; e++) mx = logits[e] > mx ? logits[e] : mx;
        for (int e = 0; e < E; e++) sum += (s[e] = expf(logits[e] - mx));
        for (int e = 0; e < E; e++) s[e] /= sum;
    }
    for (int e = 0; e < E; e++) b[e] = s[e] + (c->topk_method == DS_TOPK_NOAUX_TC && bias ? bias[e] : 0.0f);
    if (c->topk_method != DS_TOPK_GREEDY && c->n_group > 1) restrict_groups(c, s, b);
    topk_indices(b, E, K, ids);
    float sum = 0.0f;
    for (int k = 0; k < K; k++) sum += (w[k] = s[ids[k]]);
    int normalise = c->norm_topk_prob && K > 1;
    for (int k = 0; k < K; k++) {
        if (normalise) w[k] /= sum + 1e-20f;
        /* V3 always scales; V2 scales only when it does not normalise (spec 9.2 step 7) */
        if (c->arch == DS_ARCH_V3 || !normalise) w[k] *= c->routed_scaling_factor;
    }
}

/* moe_work layout for M tokens: router logits [M, E], bias [E], weights [M, K], row weights [M],
 * gathered input rows [M, D], expert outputs [M, D], then expert ids [M, K] and rows [M] (int32). */
size_t cpu_moe_work_floats(const ds_config *c, int M) {
    size_t m = (size_t)M, E = (size_t)c->n_routed_experts, K = (size_t)c->num_experts_per_tok;
    size_t D = (size_t)c->hidden_size;
    return m * E + E + m * K + m + 2 * m * D + m * K + m;
}

typedef struct {
    float *logits, *bias, *w, *rw, *xin, *yout;
    int32_t *ids, *rows;
} moe_bufs;

static moe_bufs moe_carve(ds_cpu_backend *cb, int M) {
    const ds_config *c = cb->base.cfg;
    size_t m = (size_t)M, E = (size_t)c->n_routed_experts, K = (size_t)c->num_experts_per_tok;
    size_t D = (size_t)c->hidden_size;
    DS_CHECK(cpu_moe_work_floats(c, M) <= cb->moe_work_n);
    moe_bufs b;
    b.logits = cb->moe_work;
    b.bias = b.logits + m * E;
    b.w = b.bias + E;
    b.rw = b.w + m * K;
    b.xin = b.rw + m;
    b.yout = b.xin + m * D;
    b.ids = (int32_t *)(b.yout + m * D);   /* int32 and float have the same size and alignment */
    b.rows = b.ids + m * K;
    return b;
}

/* Router logits [M, E] in fp32 and the per-token choice. */
static void route_all(ds_backend *be, const float *x, const ds_layer_weights *L, int M, const moe_bufs *b) {
    ds_cpu_backend *cb = cpu_of(be);
    const ds_config *c = be->cfg;
    int E = c->n_routed_experts, K = c->num_experts_per_tok;
    cpu_linear(be, b->logits, x, &L->router, M);
    const float *bias = NULL;
    if (L->router_bias.data) {
        ds_weight_row_f32(&L->router_bias, 0, b->bias);
        bias = b->bias;
    }
#pragma omp parallel for num_threads(cb->n_threads) schedule(static) if (CPU_PAR((double)M * E * 16))
    for (int m = 0; m < M; m++)
        ds_route_token(c, b->logits + (size_t)m * E, bias, b->ids + (size_t)m * K, b->w + (size_t)m * K,
                       cpu_thread_scratch(cb));
}

/* Runs expert e over its n tokens (b->rows, b->rw) and adds weight * output into out. With DSINFER_MOE_W8A8
 * and FP8 expert weights (block-scaled, both widths multiples of 128), the expert's inputs are quantized to
 * e4m3 per token x 128 columns first, as the CUDA backend's FP8-MMA experts do (cuda_moe_tc.cu). */
static void run_expert(ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int e, int n,
                       const moe_bufs *b) {
    int D = be->cfg->hidden_size;
    const ds_weight *gw = &L->exp_gate[e];
    int w8a8 = cpu_of(be)->moe_w8a8 && gw->dtype == DS_DTYPE_F8_E4M3 && gw->scale && D % 128 == 0 && gw->rows % 128 == 0;
    for (int i = 0; i < n; i++) memcpy(b->xin + (size_t)i * D, x + (size_t)b->rows[i] * D, (size_t)D * sizeof(float));
    if (w8a8) cpu_act_fp8(b->xin, n, D);
    cpu_mlp_act(be, b->yout, b->xin, gw, &L->exp_up[e], &L->exp_down[e], n, w8a8);
    for (int i = 0; i < n; i++) {
        float *o = out + (size_t)b->rows[i] * D;
        const float *y = b->yout + (size_t)i * D;
        for (int d = 0; d < D; d++) o[d] += b->rw[i] * y[d];
    }
}

/* out += the routed experts e0 <= e < e1 over the tokens that chose them, in ascending expert order */
static void add_experts(ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int M, int e0, int e1,
                        moe_bufs *b) {
    int K = be->cfg->num_experts_per_tok;
    for (int e = e0; e < e1; e++) {
        int n = 0;
        for (int m = 0; m < M; m++)
            for (int k = 0; k < K; k++)
                if (b->ids[(size_t)m * K + k] == e) { b->rows[n] = m; b->rw[n++] = b->w[(size_t)m * K + k]; }
        if (n && L->exp_gate[e].data) run_expert(be, out, x, L, e, n, b);   /* no weights: another rank's expert */
    }
}

void cpu_moe(ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int M) {
    const ds_config *c = be->cfg;
    int D = c->hidden_size;
    moe_bufs b = moe_carve(cpu_of(be), M);
    route_all(be, x, L, M, &b);
    if (c->n_shared_experts) cpu_mlp(be, out, x, &L->sh_gate, &L->sh_up, &L->sh_down, M);
    else memset(out, 0, (size_t)M * D * sizeof(float));
    add_experts(be, out, x, L, M, 0, c->n_routed_experts, &b);
}

void cpu_moe_routed(ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int M, int e0, int e1) {
    cpu_reserve_rows(cpu_of(be), M);   /* M may be more rows than the batch's (gathered from other ranks) */
    moe_bufs b = moe_carve(cpu_of(be), M);
    route_all(be, x, L, M, &b);
    memset(out, 0, (size_t)M * be->cfg->hidden_size * sizeof(float));
    add_experts(be, out, x, L, M, e0, e1, &b);
}
