/* The OpenAI-compatible HTTP server (`dsinfer serve`): its options and its entry point.
 *
 * Threads: libmicrohttpd runs one thread per connection; those threads parse and validate requests,
 * render templates, tokenize, enqueue, and wait on their request for tokens (srv_req). One engine
 * thread owns the engine, its KV pages and the scheduler, and runs the steps. See srv_internal.h. */
#ifndef DS_SERVER_H
#define DS_SERVER_H

#include <stddef.h>

typedef struct {
    const char *model_dir;
    const char *host;            /* default "127.0.0.1" */
    int port;                    /* 0 = any free port (the chosen one is printed) */
    const char *backend;         /* "cpu" or "cuda" */
    int threads;                 /* CPU threads for the engine; 0 = all cores */
    int data_parallel_size;      /* replicas, each an engine with its own KV pool and scheduler (>= 1) */
    int data_parallel_mp;        /* 1: each replica in a process of its own (server/remote.c; one per GPU on cuda) */
    int nnodes, node_rank;       /* mp replicas over several nodes, data_parallel_size / nnodes on each: node 0
                                    runs the HTTP front and its replicas; the others only replicas, which connect
                                    to the front at master_addr:master_port (0, 0: one node) */
    const char *master_addr;
    int master_port;
    int enable_expert_parallel;  /* the replicas share the routed experts (ds_ep_group) and step together */
    int ep_fp8_dispatch;         /* token rows to the experts in FP8 (--ep-dispatch fp8) */
    int pipeline_parallel_size;  /* each replica's engine's layers split over this many stages (cpu backend;
                                    prefix caching off as with TP) */
    int tensor_parallel_size;    /* each replica's engine split over this many ranks (cpu backend); turns
                                    prefix caching off (its pages are per rank) */
    int max_num_seqs;            /* running requests at most */
    int max_num_batched_tokens;  /* tokens per step at most */
    size_t kv_cache_bytes;       /* KV pool size (0 = the engine's default) */
    const char *kv_cache_dtype;  /* NULL/"auto" or "fp8" (ds_engine_opts) */
    const char *quantization;    /* NULL, "fp8" or "fp4": quantize the weights at load */
    double gpu_memory_utilization; /* > 0: size the pool to this fraction of GPU memory (cuda) */
    int max_queue;               /* waiting requests at most; more get 503 */
    int enable_prefix_caching;
    const char *api_key;         /* NULL = no authentication */
    const char *served_model_name; /* NULL = model_dir as given */
    const char *chat_template;   /* NULL or "auto" = from tokenizer_config.json */
    size_t max_body_bytes;       /* larger request bodies get 400 */
    /* service levels and alerts (/dashboard, /metrics); the TPOT level also drives the adaptive
     * decode batch limit (src/sched/adaptive.h) */
    double slo_ttft_ms;          /* 0 = no TTFT alert */
    double slo_tpot_ms;          /* 0 = no per-token latency alert, fixed batch limit (max_num_seqs) */
    double alert_gpu_util;       /* percent: alert when compute utilisation stays under it (default 70) */
    double alert_mem_bw_util;    /* percent: the same for memory-bandwidth utilisation (default 65) */
    double alert_window_s;       /* seconds: latency percentile window and "stays under" (default 10) */
    double dashboard_interval_s; /* seconds between dashboard samples (default 1) */
} server_config;

void server_config_defaults(server_config *c);
/* Runs the server until SIGINT or SIGTERM; returns the process exit code (0 after a clean stop). */
int server_main(const server_config *c);

#endif
