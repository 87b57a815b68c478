/* The forward pass of DeepSeek-V2/V3 over one batch (spec 3):
 *
 *   h = embed(tokens)
 *   for each layer:  h += MLA(RMSNorm(h));  h += FFN(RMSNorm(h))     (FFN = dense MLP or MoE)
 *   logits = lm_head(RMSNorm(h))   for the rows asked for
 *
 * Every sequence of the batch brings its new tokens; their latents go into the sequence's KV pages
 * before attention, so a token attends over the cached prefix and the new tokens up to itself.
 * Each sequence attends in the form predicted faster for its step (model/attn_cost.h, timed on the
 * backend at open): typically prefill of a fresh prompt in the naive form, decode tokens and short chunks
 * over long prefixes in the absorbed form over the latent cache (spec 6.4). Only backend ops are called here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "dist/ep_moe.h"
#include "dist/tp.h"
#include "model/engine.h"

/* Host-side layout of one step, built from the batch items. */
typedef struct {
    ds_batch_meta meta;
    int32_t *tokens, *positions, *seq_start, *seq_ctx, *page_table;
    int *naive, n_naive, *absorbed, n_absorbed;
    int32_t *out_rows;   /* token indices whose logits are returned */
    int n_out;
} step_plan;

static void plan_free(step_plan *p) {
    free(p->tokens); free(p->positions); free(p->seq_start); free(p->seq_ctx); free(p->page_table);
    free(p->naive); free(p->absorbed); free(p->out_rows);
}

static ds_status validate_items(ds_engine *e, const ds_batch_item *it, int n, char *err) {
    if (n <= 0 || !it) return ds_seterr(err, DS_ERR_ARG, "empty batch");
    for (int i = 0; i < n; i++) {
        if (!it[i].seq || it[i].seq->eng != e) return ds_seterr(err, DS_ERR_ARG, "batch item %d: no sequence of this engine", i);
        if (it[i].n_tokens <= 0 || !it[i].tokens) return ds_seterr(err, DS_ERR_ARG, "batch item %d: no tokens", i);
        for (int j = 0; j < i; j++)
            if (it[j].seq == it[i].seq) return ds_seterr(err, DS_ERR_ARG, "batch items %d and %d are the same sequence", j, i);
        long end = (long)it[i].seq->len + it[i].n_tokens;
        if (end > e->cfg.max_position_embeddings)
            return ds_seterr(err, DS_ERR_ARG, "batch item %d: context of %ld tokens exceeds the model's %d", i, end,
                             e->cfg.max_position_embeddings);
        for (int t = 0; t < it[i].n_tokens; t++)
            if (it[i].tokens[t] < 0 || it[i].tokens[t] >= e->cfg.vocab_size)
                return ds_seterr(err, DS_ERR_ARG, "batch item %d: token id %d out of range [0, %d)", i, it[i].tokens[t],
                                 e->cfg.vocab_size);
    }
    return DS_OK;
}

/* Gives each sequence the pages its new tokens need; on failure returns every page taken here. */
static ds_status reserve_pages(ds_engine *e, const ds_batch_item *it, int n, int *old_n_pages, char *err) {
    for (int i = 0; i < n; i++) old_n_pages[i] = it[i].seq->n_pages;
    for (int i = 0; i < n; i++) {
        ds_seq *s = it[i].seq;
        int need = (s->len + it[i].n_tokens + e->page_size - 1) / e->page_size;
        if (need > s->cap_pages) {
            s->cap_pages = need * 2;
            s->pages = ds_xrealloc(s->pages, sizeof(int) * (size_t)s->cap_pages);
        }
        while (s->n_pages < need) {
            int page = ds_kv_pool_take(e->pool);
            if (page < 0) {
                for (int j = 0; j <= i; j++)
                    while (it[j].seq->n_pages > old_n_pages[j]) ds_engine_release_page(e, it[j].seq->pages[--it[j].seq->n_pages]);
                return ds_seterr(err, DS_ERR_NOMEM, "out of KV pages (%d in the pool)", ds_kv_pool_total(e->pool));
            }
            s->pages[s->n_pages++] = page;
        }
    }
    return DS_OK;
}

