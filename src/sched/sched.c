/* The scheduler (contract in sched.h). Sections: queues, page accounting (reserve, free, preempt),
 * admission with prefix-cache lookup, step planning, and the integrity check. */
#include "sched/sched.h"

#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "sched/prefix_cache.h"

typedef struct { sched_req *head, *tail; int n; } req_list;

struct sched {
    sched_config cfg;
    sched_kv kv;
    int page_size, n_pages;
    pcache *cache;             /* NULL when prefix caching is off */
    req_list waiting, running;
    sched_item *items;         /* [max_num_seqs] */
    int seq_limit;             /* admission limit, 1..max_num_seqs */
    uint64_t next_id, prefix_queries, prefix_hits, n_preemptions;
    int *scratch;              /* [n_pages] for sched_check and adoption */
};

/* ---- queues ---------------------------------------------------------------------------------- */
static void list_remove(req_list *l, sched_req *r) {
    if (r->prev) r->prev->next = r->next; else l->head = r->next;
    if (r->next) r->next->prev = r->prev; else l->tail = r->prev;
    r->prev = r->next = NULL;
    l->n--;
}

static void list_push_back(req_list *l, sched_req *r) {
    r->next = NULL;
    r->prev = l->tail;
    if (l->tail) l->tail->next = r; else l->head = r;
    l->tail = r;
    l->n++;
}

static void list_push_front(req_list *l, sched_req *r) {
    r->prev = NULL;
    r->next = l->head;
    if (l->head) l->head->prev = r; else l->tail = r;
    l->head = r;
    l->n++;
}

ds_status sched_new(const sched_config *cfg, const sched_kv *kv, sched **out, char *err) {
    *out = NULL;
    if (cfg->max_num_seqs <= 0 || cfg->max_num_batched_tokens <= 0)
        return ds_seterr(err, DS_ERR_ARG, "max_num_seqs (%d) and max_num_batched_tokens (%d) must be positive",
                         cfg->max_num_seqs, cfg->max_num_batched_tokens);
    sched *s = ds_xcalloc(1, sizeof(*s));
    s->cfg = *cfg;
    s->kv = *kv;
    s->page_size = kv->page_size(kv->ctx);
    s->n_pages = kv->pages_total(kv->ctx);
    if (cfg->enable_prefix_caching) s->cache = pcache_new(kv);
    s->items = ds_xcalloc((size_t)cfg->max_num_seqs, sizeof(sched_item));
    s->scratch = ds_xcalloc((size_t)s->n_pages + 1, sizeof(int));
    s->next_id = 1;
    s->seq_limit = cfg->max_num_seqs;
    *out = s;
    return DS_OK;
}

int sched_pages_for(const sched *s, int n_tokens) { return (n_tokens + s->page_size - 1) / s->page_size; }
int sched_has_work(const sched *s) { return s->waiting.n + s->running.n > 0; }
int sched_seq_limit(const sched *s) { return s->seq_limit; }

void sched_set_seq_limit(sched *s, int limit) {
    s->seq_limit = limit < 1 ? 1 : limit > s->cfg.max_num_seqs ? s->cfg.max_num_seqs : limit;
}

sched_req *sched_add(sched *s, const int32_t *prompt, int n, void *user) {
    DS_CHECK(n >= 1);
    sched_req *r = ds_xcalloc(1, sizeof(*r));
    r->id = s->next_id++;
    r->cap_tokens = n + 16;
    r->tokens = ds_xmalloc(sizeof(int32_t) * (size_t)r->cap_tokens);
    memcpy(r->tokens, prompt, sizeof(int32_t) * (size_t)n);
    r->n_tokens = r->n_prompt = n;
    r->user = user;
    r->state = SCHED_WAITING;
    list_push_back(&s->waiting, r);
    return r;
}

void sched_append(sched *s, sched_req *r, int32_t token) {
    (void)s;
    DS_CHECK(r->state == SCHED_RUNNING && r->n_computed == r->n_tokens);
    if (r->n_tokens == r->cap_tokens) {
        r->cap_tokens *= 2;
        r->tokens = ds_xrealloc(r->tokens, sizeof(int32_t) * (size_t)r->cap_tokens);
    }
    r->tokens[r->n_tokens++] = token;
}

