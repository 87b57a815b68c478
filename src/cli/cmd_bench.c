/* `dsinfer bench serve`: a load generator against a running OpenAI-compatible server, after vLLM's
 * benchmark_serving (random dataset): N prompts of random token ids (completions) or random words
 * (chat), Poisson arrivals at --request-rate (inf = all at once) under --max-concurrency, ignore_eos so
 * that every request generates --output-len tokens. It reports request and token throughput and the
 * mean / median / p90 / p99 of TTFT, TPOT (per request, after the first token), ITL (between stream
 * chunks) and end-to-end latency.
 *
 * The HTTP client is plain sockets: one connection per request, HTTP/1.1, chunked or sized bodies,
 * SSE events "data: ..." parsed with cJSON. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "core/status.h"

typedef struct {
    const char *host, *endpoint, *model, *api_key;
    int port, num_prompts, max_concurrency, input_len, output_len, vocab, stream;
    double rate, range_ratio;
    unsigned seed;
} bench_args;

/* One request's plan and measurements. */
typedef struct {
    int in_len, out_len;          /* planned */
    double start_at;              /* seconds after the start (Poisson arrivals) */
    char *body;
    int ok, out_tokens, prompt_tokens;
    double ttft, e2e;             /* seconds */
    double *itl;                  /* gaps between content chunks */
    int n_itl, cap_itl;
    char err[160];
} bench_req;

typedef struct {
    const bench_args *a;
    bench_req *reqs;
    atomic_int next;
    double t0;
} bench_run;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- HTTP client ----------------------------------------------------------------------------- */
static int connect_to(const char *host, int port) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
    char ports[16];
    snprintf(ports, sizeof ports, "%d", port);
    if (getaddrinfo(host, ports, &hints, &res)) return -1;
    int fd = socket(res->ai_family, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) != 0) { close(fd); fd = -1; }
    freeaddrinfo(res);
    return fd;
}

/* Incremental response parser: headers, then the body (chunked or not), then SSE events. */
typedef struct {
    char *raw; size_t raw_len, raw_cap;   /* bytes received, not yet consumed */
    int headers_done, status, chunked;
    long chunk_left;                       /* chunked: bytes left in the current chunk; -1 = need a size line */
    char *body; size_t body_len, body_cap; /* decoded body */
    size_t sse_off;                        /* body bytes already split into events */
} http_parse;

static void buf_add(char **b, size_t *len, size_t *cap, const char *s, size_t n) {
    if (*len + n + 1 > *cap) *b = ds_xrealloc(*b, *cap = 2 * (*len + n) + 64);
    memcpy(*b + *len, s, n);
    *len += n;
    (*b)[*len] = 0;
}

static void consume_raw(http_parse *p, size_t n) {
    memmove(p->raw, p->raw + n, p->raw_len - n);
    p->raw_len -= n;
    p->raw[p->raw_len] = 0;
}

/* Moves decodable bytes from raw to body. */
static void decode_body(http_parse *p) {
    if (!p->headers_done) {
        char *end = strstr(p->raw, "\r\n\r\n");
        if (!end) return;
        p->status = atoi(p->raw + 9);
        p->chunked = strcasestr(p->raw, "transfer-encoding: chunked") != NULL && strcasestr(p->raw, "transfer-encoding: chunked") < end;
        p->headers_done = 1;
        p->chunk_left = -1;
        consume_raw(p, (size_t)(end + 4 - p->raw));
    }
    if (!p->chunked) {
        buf_add(&p->body, &p->body_len, &p->body_cap, p->raw, p->raw_len);
        consume_raw(p, p->raw_len);
        return;
    }
    for (;;) {
        if (p->chunk_left < 0) {
            char *eol = strstr(p->raw, "\r\n");
            if (!eol) return;
            p->chunk_left = strtol(p->raw, NULL, 16);
            consume_raw(p, (size_t)(eol + 2 - p->raw));
            if (p->chunk_left == 0) { p->chunk_left = -2; return; }   /* last chunk */
        }
        if (p->chunk_left == -2) return;
        size_t n = p->raw_len < (size_t)p->chunk_left ? p->raw_len : (size_t)p->chunk_left;
        buf_add(&p->body, &p->body_len, &p->body_cap, p->raw, n);
        consume_raw(p, n);
        p->chunk_left -= (long)n;
        if (p->chunk_left > 0 || p->raw_len < 2) return;
        consume_raw(p, 2);   /* CRLF after the chunk */
        p->chunk_left = -1;
    }
}

