/* The engine thread: it alone touches the engine, its KV pages and the scheduler.
 *
 * Loop: take new requests from the inbox and cancelled ones out; plan a step (sched_schedule); run
 * one forward over all its items (prefill chunks and decode tokens mixed); for every item that ends
 * its request's known tokens, sample the next token (with logprobs when asked), detokenize it, look for
 * stop strings, publish the token and the text that no stop string can still claim, and finish the
 * request on EOS, a stop string, max_tokens or the context. When idle it checks the page pool.
 *
 * Sections: requests (gen), text and stop strings, sampling, the step, the thread, start/stop. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/status.h"
#include "dist/ep_moe.h"
#include "sched/adaptive.h"
#include "server/remote.h"
#include "server/srv_internal.h"

void (*srv_step_hook)(double now, double dur, int n_items, int n_tokens, int n_sampled, int n_decode);

typedef struct replica replica;
static void replica_stop(replica *e);

/* Expert parallelism: the replicas step together (ds_ep_agree each round). A round where no replica
 * has work ends in a wait on this condition; anything that gives a replica work (a request, a check,
 * a stop) bumps gen and wakes them all. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned long gen;
} ep_sync;

static void ep_kick(ep_sync *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->gen++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* The engine thread's state for one request. */
typedef struct gen {
    srv_req *req;
    sched_req *sr;           /* NULL once finished */
    ds_sampler *smp;
    ds_detok *detok;
    char *out;               /* [len] all text decoded so far, stop strings cut */
    size_t len, cap, released;
    int max_stop;            /* bytes of the longest stop string */
    int n_gen;
    struct gen *prev, *next;
} gen;

