/* safetensors files, mmapped: one file, or a sharded set named by model.safetensors.index.json.
 *
 * Every header entry is validated when the file is opened (known dtype, shape, data_offsets inside
 * the file and equal to shape x element size), so a tensor handed out is always safe to read. */
#ifndef DS_LOADER_SAFETENSORS_H
#define DS_LOADER_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "dsinfer.h"

#define DS_ST_MAXDIM 8

typedef struct {
    char *name;
    ds_dtype dtype;
    int ndim;
    int64_t shape[DS_ST_MAXDIM];
    int64_t numel;
    const void *data;      /* inside the file's mapping */
    size_t nbytes;
    const char *file;      /* path of the file that holds it */
} ds_st_tensor;

typedef struct ds_st_set ds_st_set;

/* Opens `dir`/model.safetensors.index.json with its shards if present, else `dir`/model.safetensors. */
ds_status ds_st_open_dir(const char *dir, ds_st_set **out, char *err);
/* Opens one .safetensors file. */
ds_status ds_st_open_file(const char *path, ds_st_set **out, char *err);
void ds_st_close(ds_st_set *set);

const ds_st_tensor *ds_st_find(const ds_st_set *set, const char *name);
int ds_st_count(const ds_st_set *set);
const ds_st_tensor *ds_st_at(const ds_st_set *set, int i);
/* Total bytes of tensor data over all files. */
size_t ds_st_total_bytes(const ds_st_set *set);

#endif
