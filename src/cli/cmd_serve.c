/* `dsinfer serve`: flags -> server_config, then server_main (src/server/). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/cli.h"
#include "server/server.h"

enum { O_HOST = 256, O_PORT, O_BACKEND, O_THREADS, O_SEQS, O_BATCHED, O_KV, O_GPU, O_QUEUE, O_NOPC, O_KEY, O_NAME,
       O_TEMPLATE, O_BODY, O_SLO_TTFT, O_SLO_TPOT, O_AL_GPU, O_AL_BW, O_AL_WIN, O_DASH_INT, O_KV_DTYPE, O_QUANT, O_DP, O_EP, O_EP_DISPATCH, O_TP, O_PP, O_DPB, O_NNODES, O_NODE_RANK, O_MADDR, O_MPORT, O_HELP };

static const struct option opts[] = {
    {"model", required_argument, 0, 'm'}, {"host", required_argument, 0, O_HOST}, {"port", required_argument, 0, O_PORT},
    {"backend", required_argument, 0, O_BACKEND}, {"threads", required_argument, 0, O_THREADS},
    {"max-num-seqs", required_argument, 0, O_SEQS}, {"max-num-batched-tokens", required_argument, 0, O_BATCHED},
    {"kv-cache-memory", required_argument, 0, O_KV}, {"gpu-memory-utilization", required_argument, 0, O_GPU},
    {"max-queue", required_argument, 0, O_QUEUE}, {"no-prefix-caching", no_argument, 0, O_NOPC},
    {"api-key", required_argument, 0, O_KEY}, {"served-model-name", required_argument, 0, O_NAME},
    {"chat-template", required_argument, 0, O_TEMPLATE}, {"max-body-bytes", required_argument, 0, O_BODY},
    {"slo-ttft-ms", required_argument, 0, O_SLO_TTFT}, {"slo-tpot-ms", required_argument, 0, O_SLO_TPOT},
    {"alert-gpu-util", required_argument, 0, O_AL_GPU}, {"alert-mem-bw-util", required_argument, 0, O_AL_BW},
    {"alert-window", required_argument, 0, O_AL_WIN}, {"dashboard-interval", required_argument, 0, O_DASH_INT},
    {"kv-cache-dtype", required_argument, 0, O_KV_DTYPE}, {"quantization", required_argument, 0, O_QUANT},
    {"data-parallel-size", required_argument, 0, O_DP}, {"enable-expert-parallel", no_argument, 0, O_EP},
    {"ep-dispatch", required_argument, 0, O_EP_DISPATCH}, {"tensor-parallel-size", required_argument, 0, O_TP},
    {"pipeline-parallel-size", required_argument, 0, O_PP}, {"data-parallel-backend", required_argument, 0, O_DPB},
    {"nnodes", required_argument, 0, O_NNODES}, {"node-rank", required_argument, 0, O_NODE_RANK},
    {"master-addr", required_argument, 0, O_MADDR}, {"master-port", required_argument, 0, O_MPORT},
    {"help", no_argument, 0, O_HELP}, {0, 0, 0, 0}};

static void usage(void) {
    fprintf(stderr,
            "usage: dsinfer serve --model DIR [--host 127.0.0.1] [--port 8000] [--backend cpu|cuda] [--threads N]\n"
            "         [--max-num-seqs 256] [--max-num-batched-tokens 2048] [--kv-cache-memory 256MiB]\n"
            "         [--gpu-memory-utilization 0.9] [--max-queue 1024] [--no-prefix-caching] [--api-key KEY]\n"
            "         [--served-model-name NAME] [--chat-template deepseek-v3|deepseek-r1|deepseek-v2]\n"
            "         [--max-body-bytes 8MiB] [--slo-ttft-ms MS] [--slo-tpot-ms MS] [--alert-gpu-util 70]\n"
            "         [--alert-mem-bw-util 65] [--alert-window 10] [--dashboard-interval 1]\n"
            "         [--kv-cache-dtype auto|bf16|fp8|fp32] [--quantization fp8|fp4] [--data-parallel-size N]\n"
            "         [--enable-expert-parallel [--ep-dispatch fp32|fp8]] [--tensor-parallel-size N]\n"
            "         [--pipeline-parallel-size N] [--data-parallel-backend mp|threads]\n"
            "         [--nnodes K --node-rank R --master-addr HOST --master-port P]\n"
            "  an OpenAI-compatible server: /v1/chat/completions, /v1/completions, /v1/models, /health, /metrics,\n"
            "  and a live dashboard at /dashboard (its JSON at /dashboard/data; `dsinfer top` in a terminal).\n"
            "  --slo-ttft-ms / --slo-tpot-ms: service levels; an alert fires when the p90 over the alert window\n"
            "  (seconds) exceeds one, and with --slo-tpot-ms the decode batch limit adapts (at most --max-num-seqs).\n"
            "  --alert-gpu-util / --alert-mem-bw-util: alert when GPU compute / memory-bandwidth utilisation (NVML,\n"
            "  cuda backend) stays under the percentage for the alert window while requests run.\n"
            "  --port 0 picks a free port; the line \"listening on http://HOST:PORT\" on stdout says which.\n"
            "  The API key may also come from the environment (DSINFER_API_KEY).\n"
            "  --data-parallel-backend: mp runs each replica in a process of its own (one GPU each; the default\n"
            "  on cuda; with --enable-expert-parallel they form one group, over NCCL on cuda and TCP on cpu),\n"
            "  threads runs them in this process (the default on cpu).\n"
            "  --nnodes K: the mp replicas over K nodes (data-parallel-size / K on each); start one serve per node\n"
            "  with the same flags and its --node-rank; node 0 serves HTTP and listens for the other nodes'\n"
            "  replicas at --master-addr:--master-port (its own address; with expert parallelism the NCCL id on\n"
            "  the port after it); the other nodes run replicas only and exit when node 0 stops them.\n");
}

static int num(const char *flag, const char *v, double lo, double hi, double *out) {
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !isfinite(x) || x < lo || x > hi) {
        fprintf(stderr, "dsinfer serve: %s: bad value \"%s\" (expected a number in [%g, %g])\n", flag, v, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

/* "256MiB", "1GiB", "512M", "1.5G", "65536" -> bytes. */
static int bytes(const char *flag, const char *v, size_t *out) {
    char *end;
    double x = strtod(v, &end);
    static const struct { const char *s; double mul; } units[] = {
        {"", 1}, {"B", 1}, {"K", 1024.0}, {"KB", 1e3}, {"KiB", 1024.0}, {"M", 1048576.0}, {"MB", 1e6},
        {"MiB", 1048576.0}, {"G", 1073741824.0}, {"GB", 1e9}, {"GiB", 1073741824.0}};
    for (size_t i = 0; end != v && isfinite(x) && x > 0 && i < sizeof units / sizeof units[0]; i++)
        if (strcasecmp(end, units[i].s) == 0 && x * units[i].mul < 1e18) {
            *out = (size_t)(x * units[i].mul);
            return 0;
        }
    fprintf(stderr, "dsinfer serve: %s: bad size \"%s\" (expected e.g. 256MiB, 2GiB or a byte count)\n", flag, v);
    return -1;
}

