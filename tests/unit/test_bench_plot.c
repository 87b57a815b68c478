/* The bench plot (core/bench_plot.c): a bench CSV with decode and prefill rows becomes an SVG with one line per
 * series holding that series' points in x order, a tooltip per point and a legend entry per series (XML-escaped
 * labels); rows of other kinds are left out; a panel without rows says so; a missing file, a header without a
 * needed column, a line with the wrong field count and a non-numeric value give errors naming the file, the line
 * and the column, and write no SVG. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/bench_plot.h"
#include "testutil.h"

static char dir[256];

static char *read_all(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *b = calloc(1, 1 << 20);
    size_t n = fread(b, 1, (1 << 20) - 1, f);
    b[n] = 0;
    fclose(f);
    return b;
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* the points of the polyline after the n-th (0-based) legend-order polyline, as "x,y" pairs: how many */
static int polyline_points(const char *svg, int which) {
    const char *p = svg;
    for (int i = 0; i <= which; i++) {
        p = strstr(p, "<polyline");
        if (!p) return -1;
        p += 9;
    }
    const char *q = strstr(p, "points=\"");
    if (!q) return -1;
    q += 8;
    int n = 0;
    for (; *q && *q != '"'; q++) n += *q == ',';
    return n;
}

static void check_plot(void) {
    char csv[512], svg[512], err[DS_ERRLEN];
    snprintf(csv, sizeof csv, "%s/rows.csv", dir);
    snprintf(svg, sizeof svg, "%s/rows.svg", dir);
    test_write_text(csv,
               "label,kind,dtype,batch,len,tok_s,step_ms,gbytes,gflop,roof_ms,bound,roof_frac,bw_gbs,tflops\n"
               "base,decode,fp8,64,1024,7000.0,9.1,17.7,383,4.2,memory,0.455,4221,780\n"
               "base,decode,fp8,1,1024,280.0,3.5,2.7,6,0.6,memory,0.178,4221,780\n"
               "base,decode,fp8,256,1024,17500.0,14.6,24,1532,5.6,memory,0.386,4221,780\n"
               "base,decode,fp8,64,4096,5000.0,12.0,30,383,7.0,memory,0.58,4221,780\n"
               "a<b&c,decode,bf16,1,1024,278.0,3.6,4.9,6,1.2,memory,0.322,4221,780\n"
               "base,prefill,bf16,1,8192,40000.0,200,1,50000,64.6,compute,0.365,4221,780\n"
               "base,mla,bf16,64,4096,1.0,0.3,2,1,0.2,memory,0.8,4221,780\n"
               "\n");
    CHECKF(ds_bench_plot(csv, svg, err) == DS_OK, "%s", err);
    char *s = read_all(svg);
    CHECK(s != NULL);
    if (!s) return;
    CHECK(!strncmp(s, "<svg ", 5) && strstr(s, "</svg>\n"));
    /* series: base fp8 ctx 1024 (3 points), base fp8 ctx 4096 (1), a<b&c bf16 ctx 1024 (1); prefill base bf16 (1) */
    CHECK(count(s, "<polyline") == 4);
    CHECK(polyline_points(s, 0) == 3 && polyline_points(s, 1) == 1 && polyline_points(s, 2) == 1);
    CHECK(polyline_points(s, 3) == 1);
    CHECK(count(s, "<circle") == 6);   /* the mla row is not plotted */
    CHECK(strstr(s, "base fp8 ctx 1024, batch 64: 7000.0 tok/s, 45.5% of the roofline") != NULL);
    CHECK(strstr(s, "base bf16, prompt 8192: 40000.0 tok/s, 36.5% of the roofline") != NULL);
    CHECK(strstr(s, "a&lt;b&amp;c bf16 ctx 1024") != NULL && !strstr(s, "a<b"));
    /* the first series' points left to right: batch 1, 64, 256 (x increasing) */
    const char *pl = strstr(strstr(s, "<polyline"), "points=\"") + 8;
    double x1, y1, x2, y2, x3, y3;
    CHECK(sscanf(pl, "%lf,%lf %lf,%lf %lf,%lf", &x1, &y1, &x2, &y2, &x3, &y3) == 6 && x1 < x2 && x2 < x3);
    CHECK(y2 < y1 && y2 < y3);   /* 45.5% is above 17.8% and 38.6%: a smaller y in SVG */
    free(s);

    /* decode rows only: the prefill panel says it has none */
    test_write_text(csv, "label,kind,dtype,batch,len,tok_s,roof_frac\nx,decode,bf16,8,1024,900.5,0.5\n");
    CHECKF(ds_bench_plot(csv, svg, err) == DS_OK, "%s", err);
    s = read_all(svg);
    CHECK(s && strstr(s, "no prefill rows") && !strstr(s, "no decode rows"));
    free(s);
}

static void check_errors(void) {
    char csv[512], svg[512], err[DS_ERRLEN];
    snprintf(csv, sizeof csv, "%s/bad.csv", dir);
    snprintf(svg, sizeof svg, "%s/bad.svg", dir);
    CHECK(ds_bench_plot("/nonexistent/dir/x.csv", svg, err) == DS_ERR_IO && strstr(err, "cannot open /nonexistent/dir/x.csv"));
    test_write_text(csv, "label,N,K,M,engine_us\nx,1,2,3,4\n");   /* an --ops CSV */
    CHECK(ds_bench_plot(csv, svg, err) == DS_ERR_FORMAT && strstr(err, "no column \"kind\"") && strstr(err, "bad.csv"));
    test_write_text(csv, "label,kind,dtype,batch,len,tok_s,roof_frac\nx,decode,bf16,8,1024,900,0.5\nx,decode,bf16,8\n");
    CHECK(ds_bench_plot(csv, svg, err) == DS_ERR_FORMAT && strstr(err, "bad.csv:3: 4 fields, the header has 7"));
    test_write_text(csv, "label,kind,dtype,batch,len,tok_s,roof_frac\nx,decode,bf16,eight,1024,900,0.5\n");
    CHECK(ds_bench_plot(csv, svg, err) == DS_ERR_FORMAT && strstr(err, "bad.csv:2: column batch is not a valid number"));
    test_write_text(csv, "label,kind,dtype,batch,len,tok_s,roof_frac\nx,decode,bf16,8,1024,900,nan\n");
    CHECK(ds_bench_plot(csv, svg, err) == DS_ERR_FORMAT && strstr(err, "column roof_frac"));
    test_write_text(csv, "");
    CHECK(ds_bench_plot(csv, svg, err) == DS_ERR_FORMAT && strstr(err, "no header line"));
    CHECK(access(svg, F_OK) != 0);   /* no SVG written for any of these */
    test_write_text(csv, "label,kind,dtype,batch,len,tok_s,roof_frac\nx,decode,bf16,8,1024,900,0.5\n");
    CHECK(ds_bench_plot(csv, "/nonexistent/dir/x.svg", err) == DS_ERR_IO && strstr(err, "cannot write /nonexistent/dir/x.svg"));
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/ds_plot_XXXXXX");
    if (!mkdtemp(dir)) test_skip("cannot make a temporary directory");
    check_plot();
    check_errors();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return test_result("test_bench_plot");
}
