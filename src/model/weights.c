#include "model/weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"

typedef struct {
    const ds_st_set *set;
    char *err;
    size_t n_bound;
    const ds_config *dummy;   /* non-NULL: make dummy views instead of reading the set */
} binder;

const unsigned char ds_weight_dummy_tag[1];

/* The stored dtype of tensor `name` in a released checkpoint of this config (spec 12.1, 13): FP8 for the
 * linears of attention and MLPs when the config is FP8-quantized; NVFP4 (ModelOpt) for the MLP linears
 * (dense, shared and routed experts; attention, router, embeddings and head stay BF16, as in
 * nvidia/DeepSeek-R1-FP4); F32 for the routing bias; else BF16. */
static ds_dtype dummy_dtype(const ds_config *c, const char *name, int cols) {
    if (!cols) return strstr(name, "e_score_correction_bias") ? DS_DTYPE_F32 : DS_DTYPE_BF16;
    const char *bf16[] = {"embed_tokens", "lm_head", "mlp.gate.weight", "eh_proj", "shared_head"};
    for (size_t i = 0; i < sizeof bf16 / sizeof bf16[0]; i++)
        if (strstr(name, bf16[i])) return DS_DTYPE_BF16;
    if (c->nvfp4) return strstr(name, ".mlp.") && cols % 16 == 0 ? DS_DTYPE_NVFP4 : DS_DTYPE_BF16;
    return c->fp8 ? DS_DTYPE_F8_E4M3 : DS_DTYPE_BF16;
}

static ds_status bind_dummy(binder *b, ds_weight *w, const char *name, int rows, int cols, int optional) {
    if (optional) return DS_OK;   /* optional tensors are left absent */
    w->dtype = dummy_dtype(b->dummy, name, cols);
    w->rows = cols ? rows : 1;
    w->cols = cols ? cols : rows;
    w->data = DS_WEIGHT_DUMMY;
    w->name = "(dummy weight)";
    if (w->dtype == DS_DTYPE_F8_E4M3) {
        w->scale = (const float *)DS_WEIGHT_DUMMY;
        w->scale_cols = (w->cols + 127) / 128;
    }
    if (w->dtype == DS_DTYPE_NVFP4) {   /* codes, block scales near 1 (made on the device), a global scale */
        w->block_scale = (const uint8_t *)DS_WEIGHT_DUMMY;
        w->global_scale = DS_DUMMY_NVFP4_GSCALE;
    }
    b->n_bound++;
    return DS_OK;
}

static int is_float_dtype(ds_dtype t) {
    return t == DS_DTYPE_F32 || t == DS_DTYPE_F16 || t == DS_DTYPE_BF16 || t == DS_DTYPE_F8_E4M3;
}

static ds_status bind_scale(binder *b, const ds_st_tensor *t, ds_weight *w) {
    char sname[512];
    snprintf(sname, sizeof sname, "%s_scale_inv", t->name);
    const ds_st_tensor *s = ds_st_find(b->set, sname);
    if (!s)
        return ds_seterr(b->err, DS_ERR_FORMAT, "%s: tensor %s is F8_E4M3 but %s is missing", t->file, t->name, sname);
    int sr = (w->rows + 127) / 128, sc = (w->cols + 127) / 128;
    if (s->dtype != DS_DTYPE_F32 || s->ndim != 2 || s->shape[0] != sr || s->shape[1] != sc)
        return ds_seterr(b->err, DS_ERR_FORMAT, "%s: tensor %s must be F32 [%d, %d] for %s [%d, %d]", s->file,
                         sname, sr, sc, t->name, w->rows, w->cols);
    w->scale = s->data;
    w->scale_cols = sc;
    b->n_bound++;
    return DS_OK;
}

/* An NVFP4 weight (spec 13.2): U8 [rows, cols/2] with weight_scale F8_E4M3 [rows, cols/16] and
 * weight_scale_2 F32 (a scalar, shape [] or [1]). input_scale is not needed: activations stay BF16/fp32. */
static ds_status bind_nvfp4(binder *b, const ds_st_tensor *t, ds_weight *w, int rows, int cols) {
    char nm[512];
    if (cols % 16 || t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols / 2)
        return ds_seterr(b->err, DS_ERR_FORMAT, "%s: tensor %s is U8 but not an NVFP4 [%d, %d] weight of [%d, %d]",
                         t->file, t->name, rows, cols / 2, rows, cols);
    snprintf(nm, sizeof nm, "%.*s_scale", (int)strlen(t->name), t->name);
    const ds_st_tensor *s = ds_st_find(b->set, nm);
    if (!s || s->dtype != DS_DTYPE_F8_E4M3 || s->ndim != 2 || s->shape[0] != rows || s->shape[1] != cols / 16)
        return ds_seterr(b->err, DS_ERR_FORMAT, "%s: NVFP4 weight %s needs %s as F8_E4M3 [%d, %d]", t->file, t->name,
                         nm, rows, cols / 16);
    snprintf(nm, sizeof nm, "%s_scale_2", t->name);
    const ds_st_tensor *g = ds_st_find(b->set, nm);
    if (!g || g->dtype != DS_DTYPE_F32 || g->numel != 1)
        return ds_seterr(b->err, DS_ERR_FORMAT, "%s: NVFP4 weight %s needs %s as one F32", t->file, t->name, nm);
    memcpy(&w->global_scale, g->data, sizeof(float));
    w->data = t->data;
    w->dtype = DS_DTYPE_NVFP4;
    w->rows = rows;
    w->cols = cols;
    w->block_scale = s->data;
    w->name = t->name;
    b->n_bound += 3;
    return DS_OK;
}

