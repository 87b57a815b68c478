/* `dsinfer bench` CSV -> SVG (core/bench_plot.h). */
#include "core/bench_plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LINE 4096
#define MAX_FIELDS 64
#define MAX_ROWS 100000
#define MAX_SERIES 64
#define MAX_NAME 160

enum { C_LABEL, C_KIND, C_DTYPE, C_BATCH, C_LEN, C_TOKS, C_FRAC, N_COLS };
static const char *const col_names[N_COLS] = {"label", "kind", "dtype", "batch", "len", "tok_s", "roof_frac"};

typedef struct {
    int decode;           /* 1: decode panel (x = batch), 0: prefill panel (x = prompt length) */
    double x, toks, frac;
    int series;           /* index into the series names */
} point;

typedef struct {
    point *p;
    int n, cap;
    char names[MAX_SERIES][MAX_NAME];   /* "label dtype ctx 1024" or "label dtype" */
    int decode[MAX_SERIES];
    int n_series;
} plot_data;

/* splits line in place at commas (no quoting: bench writes none) into at most MAX_FIELDS fields; the count */
static int split_fields(char *line, char **f) {
    int n = 0;
    line[strcspn(line, "\r\n")] = 0;
    for (char *s = line;; s++) {
        if (n == MAX_FIELDS) return -1;
        f[n++] = s;
        s = strchr(s, ',');
        if (!s) break;
        *s = 0;
    }
    return n;
}

static int parse_num(const char *s, double *v) {
    char *end;
    *v = strtod(s, &end);
    return end != s && !*end && isfinite(*v);
}

static int series_of(plot_data *d, const char *name, int decode) {
    for (int i = 0; i < d->n_series; i++)
        if (d->decode[i] == decode && !strcmp(d->names[i], name)) return i;
    if (d->n_series == MAX_SERIES) return -1;
    snprintf(d->names[d->n_series], MAX_NAME, "%s", name);
    d->decode[d->n_series] = decode;
    return d->n_series++;
}

/* the rows of csv_path into d; DS_OK or an error naming the file (and line) */
static ds_status read_csv(const char *path, plot_data *d, char *err) {
    FILE *f = fopen(path, "r");
    if (!f) return ds_seterr(err, DS_ERR_IO, "cannot open %s", path);
    char line[MAX_LINE], *fl[MAX_FIELDS];
    int col[N_COLS], nh = 0, lineno = 0;
    ds_status st = DS_OK;
    if (!fgets(line, sizeof line, f) || (nh = split_fields(line, fl)) < 0) {
        fclose(f);
        return ds_seterr(err, DS_ERR_FORMAT, "%s: no header line (expected bench's CSV columns)", path);
    }
    lineno = 1;
    for (int c = 0; c < N_COLS; c++) {
        col[c] = -1;
        for (int i = 0; i < nh; i++)
            if (!strcmp(fl[i], col_names[c])) col[c] = i;
        if (col[c] < 0) {
            fclose(f);
            return ds_seterr(err, DS_ERR_FORMAT, "%s: the header has no column \"%s\" (not a `dsinfer bench --csv` "
                             "file of decode / prefill rows?)", path, col_names[c]);
        }
    }
    while (fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            st = ds_seterr(err, DS_ERR_FORMAT, "%s:%d: line longer than %d bytes", path, lineno, MAX_LINE - 1);
            break;
        }
        int n = split_fields(line, fl);
        if (n == 1 && !fl[0][0]) continue;   /* an empty line */
        if (n != nh) {
            st = ds_seterr(err, DS_ERR_FORMAT, "%s:%d: %d fields, the header has %d", path, lineno, n < 0 ? MAX_FIELDS : n, nh);
            break;
        }
        int decode = !strcmp(fl[col[C_KIND]], "decode");
        if (!decode && strcmp(fl[col[C_KIND]], "prefill")) continue;   /* other kinds are not plotted */
        double batch, len, toks, frac;
        const char *bad = !parse_num(fl[col[C_BATCH]], &batch) || batch < 1 ? "batch" :
                          !parse_num(fl[col[C_LEN]], &len) || len < 1 ? "len" :
                          !parse_num(fl[col[C_TOKS]], &toks) || toks < 0 ? "tok_s" :
                          !parse_num(fl[col[C_FRAC]], &frac) || frac < 0 ? "roof_frac" : NULL;
        if (bad) {
            st = ds_seterr(err, DS_ERR_FORMAT, "%s:%d: column %s is not a valid number", path, lineno, bad);
            break;
        }
        char name[MAX_NAME];
        if (decode) snprintf(name, sizeof name, "%.60s %.24s ctx %.0f", fl[col[C_LABEL]], fl[col[C_DTYPE]], len);
        else snprintf(name, sizeof name, "%.60s %.24s", fl[col[C_LABEL]], fl[col[C_DTYPE]]);
        int s = series_of(d, name, decode);
        if (s < 0 || d->n == MAX_ROWS) {
            st = ds_seterr(err, DS_ERR_FORMAT, "%s:%d: more than %d lines or %d series", path, lineno, MAX_ROWS, MAX_SERIES);
            break;
        }
        if (d->n == d->cap) {
            int cap = d->cap ? 2 * d->cap : 64;
            point *p = realloc(d->p, sizeof(point) * (size_t)cap);
            if (!p) {
                st = ds_seterr(err, DS_ERR_NOMEM, "%s: out of memory", path);
                break;
            }
            d->p = p;
            d->cap = cap;
        }
        d->p[d->n++] = (point){decode, decode ? batch : len, toks, frac, s};
    }
    if (!st && ferror(f)) st = ds_seterr(err, DS_ERR_IO, "%s: read error", path);
    fclose(f);
    return st;
}