static void build_plan(ds_engine *e, const ds_batch_item *it, int n, step_plan *p) {
    int M = 0, pt_stride = 1;
    for (int i = 0; i < n; i++) {
        M += it[i].n_tokens;
        pt_stride = it[i].seq->n_pages > pt_stride ? it[i].seq->n_pages : pt_stride;
    }
    /* a power of two: the page-table width changes rarely, so a decode step's graph is reused */
    while (pt_stride & (pt_stride - 1)) pt_stride += pt_stride & -pt_stride;
    p->tokens = ds_xmalloc(sizeof(int32_t) * (size_t)M);
    p->positions = ds_xmalloc(sizeof(int32_t) * (size_t)M);
    p->out_rows = ds_xmalloc(sizeof(int32_t) * (size_t)M);
    p->seq_start = ds_xmalloc(sizeof(int32_t) * (size_t)(n + 1));
    p->seq_ctx = ds_xmalloc(sizeof(int32_t) * (size_t)n);
    p->page_table = ds_xcalloc((size_t)n * (size_t)pt_stride, sizeof(int32_t));
    p->naive = ds_xmalloc(sizeof(int) * (size_t)n);
    p->absorbed = ds_xmalloc(sizeof(int) * (size_t)n);
    p->n_naive = p->n_absorbed = p->n_out = 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        const ds_seq *s = it[i].seq;
        p->seq_start[i] = m;
        p->seq_ctx[i] = s->len + it[i].n_tokens;
        for (int j = 0; j < s->n_pages; j++) p->page_table[(size_t)i * pt_stride + j] = s->pages[j];
        for (int t = 0; t < it[i].n_tokens; t++, m++) {
            p->tokens[m] = it[i].tokens[t];
            p->positions[m] = s->len + t;
            if (it[i].all_logits || t == it[i].n_tokens - 1) p->out_rows[p->n_out++] = m;
        }
        int absorbed = ds_engine_prefers_absorbed(e, it[i].n_tokens, p->seq_ctx[i]);
        if (absorbed) p->absorbed[p->n_absorbed++] = i;
        else p->naive[p->n_naive++] = i;
    }
    p->seq_start[n] = m;
    p->meta = (ds_batch_meta){.n_tokens = M, .n_seqs = n, .tokens = p->tokens, .positions = p->positions,
                              .seq_start = p->seq_start, .seq_ctx = p->seq_ctx, .page_table = p->page_table,
                              .pt_stride = pt_stride, .page_size = e->page_size};
}

/* The first failure of a collective inside a step, reported when the step ends (the other layers still
 * run: every rank makes the same calls). */
static void keep_step_error(ds_engine *e, ds_status st, const char *err) {
    if (st && !e->step_st) {
        e->step_st = st;
        snprintf(e->step_err, sizeof e->step_err, "%s", err);
    }
}

/* Tensor parallel: buf holds this rank's partial sum; after this, the whole sum (every rank the same). */
static void tp_reduce(ds_engine *e, float *buf, size_t n) {
    if (!e->tp) return;
    char err[DS_ERRLEN];
    ds_status st = e->tp->all_reduce_sum(e->tp, buf, n, err);
    keep_step_error(e, st, err);
}

static void add_norm(ds_engine *e, const ds_weight *w, int M);

/* The MLA block's input (spec 6) op by op: the layer's input norm of h (after h += ff where add_ff), the q (or q_a,
 * then its norm and q_b) and kv_a projections of xn, then the kv norm, both RoPEs and the cache store. */
static void attn_in_rest(ds_engine *e, const ds_layer_weights *L, void *cache, int M, const ds_weight *kv_b);

/* out = (RMSNorm(x) * norm) . w^T, x [M, w->cols]: the backend's one call where it has one, else the norm into xn
 * (scratch; may be x) and the linear */
static void normed_linear(ds_engine *e, float *out, float *xn, const float *x, const ds_weight *norm, float eps,
                          const ds_weight *w, int M) {
    ds_backend *be = e->be;
    if (be->normed_linear) {
        be->normed_linear(be, out, xn, x, norm, eps, w, M);
        return;
    }
    be->rmsnorm(be, xn, w->cols, x, w->cols, norm, M, w->cols, eps);
    be->linear(be, out, xn, w, M);
}

