/* The engine behind the public handles: model config and weights, the backend, the KV cache and its
 * page pool, and the activation buffers of one forward step. */
#ifndef DS_MODEL_ENGINE_H
#define DS_MODEL_ENGINE_H

#include "backend/backend.h"
#include "kv/kv_pool.h"
#include "loader/config.h"
#include "loader/safetensors.h"
#include "model/attn_cost.h"
#include "model/weights.h"

/* Activations of one step, in backend memory, for up to `cap` tokens. */
typedef struct {
    int cap;
    float *h;        /* [cap, D] residual stream */
    float *xn;       /* [cap, D] normed input of a block */
    float *qa;       /* [cap, Rq] q-LoRA latent */
    float *q;        /* [cap, H*dqk] */
    float *kv;       /* [cap, C+dr] latent (normed) + k_pe (roped) */
    float *ao;       /* [cap, H*dv] attention output per head */
    float *ff;       /* [cap, D] block output */
    float *logits;   /* [cap, vocab] */
    float *ff2;      /* [cap, D] with tensor parallelism over whole experts (the shared experts' part), else [cap, 1] */
} ds_acts;

struct ds_engine {
    ds_config cfg;
    ds_st_set *st;
    ds_model_weights w;
    void *quant_owned;   /* weights quantized at load (--quantization), or NULL */
    ds_backend *be;
    ds_kv_pool *pool;
    void *cache;         /* [num_layers, n_pages, page_size, ds_kv_token_bytes(cfg)] bytes */
    int page_size;
    int force_absorbed;
    int fused_add_norm;  /* be->add_rmsnorm where the backend has it (DSINFER_FUSED_ADD_NORM=0: off) */
    ds_attn_cost attn_cost;   /* per step and sequence: naive or absorbed attention (attn_cost.h) */
    const struct ds_ep_s *ep; /* expert parallelism (dist/ep_moe.h), or NULL: every expert here */
    int ep_gather;            /* 1: the gathered form (ds_ep_moe_gathered; DSINFER_EP_GATHER=0: the all-to-all one) */
    int ep_mmax;              /* with ep_gather: the group's largest token count this step */
    struct ds_ep_s *ep_owned; /* ep when made by ds_engine_join_expert_parallel (freed with the engine) */
    struct ds_comm *tp;       /* tensor parallelism (dist/tp.h): partial sums all-reduced over it, or NULL */
    struct ds_comm *pp;       /* pipeline parallelism: this rank runs layers [layer_begin, layer_end) */
    int layer_begin, layer_end;
    int ep_trim_size, ep_trim_rank;   /* opts.expert_parallel_*: only that rank's experts are loaded */
    struct ds_tp_group *tpg;          /* opts.tensor_parallel_size > 1: the leader's followers (dist/tp_group.c) */
    struct ds_tp_group *tp_follower_of;
    int tp_rank, tp_size;             /* this engine's tensor-parallel rank and group size (ds_tp_slice) */
    int tp_sliced;                    /* opened as one rank (opts.tensor_parallel_one_rank): cut at open */
    int tp_expert_e0, tp_expert_e1;   /* TP with whole experts: this rank's routed experts [e0, e1); else 0, 0 */
    int pp_cut_size, pp_cut_rank;     /* opened as one pipeline stage (opts.pipeline_parallel_one_rank), else 0, 0 */
    ds_status step_st;        /* the first error of an expert-parallel MoE in the current step */
    char step_err[DS_ERRLEN];
    ds_acts a;
    char desc[256];
};

struct ds_seq {
    ds_engine *eng;
    struct ds_seq **shadow;   /* tensor parallel leader: this sequence on each follower ([n], 0 unused) */
    int len;          /* tokens in the cache */
    int *pages;       /* [n_pages] page ids, in position order */
    int n_pages, cap_pages;
};

/* The KV cache of `layer` inside eng->cache. */
void *ds_engine_layer_cache(ds_engine *eng, int layer);
ds_status ds_engine_restrict_cache(ds_engine *eng, int n_stages, char *err);
/* Drops one reference to a page; a page that becomes free is poisoned with NaN. */
void ds_engine_release_page(ds_engine *eng, int page);
/* The same for n pages (a page may appear more than once: one reference each); the freed ones are
 * poisoned with one fill per layer for each run of consecutive page ids. */
void ds_engine_release_pages(ds_engine *eng, const int *pages, int n);
/* Frees the activation buffers (the next step allocates them at the current widths). */
void ds_engine_drop_acts(ds_engine *eng);
/* Grows the activation buffers to hold M tokens. */
ds_status ds_engine_reserve_acts(ds_engine *eng, int M, char *err);

/* Expert parallelism (issue 10; dist/ep_moe.h): from now on the MoE layers of this engine run through
 * ep (this rank's experts, token rows exchanged with the other ranks' engines). Every rank's engine
 * must then step together: a rank with nothing to do calls ds_engine_forward_idle for each step the
 * others take. ep must outlive the engine's use of it. Checks the placement against the model. */
ds_status ds_engine_set_expert_parallel(ds_engine *eng, const struct ds_ep_s *ep, char *err);
/* One step with no tokens: only the MoE layers' exchanges (this rank serves its experts). */
ds_status ds_engine_forward_idle(ds_engine *eng, char *err);

/* The forward of this engine alone (ds_engine_forward adds the tensor-parallel followers). */
ds_status ds_engine_forward_local(ds_engine *eng, const ds_batch_item *items, int n, float *logits, char *err);
/* dist/tp_group.c */
typedef struct ds_tp_group ds_tp_group;
ds_status ds_tp_group_start(ds_engine *leader, const char *dir, const ds_engine_opts *o, int n, char *err);
void ds_tp_group_free(ds_tp_group *g);
ds_status ds_tp_forward(ds_engine *leader, const ds_batch_item *items, int n, float *logits, char *err);
void ds_tp_seq_free(ds_seq *s);
void ds_tp_seq_truncate(ds_seq *s, int n_tokens);

/* Pipeline parallelism: this engine becomes stage comm->rank of comm->size and runs layers
 * [rank * L / size, (rank + 1) * L / size); the stages hand the hidden state on, the last one's logits
 * go back to stage 0. Every stage must run the same batches. */
ds_status ds_engine_set_pipeline_stage(ds_engine *eng, struct ds_comm *comm, char *err);

/* Tensor parallelism (dist/tp.h): this engine becomes rank comm->rank of comm->size, keeping its share
 * of heads and MLP widths; every rank must then run the same batches. On error the engine is unusable. */
/* whole_experts: the routed experts split whole across the ranks (opts.tensor_expert_parallel). */
ds_status ds_engine_set_tensor_parallel(ds_engine *eng, struct ds_comm *comm, int whole_experts, char *err);

#endif
