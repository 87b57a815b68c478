/* Expert-parallel MoE block: see ep_moe.h. Host arrays hold the routing and the exchange plans; rows
 * stay in backend memory, in the ds_ep's workspace when it has one (else allocated per call); running
 * out of backend memory here aborts (a rank cannot leave the exchange half way). */
#include "dist/ep_moe.h"

#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"   /* ds_route_token: the routing rules, one token at a time */
#include "core/status.h"

/* The call's buffers: from the workspace (kept) or allocated now (released by bfree). */
typedef struct {
    ds_backend *be;
    ds_ep_ws *ws;
    float *p[DS_EP_WS_SLOTS];
    int n;
} bufset;
enum { B_LOGITS, B_SEND_X, B_RECV_X, B_SLOT_S, B_SLOT_R, B_GRP_X, B_GRP_Y, B_BACK, B_PAIRS, B_W, B_REC_S, B_REC_R };

static float *bnew(bufset *b, int slot, size_t n_floats) {
    size_t n = n_floats ? n_floats : 1;
    ds_ep_ws *ws = b->ws;
    if (ws) {
        if (ws->cap[slot] < n) {
            if (ws->p[slot]) b->be->release(b->be, ws->p[slot]);
            ws->p[slot] = b->be->alloc(b->be, n);
            ws->cap[slot] = ws->p[slot] ? n : 0;
        }
        return ws->p[slot];
    }
    float *p = b->be->alloc(b->be, n);
    if (p) b->p[b->n++] = p;
    return p;
}

static void bfree(bufset *b) {
    for (int i = 0; i < b->n; i++) b->be->release(b->be, b->p[i]);
    b->n = 0;
}

void ds_ep_ws_free(ds_ep_ws *ws) {
    if (!ws) return;
    for (int i = 0; i < DS_EP_WS_SLOTS; i++)
        if (ws->p[i]) ws->be->release(ws->be, ws->p[i]);
    free(ws);
}

/* ids[M, K], w[M, K] on the host from the router logits of x. */
static ds_status route(ds_backend *be, bufset *bs, const float *x, const ds_layer_weights *L, int M, int32_t *ids,
                       float *w, char *err) {
    const ds_config *c = be->cfg;
    int E = c->n_routed_experts, K = c->num_experts_per_tok;
    float *d_logits = bnew(bs, B_LOGITS, (size_t)M * E);
    if (!d_logits) return ds_seterr(err, DS_ERR_NOMEM, "expert parallel: cannot allocate router logits");
    be->linear(be, d_logits, x, &L->router, M);
    float *logits = ds_xmalloc(sizeof(float) * ((size_t)M * E + 3 * (size_t)E));
    float *bias = NULL, *scratch = logits + (size_t)M * E + E;
    be->to_host(be, logits, d_logits, (size_t)M * E);
    if (L->router_bias.data) {
        if (L->router_bias.dtype != DS_DTYPE_F32 || L->router_bias.rows * L->router_bias.cols != E) {
            free(logits);
            return ds_seterr(err, DS_ERR_UNSUPPORTED, "expert parallel: router bias is not F32 [%d]", E);
        }
        bias = logits + (size_t)M * E;
        be->to_host(be, bias, (const float *)L->router_bias.data, (size_t)E);
    }
    for (int m = 0; m < M; m++)
        ds_route_token(c, logits + (size_t)m * E, bias, ids + (size_t)m * K, w + (size_t)m * K, scratch);
    free(logits);
    return DS_OK;
}

/* byte counts and offsets of n[r] rows of `row` bytes */
static void bytes_of(const int64_t *n, int R, size_t row, size_t *bytes, size_t *off) {
    size_t o = 0;
    for (int r = 0; r < R; r++) {
        bytes[r] = (size_t)n[r] * row;
        off[r] = o;
        o += bytes[r];
    }
}