/* Binds `name` with shape [rows, cols] (cols == 0: a 1-D tensor of `rows`). optional: absent is ok. */
static ds_status bind(binder *b, ds_weight *w, const char *name, int rows, int cols, int optional) {
    memset(w, 0, sizeof(*w));
    if (b->dummy) return bind_dummy(b, w, name, rows, cols, optional);
    const ds_st_tensor *t = ds_st_find(b->set, name);
    if (!t) {
        if (optional) return DS_OK;
        return ds_seterr(b->err, DS_ERR_FORMAT, "missing tensor %s in the checkpoint", name);
    }
    if (t->dtype == DS_DTYPE_U8 && cols) return bind_nvfp4(b, t, w, rows, cols);
    int ok_shape = cols ? (t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols)
                        : (t->ndim == 1 && t->shape[0] == rows);
    if (!ok_shape) {
        char got[128] = "";
        for (int d = 0; d < t->ndim; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        if (cols) return ds_seterr(b->err, DS_ERR_FORMAT, "%s: tensor %s has shape [%s], expected [%d, %d]",
                                   t->file, name, got, rows, cols);
        return ds_seterr(b->err, DS_ERR_FORMAT, "%s: tensor %s has shape [%s], expected [%d]", t->file, name, got, rows);
    }
    if (!is_float_dtype(t->dtype))
        return ds_seterr(b->err, DS_ERR_UNSUPPORTED, "%s: tensor %s has dtype %s (expected a float type)", t->file,
                         name, ds_dtype_name(t->dtype));
    w->data = t->data;
    w->dtype = t->dtype;
    w->rows = cols ? rows : 1;
    w->cols = cols ? cols : rows;
    w->name = t->name;
    b->n_bound++;
    if (t->dtype == DS_DTYPE_F8_E4M3) return bind_scale(b, t, w);
    return DS_OK;
}

#define BINDF(w, rows, cols, opt, ...) do { \
    char nm_[512]; snprintf(nm_, sizeof nm_, __VA_ARGS__); \
    ds_status st_ = bind(b, (w), nm_, (rows), (cols), (opt)); if (st_) return st_; } while (0)

static ds_status bind_attention(binder *b, const ds_config *c, const char *p, ds_layer_weights *L) {
    int D = c->hidden_size, H = c->num_heads, C = c->kv_lora_rank, dr = c->qk_rope_head_dim;
    int dqk = c->qk_head_dim;
    if (c->q_lora_rank) {
        BINDF(&L->q_a, c->q_lora_rank, D, 0, "%s.self_attn.q_a_proj.weight", p);
        BINDF(&L->q_a_norm, c->q_lora_rank, 0, 0, "%s.self_attn.q_a_layernorm.weight", p);
        BINDF(&L->q_b, H * dqk, c->q_lora_rank, 0, "%s.self_attn.q_b_proj.weight", p);
    } else {
        BINDF(&L->q, H * dqk, D, 0, "%s.self_attn.q_proj.weight", p);
    }
    BINDF(&L->kv_a, C + dr, D, 0, "%s.self_attn.kv_a_proj_with_mqa.weight", p);
    BINDF(&L->kv_a_norm, C, 0, 0, "%s.self_attn.kv_a_layernorm.weight", p);
    BINDF(&L->kv_b, H * (c->qk_nope_head_dim + c->v_head_dim), C, 0, "%s.self_attn.kv_b_proj.weight", p);
    BINDF(&L->o, D, H * c->v_head_dim, 0, "%s.self_attn.o_proj.weight", p);
    return DS_OK;
}

