/* The scheduler against a mock page pool and a mock "model" (no engine): continuous batching with
 * chunked prefill, preemption by recompute, the prefix cache and its LRU eviction, aborts, and the
 * page invariant checked after every step of every scenario.
 *
 * The mock model's next token is a hash of the whole context as read back from the KV pages, so a page
 * shared wrongly, freed too early (pages are poisoned with -1 when freed) or written twice changes the
 * output, which is compared with the same hash over the request's own token list. */
#include <stdint.h>
#include <string.h>

#include "core/status.h"
#include "sched/sched.h"
#include "testutil.h"

#define VOCAB 50

/* ---- mock page pool and sequences ------------------------------------------------------------ */
typedef struct {
    int n_pages, ps;
    int *ref;
    int *stack, n_free;
    int32_t *content;   /* [n_pages * ps]; -1 = poisoned (free) */
} mock_pool;

typedef struct { int *pages; int n_pages, len; } mock_seq;

static int m_page_size(void *c) { return ((mock_pool *)c)->ps; }
static int m_pages_total(void *c) { return ((mock_pool *)c)->n_pages; }
static int m_pages_free(void *c) { return ((mock_pool *)c)->n_free; }
static int m_page_refcount(void *c, int p) { return ((mock_pool *)c)->ref[p]; }
static void m_page_ref(void *c, int p) { mock_pool *m = c; DS_CHECK(m->ref[p] > 0); m->ref[p]++; }

static void m_page_unref(void *c, int p) {
    mock_pool *m = c;
    DS_CHECK(m->ref[p] > 0);
    if (--m->ref[p]) return;
    for (int i = 0; i < m->ps; i++) m->content[(size_t)p * m->ps + i] = -1;
    m->stack[m->n_free++] = p;
}

static void *m_seq_new(void *c) {
    mock_pool *m = c;
    mock_seq *s = calloc(1, sizeof(*s));
    s->pages = calloc((size_t)m->n_pages + 1, sizeof(int));
    return s;
}

static void m_seq_free(void *c, void *sv) {
    mock_seq *s = sv;
    for (int i = 0; i < s->n_pages; i++) m_page_unref(c, s->pages[i]);
    free(s->pages);
    free(s);
}

static int m_seq_len(void *c, void *s) { (void)c; return ((mock_seq *)s)->len; }
static int m_seq_n_pages(void *c, void *s) { (void)c; return ((mock_seq *)s)->n_pages; }
static int m_seq_page(void *c, void *s, int i) { (void)c; return ((mock_seq *)s)->pages[i]; }

static int m_seq_adopt(void *c, void *sv, const int *pages, int n) {
    mock_pool *m = c;
    mock_seq *s = sv;
    if (s->len) return -1;
    for (int i = 0; i < n; i++) {
        if (m->ref[pages[i]] <= 0) return -1;
        m->ref[pages[i]]++;
        s->pages[i] = pages[i];
    }
    s->n_pages = n;
    s->len = n * m->ps;
    return 0;
}

static mock_pool *mock_new(int n_pages, int ps) {
    mock_pool *m = calloc(1, sizeof(*m));
    m->n_pages = n_pages;
    m->ps = ps;
    m->ref = calloc((size_t)n_pages, sizeof(int));
    m->stack = calloc((size_t)n_pages, sizeof(int));
    m->content = malloc(sizeof(int32_t) * (size_t)n_pages * ps);
    for (int i = 0; i < n_pages * ps; i++) m->content[i] = -1;
    for (int i = 0; i < n_pages; i++) m->stack[i] = n_pages - 1 - i;
    m->n_free = n_pages;
    return m;
}

static void mock_destroy(mock_pool *m) { free(m->ref); free(m->stack); free(m->content); free(m); }

static sched_kv mock_kv(mock_pool *m) {
    return (sched_kv){.ctx = m, .page_size = m_page_size, .pages_total = m_pages_total, .pages_free = m_pages_free,
                      .page_ref = m_page_ref, .page_unref = m_page_unref, .page_refcount = m_page_refcount,
                      .seq_new = m_seq_new, .seq_free = m_seq_free, .seq_len = m_seq_len,
                      .seq_n_pages = m_seq_n_pages, .seq_page = m_seq_page, .seq_adopt = m_seq_adopt};
}

