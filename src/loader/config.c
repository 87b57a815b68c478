/* config.json parsing. Accepts the released form (rope_scaling + rope_theta, key "type" or
 * "rope_type") and the transformers >= 5 form (rope_parameters holding rope_type and rope_theta). */
#include "loader/config.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"
#include "core/status.h"

typedef struct {
    const cJSON *root;
    const char *where;
    char *err;
    ds_status st;
} cfg_reader;

static const cJSON *field(cfg_reader *r, const char *name) {
    return cJSON_GetObjectItemCaseSensitive(r->root, name);
}

/* Reads an integer field; `def` < -1 means required. Null counts as absent. */
static int get_int(cfg_reader *r, const char *name, int def, int lo, int hi) {
    const cJSON *v = field(r, name);
    if (r->st) return 0;
    if (!v || cJSON_IsNull(v)) {
        if (def < -1) r->st = ds_seterr(r->err, DS_ERR_FORMAT, "%s: missing field \"%s\"", r->where, name);
        return def;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo ||
        v->valuedouble > hi) {
        r->st = ds_seterr(r->err, DS_ERR_FORMAT, "%s: field \"%s\" must be an integer in [%d, %d]", r->where,
                          name, lo, hi);
        return 0;
    }
    return (int)v->valuedouble;
}

static double get_num_in(cfg_reader *r, const cJSON *obj, const char *name, double def, int required) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (r->st) return 0;
    if (!v || cJSON_IsNull(v)) {
        if (required) r->st = ds_seterr(r->err, DS_ERR_FORMAT, "%s: missing field \"%s\"", r->where, name);
        return def;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
        r->st = ds_seterr(r->err, DS_ERR_FORMAT, "%s: field \"%s\" must be a number", r->where, name);
        return 0;
    }
    return v->valuedouble;
}

static int get_bool(cfg_reader *r, const char *name, int def) {
    const cJSON *v = field(r, name);
    if (!v || cJSON_IsNull(v)) return def;
    if (!cJSON_IsBool(v)) {
        if (!r->st) r->st = ds_seterr(r->err, DS_ERR_FORMAT, "%s: field \"%s\" must be true or false", r->where, name);
        return 0;
    }
    return cJSON_IsTrue(v);
}

