/* The routing of the MoE block's tokens on the device (spec 9.2), shared by cuda_moe.cu's router kernels and
 * cuda_moe1.cu's one-token MoE launch: the rule's configuration (route_cfg), the CPU's order of operations in each
 * form (one thread a token: topk_idx, group_score, write_choices; one warp a token: route_warp, route_warp_fast). */
#ifndef DS_CUDA_ROUTE_H
#define DS_CUDA_ROUTE_H

#include <math.h>

#include "backend/cuda/cuda.h"

#define MOE_MAX_EXPERTS 512
#define MOE_MAX_GROUPS 64
#define MOE_MAX_K 32

typedef struct {
    int E, K, G, topk_group, sigmoid, method, normalise, v3;
    float scaling;
    int fast;   /* route_warp's register form (route_warp_fast; opt.route_fast, DSINFER_CUDA_ROUTE_FAST) */
} route_cfg;

static inline route_cfg route_cfg_of(const ds_cuda_backend *cb, const ds_config *c) {
    route_cfg r;
    r.fast = cb->opt.route_fast;
    r.E = c->n_routed_experts;
    r.K = c->num_experts_per_tok;
    r.G = c->n_group;
    r.topk_group = c->topk_group;
    r.sigmoid = c->scoring == DS_SCORE_SIGMOID;
    r.method = (int)c->topk_method;
    r.normalise = c->norm_topk_prob && r.K > 1;
    r.v3 = c->arch == DS_ARCH_V3;
    r.scaling = c->routed_scaling_factor;
    DS_CHECK(r.E <= MOE_MAX_EXPERTS && r.K <= MOE_MAX_K && r.G <= MOE_MAX_GROUPS && r.K <= r.E);
    return r;
}

/* Indices of the k largest of v[0:n], descending, ties to the lower index (as the CPU). */
__device__ static void topk_idx(const float *v, int n, int k, int *idx) {
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

/* Group score (spec 9.2 step 4) from the group's biased (bg) and unbiased (sg) scores, elements in order
 * as on the CPU: noaux_tc the sum of the two largest biased ones, else the largest unbiased one. */
__device__ static float group_score(const route_cfg &rc, const float *bg, const float *sg, int per) {
    if (rc.method == DS_TOPK_NOAUX_TC) {
        float m1 = -INFINITY, m2 = -INFINITY;
        for (int j = 0; j < per; j++) {
            if (bg[j] > m1) { m2 = m1; m1 = bg[j]; }
            else if (bg[j] > m2) m2 = bg[j];
        }
        return per > 1 ? m1 + m2 : m1;
    }
    float mx = -INFINITY;
    for (int j = 0; j < per; j++) mx = sg[j] > mx ? sg[j] : mx;
    return mx;
}

/* Token m's choices idx[0:K] and their weights from the scores s (the CPU's order of operations). */
__device__ static void write_choices(const route_cfg &rc, const float *s, const int *idx, int32_t *ids, float *wout,
                                     int m) {
    int K = rc.K;
    float w[MOE_MAX_K], sum = 0.0f;
    for (int k = 0; k < K; k++) sum += (w[k] = s[idx[k]]);
    for (int k = 0; k < K; k++) {
        if (rc.normalise) w[k] /= sum + 1e-20f;
        if (rc.v3 || !rc.normalise) w[k] *= rc.scaling;
        ids[(size_t)m * K + k] = idx[k];
        wout[(size_t)m * K + k] = w[k];
    }
}

/* ---- router v2 (default; DSINFER_CUDA_ROUTE2=0 for v1): one warp per token ----------------------------------------
 * The same rule and the same arithmetic as route_kernel (and the CPU): per-expert scores and biased
 * choice scores computed by the lanes (expert e on lane e % 32) into shared memory; the sums the CPU
 * makes in expert order (softmax denominator, group top-2, weight normaliser) made by one lane in that
 * order; the top-k selections as rounds of a warp argmax with ties to the lower index, which is the
 * CPU's sequential "strictly greater" scan for finite scores (NaN scores may choose differently).
 * Registers and shared memory instead of a thread's local arrays; 4 tokens a block. */

__device__ static void warp_argmax(float v, int idx, float *bv, int *bi) {
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, v, o);
        int oi = __shfl_xor_sync(0xffffffffu, idx, o);
        int take = oi >= 0 && (idx < 0 || ov > v || (ov == v && oi < idx));
        if (take) { v = ov; idx = oi; }
    }
    *bv = v;
    *bi = idx;
}

