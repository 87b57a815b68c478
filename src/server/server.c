/* `dsinfer serve`: start the engine thread, then HTTP; wait for SIGINT/SIGTERM; then stop accepting,
 * abort what is in flight (clients get finish_reason "abort"), close connections, free everything. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "core/status.h"
#include "server/remote.h"
#include "server/srv_internal.h"

void server_config_defaults(server_config *c) {
    memset(c, 0, sizeof(*c));
    c->host = "127.0.0.1";
    c->port = 8000;
    c->backend = "cpu";
    c->max_num_seqs = 256;
    c->max_num_batched_tokens = 2048;
    c->max_queue = 1024;
    c->enable_prefix_caching = 1;
    c->max_body_bytes = 8u << 20;
    c->alert_gpu_util = 70;
    c->alert_mem_bw_util = 65;
    c->alert_window_s = 10;
    c->dashboard_interval_s = 1;
}

static srv_dash *dash_new(const server_config *c) {
    dash_config dc = {.slo_ttft = c->slo_ttft_ms / 1e3, .slo_tpot = c->slo_tpot_ms / 1e3, .gpu_util_min = c->alert_gpu_util,
                      .mem_bw_min = c->alert_mem_bw_util, .window = c->alert_window_s, .interval = c->dashboard_interval_s,
                      .max_num_seqs = c->max_num_seqs, .gpu = strcmp(c->backend, "cuda") == 0,
                      .adaptive = c->slo_tpot_ms > 0};
    return srv_dash_new(&dc, srv_now());
}

/* The served name goes into metric labels and JSON built by hand: keep it to printable ASCII. */
static ds_status check_name(const char *name, char *err) {
    for (const char *p = name; *p; p++)
        if (*p < 0x20 || *p > 0x7e || *p == '"' || *p == '\\')
            return ds_seterr(err, DS_ERR_ARG, "the served model name \"%s\" has a quote, backslash or non-printable byte; "
                                              "pick one with --served-model-name", name);
    return DS_OK;
}

int server_main(const server_config *c) {
    char err[DS_ERRLEN];
    ds_status st = check_name(c->served_model_name ? c->served_model_name : c->model_dir, err);
    if (st) { fprintf(stderr, "dsinfer serve: error: %s\n", err); return 2; }
    sigset_t sigs;   /* blocked in every thread; the main thread waits for them */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    srv_metrics *m = srv_metrics_new();
    srv_dash *d = dash_new(c);
    if (c->nnodes > 1 && c->node_rank > 0) {   /* replicas only: node 0 runs the front */
        pthread_sigmask(SIG_UNBLOCK, &sigs, NULL);
        int rc = srv_remote_node_main(c, m, d);
        srv_dash_free(d);
        srv_metrics_free(m);
        return rc;
    }
    srv_engine *e = NULL;
    srv_http *h = NULL;
    int port = 0;
    st = srv_engine_start(c, m, d, &e, err);
    if (!st && srv_dash_start(d, e) != 0) st = ds_seterr(err, DS_ERR_NOMEM, "cannot start the dashboard sampler thread");
    if (!st) st = srv_http_start(c, e, m, d, &h, &port, err);
    if (st) {
        fprintf(stderr, "dsinfer serve: error: %s\n", err);
        srv_dash_stop(d);
        srv_engine_stop(e);
        srv_dash_free(d);
        srv_metrics_free(m);
        return st == DS_ERR_ARG ? 2 : 1;
    }
    fprintf(stderr, "dsinfer serve: model \"%s\" on http://%s:%d (max-num-seqs %d, max-num-batched-tokens %d, prefix caching %s)\n",
            c->served_model_name ? c->served_model_name : c->model_dir, c->host, port, c->max_num_seqs,
            c->max_num_batched_tokens, c->enable_prefix_caching ? "on" : "off");
    fprintf(stderr, "dsinfer serve: dashboard on http://%s:%d/dashboard (SLO: TTFT %s, TPOT %s%s)\n", c->host, port,
            c->slo_ttft_ms > 0 ? "set" : "none", c->slo_tpot_ms > 0 ? "set" : "none",
            c->slo_tpot_ms > 0 ? "; adaptive batch limit on" : "");
    printf("listening on http://%s:%d\n", c->host, port);
    fflush(stdout);
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "dsinfer serve: %s: shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    srv_http_quiesce(h);
    srv_engine_abort_all(e);
    srv_http_stop(h);
    srv_dash_stop(d);
    srv_engine_stop(e);
    srv_dash_free(d);
    srv_metrics_free(m);
    fprintf(stderr, "dsinfer serve: stopped\n");
    return 0;
}
