/* HTTP over libmicrohttpd, one thread per connection.
 *
 * Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health, GET /metrics
 * (Prometheus text), GET /debug/pool (runs the page-pool integrity check on the engine thread),
 * GET /dashboard (the live page, dashboard.h) and GET /dashboard/data (its JSON).
 * Paths under /v1/ need "Authorization: Bearer KEY" when the server has an API key.
 *
 * A request body is gathered (up to max_body_bytes; a larger one is read to the end and answered
 * 400), checked to be UTF-8, parsed and validated (400 with an OpenAI error object), then queued (503
 * with Retry-After when the queue is full). A non-streaming request waits in its connection thread for
 * the end; a streaming one answers with an SSE body whose reader waits for tokens. Both look at the
 * socket while they wait: a client that went away gets its request cancelled, which frees its pages. */
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "core/status.h"
#include "server/srv_internal.h"

struct srv_http {
    server_config cfg;
    srv_engine *e;
    srv_metrics *m;
    srv_dash *dash;
    struct MHD_Daemon *d;
    const char *model;
    atomic_int in_flight;    /* generation requests whose response is not complete */
};

/* Per connection request: the body so far. */
typedef struct {
    char *body;
    size_t len, cap;
    int too_big;
} conn_state;

/* A streaming response in progress. */
typedef struct {
    srv_http *h;
    srv_req *r;
    srv_render *rr;
    struct MHD_Connection *c;
    char *out;               /* SSE text not yet handed to MHD */
    size_t len, off;
    int complete, started;
    int seen_toks;
    size_t seen_text;
} stream_state;

/* ---- responses ------------------------------------------------------------------------------ */
static enum MHD_Result respond(srv_http *h, struct MHD_Connection *c, int status, const char *type, char *body,
                               int retry_after) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (retry_after) MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (status == 401) MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    srv_metrics_http(h->m, status);
    return rc;
}

static enum MHD_Result respond_error(srv_http *h, struct MHD_Connection *c, const srv_error *er) {
    return respond(h, c, er->status, "application/json", srv_error_json(er), er->status == 503);
}

static enum MHD_Result fail(srv_http *h, struct MHD_Connection *c, int status, const char *code, const char *msg) {
    srv_error er;
    srv_seterror(&er, status, "", code, "%s", msg);
    return respond_error(h, c, &er);
}

/* ---- helpers -------------------------------------------------------------------------------- */
/* 1 if s[0..n) is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
static int utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        int k = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
        if (k < 0 || i + (size_t)k >= n) return 0;
        unsigned cp = k == 0 ? c : c & (0x3Fu >> k);
        for (int j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        static const unsigned min_cp[] = {0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += (size_t)k + 1;
    }
    return 1;
}

/* 1 if the peer closed its side of the connection. */
static int client_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return 1;
    char b;
    return (p.revents & POLLIN) && recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

static void deadline_in(struct timespec *ts, long ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += ms * 1000000L;
    ts->tv_sec += ts->tv_nsec / 1000000000L;
    ts->tv_nsec %= 1000000000L;
}

/* ---- streaming ------------------------------------------------------------------------------ */
/* Waits until the request has news (tokens, text, the end) or the client left; 0 if it left. */
static int stream_wait(stream_state *st) {
    srv_req *r = st->r;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        struct timespec ts;
        deadline_in(&ts, 200);
        int news = r->n_toks != st->seen_toks || r->text_len != st->seen_text || r->finished;
        if (!news) pthread_cond_timedwait(&r->cv, &r->mu, &ts);
        news = r->n_toks != st->seen_toks || r->text_len != st->seen_text || r->finished;
        st->seen_toks = r->n_toks;
        st->seen_text = r->text_len;
        pthread_mutex_unlock(&r->mu);
        if (news) return 1;
        if (client_gone(st->c)) return 0;
    }
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream_state *st = cls;
    while (st->off == st->len) {
        free(st->out);
        st->out = NULL;
        st->len = st->off = 0;
        if (st->complete) return MHD_CONTENT_READER_END_OF_STREAM;
        if (st->started && !stream_wait(st)) return MHD_CONTENT_READER_END_WITH_ERROR;
        st->started = 1;
        st->complete = srv_render_stream(st->rr, &st->out, &st->len);
    }
    size_t n = st->len - st->off < max ? st->len - st->off : max;
    memcpy(buf, st->out + st->off, n);
    st->off += n;
    return (ssize_t)n;
}

