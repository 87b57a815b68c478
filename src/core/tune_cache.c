/* The on-disk table of tuned choices (see tune_cache.h). */
#include "core/tune_cache.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEADER "# dsinfer tune cache v1"
#define MAX_LINE 1024

static int key_ok(const char *k) {
    size_t n = strlen(k);
    if (n == 0 || n >= DS_TUNE_KEY) return 0;
    for (size_t i = 0; i < n; i++)
        if (k[i] <= ' ' || k[i] > '~') return 0;
    return 1;
}

ds_status ds_tune_cache_path(char *out, size_t n, const char *what, const char *tag, char *err) {
    const char *dir = getenv("DSINFER_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char base[512];
    if (dir && *dir) snprintf(base, sizeof base, "%s", dir);
    else if (xdg && *xdg) snprintf(base, sizeof base, "%s/dsinfer", xdg);
    else if (home && *home) snprintf(base, sizeof base, "%s/.cache/dsinfer", home);
    else return ds_seterr(err, DS_ERR_ARG, "tune cache: no directory (set DSINFER_CACHE_DIR, XDG_CACHE_HOME or HOME)");
    char clean[128];
    size_t k = 0;
    for (; tag[k] && k + 1 < sizeof clean; k++) {
        char ch = tag[k];
        int keep = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                   ch == '_' || ch == '-';
        clean[k] = keep ? ch : '-';
    }
    clean[k] = 0;
    int w = snprintf(out, n, "%s/%s-%s.txt", base, what, clean);
    if (w < 0 || (size_t)w >= n) return ds_seterr(err, DS_ERR_ARG, "tune cache: the path under %s is too long", base);
    return DS_OK;
}

static void reset(ds_tune_cache *c) {
    free(c->e);
    c->e = NULL;
    c->n = c->cap = 0;
}

/* One entry line: key, DS_TUNE_NV integers, the time; nothing after. 0 on success. */
static int parse_line(const char *line, ds_tune_entry *e) {
    const char *p = line;
    size_t k = 0;
    while (*p && *p != ' ' && *p != '\t') {
        if (k + 1 >= DS_TUNE_KEY) return 1;
        e->key[k++] = *p++;
    }
    e->key[k] = 0;
    if (!key_ok(e->key)) return 1;
    for (int i = 0; i < DS_TUNE_NV; i++) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno) return 1;
        e->v[i] = (int64_t)v;
        p = end;
    }
    char *end;
    e->us = strtod(p, &end);
    if (end == p || !(e->us > 0) || e->us > 1e12) return 1;
    for (p = end; *p; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') return 1;
    return 0;
}

ds_status ds_tune_cache_load(ds_tune_cache *c, const char *path, char *err) {
    reset(c);
    if (snprintf(c->path, sizeof c->path, "%s", path) >= (int)sizeof c->path)
        return ds_seterr(err, DS_ERR_ARG, "tune cache: path too long: %s", path);
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT) return DS_OK;
        return ds_seterr(err, DS_ERR_IO, "tune cache %s: %s", path, strerror(errno));
    }
    char line[MAX_LINE];
    int ln = 0;
    ds_status st = DS_OK;
    while (fgets(line, sizeof line, f)) {
        ln++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            st = ds_seterr(err, DS_ERR_FORMAT, "tune cache %s line %d: longer than %d bytes", path, ln, MAX_LINE - 2);
            break;
        }
        if (ln == 1 && strncmp(line, HEADER, strlen(HEADER)) != 0) {
            st = ds_seterr(err, DS_ERR_FORMAT, "tune cache %s: line 1 is not \"%s\"", path, HEADER);
            break;
        }
        if (line[0] == '#' || line[0] == '\n') continue;
        ds_tune_entry e;
        if (parse_line(line, &e)) {
            st = ds_seterr(err, DS_ERR_FORMAT, "tune cache %s line %d: expected \"key\" then %d integers and a time in "
                           "microseconds", path, ln, DS_TUNE_NV);
            break;
        }
        if ((st = ds_tune_cache_put(c, e.key, e.v, e.us, err))) break;
    }
    if (!st && ferror(f)) st = ds_seterr(err, DS_ERR_IO, "tune cache %s: read error", path);
    fclose(f);
    if (st) reset(c);
    return st;
}

const ds_tune_entry *ds_tune_cache_find(const ds_tune_cache *c, const char *key) {
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->e[i].key, key)) return &c->e[i];
    return NULL;
}

ds_status ds_tune_cache_put(ds_tune_cache *c, const char *key, const int64_t v[DS_TUNE_NV], double us, char *err) {
    if (!key_ok(key)) return ds_seterr(err, DS_ERR_ARG, "tune cache: bad key \"%.*s\"", DS_TUNE_KEY, key);
    if (!(us > 0)) return ds_seterr(err, DS_ERR_ARG, "tune cache: time %g for %s is not positive", us, key);
    ds_tune_entry *e = (ds_tune_entry *)ds_tune_cache_find(c, key);
    if (!e) {
        if (c->n == c->cap) {
            int cap = c->cap ? 2 * c->cap : 64;
            ds_tune_entry *ne = realloc(c->e, sizeof *ne * (size_t)cap);
            if (!ne) return ds_seterr(err, DS_ERR_NOMEM, "tune cache: out of memory");
            c->e = ne;
            c->cap = cap;
        }
        e = &c->e[c->n++];
        snprintf(e->key, sizeof e->key, "%s", key);
    }
    memcpy(e->v, v, sizeof e->v);
    e->us = us;
    return DS_OK;
}

/* mkdir -p of path's directory */
static ds_status make_parent(const char *path, char *err) {
    char d[512];
    snprintf(d, sizeof d, "%s", path);
    char *slash = strrchr(d, '/');
    if (!slash || slash == d) return DS_OK;
    *slash = 0;
    for (char *p = d + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(d, 0755) && errno != EEXIST) return ds_seterr(err, DS_ERR_IO, "tune cache: mkdir %s: %s", d, strerror(errno));
        *p = '/';
    }
    if (mkdir(d, 0755) && errno != EEXIST) return ds_seterr(err, DS_ERR_IO, "tune cache: mkdir %s: %s", d, strerror(errno));
    return DS_OK;
}

ds_status ds_tune_cache_save(const ds_tune_cache *c, char *err) {
    if (!c->path[0]) return ds_seterr(err, DS_ERR_ARG, "tune cache: no file to save to");
    ds_status st = make_parent(c->path, err);
    if (st) return st;
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", c->path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return ds_seterr(err, DS_ERR_IO, "tune cache: cannot write %s: %s", tmp, strerror(errno));
    fprintf(f, "%s\n# key v0..v%d us (see src/core/tune_cache.h)\n", HEADER, DS_TUNE_NV - 1);
    for (int i = 0; i < c->n; i++) {
        fprintf(f, "%s", c->e[i].key);
        for (int k = 0; k < DS_TUNE_NV; k++) fprintf(f, " %" PRId64, c->e[i].v[k]);
        fprintf(f, " %.3f\n", c->e[i].us);
    }
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, c->path)) {
        int e = errno;
        remove(tmp);
        return ds_seterr(err, DS_ERR_IO, "tune cache: cannot write %s: %s", c->path, strerror(e));
    }
    return DS_OK;
}

void ds_tune_cache_free(ds_tune_cache *c) {
    reset(c);
    c->path[0] = 0;
}