/* ---- page accounting ------------------------------------------------------------------------- */
/* Key of the request's i-th full page of tokens (computed once, in order). */
static uint64_t page_key(sched_req *r, int i, int page_size) {
    while (r->n_hashes <= i) {
        int j = r->n_hashes;
        DS_CHECK((j + 1) * page_size <= r->n_tokens);
        if (r->n_hashes == r->cap_hashes) {
            r->cap_hashes = r->cap_hashes ? 2 * r->cap_hashes : 8;
            r->hashes = ds_xrealloc(r->hashes, sizeof(uint64_t) * (size_t)r->cap_hashes);
        }
        r->hashes[j] = pcache_key(j ? r->hashes[j - 1] : 0, r->tokens + (size_t)j * page_size, page_size);
        r->n_hashes++;
    }
    return r->hashes[i];
}

/* Makes at least `need` pages free, evicting unused cached pages; 0 if impossible. */
static int ensure_free(sched *s, int need) {
    while (s->kv.pages_free(s->kv.ctx) < need)
        if (!s->cache || !pcache_evict(s->cache)) return 0;
    return 1;
}

/* Frees the request's sequence; its cached pages become unused (last page first, so the tail of a
 * prefix is evicted before its head). */
static void drop_seq(sched *s, sched_req *r) {
    if (!r->seq) return;
    int n = s->kv.seq_n_pages(s->kv.ctx, r->seq);
    if (s->cache)
        for (int i = n - 1; i >= 0; i--) {
            int p = s->kv.seq_page(s->kv.ctx, r->seq, i);
            if (pcache_contains(s->cache, p) && i < r->n_offered) pcache_release(s->cache, p);
        }
    s->kv.seq_free(s->kv.ctx, r->seq);
    r->seq = NULL;
    r->n_computed = 0;
    r->n_offered = 0;
}

static void preempt(sched *s, sched_req *r) {
    DS_CHECK(r->state == SCHED_RUNNING);
    list_remove(&s->running, r);
    drop_seq(s, r);
    r->state = SCHED_WAITING;
    r->n_preemptions++;
    s->n_preemptions++;
    list_push_front(&s->waiting, r);
}

void sched_finish(sched *s, sched_req *r) {
    drop_seq(s, r);
    list_remove(r->state == SCHED_RUNNING ? &s->running : &s->waiting, r);
    free(r->tokens);
    free(r->hashes);
    free(r);
}

/* Offers the request's full, computed pages to the prefix cache. A page whose key is cached already
 * (another request computed the same prefix) stays private to this request. */
static void offer_pages(sched *s, sched_req *r) {
    if (!s->cache || !r->seq) return;
    int full = r->n_computed / s->page_size;
    for (int i = r->n_offered; i < full; i++) {
        uint64_t key = page_key(r, i, s->page_size);
        int p = s->kv.seq_page(s->kv.ctx, r->seq, i);
        if (!pcache_insert(s->cache, p, key, i ? r->hashes[i - 1] : 0, r->tokens + (size_t)i * s->page_size)) {
            r->n_offered = i;   /* a private page: later pages cannot be offered either */
            return;
        }
    }
    r->n_offered = full;
}

/* ---- admission ------------------------------------------------------------------------------- */
/* Gives a waiting request a sequence holding the longest cached run of its leading pages (at most
 * (n_tokens - 1) / page_size pages, so that one token is left to compute). */
static void adopt_cached(sched *s, sched_req *r) {
    r->seq = s->kv.seq_new(s->kv.ctx);
    r->n_cached = 0;
    if (!s->cache) return;
    int max_pages = (r->n_tokens - 1) / s->page_size, k = 0;
    for (; k < max_pages; k++) {
        uint64_t key = page_key(r, k, s->page_size);
        int p = pcache_lookup(s->cache, key, k ? r->hashes[k - 1] : 0, r->tokens + (size_t)k * s->page_size);
        if (p < 0) break;
        s->scratch[k] = p;
    }
    s->prefix_queries += (uint64_t)r->n_tokens;
    if (k == 0) return;
    DS_CHECK(s->kv.seq_adopt(s->kv.ctx, r->seq, s->scratch, k) == 0);
    for (int i = 0; i < k; i++) pcache_use(s->cache, s->scratch[i]);
    r->n_computed = k * s->page_size;
    r->n_offered = k;
    r->n_cached = k * s->page_size;
    s->prefix_hits += (uint64_t)r->n_cached;
}