ds_status ds_ep_moe(const ds_ep *ep, ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int M,
                    char *err) {
    const ds_config *c = be->cfg;
    const ds_ep_placement *pl = ep->pl;
    ds_comm *cm = ep->comm;
    int K = c->num_experts_per_tok, D = c->hidden_size, R = cm->size, me = cm->rank, n = M * K;
    if (K > 64) return ds_seterr(err, DS_ERR_UNSUPPORTED, "expert parallel: top-%d routing (at most 64)", K);
    if (pl->n_ranks != R || pl->n_experts != c->n_routed_experts)
        return ds_seterr(err, DS_ERR_ARG, "expert parallel: placement for %d ranks / %d experts, group of %d, model %d",
                         pl->n_ranks, pl->n_experts, R, c->n_routed_experts);
    bufset bs = {be, ep->ws, {0}, 0};
    int32_t *ids = ds_xmalloc(sizeof(int32_t) * (size_t)(n + 1));
    float *w = ds_xmalloc(sizeof(float) * (size_t)(n + 1));
    int64_t *send_n = ds_xcalloc((size_t)R, sizeof(int64_t)), *recv_n = ds_xcalloc((size_t)R, sizeof(int64_t));
    size_t *sb = ds_xcalloc((size_t)R * 4, sizeof(size_t)), *so = sb + R, *rb = so + R, *ro = rb + R;
    ds_ep_dispatch d;
    memset(&d, 0, sizeof d);
    int32_t *rslot = NULL, *perm = NULL, *inv = NULL, *idx = NULL;
    ds_status st = M > 0 ? route(be, &bs, x, L, M, ids, w, err) : DS_OK;
    if (!st) st = ds_ep_plan_dispatch(pl, ids, M, K, &d, err);
    /* 1. counts, then the rows and their destination slots */
    /* From here every rank makes every collective call, whatever failed locally (counts are then zero),
     * so a local error never leaves the other ranks waiting. */
    for (int r = 0; r < R && !st; r++) send_n[r] = d.send_count[r];
    ds_status cst = cm->exchange_counts(cm, send_n, recv_n, err);
    if (!st) st = cst;
    int64_t n_recv = 0;
    for (int r = 0; r < R; r++) n_recv += recv_n[r];
    float *send_x = NULL, *recv_x = NULL, *slot_s = NULL, *slot_r = NULL, *grp_x = NULL, *grp_y = NULL;
    float *back = NULL, *pairs = NULL, *d_w = NULL, *rec_s = NULL, *rec_r = NULL;
    int fp8 = ep->fp8_dispatch && D % 128 == 0 && be->quant_rows_fp8 && be->dequant_rows_fp8;
    size_t row_bytes = fp8 ? DS_FP8_ROW_BYTES(D) : sizeof(float) * (size_t)D;
    {
        send_x = bnew(&bs, B_SEND_X, (size_t)n * D);
        recv_x = bnew(&bs, B_RECV_X, (size_t)n_recv * D);
        slot_s = bnew(&bs, B_SLOT_S, (size_t)n);
        slot_r = bnew(&bs, B_SLOT_R, (size_t)n_recv);
        grp_x = bnew(&bs, B_GRP_X, (size_t)n_recv * D);
        grp_y = bnew(&bs, B_GRP_Y, (size_t)n_recv * D);
        back = bnew(&bs, B_BACK, (size_t)n * D);
        pairs = bnew(&bs, B_PAIRS, (size_t)n * D);
        d_w = bnew(&bs, B_W, (size_t)n);
        if (fp8) {
            rec_s = bnew(&bs, B_REC_S, (size_t)n * row_bytes / sizeof(float));
            rec_r = bnew(&bs, B_REC_R, (size_t)n_recv * row_bytes / sizeof(float));
            DS_CHECK(rec_s && rec_r);
        }
        DS_CHECK(send_x && recv_x && slot_s && slot_r && grp_x && grp_y && back && pairs && d_w);   /* see above */
    }
    if (!st && n && d.pair) {
        int32_t *src = ds_xmalloc(sizeof(int32_t) * (size_t)n);
        for (int i = 0; i < n; i++) src[i] = d.pair[i] / K;
        be->gather_rows(be, send_x, x, src, n, D);
        if (fp8) be->quant_rows_fp8(be, rec_s, send_x, n, D);
        free(src);
        be->from_host(be, slot_s, (const float *)(const void *)d.slot, (size_t)n);   /* int32 bits */
    }
    bytes_of(send_n, R, row_bytes, sb, so);
    bytes_of(recv_n, R, row_bytes, rb, ro);
    cst = cm->all_to_all_v(cm, fp8 ? rec_s : send_x, sb, so, fp8 ? rec_r : recv_x, rb, ro, err);
    if (!st) st = cst;
    if (!st && fp8) be->dequant_rows_fp8(be, recv_x, rec_r, (int)n_recv, D);
    bytes_of(send_n, R, sizeof(int32_t), sb, so);
    bytes_of(recv_n, R, sizeof(int32_t), rb, ro);
    cst = cm->all_to_all_v(cm, slot_s, sb, so, slot_r, rb, ro, err);
    if (!st) st = cst;
    /* 2. this rank's experts over the rows received, grouped by local slot */
    int S = pl->rank_n_slots[me];
    int64_t *seg = ds_xcalloc((size_t)pl->max_slots + 1, sizeof(int64_t));
    if (!st && n_recv) {
        rslot = ds_xmalloc(sizeof(int32_t) * (size_t)n_recv);
        perm = ds_xmalloc(sizeof(int32_t) * (size_t)n_recv);
        inv = ds_xmalloc(sizeof(int32_t) * (size_t)n_recv);
        be->to_host(be, (float *)(void *)rslot, slot_r, (size_t)n_recv);
        for (int64_t i = 0; i < n_recv && !st; i++)
            if (rslot[i] < 0 || rslot[i] >= S)
                st = ds_seterr(err, DS_ERR_ARG, "expert parallel: rank %d received slot %d, it has %d", me, rslot[i], S);
            else
                seg[rslot[i] + 1]++;
        for (int s = 0; s < pl->max_slots; s++) seg[s + 1] += seg[s];
        int64_t *fill = ds_xcalloc((size_t)pl->max_slots, sizeof(int64_t));
        for (int64_t i = 0; i < n_recv && !st; i++) {
            int64_t at = seg[rslot[i]] + fill[rslot[i]]++;
            perm[at] = (int32_t)i;
            inv[i] = (int32_t)at;
        }
        free(fill);
        if (!st) {
            be->gather_rows(be, grp_x, recv_x, perm, (int)n_recv, D);
            for (int s = 0; s < S; s++) {
                int cnt = (int)(seg[s + 1] - seg[s]), e = pl->rank_experts[(size_t)me * pl->max_slots + s];
                if (cnt > 0)
                    be->mlp(be, grp_y + seg[s] * D, grp_x + seg[s] * D, &L->exp_gate[e], &L->exp_up[e],
                            &L->exp_down[e], cnt);
            }
            be->gather_rows(be, recv_x, grp_y, inv, (int)n_recv, D);   /* outputs back in received order */
        }
    }
    free(seg);
    /* 3. outputs back to the ranks that sent the rows */
    bytes_of(recv_n, R, sizeof(float) * (size_t)D, sb, so);
    bytes_of(send_n, R, sizeof(float) * (size_t)D, rb, ro);
    cst = cm->all_to_all_v(cm, recv_x, sb, so, back, rb, ro, err);
    if (!st) st = cst;
    /* 4. combine: per token its choices in ascending expert order (the CPU MoE's order), after the shared
     * experts */
    if (!st && M > 0) {
        int32_t *at_send = ds_xmalloc(sizeof(int32_t) * (size_t)n);
        idx = ds_xmalloc(sizeof(int32_t) * (size_t)n);
        float *ws = ds_xmalloc(sizeof(float) * (size_t)n);
        for (int i = 0; i < n; i++) at_send[d.pair[i]] = i;
        for (int t = 0; t < M; t++) {
            int k_of[64], nk = K < 64 ? K : 64;
            for (int k = 0; k < nk; k++) k_of[k] = k;
            for (int a = 1; a < nk; a++)   /* insertion sort of the K choices by expert id */
                for (int b = a; b > 0 && ids[(size_t)t * K + k_of[b]] < ids[(size_t)t * K + k_of[b - 1]]; b--) {
                    int tmp = k_of[b];
                    k_of[b] = k_of[b - 1];
                    k_of[b - 1] = tmp;
                }
            for (int j = 0; j < nk; j++) {
                idx[(size_t)t * K + j] = at_send[(size_t)t * K + k_of[j]];
                ws[(size_t)t * K + j] = w[(size_t)t * K + k_of[j]];
            }
        }
        be->gather_rows(be, pairs, back, idx, n, D);
        be->from_host(be, d_w, ws, (size_t)n);
        int shared = c->n_shared_experts > 0;
        if (shared) be->mlp(be, out, x, &L->sh_gate, &L->sh_up, &L->sh_down, M);
        be->combine_rows(be, out, pairs, d_w, M, K, D, shared);
        free(at_send);
        free(ws);
    }
    bfree(&bs);
    ds_ep_dispatch_free(&d);
    free(ids); free(w); free(send_n); free(recv_n); free(sb);
    free(rslot); free(perm); free(inv); free(idx);
    return st;
}

