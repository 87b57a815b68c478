/* Engine lifetime: open a model folder (config, safetensors, weights bound and validated), create
 * the backend and the paged KV cache; sequences and their pages. The forward pass is forward.c. */
#include "model/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "dist/ep_moe.h"
#include "dist/tp.h"
#include "model/quantize.h"
#ifdef DS_HAVE_CUDA
#include "backend/cuda/cuda_api.h"
#endif

#define DEFAULT_PAGE_SIZE 16
#define DEFAULT_CACHE_BYTES (1ull << 30)

/* Bytes of one page of one layer, rounded up to whole floats (the backend allocates floats). */
static size_t cache_page_bytes(const ds_engine *e) {
    return ((size_t)e->page_size * ds_kv_token_bytes(&e->cfg) + 3) / 4 * 4;
}

/* The cache holds the layers layer_begin .. layer_end - 1 (all of them, or a pipeline stage's). */
void *ds_engine_layer_cache(ds_engine *e, int layer) {
    DS_CHECK(layer >= e->layer_begin && layer < e->layer_end);
    return (char *)e->cache + (size_t)(layer - e->layer_begin) * (size_t)ds_kv_pool_total(e->pool) * cache_page_bytes(e);
}

/* A pipeline stage keeps the KV of its own layers only (layer_begin .. layer_end - 1 set by the caller):
 * the cache is allocated again for those layers with the whole model's page count times L / ceil(L / R),
 * the same count on every stage (they hold the same sequences), in no more memory than the cache it
 * replaces. Only while no page is in use. */
ds_status ds_engine_restrict_cache(ds_engine *e, int n_stages, char *err) {
    int L = e->cfg.num_layers, max_stage = (L + n_stages - 1) / n_stages;
    int total = ds_kv_pool_total(e->pool);
    if (ds_kv_pool_free_count(e->pool) != total)
        return ds_seterr(err, DS_ERR_ARG, "pipeline stage: the KV cache is in use");
    long pages = (long)total * L / max_stage;
    if (pages > (1L << 30)) pages = 1L << 30;
    size_t n = (size_t)pages * cache_page_bytes(e) * (size_t)(e->layer_end - e->layer_begin) / sizeof(float);
    e->be->release(e->be, e->cache);   /* first: the two caches together may not fit on a GPU */
    e->cache = e->be->alloc(e->be, n);
    if (!e->cache)
        return ds_seterr(err, DS_ERR_NOMEM, "pipeline stage: cannot allocate the KV cache of layers %d..%d (%ld pages); "
                         "the engine has no cache now", e->layer_begin, e->layer_end - 1, pages);
    e->be->fill_nan(e->be, e->cache, n);
    ds_kv_pool_free(e->pool);
    e->pool = ds_kv_pool_new((int)pages);
    return DS_OK;
}

/* Default pool: room for 4 full contexts (capped at max_position_embeddings 8192) within 1 GiB. */
static int default_pages(const ds_engine *e) {
    int ctx = e->cfg.max_position_embeddings < 8192 ? e->cfg.max_position_embeddings : 8192;
    size_t want = 4 * (size_t)((ctx + e->page_size - 1) / e->page_size);
    size_t page_bytes = cache_page_bytes(e) * (size_t)e->cfg.num_layers;
    size_t cap = DEFAULT_CACHE_BYTES / page_bytes;
    if (cap < 16) cap = 16;
    return (int)(want < cap ? want : cap);
}

/* opts.expert_parallel_size > 1: the routed experts of the other ranks (the even placement of
 * ds_ep_group_new) are dropped before the backend takes the weights, so the CUDA backend uploads only
 * this rank's share. */
static void drop_layer_experts(ds_layer_weights *L, const char *mine, int E) {
    if (!L->is_moe || !L->exp_gate) return;
    for (int x = 0; x < E; x++)
        if (!mine[x]) {
            memset(&L->exp_gate[x], 0, sizeof(ds_weight));
            memset(&L->exp_up[x], 0, sizeof(ds_weight));
            memset(&L->exp_down[x], 0, sizeof(ds_weight));
        }
}