/* Handles one SSE event's JSON: timing of content chunks, usage. */
static void on_event(bench_req *q, const char *json, double t_send, double *t_last) {
    cJSON *o = cJSON_Parse(json);
    if (!o) return;
    const cJSON *choices = cJSON_GetObjectItem(o, "choices"), *usage = cJSON_GetObjectItem(o, "usage"), *c;
    int has_text = 0;
    cJSON_ArrayForEach(c, choices) {
        const cJSON *t = cJSON_GetObjectItem(c, "text"), *d = cJSON_GetObjectItem(c, "delta");
        const cJSON *dc = d ? cJSON_GetObjectItem(d, "content") : NULL, *dr = d ? cJSON_GetObjectItem(d, "reasoning_content") : NULL;
        has_text |= (cJSON_IsString(t) && t->valuestring[0]) || (cJSON_IsString(dc) && dc->valuestring[0]) ||
                    (cJSON_IsString(dr) && dr->valuestring[0]);
    }
    if (cJSON_IsObject(usage)) {
        q->out_tokens = cJSON_GetObjectItem(usage, "completion_tokens")->valueint;
        q->prompt_tokens = cJSON_GetObjectItem(usage, "prompt_tokens")->valueint;
    }
    if (has_text) {
        double t = now_s();
        if (q->ttft == 0) q->ttft = t - t_send;
        else {
            if (q->n_itl == q->cap_itl) q->itl = ds_xrealloc(q->itl, sizeof(double) * (size_t)(q->cap_itl = 2 * q->cap_itl + 16));
            q->itl[q->n_itl++] = t - *t_last;
        }
        *t_last = t;
    }
    cJSON_Delete(o);
}

static void split_events(http_parse *p, bench_req *q, double t_send, double *t_last) {
    char *ev;
    while ((ev = strstr(p->body + p->sse_off, "\n\n")) != NULL) {
        *ev = 0;
        const char *line = p->body + p->sse_off;
        if (strncmp(line, "data: ", 6) == 0 && strcmp(line + 6, "[DONE]") != 0) on_event(q, line + 6, t_send, t_last);
        p->sse_off = (size_t)(ev + 2 - p->body);
    }
}

/* Sends the request and reads the response; fills q's measurements. */
static void run_request(const bench_args *a, bench_req *q) {
    int fd = connect_to(a->host, a->port);
    if (fd < 0) { snprintf(q->err, sizeof q->err, "cannot connect to %s:%d", a->host, a->port); return; }
    char head[512];
    int hn = snprintf(head, sizeof head, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                      "%s%s%sConnection: close\r\n\r\n", a->endpoint, a->host, strlen(q->body), a->api_key ? "Authorization: Bearer " : "",
                      a->api_key ? a->api_key : "", a->api_key ? "\r\n" : "");
    double t_send = now_s(), t_last = t_send;
    http_parse p = {0};
    if (send(fd, head, (size_t)hn, MSG_NOSIGNAL) != hn || send(fd, q->body, strlen(q->body), MSG_NOSIGNAL) != (ssize_t)strlen(q->body)) {
        snprintf(q->err, sizeof q->err, "send failed: %s", strerror(errno));
        close(fd);
        return;
    }
    char buf[16384];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0) {
        buf_add(&p.raw, &p.raw_len, &p.raw_cap, buf, (size_t)n);
        decode_body(&p);
        if (a->stream && p.status == 200 && p.body) split_events(&p, q, t_send, &t_last);
        if (p.chunk_left == -2) break;
    }
    close(fd);
    q->e2e = now_s() - t_send;
    if (p.status != 200) snprintf(q->err, sizeof q->err, "HTTP %d: %.120s", p.status, p.body ? p.body : "");
    else if (!a->stream && p.body) {
        q->ttft = q->e2e;
        cJSON *o = cJSON_Parse(p.body), *u = o ? cJSON_GetObjectItem(o, "usage") : NULL;
        if (u) {
            q->out_tokens = cJSON_GetObjectItem(u, "completion_tokens")->valueint;
            q->prompt_tokens = cJSON_GetObjectItem(u, "prompt_tokens")->valueint;
        }
        cJSON_Delete(o);
    }
    q->ok = p.status == 200 && q->out_tokens > 0;
    if (p.status == 200 && !q->ok) snprintf(q->err, sizeof q->err, "no usage in the response");
    free(p.raw);
    free(p.body);
}

