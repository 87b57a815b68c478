/* The memory plan of a model on a group of GPUs (issues 10 and 12): weight bytes per GPU under data +
 * expert parallelism or tensor parallelism, KV bytes per token, and how many tokens of KV cache fit.
 * Plain arithmetic on the config, unit-tested on the CPU, printed by `dsinfer plan` (and at start-up
 * of multi-GPU runs, to compare with what NVML reports). */
#ifndef DS_DIST_MEMPLAN_H
#define DS_DIST_MEMPLAN_H

#include <stddef.h>

#include "loader/config.h"

typedef enum { DS_PAR_DP_EP, DS_PAR_TP } ds_par_mode;

typedef struct {
    ds_par_mode mode;
    int n_gpus;
    int fp8_weights;          /* linear weights FP8 with 128x128 scales (else BF16) */
    int kv_fp8;               /* FP8 KV cache (else BF16) */
    double gpu_bytes;         /* memory per GPU */
    double utilization;       /* fraction of it the engine may use (e.g. 0.9) */
    double activation_bytes;  /* reserve per GPU for activations and workspaces */
} ds_plan_input;

typedef struct {
    double params_total;      /* parameters of the main model (no MTP) */
    double params_active;     /* parameters a token uses (top-k experts) */
    double weight_bytes_total;
    double weight_bytes_per_gpu;
    double kv_bytes_per_token;     /* per GPU holding the token's cache, all layers */
    double kv_bytes_per_gpu;       /* what is left for the KV pool */
    double tokens_per_gpu;         /* KV tokens a GPU holds */
    double tokens_total;           /* over the group: DP holds different requests per GPU; TP replicates */
    int fits;
} ds_plan;

void ds_memory_plan(const ds_config *cfg, const ds_plan_input *in, ds_plan *out);

#endif