static ds_status trim_experts(ds_engine *e, const ds_engine_opts *o, char *err) {
    int size = o ? o->expert_parallel_size : 0, rank = o ? o->expert_parallel_rank : 0, E = e->cfg.n_routed_experts;
    if (size <= 1) return DS_OK;
    if (!E) return ds_seterr(err, DS_ERR_ARG, "expert parallel size %d: the model has no routed experts", size);
    if (rank < 0 || rank >= size) return ds_seterr(err, DS_ERR_ARG, "expert parallel rank %d of %d", rank, size);
    ds_ep_placement pl;
    ds_status st = ds_ep_place(E, size, 0, NULL, &pl, err);
    if (st) return st;
    char *mine = ds_xcalloc((size_t)E, 1);
    for (int s = 0; s < pl.rank_n_slots[rank]; s++) mine[pl.rank_experts[(size_t)rank * pl.max_slots + s]] = 1;
    for (int l = 0; l < e->w.n_layers; l++) drop_layer_experts(&e->w.layers[l], mine, E);
    if (e->w.mtp.present) drop_layer_experts(&e->w.mtp.layer, mine, E);
    free(mine);
    ds_ep_placement_free(&pl);
    e->ep_trim_size = size;
    e->ep_trim_rank = rank;
    return DS_OK;
}

/* opts.tensor_parallel_one_rank: this rank's share of the weights before the backend takes them */
static ds_status cut_one_tp_rank(ds_engine *e, const ds_engine_opts *o, char *err) {
    if (!o || !o->tensor_parallel_one_rank) return DS_OK;
    int R = o->tensor_parallel_size, r = o->tensor_parallel_rank;
    if (R < 2) return ds_seterr(err, DS_ERR_ARG, "tensor parallel one rank: a group of %d", R);
    if (o->pipeline_parallel_size > 1 || o->expert_parallel_size > 1)
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "tensor parallel one rank: not with pipeline or expert parallelism yet");
    const char *b = o->backend ? o->backend : "cpu";
    (void)b;
    ds_status st = ds_tp_slice(e, R, r, o->tensor_expert_parallel, err);
    if (!st) e->tp_sliced = 1;
    return st;
}

static void forget(ds_weight *w) { memset(w, 0, sizeof *w); }

static void forget_layer(ds_layer_weights *L, int E) {
    ds_weight *fixed[] = {&L->input_norm, &L->post_norm, &L->q_a, &L->q_a_norm, &L->q_b, &L->q, &L->kv_a,
                          &L->kv_a_norm, &L->kv_b, &L->o, &L->gate, &L->up, &L->down, &L->router,
                          &L->router_bias, &L->sh_gate, &L->sh_up, &L->sh_down};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) forget(fixed[i]);
    for (int x = 0; L->is_moe && x < E; x++) {
        forget(&L->exp_gate[x]);
        forget(&L->exp_up[x]);
        forget(&L->exp_down[x]);
    }
}

/* opts.pipeline_parallel_one_rank: this stage's weights only, before the backend takes them (the other
 * layers' views are forgotten, so the backend never uploads them) */
static ds_status cut_one_pp_stage(ds_engine *e, const ds_engine_opts *o, char *err) {
    if (!o || !o->pipeline_parallel_one_rank) return DS_OK;
    int R = o->pipeline_parallel_size, r = o->pipeline_parallel_rank, L = e->cfg.num_layers;
    if (R < 2 || R > L || r < 0 || r >= R)
        return ds_seterr(err, DS_ERR_ARG, "pipeline stage %d of %d: the model has %d layers", r, R, L);
    if (o->tensor_parallel_size > 1 || o->expert_parallel_size > 1)
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "pipeline stage: not with tensor or expert parallelism yet");
    int b = r * L / R, end = (r + 1) * L / R;
    for (int l = 0; l < L; l++)
        if (l < b || l >= end) forget_layer(&e->w.layers[l], e->cfg.n_routed_experts);
    if (r != 0 && !(e->cfg.tie_word_embeddings && r == R - 1)) forget(&e->w.embed);
    if (r != R - 1) {
        forget(&e->w.final_norm);
        forget(&e->w.lm_head);
    }
    if (e->w.mtp.present) {   /* the MTP module is not run by the pipeline */
        ds_weight *m[] = {&e->w.mtp.enorm, &e->w.mtp.hnorm, &e->w.mtp.eh_proj, &e->w.mtp.head_norm, &e->w.mtp.head};
        for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) forget(m[i]);
        forget_layer(&e->w.mtp.layer, e->cfg.n_routed_experts);
    }
    e->pp_cut_size = R;
    e->pp_cut_rank = r;
    return DS_OK;
}

