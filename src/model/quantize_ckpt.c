/* `dsinfer quantize`: a checkpoint folder in, the same model with quantized linear weights out.
 *
 * Plan: every source tensor becomes one or more output entries. A linear projection weight (BF16, F16,
 * F32, or FP8 with its weight_scale_inv, which is then dropped) becomes FP8 + weight_scale_inv, or
 * NVFP4 (U8 + weight_scale + weight_scale_2). Everything else is copied. The header is written from the
 * plan, then the data tensor by tensor, quantizing each linear weight as it is reached. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/file.h"
#include "core/status.h"
#include "loader/safetensors.h"
#include "loader/st_write.h"
#include "model/quantize.h"

typedef struct {
    const ds_st_tensor *src;   /* the source tensor */
    int quantize;              /* 1: src is a linear weight to quantize */
    int n_out;                 /* entries it makes (1, 2 or 3) */
} plan_item;

typedef struct {
    ds_st_entry *e;
    char **names;
    int n;
    plan_item *items;
    int n_items;
} plan;

static void add_entry(plan *p, const char *name, const char *suffix, ds_dtype dt, int ndim, int64_t d0, int64_t d1) {
    p->e = ds_xrealloc(p->e, sizeof(ds_st_entry) * (size_t)(p->n + 1));
    p->names = ds_xrealloc(p->names, sizeof(char *) * (size_t)(p->n + 1));
    size_t l = strlen(name) + strlen(suffix) + 1;
    p->names[p->n] = ds_xmalloc(l);
    snprintf(p->names[p->n], l, "%s%s", name, suffix);
    p->e[p->n] = (ds_st_entry){.name = p->names[p->n], .dtype = dt, .ndim = ndim, .shape = {d0, d1}};
    p->n++;
}

static int is_scale_of_quantized(const ds_st_set *s, const char *name) {
    size_t n = strlen(name);
    if (n < 10 || strcmp(name + n - 10, "_scale_inv")) return 0;
    char base[512];
    snprintf(base, sizeof base, "%.*s", (int)(n - 10), name);
    const ds_st_tensor *t = ds_st_find(s, base);
    return t && t->ndim == 2 && ds_quant_is_linear(base);
}

static ds_status make_plan(const ds_st_set *s, ds_quant to, plan *p, char *err) {
    memset(p, 0, sizeof(*p));
    p->items = ds_xcalloc((size_t)ds_st_count(s), sizeof(plan_item));
    for (int i = 0; i < ds_st_count(s); i++) {
        const ds_st_tensor *t = ds_st_at(s, i);
        if (is_scale_of_quantized(s, t->name)) continue;
        if (t->ndim > 4) return ds_seterr(err, DS_ERR_UNSUPPORTED, "%s: %s has %d dimensions", t->file, t->name, t->ndim);
        plan_item *it = &p->items[p->n_items++];
        it->src = t;
        it->quantize = t->ndim == 2 && ds_quant_is_linear(t->name);
        if (it->quantize && t->dtype == DS_DTYPE_U8)
            return ds_seterr(err, DS_ERR_UNSUPPORTED, "%s: %s is already NVFP4", t->file, t->name);
        if (it->quantize && to == DS_QUANT_FP4 && t->shape[1] % 16)
            return ds_seterr(err, DS_ERR_UNSUPPORTED, "%s: %s has %lld columns, not a multiple of 16 (NVFP4 blocks)",
                             t->file, t->name, (long long)t->shape[1]);
        if (!it->quantize) {
            add_entry(p, t->name, "", t->dtype, t->ndim, t->ndim > 0 ? t->shape[0] : 0, t->ndim > 1 ? t->shape[1] : 0);
            p->e[p->n - 1].ndim = t->ndim;
            for (int d = 0; d < t->ndim && d < 4; d++) p->e[p->n - 1].shape[d] = t->shape[d];
            it->n_out = 1;
        } else if (to == DS_QUANT_FP8) {
            add_entry(p, t->name, "", DS_DTYPE_F8_E4M3, 2, t->shape[0], t->shape[1]);
            add_entry(p, t->name, "_scale_inv", DS_DTYPE_F32, 2, (t->shape[0] + 127) / 128, (t->shape[1] + 127) / 128);
            it->n_out = 2;
        } else {
            add_entry(p, t->name, "", DS_DTYPE_U8, 2, t->shape[0], t->shape[1] / 2);
            add_entry(p, t->name, "_scale", DS_DTYPE_F8_E4M3, 2, t->shape[0], t->shape[1] / 16);
            add_entry(p, t->name, "_scale_2", DS_DTYPE_F32, 0, 0, 0);
            it->n_out = 3;
        }
    }
    return DS_OK;
}

