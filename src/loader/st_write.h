/* Writing safetensors files: the header is written first from the list of tensors (names, dtypes,
 * shapes, in the given order), then each tensor's bytes in that order, so a large checkpoint streams
 * to disk without being held in memory. */
#ifndef DS_LOADER_ST_WRITE_H
#define DS_LOADER_ST_WRITE_H

#include <stdint.h>
#include <stdio.h>

#include "core/dtype.h"
#include "dsinfer.h"

typedef struct {
    const char *name;
    ds_dtype dtype;        /* a safetensors dtype (not DS_DTYPE_NVFP4) */
    int ndim;              /* 0 = scalar */
    int64_t shape[4];
} ds_st_entry;

typedef struct {
    FILE *f;
    const char *path;
    size_t expected, written;   /* data bytes */
} ds_st_writer;

/* Creates path and writes the header for entries[0:n]. */
ds_status ds_st_write_begin(ds_st_writer *w, const char *path, const ds_st_entry *entries, int n, char *err);
/* Appends the next bytes of tensor data (tensors in entry order, each exactly its size). */
ds_status ds_st_write_data(ds_st_writer *w, const void *data, size_t n, char *err);
/* Closes the file; fails if fewer bytes were written than the header promised. */
ds_status ds_st_write_end(ds_st_writer *w, char *err);

size_t ds_st_entry_bytes(const ds_st_entry *e);

#endif
