/* The dashboard's alerts (src/server/dashboard.c) driven without a clock, an engine or a GPU:
 * srv_dash_sample takes the time and the NVML readings, srv_dash_step / srv_dash_ttft the latencies.
 * GPU alerts fire only after `window` seconds of busy samples under the threshold and reset when idle
 * or back above it; they are disabled without the cuda backend or NVML. Latency alerts follow the p90
 * over the window. The JSON and Prometheus renderings carry the same state. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/dashboard.h"
#include "testutil.h"

static sched_stats busy(int running) {
    return (sched_stats){.n_running = running, .pages_total = 100, .pages_used = 10 * running, .seq_limit = 8};
}

static unsigned last_alerts(srv_dash *d) {
    dash_sample s;
    CHECK(srv_dash_latest(d, &s));
    return s.alerts;
}

static void test_gpu(void) {
    dash_config c = {.gpu_util_min = 70, .mem_bw_min = 65, .window = 3, .interval = 1, .max_num_seqs = 8, .gpu = 1};
    srv_dash *d = srv_dash_new(&c, 0);
    sched_stats st = busy(4), idle = busy(0);
    double t = 0;
    srv_dash_sample(d, t += 1, &st, 1, 50, 90);    /* compute low from t=1, memory fine */
    srv_dash_sample(d, t += 1, &st, 1, 50, 90);
    srv_dash_sample(d, t += 1, &st, 1, 50, 90);
    CHECK(last_alerts(d) == 0);                     /* 2 s under: not yet */
    srv_dash_sample(d, t += 1, &st, 1, 50, 90);     /* 3 s under */
    CHECK(last_alerts(d) == 1u << DASH_GPU_UTIL);
    srv_dash_sample(d, t += 1, &idle, 1, 0, 0);     /* idle: reset */
    CHECK(last_alerts(d) == 0);
    for (int i = 0; i < 3; i++) srv_dash_sample(d, t += 1, &st, 1, 90, 10);
    CHECK(last_alerts(d) == 0);
    srv_dash_sample(d, t += 1, &st, 1, 90, 10);
    CHECK(last_alerts(d) == 1u << DASH_MEM_BW);
    srv_dash_sample(d, t += 1, &st, 1, 90, 70);     /* back above: clears */
    CHECK(last_alerts(d) == 0);
    for (int i = 0; i < 5; i++) srv_dash_sample(d, t += 1, &st, 0, 0, 0);   /* NVML gone: disabled */
    CHECK(last_alerts(d) == 0);
    char *js = srv_dash_json(d, "m", "cuda");
    cJSON *j = cJSON_Parse(js);
    CHECK(j != NULL);
    cJSON *al = cJSON_GetObjectItem(j, "alerts");
    CHECK(cJSON_GetArraySize(al) == DASH_N_ALERTS);
    cJSON *g = cJSON_GetArrayItem(al, DASH_GPU_UTIL);
    CHECK(cJSON_IsFalse(cJSON_GetObjectItem(g, "enabled")) && cJSON_GetObjectItem(g, "fired")->valueint == 1);
    CHECK(strstr(cJSON_GetObjectItem(g, "reason")->valuestring, "NVML") != NULL);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "series"), "gpu_util")) == 15);
    cJSON_Delete(j);
    free(js);
    srv_dash_free(d);
    c.gpu = 0;   /* the CPU backend: GPU alerts never fire, whatever NVML says */
    d = srv_dash_new(&c, 0);
    for (int i = 0; i < 10; i++) srv_dash_sample(d, i + 1, &st, 1, 0, 0);
    CHECK(last_alerts(d) == 0);
    js = srv_dash_json(d, "m", "cpu");
    CHECK(strstr(js, "CPU backend") != NULL && strstr(js, "\"available\":false") != NULL);
    free(js);
    srv_dash_free(d);
}

static void test_latency(void) {
    dash_config c = {.slo_ttft = 0.100, .slo_tpot = 0.010, .window = 5, .interval = 1, .max_num_seqs = 8};
    srv_dash *d = srv_dash_new(&c, 0);
    sched_stats st = busy(2);
    for (int i = 0; i < 100; i++) srv_dash_step(d, 0.5 + i * 0.005, 0.005, 2, 2, 2, 2);   /* 5 ms steps */
    srv_dash_ttft(d, 0.6, 0.050);
    srv_dash_sample(d, 1, &st, 0, 0, 0);
    dash_sample s;
    CHECK(srv_dash_latest(d, &s) && s.alerts == 0);
    CHECK(fabs(s.itl[1] - 0.005) < 1e-12 && fabs(s.ttft[0] - 0.050) < 1e-12);
    CHECK(fabs(s.gen_tps - 200) < 1e-9 && fabs(s.batch_mean - 2) < 1e-12 && s.batch_max == 2 && s.limit == 8);
    for (int i = 0; i < 10; i++) srv_dash_step(d, 1.5 + i * 0.02, 0.020, 2, 2, 2, 2);    /* 20 ms steps */
    srv_dash_sample(d, 2, &st, 0, 0, 0);
    CHECK(last_alerts(d) == 0);   /* p90 (rank 99 of 110) over the window: still a fast step */
    for (int i = 0; i < 200; i++) srv_dash_step(d, 2.5 + i * 0.002, 0.020, 2, 2, 2, 2);
    for (int i = 0; i < 10; i++) srv_dash_ttft(d, 2.6, 0.5);
    srv_dash_sample(d, 3, &st, 0, 0, 0);
    CHECK(last_alerts(d) == ((1u << DASH_TPOT) | (1u << DASH_TTFT)));
    srv_dash_sample(d, 9, &st, 0, 0, 0);     /* the window moved past them: no data, no alert */
    CHECK(srv_dash_latest(d, &s) && s.alerts == 0 && isnan(s.itl[1]) && isnan(s.ttft[1]));
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    srv_dash_prometheus(d, f, "model_name=\"m\"");
    fclose(f);
    CHECK(strstr(buf, "dsinfer:alerts_fired_total{model_name=\"m\",alert=\"tpot_slo\"} 1") != NULL);
    CHECK(strstr(buf, "dsinfer:alert_active{model_name=\"m\",alert=\"tpot_slo\"} 0") != NULL);
    CHECK(strstr(buf, "dsinfer:alert_enabled{model_name=\"m\",alert=\"gpu_util_low\"} 0") != NULL);
    CHECK(strstr(buf, "dsinfer:decode_batch_limit{model_name=\"m\"} 8") != NULL);
    free(buf);
    srv_dash_free(d);
}

int main(void) {
    test_gpu();
    test_latency();
    return test_result("test_adaptive_alerts");
}