static void attn_in_ops(ds_engine *e, const ds_layer_weights *L, void *cache, int M, int add_ff, const ds_weight *kv_b) {
    const ds_config *c = &e->cfg;
    ds_backend *be = e->be;
    ds_acts *a = &e->a;
    int D = c->hidden_size;
    if (add_ff) add_norm(e, &L->input_norm, M);
    else be->rmsnorm(be, a->xn, D, a->h, D, &L->input_norm, M, D, c->rms_norm_eps);
    /* the two projections of xn: q_a (V3) or q (V2-Lite), and kv_a; one backend call where it has linear2 */
    float *q_out = c->q_lora_rank ? a->qa : a->q;
    const ds_weight *wq = c->q_lora_rank ? &L->q_a : &L->q;
    if (be->linear2) {
        be->linear2(be, q_out, a->kv, a->xn, wq, &L->kv_a, M);
    } else {
        be->linear(be, q_out, a->xn, wq, M);
        be->linear(be, a->kv, a->xn, &L->kv_a, M);
    }
    attn_in_rest(e, L, cache, M, kv_b);
}

/* The MLA block's input after the two projections of xn (in qa or q, and kv): q_a's norm and q_b where q_lora, then
 * the kv norm, both RoPEs and the cache store. kv_b: backend.h qkv_finish's (the layer's where the absorbed attention
 * over every token comes next, else NULL). */
static void attn_in_rest(ds_engine *e, const ds_layer_weights *L, void *cache, int M, const ds_weight *kv_b) {
    const ds_config *c = &e->cfg;
    ds_backend *be = e->be;
    ds_acts *a = &e->a;
    int H = c->num_heads, C = c->kv_lora_rank, dr = c->qk_rope_head_dim;
    if (c->q_lora_rank) normed_linear(e, a->q, a->qa, a->qa, &L->q_a_norm, 1e-6f, &L->q_b, M);
    if (be->qkv_finish) {
        be->qkv_finish(be, a->q, a->kv, cache, &L->kv_a_norm, 1e-6f, kv_b);
    } else {
        be->rmsnorm(be, a->kv, C + dr, a->kv, C + dr, &L->kv_a_norm, M, C, 1e-6f);  /* latent part only */
        be->rope(be, a->q, H * c->qk_head_dim, H, c->qk_head_dim, c->qk_nope_head_dim);
        be->rope(be, a->kv, C + dr, 1, 0, C);
        be->kv_store(be, cache, a->kv);
    }
}

/* Whether attention() takes the layer's input side in one backend attn_in call (with the residual add, only where
 * add_norm fuses it) */
static int attn_in_one_call(const ds_engine *e, int add_ff) {
    return e->be->attn_in && (!add_ff || (e->be->add_rmsnorm && e->fused_add_norm));
}

/* MLA block (spec 6): the layer's input norm of h (after h += ff where add_ff: the previous layer's output), then
 * xn -> ao (the attention output, heads concatenated; attn_out projects it back to D). projected: the previous layer's
 * tail (layer_tail1) made the norm and the two projections already. */
static void attention(ds_engine *e, const step_plan *p, int layer, int add_ff, int projected) {
    const ds_config *c = &e->cfg;
    const ds_layer_weights *L = &e->w.layers[layer];
    ds_backend *be = e->be;
    ds_acts *a = &e->a;
    void *cache = ds_engine_layer_cache(e, layer);
    /* the layer's kv_b for qkv_finish where the absorbed attention over every sequence of the batch follows at once */
    const ds_weight *kv_b = !p->n_naive && p->n_absorbed == p->meta.n_seqs ? &L->kv_b : NULL;
    /* the input side in one backend call where it has one (the add fused only where add_norm fuses it); with q_lora
     * the call makes qa and then q from it (attn_in_rest's normed_linear) */
    const ds_qlora_in ql = {a->qa, &L->q_a_norm, &L->q_b, 1e-6f};
    if (projected)
        attn_in_rest(e, L, cache, p->meta.n_tokens, kv_b);
    else if (attn_in_one_call(e, add_ff))
        be->attn_in(be, a->xn, a->h, add_ff ? a->ff : NULL, &L->input_norm, c->rms_norm_eps, a->q, a->kv,
                    c->q_lora_rank ? &L->q_a : &L->q, &L->kv_a, cache, &L->kv_a_norm, 1e-6f, kv_b,
                    c->q_lora_rank ? &ql : NULL, p->meta.n_tokens);
    else
        attn_in_ops(e, L, cache, p->meta.n_tokens, add_ff, kv_b);
    if (p->n_naive) be->attn_naive(be, a->ao, a->q, cache, &L->kv_b, p->naive, p->n_naive);
    if (p->n_absorbed) be->attn_absorbed(be, a->ao, a->q, cache, &L->kv_b, p->absorbed, p->n_absorbed);
}

