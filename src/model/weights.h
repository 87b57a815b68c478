/* The checkpoint's tensors bound to the model's structure, validated at load.
 *
 * A ds_weight points into the mmapped safetensors data in its stored dtype (nothing is copied); FP8
 * weights carry their weight_scale_inv (128x128 blocks, multiply to dequantize). Shapes follow the
 * checkpoint: a linear weight is [rows = out_features, cols = in_features]. */
#ifndef DS_MODEL_WEIGHTS_H
#define DS_MODEL_WEIGHTS_H

#include "core/dtype.h"
#include "loader/config.h"
#include "loader/safetensors.h"

typedef struct {
    const void *data;     /* [rows, cols] in dtype; NULL = absent (optional tensors only) */
    ds_dtype dtype;
    int rows, cols;       /* a 1-D tensor has rows = 1 */
    const float *scale;   /* F8_E4M3 only: [ceil(rows/128), ceil(cols/128)] row-major; else NULL */
    int scale_cols;       /* ceil(cols/128) */
    /* NVFP4 only (dtype DS_DTYPE_NVFP4, spec 13): data is U8 [rows, cols/2], two E2M1 codes a byte, the
     * even element in the low nibble; W[r, c] = e2m1 * fp8(block_scale[r, c/16]) * global_scale. */
    const uint8_t *block_scale;  /* F8_E4M3 [rows, cols/16] (weight_scale) */
    float global_scale;          /* weight_scale_2 */
    const char *name;     /* tensor name in the checkpoint */
    /* A view of columns of a larger tensor (tensor parallelism, dist/tp.c): elements between the starts
     * of two rows; 0 = cols. data (and scale / block_scale) then point at the view's first column, and
     * scale_cols stays the full tensor's scale row length. Only the CPU backend reads such views. */
    int ld;
    /* A tensor-parallel slice of a dummy weight (data == DS_WEIGHT_DUMMY): where it sits in the whole
     * tensor, so the device generates the whole tensor's values there (a slice equals the one-GPU model's
     * share); dummy_full_cols 0 = not a slice. */
    int dummy_r0, dummy_c0, dummy_full_cols;
} ds_weight;

typedef struct {
    ds_weight input_norm;  /* [D] */
    ds_weight post_norm;   /* [D] */
    /* attention */
    ds_weight q_a;         /* [Rq, D]       (q_lora_rank > 0) */
    ds_weight q_a_norm;    /* [Rq] */
    ds_weight q_b;         /* [H*dqk, Rq] */
    ds_weight q;           /* [H*dqk, D]    (q_lora_rank == 0) */
    ds_weight kv_a;        /* [C+dr, D] */
    ds_weight kv_a_norm;   /* [C] */
    ds_weight kv_b;        /* [H*(dn+dv), C] */
    ds_weight o;           /* [D, H*dv] */
    /* dense MLP (is_moe == 0) */
    ds_weight gate, up;    /* [I, D] */
    ds_weight down;        /* [D, I] */
    /* MoE (is_moe == 1) */
    int is_moe;
    ds_weight router;      /* [E, D] */
    ds_weight router_bias; /* [E] e_score_correction_bias (noaux_tc only) */
    ds_weight *exp_gate, *exp_up;  /* [E] of [mI, D] */
    ds_weight *exp_down;           /* [E] of [D, mI] */
    ds_weight sh_gate, sh_up;      /* [mI*n_shared, D]; absent if n_shared_experts == 0 */
    ds_weight sh_down;             /* [D, mI*n_shared] */
} ds_layer_weights;

/* Multi-token-prediction module (layer index num_hidden_layers), kept addressable for speculative
 * decoding; present == 0 when the checkpoint has none. */
typedef struct {
    int present;
    ds_weight enorm, hnorm;        /* [D] */
    ds_weight eh_proj;             /* [D, 2D] */
    ds_weight head_norm;           /* [D] shared_head.norm */
    ds_weight head;                /* [vocab, D] shared_head.head (may be absent: shares lm_head) */
    ds_layer_weights layer;
} ds_mtp_weights;

typedef struct {
    ds_weight embed;       /* [vocab, D] */
    ds_weight final_norm;  /* [D] */
    ds_weight lm_head;     /* [vocab, D] (= embed when tie_word_embeddings) */
    ds_layer_weights *layers;  /* [num_layers] */
    int n_layers;
    ds_mtp_weights mtp;
    size_t n_bound;        /* tensors bound */
} ds_model_weights;

/* Binds and validates every tensor the config calls for. Errors name the tensor and the file. */
ds_status ds_weights_bind(const ds_config *cfg, const ds_st_set *set, ds_model_weights *w, char *err);

/* Dummy weights (no checkpoint): the same structure, shapes and dtypes that a released checkpoint of
 * this config has (FP8 with block scales where the config is FP8-quantized, BF16 elsewhere, an F32
 * e_score_correction_bias for noaux_tc, no MTP module), with data and scale set to DS_WEIGHT_DUMMY.
 * Only a backend whose prepare_weights generates them (CUDA) can run such weights. */
extern const unsigned char ds_weight_dummy_tag[1];
#define DS_WEIGHT_DUMMY ((const void *)ds_weight_dummy_tag)
/* Dummy NVFP4 weights: uniform random E2M1 codes (rms 2.93) times block scales near 1 times this global
 * scale have about the standard deviation of the other dummy linears (0.02). */
#define DS_DUMMY_NVFP4_GSCALE 0.0068f
ds_status ds_weights_dummy(const ds_config *cfg, ds_model_weights *w, char *err);
void ds_weights_free(ds_model_weights *w);

/* Pointers to every linear projection weight (attention, dense MLP, experts, shared experts; MTP layer
 * included), the ones the releases quantize; *out is malloc'd. Returns the count. */
int ds_weights_linear_list(const ds_config *cfg, ds_model_weights *w, ds_weight ***out);

/* Number of bound weights (all layers, MTP included) stored in dtype t. */
int ds_weights_count_dtype(const ds_config *cfg, const ds_model_weights *w, ds_dtype t);

/* Row r of w as float32 (dequantized with its block scale for FP8), into dst[cols]. */
void ds_weight_row_f32(const ds_weight *w, int r, float *dst);
/* Element count-based size in bytes of the stored data (scales included). */
size_t ds_weight_bytes(const ds_weight *w);

#endif
