#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ds_status_name(ds_status st) {
    switch (st) {
    case DS_OK: return "ok";
    case DS_ERR_ARG: return "invalid argument";
    case DS_ERR_IO: return "i/o error";
    case DS_ERR_FORMAT: return "bad format";
    case DS_ERR_UNSUPPORTED: return "unsupported";
    case DS_ERR_NOMEM: return "out of memory";
    case DS_ERR_BACKEND: return "backend error";
    }
    return "unknown status";
}

ds_status ds_seterr(char *err, ds_status st, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, DS_ERRLEN, fmt, ap);
        va_end(ap);
    }
    return st;
}

void ds_die(const char *file, int line, const char *msg) {
    fprintf(stderr, "dsinfer: fatal: %s:%d: %s\n", file, line, msg);
    abort();
}

void *ds_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) ds_die(__FILE__, __LINE__, "out of host memory");
    return p;
}

void *ds_xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) ds_die(__FILE__, __LINE__, "out of host memory");
    return p;
}

void *ds_xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) ds_die(__FILE__, __LINE__, "out of host memory");
    return q;
}

char *ds_xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = ds_xmalloc(n);
    memcpy(p, s, n);
    return p;
}