static ds_status create_backend(ds_engine *e, const ds_engine_opts *o, char *err) {
    const char *name = o && o->backend ? o->backend : "cpu";
    if (strcmp(name, "cpu") == 0) {
        e->be = ds_backend_cpu_new(&e->cfg, o ? o->n_threads : 0);
        return DS_OK;
    }
    if (strcmp(name, "cuda") == 0) {
#ifdef DS_HAVE_CUDA
        e->be = ds_backend_cuda_new(&e->cfg, err);
        if (!e->be) return DS_ERR_BACKEND;
        return e->be->prepare_weights(e->be, &e->w, err);   /* weights resident on the device */
#else
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "backend cuda is not built into this dsinfer");
#endif
    }
    return ds_seterr(err, DS_ERR_ARG, "unknown backend \"%s\" (expected cpu or cuda)", name);
}

static ds_status quantize_at_load(ds_engine *e, const char *how, int dummy, char *err) {
    ds_quant q;
    ds_status st = ds_quant_parse(how, &q, err);
    if (st) return st;
    if (dummy) return ds_seterr(err, DS_ERR_UNSUPPORTED, "--quantization does not apply to dummy weights");
    ds_weights_quantize(&e->cfg, &e->w, q, &e->quant_owned);
    return DS_OK;
}

/* "auto" (and NULL) is "bf16", the checkpoints' activation precision, as "auto" is for vLLM and SGLang: the
 * latent and k_pe rounded to bf16, half the fp32 cache's bytes; "fp32" keeps the engine's compute precision
 * (the reference's numbers, what the exact golden tests use); "fp8" stores the latent in e4m3 with a scale
 * per 128 values. */
const char *ds_kv_cache_dtype_resolve(const char *name) {
    if (!name || !strcmp(name, "auto") || !strcmp(name, "bf16") || !strcmp(name, "bfloat16")) return "bf16";
    if (!strcmp(name, "fp8") || !strcmp(name, "fp8_e4m3")) return "fp8";
    if (!strcmp(name, "fp32") || !strcmp(name, "float32")) return "fp32";
    return NULL;
}

static ds_status set_kv_dtype(ds_config *c, const ds_engine_opts *o, char *err) {
    const char *kv = o ? o->kv_cache_dtype : NULL, *dt = ds_kv_cache_dtype_resolve(kv);
    if (!dt) return ds_seterr(err, DS_ERR_ARG, "unknown KV cache dtype \"%s\" (expected auto, bf16, fp8 or fp32)", kv);
    c->kv_bf16 = !strcmp(dt, "bf16");
    c->kv_fp8 = !strcmp(dt, "fp8");
    return DS_OK;
}

