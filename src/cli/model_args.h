/* The flags shared by the model commands (logits, generate, chat, perplexity) and their parsing. */
#ifndef DS_CLI_MODEL_ARGS_H
#define DS_CLI_MODEL_ARGS_H

#include "dsinfer.h"

typedef struct {
    const char *model, *ids, *prompt, *out, *backend, *chat_template, *system, *file;
    int threads, n_new, print_ids, ignore_eos, force_absorbed, ctx;
    const char *kv_cache_dtype;   /* --kv-cache-dtype auto|fp8 */
    const char *ref_model;        /* compare: --ref-model DIR */
    const char *quantization;     /* --quantization fp8|fp4 (at load) */
    int dummy_weights;   /* --dummy-weights: random weights made on the GPU; --model may be a config .json */
    int tensor_parallel_size;     /* --tensor-parallel-size N (cpu backend: N ranks as threads) */
    int pipeline_parallel_size;   /* --pipeline-parallel-size N (cpu backend: N stages as threads) */
    ds_sampling_params sp;
} model_args;

/* Parses argv (argv[0] = the subcommand). Returns 0, or 2 after printing what is wrong and the usage. */
int model_args_parse(int argc, char **argv, model_args *a);
ds_status model_args_open_engine(const model_args *a, ds_engine **eng, char *err);

#endif
