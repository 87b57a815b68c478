/* safetensors reader. File = u64 little-endian header length N, N bytes of JSON header, then data.
 * Header: {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {}}
 * with offsets relative to the first byte after the header. */
#include "loader/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/file.h"
#include "core/status.h"

#define MAX_HEADER_BYTES (100u << 20)

typedef struct {
    char *path;
    void *map;
    size_t size;
} st_file;

struct ds_st_set {
    st_file *files;
    int n_files;
    ds_st_tensor *tensors;   /* sorted by name */
    int n_tensors;
};

static int tensor_cmp(const void *a, const void *b) {
    return strcmp(((const ds_st_tensor *)a)->name, ((const ds_st_tensor *)b)->name);
}

static ds_status map_file(const char *path, st_file *f, char *err) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return ds_seterr(err, DS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return ds_seterr(err, DS_ERR_IO, "%s: not a regular file", path);
    }
    f->path = ds_xstrdup(path);
    f->size = (size_t)sb.st_size;
    f->map = NULL;
    if (f->size > 0) {
        f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (f->map == MAP_FAILED) {
            f->map = NULL;
            close(fd);
            return ds_seterr(err, DS_ERR_IO, "%s: mmap failed: %s", path, strerror(errno));
        }
    }
    close(fd);
    return DS_OK;
}

static ds_status parse_shape(const cJSON *shape, ds_st_tensor *t, const char *path, char *err) {
    if (!cJSON_IsArray(shape))
        return ds_seterr(err, DS_ERR_FORMAT, "%s: tensor %s: \"shape\" is not an array", path, t->name);
    t->ndim = cJSON_GetArraySize(shape);
    if (t->ndim > DS_ST_MAXDIM)
        return ds_seterr(err, DS_ERR_FORMAT, "%s: tensor %s: %d dimensions (max %d)", path, t->name,
                         t->ndim, DS_ST_MAXDIM);
    t->numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        const cJSON *v = cJSON_GetArrayItem(shape, d);
        if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e15 ||
            v->valuedouble != (double)(int64_t)v->valuedouble)
            return ds_seterr(err, DS_ERR_FORMAT, "%s: tensor %s: bad shape entry %d", path, t->name, d);
        t->shape[d] = (int64_t)v->valuedouble;
        if (t->shape[d] && t->numel > INT64_MAX / t->shape[d])
            return ds_seterr(err, DS_ERR_FORMAT, "%s: tensor %s: shape overflows", path, t->name);
        t->numel *= t->shape[d];
    }
    return DS_OK;
}

/* Fills t from one header entry and checks that its bytes lie inside the file. */
static ds_status parse_entry(const cJSON *e, const st_file *f, size_t data_start, ds_st_tensor *t,
                             char *err) {
    const char *path = f->path;
    if (!cJSON_IsObject(e))
        return ds_seterr(err, DS_ERR_FORMAT, "%s: tensor %s: header entry is not an object", path, t->name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    if (!cJSON_IsString(dt))
        return ds_seterr(err, DS_ERR_FORMAT, "%s: tensor %s: missing \"dtype\"", path, t->name);
    int dtype = ds_dtype_parse(dt->valuestring);
    if (dtype < 0)
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "%s: tensor %s: unsupported dtype %s", path, t->name,
                         dt->valuestring);
    t->dtype = (ds_dtype)dtype;
    ds_status st = parse_shape(cJSON_GetObjectItemCaseSensitive(e, "shape"), t, path, err);
    if (st) return st;
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || !cJSON_IsNumber(cJSON_GetArrayItem(off, 0)) ||
        !cJSON_IsNumber(cJSON_GetArrayItem(off, 1)))
        return ds_seterr(err, DS_ERR_FORMAT, "%s: tensor %s: bad \"data_offsets\"", path, t->name);
    double b = cJSON_GetArrayItem(off, 0)->valuedouble, en = cJSON_GetArrayItem(off, 1)->valuedouble;
    size_t avail = f->size - data_start;
    if (b < 0 || en < b || en > (double)avail)
        return ds_seterr(err, DS_ERR_FORMAT,
                         "%s: tensor %s: data_offsets [%.0f, %.0f] outside the file's %zu data bytes "
                         "(truncated file?)", path, t->name, b, en, avail);
    t->nbytes = (size_t)en - (size_t)b;
    if ((double)t->nbytes != (double)t->numel * (double)ds_dtype_size(t->dtype))
        return ds_seterr(err, DS_ERR_FORMAT, "%s: tensor %s: %zu bytes for %lld elements of %s", path,
                         t->name, t->nbytes, (long long)t->numel, ds_dtype_name(t->dtype));
    t->data = (const char *)f->map + data_start + (size_t)b;
    t->file = f->path;
    return DS_OK;
}