/* ao -> ff = o(ao), then h += ff and xn = the post-attention norm of h: one backend call where it has one (no
 * tensor-parallel sum between: the rank's ff is partial there) */
static void attn_out(ds_engine *e, const ds_layer_weights *L, int M) {
    ds_backend *be = e->be;
    ds_acts *a = &e->a;
    if (be->linear_add_rmsnorm && !e->tp && be->add_rmsnorm && e->fused_add_norm) {
        be->linear_add_rmsnorm(be, a->xn, a->h, a->ff, a->ao, &L->o, &L->post_norm, M, e->cfg.rms_norm_eps);
        return;
    }
    be->linear(be, a->ff, a->ao, &L->o, M);
    tp_reduce(e, a->ff, (size_t)M * e->cfg.hidden_size);
    add_norm(e, &L->post_norm, M);
}

/* An expert-parallel MoE layer; its first error is kept for the end of the step (the other layers
 * still run: every rank makes the same exchanges). */
static void ep_moe(ds_engine *e, const ds_layer_weights *L, float *out, const float *x, int M) {
    char err[DS_ERRLEN];
    ds_status st = e->ep_gather ? ds_ep_moe_gathered(e->ep, e->be, out, x, L, M, e->ep_mmax, err)
                                : ds_ep_moe(e->ep, e->be, out, x, L, M, err);
    keep_step_error(e, st, err);
}

/* Tensor parallelism over whole experts (ds_tp_slice with whole_experts): this rank's routed experts for
 * every token (be->moe_routed over its range: the routing is over all experts, as on one GPU) plus its slice
 * of the shared experts; the all-reduce after the block adds the ranks' parts. */
static void tp_whole_moe(ds_engine *e, const ds_layer_weights *L, int M) {
    ds_backend *be = e->be;
    size_t n = (size_t)M * e->cfg.hidden_size;
    be->moe_routed(be, e->a.ff, e->a.xn, L, M, e->tp_expert_e0, e->tp_expert_e1);
    if (e->cfg.n_shared_experts) {
        be->mlp(be, e->a.ff2, e->a.xn, &L->sh_gate, &L->sh_up, &L->sh_down, M);
        be->add(be, e->a.ff, e->a.ff2, n);
    }
}

/* The layer's FFN into ff. to_attn_in: the next backend call is the next layer's attn_in with add = ff, so a MoE layer
 * on one device may leave ff's last sum to it (backend moe_to_attn_in). */
static void ffn(ds_engine *e, int layer, int M, int to_attn_in) {
    const ds_layer_weights *L = &e->w.layers[layer];
    if (L->is_moe && e->ep) ep_moe(e, L, e->a.ff, e->a.xn, M);
    else if (L->is_moe && e->tp_expert_e1 > e->tp_expert_e0 && e->be->moe_routed) tp_whole_moe(e, L, M);
    else if (L->is_moe && to_attn_in && !e->tp && e->be->moe_to_attn_in) e->be->moe_to_attn_in(e->be, e->a.ff, e->a.xn, L, M);
    else if (L->is_moe) e->be->moe(e->be, e->a.ff, e->a.xn, L, M);
    else e->be->mlp(e->be, e->a.ff, e->a.xn, &L->gate, &L->up, &L->down, M);
    tp_reduce(e, e->a.ff, (size_t)M * e->cfg.hidden_size);
}

/* Whether a MoE layer for one token may go to the backend as one call (layer_tail1, layer1): nothing between its calls
 * needs the host (one device, no parallel split) and the add is fused into the norm, as those calls make it. */
static int one_call_layer(const ds_engine *e, const ds_layer_weights *L, int M) {
    return M == 1 && L->is_moe && !e->ep && !e->tp && e->tp_expert_e1 <= e->tp_expert_e0 && e->be->add_rmsnorm &&
           e->fused_add_norm;
}

/* The next layer's input side (its input norm, its two projections into the engine's q or qa and kv) for the tail of
 * `layer` */
static ds_next_in next_input(ds_engine *e, int layer) {
    const ds_config *c = &e->cfg;
    const ds_layer_weights *N = &e->w.layers[layer + 1];
    return (ds_next_in){.in_norm = &N->input_norm, .wq = c->q_lora_rank ? &N->q_a : &N->q, .wkv = &N->kv_a,
                        .q = c->q_lora_rank ? e->a.qa : e->a.q, .kv = e->a.kv};
}