/* ---- step planning --------------------------------------------------------------------------- */
static void add_item(sched *s, sched_batch *b, sched_req *r, int n) {
    DS_CHECK(b->n_items < s->cfg.max_num_seqs);
    s->items[b->n_items++] = (sched_item){.req = r, .start = r->n_computed, .n = n,
                                          .sample = r->n_computed + n == r->n_tokens};
    b->n_tokens += n;
}

/* New pages the request opens if it computes n more tokens. */
static int pages_needed(const sched *s, const sched_req *r, int n) {
    return sched_pages_for(s, r->n_computed + n) - s->kv.seq_n_pages(s->kv.ctx, r->seq);
}

/* Running requests, oldest first: each gets its remaining tokens within the budget; when pages run
 * short the newest running request is preempted (possibly r itself). Returns the pages reserved. */
static int plan_running(sched *s, sched_batch *b, int *budget) {
    int reserved = 0;
    sched_req *r = s->running.head;
    while (r && *budget > 0) {
        int n = r->n_tokens - r->n_computed;
        if (n > *budget) n = *budget;
        DS_CHECK(n >= 1);
        int need = pages_needed(s, r, n), self_preempted = 0;
        while (!self_preempted && !ensure_free(s, reserved + need)) {
            sched_req *victim = s->running.tail;   /* the newest; never one scheduled already */
            self_preempted = victim == r;
            preempt(s, victim);
            b->n_preempted++;
        }
        if (self_preempted) break;   /* r was the newest: nothing after it is left to schedule */
        reserved += need;
        add_item(s, b, r, n);
        *budget -= n;
        r = r->next;
    }
    return reserved;
}

/* Waiting requests, in order, while a sequence slot (under the limit), budget and pages allow. */
static void plan_waiting(sched *s, sched_batch *b, int *budget, int reserved) {
    while (s->waiting.head && *budget > 0 && s->running.n < s->seq_limit) {
        sched_req *r = s->waiting.head;
        adopt_cached(s, r);
        int n = r->n_tokens - r->n_computed;
        if (n > *budget) n = *budget;
        int need = pages_needed(s, r, n);
        if (!ensure_free(s, reserved + need)) {
            s->prefix_queries -= (uint64_t)r->n_tokens;   /* not admitted: this lookup does not count */
            s->prefix_hits -= (uint64_t)r->n_cached;
            drop_seq(s, r);
            if (s->running.n == 0 && b->n_items == 0) b->stuck = r;
            return;
        }
        reserved += need;
        list_remove(&s->waiting, r);
        r->state = SCHED_RUNNING;
        list_push_back(&s->running, r);
        add_item(s, b, r, n);
        *budget -= n;
    }
}

int sched_schedule(sched *s, sched_batch *b) {
    memset(b, 0, sizeof(*b));
    b->items = s->items;
    int budget = s->cfg.max_num_batched_tokens;
    int reserved = plan_running(s, b, &budget);
    if (b->n_preempted == 0) plan_waiting(s, b, &budget, reserved);
    return b->n_items;
}

void sched_step_done(sched *s, const sched_batch *b) {
    for (int i = 0; i < b->n_items; i++) {
        sched_req *r = b->items[i].req;
        r->n_computed += b->items[i].n;
        DS_CHECK(s->kv.seq_len(s->kv.ctx, r->seq) == r->n_computed);
        offer_pages(s, r);
    }
}

/* ---- stats and integrity --------------------------------------------------------------------- */
void sched_get_stats(const sched *s, sched_stats *st) {
    memset(st, 0, sizeof(*st));
    st->n_running = s->running.n;
    st->n_waiting = s->waiting.n;
    st->pages_total = s->n_pages;
    st->pages_free = s->kv.pages_free(s->kv.ctx);
    st->pages_cached = s->cache ? pcache_n_unused(s->cache) : 0;
    st->pages_used = st->pages_total - st->pages_free - st->pages_cached;
    st->prefix_queries = s->prefix_queries;
    st->prefix_hits = s->prefix_hits;
    st->n_preemptions = s->n_preemptions;
    st->seq_limit = s->seq_limit;
}

