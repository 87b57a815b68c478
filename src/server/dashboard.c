/* Live figures: interval accumulators fed by the engine thread, a sampler thread that closes
 * intervals into a ring of samples and evaluates the alerts, and the JSON and Prometheus renderings.
 * Contract in dashboard.h.
 *
 * Sections: observations (recent TTFT and per-token latencies with their times, for percentiles over
 * the window), the engine's reports, sampling and alerts, the sampler thread, renderings. */
#include "server/dashboard.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/status.h"
#include "server/srv_internal.h"

#define OBS_RING 4096

static const char *const ALERT_NAME[DASH_N_ALERTS] = {"gpu_util_low", "mem_bw_low", "ttft_slo", "tpot_slo"};

/* The last OBS_RING observations (time, value), oldest overwritten first. */
typedef struct {
    double t[OBS_RING], v[OBS_RING];
    unsigned head, n;
} obs_ring;

struct srv_dash {
    dash_config cfg;
    double t0;
    pthread_mutex_t mu;
    /* the open interval, written by the engine thread */
    uint64_t steps, items, gen_tokens, prompt_tokens;
    int batch_max;
    obs_ring ttft, itl;
    /* the sampler's state */
    double last_t;                       /* end of the last closed interval */
    uint64_t last_queries, last_hits;    /* prefix-cache counters at last_t */
    int gpu_ok;                          /* NVML answered at the last sample */
    double low_since[2];                 /* GPU alerts: first busy sample under the threshold, < 0 none */
    uint64_t fired[DASH_N_ALERTS];       /* times each alert went active */
    dash_sample ring[DASH_SAMPLES];
    unsigned head, n;
    uint64_t n_total;                    /* samples taken since the start */
    double scratch[OBS_RING];
    /* the sampler thread */
    pthread_t thread;
    pthread_cond_t cv;
    int started, stop;
    struct srv_engine *e;
};

srv_dash *srv_dash_new(const dash_config *c, double t0) {
    srv_dash *d = ds_xcalloc(1, sizeof(*d));
    d->cfg = *c;
    if (!(d->cfg.interval > 0)) d->cfg.interval = 1;
    if (!(d->cfg.window > 0)) d->cfg.window = 10;
    d->t0 = d->last_t = t0;
    d->low_since[0] = d->low_since[1] = -1;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    return d;
}