static ds_status bind_moe(binder *b, const ds_config *c, const char *p, ds_layer_weights *L) {
    int D = c->hidden_size, E = c->n_routed_experts, mI = c->moe_intermediate_size;
    L->is_moe = 1;
    BINDF(&L->router, E, D, 0, "%s.mlp.gate.weight", p);
    BINDF(&L->router_bias, E, 0, c->topk_method != DS_TOPK_NOAUX_TC, "%s.mlp.gate.e_score_correction_bias", p);
    L->exp_gate = ds_xcalloc((size_t)E, sizeof(ds_weight));
    L->exp_up = ds_xcalloc((size_t)E, sizeof(ds_weight));
    L->exp_down = ds_xcalloc((size_t)E, sizeof(ds_weight));
    for (int e = 0; e < E; e++) {
        BINDF(&L->exp_gate[e], mI, D, 0, "%s.mlp.experts.%d.gate_proj.weight", p, e);
        BINDF(&L->exp_up[e], mI, D, 0, "%s.mlp.experts.%d.up_proj.weight", p, e);
        BINDF(&L->exp_down[e], D, mI, 0, "%s.mlp.experts.%d.down_proj.weight", p, e);
    }
    if (c->n_shared_experts) {
        int sI = mI * c->n_shared_experts;
        BINDF(&L->sh_gate, sI, D, 0, "%s.mlp.shared_experts.gate_proj.weight", p);
        BINDF(&L->sh_up, sI, D, 0, "%s.mlp.shared_experts.up_proj.weight", p);
        BINDF(&L->sh_down, D, sI, 0, "%s.mlp.shared_experts.down_proj.weight", p);
    }
    return DS_OK;
}

static ds_status bind_layer(binder *b, const ds_config *c, int i, ds_layer_weights *L) {
    char p[64];
    snprintf(p, sizeof p, "model.layers.%d", i);
    int D = c->hidden_size;
    BINDF(&L->input_norm, D, 0, 0, "%s.input_layernorm.weight", p);
    BINDF(&L->post_norm, D, 0, 0, "%s.post_attention_layernorm.weight", p);
    ds_status st = bind_attention(b, c, p, L);
    if (st) return st;
    if (ds_config_layer_is_moe(c, i)) return bind_moe(b, c, p, L);
    BINDF(&L->gate, c->intermediate_size, D, 0, "%s.mlp.gate_proj.weight", p);
    BINDF(&L->up, c->intermediate_size, D, 0, "%s.mlp.up_proj.weight", p);
    BINDF(&L->down, D, c->intermediate_size, 0, "%s.mlp.down_proj.weight", p);
    return DS_OK;
}

/* The MTP module is optional: bound only if its eh_proj is present, then validated completely. */
static ds_status bind_mtp(binder *b, const ds_config *c, ds_mtp_weights *m) {
    char p[64];
    int D = c->hidden_size, n = c->num_layers;
    if (b->dummy) return DS_OK;
    snprintf(p, sizeof p, "model.layers.%d", n);
    char probe[128];
    snprintf(probe, sizeof probe, "%s.eh_proj.weight", p);
    if (!ds_st_find(b->set, probe)) return DS_OK;
    m->present = 1;
    BINDF(&m->enorm, D, 0, 0, "%s.enorm.weight", p);
    BINDF(&m->hnorm, D, 0, 0, "%s.hnorm.weight", p);
    BINDF(&m->eh_proj, D, 2 * D, 0, "%s.eh_proj.weight", p);
    BINDF(&m->head_norm, D, 0, 0, "%s.shared_head.norm.weight", p);
    BINDF(&m->head, c->vocab_size, D, 1, "%s.shared_head.head.weight", p);
    return bind_layer(b, c, n, &m->layer);
}

static ds_status bind_all(const ds_config *c, binder *b, ds_model_weights *w) {
    memset(w, 0, sizeof(*w));
    BINDF(&w->embed, c->vocab_size, c->hidden_size, 0, "model.embed_tokens.weight");
    BINDF(&w->final_norm, c->hidden_size, 0, 0, "model.norm.weight");
    if (c->tie_word_embeddings) w->lm_head = w->embed;
    else BINDF(&w->lm_head, c->vocab_size, c->hidden_size, 0, "lm_head.weight");
    w->layers = ds_xcalloc((size_t)c->num_layers, sizeof(ds_layer_weights));
    w->n_layers = c->num_layers;
    for (int i = 0; i < c->num_layers; i++) {
        ds_status st = bind_layer(b, c, i, &w->layers[i]);
        if (st) return st;
    }
    ds_status st = bind_mtp(b, c, &w->mtp);
    w->n_bound = b->n_bound;
    return st;
}

ds_status ds_weights_bind(const ds_config *c, const ds_st_set *set, ds_model_weights *w, char *err) {
    binder b = {set, err, 0, NULL};
    return bind_all(c, &b, w);
}

ds_status ds_weights_dummy(const ds_config *c, ds_model_weights *w, char *err) {
    binder b = {NULL, err, 0, c};
    return bind_all(c, &b, w);
}

static void free_layer(ds_layer_weights *L) {
    free(L->exp_gate);
    free(L->exp_up);
    free(L->exp_down);
}

