/* dsinfer: public API. An inference engine for DeepSeek-V3 / R1 and V2 models.
 *
 * Contract: nothing tensor-shaped crosses this header. Callers hold opaque handles (an engine, its
 * sequences) and exchange token ids and logits. Every call that a bad file, flag or request can make
 * fail returns a ds_status and writes a one-line message into `err` (DS_ERRLEN bytes); broken internal
 * invariants abort with file:line instead.
 */
#ifndef DSINFER_H
#define DSINFER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DS_ERRLEN 512

typedef enum {
    DS_OK = 0,
    DS_ERR_ARG = 1,         /* a bad flag, argument or request field */
    DS_ERR_IO = 2,          /* a file that cannot be opened, read or mapped */
    DS_ERR_FORMAT = 3,      /* a file whose content is malformed (bad JSON, truncated, wrong shape) */
    DS_ERR_UNSUPPORTED = 4, /* well-formed but not supported (architecture, dtype, component) */
    DS_ERR_NOMEM = 5,       /* out of host or device memory, or out of KV pages */
    DS_ERR_BACKEND = 6,     /* the compute backend failed (CUDA error, ...) */
} ds_status;

const char *ds_status_name(ds_status st);

typedef struct ds_engine ds_engine;
typedef struct ds_seq ds_seq;

typedef struct {
    const char *backend;   /* "cpu" (default) or "cuda" */
    int n_threads;         /* CPU threads; 0 = all cores */
    int page_size;         /* tokens per KV page; 0 = default (16) */
    int max_pages;         /* KV pages in the pool; 0 = from kv_cache_bytes or the default */
    size_t kv_cache_bytes; /* size the pool to this many bytes of KV cache; 0 = default (4 full
                              contexts of at most 8192 tokens, capped at 1 GiB) */
    int force_absorbed;    /* 1: attend with the absorbed (latent) form for prefill too (tests) */
    const char *quantization; /* NULL, "fp8" or "fp4": quantize the linear weights at load (a copy in RAM) */
    const char *kv_cache_dtype; /* "auto" (or NULL) = "bf16" (latent and k_pe in bf16), "fp8" (the latent in
                                   e4m3 with one scale per 128 values, k_pe in bf16: 656 bytes per token per layer
                                   for the V3 shape) or "fp32" (the engine's compute precision: the reference's
                                   numbers, twice bf16's bytes); both backends */
    int dummy_weights;     /* 1: no checkpoint: deterministic random weights of the config's shapes and
                              dtypes, made on the device (backend cuda only); the model path may then
                              name a config .json file instead of a folder */
    int tensor_parallel_size; /* > 1 (cpu backend): this handle drives that many engines (threads), each
                              with 1/N of the heads and MLP widths, partial sums all-reduced; the same
                              results as one engine up to fp32 summation order; no prefix sharing */
    int tensor_parallel_one_rank, tensor_parallel_rank;
                           /* one_rank = 1 with tensor_parallel_size > 1: this engine is rank tensor_parallel_rank
                              of a group whose other ranks are other processes (one per GPU); it keeps only its
                              share of the weights, cut before they reach the backend, and steps once it has
                              joined the group's communicator (ds_engine_set_tensor_parallel, engine.h) */
    int tensor_expert_parallel; /* with tensor_parallel_size > 1: the routed experts are split whole across the
                              ranks (rank r keeps experts r*E/N .. (r+1)*E/N - 1 and computes them for all
                              tokens; the MoE's all-reduce sums them) instead of each expert by columns */
    int pipeline_parallel_size; /* > 1 (cpu backend): this handle drives that many engines (threads), each
                              running a contiguous share of the layers, the hidden state handed from one to
                              the next; the same results as one engine; no prefix sharing; not with TP yet */
    int pipeline_parallel_one_rank, pipeline_parallel_rank;
                           /* with pipeline_parallel_size = N > 1: this engine is stage pipeline_parallel_rank
                              of a pipeline whose other stages are other processes (one per GPU): it keeps
                              only its layers' weights (and the embedding on stage 0, the final norm and
                              lm_head on the last), cut before they reach the backend, and steps once it
                              has joined the group (ds_engine_set_pipeline_stage, engine.h); every stage
                              steps the same batch; the logits are valid on stage 0 */
    int expert_parallel_size, expert_parallel_rank;
                           /* > 1: this engine will be rank expert_parallel_rank of an expert-parallel
                              group of that size (ds_engine_join_expert_parallel): it keeps only that
                              rank's routed experts (an even split), so the backend holds 1/size of them,
                              and it cannot step before it has joined */
    int attn_no_measure;   /* 1: pick the attention form (naive / absorbed) by counted multiply-adds
                              alone; default 0: both forms are timed on the backend at open and each
                              step takes the one predicted faster */
} ds_engine_opts;