static ds_status check_queues(const sched *s, char *err) {
    int n = 0;
    for (const sched_req *r = s->waiting.head; r; r = r->next, n++)
        if (r->state != SCHED_WAITING || r->seq || r->n_computed)
            return ds_seterr(err, DS_ERR_FORMAT, "sched: waiting request %llu holds a sequence", (unsigned long long)r->id);
    if (n != s->waiting.n) return ds_seterr(err, DS_ERR_FORMAT, "sched: waiting queue length %d != %d", n, s->waiting.n);
    n = 0;
    for (const sched_req *r = s->running.head; r; r = r->next, n++) {
        if (r->state != SCHED_RUNNING || !r->seq || s->kv.seq_len(s->kv.ctx, r->seq) != r->n_computed ||
            s->kv.seq_n_pages(s->kv.ctx, r->seq) != sched_pages_for(s, r->n_computed) || r->n_computed > r->n_tokens)
            return ds_seterr(err, DS_ERR_FORMAT, "sched: running request %llu: sequence out of step",
                             (unsigned long long)r->id);
    }
    if (n != s->running.n) return ds_seterr(err, DS_ERR_FORMAT, "sched: running queue length %d != %d", n, s->running.n);
    if (s->running.n > s->cfg.max_num_seqs) return ds_seterr(err, DS_ERR_FORMAT, "sched: %d running > max_num_seqs", n);
    return DS_OK;
}

/* Every page's reference count equals its holders (sequences + cache); free + used + cached == total. */
static ds_status check_pages(const sched *s, char *err) {
    int *seq_refs = s->scratch;
    memset(seq_refs, 0, sizeof(int) * (size_t)s->n_pages);
    for (const sched_req *r = s->running.head; r; r = r->next)
        for (int i = 0; i < s->kv.seq_n_pages(s->kv.ctx, r->seq); i++) seq_refs[s->kv.seq_page(s->kv.ctx, r->seq, i)]++;
    int used = 0, cached = 0;
    for (int p = 0; p < s->n_pages; p++) {
        int in_cache = s->cache && pcache_contains(s->cache, p);
        if (s->kv.page_refcount(s->kv.ctx, p) != seq_refs[p] + in_cache)
            return ds_seterr(err, DS_ERR_FORMAT, "page %d: refcount %d, held by %d sequences%s", p,
                             s->kv.page_refcount(s->kv.ctx, p), seq_refs[p], in_cache ? " and the cache" : "");
        if (in_cache && pcache_users(s->cache, p) != seq_refs[p])
            return ds_seterr(err, DS_ERR_FORMAT, "page %d: %d cache users, held by %d sequences", p,
                             pcache_users(s->cache, p), seq_refs[p]);
        used += seq_refs[p] > 0;
        cached += in_cache && seq_refs[p] == 0;
    }
    int free_pages = s->kv.pages_free(s->kv.ctx);
    if (free_pages + used + cached != s->n_pages)
        return ds_seterr(err, DS_ERR_FORMAT, "page pool: free %d + used %d + cached %d != total %d", free_pages, used,
                         cached, s->n_pages);
    if (s->cache && cached != pcache_n_unused(s->cache))
        return ds_seterr(err, DS_ERR_FORMAT, "prefix cache: %d cache-only pages, %d recorded unused", cached,
                         pcache_n_unused(s->cache));
    return DS_OK;
}

ds_status sched_check(const sched *s, char *err) {
    ds_status st = check_queues(s, err);
    if (!st && s->cache) st = pcache_check(s->cache, err);
    if (!st) st = check_pages(s, err);
    return st;
}

void sched_free(sched *s) {
    if (!s) return;
    while (s->running.head) sched_finish(s, s->running.head);
    while (s->waiting.head) sched_finish(s, s->waiting.head);
    pcache_free(s->cache);
    free(s->items);
    free(s->scratch);
    free(s);
}