/* Appends tokens to the sequence as the engine's forward would; a page that is not free when needed
 * is a scheduler bug (it must reserve every page a step opens). Returns -1 then. */
static int mock_forward(mock_pool *m, mock_seq *s, const int32_t *tok, int n) {
    for (int i = 0; i < n; i++) {
        if (s->len % m->ps == 0) {
            if (m->n_free == 0) return -1;
            int p = m->stack[--m->n_free];
            m->ref[p] = 1;
            s->pages[s->n_pages++] = p;
        }
        int p = s->pages[s->len / m->ps];
        DS_CHECK(m->ref[p] == 1);   /* a page written to must not be shared */
        m->content[(size_t)p * m->ps + s->len % m->ps] = tok[i];
        s->len++;
    }
    return 0;
}

static int32_t model_next(const int32_t *ctx, int n) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) {
        if (ctx[i] < 0) return -1;
        h = (h ^ (uint64_t)ctx[i]) * 1099511628211ull;
    }
    return (int32_t)((h >> 20) % VOCAB);
}

/* The model reads its context back from the pages. */
static int32_t model_from_pages(const mock_pool *m, const mock_seq *s, int32_t *buf) {
    for (int i = 0; i < s->len; i++) buf[i] = m->content[(size_t)s->pages[i / m->ps] * m->ps + i % m->ps];
    return model_next(buf, s->len);
}

/* ---- scenario driver ------------------------------------------------------------------------- */
typedef struct {
    int32_t prompt[96];
    int n_prompt, max_new, abort_at_step;
    sched_req *r;
    int done, generated;
} job;

typedef struct {
    int steps, max_step_tokens, mixed_steps, n_preempted;
    uint64_t hits;
} run_stats;

static void check_ok(sched *s, const char *where) {
    char err[DS_ERRLEN];
    ds_status st = sched_check(s, err);
    CHECKF(st == DS_OK, "%s: %s", where, err);
}

/* Runs one step: forward every item, then sample and finish. Returns 0, or -1 on a scheduler bug. */
static int run_step(sched *s, mock_pool *m, sched_batch *b, run_stats *rs) {
    int32_t buf[512];
    int decodes = 0, chunks = 0;
    for (int i = 0; i < b->n_items; i++) {
        sched_item *it = &b->items[i];
        CHECK(it->req->state == SCHED_RUNNING && it->start == it->req->n_computed);
        if (mock_forward(m, it->req->seq, it->req->tokens + it->start, it->n)) return -1;
        decodes += it->n == 1 && it->start >= it->req->n_prompt;
        chunks += it->start < it->req->n_prompt;
    }
    rs->mixed_steps += decodes && chunks;
    sched_step_done(s, b);
    for (int i = 0; i < b->n_items; i++) {
        sched_item *it = &b->items[i];
        if (!it->sample) continue;
        job *j = it->req->user;
        int32_t got = model_from_pages(m, it->req->seq, buf);
        int32_t want = model_next(it->req->tokens, it->req->n_tokens);
        CHECKF(got == want, "request %llu: token %d from the pages, %d expected", (unsigned long long)it->req->id, got, want);
        sched_append(s, it->req, want);
        if (++j->generated == j->max_new) {
            sched_finish(s, it->req);
            j->done = 1;
        }
    }
    return 0;
}