/* Opens the model folder `dir` (config.json + safetensors). Weights are mmapped, not copied. */
ds_status ds_engine_open(const char *dir, const ds_engine_opts *opts, ds_engine **out, char *err);
void ds_engine_free(ds_engine *eng);

int ds_engine_vocab_size(const ds_engine *eng);
/* A host buffer for `rows` rows of logits (rows x vocab_size floats), for ds_engine_forward's `logits`:
 * page-locked with the CUDA backend, so the device-to-host copy of a step's logits runs at the bus's rate
 * instead of through the driver's staging copy (256 rows of V2-Lite logits are 105 MB a step); plain
 * memory elsewhere. NULL if out of memory. Free it with ds_engine_logits_free before ds_engine_free. */
float *ds_engine_logits_alloc(ds_engine *eng, int rows);
void ds_engine_logits_free(ds_engine *eng, float *logits);
int ds_engine_max_context(const ds_engine *eng);
int ds_engine_bos_id(const ds_engine *eng);
int ds_engine_eos_id(const ds_engine *eng);
/* One line describing the model (architecture, layers, widths, dtype). */
const char *ds_engine_describe(const ds_engine *eng);
/* The KV cache dtype a --kv-cache-dtype value (ds_engine_opts.kv_cache_dtype) selects: "bf16" (also for NULL,
 * "auto" and "bfloat16"), "fp8" ("fp8_e4m3") or "fp32" ("float32"); NULL for an unknown name. */
const char *ds_kv_cache_dtype_resolve(const char *name);
/* 1 when a sequence step of n_new tokens over a context of ctx (cached + new) attends in the absorbed
 * (latent) form, 0 for the naive one; ds_engine_attn_measured: 1 if the choice rests on timings. */
int ds_engine_prefers_absorbed(const ds_engine *eng, int n_new, int ctx);
int ds_engine_attn_measured(const ds_engine *eng);
/* Routed experts per MoE layer (0 for a dense model). */
int ds_engine_routed_experts(const ds_engine *eng);

/* ---- expert parallelism (attention data parallel: one engine per rank with its own requests and KV
 * cache; the routed experts split over the ranks, token rows exchanged in every MoE layer) ----
 * A group of n_ranks engines of one model. The transport today is ranks as threads of this process
 * over host memory (the CPU backend); GPUs will use NCCL (dist/comm.h). Every engine of the group must
 * then step together: each step, every rank calls ds_ep_agree, and if any rank has work, every rank
 * steps: ds_engine_forward with its batch, or ds_engine_forward_idle with none. */
typedef struct ds_ep_group ds_ep_group;
/* Experts placed evenly (contiguous shares), plus redundant_slots replicas of the hottest experts per
 * rank when a load estimate is given later (none yet: 0). */
ds_status ds_ep_group_new(int n_ranks, int n_experts, int redundant_slots, ds_ep_group **out, char *err);
void ds_ep_group_free(ds_ep_group *g);   /* after every engine that joined it is freed */
/* 1: token rows travel to the experts in FP8 (e4m3 with a scale per 128 values, about a quarter of the
 * fp32 bytes; results come back in fp32). Changes the outputs by the rounding (bench/RESULTS.md); set
 * before engines join. Default 0. */
void ds_ep_group_set_fp8_dispatch(ds_ep_group *g, int on);
/* eng becomes rank `rank` of g (once, before its first step as a member). */
ds_status ds_engine_join_expert_parallel(ds_engine *eng, ds_ep_group *g, int rank, char *err);
/* One step without tokens: this rank only serves its experts. */
ds_status ds_engine_forward_idle(ds_engine *eng, char *err);
/* Every rank gives flags (a few bits) and a mark (e.g. a wake-up counter read before looking for work);
 * every rank gets the OR of the flags and the smallest mark over the group. */
ds_status ds_ep_agree(ds_engine *eng, int flags, uint64_t mark, int *any, uint64_t *min_mark, char *err);

