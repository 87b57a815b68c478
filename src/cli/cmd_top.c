/* `dsinfer top`: the dashboard's figures in a terminal, for machines without a browser. It polls a
 * running server's GET /dashboard/data (the JSON the /dashboard page draws) and prints the latest
 * sample, the alerts and sparklines of the last minute; it redraws in place (ANSI) every --interval
 * seconds, or prints one snapshot with --once (no escape sequences unless stdout is a terminal). */
#include <getopt.h>
#include <math.h>
#include <netdb.h>
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
    const char *host;
    int port, once;
    double interval;
    int color;
} top_args;

/* ---- HTTP ------------------------------------------------------------------------------------ */
/* GET path over HTTP/1.0 (the server answers with a sized body and closes); the body, malloc'd, or
 * NULL with the reason in err. */
static char *http_get(const char *host, int port, const char *path, char *err, size_t errlen) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
    char ports[16];
    snprintf(ports, sizeof ports, "%d", port);
    int rc = getaddrinfo(host, ports, &hints, &res);
    if (rc) { snprintf(err, errlen, "%s: %s", host, gai_strerror(rc)); return NULL; }
    int fd = socket(res->ai_family, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
        snprintf(err, errlen, "cannot connect to %s:%d (is `dsinfer serve` running there?)", host, port);
        if (fd >= 0) close(fd);
        freeaddrinfo(res);
        return NULL;
    }
    freeaddrinfo(res);
    char req[512];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: %s:%d\r\nAccept: application/json\r\n\r\n", path, host, port);
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) { snprintf(err, errlen, "send failed"); close(fd); return NULL; }
    size_t len = 0, cap = 1 << 16;
    char *buf = ds_xmalloc(cap);
    for (ssize_t got; (got = recv(fd, buf + len, cap - len - 1, 0)) > 0;) {
        len += (size_t)got;
        if (cap - len < 4096) buf = ds_xrealloc(buf, cap *= 2);
    }
    close(fd);
    buf[len] = 0;
    char *body = strstr(buf, "\r\n\r\n");
    int status = 0;
    if (!body || sscanf(buf, "HTTP/%*s %d", &status) != 1 || status != 200) {
        snprintf(err, errlen, "GET %s: %s", path, status ? "unexpected HTTP status" : "no HTTP response");
        if (status) snprintf(err, errlen, "GET %s: HTTP %d (a dsinfer server with /dashboard?)", path, status);
        free(buf);
        return NULL;
    }
    memmove(buf, body + 4, len - (size_t)(body + 4 - buf) + 1);
    return buf;
}

/* ---- figures --------------------------------------------------------------------------------- */
/* The last value of series[name], NaN when missing or null. */
static double last_of(const cJSON *series, const char *name) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(series, name);
    int n = cJSON_GetArraySize(a);
    const cJSON *v = n ? cJSON_GetArrayItem(a, n - 1) : NULL;
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static double num_of(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *str_of(const cJSON *o, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) ? v->valuestring : "?";
}

/* "12.3 ms", or "n/a". */
static const char *fmt(char *b, size_t n, double v, double scale, const char *unit) {
    double x = v * scale, ax = fabs(x);
    if (isnan(v)) snprintf(b, n, "n/a");
    else if (ax > 0 && ax < 0.1) snprintf(b, n, "%.2g%s%s", x, *unit ? " " : "", unit);
    else snprintf(b, n, "%.*f%s%s", ax >= 100 ? 0 : ax >= 10 ? 1 : 2, x, *unit ? " " : "", unit);
    return b;
}

/* The last `width` values of series[name] as a line of block characters scaled to their maximum. */
static void sparkline(FILE *f, const cJSON *series, const char *name, int width) {
    static const char *const BL[8] = {"\u2581", "\u2582", "\u2583", "\u2584", "\u2585", "\u2586", "\u2587", "\u2588"};
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(series, name);
    int n = cJSON_GetArraySize(a), from = n > width ? n - width : 0;
    double mx = 0;
    for (int i = from; i < n; i++) {
        const cJSON *v = cJSON_GetArrayItem(a, i);
        if (cJSON_IsNumber(v) && v->valuedouble > mx) mx = v->valuedouble;
    }
    for (int i = from; i < n; i++) {
        const cJSON *v = cJSON_GetArrayItem(a, i);
        if (!cJSON_IsNumber(v)) { fputc(' ', f); continue; }
        int k = mx > 0 ? (int)(v->valuedouble / mx * 7.999) : 0;
        fputs(BL[k < 0 ? 0 : k > 7 ? 7 : k], f);
    }
}