/* A MoE layer's tail (attn_out, then ffn) as the backend's one call for one token (layer_tail1), with the next
 * layer's input side up to its projections where next: 0 where it did not run (nothing done), 1 where it ran
 * without the next layer's part, 2 with it (h then holds ff already, and the next attention() starts after its
 * projections). */
static int layer_tail(ds_engine *e, int layer, int M, int next) {
    const ds_layer_weights *L = &e->w.layers[layer];
    ds_backend *be = e->be;
    if (!be->layer_tail1 || !one_call_layer(e, L, M)) return 0;
    ds_next_in nx = next ? next_input(e, layer) : (ds_next_in){0};
    return be->layer_tail1(be, e->a.xn, e->a.h, e->a.ff, e->a.ao, L, e->cfg.rms_norm_eps, next ? &nx : NULL, M);
}

/* A MoE layer for one token whose input side the previous layer's tail made up to its projections (projected), as the
 * backend's one call (layer1: the rest of attn_in, the absorbed attention, then layer_tail's work): its return as
 * layer_tail's (0: nothing done; the layer then runs as attention() and layer_tail). Only for the absorbed form of the
 * one sequence, without q_lora (whose q_b comes between). */
static int layer_whole(ds_engine *e, const step_plan *p, int layer, int M, int next) {
    const ds_layer_weights *L = &e->w.layers[layer];
    ds_backend *be = e->be;
    ds_acts *a = &e->a;
    if (!be->layer1 || !be->layer_tail1 || e->cfg.q_lora_rank || p->meta.n_seqs != 1 || p->n_absorbed != 1 ||
        p->n_naive || !one_call_layer(e, L, M))
        return 0;
    ds_next_in nx = next ? next_input(e, layer) : (ds_next_in){0};
    return be->layer1(be, a->xn, a->h, a->ff, a->ao, a->q, a->kv, ds_engine_layer_cache(e, layer), L, e->cfg.rms_norm_eps,
                      1e-6f, next ? &nx : NULL, M);
}

/* h += ff, then xn = RMSNorm(h) * w: one op where the backend fuses them (DSINFER_FUSED_ADD_NORM=0: two). */
static void add_norm(ds_engine *e, const ds_weight *w, int M) {
    ds_backend *be = e->be;
    int D = e->cfg.hidden_size;
    float eps = e->cfg.rms_norm_eps;
    if (be->add_rmsnorm && e->fused_add_norm) {
        be->add_rmsnorm(be, e->a.xn, e->a.h, e->a.ff, w, M, D, eps);
        return;
    }
    be->add(be, e->a.h, e->a.ff, (size_t)M * D);
    be->rmsnorm(be, e->a.xn, D, e->a.h, D, w, M, D, eps);
}

/* Layers [l0, l1) on the residual stream e->a.h. */
static void run_layer_range(ds_engine *e, const step_plan *p, int l0, int l1) {
    const ds_config *c = &e->cfg;
    ds_backend *be = e->be;
    int M = p->meta.n_tokens, D = c->hidden_size;
    int projected = 0;   /* the previous layer's tail made this layer's input side up to its projections */
    for (int l = l0; l < l1; l++) {
        const ds_layer_weights *L = &e->w.layers[l];
        int whole = projected ? layer_whole(e, p, l, M, l + 1 < l1) : 0;   /* the whole layer in one call */
        if (whole) {
            projected = whole == 2;
            if (be->prefetch_layer && l + 1 < l1 && !projected) be->prefetch_layer(be, &e->w.layers[l + 1]);
            continue;
        }
        attention(e, p, l, l > l0, projected);   /* after the first: h += the previous layer's ff, in its input norm */
        int tail = layer_tail(e, l, M, l + 1 < l1);
        projected = tail == 2;
        if (!tail) {
            attn_out(e, L, M);
            ffn(e, l, M, l + 1 < l1 && attn_in_one_call(e, 1));   /* (prefetch_layer below does not read ff) */
        }
        /* the next layer's dense weights towards the cache now: its routed experts would evict them if sooner (not
         * where the tail has read its projections already) */
        if (be->prefetch_layer && l + 1 < l1 && !projected) be->prefetch_layer(be, &e->w.layers[l + 1]);
    }
    if (l0 < l1) be->add(be, e->a.h, e->a.ff, (size_t)M * D);
}

