#include "loader/st_write.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"

size_t ds_st_entry_bytes(const ds_st_entry *e) {
    size_t n = ds_dtype_size(e->dtype);
    for (int d = 0; d < e->ndim; d++) n *= (size_t)e->shape[d];
    return n;
}

/* The header JSON, padded with spaces so that the data starts on an 8-byte boundary. */
static char *header_json(const ds_st_entry *entries, int n, size_t *total, size_t *len) {
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
    cJSON_AddStringToObject(meta, "format", "pt");
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        cJSON *t = cJSON_AddObjectToObject(root, entries[i].name);
        cJSON_AddStringToObject(t, "dtype", ds_dtype_name(entries[i].dtype));
        cJSON *shape = cJSON_AddArrayToObject(t, "shape");
        for (int d = 0; d < entries[i].ndim; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)entries[i].shape[d]));
        size_t b = ds_st_entry_bytes(&entries[i]);
        cJSON *o = cJSON_AddArrayToObject(t, "data_offsets");
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)(off + b)));
        off += b;
    }
    char *txt = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    size_t l = strlen(txt), padded = (l + 8 + 7) / 8 * 8 - 8;
    txt = ds_xrealloc(txt, padded + 1);
    memset(txt + l, ' ', padded - l);
    txt[padded] = 0;
    *total = off;
    *len = padded;
    return txt;
}

ds_status ds_st_write_begin(ds_st_writer *w, const char *path, const ds_st_entry *entries, int n, char *err) {
    memset(w, 0, sizeof(*w));
    w->path = path;
    w->f = fopen(path, "wb");
    if (!w->f) return ds_seterr(err, DS_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    size_t len;
    char *hdr = header_json(entries, n, &w->expected, &len);
    uint64_t hl = len;
    int ok = fwrite(&hl, 8, 1, w->f) == 1 && fwrite(hdr, 1, len, w->f) == len;
    free(hdr);
    return ok ? DS_OK : ds_seterr(err, DS_ERR_IO, "%s: write failed", path);
}

ds_status ds_st_write_data(ds_st_writer *w, const void *data, size_t n, char *err) {
    if (w->written + n > w->expected)
        return ds_seterr(err, DS_ERR_ARG, "%s: more tensor data than the header declares", w->path);
    if (n && fwrite(data, 1, n, w->f) != n) return ds_seterr(err, DS_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
    w->written += n;
    return DS_OK;
}

ds_status ds_st_write_end(ds_st_writer *w, char *err) {
    int closed = fclose(w->f) == 0;
    w->f = NULL;
    if (!closed) return ds_seterr(err, DS_ERR_IO, "%s: close failed", w->path);
    if (w->written != w->expected)
        return ds_seterr(err, DS_ERR_ARG, "%s: %zu of %zu data bytes written", w->path, w->written, w->expected);
    return DS_OK;
}