void srv_dash_free(srv_dash *d) {
    if (!d) return;
    srv_dash_stop(d);
    pthread_cond_destroy(&d->cv);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

const char *srv_dash_alert_name(int i) { return i >= 0 && i < DASH_N_ALERTS ? ALERT_NAME[i] : "?"; }

/* ---- observations ---------------------------------------------------------------------------- */
static void obs_add(obs_ring *r, double t, double v) {
    r->t[r->head] = t;
    r->v[r->head] = v;
    r->head = (r->head + 1) % OBS_RING;
    if (r->n < OBS_RING) r->n++;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* p50, p90, p99 (nearest rank) of the observations since `from`; NaN when there are none. */
static void obs_percentiles(const obs_ring *r, double from, double *scratch, double out[3]) {
    int n = 0;
    for (unsigned i = 0; i < r->n; i++)
        if (r->t[i] >= from) scratch[n++] = r->v[i];
    static const double Q[3] = {0.50, 0.90, 0.99};
    if (!n) { out[0] = out[1] = out[2] = NAN; return; }
    qsort(scratch, (size_t)n, sizeof(double), cmp_double);
    for (int q = 0; q < 3; q++) {
        int k = (int)ceil(Q[q] * n) - 1;
        out[q] = scratch[k < 0 ? 0 : k];
    }
}

/* ---- the engine's reports -------------------------------------------------------------------- */
void srv_dash_step(srv_dash *d, double now, double dur, int n_items, int n_tokens, int n_sampled, int n_decode) {
    pthread_mutex_lock(&d->mu);
    d->steps++;
    d->items += (uint64_t)n_items;
    d->gen_tokens += (uint64_t)n_sampled;
    d->prompt_tokens += (uint64_t)(n_tokens - n_decode);
    if (n_items > d->batch_max) d->batch_max = n_items;
    if (n_decode > 0) obs_add(&d->itl, now, dur);
    pthread_mutex_unlock(&d->mu);
}

void srv_dash_ttft(srv_dash *d, double now, double ttft) {
    pthread_mutex_lock(&d->mu);
    obs_add(&d->ttft, now, ttft);
    pthread_mutex_unlock(&d->mu);
}

/* ---- sampling and alerts --------------------------------------------------------------------- */
/* GPU alert i (0 compute, 1 memory): active once every busy sample for `window` seconds was under
 * the threshold. An idle server (nothing running) resets it: low utilisation without work is fine. */
static int gpu_low(srv_dash *d, int i, double now, double v, double thr, int busy) {
    if (!d->gpu_ok || !busy || isnan(v) || v >= thr) { d->low_since[i] = -1; return 0; }
    if (d->low_since[i] < 0) d->low_since[i] = now;
    return now - d->low_since[i] >= d->cfg.window;
}

static int alert_enabled(const srv_dash *d, int i) {
    switch (i) {
    case DASH_GPU_UTIL: case DASH_MEM_BW: return d->cfg.gpu && d->gpu_ok;
    case DASH_TTFT: return d->cfg.slo_ttft > 0;
    case DASH_TPOT: return d->cfg.slo_tpot > 0;
    }
    return 0;
}

static unsigned eval_alerts(srv_dash *d, const dash_sample *s, double now) {
    unsigned a = 0;
    int busy = s->running > 0;
    if (gpu_low(d, 0, now, s->gpu_util, d->cfg.gpu_util_min, busy && alert_enabled(d, DASH_GPU_UTIL))) a |= 1u << DASH_GPU_UTIL;
    if (gpu_low(d, 1, now, s->mem_bw, d->cfg.mem_bw_min, busy && alert_enabled(d, DASH_MEM_BW))) a |= 1u << DASH_MEM_BW;
    if (alert_enabled(d, DASH_TTFT) && s->ttft[1] > d->cfg.slo_ttft) a |= 1u << DASH_TTFT;
    if (alert_enabled(d, DASH_TPOT) && s->itl[1] > d->cfg.slo_tpot) a |= 1u << DASH_TPOT;
    return a;
}

void srv_dash_sample(srv_dash *d, double now, const sched_stats *st, int gpu_ok, double gpu_util, double mem_bw) {
    pthread_mutex_lock(&d->mu);
    double dt = now - d->last_t > 1e-6 ? now - d->last_t : 1e-6;
    dash_sample s = {.t = now - d->t0, .gen_tps = (double)d->gen_tokens / dt, .prompt_tps = (double)d->prompt_tokens / dt,
                     .steps_ps = (double)d->steps / dt, .running = st->n_running, .waiting = st->n_waiting,
                     .limit = st->seq_limit, .batch_max = d->batch_max};
    s.batch_mean = d->steps ? (double)d->items / (double)d->steps : 0;
    obs_percentiles(&d->ttft, now - d->cfg.window, d->scratch, s.ttft);
    obs_percentiles(&d->itl, now - d->cfg.window, d->scratch, s.itl);
    s.kv_used = st->pages_total ? (double)st->pages_used / st->pages_total : 0;
    s.kv_cached = st->pages_total ? (double)st->pages_cached / st->pages_total : 0;
    uint64_t q = st->prefix_queries - d->last_queries, h = st->prefix_hits - d->last_hits;
    s.prefix_hit = q ? (double)h / (double)q : NAN;
    d->gpu_ok = gpu_ok;
    s.gpu_util = gpu_ok ? gpu_util : NAN;
    s.mem_bw = gpu_ok ? mem_bw : NAN;
    s.alerts = eval_alerts(d, &s, now);
    unsigned before = d->n ? d->ring[(d->head + DASH_SAMPLES - 1) % DASH_SAMPLES].alerts : 0;
    for (int i = 0; i < DASH_N_ALERTS; i++)
        if ((s.alerts & ~before) & (1u << i)) d->fired[i]++;
    d->ring[d->head] = s;
    d->head = (d->head + 1) % DASH_SAMPLES;
    if (d->n < DASH_SAMPLES) d->n++;
    d->n_total++;
    d->steps = d->items = d->gen_tokens = d->prompt_tokens = 0;
    d->batch_max = 0;
    d->last_t = now;
    d->last_queries = st->prefix_queries;
    d->last_hits = st->prefix_hits;
    pthread_mutex_unlock(&d->mu);
}

int srv_dash_latest(srv_dash *d, dash_sample *s) {
    pthread_mutex_lock(&d->mu);
    int ok = d->n > 0;
    if (ok) *s = d->ring[(d->head + DASH_SAMPLES - 1) % DASH_SAMPLES];
    pthread_mutex_unlock(&d->mu);
    return ok;
}

/* ---- the sampler thread ---------------------------------------------------------------------- */
static void *sampler_main(void *arg) {
    srv_dash *d = arg;
    pthread_mutex_lock(&d->mu);
    while (!d->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double wake = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec + d->cfg.interval;
        ts.tv_sec = (time_t)wake;
        ts.tv_nsec = (long)((wake - (double)ts.tv_sec) * 1e9);
        while (!d->stop && pthread_cond_timedwait(&d->cv, &d->mu, &ts) == 0) {}
        if (d->stop) break;
        pthread_mutex_unlock(&d->mu);
        sched_stats st;
        int pool_ok;
        srv_engine_stats(d->e, &st, &pool_ok);
        unsigned gu = 0, mu = 0;
        int gpu_ok = d->cfg.gpu && srv_nvml_rates(&gu, &mu);
        srv_dash_sample(d, srv_now(), &st, gpu_ok, gu, mu);
        pthread_mutex_lock(&d->mu);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

int srv_dash_start(srv_dash *d, struct srv_engine *e) {
    d->e = e;
    d->stop = 0;
    if (pthread_create(&d->thread, NULL, sampler_main, d) != 0) return -1;
    d->started = 1;
    return 0;
}

void srv_dash_stop(srv_dash *d) {
    if (!d || !d->started) return;
    pthread_mutex_lock(&d->mu);
    d->stop = 1;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
    pthread_join(d->thread, NULL);
    d->started = 0;
}

/* ---- renderings ------------------------------------------------------------------------------ */
static void jnum(FILE *f, double v) {
    if (isnan(v) || isinf(v)) fputs("null", f);
    else fprintf(f, "%.6g", v);
}

/* Why an alert is off, for the page ("" when it is on). */
static const char *disabled_reason(const srv_dash *d, int i) {
    if (alert_enabled(d, i)) return "";
    if (i == DASH_TTFT) return "no service level: set --slo-ttft-ms";
    if (i == DASH_TPOT) return "no service level: set --slo-tpot-ms";
    return d->cfg.gpu ? "inactive: NVML (libnvidia-ml.so.1) is not available" : "inactive: CPU backend, no GPU to measure";
}

static double alert_value(const dash_sample *s, int i) {
    return i == DASH_GPU_UTIL ? s->gpu_util : i == DASH_MEM_BW ? s->mem_bw : i == DASH_TTFT ? s->ttft[1] : s->itl[1];
}

static double alert_threshold(const srv_dash *d, int i) {
    return i == DASH_GPU_UTIL ? d->cfg.gpu_util_min : i == DASH_MEM_BW ? d->cfg.mem_bw_min
           : i == DASH_TTFT ? d->cfg.slo_ttft : d->cfg.slo_tpot;
}

static void json_alerts(srv_dash *d, FILE *f, const dash_sample *last) {
    fputs("\"alerts\":[", f);
    for (int i = 0; i < DASH_N_ALERTS; i++) {
        fprintf(f, "%s{\"name\":\"%s\",\"enabled\":%s,\"active\":%s,\"fired\":%llu,\"unit\":\"%s\",\"value\":", i ? "," : "",
                ALERT_NAME[i], alert_enabled(d, i) ? "true" : "false", last && (last->alerts >> i & 1) ? "true" : "false",
                (unsigned long long)d->fired[i], i < DASH_TTFT ? "percent" : "seconds");
        jnum(f, last ? alert_value(last, i) : NAN);
        fputs(",\"threshold\":", f);
        jnum(f, alert_threshold(d, i));
        fprintf(f, ",\"reason\":\"%s\"}", disabled_reason(d, i));
    }
    fputs("]", f);
}

/* The series, oldest first: one array per field. */
static void json_series(srv_dash *d, FILE *f) {
    static const char *const names[] = {"t", "gen_tps", "prompt_tps", "steps_ps", "ttft_p50", "ttft_p90", "ttft_p99",
                                        "itl_p50", "itl_p90", "itl_p99", "running", "waiting", "limit", "kv_used",
                                        "kv_cached", "prefix_hit", "gpu_util", "mem_bw", "batch_mean", "batch_max",
                                        "alerts"};
    fputs("\"series\":{", f);
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        fprintf(f, "%s\"%s\":[", k ? "," : "", names[k]);
        for (unsigned j = 0; j < d->n; j++) {
            const dash_sample *s = &d->ring[(d->head + DASH_SAMPLES - d->n + j) % DASH_SAMPLES];
            double v[] = {s->t, s->gen_tps, s->prompt_tps, s->steps_ps, s->ttft[0], s->ttft[1], s->ttft[2], s->itl[0],
                          s->itl[1], s->itl[2], s->running, s->waiting, s->limit, s->kv_used, s->kv_cached,
                          s->prefix_hit, s->gpu_util, s->mem_bw, s->batch_mean, s->batch_max, s->alerts};
            if (j) fputc(',', f);
            jnum(f, v[k]);
        }
        fputc(']', f);
    }
    fputc('}', f);
}

char *srv_dash_json(srv_dash *d, const char *model, const char *backend) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    DS_CHECK(f);
    pthread_mutex_lock(&d->mu);
    const dash_sample *last = d->n ? &d->ring[(d->head + DASH_SAMPLES - 1) % DASH_SAMPLES] : NULL;
    fprintf(f, "{\"model\":\"%s\",\"backend\":\"%s\",\"samples\":%llu,\"uptime_s\":%.3f,\"interval_s\":%g,\"window_s\":%g,"
               "\"gpu\":{\"available\":%s,\"reason\":\"%s\"},",
            model, backend, (unsigned long long)d->n_total, srv_now() - d->t0, d->cfg.interval, d->cfg.window,
            d->cfg.gpu && d->gpu_ok ? "true" : "false", disabled_reason(d, DASH_GPU_UTIL));
    fprintf(f, "\"config\":{\"slo_ttft_ms\":%g,\"slo_tpot_ms\":%g,\"gpu_util_min\":%g,\"mem_bw_min\":%g,\"max_num_seqs\":%d,"
               "\"adaptive\":%s},",
            d->cfg.slo_ttft * 1e3, d->cfg.slo_tpot * 1e3, d->cfg.gpu_util_min, d->cfg.mem_bw_min, d->cfg.max_num_seqs,
            d->cfg.adaptive ? "true" : "false");
    json_alerts(d, f, last);
    fputc(',', f);
    json_series(d, f);
    fputc('}', f);
    pthread_mutex_unlock(&d->mu);
    fclose(f);
    return buf;
}

static void prom_head(FILE *f, const char *name, const char *type, const char *help) {
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void prom_quantiles(FILE *f, const char *name, const char *help, const char *lbl, const double q[3]) {
    static const char *const QN[3] = {"0.5", "0.9", "0.99"};
    prom_head(f, name, "gauge", help);
    for (int i = 0; i < 3; i++)
        if (!isnan(q[i])) fprintf(f, "%s{%s,quantile=\"%s\"} %.9g\n", name, lbl, QN[i], q[i]);
}

void srv_dash_prometheus(srv_dash *d, FILE *f, const char *lbl) {
    pthread_mutex_lock(&d->mu);
    const dash_sample *last = d->n ? &d->ring[(d->head + DASH_SAMPLES - 1) % DASH_SAMPLES] : NULL;
    prom_head(f, "dsinfer:alert_active", "gauge", "1 while the alert fires (see /dashboard), else 0.");
    for (int i = 0; i < DASH_N_ALERTS; i++)
        fprintf(f, "dsinfer:alert_active{%s,alert=\"%s\"} %d\n", lbl, ALERT_NAME[i], last ? (int)(last->alerts >> i & 1) : 0);
    prom_head(f, "dsinfer:alert_enabled", "gauge", "1 if the alert is evaluated (GPU alerts need the cuda backend and NVML; latency alerts an SLO).");
    for (int i = 0; i < DASH_N_ALERTS; i++)
        fprintf(f, "dsinfer:alert_enabled{%s,alert=\"%s\"} %d\n", lbl, ALERT_NAME[i], alert_enabled(d, i));
    prom_head(f, "dsinfer:alert_threshold", "gauge", "Alert threshold: percent (GPU alerts) or seconds (latency alerts).");
    for (int i = 0; i < DASH_N_ALERTS; i++)
        fprintf(f, "dsinfer:alert_threshold{%s,alert=\"%s\"} %g\n", lbl, ALERT_NAME[i], alert_threshold(d, i));
    prom_head(f, "dsinfer:alerts_fired_total", "counter", "Times the alert went from inactive to active.");
    for (int i = 0; i < DASH_N_ALERTS; i++)
        fprintf(f, "dsinfer:alerts_fired_total{%s,alert=\"%s\"} %llu\n", lbl, ALERT_NAME[i], (unsigned long long)d->fired[i]);
    if (last) {
        prom_head(f, "dsinfer:decode_batch_limit", "gauge",
                  "Running requests the scheduler admits now (adaptive under --slo-tpot-ms, at most --max-num-seqs).");
        fprintf(f, "dsinfer:decode_batch_limit{%s} %d\n", lbl, last->limit);
        prom_head(f, "dsinfer:batch_size_mean", "gauge", "Requests per step, mean over the last sampling interval.");
        fprintf(f, "dsinfer:batch_size_mean{%s} %.6g\n", lbl, last->batch_mean);
        prom_head(f, "dsinfer:generation_tokens_per_second", "gauge", "Generated tokens per second over the last sampling interval.");
        fprintf(f, "dsinfer:generation_tokens_per_second{%s} %.6g\n", lbl, last->gen_tps);
        prom_quantiles(f, "dsinfer:window_time_to_first_token_seconds", "TTFT quantiles over the alert window.", lbl, last->ttft);
        prom_quantiles(f, "dsinfer:window_token_latency_seconds", "Per-token latency (decode step time) quantiles over the alert window.",
                       lbl, last->itl);
        if (!isnan(last->mem_bw)) {
            prom_head(f, "dsinfer:gpu_memory_utilization_perc", "gauge", "GPU 0 memory utilisation (NVML: share of time memory was read or written), percent.");
            fprintf(f, "dsinfer:gpu_memory_utilization_perc{%s} %g\n", lbl, last->mem_bw);
        }
    }
    pthread_mutex_unlock(&d->mu);
}
