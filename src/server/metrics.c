/* Metrics: Prometheus text exposition of counters, gauges and histograms (names follow vLLM's, with
 * the prefix "dsinfer:"). Histogram buckets reach down to 0.5 ms: the CPU backend on a small model
 * is fast, a large model on the GPU slow. NVML (GPU utilisation, memory) is dlopen'ed when present. */
#include "server/metrics.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"

#define MAX_BUCKETS 32

typedef struct {
    const char *name, *help;
    const double *le;
    int n_le;
    uint64_t count[MAX_BUCKETS + 1];   /* per bucket (not cumulative); last = +Inf */
    double sum;
    uint64_t n;
} histogram;

static const double TTFT_LE[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5,
                                 10, 20, 40, 80, 160, 640, 2560};
static const double TPOT_LE[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4,
                                 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80};
static const double E2E_LE[] = {0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120,
                                240, 480, 960, 1920, 7680};

enum { R_STOP, R_LENGTH, R_TOOL, R_ABORT, R_ERROR, N_REASONS };
static const char *const REASONS[N_REASONS] = {"stop", "length", "tool_calls", "abort", "error"};
static const int CODES[] = {200, 400, 401, 404, 405, 500, 503};
#define N_CODES ((int)(sizeof CODES / sizeof CODES[0]))

struct srv_metrics {
    pthread_mutex_t mu;
    histogram ttft, tpot, e2e;
    uint64_t prompt_tokens, gen_tokens, finished[N_REASONS], http[N_CODES + 1];
};

srv_metrics *srv_metrics_new(void) {
    srv_metrics *m = ds_xcalloc(1, sizeof(*m));
    pthread_mutex_init(&m->mu, NULL);
    m->ttft = (histogram){"dsinfer:time_to_first_token_seconds", "Time to the first generated token.", TTFT_LE,
                          (int)(sizeof TTFT_LE / sizeof TTFT_LE[0]), {0}, 0, 0};
    m->tpot = (histogram){"dsinfer:time_per_output_token_seconds", "Mean time per output token after the first.",
                          TPOT_LE, (int)(sizeof TPOT_LE / sizeof TPOT_LE[0]), {0}, 0, 0};
    m->e2e = (histogram){"dsinfer:e2e_request_latency_seconds", "End-to-end request latency.", E2E_LE,
                         (int)(sizeof E2E_LE / sizeof E2E_LE[0]), {0}, 0, 0};
    return m;
}