static void run_layers(ds_engine *e, const step_plan *p) {
    e->be->embed(e->be, e->a.h, &e->w.embed);
    run_layer_range(e, p, 0, e->cfg.num_layers);
}

/* Pipeline: n floats of buf go from stage `from` to stage `to` (every stage takes part in the call). */
static void pp_pass(ds_engine *e, int from, int to, float *buf, size_t n) {
    ds_comm *c = e->pp;
    size_t z[64 * 4] = {0}, *sb = z, *so = z + 64, *rb = z + 128, *ro = z + 192;
    if (c->rank == from) sb[to] = n * sizeof(float);
    if (c->rank == to) rb[from] = n * sizeof(float);
    char err[DS_ERRLEN];
    ds_status st = c->all_to_all_v(c, buf, sb, so, buf, rb, ro, err);
    keep_step_error(e, st, err);
}

static void head(ds_engine *e, const step_plan *p);

/* One step of a pipeline stage: stage 0 embeds; each stage runs its layers after the previous one's
 * hidden state arrived and hands its own on; the last stage's logits go back to stage 0. */
static void pp_step(ds_engine *e, const step_plan *p) {
    int R = e->pp->size, r = e->pp->rank;
    size_t hd = (size_t)p->meta.n_tokens * (size_t)e->cfg.hidden_size;
    if (r == 0) {
        e->be->embed(e->be, e->a.h, &e->w.embed);
        run_layer_range(e, p, e->layer_begin, e->layer_end);
    }
    for (int s = 0; s + 1 < R; s++) {
        pp_pass(e, s, s + 1, e->a.h, hd);
        if (r == s + 1) run_layer_range(e, p, e->layer_begin, e->layer_end);
    }
    if (r == R - 1) head(e, p);
    if (R > 1) pp_pass(e, R - 1, 0, e->a.logits, (size_t)p->n_out * (size_t)e->cfg.vocab_size);
}

/* 1 when the logits rows are every token in order (decode steps): no gather needed. */
static int rows_are_all(const step_plan *p) {
    if (p->n_out != p->meta.n_tokens) return 0;
    for (int i = 0; i < p->n_out; i++)
        if (p->out_rows[i] != i) return 0;
    return 1;
}

/* Final norm and lm_head over the rows asked for (the logits stay in backend memory). */
static void head(ds_engine *e, const step_plan *p) {
    const ds_config *c = &e->cfg;
    ds_backend *be = e->be;
    int D = c->hidden_size, R = p->n_out;
    const float *rows = e->a.h;
    if (!rows_are_all(p)) {
        be->gather_rows(be, e->a.ff, e->a.h, p->out_rows, R, D);
        rows = e->a.ff;
    }
    normed_linear(e, e->a.logits, e->a.xn, rows, &e->w.final_norm, c->rms_norm_eps, &e->w.lm_head, R);
}

typedef struct {
    ds_engine *e;
    const step_plan *p;
} step_ctx;

static void step_fn(void *ctx) {
    step_ctx *s = ctx;
    if (s->e->pp) {
        pp_step(s->e, s->p);
        return;
    }
    run_layers(s->e, s->p);
    head(s->e, s->p);
}

/* The layers and the head, as a replayed graph for decode steps when the backend has them (the key
 * names everything the captured ops bake in), else directly. */
/* Gathered expert parallelism: every rank learns the group's largest token count of this step (one host
 * exchange a step; every rank's forward or idle step makes it once). */
static ds_status ep_agree_rows(ds_engine *e, int M, char *err) {
    if (!e->ep || !e->ep_gather) return DS_OK;
    ds_comm *cm = e->ep->comm;
    int64_t send[64], recv[64];
    for (int r = 0; r < cm->size; r++) send[r] = M;
    ds_status st = cm->exchange_counts(cm, send, recv, err);
    int mx = 0;
    for (int r = 0; r < cm->size && !st; r++) mx = recv[r] > mx ? (int)recv[r] : mx;
    e->ep_mmax = mx;
    return st;
}

/* 1 when this step may be a replayed graph under gathered expert parallelism: every rank has the same
 * token count (no padding, which copies through the host), and DSINFER_EP_GRAPHS is not 0 */
static int ep_graph_ok(const ds_engine *e, int M) {
    const char *v = getenv("DSINFER_EP_GRAPHS");
    return e->ep && e->ep_gather && !e->tp && !e->pp && M == e->ep_mmax && !(v && !strcmp(v, "0"));
}