/* ---- workload -------------------------------------------------------------------------------- */
static int rand_len(unsigned *s, int len, double ratio) {
    int lo = (int)(len * (1 - ratio)), hi = (int)(len * (1 + ratio));
    if (lo < 1) lo = 1;
    return hi > lo ? lo + (int)(rand_r(s) % (unsigned)(hi - lo + 1)) : lo;
}

static char *make_body(const bench_args *a, int in_len, int out_len, unsigned *s) {
    cJSON *o = cJSON_CreateObject();
    if (a->model) cJSON_AddStringToObject(o, "model", a->model);
    int chat = strstr(a->endpoint, "chat") != NULL;
    if (chat) {   /* random words; the token count is approximate */
        static const char *const words[] = {"the", "light", "river", "stone", "seven", "morning", "city", "green", "voice", "open"};
        char *text = ds_xmalloc((size_t)in_len * 9 + 1);
        text[0] = 0;
        for (int i = 0; i < in_len; i++) { strcat(text, words[rand_r(s) % 10]); strcat(text, " "); }
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", text);
        cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "messages"), m);
        free(text);
    } else {
        cJSON *ids = cJSON_AddArrayToObject(o, "prompt");
        for (int i = 0; i < in_len; i++) cJSON_AddItemToArray(ids, cJSON_CreateNumber(16 + rand_r(s) % (unsigned)(a->vocab - 16)));
    }
    cJSON_AddNumberToObject(o, "max_tokens", out_len);
    cJSON_AddBoolToObject(o, "ignore_eos", 1);
    cJSON_AddNumberToObject(o, "temperature", 0);
    cJSON_AddBoolToObject(o, "stream", a->stream);
    if (a->stream) cJSON_AddBoolToObject(cJSON_AddObjectToObject(o, "stream_options"), "include_usage", 1);
    char *s_out = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s_out;
}

static void *worker(void *arg) {
    bench_run *run = arg;
    for (;;) {
        int i = atomic_fetch_add(&run->next, 1);
        if (i >= run->a->num_prompts) return NULL;
        bench_req *q = &run->reqs[i];
        double wait = run->t0 + q->start_at - now_s();
        if (wait > 0) {
            struct timespec ts = {(time_t)wait, (long)((wait - floor(wait)) * 1e9)};
            nanosleep(&ts, NULL);
        }
        run_request(run->a, q);
    }
}

