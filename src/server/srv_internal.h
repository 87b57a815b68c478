/* Internals of src/server/ shared by its files.
 *
 *   srv_req     one generation request, shared by the HTTP thread that made it and the engine thread.
 *               The HTTP thread fills the inputs, then submits; from then on the inputs are read-only
 *               and the engine thread appends tokens and released text under req->mu and signals
 *               req->cv. Both threads hold a reference; the last srv_req_release frees it.
 *   srv_engine  the engine thread (worker.c): engine, scheduler, sampling, detokenization and stop
 *               strings. It publishes text only once no stop string can still match it.
 *   openai.c    request JSON -> srv_params + prompt; responses and stream chunks <- srv_req.
 *   http.c      libmicrohttpd: routing, auth, bodies, errors, SSE. */
#ifndef DS_SERVER_INTERNAL_H
#define DS_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "dsinfer.h"
#include "sched/sched.h"
#include "server/dashboard.h"
#include "server/metrics.h"
#include "server/server.h"
#include "tokenizer/tokenizer.h"

#define SRV_MAX_STOP 16
#define SRV_MAX_TOP_LOGPROBS 20

/* One generated token: id, log-probability under the model (raw logits, before penalties and
 * temperature, as vLLM), and the top alternatives when asked. */
typedef struct {
    int32_t id;
    float logprob;
    int n_top;
    int32_t top_id[SRV_MAX_TOP_LOGPROBS];
    float top_lp[SRV_MAX_TOP_LOGPROBS];
} srv_tok;

typedef struct srv_req {
    /* ---- inputs: set before submit, read-only afterwards */
    int32_t *prompt;               /* [n_prompt] */
    int n_prompt;
    int max_tokens;                /* >= 1; prompt + max_tokens fits the context and the pool */
    ds_sampling_params sp;
    char *stop[SRV_MAX_STOP];      /* stop strings (non-empty) */
    int n_stop;
    int ignore_eos;
    int logprobs, top_logprobs;    /* logprobs: 1 to record srv_tok.logprob; top_logprobs <= 20 */
    double t_arrival;              /* srv_now() */
    /* ---- progress: written by the engine thread under mu, read under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    srv_tok *toks;                 /* [n_toks] generated tokens (EOS included) */
    int n_toks, cap_toks;
    char *text;                    /* [text_len] released output text (stop strings removed) */
    size_t text_len, text_cap;
    int finished;                  /* 1: no more tokens or text will come */
    const char *finish_reason;     /* "stop", "length", "abort", "error" (static strings) */
    int stop_index;                /* the stop string that ended it, or -1 */
    int n_cached;                  /* prompt tokens taken from the prefix cache */
    int http_status;               /* error: 400 or 500 */
    char err[DS_ERRLEN];
    double t_first;                /* first token time, 0 before */
    /* ---- control */
    atomic_int cancelled;          /* set by the HTTP thread: the engine aborts the request */
    int refs;                      /* under mu */
    struct srv_req *next_in;       /* the engine's inbox */
} srv_req;

double srv_now(void);   /* monotonic seconds */
srv_req *srv_req_new(void);
void srv_req_release(srv_req *r);

/* ---- the engine thread (worker.c) ----------------------------------------------------------- */
typedef struct srv_engine srv_engine;

/* Opens the engine and tokenizer, runs a warm-up forward, sizes the pool, starts the thread. The
 * thread reports steps and first tokens to d, and adapts the batch limit when cfg->slo_tpot_ms > 0. */
ds_status srv_engine_start(const server_config *cfg, srv_metrics *m, srv_dash *d, srv_engine **out, char *err);
/* One rank of an expert-parallel group whose ranks are processes (the replica processes of `serve
 * --data-parallel-backend mp --enable-expert-parallel`, server/remote.c): this process's replica with only
 * rank's experts, stepping in rounds with the others over comm (comm->size ranks; owned by the engine once
 * this succeeds, destroyed here when it fails). */
struct ds_comm;
ds_status srv_engine_start_ep_rank(const server_config *cfg, srv_metrics *m, srv_dash *d, int rank,
                                   struct ds_comm *comm, srv_engine **out, char *err);
/* 0: queued; -1: queue full (503); -2: shutting down (503). Takes a reference on success. */
int srv_engine_submit(srv_engine *e, srv_req *r);
/* Data-parallel replicas: their count, and the requests each was given (submitted[0 : min(n, max)]). */
int srv_engine_replicas(srv_engine *e, long *submitted, int max);
/* Shutdown, part 1: every in-flight request ends with finish_reason "abort"; later submits fail. */
void srv_engine_abort_all(srv_engine *e);
/* Shutdown, part 2: stops and joins the thread, frees everything. */
void srv_engine_stop(srv_engine *e);
/* Runs the integrity check on the engine thread (between steps) and returns its result. */
ds_status srv_engine_check(srv_engine *e, sched_stats *st, char *err);
/* Latest stats (published after every step) and integrity result (1 ok, 0 broken, -1 unchecked). */
void srv_engine_stats(srv_engine *e, sched_stats *st, int *pool_ok);
const ds_tokenizer *srv_engine_tokenizer(const srv_engine *e);
ds_chat_template srv_engine_template(const srv_engine *e);
int srv_engine_max_context(const srv_engine *e);
int srv_engine_vocab(const srv_engine *e);
/* Tokens a single request may hold at most (the pool, or the context if smaller). */
int srv_engine_max_tokens_in_pool(const srv_engine *e);

/* ---- OpenAI API (openai.c) ------------------------------------------------------------------ */
typedef enum { SRV_CHAT, SRV_COMPLETION } srv_kind;

/* What a parsed request asks for beyond the generation inputs. */
typedef struct {
    srv_kind kind;
    int stream, include_usage, return_token_ids, want_tools, reasoning;
    char model[256];
} srv_opts;

/* An OpenAI-style error: HTTP status, message, the offending field (may be ""), code (may be ""). */
typedef struct {
    int status;
    char message[DS_ERRLEN], param[64], code[64];
} srv_error;

/* Parses and validates a request body; fills r's inputs (prompt included) and o. 0 or -1 with *er. */
int srv_openai_parse(srv_engine *e, const server_config *cfg, srv_kind kind, const char *body, size_t len,
                     srv_req *r, srv_opts *o, srv_error *er);
/* {"error":{...}} as a malloc'd string. */
char *srv_error_json(const srv_error *er);
int srv_seterror(srv_error *er, int status, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Turns a request's progress into response text. One per HTTP request, used by its thread only. */
typedef struct srv_render srv_render;
srv_render *srv_render_new(srv_engine *e, srv_req *r, const srv_opts *o);
void srv_render_free(srv_render *rr);
/* Streaming: appends SSE events for the progress since the last call (and the final events once
 * the request finished) to *out; returns 1 when the stream is complete. Takes r->mu itself. */
int srv_render_stream(srv_render *rr, char **out, size_t *len);
/* Non-streaming: the whole response JSON (call after r->finished), malloc'd. */
char *srv_render_full(srv_render *rr);

/* ---- HTTP (http.c) -------------------------------------------------------------------------- */
typedef struct srv_http srv_http;
ds_status srv_http_start(const server_config *cfg, srv_engine *e, srv_metrics *m, srv_dash *d, srv_http **out,
                         int *port, char *err);
void srv_http_quiesce(srv_http *h);   /* stop accepting connections */
void srv_http_stop(srv_http *h);      /* close connections, join threads, free */

#endif
