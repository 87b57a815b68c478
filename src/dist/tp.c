/* Tensor parallelism: weight views and the engine's switch (see tp.h). */
#include "dist/tp.h"

#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/status.h"
#include "model/engine.h"

static size_t elem_bytes(const ds_weight *w) { return w->dtype == DS_DTYPE_NVFP4 ? 0 : ds_dtype_size(w->dtype); }

ds_status ds_weight_slice_rows(const ds_weight *w, int r0, int r1, ds_weight *out, char *err) {
    const char *nm = w->name ? w->name : "?";
    if (r0 < 0 || r1 > w->rows || r0 >= r1) return ds_seterr(err, DS_ERR_ARG, "%s: rows [%d, %d) of %d", nm, r0, r1, w->rows);
    if (w->data == DS_WEIGHT_DUMMY) {   /* made later on the device, with the whole tensor's values there */
        *out = *w;
        out->dummy_full_cols = w->dummy_full_cols ? w->dummy_full_cols : w->cols;
        out->dummy_r0 = w->dummy_r0 + r0;
        out->rows = r1 - r0;
        return DS_OK;
    }
    if (w->scale && r0 % 128)
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "%s: an FP8 slice must start on a 128-row block (row %d)", nm, r0);
    *out = *w;
    size_t ld = (size_t)(w->ld ? w->ld : w->cols);
    if (w->dtype == DS_DTYPE_NVFP4) {
        out->data = (const uint8_t *)w->data + (size_t)r0 * (ld / 2);
        out->block_scale = w->block_scale + (size_t)r0 * (ld / 16);
    } else {
        out->data = (const char *)w->data + (size_t)r0 * ld * elem_bytes(w);
    }
    if (w->scale) out->scale = w->scale + (size_t)(r0 / 128) * (size_t)w->scale_cols;
    out->rows = r1 - r0;
    return DS_OK;
}

ds_status ds_weight_slice_cols(const ds_weight *w, int c0, int c1, ds_weight *out, char *err) {
    const char *nm = w->name ? w->name : "?";
    if (c0 < 0 || c1 > w->cols || c0 >= c1) return ds_seterr(err, DS_ERR_ARG, "%s: columns [%d, %d) of %d", nm, c0, c1, w->cols);
    if (w->data == DS_WEIGHT_DUMMY) {   /* made later on the device, with the whole tensor's values there */
        *out = *w;
        out->dummy_full_cols = w->dummy_full_cols ? w->dummy_full_cols : w->cols;
        out->dummy_c0 = w->dummy_c0 + c0;
        out->cols = c1 - c0;
        if (w->scale) out->scale_cols = (out->cols + 127) / 128;
        return DS_OK;
    }
    if (w->scale && c0 % 128)
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "%s: an FP8 slice must start on a 128-column block (column %d)", nm, c0);
    if (w->dtype == DS_DTYPE_NVFP4 && (c0 % 16 || (c1 - c0) % 16))
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "%s: an NVFP4 slice must cover whole 16-column blocks", nm);
    *out = *w;
    out->ld = w->ld ? w->ld : w->cols;
    if (w->dtype == DS_DTYPE_NVFP4) {
        out->data = (const uint8_t *)w->data + c0 / 2;
        out->block_scale = w->block_scale + c0 / 16;
    } else {
        out->data = (const char *)w->data + (size_t)c0 * elem_bytes(w);
    }
    if (w->scale) out->scale = w->scale + c0 / 128;   /* scale_cols stays the full row's length */
    out->cols = c1 - c0;
    return DS_OK;
}

/* rows / columns [rank * n/R, (rank + 1) * n/R) of w, in place */
static ds_status rows_share(ds_weight *w, int R, int rank, char *err) {
    int n = w->rows / R;
    return ds_weight_slice_rows(w, rank * n, (rank + 1) * n, w, err);
}
static ds_status cols_share(ds_weight *w, int R, int rank, char *err) {
    int n = w->cols / R;
    return ds_weight_slice_cols(w, rank * n, (rank + 1) * n, w, err);
}

static ds_status slice_mlp(ds_weight *gate, ds_weight *up, ds_weight *down, int R, int r, char *err) {
    ds_status st = rows_share(gate, R, r, err);
    if (!st) st = rows_share(up, R, r, err);
    if (!st) st = cols_share(down, R, r, err);
    return st;
}

/* Expert parallelism inside the TP group: rank r keeps the routed experts r*E/R .. (r+1)*E/R - 1 whole and
 * forgets the others' views (the backend's MoE skips an expert without weights), so each rank adds its
 * experts' share for every token and the all-reduce after the MoE completes the sum. */