/* ---- report ---------------------------------------------------------------------------------- */
static int cmp_d(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static void stat_line(const char *name, double *v, int n) {
    if (n == 0) { printf("%-6s (ms): no samples\n", name); return; }
    qsort(v, (size_t)n, sizeof(double), cmp_d);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    double med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    printf("Mean %-5s (ms): %10.2f   Median: %10.2f   P90: %10.2f   P99: %10.2f\n", name, 1e3 * sum / n, 1e3 * med,
           1e3 * v[(int)(0.90 * (n - 1))], 1e3 * v[(int)(0.99 * (n - 1))]);
}

static void report(const bench_args *a, bench_req *reqs, double dur) {
    int n_ok = 0, n_itl = 0;
    long in_tok = 0, out_tok = 0;
    for (int i = 0; i < a->num_prompts; i++) {
        if (!reqs[i].ok) continue;
        n_ok++;
        in_tok += reqs[i].prompt_tokens;
        out_tok += reqs[i].out_tokens;
        n_itl += reqs[i].n_itl;
    }
    double *ttft = ds_xcalloc((size_t)n_ok + 1, sizeof(double)), *tpot = ds_xcalloc((size_t)n_ok + 1, sizeof(double));
    double *e2e = ds_xcalloc((size_t)n_ok + 1, sizeof(double)), *itl = ds_xcalloc((size_t)n_itl + 1, sizeof(double));
    int k = 0, nt = 0, ni = 0;
    for (int i = 0; i < a->num_prompts; i++) {
        bench_req *q = &reqs[i];
        if (!q->ok) continue;
        ttft[k] = q->ttft;
        e2e[k++] = q->e2e;
        if (q->out_tokens > 1) tpot[nt++] = (q->e2e - q->ttft) / (q->out_tokens - 1);
        for (int j = 0; j < q->n_itl; j++) itl[ni++] = q->itl[j];
    }
    printf("============ Serving Benchmark Result ============\n");
    printf("%-40s %10d\n%-40s %10d\n", "Successful requests:", n_ok, "Failed requests:", a->num_prompts - n_ok);
    printf("%-40s %10.2f\n", "Benchmark duration (s):", dur);
    printf("%-40s %10ld\n%-40s %10ld\n", "Total input tokens:", in_tok, "Total generated tokens:", out_tok);
    printf("%-40s %10.2f\n", "Request throughput (req/s):", n_ok / dur);
    printf("%-40s %10.2f\n", "Output token throughput (tok/s):", out_tok / dur);
    printf("%-40s %10.2f\n", "Total token throughput (tok/s):", (in_tok + out_tok) / dur);
    printf("---------------Time to First Token----------------\n");
    stat_line("TTFT", ttft, k);
    printf("-----Time per Output Token (excl. 1st token)------\n");
    stat_line("TPOT", tpot, nt);
    printf("---------------Inter-token Latency----------------\n");
    stat_line("ITL", itl, ni);
    printf("----------------End-to-end Latency----------------\n");
    stat_line("E2EL", e2e, k);
    printf("==================================================\n");
    free(ttft); free(tpot); free(e2e); free(itl);
}

/* ---- flags ----------------------------------------------------------------------------------- */
static void usage(void) {
    fprintf(stderr,
            "usage: dsinfer bench serve [--host 127.0.0.1] [--port 8000] [--endpoint /v1/completions|/v1/chat/completions]\n"
            "         [--model NAME] [--num-prompts 100] [--request-rate inf] [--max-concurrency N] [--input-len 128]\n"
            "         [--output-len 128] [--random-range-ratio 0] [--vocab-size 1000] [--seed 0] [--no-stream] [--api-key K]\n"
            "  load against a running `dsinfer serve` (or any OpenAI-compatible server); prompts of random token ids\n"
            "  (ids in [16, vocab-size)), ignore_eos; reports throughput and TTFT / TPOT / ITL / E2E latency percentiles\n");
}

static int parse(int argc, char **argv, bench_args *a) {
    static const struct option o[] = {
        {"host", 1, 0, 'h'}, {"port", 1, 0, 'p'}, {"endpoint", 1, 0, 'e'}, {"model", 1, 0, 'm'}, {"num-prompts", 1, 0, 'n'},
        {"request-rate", 1, 0, 'r'}, {"max-concurrency", 1, 0, 'c'}, {"input-len", 1, 0, 'i'}, {"output-len", 1, 0, 'o'},
        {"random-range-ratio", 1, 0, 'R'}, {"vocab-size", 1, 0, 'v'}, {"seed", 1, 0, 's'}, {"no-stream", 0, 0, 'S'},
        {"api-key", 1, 0, 'k'}, {"help", 0, 0, 'H'}, {0, 0, 0, 0}};
    *a = (bench_args){.host = "127.0.0.1", .endpoint = "/v1/completions", .port = 8000, .num_prompts = 100, .input_len = 128,
                      .output_len = 128, .vocab = 1000, .stream = 1, .rate = INFINITY};
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "", o, NULL)) != -1) {
        switch (ch) {
        case 'h': a->host = optarg; break;
        case 'p': a->port = atoi(optarg); break;
        case 'e': a->endpoint = optarg; break;
        case 'm': a->model = optarg; break;
        case 'n': a->num_prompts = atoi(optarg); break;
        case 'r': a->rate = strcmp(optarg, "inf") == 0 ? INFINITY : atof(optarg); break;
        case 'c': a->max_concurrency = atoi(optarg); break;
        case 'i': a->input_len = atoi(optarg); break;
        case 'o': a->output_len = atoi(optarg); break;
        case 'R': a->range_ratio = atof(optarg); break;
        case 'v': a->vocab = atoi(optarg); break;
        case 's': a->seed = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'S': a->stream = 0; break;
        case 'k': a->api_key = optarg; break;
        case 'H': usage(); exit(0);
        default: fprintf(stderr, "dsinfer bench serve: unknown or incomplete option \"%s\"\n", argv[optind - 1]); return 2;
        }
    }
    if (optind < argc || a->port <= 0 || a->port > 65535 || a->num_prompts <= 0 || a->input_len <= 0 || a->output_len <= 0 ||
        a->vocab <= 16 || !(a->rate > 0) || a->max_concurrency < 0 || a->range_ratio < 0 || a->range_ratio >= 1) {
        fprintf(stderr, "dsinfer bench serve: bad or out-of-range arguments\n");
        return 2;
    }
    return 0;
}

