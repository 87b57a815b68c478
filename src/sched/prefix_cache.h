/* The prefix cache of the scheduler (private to src/sched/): full KV pages keyed by a hash chained
 * over the prefix, with the count of sequences using each, and an LRU list of the unused ones.
 *
 * The cache holds one page reference (sched_kv.page_ref) per cached page. A cached page whose users
 * count is 0 is "unused": only the cache holds it, and pcache_evict may drop it (oldest first).
 * Entries are indexed by page id (a page is cached at most once). Keys are checked against the stored
 * parent key and tokens on lookup, so a hash collision is a miss, never a wrong page. */
#ifndef DS_SCHED_PREFIX_CACHE_H
#define DS_SCHED_PREFIX_CACHE_H

#include <stdint.h>

#include "sched/sched.h"

typedef struct pcache pcache;

pcache *pcache_new(const sched_kv *kv);
/* Drops the cache's reference on every cached page. */
void pcache_free(pcache *c);

/* Key of a page of page_size tokens whose preceding page has key parent (0 for the first page). */
uint64_t pcache_key(uint64_t parent, const int32_t *tokens, int n);
/* Page cached under key with this parent and tokens, or -1. */
int pcache_lookup(const pcache *c, uint64_t key, uint64_t parent, const int32_t *tokens);
/* Caches `page` (full, held by one sequence: users = 1) under key; takes a reference.
 * Returns 0 if key or page is already cached (nothing done). */
int pcache_insert(pcache *c, int page, uint64_t key, uint64_t parent, const int32_t *tokens);
int pcache_contains(const pcache *c, int page);
int pcache_users(const pcache *c, int page);   /* -1 if not cached */
/* A sequence starts / stops using cached page `page`. */
void pcache_use(pcache *c, int page);
void pcache_release(pcache *c, int page);
/* Drops the least recently used unused page; returns 0 when there is none. */
int pcache_evict(pcache *c);
int pcache_n_unused(const pcache *c);
int pcache_n_cached(const pcache *c);
/* Consistency of the entries, the hash chains and the LRU list. */
ds_status pcache_check(const pcache *c, char *err);

#endif
