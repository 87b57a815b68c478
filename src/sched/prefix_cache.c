/* Prefix cache: hash table of full pages (chained through per-page links) plus an LRU list of the
 * pages no sequence uses. Everything is sized once from the pool (arrays indexed by page id). */
#include "sched/prefix_cache.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"

struct pcache {
    sched_kv kv;
    int n_pages, page_size;
    int *bucket;              /* [n_buckets] first page of each hash chain, -1 = empty */
    int n_buckets;            /* power of two */
    int *hnext;               /* [n_pages] next page in the same chain */
    uint64_t *key, *parent;   /* [n_pages] */
    int32_t *tokens;          /* [n_pages, page_size] */
    signed char *cached;      /* [n_pages] 1 if the page is in the cache */
    int *users;               /* [n_pages] sequences using the cached page */
    int *lru_prev, *lru_next; /* [n_pages] LRU list of unused cached pages; head = oldest */
    int lru_head, lru_tail, n_unused, n_cached;
};

pcache *pcache_new(const sched_kv *kv) {
    pcache *c = ds_xcalloc(1, sizeof(*c));
    c->kv = *kv;
    c->n_pages = kv->pages_total(kv->ctx);
    c->page_size = kv->page_size(kv->ctx);
    c->n_buckets = 16;
    while (c->n_buckets < 2 * c->n_pages) c->n_buckets *= 2;
    c->bucket = ds_xmalloc(sizeof(int) * (size_t)c->n_buckets);
    memset(c->bucket, 0xff, sizeof(int) * (size_t)c->n_buckets);
    size_t n = (size_t)c->n_pages;
    c->hnext = ds_xmalloc(sizeof(int) * n);
    c->key = ds_xcalloc(n, sizeof(uint64_t));
    c->parent = ds_xcalloc(n, sizeof(uint64_t));
    c->tokens = ds_xmalloc(sizeof(int32_t) * n * (size_t)c->page_size);
    c->cached = ds_xcalloc(n, 1);
    c->users = ds_xcalloc(n, sizeof(int));
    c->lru_prev = ds_xmalloc(sizeof(int) * n);
    c->lru_next = ds_xmalloc(sizeof(int) * n);
    c->lru_head = c->lru_tail = -1;
    return c;
}

void pcache_free(pcache *c) {
    if (!c) return;
    for (int p = 0; p < c->n_pages; p++)
        if (c->cached[p]) c->kv.page_unref(c->kv.ctx, p);
    free(c->bucket); free(c->hnext); free(c->key); free(c->parent); free(c->tokens);
    free(c->cached); free(c->users); free(c->lru_prev); free(c->lru_next);
    free(c);
}

/* FNV-1a over the parent key and the token ids, then a splitmix finaliser; never 0. */
uint64_t pcache_key(uint64_t parent, const int32_t *tokens, int n) {
    uint64_t h = 0xcbf29ce484222325ull ^ parent;
    for (int i = 0; i < n; i++) {
        uint32_t t = (uint32_t)tokens[i];
        for (int b = 0; b < 4; b++) { h ^= (t >> (8 * b)) & 0xff; h *= 0x100000001b3ull; }
    }
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h ? h : 1;
}

static int bucket_of(const pcache *c, uint64_t key) { return (int)(key & (uint64_t)(c->n_buckets - 1)); }

int pcache_lookup(const pcache *c, uint64_t key, uint64_t parent, const int32_t *tokens) {
    for (int p = c->bucket[bucket_of(c, key)]; p >= 0; p = c->hnext[p])
        if (c->key[p] == key && c->parent[p] == parent &&
            memcmp(c->tokens + (size_t)p * c->page_size, tokens, sizeof(int32_t) * (size_t)c->page_size) == 0)
            return p;
    return -1;
}

static void lru_unlink(pcache *c, int p) {
    if (c->lru_prev[p] >= 0) c->lru_next[c->lru_prev[p]] = c->lru_next[p]; else c->lru_head = c->lru_next[p];
    if (c->lru_next[p] >= 0) c->lru_prev[c->lru_next[p]] = c->lru_prev[p]; else c->lru_tail = c->lru_prev[p];
    c->n_unused--;
}

