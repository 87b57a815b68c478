/* A small on-disk table of tuned choices (issue 7: cuBLASLt algorithms searched once per GEMM shape,
 * cached on disk). No CUDA here: the CUDA backend (cuda_lt_tune.cu) decides what a key and its values
 * mean; this file only keeps them and reads / writes the text file.
 *
 * File format (text, one entry a line, '#' lines are comments):
 *   # dsinfer tune cache v1
 *   <key> <v0> .. <v{DS_TUNE_NV-1}> <us>
 * key: printable, no spaces, at most DS_TUNE_KEY-1 bytes; v: signed 64-bit integers; us: the measured time
 * (microseconds, > 0). The file is rewritten whole (a temporary file renamed over it), so a reader never
 * sees half of it. */
#ifndef DS_CORE_TUNE_CACHE_H
#define DS_CORE_TUNE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define DS_TUNE_NV 9
#define DS_TUNE_KEY 96

typedef struct {
    char key[DS_TUNE_KEY];
    int64_t v[DS_TUNE_NV];
    double us;
} ds_tune_entry;

typedef struct {
    ds_tune_entry *e;
    int n, cap;
    char path[512];   /* where load read from and save writes to; "" = memory only */
} ds_tune_cache;

/* Default file for a device tag (e.g. "NVIDIA-H200-132sm-cublasLt130100"): $DSINFER_CACHE_DIR, else
 * $XDG_CACHE_HOME/dsinfer, else $HOME/.cache/dsinfer, then "/<what>-<tag>.txt". Characters of the tag
 * outside [A-Za-z0-9._-] become '-'. Fails (DS_ERR_ARG) when no directory is known or the path is too long. */
ds_status ds_tune_cache_path(char *out, size_t n, const char *what, const char *tag, char *err);

/* Reads path into c (c is reset first and remembers path for save). A missing file is an empty table
 * (DS_OK). A malformed line fails with DS_ERR_FORMAT naming the file and line; c is then empty. */
ds_status ds_tune_cache_load(ds_tune_cache *c, const char *path, char *err);

/* The entry for key, or NULL. */
const ds_tune_entry *ds_tune_cache_find(const ds_tune_cache *c, const char *key);

/* Adds or replaces key's entry. DS_ERR_ARG for a key that is empty, too long or holds a space or a
 * non-printable byte, or for us <= 0 (nothing is stored). */
ds_status ds_tune_cache_put(ds_tune_cache *c, const char *key, const int64_t v[DS_TUNE_NV], double us, char *err);

/* Writes the table to c->path (its directory made if missing), through a temporary file and rename. */
ds_status ds_tune_cache_save(const ds_tune_cache *c, char *err);

void ds_tune_cache_free(ds_tune_cache *c);

#endif