/* The stream ended (finished, or the client went away: then the request is cancelled). */
static void stream_free(void *cls) {
    stream_state *st = cls;
    if (!st->complete) atomic_store(&st->r->cancelled, 1);
    atomic_fetch_sub(&st->h->in_flight, 1);
    srv_render_free(st->rr);
    srv_req_release(st->r);
    free(st->out);
    free(st);
}

static enum MHD_Result start_stream(srv_http *h, struct MHD_Connection *c, srv_req *r, srv_render *rr) {
    stream_state *st = ds_xcalloc(1, sizeof(*st));
    *st = (stream_state){.h = h, .r = r, .rr = rr, .c = c};
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, st, stream_free);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    srv_metrics_http(h->m, 200);
    return rc;
}

/* ---- generation requests -------------------------------------------------------------------- */
/* Waits for a non-streaming request to end; 0 if the client went away (the request is cancelled). */
static int wait_done(srv_req *r, struct MHD_Connection *c) {
    for (;;) {
        pthread_mutex_lock(&r->mu);
        struct timespec ts;
        deadline_in(&ts, 200);
        if (!r->finished) pthread_cond_timedwait(&r->cv, &r->mu, &ts);
        int done = r->finished;
        pthread_mutex_unlock(&r->mu);
        if (done) return 1;
        if (client_gone(c)) {
            atomic_store(&r->cancelled, 1);
            return 0;
        }
    }
}

static enum MHD_Result generate(srv_http *h, struct MHD_Connection *c, conn_state *cs, srv_kind kind) {
    char msg[128];
    if (cs->too_big) {
        snprintf(msg, sizeof msg, "the request body exceeds %zu bytes", h->cfg.max_body_bytes);
        return fail(h, c, 400, "body_too_large", msg);
    }
    if (!utf8_valid((const unsigned char *)cs->body, cs->len))
        return fail(h, c, 400, "invalid_utf8", "the request body is not valid UTF-8");
    srv_req *r = srv_req_new();
    r->t_arrival = srv_now();
    srv_opts o;
    srv_error er;
    if (srv_openai_parse(h->e, &h->cfg, kind, cs->body ? cs->body : "", cs->len, r, &o, &er)) {
        srv_req_release(r);
        return respond_error(h, c, &er);
    }
    int q = srv_engine_submit(h->e, r);
    if (q) {
        srv_req_release(r);
        return fail(h, c, 503, q == -1 ? "queue_full" : "shutting_down",
                    q == -1 ? "the server's request queue is full; retry later" : "the server is shutting down");
    }
    srv_render *rr = srv_render_new(h->e, r, &o);
    atomic_fetch_add(&h->in_flight, 1);
    if (o.stream) return start_stream(h, c, r, rr);
    enum MHD_Result rc = MHD_NO;   /* a client that left gets no answer: close the connection */
    if (wait_done(r, c)) {
        if (r->http_status) rc = fail(h, c, r->http_status, r->http_status == 400 ? "invalid_request" : "internal_error", r->err);
        else rc = respond(h, c, 200, "application/json", srv_render_full(rr), 0);
    }
    srv_render_free(rr);
    srv_req_release(r);
    atomic_fetch_sub(&h->in_flight, 1);
    return rc;
}

/* ---- other routes --------------------------------------------------------------------------- */
static enum MHD_Result models(srv_http *h, struct MHD_Connection *c) {
    char *body;
    const char *fmt = "{\"object\":\"list\",\"data\":[{\"id\":\"%s\",\"object\":\"model\",\"created\":%ld,"
                      "\"owned_by\":\"dsinfer\",\"root\":\"%s\",\"max_model_len\":%d}]}";
    if (asprintf(&body, fmt, h->model, (long)time(NULL), h->model, srv_engine_max_context(h->e)) < 0) return MHD_NO;
    return respond(h, c, 200, "application/json", body, 0);
}

