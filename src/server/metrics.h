/* Server metrics: counters and latency histograms, written by the engine thread, read by /metrics.
 * All calls are thread-safe. */
#ifndef DS_SERVER_METRICS_H
#define DS_SERVER_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "sched/sched.h"

typedef struct srv_metrics srv_metrics;

srv_metrics *srv_metrics_new(void);
void srv_metrics_free(srv_metrics *m);
/* A request ended: finish reason ("stop", "length", "tool_calls", "abort", "error"), token counts and
 * latencies in seconds (ttft < 0 when no token came; tpot < 0 with fewer than two tokens). */
void srv_metrics_request(srv_metrics *m, const char *reason, int n_prompt, int n_gen, double ttft, double tpot,
                         double e2e);
/* Counts an HTTP response by status code. */
void srv_metrics_http(srv_metrics *m, int status);
/* Appends the Prometheus text exposition to *buf (malloc'd, grown as needed). `st` is the scheduler's
 * latest stats, pool_ok the latest integrity check (1 ok, 0 broken, -1 not run), cache_dtype the KV cache's
 * dtype (ds_kv_cache_dtype_resolve), shown as a label of dsinfer:cache_config_info. */
void srv_metrics_render(srv_metrics *m, const sched_stats *st, int pool_ok, const char *model, const char *cache_dtype,
                        char **buf, size_t *len);

/* GPU utilisation and memory through NVML, loaded at run time (libnvidia-ml.so.1); 0 if unavailable. */
int srv_nvml_sample(unsigned *util_pct, uint64_t *mem_used, uint64_t *mem_total);
/* GPU 0's compute and memory utilisation (NVML's utilization.gpu and utilization.memory: the share of
 * the last sample period a kernel ran / device memory was read or written), percent; 0 if unavailable. */
int srv_nvml_rates(unsigned *gpu_pct, unsigned *mem_pct);

#endif