static void print_alerts(FILE *f, const top_args *a, const cJSON *root) {
    const char *red = a->color ? "\033[1;31m" : "", *green = a->color ? "\033[32m" : "", *dim = a->color ? "\033[2m" : "",
               *off = a->color ? "\033[0m" : "";
    const cJSON *al;
    int first = 1;
    cJSON_ArrayForEach(al, cJSON_GetObjectItemCaseSensitive(root, "alerts")) {
        int enabled = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(al, "enabled"));
        int active = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(al, "active"));
        int pct = strcmp(str_of(al, "unit"), "percent") == 0;
        char v[32], t[32];
        fmt(v, sizeof v, num_of(al, "value"), pct ? 1 : 1e3, pct ? "%" : "ms");
        fmt(t, sizeof t, num_of(al, "threshold"), pct ? 1 : 1e3, pct ? "%" : "ms");
        fprintf(f, "%-15s", first ? "alerts" : "");
        first = 0;
        if (!enabled) fprintf(f, "%sinactive %-15s %s%s\n", dim, str_of(al, "name"), str_of(al, "reason"), off);
        else if (active)
            fprintf(f, "%sFIRING   %-15s %s %s %s%s\n", red, str_of(al, "name"), v, pct ? "under" : "over", t, off);
        else fprintf(f, "%sok       %-15s%s %s (%s %s)\n", green, str_of(al, "name"), off, v, pct ? "min" : "SLO", t);
    }
}

static void print_snapshot(FILE *f, const top_args *a, const cJSON *root) {
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "series"), *cfg = cJSON_GetObjectItemCaseSensitive(root, "config");
    const cJSON *gpu = cJSON_GetObjectItemCaseSensitive(root, "gpu");
    int gpu_ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(gpu, "available"));
    char b[8][32];
    fprintf(f, "dsinfer top - http://%s:%d  model %s  backend %s  up %.0f s  samples %.0f\n\n", a->host, a->port,
            str_of(root, "model"), str_of(root, "backend"), num_of(root, "uptime_s"), num_of(root, "samples"));
    fprintf(f, "%-15sgenerated %s   prefilled %s   steps %s/s\n", "throughput", fmt(b[0], 32, last_of(s, "gen_tps"), 1, "tok/s"),
            fmt(b[1], 32, last_of(s, "prompt_tps"), 1, "tok/s"), fmt(b[2], 32, last_of(s, "steps_ps"), 1, ""));
    fprintf(f, "%-15sp50 %s   p90 %s   p99 %s\n", "TTFT", fmt(b[0], 32, last_of(s, "ttft_p50"), 1e3, "ms"),
            fmt(b[1], 32, last_of(s, "ttft_p90"), 1e3, "ms"), fmt(b[2], 32, last_of(s, "ttft_p99"), 1e3, "ms"));
    fprintf(f, "%-15sp50 %s   p90 %s   p99 %s\n", "token latency", fmt(b[0], 32, last_of(s, "itl_p50"), 1e3, "ms"),
            fmt(b[1], 32, last_of(s, "itl_p90"), 1e3, "ms"), fmt(b[2], 32, last_of(s, "itl_p99"), 1e3, "ms"));
    fprintf(f, "%-15srunning %.0f   waiting %.0f   batch limit %.0f of %.0f (%s)\n", "requests", last_of(s, "running"),
            last_of(s, "waiting"), last_of(s, "limit"), num_of(cfg, "max_num_seqs"),
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "adaptive")) ? "adaptive" : "fixed");
    fprintf(f, "%-15smean %s   max %s\n", "batch/step", fmt(b[0], 32, last_of(s, "batch_mean"), 1, ""),
            fmt(b[1], 32, last_of(s, "batch_max"), 1, ""));
    fprintf(f, "%-15sused %s   cached %s   prefix hit rate %s\n", "KV pool", fmt(b[0], 32, last_of(s, "kv_used"), 100, "%"),
            fmt(b[1], 32, last_of(s, "kv_cached"), 100, "%"), fmt(b[2], 32, last_of(s, "prefix_hit"), 100, "%"));
    if (gpu_ok)
        fprintf(f, "%-15scompute %s   memory bandwidth %s\n", "GPU", fmt(b[0], 32, last_of(s, "gpu_util"), 1, "%"),
                fmt(b[1], 32, last_of(s, "mem_bw"), 1, "%"));
    else fprintf(f, "%-15scompute n/a   memory bandwidth n/a   (%s)\n", "GPU", str_of(gpu, "reason"));
    fputc('\n', f);
    print_alerts(f, a, root);
    fputc('\n', f);
    static const char *const sp[][2] = {{"gen_tps", "tok/s"}, {"itl_p90", "tok lat p90"}, {"running", "running"},
                                        {"waiting", "waiting"}, {"limit", "limit"}};
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) {
        fprintf(f, "%-15s", sp[i][1]);
        sparkline(f, s, sp[i][0], 60);
        fputc('\n', f);
    }
}