int ds_ep_gather_ok(const ds_ep *ep, const ds_backend *be, int *e0, int *e1) {
    const ds_comm *cm = ep->comm;
    const ds_ep_placement *pl = ep->pl;
    if (!be->moe_routed || !cm->all_gather || !cm->reduce_scatter_sum || pl->redundant_slots) return 0;
    int r = cm->rank, n = pl->rank_n_slots[r], lo = pl->n_experts, hi = -1;
    for (int s = 0; s < n; s++) {
        int x = pl->rank_experts[(size_t)r * pl->max_slots + s];
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
    }
    if (n <= 0 || hi - lo + 1 != n) return 0;   /* not one contiguous range */
    *e0 = lo;
    *e1 = hi + 1;
    return 1;
}

ds_status ds_ep_moe_gathered(const ds_ep *ep, ds_backend *be, float *out, const float *x, const ds_layer_weights *L,
                             int M, int M_max, char *err) {
    int e0, e1;
    if (!ds_ep_gather_ok(ep, be, &e0, &e1))
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "expert parallel: the gathered form needs moe_routed, all-gather, "
                         "reduce-scatter and one contiguous expert range per rank");
    ds_comm *cm = ep->comm;
    const ds_config *c = be->cfg;
    int n = cm->size, D = c->hidden_size;
    size_t rows = (size_t)M_max * D;
    bufset bs = {be, ep->ws, {0}, 0};
    const float *send = x;
    if (M < M_max) {   /* this rank's rows, then zero rows up to M_max */
        float *pad = bnew(&bs, B_SEND_X, rows);
        if (M > 0) {
            int32_t *id = ds_xmalloc(sizeof(int32_t) * (size_t)M);
            for (int i = 0; i < M; i++) id[i] = i;
            be->gather_rows(be, pad, x, id, M, D);
            free(id);
        }
        float *z = ds_xcalloc(rows - (size_t)M * D, sizeof(float));
        be->from_host(be, pad + (size_t)M * D, z, rows - (size_t)M * D);
        free(z);
        send = pad;
    }
    float *xg = bnew(&bs, B_RECV_X, (size_t)n * rows), *yg = bnew(&bs, B_GRP_Y, (size_t)n * rows);
    float *y = bnew(&bs, B_BACK, rows);
    ds_status st = cm->all_gather(cm, send, xg, rows, err);
    if (!st) be->moe_routed(be, yg, xg, L, n * M_max, e0, e1);
    if (!st) st = cm->reduce_scatter_sum(cm, yg, y, rows, err);
    if (!st && M > 0) {
        if (c->n_shared_experts) be->mlp(be, out, x, &L->sh_gate, &L->sh_up, &L->sh_down, M);
        else {
            float *z = ds_xcalloc((size_t)M * D, sizeof(float));
            be->from_host(be, out, z, (size_t)M * D);
            free(z);
        }
        be->add(be, out, y, (size_t)M * D);
    }
    bfree(&bs);
    return st;
}
