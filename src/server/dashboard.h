/* Live figures for operators: the time series behind /dashboard (the page), /dashboard/data (its
 * JSON, also read by `dsinfer top`), and the alert and adaptive-limit gauges of /metrics.
 *
 * Writers and readers:
 *   - the engine thread reports every step (duration, batch, decode items, the limit it chose) and
 *     every first token (TTFT) with srv_dash_step / srv_dash_ttft: cheap, under the dash's mutex;
 *   - a sampler thread (srv_dash_start) closes an interval every `interval` seconds: throughput,
 *     latency percentiles over the last `window` seconds, queue and KV pool figures from the engine's
 *     published stats, GPU utilisation from NVML; it evaluates the alerts and appends a sample to a
 *     ring of DASH_SAMPLES;
 *   - HTTP threads render the ring (srv_dash_json, srv_dash_prometheus).
 * srv_dash_sample is the sampler's step with the time and the readings passed in, so a test can drive
 * it without a clock, an engine or a GPU.
 *
 * Alerts (each enabled or not, active or not):
 *   gpu_util_low  NVML compute utilisation under gpu_util_min percent for `window` seconds while
 *                 requests run (enabled only with the cuda backend and NVML);
 *   mem_bw_low    NVML memory utilisation (the share of time device memory was read or written, NVML's
 *                 proxy for bandwidth use) under mem_bw_min percent, likewise;
 *   ttft_slo      p90 time to first token over the window above slo_ttft (enabled when > 0);
 *   tpot_slo      p90 per-token latency (the duration of steps that decode) over the window above
 *                 slo_tpot (enabled when > 0); the same signal drives the adaptive limit. */
#ifndef DS_SERVER_DASHBOARD_H
#define DS_SERVER_DASHBOARD_H

#include <stdint.h>
#include <stdio.h>

#include "sched/sched.h"

#define DASH_SAMPLES 600   /* ring of samples: 10 minutes at 1 s */

enum { DASH_GPU_UTIL, DASH_MEM_BW, DASH_TTFT, DASH_TPOT, DASH_N_ALERTS };

typedef struct {
    double slo_ttft, slo_tpot;       /* seconds; 0 = that latency alert is off */
    double gpu_util_min, mem_bw_min; /* percent */
    double window;                   /* seconds: latency percentiles, and "stays under" for GPU alerts */
    double interval;                 /* seconds between samples */
    int max_num_seqs;
    int gpu;                         /* 1: GPU figures are meaningful (cuda backend); NVML still may be absent */
    int adaptive;                    /* 1: the engine adapts its batch limit (slo_tpot > 0) */
} dash_config;

/* One closed interval. Missing values (no request finished, no GPU) are NaN. */
typedef struct {
    double t;                               /* seconds since the server started */
    double gen_tps, prompt_tps, steps_ps;   /* generated / prefilled tokens and steps per second */
    double ttft[3], itl[3];                 /* p50, p90, p99 over the window, seconds */
    int running, waiting, limit;
    double kv_used, kv_cached;              /* fractions of the pool's pages */
    double prefix_hit;                      /* hit rate of the prompt tokens looked up in the interval */
    double gpu_util, mem_bw;                /* percent (NVML), NaN without */
    double batch_mean;                      /* requests per step, mean over the interval's steps */
    int batch_max;
    unsigned alerts;                        /* bit i: alert i active */
} dash_sample;

typedef struct srv_dash srv_dash;
struct srv_engine;

srv_dash *srv_dash_new(const dash_config *c, double t0);
void srv_dash_free(srv_dash *d);

/* ---- the engine thread ---- */
/* A step ran: `dur` seconds, n_items requests, n_tokens tokens computed, n_sampled of them gave a token,
 * n_decode items were decode tokens (then `dur` is a per-token latency). */
void srv_dash_step(srv_dash *d, double now, double dur, int n_items, int n_tokens, int n_sampled, int n_decode);
void srv_dash_ttft(srv_dash *d, double now, double ttft);

/* ---- the sampler ---- */
/* Closes the interval ending at `now`: st is the engine's latest stats (seq_limit included); gpu_ok 0
 * when NVML gave nothing. */
void srv_dash_sample(srv_dash *d, double now, const sched_stats *st, int gpu_ok, double gpu_util, double mem_bw);
/* Starts / stops the thread that calls srv_dash_sample every interval with srv_engine_stats and NVML. */
int srv_dash_start(srv_dash *d, struct srv_engine *e);
void srv_dash_stop(srv_dash *d);

/* ---- readers (any thread) ---- */
/* The /dashboard/data JSON, malloc'd: config, alerts, the latest sample and the series. */
char *srv_dash_json(srv_dash *d, const char *model, const char *backend);
/* Appends the alert, limit and window gauges in Prometheus text to f (lbl: the model's label pair). */
void srv_dash_prometheus(srv_dash *d, FILE *f, const char *lbl);
/* Copies the latest sample; 0 before the first. */
int srv_dash_latest(srv_dash *d, dash_sample *s);
const char *srv_dash_alert_name(int i);

/* The page (src/server/dashboard_page.c, generated from dashboard.html by dashboard_embed.sh). */
extern const char srv_dash_page[];

#endif
