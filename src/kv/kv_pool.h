/* The pool of KV pages: which pages are free and who holds the others. Holds no KV data and no GPU
 * code (the data lives in the backend's cache arrays, indexed by page id).
 * Invariant (ds_kv_pool_check): every page is either free (refcount 0, on the free list once) or held
 * (refcount > 0, not on the free list); free + held == total. */
#ifndef DS_KV_POOL_H
#define DS_KV_POOL_H

#include "dsinfer.h"

typedef struct ds_kv_pool ds_kv_pool;

ds_kv_pool *ds_kv_pool_new(int n_pages);
void ds_kv_pool_free(ds_kv_pool *p);
int ds_kv_pool_total(const ds_kv_pool *p);
int ds_kv_pool_free_count(const ds_kv_pool *p);
/* Takes a free page (refcount 1); -1 when none is left. */
int ds_kv_pool_take(ds_kv_pool *p);
void ds_kv_pool_ref(ds_kv_pool *p, int page);
/* Drops a reference; returns 1 when the page became free. */
int ds_kv_pool_unref(ds_kv_pool *p, int page);
int ds_kv_pool_refcount(const ds_kv_pool *p, int page);
/* Verifies the invariant; DS_OK or DS_ERR_FORMAT with what is broken. */
ds_status ds_kv_pool_check(const ds_kv_pool *p, char *err);

#endif