static ds_status run_step(ds_engine *e, const step_plan *p, char *err) {
    step_ctx s = {e, p};
    ds_status ast = ep_agree_rows(e, p->meta.n_tokens, err);
    if (ast) return ast;
    int ep_graph = ep_graph_ok(e, p->meta.n_tokens);
    /* tensor parallelism on a rank of its own (one process per GPU): the all-reduces are collectives on
     * the backend's stream, captured with the step (DSINFER_TP_GRAPHS=0: eager); the thread group of the
     * CPU backend has no graphs anyway */
    const char *tg = getenv("DSINFER_TP_GRAPHS");
    int tp_graph = e->tp && e->tp_sliced && !e->ep && !e->pp && !(tg && !strcmp(tg, "0"));
    if ((e->ep && !ep_graph) || (e->tp && !tp_graph) || e->pp) {   /* host routing, exchanges: not captured */
        e->step_st = DS_OK;
        step_fn(&s);
        if (e->step_st) return ds_seterr(err, e->step_st, "%s", e->step_err);
        return DS_OK;
    }
    if (!e->be->run_graph || !rows_are_all(p) || p->n_naive || p->meta.n_tokens != p->meta.n_seqs) {
        e->step_st = DS_OK;
        step_fn(&s);
        if (e->step_st) return ds_seterr(err, e->step_st, "%s", e->step_err);
        return DS_OK;
    }
    uint64_t vals[] = {(uint64_t)p->meta.n_tokens, (uint64_t)p->meta.n_seqs, (uint64_t)p->meta.pt_stride,
                       (uint64_t)(uintptr_t)e->a.h, (uint64_t)e->a.cap, (uint64_t)(uintptr_t)e->cache};
    uint64_t key = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) key = (key ^ vals[i]) * 1099511628211ull;
    e->step_st = DS_OK;
    ds_status st = e->be->run_graph(e->be, key, step_fn, &s, err);
    if (!st && e->step_st) return ds_seterr(err, e->step_st, "%s", e->step_err);   /* an exchange that failed while captured or run */
    return st;
}

ds_status ds_engine_forward_idle(ds_engine *e, char *err) {
    if (!e->ep) return ds_seterr(err, DS_ERR_ARG, "an idle step is for expert-parallel engines");
    ds_status ast = ep_agree_rows(e, 0, err);
    if (ast) return ast;
    e->step_st = DS_OK;
    for (int l = 0; l < e->cfg.num_layers; l++)
        if (e->w.layers[l].is_moe) ep_moe(e, &e->w.layers[l], NULL, NULL, 0);
    if (e->step_st) return ds_seterr(err, e->step_st, "%s", e->step_err);
    return DS_OK;
}

ds_status ds_engine_set_pipeline_stage(ds_engine *e, ds_comm *comm, char *err) {
    int L = e->cfg.num_layers, R = comm->size, r = comm->rank;
    if (e->ep || e->tp || e->pp) return ds_seterr(err, DS_ERR_ARG, "pipeline parallel: the engine is already parallel");
    if (R < 1 || R > 64 || R > L)
        return ds_seterr(err, DS_ERR_ARG, "pipeline parallel %d: the model has %d layers", R, L);
    if (e->pp_cut_size && (e->pp_cut_size != R || e->pp_cut_rank != r))
        return ds_seterr(err, DS_ERR_ARG, "pipeline parallel: the engine was opened as stage %d of %d, joins as stage %d of %d",
                         e->pp_cut_rank, e->pp_cut_size, r, R);
    if (!e->pp_cut_size && strcmp(e->be->name, "cpu") != 0)   /* a whole model on each GPU: open it as one stage */
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "pipeline parallel on the %s backend: open the engine as one stage "
                         "(opts.pipeline_parallel_one_rank), its layers cut before they reach the device", e->be->name);
    int begin = e->layer_begin, end = e->layer_end;
    e->layer_begin = r * L / R;
    e->layer_end = (r + 1) * L / R;
    ds_status st = ds_engine_restrict_cache(e, R, err);   /* this stage's layers only, more pages */
    if (st) {
        e->layer_begin = begin;
        e->layer_end = end;
        return st;
    }
    e->pp = comm;
    return DS_OK;
}