static ds_status create_cache(ds_engine *e, const ds_engine_opts *o, char *err) {
    e->page_size = o && o->page_size > 0 ? o->page_size : DEFAULT_PAGE_SIZE;
    size_t page_bytes = cache_page_bytes(e) * (size_t)e->cfg.num_layers;
    int n_pages = default_pages(e);
    if (o && o->max_pages > 0) n_pages = o->max_pages;
    else if (o && o->kv_cache_bytes) {
        if (o->kv_cache_bytes / page_bytes < 1)
            return ds_seterr(err, DS_ERR_ARG, "KV cache of %zu bytes holds no page (one page of %d tokens needs %zu bytes)",
                             o->kv_cache_bytes, e->page_size, page_bytes);
        n_pages = (int)(o->kv_cache_bytes / page_bytes < (1u << 30) ? o->kv_cache_bytes / page_bytes : (1u << 30));
    }
    size_t n = (size_t)n_pages * page_bytes / sizeof(float);
    e->cache = e->be->alloc(e->be, n);
    if (!e->cache)
        return ds_seterr(err, DS_ERR_NOMEM, "cannot allocate the KV cache (%d pages, %.1f MiB)", n_pages,
                         (double)n * 4 / (1 << 20));
    e->be->fill_nan(e->be, e->cache, n);   /* unused pages hold NaN: a stray read poisons the logits */
    e->pool = ds_kv_pool_new(n_pages);
    return DS_OK;
}

static void describe(ds_engine *e) {
    const ds_config *c = &e->cfg;
    const char *dt = ds_dtype_name(e->w.layers[e->pp_cut_size ? e->pp_cut_rank * c->num_layers / e->pp_cut_size : 0].kv_a.dtype);
    snprintf(e->desc, sizeof e->desc,
             "%s: %d layers, hidden %d, %d heads, kv_lora %d+%d, %d experts top-%d, vocab %d, weights %s%s, "
             "KV cache %s, backend %s", c->architecture, c->num_layers, c->hidden_size, c->num_heads, c->kv_lora_rank,
             c->qk_rope_head_dim, c->n_routed_experts, c->num_experts_per_tok, c->vocab_size, dt,
             e->w.mtp.present ? ", MTP layer present" : "", c->kv_fp8 ? "fp8" : c->kv_bf16 ? "bf16" : "fp32", e->be->name);
}

ds_status ds_engine_open(const char *dir, const ds_engine_opts *o, ds_engine **out, char *err) {
    ds_dtype_init();
    *out = NULL;
    ds_engine *e = ds_xcalloc(1, sizeof(*e));
    int dummy = o && o->dummy_weights;
    ds_status st = ds_config_load(dir, &e->cfg, err);
    if (!st && !dummy) st = ds_st_open_dir(dir, &e->st, err);
    if (!st) st = dummy ? ds_weights_dummy(&e->cfg, &e->w, err) : ds_weights_bind(&e->cfg, e->st, &e->w, err);
    if (!st && dummy && !(o->backend && strcmp(o->backend, "cuda") == 0))
        st = ds_seterr(err, DS_ERR_UNSUPPORTED, "dummy weights are generated on the GPU: use backend cuda");
    if (!st && o && o->quantization) st = quantize_at_load(e, o->quantization, dummy, err);
    if (!st) st = set_kv_dtype(&e->cfg, o, err);
    if (!st) st = trim_experts(e, o, err);
    if (!st) st = cut_one_tp_rank(e, o, err);
    if (!st) st = cut_one_pp_stage(e, o, err);
    if (!st) st = create_backend(e, o, err);
    e->layer_end = e->cfg.num_layers;   /* every layer's KV here, until a pipeline stage narrows it */
    if (!st) st = create_cache(e, o, err);
    if (st) {
        ds_engine_free(e);
        return st;
    }
    e->force_absorbed = o ? o->force_absorbed : 0;
    const char *fan = getenv("DSINFER_FUSED_ADD_NORM");   /* 0: the residual add and the norm as two ops */
    e->fused_add_norm = !(fan && !strcmp(fan, "0"));
    e->attn_cost = ds_attn_cost_model_only();
    if (!(o && (o->attn_no_measure || o->force_absorbed || o->pipeline_parallel_one_rank))) {   /* a stage may lack layer 0 */
        char why[DS_ERRLEN];   /* a pool with no free page keeps the multiply-add model */
        ds_attn_cost m;
        if (ds_attn_cost_measure(e, &m, why) == DS_OK) e->attn_cost = m;
    }
    if (e->tp_sliced || e->pp_cut_size) e->attn_cost = ds_attn_cost_model_only();   /* every rank must attend alike */
    describe(e);
    int tp = o && !o->tensor_parallel_one_rank ? o->tensor_parallel_size : 0;
    int pp = o && !o->pipeline_parallel_one_rank ? o->pipeline_parallel_size : 0;
    if (tp > 1 && pp > 1) {
        ds_engine_free(e);
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "tensor and pipeline parallelism together are not supported yet");
    }
    if (pp > e->cfg.num_layers) {
        int L = e->cfg.num_layers;
        ds_engine_free(e);
        return ds_seterr(err, DS_ERR_ARG, "pipeline parallel %d: the model has %d layers", pp, L);
    }
    if (tp > 1 || pp > 1) {
        e->attn_cost = ds_attn_cost_model_only();   /* the followers' choice: every rank attends alike */
        st = ds_tp_group_start(e, dir, o, tp > 1 ? tp : pp, err);
        if (st) {
            ds_engine_free(e);
            return st;
        }
    }
    *out = e;
    return DS_OK;
}