/* text with &, <, >, " escaped for XML */
static void put_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '&') fputs("&amp;", f);
        else if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

/* Panel geometry: x0, y0 its top-left corner; the axes' box is W x H inside margins. */
#define PW 470
#define PH 300
#define ML 60
#define MT 40

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* one panel: decode or prefill points, lines per series in x order, log2 x axis with a tick per distinct x */
static void put_panel(FILE *f, const plot_data *d, int decode, int x0) {
    double xs[MAX_ROWS > 256 ? 256 : MAX_ROWS];
    int nx = 0;
    for (int i = 0; i < d->n; i++) {
        if (d->p[i].decode != decode) continue;
        int seen = 0;
        for (int j = 0; j < nx && !seen; j++) seen = xs[j] == d->p[i].x;
        if (!seen && nx < 256) xs[nx++] = d->p[i].x;
    }
    qsort(xs, (size_t)nx, sizeof xs[0], cmp_double);
    fprintf(f, "<text x=\"%d\" y=\"24\" font-size=\"15\" font-weight=\"bold\">%s: achieved fraction of the roofline</text>\n",
            x0 + ML, decode ? "Decode" : "Prefill");
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#444\"/>\n", x0 + ML, MT, PW - ML - 10, PH);
    int W = PW - ML - 10;
    for (int pc = 0; pc <= 100; pc += 20) {   /* y grid */
        double y = MT + PH - PH * pc / 100.0;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                   "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%d%%</text>\n",
                x0 + ML, y, x0 + ML + W, y, x0 + ML - 6, y + 4, pc);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"12\" text-anchor=\"middle\">%s (log scale)</text>\n", x0 + ML + W / 2,
            MT + PH + 36, decode ? "batch (sequences)" : "prompt length (tokens)");
    if (!nx) {
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"13\" text-anchor=\"middle\" fill=\"#888\">no %s rows</text>\n",
                x0 + ML + W / 2, MT + PH / 2, decode ? "decode" : "prefill");
        return;
    }
    double lo = log2(xs[0]), hi = log2(xs[nx - 1]), span = hi > lo ? hi - lo : 1.0;
#define XPOS(v) (x0 + ML + 20 + (W - 40) * (nx > 1 ? (log2(v) - lo) / span : 0.5))
#define YPOS(fr) (MT + PH - PH * ((fr) > 1.0 ? 1.0 : (fr)))
    for (int j = 0; j < nx; j++)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%g</text>\n", XPOS(xs[j]), MT + PH + 16, xs[j]);
    int legend = 0;
    for (int s = 0; s < d->n_series; s++) {
        if (d->decode[s] != decode) continue;
        const char *col = palette[s % (int)(sizeof palette / sizeof palette[0])];
        /* the series' points in x order (a later row at the same x is drawn after an earlier one) */
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
        for (int j = 0; j < nx; j++)
            for (int i = 0; i < d->n; i++)
                if (d->p[i].series == s && d->p[i].x == xs[j]) fprintf(f, "%.1f,%.1f ", XPOS(xs[j]), YPOS(d->p[i].frac));
        fputs("\"/>\n", f);
        for (int i = 0; i < d->n; i++) {
            if (d->p[i].series != s) continue;
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>", XPOS(d->p[i].x), YPOS(d->p[i].frac), col);
            put_text(f, d->names[s]);
            fprintf(f, ", %s %g: %.1f tok/s, %.1f%% of the roofline</title></circle>\n", decode ? "batch" : "prompt",
                    d->p[i].x, d->p[i].toks, 100.0 * d->p[i].frac);
        }
        int ly = MT + PH + 56 + 16 * legend++;
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>"
                   "<text x=\"%d\" y=\"%d\" font-size=\"12\">", x0 + ML, ly - 4, x0 + ML + 24, ly - 4, col, x0 + ML + 30, ly);
        put_text(f, d->names[s]);
        fputs("</text>\n", f);
    }
#undef XPOS
#undef YPOS
}

ds_status ds_bench_plot(const char *csv_path, const char *svg_path, char *err) {
    plot_data *d = calloc(1, sizeof *d);
    if (!d) return ds_seterr(err, DS_ERR_NOMEM, "out of memory");
    ds_status st = read_csv(csv_path, d, err);
    if (!st) {
        int nd = 0, np = 0;
        for (int s = 0; s < d->n_series; s++) {
            if (d->decode[s]) nd++;
            else np++;
        }
        int rows = nd > np ? nd : np, height = MT + PH + 70 + 16 * rows;
        FILE *f = fopen(svg_path, "w");
        if (!f) {
            st = ds_seterr(err, DS_ERR_IO, "cannot write %s", svg_path);
        } else {
            fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\">\n"
                       "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", 2 * PW, height);
            put_panel(f, d, 1, 0);
            put_panel(f, d, 0, PW);
            fputs("</svg>\n", f);
            if (fclose(f)) st = ds_seterr(err, DS_ERR_IO, "cannot write %s", svg_path);
        }
    }
    free(d->p);
    free(d);
    return st;
}