/* idx[0:k] = the k largest of v[0:n] (shared memory), descending, ties to the lower index; taken marks
 * chosen entries (shared, n bytes, cleared here). Every lane gets the same idx. */
__device__ static void warp_topk(const float *v, unsigned char *taken, int n, int k, int *idx) {
    int lane = threadIdx.x & 31;
    for (int j = lane; j < n; j += 32) taken[j] = 0;
    __syncwarp();
    for (int t = 0; t < k; t++) {
        float bv = -INFINITY;
        int bi = -1;
        for (int j = lane; j < n; j += 32) {   /* this lane's best untaken, lowest index on ties */
            if (taken[j]) continue;
            if (bi < 0 || v[j] > bv) { bv = v[j]; bi = j; }
        }
        warp_argmax(bv, bi, &bv, &bi);
        idx[t] = bi;
        if (lane == 0) taken[bi] = 1;
        __syncwarp();
    }
}

/* softmax's denominator: the sum of s[0 .. E) in expert order, as the CPU makes it (one thread; its loads issued 8 at a
 * time, before their additions) */
__device__ __forceinline__ float route_denominator(const float *s, int E) {
    float sum = 0.0f;
    int e = 0;
    for (; e + 8 <= E; e += 8) {
        float v[8];
#pragma unroll
        for (int u = 0; u < 8; u++) v[u] = s[e + u];
#pragma unroll
        for (int u = 0; u < 8; u++) sum += v[u];
    }
    for (; e < E; e++) sum += s[e];
    return sum;
}

#ifdef RT_PROF
__device__ unsigned long long rt_prof_sub[5];   /* route_warp_fast's phases, warp 0 of the routing blocks (RT_PROF) */
__device__ int32_t rt_prof_ids[MOE_MAX_K];      /* the second (warm) routing's outputs (RT_PROF), never read */
__device__ float rt_prof_w[MOE_MAX_K];
#define RT_SUB(k) do { if (threadIdx.x == 0 && ids != rt_prof_ids) { long long t_ = clock64(); atomicAdd(&rt_prof_sub[k], (unsigned long long)(t_ - t_sub)); t_sub = t_; } } while (0)
#else
#define RT_SUB(k) do { } while (0)
#endif

/* A float's order as an unsigned key (larger float, larger key; -0 taken as +0, as the comparisons of the CPU's scan see
 * them equal; NaN not ordered as the CPU would) */
