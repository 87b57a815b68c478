#include "core/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/status.h"

char *ds_read_file(const char *path, size_t max, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0, got;
    do {
        if (n + 65536 + 1 > cap) buf = ds_xrealloc(buf, cap = cap * 2 + 65536 + 1);
        got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
    } while (got > 0 && n <= max);
    int failed = ferror(f);
    fclose(f);
    if (failed || n > max) {
        free(buf);
        errno = failed ? EIO : EFBIG;
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}