static void free_acts(ds_engine *e) {
    float **bufs[] = {&e->a.h, &e->a.xn, &e->a.qa, &e->a.q, &e->a.kv, &e->a.ao, &e->a.ff, &e->a.logits, &e->a.ff2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        if (*bufs[i]) e->be->release(e->be, *bufs[i]);
        *bufs[i] = NULL;
    }
    e->a.cap = 0;
}

void ds_engine_free(ds_engine *e) {
    if (!e) return;
    ds_tp_group_free(e->tpg);   /* the followers first: they share nothing with e but the group */
    if (e->ep_owned) {          /* its workspace lives in the backend: before the backend goes */
        ds_ep_ws_free(e->ep_owned->ws);
        e->ep_owned->comm->destroy(e->ep_owned->comm);
        free(e->ep_owned);
    }
    if (e->be) {
        free_acts(e);
        if (e->cache) e->be->release(e->be, e->cache);
        e->be->destroy(e->be);
    }
    ds_kv_pool_free(e->pool);
    ds_weights_free(&e->w);
    free(e->quant_owned);
    ds_st_close(e->st);
    free(e);
}

int ds_engine_vocab_size(const ds_engine *e) { return e->cfg.vocab_size; }

/* DSINFER_PINNED_LOGITS=0: logits buffers in plain memory on every backend (to measure what page-locking
 * buys); read once per process, so a buffer is always freed the way it was allocated */
static int pinned_logits(void) {
    static int on = -1;
    if (on < 0) {
        const char *v = getenv("DSINFER_PINNED_LOGITS");
        on = !(v && !strcmp(v, "0"));
    }
    return on;
}

float *ds_engine_logits_alloc(ds_engine *e, int rows) {
    size_t bytes = sizeof(float) * (size_t)(rows > 0 ? rows : 1) * (size_t)e->cfg.vocab_size;
    if (pinned_logits() && e->be && e->be->host_alloc) return e->be->host_alloc(e->be, bytes);
    return malloc(bytes);
}

void ds_engine_logits_free(ds_engine *e, float *logits) {
    if (!logits) return;
    if (pinned_logits() && e->be && e->be->host_free) e->be->host_free(e->be, logits);
    else free(logits);
}
int ds_engine_max_context(const ds_engine *e) { return e->cfg.max_position_embeddings; }
int ds_engine_bos_id(const ds_engine *e) { return e->cfg.bos_token_id; }
int ds_engine_eos_id(const ds_engine *e) { return e->cfg.eos_token_id; }
const char *ds_engine_describe(const ds_engine *e) { return e->desc; }
int ds_engine_prefers_absorbed(const ds_engine *e, int n_new, int ctx) {
    return e->force_absorbed || ds_attn_prefers_absorbed(&e->attn_cost, &e->cfg, n_new, ctx);
}
int ds_engine_attn_measured(const ds_engine *e) { return e->attn_cost.measured; }
int ds_engine_routed_experts(const ds_engine *e) { return e->cfg.n_routed_experts; }