static int bench_serve(int argc, char **argv) {
    bench_args a;
    if (parse(argc, argv, &a)) { usage(); return 2; }
    bench_run run = {.a = &a, .reqs = ds_xcalloc((size_t)a.num_prompts, sizeof(bench_req))};
    unsigned s = a.seed * 2654435761u + 1;
    double t = 0;
    for (int i = 0; i < a.num_prompts; i++) {
        bench_req *q = &run.reqs[i];
        q->in_len = rand_len(&s, a.input_len, a.range_ratio);
        q->out_len = rand_len(&s, a.output_len, a.range_ratio);
        q->body = make_body(&a, q->in_len, q->out_len, &s);
        if (isfinite(a.rate)) t += -log(1.0 - (rand_r(&s) + 0.5) / ((double)RAND_MAX + 1)) / a.rate;
        q->start_at = isfinite(a.rate) ? t : 0;
    }
    int n_workers = a.max_concurrency ? a.max_concurrency : a.num_prompts;
    if (n_workers > a.num_prompts) n_workers = a.num_prompts;
    if (n_workers > 1024) n_workers = 1024;
    fprintf(stderr, "bench serve: %d prompts (input %d, output %d tokens), rate %g req/s, concurrency %d, %s %s:%d%s\n",
            a.num_prompts, a.input_len, a.output_len, a.rate, n_workers, a.stream ? "streaming to" : "to", a.host, a.port, a.endpoint);
    pthread_t *th = ds_xcalloc((size_t)n_workers, sizeof(pthread_t));
    run.t0 = now_s();
    for (int i = 0; i < n_workers; i++) pthread_create(&th[i], NULL, worker, &run);
    for (int i = 0; i < n_workers; i++) pthread_join(th[i], NULL);
    double dur = now_s() - run.t0;
    int failed = 0;
    for (int i = 0; i < a.num_prompts; i++)
        if (!run.reqs[i].ok && failed++ < 3) fprintf(stderr, "bench serve: request %d failed: %s\n", i, run.reqs[i].err);
    report(&a, run.reqs, dur);
    for (int i = 0; i < a.num_prompts; i++) { free(run.reqs[i].body); free(run.reqs[i].itl); }
    free(run.reqs);
    free(th);
    return failed == a.num_prompts ? 1 : 0;
}

int cli_bench_offline(int argc, char **argv);   /* src/cli/cmd_bench_offline.c: `dsinfer bench` without serve */

int cli_bench(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "serve") == 0) return bench_serve(argc - 1, argv + 1);
    if (argc < 2 || argv[1][0] == '-') return cli_bench_offline(argc, argv);
    fprintf(stderr, "usage: dsinfer bench serve [options]   (dsinfer bench serve --help)\n");
    return 2;
}