static ds_status read_header(const st_file *f, cJSON **root, size_t *data_start, char *err) {
    uint64_t n = 0;
    if (f->size < 8) return ds_seterr(err, DS_ERR_FORMAT, "%s: file too short for a safetensors header", f->path);
    memcpy(&n, f->map, 8);
    if (n > MAX_HEADER_BYTES || n > f->size - 8)
        return ds_seterr(err, DS_ERR_FORMAT, "%s: header length %llu exceeds the file (%zu bytes): truncated or "
                         "not a safetensors file", f->path, (unsigned long long)n, f->size);
    *root = cJSON_ParseWithLength((const char *)f->map + 8, (size_t)n);
    if (!*root || !cJSON_IsObject(*root)) {
        cJSON_Delete(*root);
        *root = NULL;
        return ds_seterr(err, DS_ERR_FORMAT, "%s: header is not a valid JSON object", f->path);
    }
    *data_start = 8 + (size_t)n;
    return DS_OK;
}

/* Appends the tensors of file index fi. If `only` is non-NULL, keeps just the names it maps to this
 * file (index.json weight_map). */
static ds_status add_file_tensors(ds_st_set *s, int fi, const cJSON *only, char *err) {
    const st_file *f = &s->files[fi];
    cJSON *root;
    size_t data_start;
    ds_status st = read_header(f, &root, &data_start, err);
    if (st) return st;
    int n = cJSON_GetArraySize(root);
    s->tensors = ds_xrealloc(s->tensors, sizeof(ds_st_tensor) * (size_t)(s->n_tensors + n));
    for (const cJSON *e = root->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) continue;
        if (only) {
            const cJSON *fname = cJSON_GetObjectItemCaseSensitive(only, e->string);
            const char *base = strrchr(f->path, '/');
            base = base ? base + 1 : f->path;
            if (!cJSON_IsString(fname) || strcmp(fname->valuestring, base) != 0) continue;
        }
        ds_st_tensor *t = &s->tensors[s->n_tensors];
        memset(t, 0, sizeof(*t));
        t->name = ds_xstrdup(e->string);
        s->n_tensors++;
        if ((st = parse_entry(e, f, data_start, t, err))) break;
    }
    cJSON_Delete(root);
    return st;
}

static ds_status finish_set(ds_st_set *s, char *err) {
    qsort(s->tensors, (size_t)s->n_tensors, sizeof(ds_st_tensor), tensor_cmp);
    for (int i = 1; i < s->n_tensors; i++)
        if (strcmp(s->tensors[i - 1].name, s->tensors[i].name) == 0)
            return ds_seterr(err, DS_ERR_FORMAT, "tensor %s appears twice (%s, %s)", s->tensors[i].name,
                             s->tensors[i - 1].file, s->tensors[i].file);
    return DS_OK;
}

static ds_status open_files(ds_st_set *s, char **paths, int n, const cJSON *only, char *err) {
    s->files = ds_xcalloc((size_t)n, sizeof(st_file));
    for (int i = 0; i < n; i++) {
        ds_status st = map_file(paths[i], &s->files[i], err);
        if (st) return st;
        s->n_files++;
        if ((st = add_file_tensors(s, i, only, err))) return st;
    }
    return finish_set(s, err);
}

ds_status ds_st_open_file(const char *path, ds_st_set **out, char *err) {
    ds_st_set *s = ds_xcalloc(1, sizeof(*s));
    char *p = (char *)path;
    ds_status st = open_files(s, &p, 1, NULL, err);
    if (st) { ds_st_close(s); return st; }
    *out = s;
    return DS_OK;
}