ds_status ds_seq_new(ds_engine *e, ds_seq **out, char *err) {
    (void)err;
    ds_seq *s = ds_xcalloc(1, sizeof(*s));
    s->eng = e;
    *out = s;
    return DS_OK;
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Pages given back are refilled with NaN in every layer, so that reading one later shows. The pages that
 * become free are sorted and each run of consecutive ids is filled with one fill_nan per layer: a sequence's
 * pages are mostly consecutive, and one call per page and layer cost an 8K-token sequence 5706 kernel
 * launches (10 ms of GPU time, bench/RESULTS.md sixth session runs 10-11). */
void ds_engine_release_pages(ds_engine *e, const int *pages, int n) {
    int *freed = ds_xmalloc(sizeof(int) * (size_t)(n > 0 ? n : 1)), nf = 0;
    for (int i = 0; i < n; i++)
        if (ds_kv_pool_unref(e->pool, pages[i])) freed[nf++] = pages[i];
    qsort(freed, (size_t)nf, sizeof(int), cmp_int);
    size_t pb = cache_page_bytes(e);
    for (int i = 0; i < nf;) {
        int j = i + 1;
        while (j < nf && freed[j] == freed[j - 1] + 1) j++;   /* freed[i .. j-1] consecutive */
        for (int l = e->layer_begin; l < e->layer_end; l++)
            e->be->fill_nan(e->be, (float *)(void *)((char *)ds_engine_layer_cache(e, l) + (size_t)freed[i] * pb),
                            (size_t)(j - i) * pb / sizeof(float));
        i = j;
    }
    free(freed);
}

void ds_engine_release_page(ds_engine *e, int page) { ds_engine_release_pages(e, &page, 1); }

void ds_seq_free(ds_seq *s) {
    if (!s) return;
    if (s->eng->tpg) ds_tp_seq_free(s);
    ds_engine_release_pages(s->eng, s->pages, s->n_pages);
    free(s->pages);
    free(s);
}

int ds_seq_len(const ds_seq *s) { return s->len; }

/* Grows the activation buffers to hold M tokens (only when a larger step than ever before comes). */
void ds_engine_drop_acts(ds_engine *e) {
    if (e->be) free_acts(e);
}

ds_status ds_engine_reserve_acts(ds_engine *e, int M, char *err) {
    if (M <= e->a.cap) return DS_OK;
    const ds_config *c = &e->cfg;
    int cap = M > 2 * e->a.cap ? M : 2 * e->a.cap;
    free_acts(e);
    size_t D = (size_t)c->hidden_size, n = (size_t)cap;
    struct { float **p; size_t w; } bufs[] = {
        {&e->a.h, D}, {&e->a.xn, D}, {&e->a.qa, (size_t)(c->q_lora_rank ? c->q_lora_rank : 1)},
        {&e->a.q, (size_t)c->num_heads * c->qk_head_dim}, {&e->a.kv, (size_t)c->kv_lora_rank + c->qk_rope_head_dim},
        {&e->a.ao, (size_t)c->num_heads * c->v_head_dim}, {&e->a.ff, D}, {&e->a.logits, (size_t)c->vocab_size},
        {&e->a.ff2, e->tp_expert_e1 > e->tp_expert_e0 ? D : 1}};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        *bufs[i].p = e->be->alloc(e->be, n * bufs[i].w);
        if (!*bufs[i].p) {
            free_acts(e);
            return ds_seterr(err, DS_ERR_NOMEM, "cannot allocate activations for %d tokens", cap);
        }
    }
    e->a.cap = cap;
    return DS_OK;
}

