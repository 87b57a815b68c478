/* config.json of a DeepSeek-V2 / V3 checkpoint, parsed and validated, plus derived constants. */
#ifndef DS_LOADER_CONFIG_H
#define DS_LOADER_CONFIG_H

#include "dsinfer.h"

typedef enum { DS_ARCH_V2 = 2, DS_ARCH_V3 = 3 } ds_arch;
typedef enum { DS_SCORE_SOFTMAX, DS_SCORE_SIGMOID } ds_scoring;
typedef enum { DS_TOPK_GREEDY, DS_TOPK_GROUP_LIMITED_GREEDY, DS_TOPK_NOAUX_TC } ds_topk_method;

#define DS_MAX_ROPE_DIM 256

typedef struct {
    ds_arch arch;
    char architecture[64];   /* "DeepseekV3ForCausalLM" */
    int vocab_size;
    int hidden_size;         /* D */
    int intermediate_size;   /* dense MLP width */
    int moe_intermediate_size;
    int num_layers;
    int num_heads;           /* H */
    int q_lora_rank;         /* Rq; 0 = plain q_proj */
    int kv_lora_rank;        /* C */
    int qk_nope_head_dim;    /* dn */
    int qk_rope_head_dim;    /* dr */
    int v_head_dim;          /* dv */
    int n_routed_experts;    /* 0 = no MoE */
    int num_experts_per_tok;
    int n_shared_experts;
    int first_k_dense_replace;
    int moe_layer_freq;
    ds_scoring scoring;
    ds_topk_method topk_method;
    int n_group, topk_group;
    int norm_topk_prob;
    float routed_scaling_factor;
    float rms_norm_eps;
    int max_position_embeddings;
    int num_nextn_predict_layers;
    int tie_word_embeddings;
    int bos_token_id, eos_token_id;
    int fp8;                 /* quantization_config fp8 with 128x128 blocks */
    int fp8_block[2];
    int nvfp4;               /* quantization_config modelopt NVFP4 (weights may be U8 + scales) */
    int kv_fp8;              /* engine choice, not from the file: FP8 KV cache (see ds_kv_token_bytes) */
    int kv_bf16;             /* engine choice: BF16 KV cache (latent and k_pe in bf16); never with kv_fp8 */

    /* rope / yarn */
    double rope_theta;
    int yarn;                /* rope type yarn */
    double rope_factor, beta_fast, beta_slow, mscale, mscale_all_dim, attention_factor;
    int original_max_position_embeddings;

    /* derived */
    int qk_head_dim;         /* dn + dr */
    float softmax_scale;     /* dqk^-0.5 * m^2 (spec 6.5) */
    float rope_amplitude;    /* A on cos/sin (spec 7.3) */
    double inv_freq[DS_MAX_ROPE_DIM / 2];  /* [dr/2] */
} ds_config;

/* Parses `dir`/config.json, or `dir` itself when it names a .json file (a config without weights, for
 * dummy-weight runs and memory plans). Unknown architectures, missing or out-of-range fields give an error that
 * names the file and the field. */
ds_status ds_config_load(const char *dir, ds_config *cfg, char *err);
/* Parses config text (for tests). `where` names the source in messages. */
ds_status ds_config_parse(const char *json, const char *where, ds_config *cfg, char *err);

/* Bytes of one token's KV entry in one layer. fp32 cache: (C + dr) floats. FP8 cache (issue 9):
 * C e4m3 values, then ceil(C/128) fp32 scales (one per 128 latent values), then dr bf16 k_pe values;
 * 656 bytes for the V3 shape. */
size_t ds_kv_token_bytes(const ds_config *cfg);

/* 1 iff layer i uses MoE (spec 9.1). */
int ds_config_layer_is_moe(const ds_config *cfg, int layer);

/* YaRN get_mscale (spec 6.5). */
double ds_yarn_get_mscale(double scale, double mscale);

#endif
