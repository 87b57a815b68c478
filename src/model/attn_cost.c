/* Attention form by measured cost: see attn_cost.h. */
#include "model/attn_cost.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/engine.h"

double ds_attn_macs_naive(const ds_config *c, double T, double L) {
    double H = c->num_heads, C = c->kv_lora_rank, dn = c->qk_nope_head_dim, dv = c->v_head_dim, dr = c->qk_rope_head_dim;
    return L * H * (dn + dv) * C + T * L * H * (dn + dr + dv);
}

double ds_attn_macs_absorbed(const ds_config *c, double T, double L) {
    double H = c->num_heads, C = c->kv_lora_rank, dn = c->qk_nope_head_dim, dv = c->v_head_dim, dr = c->qk_rope_head_dim;
    return T * H * (dn + dv) * C + T * L * H * (2 * C + dr);
}

ds_attn_cost ds_attn_cost_model_only(void) {
    ds_attn_cost m = {0, 1, 0, 1, 0};
    return m;
}

double ds_attn_cost_naive(const ds_attn_cost *m, const ds_config *c, double T, double L) {
    return m->naive_fixed + m->naive_per_mac * ds_attn_macs_naive(c, T, L);
}

double ds_attn_cost_absorbed(const ds_attn_cost *m, const ds_config *c, double T, double L) {
    return m->abs_fixed + m->abs_per_mac * ds_attn_macs_absorbed(c, T, L);
}

int ds_attn_prefers_absorbed(const ds_attn_cost *m, const ds_config *c, int T, int L) {
    if (T <= 1) return 1;
    return ds_attn_cost_absorbed(m, c, T, L) < ds_attn_cost_naive(m, c, T, L);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Best of 3 wall times of one form for the batch set on the backend (to_host of one float waits for
 * an asynchronous backend). */
static double time_form(ds_engine *e, int absorbed) {
    ds_backend *be = e->be;
    const ds_layer_weights *L = &e->w.layers[0];
    void *cache = ds_engine_layer_cache(e, 0);
    int seq = 0;
    float sink;
    double best = 1e30;
    for (int r = 0; r < 4; r++) {   /* the first run warms up (workspaces, cuBLAS's choices) */
        double t0 = now_s();
        if (absorbed) be->attn_absorbed(be, e->a.ao, e->a.q, cache, &L->kv_b, &seq, 1);
        else be->attn_naive(be, e->a.ao, e->a.q, cache, &L->kv_b, &seq, 1);
        be->to_host(be, &sink, e->a.ao, 1);
        double t = now_s() - t0;
        if (r > 0 && t < best) best = t;
    }
    return best;
}

/* fixed + per_mac * macs through the two points (a negative intercept or slope is measurement noise:
 * clamped to zero, then the slope refitted through the larger point) */
static void fit(double m1, double t1, double m2, double t2, double *fixed, double *per_mac) {
    double slope = m2 > m1 ? (t2 - t1) / (m2 - m1) : 0;
    double icpt = t1 - slope * m1;
    if (slope <= 0 || icpt < 0) {
        icpt = slope <= 0 ? (t1 < t2 ? t1 : t2) : 0;
        slope = slope <= 0 ? 0 : t2 / m2;
    }
    *fixed = icpt;
    *per_mac = slope;
}

ds_status ds_attn_cost_measure(ds_engine *e, ds_attn_cost *out, char *err) {
    const ds_config *c = &e->cfg;
    int ps = e->page_size, free_pages = ds_kv_pool_free_count(e->pool);
    int L2 = 512;
    if (L2 > c->max_position_embeddings) L2 = c->max_position_embeddings;
    if (L2 > free_pages * ps) L2 = free_pages * ps;
    if (L2 < 8) return ds_seterr(err, DS_ERR_NOMEM, "attention cost: no KV pages free to measure with");
    int L1 = L2 / 4, T1 = 4, T2 = L2 / 8 < 64 ? L2 / 8 : 64;
    int n_pages = (L2 + ps - 1) / ps;
    ds_status st = ds_engine_reserve_acts(e, T2, err);
    if (st) return st;
    int32_t *pt = ds_xmalloc(sizeof(int32_t) * (size_t)n_pages), *tok = ds_xcalloc((size_t)T2, sizeof(int32_t));
    int32_t *pos = ds_xmalloc(sizeof(int32_t) * (size_t)T2);
    for (int i = 0; i < n_pages; i++) pt[i] = ds_kv_pool_take(e->pool);
    size_t H = (size_t)c->num_heads;
    e->be->fill_nan(e->be, e->a.q, (size_t)T2 * H * (size_t)c->qk_head_dim);
    struct { int T, L; double t_naive, t_abs; } pts[2] = {{T1, L1, 0, 0}, {T2, L2, 0, 0}};
    for (int k = 0; k < 2 && !st; k++) {
        int T = pts[k].T, L = pts[k].L;
        for (int t = 0; t < T; t++) pos[t] = L - T + t;
        int32_t start[2] = {0, T}, ctx[1] = {L};
        ds_batch_meta b = {.n_tokens = T, .n_seqs = 1, .tokens = tok, .positions = pos, .seq_start = start,
                           .seq_ctx = ctx, .page_table = pt, .pt_stride = n_pages, .page_size = ps};
        st = e->be->set_batch(e->be, &b, err);
        if (st) break;
        pts[k].t_naive = time_form(e, 0);
        pts[k].t_abs = time_form(e, 1);
    }
    for (int i = 0; i < n_pages; i++) ds_engine_release_page(e, pt[i]);   /* refilled with NaN */
    free(pt);
    free(tok);
    free(pos);
    if (st) return st;
    ds_attn_cost m = {0, 0, 0, 0, 1};
    fit(ds_attn_macs_naive(c, T1, L1), pts[0].t_naive, ds_attn_macs_naive(c, T2, L2), pts[1].t_naive, &m.naive_fixed,
        &m.naive_per_mac);
    fit(ds_attn_macs_absorbed(c, T1, L1), pts[0].t_abs, ds_attn_macs_absorbed(c, T2, L2), pts[1].t_abs, &m.abs_fixed,
        &m.abs_per_mac);
    *out = m;
    return DS_OK;
}