/* Collects the distinct shard names of an index's weight_map, each joined to dir. */
static ds_status index_shards(const char *dir, const char *ipath, const cJSON *map, char ***paths, int *n,
                              char *err) {
    if (!cJSON_IsObject(map))
        return ds_seterr(err, DS_ERR_FORMAT, "%s: missing \"weight_map\" object", ipath);
    *paths = NULL;
    *n = 0;
    for (const cJSON *e = map->child; e; e = e->next) {
        if (!cJSON_IsString(e) || strchr(e->valuestring, '/'))
            return ds_seterr(err, DS_ERR_FORMAT, "%s: weight_map entry for %s is not a file name", ipath, e->string);
        char buf[4096];
        snprintf(buf, sizeof buf, "%s/%s", dir, e->valuestring);
        int seen = 0;
        for (int i = 0; i < *n && !seen; i++) seen = strcmp((*paths)[i], buf) == 0;
        if (seen) continue;
        *paths = ds_xrealloc(*paths, sizeof(char *) * (size_t)(*n + 1));
        (*paths)[(*n)++] = ds_xstrdup(buf);
    }
    return DS_OK;
}

static ds_status check_index_complete(const ds_st_set *s, const cJSON *map, const char *ipath, char *err) {
    for (const cJSON *e = map->child; e; e = e->next)
        if (!ds_st_find(s, e->string))
            return ds_seterr(err, DS_ERR_FORMAT, "%s: tensor %s is mapped to %s but that file does not hold it",
                             ipath, e->string, e->valuestring);
    return DS_OK;
}

static ds_status open_index(const char *dir, const char *ipath, ds_st_set *s, char *err) {
    char *text = ds_read_file(ipath, 64u << 20, NULL);
    if (!text) return ds_seterr(err, DS_ERR_IO, "%s: cannot read", ipath);
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root) return ds_seterr(err, DS_ERR_FORMAT, "%s: not valid JSON", ipath);
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    char **paths = NULL;
    int n = 0;
    ds_status st = index_shards(dir, ipath, map, &paths, &n, err);
    if (!st) st = open_files(s, paths, n, map, err);
    if (!st) st = check_index_complete(s, map, ipath, err);
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
    cJSON_Delete(root);
    return st;
}

ds_status ds_st_open_dir(const char *dir, ds_st_set **out, char *err) {
    char ipath[4096], fpath[4096];
    snprintf(ipath, sizeof ipath, "%s/model.safetensors.index.json", dir);
    snprintf(fpath, sizeof fpath, "%s/model.safetensors", dir);
    ds_st_set *s = ds_xcalloc(1, sizeof(*s));
    ds_status st;
    if (access(ipath, F_OK) == 0) {
        st = open_index(dir, ipath, s, err);
    } else if (access(fpath, F_OK) == 0) {
        char *p = fpath;
        st = open_files(s, &p, 1, NULL, err);
    } else {
        st = ds_seterr(err, DS_ERR_IO, "%s: no model.safetensors or model.safetensors.index.json", dir);
    }
    if (st) { ds_st_close(s); return st; }
    *out = s;
    return DS_OK;
}

void ds_st_close(ds_st_set *s) {
    if (!s) return;
    for (int i = 0; i < s->n_tensors; i++) free(s->tensors[i].name);
    free(s->tensors);
    for (int i = 0; i < s->n_files; i++) {
        if (s->files[i].map) munmap(s->files[i].map, s->files[i].size);
        free(s->files[i].path);
    }
    free(s->files);
    free(s);
}

const ds_st_tensor *ds_st_find(const ds_st_set *s, const char *name) {
    ds_st_tensor key = {.name = (char *)name};
    return bsearch(&key, s->tensors, (size_t)s->n_tensors, sizeof(ds_st_tensor), tensor_cmp);
}

int ds_st_count(const ds_st_set *s) { return s->n_tensors; }
const ds_st_tensor *ds_st_at(const ds_st_set *s, int i) { return &s->tensors[i]; }

size_t ds_st_total_bytes(const ds_st_set *s) {
    size_t total = 0;
    for (int i = 0; i < s->n_tensors; i++) total += s->tensors[i].nbytes;
    return total;
}
