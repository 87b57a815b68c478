#include "kv/kv_pool.h"

#include <stdlib.h>

#include "core/status.h"

struct ds_kv_pool {
    int n;          /* total pages */
    int *ref;       /* [n] reference counts */
    int *free_list; /* stack of free page ids */
    int n_free;
};

ds_kv_pool *ds_kv_pool_new(int n_pages) {
    ds_kv_pool *p = ds_xcalloc(1, sizeof(*p));
    p->n = n_pages;
    p->ref = ds_xcalloc((size_t)n_pages, sizeof(int));
    p->free_list = ds_xmalloc((size_t)n_pages * sizeof(int) + 1);
    /* pushed in reverse so that pages are handed out in increasing order */
    for (int i = 0; i < n_pages; i++) p->free_list[i] = n_pages - 1 - i;
    p->n_free = n_pages;
    return p;
}

void ds_kv_pool_free(ds_kv_pool *p) {
    if (!p) return;
    free(p->ref);
    free(p->free_list);
    free(p);
}

int ds_kv_pool_total(const ds_kv_pool *p) { return p->n; }
int ds_kv_pool_free_count(const ds_kv_pool *p) { return p->n_free; }

int ds_kv_pool_take(ds_kv_pool *p) {
    if (p->n_free == 0) return -1;
    int page = p->free_list[--p->n_free];
    DS_CHECK(p->ref[page] == 0);
    p->ref[page] = 1;
    return page;
}

void ds_kv_pool_ref(ds_kv_pool *p, int page) {
    DS_CHECK(page >= 0 && page < p->n && p->ref[page] > 0);
    p->ref[page]++;
}

int ds_kv_pool_unref(ds_kv_pool *p, int page) {
    DS_CHECK(page >= 0 && page < p->n && p->ref[page] > 0);
    if (--p->ref[page]) return 0;
    p->free_list[p->n_free++] = page;
    return 1;
}

int ds_kv_pool_refcount(const ds_kv_pool *p, int page) { return p->ref[page]; }

ds_status ds_kv_pool_check(const ds_kv_pool *p, char *err) {
    char *seen = ds_xcalloc((size_t)p->n + 1, 1);
    ds_status st = DS_OK;
    for (int i = 0; i < p->n_free && !st; i++) {
        int page = p->free_list[i];
        if (page < 0 || page >= p->n) st = ds_seterr(err, DS_ERR_FORMAT, "free list holds bad page id %d", page);
        else if (seen[page]++) st = ds_seterr(err, DS_ERR_FORMAT, "page %d is on the free list twice", page);
        else if (p->ref[page]) st = ds_seterr(err, DS_ERR_FORMAT, "free page %d has refcount %d", page, p->ref[page]);
    }
    int held = 0;
    for (int i = 0; i < p->n && !st; i++) {
        if (p->ref[i] < 0) st = ds_seterr(err, DS_ERR_FORMAT, "page %d has refcount %d", i, p->ref[i]);
        else if (p->ref[i] > 0) held++;
        else if (!seen[i]) st = ds_seterr(err, DS_ERR_FORMAT, "page %d is neither held nor free (leaked)", i);
    }
    if (!st && held + p->n_free != p->n)
        st = ds_seterr(err, DS_ERR_FORMAT, "held %d + free %d != total %d", held, p->n_free, p->n);
    free(seen);
    return st;
}
