/* Weight quantization: DeepSeek's FP8 format (e4m3 with one fp32 scale per 128x128 block) and NVIDIA's
 * NVFP4 (E2M1 pairs packed in bytes, one e4m3 scale per 16 values, one fp32 scale per tensor), and the
 * conversion of a whole checkpoint folder (`dsinfer quantize`). */
#ifndef DS_MODEL_QUANTIZE_H
#define DS_MODEL_QUANTIZE_H

#include <stdint.h>

#include "model/weights.h"

typedef enum { DS_QUANT_NONE = 0, DS_QUANT_FP8, DS_QUANT_FP4 } ds_quant;

/* "fp8" / "fp4" (also "nvfp4") -> the format; DS_ERR_ARG otherwise. */
ds_status ds_quant_parse(const char *s, ds_quant *q, char *err);

/* 1 if the tensor name is a linear projection the releases quantize (attention projections, dense,
 * expert and shared-expert MLPs); the router, embeddings, lm_head, norms and MTP heads are not. */
int ds_quant_is_linear(const char *name);

/* FP8 blocks (spec 12.1): q [rows, cols] e4m3, scale_inv [ceil(rows/128), ceil(cols/128)] with
 * scale = amax(|block|) / 448, as tools/make_fp8.py and the DeepSeek release. */
void ds_quant_fp8_blocks(const ds_weight *w, uint8_t *q, float *scale_inv);

/* NVFP4 (spec 13): packed [rows, cols/2], block_scale [rows, cols/16] e4m3, *global = amax / (6 * 448).
 * cols must be a multiple of 16. */
void ds_quant_nvfp4(const ds_weight *w, uint8_t *packed, uint8_t *block_scale, float *global);

/* Quantizes every linear weight of w in memory (--quantization at load). The new data lives in one
 * malloc'd block returned in *owned (free it after the weights); weights already in the target format,
 * NVFP4 weights, and (for fp4) weights whose columns are not a multiple of 16 are left as they are. */
void ds_weights_quantize(const ds_config *cfg, ds_model_weights *w, ds_quant to, void **owned);

/* Writes in_dir's model quantized to `to` into out_dir (created if needed): model.safetensors,
 * config.json with its quantization_config, the tokenizer files copied. Prints one line per 10% done
 * to stderr when progress is set. */
ds_status ds_quantize_checkpoint(const char *in_dir, const char *out_dir, ds_quant to, int progress, char *err);

#endif