/* Adds the jobs (all at step `arrive`), runs until all are done, checking after every step. */
static void run_jobs(sched *s, mock_pool *m, job *jobs, int n_jobs, run_stats *rs, const char *name) {
    memset(rs, 0, sizeof(*rs));
    for (int i = 0; i < n_jobs; i++) jobs[i].r = sched_add(s, jobs[i].prompt, jobs[i].n_prompt, &jobs[i]);
    sched_batch b;
    for (int step = 0; sched_has_work(s) && step < 100000; step++) {
        for (int i = 0; i < n_jobs; i++)
            if (!jobs[i].done && jobs[i].abort_at_step == step + 1) { sched_finish(s, jobs[i].r); jobs[i].done = 1; }
        if (!sched_schedule(s, &b)) {
            CHECKF(!sched_has_work(s) || b.stuck, "%s: nothing scheduled with work left", name);
            if (b.stuck) { ((job *)b.stuck->user)->done = 2; sched_finish(s, b.stuck); }
            continue;
        }
        rs->steps++;
        rs->n_preempted += b.n_preempted;
        if (b.n_tokens > rs->max_step_tokens) rs->max_step_tokens = b.n_tokens;
        CHECKF(run_step(s, m, &b, rs) == 0, "%s: step %d opened a page the scheduler did not reserve", name, step);
        check_ok(s, name);
        if (test_failures) return;
    }
    for (int i = 0; i < n_jobs; i++) CHECKF(jobs[i].done, "%s: job %d not done", name, i);
    sched_stats st;
    sched_get_stats(s, &st);
    rs->hits = st.prefix_hits;
    CHECKF(st.pages_used == 0 && st.n_running == 0 && st.n_waiting == 0, "%s: %d pages used at the end", name,
           st.pages_used);
    check_ok(s, name);
}

static sched *new_sched(mock_pool *m, int seqs, int budget, int caching) {
    sched_config cfg = {.max_num_seqs = seqs, .max_num_batched_tokens = budget, .enable_prefix_caching = caching};
    sched_kv kv = mock_kv(m);
    sched *s = NULL;
    char err[DS_ERRLEN];
    DS_CHECK(sched_new(&cfg, &kv, &s, err) == DS_OK);
    return s;
}

static void fill(job *j, int n, int max_new, int seed) {
    memset(j, 0, sizeof(*j));
    j->n_prompt = n;
    j->max_new = max_new;
    for (int i = 0; i < n; i++) j->prompt[i] = (seed * 7 + i * 13) % VOCAB;
}

/* ---- scenarios ------------------------------------------------------------------------------- */
static void test_mixed_batching(void) {
    mock_pool *m = mock_new(64, 4);
    sched *s = new_sched(m, 4, 8, 1);
    job jobs[3];
    fill(&jobs[0], 3, 12, 1); fill(&jobs[1], 40, 4, 2); fill(&jobs[2], 5, 6, 3);
    run_stats rs;
    run_jobs(s, m, jobs, 3, &rs, "mixed");
    CHECKF(rs.max_step_tokens <= 8, "a step of %d tokens > budget 8", rs.max_step_tokens);
    CHECKF(rs.mixed_steps > 0, "no step mixed decode tokens with a prefill chunk");
    sched_free(s);
    CHECK(m->n_free == 64);
    mock_destroy(m);
}

static void test_max_num_seqs(void) {
    mock_pool *m = mock_new(256, 4);
    sched *s = new_sched(m, 2, 64, 0);
    job jobs[5];
    for (int i = 0; i < 5; i++) fill(&jobs[i], 5 + i, 3, i);
    for (int i = 0; i < 5; i++) jobs[i].r = sched_add(s, jobs[i].prompt, jobs[i].n_prompt, &jobs[i]);
    sched_batch b;
    CHECK(sched_schedule(s, &b) == 2);
    sched_stats st;
    sched_get_stats(s, &st);
    CHECK(st.n_running == 2 && st.n_waiting == 3);
    for (int i = 0; i < 5; i++) sched_finish(s, jobs[i].r);   /* aborts before the forward */
    check_ok(s, "max_num_seqs");
    sched_free(s);
    CHECK(m->n_free == 256);
    mock_destroy(m);
}

static void test_preemption(void) {
    mock_pool *m = mock_new(8, 4);
    sched *s = new_sched(m, 8, 64, 0);
    job jobs[5];
    for (int i = 0; i < 5; i++) fill(&jobs[i], 6, 10, i);   /* 16 tokens = 4 pages each, 8 pages in all */
    run_stats rs;
    run_jobs(s, m, jobs, 5, &rs, "preemption");
    CHECKF(rs.n_preempted > 0, "no preemption with 5 x 4 pages in an 8-page pool");
    sched_free(s);
    mock_destroy(m);
}