static int parse(int argc, char **argv, server_config *c) {
    int ch;
    double x;
    const char *dpb = NULL;   /* --data-parallel-backend */
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "m:", opts, NULL)) != -1) {
        int bad = 0;
        switch (ch) {
        case 'm': c->model_dir = optarg; break;
        case O_HOST: c->host = optarg; break;
        case O_PORT: bad = num("--port", optarg, 0, 65535, &x); c->port = (int)x; break;
        case O_BACKEND: c->backend = optarg; break;
        case O_THREADS: bad = num("--threads", optarg, 0, 4096, &x); c->threads = (int)x; break;
        case O_SEQS: bad = num("--max-num-seqs", optarg, 1, 65536, &x); c->max_num_seqs = (int)x; break;
        case O_BATCHED: bad = num("--max-num-batched-tokens", optarg, 1, 1 << 24, &x); c->max_num_batched_tokens = (int)x; break;
        case O_KV: bad = bytes("--kv-cache-memory", optarg, &c->kv_cache_bytes); break;
        case O_KV_DTYPE: c->kv_cache_dtype = optarg; break;
        case O_QUANT: c->quantization = optarg; break;
        case O_DP: c->data_parallel_size = atoi(optarg); bad = c->data_parallel_size < 1 || c->data_parallel_size > 64; break;
        case O_EP: c->enable_expert_parallel = 1; break;
        case O_TP: bad = num("--tensor-parallel-size", optarg, 1, 64, &x); c->tensor_parallel_size = (int)x; break;
        case O_PP: bad = num("--pipeline-parallel-size", optarg, 1, 64, &x); c->pipeline_parallel_size = (int)x; break;
        case O_DPB:
            bad = strcmp(optarg, "mp") && strcmp(optarg, "threads");
            if (bad) fprintf(stderr, "dsinfer serve: --data-parallel-backend must be mp or threads, not \"%s\"\n", optarg);
            dpb = optarg;
            break;
        case O_EP_DISPATCH:
            bad = strcmp(optarg, "fp8") && strcmp(optarg, "fp32");
            if (bad) fprintf(stderr, "dsinfer serve: --ep-dispatch must be fp32 or fp8, not \"%s\"\n", optarg);
            c->ep_fp8_dispatch = !strcmp(optarg, "fp8");
            break;
        case O_NNODES: bad = num("--nnodes", optarg, 1, 64, &x); c->nnodes = (int)x; break;
        case O_NODE_RANK: bad = num("--node-rank", optarg, 0, 63, &x); c->node_rank = (int)x; break;
        case O_MADDR: c->master_addr = optarg; break;
        case O_MPORT: bad = num("--master-port", optarg, 1, 65534, &x); c->master_port = (int)x; break;
        case O_GPU: bad = num("--gpu-memory-utilization", optarg, 0.01, 1, &x); c->gpu_memory_utilization = x; break;
        case O_QUEUE: bad = num("--max-queue", optarg, 1, 1 << 24, &x); c->max_queue = (int)x; break;
        case O_NOPC: c->enable_prefix_caching = 0; break;
        case O_KEY: c->api_key = optarg; break;
        case O_NAME: c->served_model_name = optarg; break;
        case O_TEMPLATE: c->chat_template = optarg; break;
        case O_BODY: bad = bytes("--max-body-bytes", optarg, &c->max_body_bytes); break;
        case O_SLO_TTFT: bad = num("--slo-ttft-ms", optarg, 0, 1e9, &c->slo_ttft_ms); break;
        case O_SLO_TPOT: bad = num("--slo-tpot-ms", optarg, 0, 1e9, &c->slo_tpot_ms); break;
        case O_AL_GPU: bad = num("--alert-gpu-util", optarg, 0, 100, &c->alert_gpu_util); break;
        case O_AL_BW: bad = num("--alert-mem-bw-util", optarg, 0, 100, &c->alert_mem_bw_util); break;
        case O_AL_WIN: bad = num("--alert-window", optarg, 0.1, 86400, &c->alert_window_s); break;
        case O_DASH_INT: bad = num("--dashboard-interval", optarg, 0.05, 3600, &c->dashboard_interval_s); break;
        case O_HELP: usage(); exit(0);
        default:
            fprintf(stderr, "dsinfer serve: unknown or incomplete option \"%s\"\n", argv[optind - 1]);
            bad = 1;
        }
        if (bad) return 2;
    }
    if (optind < argc) { fprintf(stderr, "dsinfer serve: unexpected argument \"%s\"\n", argv[optind]); return 2; }
    if (!c->model_dir) { fprintf(stderr, "dsinfer serve: --model DIR is required\n"); return 2; }
    /* --tensor-parallel-size N --enable-expert-parallel: one TP group whose ranks hold whole experts */
    if (c->tensor_parallel_size > 1 && c->enable_expert_parallel && c->data_parallel_size > 1) {
        fprintf(stderr, "dsinfer serve: --tensor-parallel-size with --enable-expert-parallel and --data-parallel-size "
                        "is not supported yet (use one of TP+EP or DP+EP)\n");
        return 2;
    }
    if (c->pipeline_parallel_size > 1 && c->enable_expert_parallel) {
        fprintf(stderr, "dsinfer serve: --pipeline-parallel-size with --enable-expert-parallel is not supported yet\n");
        return 2;
    }
    if (c->tensor_parallel_size > 1 || c->pipeline_parallel_size > 1) c->enable_prefix_caching = 0;   /* pages differ per rank */
    /* replicas in processes: the only way to put them on several GPUs (one CUDA context each) */
    c->data_parallel_mp = dpb ? !strcmp(dpb, "mp") : !strcmp(c->backend, "cuda");
    if (c->nnodes > 1 || c->node_rank > 0 || c->master_addr || c->master_port) {   /* several nodes */
        const char *why = c->nnodes < 2 ? "--node-rank, --master-addr and --master-port go with --nnodes 2 or more"
                          : c->node_rank >= c->nnodes ? "--node-rank must be below --nnodes"
                          : !c->master_addr || !c->master_port ? "--nnodes needs --master-addr and --master-port (node 0's)"
                          : !c->data_parallel_mp ? "--nnodes runs the replicas as processes (--data-parallel-backend mp)"
                          : c->data_parallel_size < c->nnodes ? "--nnodes K needs --data-parallel-size K or more"
                          : c->data_parallel_size % c->nnodes ? "--data-parallel-size must be a multiple of --nnodes"
                          : c->tensor_parallel_size > 1 || c->pipeline_parallel_size > 1 ? "--nnodes with tensor or pipeline "
                                                                                            "parallelism is not supported yet"
                          : NULL;
        if (why) { fprintf(stderr, "dsinfer serve: %s\n", why); return 2; }
    }
    return 0;
}

int cli_serve(int argc, char **argv) {
    server_config c;
    server_config_defaults(&c);
    if (parse(argc, argv, &c)) { usage(); return 2; }
    if (!c.api_key && getenv("DSINFER_API_KEY") && *getenv("DSINFER_API_KEY")) c.api_key = getenv("DSINFER_API_KEY");
    return server_main(&c);
}