static enum MHD_Result metrics(srv_http *h, struct MHD_Connection *c) {
    sched_stats st;
    int ok;
    srv_engine_stats(h->e, &st, &ok);
    char *buf = NULL;
    size_t len = 0;
    const char *dt = ds_kv_cache_dtype_resolve(h->cfg.kv_cache_dtype);   /* checked when the engines opened */
    srv_metrics_render(h->m, &st, ok, h->model, dt ? dt : "unknown", &buf, &len);
    char lbl[512], *more = NULL;   /* the dashboard's alert and limit gauges follow */
    size_t more_len = 0;
    snprintf(lbl, sizeof lbl, "model_name=\"%s\"", h->model);
    FILE *f = open_memstream(&more, &more_len);
    DS_CHECK(f);
    fwrite(buf, 1, len, f);
    srv_dash_prometheus(h->dash, f, lbl);
    fclose(f);
    free(buf);
    return respond(h, c, 200, "text/plain; version=0.0.4", more, 0);
}

static enum MHD_Result dashboard_page(srv_http *h, struct MHD_Connection *c) {
    return respond(h, c, 200, "text/html; charset=utf-8", ds_xstrdup(srv_dash_page), 0);
}

static enum MHD_Result dashboard_data(srv_http *h, struct MHD_Connection *c) {
    return respond(h, c, 200, "application/json", srv_dash_json(h->dash, h->model, h->cfg.backend), 0);
}

static enum MHD_Result debug_pool(srv_http *h, struct MHD_Connection *c) {
    sched_stats st;
    char err[DS_ERRLEN] = "", *body;
    ds_status s = srv_engine_check(h->e, &st, err);
    for (char *p = err; *p; p++) if (*p == '"' || *p == '\\') *p = '\'';
    long sub[64];
    int n = srv_engine_replicas(h->e, sub, 64);
    char reps[64 * 24] = "";
    for (int i = 0; i < n && i < 64; i++) snprintf(reps + strlen(reps), sizeof reps - strlen(reps), "%s%ld", i ? "," : "", sub[i]);
    if (asprintf(&body, "{\"ok\":%s,\"error\":\"%s\",\"pages_total\":%d,\"pages_free\":%d,\"pages_used\":%d,"
                        "\"pages_cached\":%d,\"running\":%d,\"waiting\":%d,\"prefix_hits\":%llu,\"preemptions\":%llu,"
                        "\"replica_requests\":[%s]}",
                 s ? "false" : "true", err, st.pages_total, st.pages_free, st.pages_used, st.pages_cached, st.n_running,
                 st.n_waiting, (unsigned long long)st.prefix_hits, (unsigned long long)st.n_preemptions, reps) < 0)
        return MHD_NO;
    return respond(h, c, s ? 500 : 200, "application/json", body, 0);
}

static int authorized(srv_http *h, struct MHD_Connection *c, const char *url) {
    if (!h->cfg.api_key || strncmp(url, "/v1/", 4) != 0) return 1;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    return a && strncmp(a, "Bearer ", 7) == 0 && strcmp(a + 7, h->cfg.api_key) == 0;
}

