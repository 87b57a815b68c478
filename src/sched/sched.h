/* The request scheduler: continuous batching over a paged KV pool, with chunked prefill, preemption
 * by recompute and a prefix cache. It holds no GPU code and never runs the model: each step it decides
 * which tokens of which requests go into the next forward (sched_schedule); the caller runs the forward,
 * tells the scheduler it ran (sched_step_done), samples and appends tokens (sched_append), and ends
 * requests (sched_finish). KV pages are reached only through the small sched_kv interface, which the
 * server implements over the engine (sched_kv_engine) and the unit tests over a mock pool.
 *
 * Requests
 *   A request is its token list (prompt, then generated tokens) and n_computed, the count of leading
 *   tokens whose KV is in its sequence. Waiting requests hold no sequence; running ones hold one.
 *   A step gives a running request n_tokens - n_computed tokens (a prefill chunk, or 1 decode token),
 *   capped by the step's token budget; the step's last chunk of a request is the one to sample from.
 *
 * Pages
 *   Before a step, the scheduler makes sure the pool has a free page for every page the step's items
 *   will open (evicting unused prefix-cache pages first, then preempting the most recently admitted
 *   running request: its sequence is freed and it goes back to the front of the waiting queue with
 *   prompt + generated tokens, to be recomputed).
 *
 * Prefix cache
 *   Every full page of a request's tokens has a key: a 64-bit hash chained over the page's tokens and
 *   the key of the page before. A full page is offered to the cache once its KV is computed; the cache
 *   holds one reference on it. A new request takes (ds_seq_adopt_prefix) the longest run of leading
 *   pages found in the cache, leaving at least one token to compute. A cached page no sequence uses is
 *   "cached"; cached pages are evicted least recently used first when free pages run short.
 *
 * Invariant (sched_check): free + used + cached == total, where used = pages held by running
 * sequences and cached = pages held only by the prefix cache; every page's reference count equals its
 * holders. Not thread-safe: one thread (the engine thread) owns a scheduler. */
#ifndef DS_SCHED_H
#define DS_SCHED_H

#include <stdint.h>

#include "dsinfer.h"

/* KV pages as the scheduler sees them (the engine's page API, behind function pointers so a mock can
 * stand in). Sequences are opaque. */
typedef struct {
    void *ctx;
    int (*page_size)(void *ctx);
    int (*pages_total)(void *ctx);
    int (*pages_free)(void *ctx);
    void (*page_ref)(void *ctx, int page);
    void (*page_unref)(void *ctx, int page);
    int (*page_refcount)(void *ctx, int page);
    void *(*seq_new)(void *ctx);
    void (*seq_free)(void *ctx, void *seq);
    int (*seq_len)(void *ctx, void *seq);
    int (*seq_n_pages)(void *ctx, void *seq);
    int (*seq_page)(void *ctx, void *seq, int i);
    /* takes n full pages as the empty sequence's first tokens; 0 on success */
    int (*seq_adopt)(void *ctx, void *seq, const int *pages, int n);
} sched_kv;

/* The sched_kv of an engine (its public page API). */
sched_kv sched_kv_engine(ds_engine *eng);

typedef struct {
    int max_num_seqs;            /* running requests at most */
    int max_num_batched_tokens;  /* tokens per step at most (prefill chunks + decode tokens) */
    int enable_prefix_caching;
} sched_config;

typedef enum { SCHED_WAITING, SCHED_RUNNING } sched_state;

typedef struct sched_req {
    /* read by the caller, written only by the scheduler */
    uint64_t id;
    int32_t *tokens;         /* [n_tokens] prompt, then generated tokens */
    int n_tokens;
    int n_prompt;
    int n_computed;          /* leading tokens whose KV is in seq */
    int n_cached;            /* tokens taken from the prefix cache at the last admission */
    int n_preemptions;
    sched_state state;
    void *seq;               /* NULL while waiting */
    void *user;              /* the caller's */
    /* private */
    int cap_tokens;
    uint64_t *hashes;        /* [n_hashes] key of each full page of tokens computed so far */
    int n_hashes, cap_hashes;
    int n_offered;           /* leading pages of seq already offered to the prefix cache */
    struct sched_req *prev, *next;
} sched_req;

/* One entry of a step: tokens[start .. start + n) of req. sample = 1 when the chunk reaches the end
 * of the request's tokens (the logits of its last position give the next token). */
typedef struct {
    sched_req *req;
    int start, n, sample;
} sched_item;

typedef struct {
    sched_item *items;       /* [n_items], owned by the scheduler, valid until the next schedule */
    int n_items, n_tokens;
    int n_preempted;         /* requests preempted while planning this step */
    sched_req *stuck;        /* non-NULL: the waiting head can never fit the pool (caller ends it) */
} sched_batch;

typedef struct {
    int n_running, n_waiting;
    int pages_total, pages_free, pages_used, pages_cached;
    uint64_t prefix_queries, prefix_hits;   /* tokens looked up / found in the prefix cache */
    uint64_t n_preemptions;
    int seq_limit;           /* the admission limit now (sched_set_seq_limit), <= max_num_seqs */
} sched_stats;

typedef struct sched sched;

/* cfg values <= 0 are errors (DS_ERR_ARG). */
ds_status sched_new(const sched_config *cfg, const sched_kv *kv, sched **out, char *err);
/* Frees every request (and its sequence) and the cache's page references. */
void sched_free(sched *s);

/* Queues a request at the back of the waiting queue; the tokens are copied (n >= 1). */
sched_req *sched_add(sched *s, const int32_t *prompt, int n, void *user);
/* Plans the next step. Returns n_items (0: nothing to run). */
int sched_schedule(sched *s, sched_batch *b);
/* The forward of b ran: advances n_computed and offers newly full pages to the prefix cache. */
void sched_step_done(sched *s, const sched_batch *b);
/* Appends a sampled token to a running request. */
void sched_append(sched *s, sched_req *r, int32_t token);
/* Ends a request (waiting or running): frees its sequence and the request. */
void sched_finish(sched *s, sched_req *r);

int sched_has_work(const sched *s);
/* The running-request limit that admission honours from now on, clamped to [1, max_num_seqs] (the
 * adaptive controller's output; it starts at max_num_seqs). Lowering it preempts nothing: running
 * requests finish, and waiting ones are admitted only while fewer than the limit run. */
void sched_set_seq_limit(sched *s, int limit);
int sched_seq_limit(const sched *s);
void sched_get_stats(const sched *s, sched_stats *st);
/* Verifies the page invariant and the queues; DS_OK, or DS_ERR_FORMAT with what is broken. */
ds_status sched_check(const sched *s, char *err);
/* The pages a request of n tokens needs. */
int sched_pages_for(const sched *s, int n_tokens);

#endif