/* ---- the command ----------------------------------------------------------------------------- */
static void usage(void) {
    fprintf(stderr, "usage: dsinfer top [--host 127.0.0.1] [--port 8000] [--interval 1] [--once] [--no-color]\n"
                    "  the live figures of a running `dsinfer serve` (its /dashboard/data) in the terminal;\n"
                    "  --once prints one snapshot and exits (exit 3 if the server cannot be reached).\n");
}

static int parse(int argc, char **argv, top_args *a) {
    static const struct option opts[] = {{"host", required_argument, 0, 'H'}, {"port", required_argument, 0, 'p'},
                                         {"interval", required_argument, 0, 'i'}, {"once", no_argument, 0, '1'},
                                         {"no-color", no_argument, 0, 'n'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int ch, no_color = 0;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        char *end = NULL;
        switch (ch) {
        case 'H': a->host = optarg; break;
        case 'p': a->port = (int)strtol(optarg, &end, 10); if (*end || a->port < 1 || a->port > 65535) return -1; break;
        case 'i': a->interval = strtod(optarg, &end); if (*end || !(a->interval >= 0.1)) return -1; break;
        case '1': a->once = 1; break;
        case 'n': no_color = 1; break;
        case 'h': usage(); exit(0);
        default: return -1;
        }
    }
    if (optind < argc) return -1;
    a->color = !no_color && isatty(STDOUT_FILENO);
    return 0;
}

int cli_top(int argc, char **argv) {
    top_args a = {.host = "127.0.0.1", .port = 8000, .interval = 1};
    if (parse(argc, argv, &a)) { fprintf(stderr, "dsinfer top: bad arguments\n"); usage(); return 2; }
    for (;;) {
        char err[256];
        char *body = http_get(a.host, a.port, "/dashboard/data", err, sizeof err);
        cJSON *root = body ? cJSON_Parse(body) : NULL;
        if (body && !root) snprintf(err, sizeof err, "bad JSON from /dashboard/data");
        free(body);
        if (!root) {
            if (a.once) { fprintf(stderr, "dsinfer top: %s\n", err); return 3; }
            if (a.color) fputs("\033[H\033[2J", stdout);
            printf("dsinfer top: %s (retrying every %g s; Ctrl-C quits)\n", err, a.interval);
        } else {
            if (!a.once) fputs(a.color ? "\033[H\033[2J" : "\n", stdout);
            print_snapshot(stdout, &a, root);
            cJSON_Delete(root);
        }
        fflush(stdout);
        if (a.once) return 0;
        struct timespec ts = {(time_t)a.interval, (long)((a.interval - (double)(time_t)a.interval) * 1e9)};
        nanosleep(&ts, NULL);
    }
}