ds_status ds_engine_set_expert_parallel(ds_engine *e, const ds_ep *ep, char *err) {
    const ds_config *c = &e->cfg;
    if (!ep || !ep->comm || !ep->pl) return ds_seterr(err, DS_ERR_ARG, "expert parallel: no communicator or placement");
    if (ep->pl->n_experts != c->n_routed_experts || ep->pl->n_ranks != ep->comm->size)
        return ds_seterr(err, DS_ERR_ARG, "expert parallel: placement of %d experts over %d ranks, model has %d experts, "
                         "group %d ranks", ep->pl->n_experts, ep->pl->n_ranks, c->n_routed_experts, ep->comm->size);
    for (int l = 0; l < c->num_layers; l++) {
        const ds_weight *b = &e->w.layers[l].router_bias;
        if (e->w.layers[l].is_moe && b->data && b->dtype != DS_DTYPE_F32)
            return ds_seterr(err, DS_ERR_UNSUPPORTED, "expert parallel: layer %d router bias is %s, not F32", l,
                             ds_dtype_name(b->dtype));
    }
    if (e->ep_trim_size) {   /* opened with only this rank's experts: they must be the ones it serves */
        const ds_ep_placement *pl = ep->pl;
        if (pl->n_ranks != e->ep_trim_size || ep->comm->rank != e->ep_trim_rank)
            return ds_seterr(err, DS_ERR_ARG, "expert parallel: the engine was opened as rank %d of %d, joins as rank %d "
                             "of %d", e->ep_trim_rank, e->ep_trim_size, ep->comm->rank, pl->n_ranks);
        for (int l = 0; l < c->num_layers; l++) {
            const ds_layer_weights *L = &e->w.layers[l];
            for (int s = 0; L->is_moe && s < pl->rank_n_slots[ep->comm->rank]; s++) {
                int x = pl->rank_experts[(size_t)ep->comm->rank * pl->max_slots + s];
                if (!L->exp_gate[x].data)
                    return ds_seterr(err, DS_ERR_ARG, "expert parallel: rank %d serves expert %d, which this engine did not "
                                     "load (a placement with replicas needs the engine opened with all experts)",
                                     ep->comm->rank, x);
            }
        }
    }
    e->ep = ep;
    int e0, e1;
    const char *g = getenv("DSINFER_EP_GATHER");
    e->ep_gather = ds_ep_gather_ok(ep, e->be, &e0, &e1) && !(g && !strcmp(g, "0"));
    return DS_OK;
}

ds_status ds_engine_forward(ds_engine *e, const ds_batch_item *it, int n, float *logits, char *err) {
    if (e->tpg) return ds_tp_forward(e, it, n, logits, err);
    return ds_engine_forward_local(e, it, n, logits, err);
}

ds_status ds_engine_forward_local(ds_engine *e, const ds_batch_item *it, int n, float *logits, char *err) {
    if (e->tp_sliced && !e->tp)
        return ds_seterr(err, DS_ERR_ARG, "this engine holds only its tensor-parallel share (rank %d of %d): it steps "
                         "only after joining its group", e->tp_rank, e->tp_size);
    if (e->pp_cut_size && !e->pp)
        return ds_seterr(err, DS_ERR_ARG, "this engine holds only pipeline stage %d of %d: it steps only after joining "
                         "its group", e->pp_cut_rank, e->pp_cut_size);
    if (e->ep_trim_size && !e->ep)
        return ds_seterr(err, DS_ERR_ARG, "this engine holds only its share of the routed experts (expert parallel rank %d "
                         "of %d): it steps only after joining its group", e->ep_trim_rank, e->ep_trim_size);
    ds_status st = validate_items(e, it, n, err);
    if (st) return st;
    int *old_n_pages = ds_xmalloc(sizeof(int) * (size_t)n);
    st = reserve_pages(e, it, n, old_n_pages, err);
    step_plan p = {0};
    if (!st) {
        build_plan(e, it, n, &p);
        st = ds_engine_reserve_acts(e, p.meta.n_tokens, err);
    }
    if (!st) st = e->be->set_batch(e->be, &p.meta, err);
    if (!st) st = run_step(e, &p, err);
    if (!st) {
        e->be->to_host(e->be, logits, e->a.logits, (size_t)p.n_out * e->cfg.vocab_size);
        for (int i = 0; i < n; i++) it[i].seq->len += it[i].n_tokens;
    } else {
        for (int i = 0; i < n; i++)
            while (it[i].seq->n_pages > old_n_pages[i]) ds_engine_release_page(e, it[i].seq->pages[--it[i].seq->n_pages]);
    }
    free(old_n_pages);
    plan_free(&p);
    return st;
}