void srv_metrics_free(srv_metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static void hist_observe(histogram *h, double v) {
    int b = 0;
    while (b < h->n_le && v > h->le[b]) b++;
    h->count[b]++;
    h->sum += v;
    h->n++;
}

void srv_metrics_request(srv_metrics *m, const char *reason, int n_prompt, int n_gen, double ttft, double tpot,
                         double e2e) {
    pthread_mutex_lock(&m->mu);
    int r = R_ERROR;
    for (int i = 0; i < N_REASONS; i++)
        if (strcmp(reason, REASONS[i]) == 0) r = i;
    m->finished[r]++;
    m->prompt_tokens += (uint64_t)n_prompt;
    m->gen_tokens += (uint64_t)n_gen;
    if (ttft >= 0) hist_observe(&m->ttft, ttft);
    if (tpot >= 0) hist_observe(&m->tpot, tpot);
    hist_observe(&m->e2e, e2e);
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_http(srv_metrics *m, int status) {
    pthread_mutex_lock(&m->mu);
    int i = 0;
    while (i < N_CODES && CODES[i] != status) i++;
    m->http[i]++;
    pthread_mutex_unlock(&m->mu);
}

static void put_hist(FILE *f, const histogram *h, const char *lbl) {
    fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", h->name, h->help, h->name);
    uint64_t cum = 0;
    for (int b = 0; b < h->n_le; b++) {
        cum += h->count[b];
        fprintf(f, "%s_bucket{%s,le=\"%g\"} %llu\n", h->name, lbl, h->le[b], (unsigned long long)cum);
    }
    cum += h->count[h->n_le];
    fprintf(f, "%s_bucket{%s,le=\"+Inf\"} %llu\n%s_sum{%s} %.6f\n%s_count{%s} %llu\n", h->name, lbl,
            (unsigned long long)cum, h->name, lbl, h->sum, h->name, lbl, (unsigned long long)h->n);
}

static void put(FILE *f, const char *type, const char *name, const char *help, const char *lbl, double v) {
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s{%s} %.17g\n", name, help, name, type, name, lbl, v);
}

static void put_pool(FILE *f, const sched_stats *st, int pool_ok, const char *lbl) {
    put(f, "gauge", "dsinfer:num_requests_running", "Requests in the running batch.", lbl, st->n_running);
    put(f, "gauge", "dsinfer:num_requests_waiting", "Requests waiting to run.", lbl, st->n_waiting);
    put(f, "gauge", "dsinfer:kv_pages_total", "KV cache pages in the pool.", lbl, st->pages_total);
    put(f, "gauge", "dsinfer:kv_pages_used", "KV pages held by running requests.", lbl, st->pages_used);
    put(f, "gauge", "dsinfer:kv_pages_cached", "KV pages held only by the prefix cache.", lbl, st->pages_cached);
    put(f, "gauge", "dsinfer:kv_pages_free", "Free KV pages.", lbl, st->pages_free);
    put(f, "gauge", "dsinfer:kv_cache_usage_perc", "Fraction of KV pages used by running requests.", lbl,
        st->pages_total ? (double)st->pages_used / st->pages_total : 0);
    put(f, "gauge", "dsinfer:kv_pool_ok", "Page pool integrity (free + used + cached == total): 1 ok, 0 broken, -1 unchecked.",
        lbl, pool_ok);
    put(f, "counter", "dsinfer:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.", lbl,
        (double)st->prefix_queries);
    put(f, "counter", "dsinfer:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.", lbl,
        (double)st->prefix_hits);
    put(f, "gauge", "dsinfer:prefix_cache_hit_rate", "prefix_cache_hits_total / prefix_cache_queries_total.", lbl,
        st->prefix_queries ? (double)st->prefix_hits / (double)st->prefix_queries : 0);
    put(f, "counter", "dsinfer:num_preemptions_total", "Requests preempted (to be recomputed).", lbl,
        (double)st->n_preemptions);
}

static void put_gpu(FILE *f, const char *lbl) {
    unsigned util;
    uint64_t used, total;
    if (!srv_nvml_sample(&util, &used, &total)) return;
    put(f, "gauge", "dsinfer:gpu_utilization_perc", "GPU 0 utilisation (NVML), percent.", lbl, util);
    put(f, "gauge", "dsinfer:gpu_memory_used_bytes", "GPU 0 memory used (NVML).", lbl, (double)used);
    put(f, "gauge", "dsinfer:gpu_memory_total_bytes", "GPU 0 memory (NVML).", lbl, (double)total);
}

void srv_metrics_render(srv_metrics *m, const sched_stats *st, int pool_ok, const char *model, const char *cache_dtype,
                        char **buf, size_t *len) {
    FILE *f = open_memstream(buf, len);
    DS_CHECK(f);
    char lbl[512], info[600];
    snprintf(lbl, sizeof lbl, "model_name=\"%s\"", model);   /* the name is checked printable at start-up */
    snprintf(info, sizeof info, "%s,cache_dtype=\"%s\"", lbl, cache_dtype);
    put(f, "gauge", "dsinfer:cache_config_info", "The KV cache's configuration, in the labels (value 1).", info, 1);
    put_pool(f, st, pool_ok, lbl);
    pthread_mutex_lock(&m->mu);
    put(f, "counter", "dsinfer:prompt_tokens_total", "Prompt tokens of finished requests.", lbl, (double)m->prompt_tokens);
    put(f, "counter", "dsinfer:generation_tokens_total", "Generated tokens of finished requests.", lbl,
        (double)m->gen_tokens);
    fprintf(f, "# HELP dsinfer:request_success_total Finished requests by finish reason.\n"
               "# TYPE dsinfer:request_success_total counter\n");
    for (int i = 0; i < N_REASONS; i++)
        fprintf(f, "dsinfer:request_success_total{%s,finished_reason=\"%s\"} %llu\n", lbl, REASONS[i],
                (unsigned long long)m->finished[i]);
    fprintf(f, "# HELP dsinfer:http_responses_total HTTP responses by status code.\n"
               "# TYPE dsinfer:http_responses_total counter\n");
    for (int i = 0; i <= N_CODES; i++)
        if (m->http[i]) {
            char code[16];
            snprintf(code, sizeof code, "%d", CODES[i]);
            fprintf(f, "dsinfer:http_responses_total{%s,code=\"%s\"} %llu\n", lbl, i < N_CODES ? code : "other",
                    (unsigned long long)m->http[i]);
        }
    put_hist(f, &m->ttft, lbl);
    put_hist(f, &m->tpot, lbl);
    put_hist(f, &m->e2e, lbl);
    pthread_mutex_unlock(&m->mu);
    put_gpu(f, lbl);
    fclose(f);
}

/* ---- NVML, optional -------------------------------------------------------------------------- */
typedef struct { unsigned gpu, memory; } nvml_util;
typedef struct { unsigned long long total, free, used; } nvml_mem;

static struct {
    pthread_once_t once;
    int ok;
    void *dev;
    int (*util)(void *, nvml_util *);
    int (*mem)(void *, nvml_mem *);
} nvml = {PTHREAD_ONCE_INIT, 0, NULL, NULL, NULL};

static void nvml_load(void) {
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
    int (*get)(unsigned, void **) = (int (*)(unsigned, void **))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    nvml.util = (int (*)(void *, nvml_util *))dlsym(h, "nvmlDeviceGetUtilizationRates");
    nvml.mem = (int (*)(void *, nvml_mem *))dlsym(h, "nvmlDeviceGetMemoryInfo");
    if (init && get && nvml.util && nvml.mem && init() == 0 && get(0, &nvml.dev) == 0) nvml.ok = 1;
}

int srv_nvml_sample(unsigned *util_pct, uint64_t *mem_used, uint64_t *mem_total) {
    pthread_once(&nvml.once, nvml_load);
    if (!nvml.ok) return 0;
    nvml_util u;
    nvml_mem mm;
    if (nvml.util(nvml.dev, &u) != 0 || nvml.mem(nvml.dev, &mm) != 0) return 0;
    *util_pct = u.gpu;
    *mem_used = mm.used;
    *mem_total = mm.total;
    return 1;
}

int srv_nvml_rates(unsigned *gpu_pct, unsigned *mem_pct) {
    pthread_once(&nvml.once, nvml_load);
    nvml_util u;
    if (!nvml.ok || nvml.util(nvml.dev, &u) != 0) return 0;
    *gpu_pct = u.gpu;
    *mem_pct = u.memory;
    return 1;
}