int ds_engine_page_size(const ds_engine *e) { return e->page_size; }
int ds_engine_pages_total(const ds_engine *e) { return ds_kv_pool_total(e->pool); }
int ds_engine_pages_free(const ds_engine *e) { return ds_kv_pool_free_count(e->pool); }
int ds_seq_n_pages(const ds_seq *s) { return s->n_pages; }
int ds_seq_page(const ds_seq *s, int i) { return i >= 0 && i < s->n_pages ? s->pages[i] : -1; }
void ds_engine_page_ref(ds_engine *e, int page) { ds_kv_pool_ref(e->pool, page); }
void ds_engine_page_unref(ds_engine *e, int page) { ds_engine_release_page(e, page); }
int ds_engine_page_refcount(const ds_engine *e, int page) {
    return page >= 0 && page < ds_kv_pool_total(e->pool) ? ds_kv_pool_refcount(e->pool, page) : 0;
}
ds_status ds_engine_check_pages(const ds_engine *e, char *err) { return ds_kv_pool_check(e->pool, err); }

ds_status ds_seq_adopt_prefix(ds_seq *s, const int *pages, int n_pages, char *err) {
    ds_engine *e = s->eng;
    if (e->tpg) return ds_seterr(err, DS_ERR_UNSUPPORTED, "prefix sharing is not available with tensor parallelism");
    if (s->len || s->n_pages) return ds_seterr(err, DS_ERR_ARG, "adopt_prefix: the sequence is not empty");
    if ((long)n_pages * e->page_size > e->cfg.max_position_embeddings)
        return ds_seterr(err, DS_ERR_ARG, "adopt_prefix: %d pages exceed the model's context", n_pages);
    for (int i = 0; i < n_pages; i++)
        if (ds_engine_page_refcount(e, pages[i]) <= 0)
            return ds_seterr(err, DS_ERR_ARG, "adopt_prefix: page %d is not held", pages[i]);
    s->pages = ds_xrealloc(s->pages, sizeof(int) * (size_t)(n_pages + 1));
    s->cap_pages = n_pages + 1;
    for (int i = 0; i < n_pages; i++) {
        ds_kv_pool_ref(e->pool, pages[i]);
        s->pages[i] = pages[i];
    }
    s->n_pages = n_pages;
    s->len = n_pages * e->page_size;
    return DS_OK;
}

void ds_seq_truncate(ds_seq *s, int n_tokens) {
    if (n_tokens < 0) n_tokens = 0;
    if (s->eng->tpg) ds_tp_seq_truncate(s, n_tokens);
    if (n_tokens >= s->len) return;
    int keep = (n_tokens + s->eng->page_size - 1) / s->eng->page_size;
    while (s->n_pages > keep) ds_engine_release_page(s->eng, s->pages[--s->n_pages]);
    s->len = n_tokens;
}

ds_status ds_seq_fork(ds_seq *dst, const ds_seq *src, char *err) {
    ds_engine *e = dst->eng;
    if (e->tpg) return ds_seterr(err, DS_ERR_UNSUPPORTED, "forking a sequence is not available with tensor parallelism");
    if (src->eng != e) return ds_seterr(err, DS_ERR_ARG, "fork: sequences of different engines");
    if (dst->len || dst->n_pages) return ds_seterr(err, DS_ERR_ARG, "fork: the destination sequence is not empty");
    if (ds_kv_pool_free_count(e->pool) < src->n_pages)
        return ds_seterr(err, DS_ERR_NOMEM, "fork: %d KV pages needed, %d free", src->n_pages, ds_kv_pool_free_count(e->pool));
    dst->pages = ds_xrealloc(dst->pages, sizeof(int) * (size_t)(src->n_pages + 1));
    dst->cap_pages = src->n_pages + 1;
    size_t pb = cache_page_bytes(e);
    for (int i = 0; i < src->n_pages; i++) {
        int page = ds_kv_pool_take(e->pool);
        DS_CHECK(page >= 0);
        dst->pages[dst->n_pages++] = page;
        for (int l = e->layer_begin; l < e->layer_end; l++) {
            char *base = ds_engine_layer_cache(e, l);
            void *d = base + (size_t)page * pb;
            const void *s = base + (size_t)src->pages[i] * pb;
            e->be->copy_bytes(e->be, d, s, pb);
        }
    }
    dst->len = src->len;
    return DS_OK;
}