struct replica {
    server_config cfg;
    srv_metrics *metrics;
    srv_dash *dash;
    adapt_ctl adapt;         /* the decode batch limit under --slo-tpot-ms (engine thread only) */
    ds_engine *eng;
    ds_tokenizer *tok;
    ds_chat_template tpl;
    sched *sch;
    int vocab, max_ctx, eos;
    float *logits;           /* [max_num_seqs, vocab] one row per batch item */
    float *raw;              /* [vocab] a row's raw logits, kept for logprobs */
    ds_batch_item *items;    /* [max_num_seqs] */
    gen *active;             /* requests in the scheduler (engine thread only) */
    ep_sync *ep;             /* expert parallel: the group's wake-up, else NULL */
    int ep_remote;           /* the group's other ranks are other processes (their kicks do not reach ep) */
    pthread_t thread;
    int started;
    /* shared with the HTTP threads, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv, check_cv;
    srv_req *in_head, *in_tail;
    int in_n, stopping, quit;
    int check_req, check_gen;
    ds_status check_st;
    char check_err[DS_ERRLEN];
    sched_stats stats;
    int pool_ok;
};

double srv_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

srv_req *srv_req_new(void) {
    srv_req *r = ds_xcalloc(1, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->refs = 1;
    r->stop_index = -1;
    atomic_init(&r->cancelled, 0);
    return r;
}

void srv_req_release(srv_req *r) {
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    int last = --r->refs == 0;
    pthread_mutex_unlock(&r->mu);
    if (!last) return;
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->prompt);
    free(r->toks);
    free(r->text);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}

/* ---- text and stop strings ------------------------------------------------------------------- */
static void out_append(gen *g, const char *s, size_t n) {
    if (!n) return;
    if (g->len + n + 1 > g->cap) {
        g->cap = (g->len + n + 1) * 2;
        g->out = ds_xrealloc(g->out, g->cap);
    }
    memcpy(g->out + g->len, s, n);
    g->len += n;
    g->out[g->len] = 0;
}

/* Looks for stop strings in text appended from `from` on (a match may start up to max_stop - 1 bytes
 * earlier). On a match, cuts the text there and returns the stop string's index; else -1. */
static int find_stop(gen *g, size_t from) {
    const srv_req *r = g->req;
    if (!g->len || !r->n_stop) return -1;
    size_t start = from > (size_t)g->max_stop ? from - (size_t)g->max_stop : 0;
    int best = -1;
    size_t best_pos = g->len;
    for (int i = 0; i < r->n_stop; i++) {
        const char *p = memmem(g->out + start, g->len - start, r->stop[i], strlen(r->stop[i]));
        if (p && (size_t)(p - g->out) < best_pos) { best = i; best_pos = (size_t)(p - g->out); }
    }
    if (best >= 0) { g->len = best_pos; g->out[g->len] = 0; }
    return best;
}

/* How much text is safe to publish: all once finished, else all but what a stop string may still
 * claim, never cutting a UTF-8 sequence. */
static size_t releasable(const gen *g, int final) {
    if (final || g->req->n_stop == 0) return g->len;
    size_t hold = (size_t)(g->max_stop - 1), cut = g->len > hold ? g->len - hold : 0;
    while (cut > g->released && (g->out[cut] & 0xC0) == 0x80) cut--;
    return cut > g->released ? cut : g->released;
}

/* Publishes a token (may be NULL) and the releasable text; finishes when reason is not NULL. */
static void publish(replica *e, gen *g, const srv_tok *t, const char *reason, int stop_index) {
    srv_req *r = g->req;
    size_t upto = releasable(g, reason != NULL);
    pthread_mutex_lock(&r->mu);
    if (t) {
        if (r->n_toks == r->cap_toks) {
            r->cap_toks = r->cap_toks ? 2 * r->cap_toks : 16;
            r->toks = ds_xrealloc(r->toks, sizeof(srv_tok) * (size_t)r->cap_toks);
        }
        r->toks[r->n_toks++] = *t;
        if (!r->t_first) {
            r->t_first = srv_now();
            srv_dash_ttft(e->dash, r->t_first, r->t_first - r->t_arrival);
        }
    }
    if (upto > g->released) {
        size_t n = upto - g->released;
        if (r->text_len + n + 1 > r->text_cap) {
            r->text_cap = (r->text_len + n + 1) * 2;
            r->text = ds_xrealloc(r->text, r->text_cap);
        }
        memcpy(r->text + r->text_len, g->out + g->released, n);
        r->text_len += n;
        r->text[r->text_len] = 0;
        g->released = upto;
    }
    if (reason) {
        r->finished = 1;
        r->finish_reason = reason;
        r->stop_index = stop_index;
    }
    if (g->sr) r->n_cached = g->sr->n_cached;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* ---- requests ------------------------------------------------------------------------------- */
static void gen_unlink(replica *e, gen *g) {
    if (g->prev) g->prev->next = g->next; else e->active = g->next;
    if (g->next) g->next->prev = g->prev;
}

/* Ends a request: reason "stop"/"length" flush the detokenizer first; "abort"/"error" do not.
 * status != 0 marks an error (message in err). Frees the engine side; drops the engine's reference. */
static void gen_finish(replica *e, gen *g, const char *reason, int stop_index, int status, const char *err) {
    srv_req *r = g->req;
    if (status == 0 && strcmp(reason, "abort") != 0 && stop_index < 0) {
        size_t n, from = g->len;
        const char *tail = ds_detok_flush(g->detok, &n);
        out_append(g, tail, n);
        int si = find_stop(g, from);
        if (si >= 0) { reason = "stop"; stop_index = si; }
    }
    if (g->sr) {
        pthread_mutex_lock(&r->mu);
        r->n_cached = g->sr->n_cached;
        pthread_mutex_unlock(&r->mu);
        sched_finish(e->sch, g->sr);
        g->sr = NULL;
    }
    if (status) {
        pthread_mutex_lock(&r->mu);
        r->http_status = status;
        snprintf(r->err, sizeof r->err, "%s", err);
        pthread_mutex_unlock(&r->mu);
    }
    publish(e, g, NULL, reason, stop_index);
    double now = srv_now(), ttft = r->t_first ? r->t_first - r->t_arrival : -1;
    double tpot = g->n_gen > 1 ? (now - r->t_first) / (g->n_gen - 1) : -1;
    srv_metrics_request(e->metrics, reason, r->n_prompt, g->n_gen, ttft, tpot, now - r->t_arrival);
    gen_unlink(e, g);
    ds_sampler_free(g->smp);
    ds_detok_free(g->detok);
    free(g->out);
    free(g);
    srv_req_release(r);
}

static void gen_start(replica *e, srv_req *r) {
    gen *g = ds_xcalloc(1, sizeof(*g));
    g->req = r;
    g->next = e->active;
    if (e->active) e->active->prev = g;
    e->active = g;
    g->detok = ds_detok_new(e->tok, 1);
    for (int i = 0; i < r->n_stop; i++)
        if ((int)strlen(r->stop[i]) > g->max_stop) g->max_stop = (int)strlen(r->stop[i]);
    char err[DS_ERRLEN];
    if (ds_sampler_new(&r->sp, e->vocab, &g->smp, err) != DS_OK) {
        gen_finish(e, g, "error", -1, 400, err);
        return;
    }
    g->sr = sched_add(e->sch, r->prompt, r->n_prompt, g);
}

/* ---- sampling ------------------------------------------------------------------------------- */
/* Log-probabilities of the chosen token and the top k under the raw logits row. */
static void logprobs_of(const float *row, int vocab, int32_t chosen, int k, srv_tok *t) {
    float mx = row[0];
    for (int i = 1; i < vocab; i++) mx = row[i] > mx ? row[i] : mx;
    double sum = 0;
    for (int i = 0; i < vocab; i++) sum += exp((double)(row[i] - mx));
    float lse = mx + (float)log(sum);
    t->logprob = row[chosen] - lse;
    t->n_top = 0;
    for (int j = 0; j < k && j < vocab; j++) {   /* k <= 20 selection passes */
        int best = -1;
        for (int i = 0; i < vocab; i++) {
            int taken = 0;
            for (int q = 0; q < j && !taken; q++) taken = t->top_id[q] == i;
            if (!taken && (best < 0 || row[i] > row[best])) best = i;
        }
        t->top_id[j] = best;
        t->top_lp[j] = row[best] - lse;
        t->n_top++;
    }
}

/* Samples the request's next token from its logits row and handles it. */
static void sample_and_emit(replica *e, gen *g, float *row) {
    srv_req *r = g->req;
    srv_tok t = {0};
    if (r->logprobs) memcpy(e->raw, row, sizeof(float) * (size_t)e->vocab);   /* the sampler edits the row */
    t.id = ds_sampler_sample(g->smp, row);
    ds_sampler_accept(g->smp, t.id);
    if (r->logprobs) logprobs_of(e->raw, e->vocab, t.id, r->top_logprobs, &t);
    sched_append(e->sch, g->sr, t.id);
    g->n_gen++;
    int eos = t.id == e->eos && !r->ignore_eos, stop = -1;
    if (!eos) {
        size_t n, from = g->len;
        const char *piece = ds_detok_push(g->detok, t.id, &n);
        out_append(g, piece, n);
        stop = find_stop(g, from);
    }
    const char *reason = NULL;
    if (eos || stop >= 0) reason = "stop";
    else if (g->n_gen >= r->max_tokens || g->sr->n_tokens >= e->max_ctx) reason = "length";
    publish(e, g, &t, NULL, -1);
    if (reason) gen_finish(e, g, reason, stop, 0, "");
}

/* ---- the step ------------------------------------------------------------------------------- */
/* After a step that began at t0: reports it to the dashboard and, when it decoded, feeds its duration
 * (the per-token latency of the requests in it) to the adaptive limit. `sampled` items gave a token,
 * `decode` of them were decode tokens (counted before sampling, which may free requests). */
static void step_done(replica *e, const sched_batch *b, double t0, int sampled, int decode) {
    double now = srv_now();
    srv_dash_step(e->dash, now, now - t0, b->n_items, b->n_tokens, sampled, decode);
    if (srv_step_hook) srv_step_hook(now, now - t0, b->n_items, b->n_tokens, sampled, decode);
    if (decode) sched_set_seq_limit(e->sch, adapt_observe(&e->adapt, now, now - t0, b->n_items));
}

/* One scheduler step; returns 1 if it ran the engine (expert parallel: else the caller takes an idle
 * step, every replica must step each round). */
static int run_step(replica *e) {
    double t0 = srv_now();
    sched_batch b;
    int n = sched_schedule(e->sch, &b);
    if (b.stuck) {
        gen_finish(e, b.stuck->user, "error", -1, 400, "the request needs more KV cache pages than the pool holds");
        return 0;
    }
    if (!n) return 0;
    for (int i = 0; i < n; i++)
        e->items[i] = (ds_batch_item){.seq = b.items[i].req->seq, .tokens = b.items[i].req->tokens + b.items[i].start,
                                      .n_tokens = b.items[i].n, .all_logits = 0};
    char err[DS_ERRLEN];
    ds_status st = ds_engine_forward(e->eng, e->items, n, e->logits, err);
    if (st) {   /* nothing was appended: end every request of the step */
        fprintf(stderr, "dsinfer serve: forward failed: %s\n", err);
        for (int i = 0; i < n; i++) gen_finish(e, b.items[i].req->user, "error", -1, 500, err);
        return 1;
    }
    sched_step_done(e->sch, &b);
    int sampled = 0, decode = 0;   /* read before sampling: sample_and_emit may finish (free) a request */
    for (int i = 0; i < n; i++) {
        sampled += b.items[i].sample;
        decode += b.items[i].sample && b.items[i].n == 1 && b.items[i].start >= b.items[i].req->n_prompt;
    }
    for (int i = 0; i < n; i++)
        if (b.items[i].sample) sample_and_emit(e, b.items[i].req->user, e->logits + (size_t)i * e->vocab);
    step_done(e, &b, t0, sampled, decode);
    return 1;
}

/* Integrity of the pool: the scheduler's view and the engine's own. */
static ds_status check_pool(replica *e, char *err) {
    ds_status st = sched_check(e->sch, err);
    return st ? st : ds_engine_check_pages(e->eng, err);
}

/* ---- the thread ------------------------------------------------------------------------------ */
static void publish_stats(replica *e, int pool_ok) {
    sched_stats st;
    sched_get_stats(e->sch, &st);
    pthread_mutex_lock(&e->mu);
    e->stats = st;
    if (pool_ok != -2) e->pool_ok = pool_ok;
    pthread_mutex_unlock(&e->mu);
}

/* Takes the inbox, answers a check request, handles stop/cancel. Returns 0 when the thread must exit.
 * wait: sleep until there is something to do (expert parallel: the group round decides instead). */
static int intake(replica *e, int wait) {
    pthread_mutex_lock(&e->mu);
    while (wait && !e->in_head && !e->check_req && !e->quit && !e->active)
        pthread_cond_wait(&e->cv, &e->mu);
    srv_req *in = e->in_head;
    e->in_head = e->in_tail = NULL;
    e->in_n = 0;
    int stopping = e->stopping, quit = e->quit, check = e->check_req;
    pthread_mutex_unlock(&e->mu);
    for (srv_req *r = in, *next; r; r = next) {
        next = r->next_in;
        gen_start(e, r);
    }
    for (gen *g = e->active, *next; g; g = next) {
        next = g->next;
        if (stopping || atomic_load(&g->req->cancelled)) gen_finish(e, g, "abort", -1, 0, "");
    }
    if (check) {
        char err[DS_ERRLEN] = "";
        ds_status st = check_pool(e, err);
        pthread_mutex_lock(&e->mu);
        e->check_st = st;
        snprintf(e->check_err, sizeof e->check_err, "%s", err);
        e->check_req = 0;
        e->check_gen++;
        pthread_cond_broadcast(&e->check_cv);
        pthread_mutex_unlock(&e->mu);
        publish_stats(e, st == DS_OK);
    }
    return !quit;
}

static void idle_check(replica *e) {
    char err[DS_ERRLEN];
    ds_status st = check_pool(e, err);   /* idle: the pool must be intact */
    if (st) fprintf(stderr, "dsinfer serve: page pool check failed: %s\n", err);
    publish_stats(e, st == DS_OK);
}

static void *engine_main(void *arg) {
    replica *e = arg;
    while (intake(e, 1)) {
        run_step(e);
        if (e->active) { publish_stats(e, -2); continue; }
        idle_check(e);
    }
    return NULL;
}

/* Expert parallel: rounds in step with the other replicas. Each round every replica says whether it has
 * work (bit 1) or must stop (bit 2), and which kick count it read before looking at its inbox; if any
 * stops, all stop; if any has work, all step (an idle step where there is none here); else each waits
 * for a kick after the oldest count read: a kick that came while some replica was already past its
 * inbox is not lost (everyone loops again instead of sleeping on it). */
static void *engine_main_ep(void *arg) {
    replica *e = arg;
    for (;;) {
        pthread_mutex_lock(&e->ep->mu);
        unsigned long seen = e->ep->gen;
        pthread_mutex_unlock(&e->ep->mu);
        int alive = intake(e, 0), any = 0;
        char err[DS_ERRLEN];
        uint64_t oldest = 0;
        if (ds_ep_agree(e->eng, (e->active ? 1 : 0) | (alive ? 0 : 2), seen, &any, &oldest, err)) {
            fprintf(stderr, "dsinfer serve: expert-parallel round failed: %s\n", err);
            break;
        }
        if (any & 2) break;
        if (any & 1) {
            if (!run_step(e) && ds_engine_forward_idle(e->eng, err))
                fprintf(stderr, "dsinfer serve: idle expert-parallel step failed: %s\n", err);
            if (e->active) publish_stats(e, -2);
            continue;
        }
        idle_check(e);
        pthread_mutex_lock(&e->ep->mu);
        if (e->ep_remote) {   /* other processes cannot kick this one: a round every 2 ms while all are idle */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 2000000;
            if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
            if (e->ep->gen == seen) pthread_cond_timedwait(&e->ep->cv, &e->ep->mu, &ts);
        } else {
            while (e->ep->gen == oldest) pthread_cond_wait(&e->ep->cv, &e->ep->mu);
        }
        pthread_mutex_unlock(&e->ep->mu);
    }
    return NULL;
}

static int replica_submit(replica *e, srv_req *r) {
    pthread_mutex_lock(&e->mu);
    int rc = e->stopping ? -2 : e->stats.n_waiting + e->in_n >= e->cfg.max_queue ? -1 : 0;
    if (!rc) {
        pthread_mutex_lock(&r->mu);
        r->refs++;
        pthread_mutex_unlock(&r->mu);
        r->next_in = NULL;
        if (e->in_tail) e->in_tail->next_in = r; else e->in_head = r;
        e->in_tail = r;
        e->in_n++;
        pthread_cond_signal(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
    if (!rc) ep_kick(e->ep);
    return rc;
}

static ds_status replica_check(replica *e, sched_stats *st, char *err) {
    pthread_mutex_lock(&e->mu);
    int target = e->check_gen + 1;
    e->check_req = 1;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    ep_kick(e->ep);
    pthread_mutex_lock(&e->mu);
    while (e->check_gen < target && !e->quit) pthread_cond_wait(&e->check_cv, &e->mu);
    ds_status s = e->quit ? ds_seterr(err, DS_ERR_ARG, "shutting down") : e->check_st;
    if (!e->quit && s) snprintf(err, DS_ERRLEN, "%s", e->check_err);
    *st = e->stats;
    pthread_mutex_unlock(&e->mu);
    return s;
}

static void replica_stats(replica *e, sched_stats *st, int *pool_ok) {
    pthread_mutex_lock(&e->mu);
    *st = e->stats;
    st->n_waiting += e->in_n;
    *pool_ok = e->pool_ok;
    pthread_mutex_unlock(&e->mu);
}

static const ds_tokenizer *replica_tokenizer(const replica *e) { return e->tok; }
static ds_chat_template replica_template(const replica *e) { return e->tpl; }
static int replica_max_context(const replica *e) { return e->max_ctx; }
static int replica_vocab(const replica *e) { return e->vocab; }

static int replica_max_tokens_in_pool(const replica *e) {
    long n = (long)ds_engine_pages_total(e->eng) * ds_engine_page_size(e->eng);
    return n < e->max_ctx ? (int)n : e->max_ctx;
}

/* ---- start and stop ------------------------------------------------------------------------- */
/* One forward of a full step's worth of tokens (max_num_batched_tokens, within the context and the
 * pool), so that activations are allocated before serving (and measured when sizing the pool). */
static ds_status warm_up(ds_engine *eng, int max_batched, char *err) {
    int n = max_batched < ds_engine_max_context(eng) ? max_batched : ds_engine_max_context(eng);
    int room = ds_engine_pages_total(eng) * ds_engine_page_size(eng);
    if (n > room) n = room;
    int32_t *toks = ds_xcalloc((size_t)n, sizeof(int32_t));
    ds_seq *seq = NULL;
    float *row = ds_xmalloc(sizeof(float) * (size_t)ds_engine_vocab_size(eng));
    ds_status st = ds_seq_new(eng, &seq, err);
    ds_batch_item it = {.seq = seq, .tokens = toks, .n_tokens = n, .all_logits = 0};
    if (!st) st = ds_engine_forward(eng, &it, 1, row, err);
    ds_seq_free(seq);
    free(toks);
    free(row);
    return st;
}

/* --gpu-memory-utilization: measure the memory an engine with a small pool uses after a warm-up
 * forward (NVML: the whole device, as vLLM's profile run), then size the pool to fraction * total minus
 * that. (Until the engine can size or grow its pool itself.) */
static ds_status size_pool_for_gpu(const server_config *c, ds_engine_opts *o, char *err) {
    unsigned util;
    uint64_t used, total;
    if (!srv_nvml_sample(&util, &used, &total))
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "--gpu-memory-utilization needs NVML (libnvidia-ml.so.1); use --kv-cache-memory");
    ds_engine_opts probe = *o;
    probe.max_pages = (c->max_num_batched_tokens + 15) / 16 + 1;   /* room for the warm-up step */
    probe.kv_cache_bytes = 0;
    ds_engine *eng = NULL;
    ds_status st = ds_engine_open(c->model_dir, &probe, &eng, err);
    if (!st) st = warm_up(eng, c->max_num_batched_tokens, err);
    if (st) { ds_engine_free(eng); return st; }
    srv_nvml_sample(&util, &used, &total);
    ds_engine_free(eng);
    double budget = c->gpu_memory_utilization * (double)total - (double)used;
    if (budget <= 0)
        return ds_seterr(err, DS_ERR_NOMEM, "--gpu-memory-utilization %.2f leaves no memory for the KV cache (%.1f of %.1f GiB used)",
                         c->gpu_memory_utilization, (double)used / (1 << 30), (double)total / (1 << 30));
    o->kv_cache_bytes = (size_t)budget;
    return DS_OK;
}

/* ep_rank >= 0: the engine keeps only that rank's routed experts (of data_parallel_size ranks). */
static ds_status open_model(replica *e, int ep_rank, char *err) {
    const server_config *c = &e->cfg;
    ds_engine_opts o = {.backend = c->backend, .n_threads = c->threads, .kv_cache_bytes = c->kv_cache_bytes,
                        .kv_cache_dtype = c->kv_cache_dtype, .quantization = c->quantization,
                        .tensor_parallel_size = c->tensor_parallel_size,
                        .tensor_expert_parallel = c->enable_expert_parallel && c->tensor_parallel_size > 1,
                        .pipeline_parallel_size = c->pipeline_parallel_size,
                        .expert_parallel_size = ep_rank >= 0 ? c->data_parallel_size : 0,
                        .expert_parallel_rank = ep_rank >= 0 ? ep_rank : 0};
    ds_status st = DS_OK;
    if (c->gpu_memory_utilization > 0) {
        if (strcmp(c->backend, "cuda") != 0)
            return ds_seterr(err, DS_ERR_ARG, "--gpu-memory-utilization applies to --backend cuda; use --kv-cache-memory");
        st = size_pool_for_gpu(c, &o, err);
    }
    if (!st) st = ds_engine_open(c->model_dir, &o, &e->eng, err);
    if (!st) st = ds_tokenizer_load(c->model_dir, &e->tok, err);
    if (!st) st = ds_chat_template_choose(e->tok, c->chat_template, &e->tpl, err);
    return st;
}

static ds_status replica_run(replica *e, char *err) {
    if (pthread_create(&e->thread, NULL, e->ep ? engine_main_ep : engine_main, e) != 0)
        return ds_seterr(err, DS_ERR_NOMEM, "cannot start the engine thread");
    e->started = 1;
    return DS_OK;
}

/* Opens the replica's engine; its thread starts now, or (ep_rank >= 0: expert parallel, the engine with
 * only that rank's experts) with replica_run once every replica has joined the group. */
static ds_status replica_start(const server_config *cfg, srv_metrics *m, srv_dash *d, int ep_rank, replica **out,
                               char *err) {
    *out = NULL;
    replica *e = ds_xcalloc(1, sizeof(*e));
    e->cfg = *cfg;
    e->metrics = m;
    e->dash = d;
    adapt_init(&e->adapt, &(adapt_config){.min_limit = 1, .max_limit = cfg->max_num_seqs, .slo = cfg->slo_tpot_ms / 1e3});
    e->pool_ok = -1;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    pthread_cond_init(&e->check_cv, NULL);
    ds_status st = open_model(e, ep_rank, err);
    if (!st) {
        e->vocab = ds_engine_vocab_size(e->eng);
        e->max_ctx = ds_engine_max_context(e->eng);
        e->eos = ds_engine_eos_id(e->eng);
        /* an expert-parallel engine steps only with its group: its first step allocates instead */
        if (ep_rank < 0) st = warm_up(e->eng, cfg->max_num_batched_tokens, err);
    }
    if (!st) {
        sched_config sc = {.max_num_seqs = cfg->max_num_seqs, .max_num_batched_tokens = cfg->max_num_batched_tokens,
                           .enable_prefix_caching = cfg->enable_prefix_caching};
        sched_kv kv = sched_kv_engine(e->eng);
        st = sched_new(&sc, &kv, &e->sch, err);
    }
    if (!st) {   /* the step's logits: page-locked with the CUDA backend (ds_engine_logits_alloc) */
        e->logits = ds_engine_logits_alloc(e->eng, cfg->max_num_seqs);
        if (!e->logits) {
            snprintf(err, DS_ERRLEN, "out of host memory for %d rows of logits", cfg->max_num_seqs);
            st = DS_ERR_NOMEM;
        }
    }
    if (!st) {
        e->items = ds_xcalloc((size_t)cfg->max_num_seqs, sizeof(ds_batch_item));
        e->raw = ds_xmalloc(sizeof(float) * (size_t)e->vocab);
        publish_stats(e, -1);
        if (ep_rank < 0) st = replica_run(e, err);
    }
    if (st) { replica_stop(e); return st; }
    *out = e;
    return DS_OK;
}

static void replica_abort_all(replica *e) {
    pthread_mutex_lock(&e->mu);
    e->stopping = 1;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    ep_kick(e->ep);
}

static void replica_stop(replica *e) {
    if (!e) return;
    if (e->started) {
        pthread_mutex_lock(&e->mu);
        e->stopping = e->quit = 1;
        pthread_cond_signal(&e->cv);
        pthread_mutex_unlock(&e->mu);
        ep_kick(e->ep);
        pthread_join(e->thread, NULL);
        while (e->active) gen_finish(e, e->active, "abort", -1, 0, "");
        for (srv_req *r = e->in_head, *next; r; r = next) {   /* submitted after the last intake */
            next = r->next_in;
            gen_start(e, r);
            gen_finish(e, e->active, "abort", -1, 0, "");
        }
        pthread_cond_broadcast(&e->check_cv);
    }
    sched_free(e->sch);
    ds_engine_logits_free(e->eng, e->logits);
    free(e->raw);
    free(e->items);
    ds_tokenizer_free(e->tok);
    ds_engine_free(e->eng);
    pthread_cond_destroy(&e->check_cv);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

/* ---- data parallelism: replicas behind one server ----------------------------------------------
 * --data-parallel-size N runs N replicas, each an engine with its own KV pool, scheduler and thread
 * (on GPUs: one per device, attention data parallelism without a duplicated KV cache; on the CPU the
 * cores are split between them). A request goes to the replica with the fewest running + waiting
 * requests; stats and integrity checks cover all replicas. */
struct srv_engine {
    int n;
    replica **r;   /* [n] */
    srv_remote **rem;  /* [n] --data-parallel-backend mp: the replica processes (r unused), else NULL */
    ds_tokenizer *tok; /* mp: the front end's own tokenizer and template */
    ds_chat_template tpl;
    pthread_mutex_t mu;
    long *submitted;   /* [n] requests given to each replica (under mu) */
    ds_ep_group *epg;  /* --enable-expert-parallel: the replicas' shared experts, else NULL */
    ds_ep_placement *ep_pl;   /* a replica process's rank of a group over processes: the placement, else NULL */
    ep_sync sync;
};

static int replica_load(replica *e) {
    pthread_mutex_lock(&e->mu);
    int load = e->stats.n_running + e->stats.n_waiting + e->in_n;
    pthread_mutex_unlock(&e->mu);
    return load;
}

/* The config of one of n replicas: its share of the CPU threads and of the queue. */
static server_config replica_config(const server_config *cfg, int n) {
    server_config rc = *cfg;
    if (n > 1) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        int threads = cfg->threads > 0 ? cfg->threads : (int)(cores > 0 ? cores : 1);
        rc.threads = threads / n > 0 ? threads / n : 1;
        rc.max_queue = cfg->max_queue / n > 0 ? cfg->max_queue / n : 1;
    }
    return rc;
}

/* --data-parallel-backend mp: the replica processes (remote.c), started before any thread */
static ds_status start_processes(const server_config *cfg, srv_metrics *m, srv_dash *d, srv_engine *g, int n, char *err) {
    if (cfg->tensor_parallel_size > 1 || cfg->pipeline_parallel_size > 1)
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "--data-parallel-backend mp: one replica a process so far (no "
                         "--tensor-parallel-size or --pipeline-parallel-size)");
    ds_status st = ds_tokenizer_load(cfg->model_dir, &g->tok, err);
    if (!st) st = ds_chat_template_choose(g->tok, cfg->chat_template, &g->tpl, err);
    if (!st && cfg->enable_expert_parallel) st = srv_remote_ep_group(cfg, err);   /* the group's rendezvous socket */
    int nodes = cfg->nnodes > 1, local = nodes ? n / cfg->nnodes : n;   /* this node (0) spawns replicas 0 .. local-1 */
    if (!st && nodes) st = srv_remote_nodes_listen(cfg, err);
    g->rem = ds_xcalloc((size_t)n, sizeof(srv_remote *));
    server_config rc = *cfg;
    if (strcmp(cfg->backend, "cuda") != 0) rc = replica_config(cfg, local);   /* cpu: the cores split between them */
    for (int i = 0; i < local && !st; i++) {   /* every fork before any thread */
        st = srv_remote_spawn(&rc, i, n, m, d, g->rem, &g->rem[i], err);
        if (!st) g->n++;
    }
    if (cfg->enable_expert_parallel) srv_remote_ep_group_done();
    if (!st && nodes) {
        st = srv_remote_adopt_all(&rc, n, m, d, g->rem, err);
        while (g->n < n && g->rem[g->n]) g->n++;
    }
    for (int i = 0; i < g->n && !st; i++) st = srv_remote_ready(g->rem[i], i, err);
    return st;
}

ds_status srv_engine_start(const server_config *cfg, srv_metrics *m, srv_dash *d, srv_engine **out, char *err) {
    *out = NULL;
    int n = cfg->data_parallel_size > 0 ? cfg->data_parallel_size : 1;
    /* expert parallelism across the data-parallel replicas; with one replica and --tensor-parallel-size
     * it lives inside the TP group instead (open_model: opts.tensor_expert_parallel) */
    int ep = cfg->enable_expert_parallel && !(n < 2 && cfg->tensor_parallel_size > 1);
    if (n > 1 && cfg->data_parallel_mp) {
        srv_engine *g = ds_xcalloc(1, sizeof(*g));
        g->submitted = ds_xcalloc((size_t)n, sizeof(long));
        pthread_mutex_init(&g->mu, NULL);
        pthread_mutex_init(&g->sync.mu, NULL);
        pthread_cond_init(&g->sync.cv, NULL);
        ds_status st = start_processes(cfg, m, d, g, n, err);
        if (st) {
            srv_engine_stop(g);
            return st;
        }
        *out = g;
        return DS_OK;
    }
    if (n > 1 && strcmp(cfg->backend, "cpu") != 0)
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "--data-parallel-size > 1 on %s needs a process per GPU "
                         "(--data-parallel-backend mp, the default there)", cfg->backend);
    if (ep && n < 2)
        return ds_seterr(err, DS_ERR_ARG, "--enable-expert-parallel needs --data-parallel-size 2 or more, or "
                         "--tensor-parallel-size 2 or more");
    srv_engine *g = ds_xcalloc(1, sizeof(*g));
    g->r = ds_xcalloc((size_t)n, sizeof(replica *));
    g->submitted = ds_xcalloc((size_t)n, sizeof(long));
    pthread_mutex_init(&g->mu, NULL);
    pthread_mutex_init(&g->sync.mu, NULL);
    pthread_cond_init(&g->sync.cv, NULL);
    server_config rc = replica_config(cfg, n);
    ds_status st = DS_OK;
    for (int i = 0; i < n && !st; i++) {
        st = replica_start(&rc, m, d, ep ? i : -1, &g->r[i], err);
        if (!st) g->n++;
    }
    if (!st && ep) {   /* the group, every replica in it, then the threads */
        int E = ds_engine_routed_experts(g->r[0]->eng);
        if (!E) st = ds_seterr(err, DS_ERR_ARG, "--enable-expert-parallel: %s has no routed experts", cfg->model_dir);
        if (!st) st = ds_ep_group_new(n, E, 0, &g->epg, err);
        if (!st) ds_ep_group_set_fp8_dispatch(g->epg, cfg->ep_fp8_dispatch);
        for (int i = 0; i < n && !st; i++) {
            st = ds_engine_join_expert_parallel(g->r[i]->eng, g->epg, i, err);
            g->r[i]->ep = &g->sync;
        }
        for (int i = 0; i < n && !st; i++) st = replica_run(g->r[i], err);
    }
    if (st) {
        srv_engine_stop(g);
        return st;
    }
    *out = g;
    return DS_OK;
}

ds_status srv_engine_start_ep_rank(const server_config *cfg, srv_metrics *m, srv_dash *d, int rank, ds_comm *comm,
                                   srv_engine **out, char *err) {
    *out = NULL;
    srv_engine *g = ds_xcalloc(1, sizeof(*g));
    g->r = ds_xcalloc(1, sizeof(replica *));
    g->submitted = ds_xcalloc(1, sizeof(long));
    pthread_mutex_init(&g->mu, NULL);
    pthread_mutex_init(&g->sync.mu, NULL);
    pthread_cond_init(&g->sync.cv, NULL);
    server_config rc = *cfg;   /* data_parallel_size: the group's, for this rank's share of the experts */
    rc.data_parallel_size = comm->size;
    rc.data_parallel_mp = 0;
    ds_status st = replica_start(&rc, m, d, rank, &g->r[0], err);
    if (!st) g->n = 1;
    int E = st ? 0 : ds_engine_routed_experts(g->r[0]->eng);
    if (!st && !E) st = ds_seterr(err, DS_ERR_ARG, "--enable-expert-parallel: %s has no routed experts", cfg->model_dir);
    if (!st) {
        g->ep_pl = ds_xcalloc(1, sizeof *g->ep_pl);
        st = ds_ep_place(E, comm->size, 0, NULL, g->ep_pl, err);
    }
    int taken = 0;
    if (!st) st = ds_engine_join_expert_parallel_comm(g->r[0]->eng, comm, g->ep_pl, cfg->ep_fp8_dispatch, err);
    if (!st) {
        taken = 1;
        g->r[0]->ep = &g->sync;
        g->r[0]->ep_remote = 1;
        st = replica_run(g->r[0], err);
    }
    if (st) {
        if (!taken) comm->destroy(comm);
        srv_engine_stop(g);
        return st;
    }
    *out = g;
    return DS_OK;
}

int srv_engine_submit(srv_engine *g, srv_req *r) {
    int best = 0, best_load = g->rem ? srv_remote_load(g->rem[0]) : replica_load(g->r[0]);
    for (int i = 1; i < g->n; i++) {
        int load = g->rem ? srv_remote_load(g->rem[i]) : replica_load(g->r[i]);
        if (load < best_load) best = i, best_load = load;
    }
    int rc = g->rem ? srv_remote_submit(g->rem[best], r) : replica_submit(g->r[best], r);
    if (!rc) {
        pthread_mutex_lock(&g->mu);
        g->submitted[best]++;
        pthread_mutex_unlock(&g->mu);
    }
    return rc;
}

int srv_engine_replicas(srv_engine *g, long *submitted, int max) {
    pthread_mutex_lock(&g->mu);
    for (int i = 0; i < g->n && i < max; i++) submitted[i] = g->submitted[i];
    pthread_mutex_unlock(&g->mu);
    return g->n;
}

static void add_stats(sched_stats *sum, const sched_stats *s) {
    sum->n_running += s->n_running;
    sum->n_waiting += s->n_waiting;
    sum->pages_total += s->pages_total;
    sum->pages_free += s->pages_free;
    sum->pages_used += s->pages_used;
    sum->pages_cached += s->pages_cached;
    sum->prefix_queries += s->prefix_queries;
    sum->prefix_hits += s->prefix_hits;
    sum->n_preemptions += s->n_preemptions;
    sum->seq_limit += s->seq_limit;
}

ds_status srv_engine_check(srv_engine *g, sched_stats *st, char *err) {
    ds_status first = DS_OK;
    memset(st, 0, sizeof(*st));
    for (int i = 0; i < g->n; i++) {
        sched_stats one;
        char e1[DS_ERRLEN] = "";
        ds_status s = g->rem ? srv_remote_check(g->rem[i], &one, e1) : replica_check(g->r[i], &one, e1);
        add_stats(st, &one);
        if (s && !first) {
            first = s;
            snprintf(err, DS_ERRLEN, "%s%s", g->n > 1 ? "replica: " : "", e1);
        }
    }
    return first;
}

void srv_engine_stats(srv_engine *g, sched_stats *st, int *pool_ok) {
    memset(st, 0, sizeof(*st));
    *pool_ok = 1;
    for (int i = 0; i < g->n; i++) {
        sched_stats one;
        int ok;
        if (g->rem) srv_remote_stats(g->rem[i], &one, &ok);
        else replica_stats(g->r[i], &one, &ok);
        add_stats(st, &one);
        if (ok == 0 || (ok == -1 && *pool_ok == 1)) *pool_ok = ok;   /* broken wins over unknown over intact */
    }
}

const ds_tokenizer *srv_engine_tokenizer(const srv_engine *g) { return g->rem ? g->tok : replica_tokenizer(g->r[0]); }
ds_chat_template srv_engine_template(const srv_engine *g) { return g->rem ? g->tpl : replica_template(g->r[0]); }
int srv_engine_max_context(const srv_engine *g) {
    return g->rem ? srv_remote_max_context(g->rem[0]) : replica_max_context(g->r[0]);
}
int srv_engine_vocab(const srv_engine *g) { return g->rem ? srv_remote_vocab(g->rem[0]) : replica_vocab(g->r[0]); }
int srv_engine_max_tokens_in_pool(const srv_engine *g) {
    return g->rem ? srv_remote_max_tokens_in_pool(g->rem[0]) : replica_max_tokens_in_pool(g->r[0]);
}

void srv_engine_abort_all(srv_engine *g) {
    for (int i = 0; i < g->n; i++) {
        if (g->rem) srv_remote_abort_all(g->rem[i]);
        else replica_abort_all(g->r[i]);
    }
}

void srv_engine_stop(srv_engine *g) {
    if (!g) return;
    for (int i = 0; i < g->n; i++) {
        if (g->rem) srv_remote_stop(g->rem[i]);
        else replica_stop(g->r[i]);
    }
    free(g->rem);
    ds_tokenizer_free(g->tok);
    ds_ep_group_free(g->epg);   /* after the engines (replica_stop) */
    if (g->ep_pl) ds_ep_placement_free(g->ep_pl);
    free(g->ep_pl);
    pthread_cond_destroy(&g->sync.cv);
    pthread_mutex_destroy(&g->sync.mu);
    pthread_mutex_destroy(&g->mu);
    free(g->submitted);
    free(g->r);
    free(g);
}