static void free_plan(plan *p) {
    for (int i = 0; i < p->n; i++) free(p->names[i]);
    free(p->names);
    free(p->e);
    free(p->items);
}

/* The source tensor as a ds_weight (FP8 sources carry their scale). */
static ds_status source_weight(const ds_st_set *s, const ds_st_tensor *t, ds_weight *w, char *err) {
    memset(w, 0, sizeof(*w));
    *w = (ds_weight){.data = t->data, .dtype = t->dtype, .rows = (int)t->shape[0], .cols = (int)t->shape[1], .name = t->name};
    if (t->dtype != DS_DTYPE_F8_E4M3) return DS_OK;
    char sn[512];
    snprintf(sn, sizeof sn, "%s_scale_inv", t->name);
    const ds_st_tensor *sc = ds_st_find(s, sn);
    if (!sc || sc->numel != (int64_t)((w->rows + 127) / 128) * ((w->cols + 127) / 128))
        return ds_seterr(err, DS_ERR_FORMAT, "%s: FP8 weight %s has no valid %s", t->file, t->name, sn);
    w->scale = sc->data;
    w->scale_cols = (w->cols + 127) / 128;
    return DS_OK;
}

static ds_status write_quantized(ds_st_writer *wr, const ds_st_set *s, const ds_st_tensor *t, ds_quant to, char *err) {
    ds_weight w;
    ds_status st = source_weight(s, t, &w, err);
    if (st) return st;
    size_t R = (size_t)w.rows, C = (size_t)w.cols;
    if (to == DS_QUANT_FP8) {
        size_t ns = ((R + 127) / 128) * ((C + 127) / 128);
        uint8_t *q = ds_xmalloc(R * C);
        float *sc = ds_xmalloc(ns * sizeof(float));
        ds_quant_fp8_blocks(&w, q, sc);
        st = ds_st_write_data(wr, q, R * C, err);
        if (!st) st = ds_st_write_data(wr, sc, ns * sizeof(float), err);
        free(q);
        free(sc);
        return st;
    }
    uint8_t *q = ds_xmalloc(R * C / 2), *bs = ds_xmalloc(R * C / 16);
    float g;
    ds_quant_nvfp4(&w, q, bs, &g);
    st = ds_st_write_data(wr, q, R * C / 2, err);
    if (!st) st = ds_st_write_data(wr, bs, R * C / 16, err);
    if (!st) st = ds_st_write_data(wr, &g, sizeof g, err);
    free(q);
    free(bs);
    return st;
}

static ds_status write_model(const ds_st_set *s, const plan *p, ds_quant to, const char *path, int progress, char *err) {
    ds_st_writer wr;
    ds_status st = ds_st_write_begin(&wr, path, p->e, p->n, err);
    for (int i = 0; !st && i < p->n_items; i++) {
        const plan_item *it = &p->items[i];
        st = it->quantize ? write_quantized(&wr, s, it->src, to, err) : ds_st_write_data(&wr, it->src->data, it->src->nbytes, err);
        if (progress && (i + 1) * 10 / p->n_items != i * 10 / p->n_items)
            fprintf(stderr, "quantize: %d%%\n", (i + 1) * 100 / p->n_items);
    }
    if (wr.f) {
        ds_status st2 = ds_st_write_end(&wr, err);
        if (!st) st = st2;
    }
    return st;
}