/* A sequence owns its KV pages; it starts empty. */
ds_status ds_seq_new(ds_engine *eng, ds_seq **out, char *err);
void ds_seq_free(ds_seq *seq);
int ds_seq_len(const ds_seq *seq);      /* tokens in the KV cache */

/* ---- KV pages, for a scheduler and a prefix cache ------------------------------------------------
 * The cache is a pool of pages of page_size tokens. A sequence holds one reference to each of its
 * pages. A prefix cache may hold extra references to full pages (ds_engine_page_ref) and start a new
 * sequence on them (ds_seq_adopt_prefix); full pages are never written again, so sharing is safe. */
int ds_engine_page_size(const ds_engine *eng);
int ds_engine_pages_total(const ds_engine *eng);
int ds_engine_pages_free(const ds_engine *eng);
int ds_seq_n_pages(const ds_seq *seq);
int ds_seq_page(const ds_seq *seq, int i);   /* page id of the sequence's i-th page */
void ds_engine_page_ref(ds_engine *eng, int page);
void ds_engine_page_unref(ds_engine *eng, int page);   /* a page whose count drops to 0 is free */
int ds_engine_page_refcount(const ds_engine *eng, int page);
/* An empty sequence takes n_pages full pages (one reference each) as its first n_pages * page_size
 * tokens. DS_ERR_ARG if seq is not empty or a page id is not held by someone. */
ds_status ds_seq_adopt_prefix(ds_seq *seq, const int *pages, int n_pages, char *err);
/* Drops the sequence's tokens from position n_tokens on (n_tokens <= len), freeing whole pages past it
 * (used to roll back, e.g. rejected speculative tokens). */
void ds_seq_truncate(ds_seq *seq, int n_tokens);
/* An empty sequence `dst` gets a private copy of src's KV cache (fresh pages, every layer copied on
 * the backend) and src's length: a fork for parallel sampling, or many distinct contexts for a benchmark
 * without prefilling each. DS_ERR_ARG if dst is not empty; DS_ERR_NOMEM (nothing taken) when the pool
 * lacks the pages. */
ds_status ds_seq_fork(ds_seq *dst, const ds_seq *src, char *err);
/* Integrity of the page pool: every page free or held, free + held == total. */
ds_status ds_engine_check_pages(const ds_engine *eng, char *err);

/* One entry of a batch: a sequence and the tokens it brings this step (a prefill chunk or one
 * decode token). The tokens are appended at positions ds_seq_len(seq) ... + n_tokens - 1.
 * Logits are produced for every position when all_logits is 1, else for the last one only. */
typedef struct {
    ds_seq *seq;
    const int32_t *tokens;   /* [n_tokens] */
    int n_tokens;            /* >= 1 */
    int all_logits;
} ds_batch_item;

/* Runs one forward over the batch. `logits` receives float32 rows of vocab_size, in item order, one row
 * per produced position (n_tokens rows for all_logits items, 1 row otherwise). On error nothing is
 * appended to any sequence. */
ds_status ds_engine_forward(ds_engine *eng, const ds_batch_item *items, int n_items, float *logits,
                            char *err);

/* ---- sampling -------------------------------------------------------------------------------- */
typedef struct {
    float temperature;        /* 0 = greedy */
    int top_k;                /* 0 = off */
    float top_p;              /* 1 = off */
    float min_p;              /* 0 = off */
    float repetition_penalty; /* 1 = off (HF/CTRL style: divide positive logits, multiply negative) */
    float presence_penalty;   /* 0 = off (OpenAI style) */
    float frequency_penalty;  /* 0 = off (OpenAI style) */
    uint64_t seed;
} ds_sampling_params;

void ds_sampling_defaults(ds_sampling_params *p);
typedef struct ds_sampler ds_sampler;
ds_status ds_sampler_new(const ds_sampling_params *p, int vocab_size, ds_sampler **out, char *err);
void ds_sampler_free(ds_sampler *s);
/* Records a generated token: it counts for all three penalties. */
void ds_sampler_accept(ds_sampler *s, int32_t token);
/* Records a prompt token: it counts for the repetition penalty only (as in vLLM and HF; the OpenAI
 * presence and frequency penalties look at generated tokens). */
void ds_sampler_accept_prompt(ds_sampler *s, int32_t token);
/* Picks the next token from one row of logits (modified in place by penalties and filters). */
int32_t ds_sampler_sample(ds_sampler *s, float *logits);

#ifdef __cplusplus
}
#endif
#endif