__device__ __forceinline__ unsigned route_key(float f) {
    unsigned u = __float_as_uint(f == 0.0f ? 0.0f : f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* One round of a warp's top-k over values v[i] of entries e = lane + 32 i < n held in registers (NPL a lane), entries
 * already chosen marked in the lane's bits `taken`: the largest untaken value, ties to the lower index (warp_topk's rule),
 * in every lane; its owner marks it taken. Two warp reductions where warp_argmax makes ten shuffles in a chain. */
template <int NPL>
__device__ __forceinline__ int route_pick(const float (&v)[NPL], unsigned &taken, int n, int lane) {
    unsigned bk = 0;
    int bi = -1;
#pragma unroll
    for (int i = 0; i < NPL; i++) {
        int e = lane + 32 * i;
        unsigned k = route_key(v[i]);
        if (e < n && !((taken >> i) & 1u) && (bi < 0 || k > bk)) { bk = k; bi = e; }
    }
    unsigned mx = __reduce_max_sync(0xffffffffu, bi >= 0 ? bk : 0u);
    unsigned win = __reduce_min_sync(0xffffffffu, bi >= 0 && bk == mx ? (unsigned)bi : 0xffffffffu);
    if ((unsigned)bi == win) taken |= 1u << (win >> 5);
    return (int)win;
}

/* route_warp in registers (rc.fast): the same values by the same expressions in the same order (softmax's denominator by
 * one lane in expert order, the group scores by group_score, the weights' sum in choice order), the same choices (the
 * largest, ties to the lower index), so the same bits; the top-k rounds are route_pick's, and the choices' weights are
 * written by K lanes at once. E <= 32 NPL. Why: RT_PROF measured route_warp at ~9.6k cycles a token (V2-Lite), the tail
 * of the fused router's token groups, where its rounds are each a chain of shared-memory scans and ten shuffles. */
template <int NPL>
__device__ static void route_warp_fast(const float *lg, const float *bias, int32_t *ids, float *wout, int m,
                                       const route_cfg &rc, float *s_sm, float *b_sm, float *red) {
    const int lane = threadIdx.x & 31, E = rc.E, K = rc.K;
#ifdef RT_PROF
    long long t_sub = clock64();
#endif
    const bool biased = rc.method == DS_TOPK_NOAUX_TC && bias;
    float sv[NPL], bv[NPL];
#pragma unroll
    for (int i = 0; i < NPL; i++) {
        int e = lane + 32 * i;
        sv[i] = e < E ? lg[e] : -INFINITY;
    }
    if (rc.sigmoid) {
#pragma unroll
        for (int i = 0; i < NPL; i++) sv[i] = 1.0f / (1.0f + expf(-sv[i]));
    } else {
        float mx = -INFINITY;
#pragma unroll
        for (int i = 0; i < NPL; i++)
            if (lane + 32 * i < E) mx = sv[i] > mx ? sv[i] : mx;
        mx = cu_warp_max(mx);
#pragma unroll
        for (int i = 0; i < NPL; i++) {
            int e = lane + 32 * i;
            sv[i] = expf(sv[i] - mx);
            if (e < E) s_sm[e] = sv[i];
        }
        __syncwarp();
        if (lane == 0) *red = route_denominator(s_sm, E);
        __syncwarp();
        float sum = *red;
#pragma unroll
        for (int i = 0; i < NPL; i++) sv[i] /= sum;
    }
    RT_SUB(0);
#pragma unroll
    for (int i = 0; i < NPL; i++) {
        int e = lane + 32 * i;
        bv[i] = sv[i] + (biased && e < E ? bias[e] : 0.0f);
    }
    if (rc.method != DS_TOPK_GREEDY && rc.G > 1) {   /* keep the topk_group best groups (G <= 64) */
        const int per = E / rc.G;
#pragma unroll
        for (int i = 0; i < NPL; i++) {
            int e = lane + 32 * i;
            if (e < E) {
                s_sm[e] = sv[i];
                b_sm[e] = bv[i];
            }
        }
        __syncwarp();
        float gv[2];
#pragma unroll
        for (int i = 0; i < 2; i++) {
            int g = lane + 32 * i;
            gv[i] = g < rc.G ? group_score(rc, b_sm + g * per, s_sm + g * per, per) : -INFINITY;
        }
        unsigned gt = 0;
        unsigned long long kept = 0;
        for (int t = 0; t < rc.topk_group; t++) kept |= 1ull << route_pick<2>(gv, gt, rc.G, lane);
#pragma unroll
        for (int i = 0; i < NPL; i++) {
            int e = lane + 32 * i;
            if (e < E && !((kept >> (e / per)) & 1ull)) bv[i] = -INFINITY;
        }
    }
    RT_SUB(1);
    int my_id = 0;
    float my_w = 0.0f, sum = 0.0f;
    unsigned taken = 0;
    for (int t = 0; t < K; t++) {
        int win = route_pick<NPL>(bv, taken, E, lane);
        float sw = 0.0f;   /* the winner's score, from its owner lane */
#pragma unroll
        for (int i = 0; i < NPL; i++)
            if (i == (win >> 5)) sw = sv[i];
        sw = __shfl_sync(0xffffffffu, sw, win & 31);
        sum += sw;   /* in choice order, as write_choices */
        if (lane == t) {
            my_id = win;
            my_w = sw;
        }
    }
    RT_SUB(2);
    if (lane < K) {   /* write_choices' arithmetic, a choice a lane */
        if (rc.normalise) my_w /= sum + 1e-20f;
        if (rc.v3 || !rc.normalise) my_w *= rc.scaling;
        ids[(size_t)m * K + lane] = my_id;
        wout[(size_t)m * K + lane] = my_w;
    }
    RT_SUB(3);
}

/* One warp routes token m from its logits lg [E] (may be s itself: each lane reads lg[e] before it writes s[e]);
 * s, b [E], g [G], taken [E] and red [1]: the warp's shared memory. */
__device__ static void route_warp(const float *lg, const float *bias, int32_t *ids, float *wout, int m,
                                  const route_cfg &rc, float *s, float *b, float *g, unsigned char *taken, float *red) {
    int lane = threadIdx.x & 31;
    int E = rc.E, K = rc.K;
    if (rc.fast && E <= 256 && K <= 32 && rc.G <= 64) {   /* (lg read into registers before s is written) */
        if (E <= 64) route_warp_fast<2>(lg, bias, ids, wout, m, rc, s, b, red);
        else route_warp_fast<8>(lg, bias, ids, wout, m, rc, s, b, red);
        return;
    }
    if (rc.sigmoid) {
        for (int e = lane; e < E; e += 32) s[e] = 1.0f / (1.0f + expf(-lg[e]));
    } else {
        float mx = -INFINITY;
        for (int e = lane; e < E; e += 32) mx = lg[e] > mx ? lg[e] : mx;
        mx = cu_warp_max(mx);
        for (int e = lane; e < E; e += 32) s[e] = expf(lg[e] - mx);
        __syncwarp();
        if (lane == 0) *red = route_denominator(s, E);
        __syncwarp();
        float sum = *red;
        for (int e = lane; e < E; e += 32) s[e] /= sum;
    }
    __syncwarp();
    for (int e = lane; e < E; e += 32) b[e] = s[e] + (rc.method == DS_TOPK_NOAUX_TC && bias ? bias[e] : 0.0f);
    __syncwarp();
    int idx[MOE_MAX_K];
    if (rc.method != DS_TOPK_GREEDY && rc.G > 1) {
        int per = E / rc.G;
        for (int j = lane; j < rc.G; j += 32) g[j] = group_score(rc, b + j * per, s + j * per, per);
        __syncwarp();
        int keep[MOE_MAX_GROUPS];
        warp_topk(g, taken, rc.G, rc.topk_group, keep);
        for (int e = lane; e < E; e += 32) {
            int ge = e / per, kept = 0;
            for (int t = 0; t < rc.topk_group && !kept; t++) kept = keep[t] == ge;
            if (!kept) b[e] = -INFINITY;
        }
        __syncwarp();
    }
    warp_topk(b, taken, E, K, idx);
    if (lane == 0) write_choices(rc, s, idx, ids, wout, m);
}

/* cu_moe1's attention form (opt.moe1 3, backend layer1): the attention's output made first, from the layer's projections */
typedef struct {
    float *q, *kv;                          /* [H dqk], [C + dr]: roped and normed in place, as qkv_finish leaves them */
    void *cache;                            /* the layer's latent cache (BF16 layout) */
    const ds_weight *kv_b, *kv_norm;
    float kv_eps;
} cu_m1_attn;

/* cu_moe1's layer-tail form (opt.moe1 2, backend layer_tail1): the block's input made from the attention's output */
typedef struct {
    float *ao;                              /* [HV] the attention's output (written first where at) */
    const ds_weight *o, *post_norm;         /* [D, HV], [D] */
    float *h, *xn;                          /* [D] the residual stream and the last norm's output */
    float eps;                              /* both norms' */
    const ds_weight *in_norm, *wq, *wkv;    /* the next layer's input side (in_norm NULL: none; see backend.h ds_next_in) */
    float *q, *kv;
    const cu_m1_attn *at;                   /* NULL: ao is given */
} cu_m1_tail;

/* The one-token launches' grid barrier pair (count, generation; cuda_grid.h / moeo_route): made once, zero, outside a
 * capture (the first eager step makes it); zero again after every barrier, so moe1_kernel and moeo_kernel's route form
 * share it (they never run at once). 0 where it does not exist and cannot be made now (inside a capture). */
static inline int cu_moe1_bar_ready(ds_cuda_backend *cb) {
    if (cb->moe1_bar) return 1;
    if (cu_capturing()) return 0;
    CUDA_CHECK(cudaMalloc(&cb->moe1_bar, 2 * sizeof(unsigned)));
    CUDA_CHECK(cudaMemset(cb->moe1_bar, 0, 2 * sizeof(unsigned)));
    return 1;
}

/* cuda_moe1.cu: the MoE block of one token as one cooperative launch (opt.moe1) where its weights suit it: 1 when it ran
 * (out [D] written from x [D]; with t, the layer's tail: also h and xn, and 2 where it made t's next layer's
 * projections too), else 0 and nothing launched. tab: the layer's expert table (cuda_moe.cu moe_table); logits: [E] of
 * scratch. */
int cu_moe1(ds_cuda_backend *cb, float *out, const float *x, const ds_layer_weights *L, const cu_wview *tab, float *logits,
            route_cfg rc, const cu_m1_tail *t);

/* cuda_moeo.cu: the MoE block of one token by intermediate ownership (opt.moeo). cu_moeo_fits: whether the layer's
 * weights suit it (FP8 block-scaled or BF16 experts and shared experts alike, whole 256-row boxes of D; its down maps
 * made on first use outside a capture; x and out 16-byte aligned; at opt.moeo 5 a BF16 or fp32 router). cu_moeo: out
 * [D] from x [D]: at opt.moeo 1 .. 4 after the routing's ids / w [K] (out zeroed by a memset first unless out_zeroed:
 * the routing's launch did, opt.route_zero), at 5 with ids and
 * w NULL (the router, the routing and out's zeros inside the one launch; logits: [E] of scratch); 1 when it ran, else 0
 * and nothing launched. */
int cu_moeo_fits(ds_cuda_backend *cb, const float *out, const float *x, const ds_layer_weights *L, route_cfg rc);
int cu_moeo(ds_cuda_backend *cb, float *out, const float *x, const ds_layer_weights *L, const cu_wview *tab,
            const int32_t *ids, const float *w, float *logits, route_cfg rc, int out_zeroed);
/* The tail form (opt.moeo 1 with opt.moeo_tail; backend layer_tail1): cu_moeo's work for out from x after the routing's
 * ids / w, then in the same cooperative launch h += out, xn = RMSNorm(h) * nx->in_norm (eps), nx->q = xn . nx->wq^T and
 * nx->kv = xn . nx->wkv^T (the next layer's attn_in up to its projections). cu_moeo_tail_fits: whether the layer and nx
 * suit it (the projections in the experts' dtype and scale form, [rows, D] with whole units of rows; the count made on
 * first use outside a capture; out_zeroed as cu_moeo's). 1 when it ran, else 0 and nothing launched. */
int cu_moeo_tail_fits(ds_cuda_backend *cb, const float *out, const float *x, const ds_layer_weights *L, route_cfg rc,
                      const ds_next_in *nx);
int cu_moeo_tail(ds_cuda_backend *cb, float *out, const float *x, const ds_layer_weights *L, const cu_wview *tab,
                 const int32_t *ids, const float *w, route_cfg rc, float *h, float *xn, const ds_next_in *nx, float eps,
                 int out_zeroed);

#endif