static enum MHD_Result route(srv_http *h, struct MHD_Connection *c, const char *url, const char *method, conn_state *cs) {
    int get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
    if (!authorized(h, c, url)) return fail(h, c, 401, "invalid_api_key", "Unauthorized: a valid API key is required");
    if (strcmp(url, "/v1/chat/completions") == 0 && post) return generate(h, c, cs, SRV_CHAT);
    if (strcmp(url, "/v1/completions") == 0 && post) return generate(h, c, cs, SRV_COMPLETION);
    if (strcmp(url, "/v1/models") == 0 && get) return models(h, c);
    if (strcmp(url, "/health") == 0 && get) return respond(h, c, 200, "text/plain", ds_xstrdup(""), 0);
    if (strcmp(url, "/metrics") == 0 && get) return metrics(h, c);
    if (strcmp(url, "/debug/pool") == 0 && get) return debug_pool(h, c);
    if ((strcmp(url, "/dashboard") == 0 || strcmp(url, "/dashboard/") == 0) && get) return dashboard_page(h, c);
    if (strcmp(url, "/dashboard/data") == 0 && get) return dashboard_data(h, c);
    static const char *const known[] = {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics",
                                        "/debug/pool", "/dashboard", "/dashboard/data"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(url, known[i]) == 0) return fail(h, c, 405, "method_not_allowed", "method not allowed");
    return fail(h, c, 404, "not_found", "no such route");
}

/* libmicrohttpd's request callback: first call creates the state, then body pieces, then the end. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *data, size_t *data_size, void **con_cls) {
    (void)version;
    srv_http *h = cls;
    conn_state *cs = *con_cls;
    if (!cs) {
        *con_cls = ds_xcalloc(1, sizeof(conn_state));
        return MHD_YES;
    }
    if (*data_size) {
        if (cs->len + *data_size > h->cfg.max_body_bytes) cs->too_big = 1;
        if (!cs->too_big) {
            if (cs->len + *data_size + 1 > cs->cap) cs->body = ds_xrealloc(cs->body, cs->cap = 2 * (cs->len + *data_size) + 1);
            memcpy(cs->body + cs->len, data, *data_size);
            cs->len += *data_size;
            cs->body[cs->len] = 0;
        }
        *data_size = 0;
        return MHD_YES;
    }
    return route(h, c, url, method, cs);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls; (void)c; (void)toe;
    conn_state *cs = *con_cls;
    if (!cs) return;
    free(cs->body);
    free(cs);
    *con_cls = NULL;
}

/* ---- start and stop ------------------------------------------------------------------------- */
static ds_status resolve(const char *host, int port, struct sockaddr_storage *ss, int *v6, char *err) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res;
    char ports[16];
    snprintf(ports, sizeof ports, "%d", port);
    int rc = getaddrinfo(host, ports, &hints, &res);
    if (rc) return ds_seterr(err, DS_ERR_ARG, "--host %s: %s", host, gai_strerror(rc));
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *v6 = res->ai_family == AF_INET6;
    freeaddrinfo(res);
    return DS_OK;
}

ds_status srv_http_start(const server_config *cfg, srv_engine *e, srv_metrics *m, srv_dash *d, srv_http **out, int *port,
                         char *err) {
    struct sockaddr_storage ss;
    int v6 = 0;
    ds_status st = resolve(cfg->host, cfg->port, &ss, &v6, err);
    if (st) return st;
    srv_http *h = ds_xcalloc(1, sizeof(*h));
    h->cfg = *cfg;
    h->e = e;
    h->m = m;
    h->dash = d;
    h->model = cfg->served_model_name ? cfg->served_model_name : cfg->model_dir;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
                     (v6 ? MHD_USE_IPv6 : 0);
    h->d = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_CONNECTION_LIMIT, 2048u,
                            MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_END);
    if (!h->d) {
        free(h);
        return ds_seterr(err, DS_ERR_IO, "cannot listen on %s:%d (in use, or not an address of this host?)", cfg->host, cfg->port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    *port = di ? di->port : cfg->port;
    *out = h;
    return DS_OK;
}

void srv_http_quiesce(srv_http *h) {
    MHD_socket fd = MHD_quiesce_daemon(h->d);
    if (fd != MHD_INVALID_SOCKET) close(fd);
}

/* Waits (up to 10 s) for the responses in progress to be sent: after srv_engine_abort_all they end
 * quickly, with finish_reason "abort". */
static void drain(srv_http *h) {
    for (int i = 0; i < 1000 && atomic_load(&h->in_flight) > 0; i++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

void srv_http_stop(srv_http *h) {
    if (!h) return;
    drain(h);
    MHD_stop_daemon(h->d);
    free(h);
}
