/* Weight quantization (see quantize.h). */
#include "model/quantize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"

ds_status ds_quant_parse(const char *s, ds_quant *q, char *err) {
    if (!strcmp(s, "fp8")) *q = DS_QUANT_FP8;
    else if (!strcmp(s, "fp4") || !strcmp(s, "nvfp4")) *q = DS_QUANT_FP4;
    else return ds_seterr(err, DS_ERR_ARG, "unknown quantization \"%s\" (expected fp8 or fp4)", s);
    return DS_OK;
}

int ds_quant_is_linear(const char *name) {
    static const char *proj[] = {"q_a_proj", "q_b_proj", "q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj",
                                 "gate_proj", "up_proj", "down_proj"};
    size_t n = strlen(name);
    if (strncmp(name, "model.layers.", 13) || n < 7 || strcmp(name + n - 7, ".weight")) return 0;
    for (size_t i = 0; i < sizeof proj / sizeof proj[0]; i++) {
        size_t l = strlen(proj[i]);
        if (n > l + 8 && name[n - 8 - l] == '.' && !strncmp(name + n - 7 - l, proj[i], l)) return 1;
    }
    return 0;
}

void ds_quant_fp8_blocks(const ds_weight *w, uint8_t *q, float *scale_inv) {
    int R = w->rows, C = w->cols, nbc = (C + 127) / 128;
    float *rows = ds_xmalloc(sizeof(float) * 128 * (size_t)C), *amax = ds_xmalloc(sizeof(float) * (size_t)nbc);
    for (int r0 = 0; r0 < R; r0 += 128) {
        int nr = R - r0 < 128 ? R - r0 : 128;
        for (int i = 0; i < nr; i++) ds_weight_row_f32(w, r0 + i, rows + (size_t)i * C);
        for (int b = 0; b < nbc; b++) amax[b] = 0;
        for (int i = 0; i < nr; i++)
            for (int c = 0; c < C; c++) amax[c / 128] = fmaxf(amax[c / 128], fabsf(rows[(size_t)i * C + c]));
        for (int b = 0; b < nbc; b++) {
            amax[b] = fmaxf(amax[b], 1e-12f) / 448.0f;   /* the scale */
            scale_inv[(size_t)(r0 / 128) * nbc + b] = amax[b];
        }
        for (int i = 0; i < nr; i++)
            for (int c = 0; c < C; c++)
                q[(size_t)(r0 + i) * C + c] = ds_f32_to_fp8_e4m3(rows[(size_t)i * C + c] / amax[c / 128]);
    }
    free(rows);
    free(amax);
}

void ds_quant_nvfp4(const ds_weight *w, uint8_t *packed, uint8_t *block_scale, float *global) {
    int R = w->rows, C = w->cols;
    float *row = ds_xmalloc(sizeof(float) * (size_t)C), amax = 0;
    for (int r = 0; r < R; r++) {
        ds_weight_row_f32(w, r, row);
        for (int c = 0; c < C; c++) amax = fmaxf(amax, fabsf(row[c]));
    }
    float g = amax > 0 ? amax / (6.0f * 448.0f) : 1.0f;
    *global = g;
    for (int r = 0; r < R; r++) {
        ds_weight_row_f32(w, r, row);
        for (int c0 = 0; c0 < C; c0 += 16) {
            float bmax = 0;
            for (int j = 0; j < 16; j++) bmax = fmaxf(bmax, fabsf(row[c0 + j]));
            uint8_t s8 = ds_f32_to_fp8_e4m3(bmax / 6.0f / g);
            float s = ds_fp8_e4m3_to_f32(s8) * g;
            block_scale[(size_t)r * (C / 16) + c0 / 16] = s8;
            for (int j = 0; j < 16; j += 2) {
                uint8_t lo = s > 0 ? ds_f32_to_e2m1(row[c0 + j] / s) : 0;
                uint8_t hi = s > 0 ? ds_f32_to_e2m1(row[c0 + j + 1] / s) : 0;
                packed[((size_t)r * C + c0 + j) / 2] = (uint8_t)(lo | hi << 4);
            }
        }
    }
    free(row);
}

/* Bytes of w's data and scales in format `to`, each part padded to 16 bytes. */
static size_t quant_bytes(const ds_weight *w, ds_quant to) {
    size_t R = (size_t)w->rows, K = (size_t)w->cols;
    if (to == DS_QUANT_FP8) return (R * K + 15) / 16 * 16 + ((R + 127) / 128) * ((K + 127) / 128) * 4;
    return (R * K / 2 + 15) / 16 * 16 + R * K / 16;
}

static int quantizable(const ds_weight *w, ds_quant to) {
    if (w->dtype == DS_DTYPE_NVFP4) return 0;
    if (to == DS_QUANT_FP8) return w->dtype != DS_DTYPE_F8_E4M3;
    return w->cols % 16 == 0;
}

static void quantize_one(ds_weight *w, ds_quant to, unsigned char *dst) {
    size_t R = (size_t)w->rows, K = (size_t)w->cols;
    ds_weight src = *w;
    if (to == DS_QUANT_FP8) {
        float *scale = (float *)(void *)(dst + (R * K + 15) / 16 * 16);
        ds_quant_fp8_blocks(&src, dst, scale);
        *w = (ds_weight){.data = dst, .dtype = DS_DTYPE_F8_E4M3, .rows = w->rows, .cols = w->cols, .scale = scale,
                         .scale_cols = (int)((K + 127) / 128), .name = w->name};
    } else {
        uint8_t *bs = dst + (R * K / 2 + 15) / 16 * 16;
        float g;
        ds_quant_nvfp4(&src, dst, bs, &g);
        *w = (ds_weight){.data = dst, .dtype = DS_DTYPE_NVFP4, .rows = w->rows, .cols = w->cols, .block_scale = bs,
                         .global_scale = g, .name = w->name};
    }
}

void ds_weights_quantize(const ds_config *cfg, ds_model_weights *w, ds_quant to, void **owned) {
    ds_weight **list;
    int n = ds_weights_linear_list(cfg, w, &list);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += quantizable(list[i], to) ? quant_bytes(list[i], to) : 0;
    unsigned char *buf = ds_xmalloc(total ? total : 1), *p = buf;
    for (int i = 0; i < n; i++) {
        if (!quantizable(list[i], to)) continue;
        size_t b = quant_bytes(list[i], to);
        quantize_one(list[i], to, p);
        p += b;
    }
    free(list);
    *owned = buf;
}