static const char *get_str(const cJSON *obj, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void read_architecture(cfg_reader *r, ds_config *c) {
    const cJSON *a = field(r, "architectures");
    const char *name = cJSON_IsArray(a) && cJSON_IsString(cJSON_GetArrayItem(a, 0))
                           ? cJSON_GetArrayItem(a, 0)->valuestring : NULL;
    const char *mt = get_str(r->root, "model_type");
    if (!name && mt) name = strcmp(mt, "deepseek_v3") == 0 ? "DeepseekV3ForCausalLM"
                          : strcmp(mt, "deepseek_v2") == 0 ? "DeepseekV2ForCausalLM" : mt;
    if (!name) {
        r->st = ds_seterr(r->err, DS_ERR_FORMAT, "%s: no \"architectures\" or \"model_type\"", r->where);
        return;
    }
    snprintf(c->architecture, sizeof c->architecture, "%s", name);
    if (strcmp(name, "DeepseekV3ForCausalLM") == 0) c->arch = DS_ARCH_V3;
    else if (strcmp(name, "DeepseekV2ForCausalLM") == 0) c->arch = DS_ARCH_V2;
    else
        r->st = ds_seterr(r->err, DS_ERR_UNSUPPORTED,
                          "%s: unsupported architecture \"%s\" (supported: DeepseekV3ForCausalLM, "
                          "DeepseekV2ForCausalLM)", r->where, name);
}

static void read_dims(cfg_reader *r, ds_config *c) {
    const int BIG = 1 << 24;
    c->vocab_size = get_int(r, "vocab_size", -2, 1, BIG);
    c->hidden_size = get_int(r, "hidden_size", -2, 1, 1 << 20);
    c->intermediate_size = get_int(r, "intermediate_size", -2, 1, 1 << 22);
    c->num_layers = get_int(r, "num_hidden_layers", -2, 1, 4096);
    c->num_heads = get_int(r, "num_attention_heads", -2, 1, 4096);
    c->q_lora_rank = get_int(r, "q_lora_rank", 0, 0, 1 << 20);
    c->kv_lora_rank = get_int(r, "kv_lora_rank", -2, 1, 1 << 20);
    c->qk_nope_head_dim = get_int(r, "qk_nope_head_dim", -2, 0, 4096);
    c->qk_rope_head_dim = get_int(r, "qk_rope_head_dim", -2, 2, DS_MAX_ROPE_DIM);
    c->v_head_dim = get_int(r, "v_head_dim", -2, 1, 4096);
    c->max_position_embeddings = get_int(r, "max_position_embeddings", 4096, 1, 1 << 30);
    c->num_nextn_predict_layers = get_int(r, "num_nextn_predict_layers", 0, 0, 16);
    c->tie_word_embeddings = get_bool(r, "tie_word_embeddings", 0);
    c->bos_token_id = get_int(r, "bos_token_id", 0, 0, BIG);
    c->eos_token_id = get_int(r, "eos_token_id", 1, 0, BIG);
    c->rms_norm_eps = (float)get_num_in(r, r->root, "rms_norm_eps", 1e-6, 0);
    if (!r->st && c->qk_rope_head_dim % 2)
        r->st = ds_seterr(r->err, DS_ERR_FORMAT, "%s: qk_rope_head_dim must be even", r->where);
}

static void read_moe(cfg_reader *r, ds_config *c) {
    c->n_routed_experts = get_int(r, "n_routed_experts", 0, 0, 1 << 16);
    if (!c->n_routed_experts) return;
    c->moe_intermediate_size = get_int(r, "moe_intermediate_size", -2, 1, 1 << 22);
    c->num_experts_per_tok = get_int(r, "num_experts_per_tok", -2, 1, c->n_routed_experts);
    c->n_shared_experts = get_int(r, "n_shared_experts", 0, 0, 1024);
    c->first_k_dense_replace = get_int(r, "first_k_dense_replace", 0, 0, 1 << 16);
    c->moe_layer_freq = get_int(r, "moe_layer_freq", 1, 1, 1 << 16);
    c->n_group = get_int(r, "n_group", 1, 1, c->n_routed_experts);
    c->topk_group = get_int(r, "topk_group", 1, 1, c->n_group);
    c->norm_topk_prob = get_bool(r, "norm_topk_prob", 0);
    c->routed_scaling_factor = (float)get_num_in(r, r->root, "routed_scaling_factor", 1.0, 0);
    if (r->st) return;
    const char *sf = get_str(r->root, "scoring_func");
    if (!sf) sf = "softmax";
    if (strcmp(sf, "softmax") == 0) c->scoring = DS_SCORE_SOFTMAX;
    else if (strcmp(sf, "sigmoid") == 0) c->scoring = DS_SCORE_SIGMOID;
    else { r->st = ds_seterr(r->err, DS_ERR_UNSUPPORTED, "%s: unsupported scoring_func \"%s\"", r->where, sf); return; }
    const char *tm = get_str(r->root, "topk_method");
    if (!tm) tm = "greedy";
    if (strcmp(tm, "greedy") == 0 || strcmp(tm, "gready") == 0) c->topk_method = DS_TOPK_GREEDY;
    else if (strcmp(tm, "group_limited_greedy") == 0) c->topk_method = DS_TOPK_GROUP_LIMITED_GREEDY;
    else if (strcmp(tm, "noaux_tc") == 0) c->topk_method = DS_TOPK_NOAUX_TC;
    else { r->st = ds_seterr(r->err, DS_ERR_UNSUPPORTED, "%s: unsupported topk_method \"%s\"", r->where, tm); return; }
    if (c->n_routed_experts % c->n_group)
        r->st = ds_seterr(r->err, DS_ERR_FORMAT, "%s: n_routed_experts %d is not a multiple of n_group %d",
                          r->where, c->n_routed_experts, c->n_group);
    else if (c->topk_method == DS_TOPK_NOAUX_TC && c->n_routed_experts / c->n_group < 2 && c->n_group > 1)
        r->st = ds_seterr(r->err, DS_ERR_FORMAT, "%s: noaux_tc needs at least 2 experts per group", r->where);
}

/* rope_scaling (released) or rope_parameters (transformers >= 5); rope_theta top-level or inside. */
static void read_rope(cfg_reader *r, ds_config *c) {
    const cJSON *rs = field(r, "rope_scaling");
    const cJSON *rp = field(r, "rope_parameters");
    if (!cJSON_IsObject(rs)) rs = cJSON_IsObject(rp) ? rp : NULL;
    c->rope_theta = get_num_in(r, r->root, "rope_theta", 0, 0);
    if (c->rope_theta == 0 && cJSON_IsObject(rp)) c->rope_theta = get_num_in(r, rp, "rope_theta", 0, 0);
    if (c->rope_theta == 0) c->rope_theta = 10000.0;
    if (!rs) return;
    const char *type = get_str(rs, "rope_type");
    if (!type) type = get_str(rs, "type");
    if (!type || strcmp(type, "default") == 0) return;
    if (strcmp(type, "yarn") != 0) {
        r->st = ds_seterr(r->err, DS_ERR_UNSUPPORTED, "%s: unsupported rope type \"%s\" (supported: yarn, default)",
                          r->where, type);
        return;
    }
    c->yarn = 1;
    c->rope_factor = get_num_in(r, rs, "factor", 1.0, 1);
    c->beta_fast = get_num_in(r, rs, "beta_fast", 32.0, 0);
    c->beta_slow = get_num_in(r, rs, "beta_slow", 1.0, 0);
    c->mscale = get_num_in(r, rs, "mscale", 0.0, 0);
    c->mscale_all_dim = get_num_in(r, rs, "mscale_all_dim", 0.0, 0);
    c->attention_factor = get_num_in(r, rs, "attention_factor", 0.0, 0);
    c->original_max_position_embeddings = (int)get_num_in(r, rs, "original_max_position_embeddings", 4096, 0);
    if (!r->st && (c->rope_factor <= 0 || c->original_max_position_embeddings <= 0))
        r->st = ds_seterr(r->err, DS_ERR_FORMAT, "%s: rope scaling factor and original_max_position_embeddings "
                          "must be positive", r->where);
}

static void read_quant(cfg_reader *r, ds_config *c) {
    const cJSON *q = field(r, "quantization_config");
    if (!cJSON_IsObject(q)) return;
    const char *m = get_str(q, "quant_method");
    const char *algo = get_str(q, "quant_algo");
    if (m && !strcmp(m, "modelopt") && algo && strstr(algo, "NVFP4")) {
        c->nvfp4 = 1;   /* per-tensor: each U8 weight is bound with its scales (weights.c) */
        return;
    }
    if (!m || strcmp(m, "fp8") != 0) {
        r->st = ds_seterr(r->err, DS_ERR_UNSUPPORTED, "%s: unsupported quantization_config.quant_method \"%s\"",
                          r->where, m ? m : "(none)");
        return;
    }
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(q, "weight_block_size");
    c->fp8 = 1;
    c->fp8_block[0] = c->fp8_block[1] = 128;
    if (cJSON_IsArray(b) && cJSON_GetArraySize(b) == 2) {
        c->fp8_block[0] = cJSON_GetArrayItem(b, 0)->valueint;
        c->fp8_block[1] = cJSON_GetArrayItem(b, 1)->valueint;
    }
    if (c->fp8_block[0] != 128 || c->fp8_block[1] != 128)
        r->st = ds_seterr(r->err, DS_ERR_UNSUPPORTED, "%s: fp8 weight_block_size must be [128, 128]", r->where);
}

double ds_yarn_get_mscale(double scale, double mscale) {
    return scale <= 1.0 ? 1.0 : 0.1 * mscale * log(scale) + 1.0;
}

/* Spec 7.2 (frequencies), 7.3 (amplitude), 6.5 (softmax scale). */
static void derive(ds_config *c) {
    int d = c->qk_rope_head_dim;
    c->qk_head_dim = c->qk_nope_head_dim + c->qk_rope_head_dim;
    c->softmax_scale = (float)(1.0 / sqrt((double)c->qk_head_dim));
    c->rope_amplitude = 1.0f;
    for (int i = 0; i < d / 2; i++) c->inv_freq[i] = pow(c->rope_theta, -2.0 * i / d);
    if (!c->yarn) return;
    double s = c->rope_factor, b = c->rope_theta, L0 = c->original_max_position_embeddings;
    double low = floor(d * log(L0 / (c->beta_fast * 2 * M_PI)) / (2 * log(b)));
    double high = ceil(d * log(L0 / (c->beta_slow * 2 * M_PI)) / (2 * log(b)));
    if (low < 0) low = 0;
    if (high > d - 1) high = d - 1;
    if (low == high) high += 0.001;
    for (int i = 0; i < d / 2; i++) {
        double ramp = (i - low) / (high - low);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        double f = c->inv_freq[i];
        c->inv_freq[i] = (f / s) * ramp + f * (1 - ramp);
    }
    if (c->attention_factor > 0) c->rope_amplitude = (float)c->attention_factor;
    else if (c->mscale != 0 && c->mscale_all_dim != 0)
        c->rope_amplitude = (float)(ds_yarn_get_mscale(s, c->mscale) / ds_yarn_get_mscale(s, c->mscale_all_dim));
    else c->rope_amplitude = (float)ds_yarn_get_mscale(s, 1.0);
    if (c->mscale_all_dim != 0) {
        double m = ds_yarn_get_mscale(s, c->mscale_all_dim);
        c->softmax_scale = (float)(1.0 / sqrt((double)c->qk_head_dim) * m * m);
    }
}

ds_status ds_config_parse(const char *json, const char *where, ds_config *cfg, char *err) {
    memset(cfg, 0, sizeof(*cfg));
    cJSON *root = cJSON_Parse(json);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return ds_seterr(err, DS_ERR_FORMAT, "%s: not a valid JSON object", where);
    }
    cfg_reader r = {root, where, err, DS_OK};
    read_architecture(&r, cfg);
    if (!r.st) read_dims(&r, cfg);
    if (!r.st) read_moe(&r, cfg);
    if (!r.st) read_rope(&r, cfg);
    if (!r.st) read_quant(&r, cfg);
    cJSON_Delete(root);
    if (!r.st) derive(cfg);
    return r.st;
}

ds_status ds_config_load(const char *dir, ds_config *cfg, char *err) {
    char path[4096];
    size_t n = strlen(dir);
    if (n > 5 && strcmp(dir + n - 5, ".json") == 0) snprintf(path, sizeof path, "%s", dir);   /* a config file itself */
    else snprintf(path, sizeof path, "%s/config.json", dir);
    char *buf = ds_read_file(path, 16u << 20, NULL);
    if (!buf) return ds_seterr(err, DS_ERR_IO, "%s: cannot open", path);
    ds_status st = ds_config_parse(buf, path, cfg, err);
    free(buf);
    return st;
}

size_t ds_kv_token_bytes(const ds_config *c) {
    size_t C = (size_t)c->kv_lora_rank, dr = (size_t)c->qk_rope_head_dim;
    if (c->kv_fp8) return C + 4 * ((C + 127) / 128) + 2 * dr;
    return c->kv_bf16 ? 2 * (C + dr) : 4 * (C + dr);
}

int ds_config_layer_is_moe(const ds_config *c, int layer) {
    return c->n_routed_experts > 0 && layer >= c->first_k_dense_replace && layer % c->moe_layer_freq == 0;
}