static void test_prefix_cache(void) {
    mock_pool *m = mock_new(32, 4);
    sched *s = new_sched(m, 4, 64, 1);
    job a, b2, c;
    fill(&a, 20, 2, 5);
    run_stats rs;
    run_jobs(s, m, &a, 1, &rs, "prefix-a");
    sched_stats st;
    sched_get_stats(s, &st);
    CHECKF(st.pages_cached == 5, "%d pages cached after a 22-token request, 5 expected", st.pages_cached);
    fill(&b2, 20, 2, 5);
    b2.prompt[18] = 49;   /* same first 4 pages, different 5th page */
    run_jobs(s, m, &b2, 1, &rs, "prefix-b");
    CHECKF(rs.hits == 16, "%llu tokens hit, 16 expected", (unsigned long long)rs.hits);
    fill(&c, 20, 2, 5);   /* identical prompt: all but the last token's page may come from the cache */
    run_jobs(s, m, &c, 1, &rs, "prefix-c");
    CHECKF(rs.hits == 32, "%llu tokens hit in all, 32 expected", (unsigned long long)rs.hits);
    /* pressure: requests that need the whole pool evict the cached pages */
    job big[2];
    fill(&big[0], 60, 4, 9); fill(&big[1], 60, 4, 11);
    run_jobs(s, m, big, 2, &rs, "prefix-evict");
    sched_free(s);
    CHECK(m->n_free == 32);
    mock_destroy(m);
}

static void test_no_prefix_caching(void) {
    mock_pool *m = mock_new(32, 4);
    sched *s = new_sched(m, 4, 64, 0);
    job a[2];
    fill(&a[0], 20, 2, 5); fill(&a[1], 20, 2, 5);
    run_stats rs;
    run_jobs(s, m, a, 2, &rs, "no-cache");
    sched_stats st;
    sched_get_stats(s, &st);
    CHECK(rs.hits == 0 && st.pages_cached == 0 && st.pages_free == 32);
    sched_free(s);
    mock_destroy(m);
}

static void test_stuck(void) {
    mock_pool *m = mock_new(4, 4);
    sched *s = new_sched(m, 4, 64, 1);
    job j;
    fill(&j, 40, 1, 1);   /* 10 pages > 4 */
    run_stats rs;
    run_jobs(s, m, &j, 1, &rs, "stuck");
    CHECK(j.done == 2);
    sched_free(s);
    mock_destroy(m);
}

static uint64_t rng_state = 12345;
static int rnd(int n) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (int)((rng_state >> 33) % (uint64_t)n);
}

/* Random prompts over few shared prefixes, random lengths, pools, budgets and aborts. */
static void test_random(void) {
    for (int round = 0; round < 40 && !test_failures; round++) {
        int ps = 1 + rnd(8), n_pages = 24 + rnd(64);
        mock_pool *m = mock_new(n_pages, ps);
        sched *s = new_sched(m, 1 + rnd(12), 1 + rnd(48), rnd(4) != 0);
        job jobs[24];
        int n_jobs = 1 + rnd(24);
        for (int i = 0; i < n_jobs; i++) {
            int n = 1 + rnd(40), max_new = 1 + rnd(20);
            while (sched_pages_for(s, n + max_new) > n_pages) n /= 2, max_new = max_new / 2 + 1;
            fill(&jobs[i], n ? n : 1, max_new, rnd(3));
            for (int t = rnd(n + 1); t < jobs[i].n_prompt; t++) jobs[i].prompt[t] = rnd(VOCAB);
            jobs[i].abort_at_step = rnd(5) == 0 ? 1 + rnd(30) : 0;
        }
        run_stats rs;
        char name[32];
        snprintf(name, sizeof name, "random round %d", round);
        run_jobs(s, m, jobs, n_jobs, &rs, name);
        sched_free(s);
        CHECKF(m->n_free == n_pages, "%s: %d of %d pages free after sched_free", name, m->n_free, n_pages);
        mock_destroy(m);
    }
}

int main(void) {
    test_mixed_batching();
    test_max_num_seqs();
    test_preemption();
    test_prefix_cache();
    test_no_prefix_caching();
    test_stuck();
    test_random();
    return test_result("test_sched");
}