static void keep_own_experts(ds_layer_weights *L, int E, int R, int r) {
    for (int x = 0; x < E; x++)
        if (x < r * E / R || x >= (r + 1) * E / R) {
            memset(&L->exp_gate[x], 0, sizeof L->exp_gate[x]);
            memset(&L->exp_up[x], 0, sizeof L->exp_up[x]);
            memset(&L->exp_down[x], 0, sizeof L->exp_down[x]);
        }
}

/* Rank r of R keeps its share of the weights (views; dummy weights change shape) and the config its share
 * of the heads and widths. On error the engine is unusable. */
ds_status ds_tp_slice(ds_engine *e, int R, int r, int whole_experts, char *err) {
    ds_config *c = &e->cfg;
    if (R < 2 || R > 64 || r < 0 || r >= R) return ds_seterr(err, DS_ERR_ARG, "tensor parallel rank %d of %d", r, R);
    int I = c->intermediate_size, mI = c->moe_intermediate_size;
    if (c->num_heads % R || I % R || (c->n_routed_experts && !whole_experts && mI % R) ||
        (c->n_routed_experts && c->n_shared_experts && whole_experts && mI % R))
        return ds_seterr(err, DS_ERR_ARG, "tensor parallel %d: %d heads, intermediate %d, expert intermediate %d do not "
                         "split evenly", R, c->num_heads, I, mI);
    int hw = c->qk_nope_head_dim + c->v_head_dim;
    ds_status st = DS_OK;
    for (int l = 0; l < c->num_layers && !st; l++) {
        ds_layer_weights *L = &e->w.layers[l];
        st = rows_share(c->q_lora_rank ? &L->q_b : &L->q, R, r, err);   /* [H * dqk, .] by heads */
        if (!st) st = rows_share(&L->kv_b, R, r, err);                  /* [H * (dn + dv), C] by heads */
        if (!st && L->kv_b.rows % hw) st = ds_seterr(err, DS_ERR_ARG, "tensor parallel: kv_b rows not whole heads");
        if (!st) st = cols_share(&L->o, R, r, err);                     /* [D, H * dv] by heads */
        if (!st && !L->is_moe) st = slice_mlp(&L->gate, &L->up, &L->down, R, r, err);
        if (L->is_moe && whole_experts) keep_own_experts(L, c->n_routed_experts, R, r);
        for (int x = 0; !st && L->is_moe && !whole_experts && x < c->n_routed_experts; x++)
            st = slice_mlp(&L->exp_gate[x], &L->exp_up[x], &L->exp_down[x], R, r, err);
        if (!st && L->is_moe && c->n_shared_experts) st = slice_mlp(&L->sh_gate, &L->sh_up, &L->sh_down, R, r, err);
    }
    if (st) return st;   /* the engine is then unusable: the caller frees it */
    c->num_heads /= R;
    c->intermediate_size /= R;
    if (!whole_experts) c->moe_intermediate_size /= R;   /* whole experts keep their width (the shared one
                                                           is sliced by its own weight rows) */
    e->tp_size = R;
    e->tp_rank = r;
    if (whole_experts && c->n_routed_experts) {   /* forward.c runs this range with be->moe_routed */
        e->tp_expert_e0 = r * c->n_routed_experts / R;
        e->tp_expert_e1 = (r + 1) * c->n_routed_experts / R;
    }
    ds_engine_drop_acts(e);   /* widths changed (heads, and ff2 for whole experts) */
    return DS_OK;
}

ds_status ds_engine_set_tensor_parallel(ds_engine *e, ds_comm *comm, int whole_experts, char *err) {
    int R = comm->size, r = comm->rank;
    if (e->ep || e->tp) return ds_seterr(err, DS_ERR_ARG, "tensor parallel: the engine is already parallel");
    if (e->tp_sliced) {   /* opened as one rank (opts.tensor_parallel_one_rank): its share is already cut */
        if (R != e->tp_size || r != e->tp_rank)
            return ds_seterr(err, DS_ERR_ARG, "tensor parallel: the engine was opened as rank %d of %d, joins as rank %d of %d",
                             e->tp_rank, e->tp_size, r, R);
        e->tp = comm;
        return DS_OK;
    }
    if (strcmp(e->be->name, "cpu") != 0)
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "tensor parallel on the %s backend: open the engine as one rank "
                         "(opts.tensor_parallel_one_rank), its weights cut before they reach the device", e->be->name);
    ds_status st = ds_tp_slice(e, R, r, whole_experts, err);
    if (st) return st;
    e->tp = comm;
    return DS_OK;
}