static ds_status write_text(const char *path, const char *text, char *err) {
    FILE *f = fopen(path, "wb");
    if (!f) return ds_seterr(err, DS_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    int ok = fputs(text, f) >= 0;
    ok &= fclose(f) == 0;
    return ok ? DS_OK : ds_seterr(err, DS_ERR_IO, "%s: write failed", path);
}

/* config.json with the quantization_config of the format; NVFP4 also gets hf_quant_config.json. */
static ds_status write_configs(const char *in, const char *out, ds_quant to, char *err) {
    char p[4096];
    snprintf(p, sizeof p, "%s/config.json", in);
    char *txt = ds_read_file(p, 64u << 20, NULL);
    cJSON *cfg = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    if (!cfg) return ds_seterr(err, DS_ERR_FORMAT, "%s: cannot read as JSON", p);
    cJSON_DeleteItemFromObject(cfg, "quantization_config");
    cJSON *q = cJSON_AddObjectToObject(cfg, "quantization_config");
    if (to == DS_QUANT_FP8) {
        cJSON_AddStringToObject(q, "activation_scheme", "dynamic");
        cJSON_AddStringToObject(q, "fmt", "e4m3");
        cJSON_AddStringToObject(q, "quant_method", "fp8");
        cJSON_AddItemToObject(q, "weight_block_size", cJSON_CreateIntArray((int[]){128, 128}, 2));
    } else {
        cJSON_AddStringToObject(q, "quant_method", "modelopt");
        cJSON_AddStringToObject(q, "quant_algo", "W4A16_NVFP4");
        cJSON_AddNumberToObject(q, "group_size", 16);
    }
    char *o = cJSON_Print(cfg);
    snprintf(p, sizeof p, "%s/config.json", out);
    ds_status st = write_text(p, o, err);
    free(o);
    if (!st && to == DS_QUANT_FP4) {
        snprintf(p, sizeof p, "%s/hf_quant_config.json", out);
        st = write_text(p, "{\"producer\": {\"name\": \"dsinfer\"}, \"quantization\": {\"quant_algo\": \"W4A16_NVFP4\", "
                           "\"group_size\": 16, \"kv_cache_quant_algo\": null, \"exclude_modules\": [\"lm_head\"]}}\n", err);
    }
    cJSON_Delete(cfg);
    return st;
}

static ds_status copy_aux_files(const char *in, const char *out, char *err) {
    const char *names[] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", in, names[i]);
        char *t = ds_read_file(p, 64u << 20, NULL);
        if (!t) continue;
        snprintf(p, sizeof p, "%s/%s", out, names[i]);
        ds_status st = write_text(p, t, err);
        free(t);
        if (st) return st;
    }
    return DS_OK;
}

ds_status ds_quantize_checkpoint(const char *in, const char *out, ds_quant to, int progress, char *err) {
    ds_dtype_init();
    if (mkdir(out, 0755) != 0 && errno != EEXIST) return ds_seterr(err, DS_ERR_IO, "%s: cannot create: %s", out, strerror(errno));
    if (!strcmp(in, out)) return ds_seterr(err, DS_ERR_ARG, "--in and --out are the same folder");
    ds_st_set *s = NULL;
    plan p = {0};
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    ds_status st = ds_st_open_dir(in, &s, err);
    if (!st) st = make_plan(s, to, &p, err);
    if (!st) st = write_model(s, &p, to, path, progress, err);
    if (!st) st = write_configs(in, out, to, err);
    if (!st) st = copy_aux_files(in, out, err);
    free_plan(&p);
    ds_st_close(s);
    return st;
}