void ds_weights_free(ds_model_weights *w) {
    if (w->layers)
        for (int i = 0; i < w->n_layers; i++) free_layer(&w->layers[i]);
    free(w->layers);
    free_layer(&w->mtp.layer);
    memset(w, 0, sizeof(*w));
}

static void nvfp4_row_f32(const ds_weight *w, int r, float *dst) {
    size_t ld = (size_t)(w->ld ? w->ld : w->cols);
    const uint8_t *q = (const uint8_t *)w->data + (size_t)r * (ld / 2);
    const uint8_t *bs = w->block_scale + (size_t)r * (ld / 16);
    for (int c0 = 0; c0 < w->cols; c0 += 16) {
        float s = ds_fp8_e4m3_to_f32(bs[c0 / 16]) * w->global_scale;
        for (int j = 0; j < 16; j += 2) {
            uint8_t byte = q[(c0 + j) / 2];
            dst[c0 + j] = ds_e2m1_values[byte & 15] * s;
            dst[c0 + j + 1] = ds_e2m1_values[byte >> 4] * s;
        }
    }
}

void ds_weight_row_f32(const ds_weight *w, int r, float *dst) {
    if (w->dtype == DS_DTYPE_NVFP4) {
        nvfp4_row_f32(w, r, dst);
        return;
    }
    size_t esz = ds_dtype_size(w->dtype);
    const char *row = (const char *)w->data + (size_t)r * (size_t)(w->ld ? w->ld : w->cols) * esz;
    ds_convert_to_f32(w->dtype, row, dst, (size_t)w->cols);
    if (!w->scale) return;
    const unsigned char *srow = (const unsigned char *)(w->scale + (size_t)(r / 128) * (size_t)w->scale_cols);
    for (int c0 = 0; c0 < w->cols; c0 += 128) {
        float sc;
        memcpy(&sc, srow + (size_t)(c0 / 128) * sizeof(float), sizeof sc);   /* may be unaligned */
        int c1 = c0 + 128 < w->cols ? c0 + 128 : w->cols;
        for (int c = c0; c < c1; c++) dst[c] *= sc;
    }
}

size_t ds_weight_bytes(const ds_weight *w) {
    if (!w->data) return 0;
    if (w->dtype == DS_DTYPE_NVFP4) return (size_t)w->rows * (size_t)w->cols * 9 / 16 + 4;
    size_t n = (size_t)w->rows * (size_t)w->cols * ds_dtype_size(w->dtype);
    if (w->scale) n += (size_t)((w->rows + 127) / 128) * (size_t)w->scale_cols * 4;
    return n;
}

static int count_layer(const ds_config *c, const ds_layer_weights *L, ds_dtype t) {
    const ds_weight *fixed[] = {&L->q_a, &L->q_b, &L->q, &L->kv_a, &L->kv_b, &L->o, &L->gate, &L->up, &L->down,
                                &L->sh_gate, &L->sh_up, &L->sh_down};
    int n = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) n += fixed[i]->data && fixed[i]->dtype == t;
    if (L->is_moe && L->exp_gate)
        for (int e = 0; e < c->n_routed_experts; e++)
            n += (L->exp_gate[e].dtype == t) + (L->exp_up[e].dtype == t) + (L->exp_down[e].dtype == t);
    return n;
}

int ds_weights_count_dtype(const ds_config *c, const ds_model_weights *w, ds_dtype t) {
    int n = 0;
    for (int i = 0; i < w->n_layers; i++) n += count_layer(c, &w->layers[i], t);
    if (w->mtp.present) n += count_layer(c, &w->mtp.layer, t);
    return n;
}

static void list_layer(const ds_config *c, ds_layer_weights *L, ds_weight ***out, int *n) {
    ds_weight *fixed[] = {&L->q_a, &L->q_b, &L->q, &L->kv_a, &L->kv_b, &L->o, &L->gate, &L->up, &L->down,
                          &L->sh_gate, &L->sh_up, &L->sh_down};
    int extra = L->is_moe && L->exp_gate ? 3 * c->n_routed_experts : 0;
    *out = ds_xrealloc(*out, sizeof(ds_weight *) * (size_t)(*n + 12 + extra));
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (fixed[i]->data) (*out)[(*n)++] = fixed[i];
    for (int e = 0; extra && e < c->n_routed_experts; e++) {
        (*out)[(*n)++] = &L->exp_gate[e];
        (*out)[(*n)++] = &L->exp_up[e];
        (*out)[(*n)++] = &L->exp_down[e];
    }
}

int ds_weights_linear_list(const ds_config *c, ds_model_weights *w, ds_weight ***out) {
    int n = 0;
    *out = NULL;
    for (int i = 0; i < w->n_layers; i++) list_layer(c, &w->layers[i], out, &n);
    if (w->mtp.present) list_layer(c, &w->mtp.layer, out, &n);
    return n;
}