static void lru_push_tail(pcache *c, int p) {
    c->lru_prev[p] = c->lru_tail;
    c->lru_next[p] = -1;
    if (c->lru_tail >= 0) c->lru_next[c->lru_tail] = p; else c->lru_head = p;
    c->lru_tail = p;
    c->n_unused++;
}

int pcache_insert(pcache *c, int page, uint64_t key, uint64_t parent, const int32_t *tokens) {
    DS_CHECK(page >= 0 && page < c->n_pages);
    if (c->cached[page] || pcache_lookup(c, key, parent, tokens) >= 0) return 0;
    int b = bucket_of(c, key);
    c->hnext[page] = c->bucket[b];
    c->bucket[b] = page;
    c->key[page] = key;
    c->parent[page] = parent;
    memcpy(c->tokens + (size_t)page * c->page_size, tokens, sizeof(int32_t) * (size_t)c->page_size);
    c->cached[page] = 1;
    c->users[page] = 1;
    c->n_cached++;
    c->kv.page_ref(c->kv.ctx, page);
    return 1;
}

int pcache_contains(const pcache *c, int page) { return page >= 0 && page < c->n_pages && c->cached[page]; }
int pcache_users(const pcache *c, int page) { return pcache_contains(c, page) ? c->users[page] : -1; }
int pcache_n_unused(const pcache *c) { return c->n_unused; }
int pcache_n_cached(const pcache *c) { return c->n_cached; }

void pcache_use(pcache *c, int page) {
    DS_CHECK(pcache_contains(c, page));
    if (c->users[page]++ == 0) lru_unlink(c, page);
}

void pcache_release(pcache *c, int page) {
    DS_CHECK(pcache_contains(c, page) && c->users[page] > 0);
    if (--c->users[page] == 0) lru_push_tail(c, page);
}

static void hash_unlink(pcache *c, int page) {
    int *link = &c->bucket[bucket_of(c, c->key[page])];
    while (*link != page) {
        DS_CHECK(*link >= 0);
        link = &c->hnext[*link];
    }
    *link = c->hnext[page];
}

int pcache_evict(pcache *c) {
    int p = c->lru_head;
    if (p < 0) return 0;
    lru_unlink(c, p);
    hash_unlink(c, p);
    c->cached[p] = 0;
    c->n_cached--;
    c->kv.page_unref(c->kv.ctx, p);
    return 1;
}

ds_status pcache_check(const pcache *c, char *err) {
    int n_lru = 0, n_cached = 0;
    for (int p = c->lru_head, prev = -1; p >= 0; prev = p, p = c->lru_next[p], n_lru++) {
        if (n_lru > c->n_pages || !c->cached[p] || c->users[p] != 0 || c->lru_prev[p] != prev)
            return ds_seterr(err, DS_ERR_FORMAT, "prefix cache: LRU list broken at page %d", p);
    }
    for (int p = 0; p < c->n_pages; p++) {
        if (!c->cached[p]) continue;
        n_cached++;
        if (c->users[p] < 0) return ds_seterr(err, DS_ERR_FORMAT, "prefix cache: page %d has %d users", p, c->users[p]);
        if (pcache_lookup(c, c->key[p], c->parent[p], c->tokens + (size_t)p * c->page_size) != p)
            return ds_seterr(err, DS_ERR_FORMAT, "prefix cache: page %d is not found under its key", p);
    }
    if (n_lru != c->n_unused || n_cached != c->n_cached)
        return ds_seterr(err, DS_ERR_FORMAT, "prefix cache: %d unused / %d cached counted, %d / %d recorded", n_lru,
                         n_cached, c->n_unused, c->n_cached);
    int n_zero = 0;
    for (int p = 0; p < c->n_pages; p++) n_zero += c->cached[p] && c->users[p] == 0;
    if (n_zero != n_lru) return ds_seterr(err, DS_ERR_FORMAT, "prefix cache: %d unused pages, %d on the LRU list", n_zero, n_lru);
    return DS_OK;
}
