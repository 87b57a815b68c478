/* The adaptive decode batch limit (src/sched/adaptive.c) under a deterministic fake clock, and the
 * scheduler honouring the limit it is given.
 *
 * The fake clock is a counter the test advances by a fixed step per observation (as a real server
 * observes one latency per step); latencies come from a scripted load or a seeded generator, so every
 * run takes the same decisions. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "sched/adaptive.h"
#include "sched/sched.h"
#include "testutil.h"

/* ---- fake clock ------------------------------------------------------------------------------ */
typedef struct { double t, dt; } fake_clock;
static double tick(fake_clock *c) { return c->t += c->dt; }

/* Feeds `n` observations of `lat` with `running` requests, one per clock tick; returns the limit. */
static int feed(adapt_ctl *a, fake_clock *clk, int n, double lat, int running) {
    int lim = adapt_limit(a);
    for (int i = 0; i < n; i++) lim = adapt_observe(a, tick(clk), lat, running);
    return lim;
}

/* Feeds observations until `k` more windows were decided; returns the limit. */
static int windows(adapt_ctl *a, fake_clock *clk, int k, double lat, int running) {
    uint64_t target = a->n_windows + (uint64_t)k;
    int lim = adapt_limit(a);
    for (int i = 0; i < 100000 && a->n_windows < target; i++) lim = adapt_observe(a, tick(clk), lat, running);
    CHECK(a->n_windows == target);
    return lim;
}

static adapt_config cfg_of(int min, int max, double slo) {
    return (adapt_config){.min_limit = min, .max_limit = max, .slo = slo, .interval = 0.5, .headroom = 0.8, .decrease = 0.75};
}

/* Over the SLO the limit falls, window by window, to the floor and stays there. Windows follow the
 * clock: with a tick of 1/8 s and an interval of 1/2 s the first window takes 5 observations (it
 * opens at the first), the next ones 4. */
static void test_lowers(void) {
    adapt_ctl a;
    adapt_config k = cfg_of(2, 64, 0.050);
    adapt_init(&a, &k);
    fake_clock clk = {0, 0.125};
    CHECK(adapt_limit(&a) == 64);
    CHECK(feed(&a, &clk, 4, 0.080, 64) == 64);   /* the window is not over yet */
    CHECK(feed(&a, &clk, 1, 0.080, 64) == 48);   /* 64 * 0.75 */
    CHECK(feed(&a, &clk, 3, 0.080, 48) == 48);
    CHECK(feed(&a, &clk, 1, 0.080, 48) == 36);
    int prev = 36;
    for (int w = 0; w < 20; w++) {
        int lim = windows(&a, &clk, 1, 0.080, prev);
        CHECKF(lim < prev || lim == 2, "window %d: %d after %d", w, lim, prev);
        CHECK(lim >= 2);
        prev = lim;
    }
    CHECK(prev == 2);
    CHECK(a.n_lowered >= 8);
    /* small limits still move: floor(3 * 0.75) = 2, then floor(2 * 0.75) = 1 */
    adapt_config k1 = cfg_of(1, 3, 0.050);
    adapt_init(&a, &k1);
    CHECK(windows(&a, &clk, 1, 0.5, 3) == 2);
    CHECK(windows(&a, &clk, 1, 0.5, 2) == 1);
    CHECK(windows(&a, &clk, 5, 0.5, 1) == 1);
}

/* Under headroom * SLO with the limit binding, the limit climbs back to the ceiling and stays. */
static void test_raises(void) {
    adapt_ctl a;
    adapt_config k = cfg_of(1, 32, 0.050);
    adapt_init(&a, &k);
    fake_clock clk = {100, 0.125};
    CHECK(windows(&a, &clk, 30, 0.2, 32) == 1);
    int prev = 1, n = 0;
    while (prev < 32 && n < 100) {
        int lim = windows(&a, &clk, 1, 0.010, prev);   /* fast steps, running at the limit */
        CHECKF(lim > prev, "window %d: %d after %d", n, lim, prev);
        prev = lim;
        n++;
    }
    CHECK(prev == 32);
    CHECKF(n == 14, "took %d windows to climb back (1 2 3 4 5 6 7 8 10 12 15 18 22 27 32)", n);
    CHECK(windows(&a, &clk, 10, 0.010, 32) == 32);   /* never past the ceiling */
    CHECK(a.n_raised == 14);
}

/* Headroom alone does not raise a limit that does not bind; latency between headroom * SLO and the
 * SLO holds it; an idle gap opens a fresh window; slo <= 0 is off; bad bounds are clamped. */
static void test_holds(void) {
    adapt_ctl a;
    adapt_config k = cfg_of(1, 16, 0.050);
    adapt_init(&a, &k);
    fake_clock clk = {0, 0.125};
    CHECK(windows(&a, &clk, 4, 0.1, 16) == 4);    /* 16 -> 12 -> 9 -> 6 -> 4 */
    adapt_init(&a, &k);
    CHECK(windows(&a, &clk, 2, 0.1, 16) == 9);
    CHECK(windows(&a, &clk, 10, 0.001, 3) == 9);   /* only 3 running under a limit of 9: no raise */
    CHECK(windows(&a, &clk, 10, 0.045, 9) == 9);   /* 0.045 is in [0.8 * slo, slo]: hold */
    CHECK(a.last_mean > 0.044 && a.last_mean < 0.046);
    clk.t += 3600;                                 /* an hour idle: the next window opens now */
    uint64_t w = a.n_windows;
    CHECK(feed(&a, &clk, 4, 0.5, 9) == 9 && a.n_windows == w);
    CHECK(feed(&a, &clk, 1, 0.5, 9) == 6 && a.n_windows == w + 1);
    adapt_config off = cfg_of(1, 16, 0);
    adapt_init(&a, &off);
    CHECK(feed(&a, &clk, 100, 10.0, 16) == 16 && a.n_windows == 0);
    adapt_config bad = {.min_limit = 50, .max_limit = 8, .slo = 0.01};   /* min > max: clamped; defaults filled */
    adapt_init(&a, &bad);
    CHECK(a.cfg.min_limit == 8 && a.cfg.max_limit == 8 && a.cfg.interval == 0.5 && a.cfg.decrease == 0.75);
    CHECK(windows(&a, &clk, 5, 1.0, 8) == 8);
}

/* A seeded random load with clock steps of random size (zero included): the limit never leaves its
 * bounds. Then a slow phase and a fast one: the limit follows the load. */
static void test_bounds_random(void) {
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int trial = 0; trial < 50; trial++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int max = 1 + (int)((s >> 33) % 300), min = 1 + (int)((s >> 45) % (uint64_t)max);
        adapt_ctl a;
        adapt_config k = cfg_of(min, max, 0.001 + (double)((s >> 20) % 100) / 1000);
        adapt_init(&a, &k);
        fake_clock clk = {0, 0};
        for (int i = 0; i < 5000; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            clk.t += (double)((s >> 40) % 1000) / 2000;                 /* 0 .. 0.5 s */
            double lat = k.slo * (double)((s >> 20) % 400) / 100;        /* 0 .. 4 x slo */
            int running = (int)((s >> 30) % (uint64_t)(max + 5));
            int lim = adapt_observe(&a, clk.t, lat, running);
            if (lim < min || lim > max) {
                CHECKF(0, "trial %d step %d: limit %d outside [%d, %d]", trial, i, lim, min, max);
                break;
            }
        }
        CHECK(a.n_windows > 100);
    }
    adapt_ctl a;
    adapt_config k = cfg_of(1, 128, 0.020);
    adapt_init(&a, &k);
    fake_clock clk = {0, 0.02};
    int slow = windows(&a, &clk, 20, 0.040, 128);
    int fast = slow;
    for (int i = 0; i < 40; i++) fast = windows(&a, &clk, 1, 0.005, fast);
    CHECKF(slow == 1 && fast == 128, "slow phase %d, fast phase %d", slow, fast);
}

/* ---- the scheduler honours the limit --------------------------------------------------------- */
/* A pool that never runs short: enough pages for every request of the test. */
typedef struct { int n_pages, n_free, *ref; } pool;
typedef struct { int pages[64], n_pages, len; } seq;
static pool P;
static int p_ps(void *c) { (void)c; return 4; }
static int p_total(void *c) { return ((pool *)c)->n_pages; }
static int p_free(void *c) { return ((pool *)c)->n_free; }
static int p_refc(void *c, int p) { return ((pool *)c)->ref[p]; }
static void p_ref(void *c, int p) { ((pool *)c)->ref[p]++; }
static void p_unref(void *c, int p) { pool *m = c; if (--m->ref[p] == 0) m->n_free++; }
static void *s_new(void *c) { (void)c; return calloc(1, sizeof(seq)); }
static void s_free(void *c, void *s) { seq *q = s; for (int i = 0; i < q->n_pages; i++) p_unref(c, q->pages[i]); free(q); }
static int s_len(void *c, void *s) { (void)c; return ((seq *)s)->len; }
static int s_np(void *c, void *s) { (void)c; return ((seq *)s)->n_pages; }
static int s_page(void *c, void *s, int i) { (void)c; return ((seq *)s)->pages[i]; }
static int s_adopt(void *c, void *s, const int *p, int n) { (void)c; (void)s; (void)p; (void)n; return -1; }

/* The forward: every item's tokens go into its sequence, opening pages as needed. */
static void fake_forward(const sched_batch *b) {
    for (int i = 0; i < b->n_items; i++) {
        seq *q = b->items[i].req->seq;
        q->len += b->items[i].n;
        while (q->n_pages * 4 < q->len) {
            int p = 0;
            while (P.ref[p]) p++;
            P.ref[p] = 1;
            P.n_free--;
            q->pages[q->n_pages++] = p;
        }
    }
}

static void test_sched_limit(void) {
    P = (pool){.n_pages = 1024, .n_free = 1024, .ref = calloc(1024, sizeof(int))};
    sched_kv kv = {.ctx = &P, .page_size = p_ps, .pages_total = p_total, .pages_free = p_free, .page_ref = p_ref,
                   .page_unref = p_unref, .page_refcount = p_refc, .seq_new = s_new, .seq_free = s_free,
                   .seq_len = s_len, .seq_n_pages = s_np, .seq_page = s_page, .seq_adopt = s_adopt};
    sched_config sc = {.max_num_seqs = 8, .max_num_batched_tokens = 1000, .enable_prefix_caching = 0};
    sched *s;
    char err[DS_ERRLEN];
    CHECK(sched_new(&sc, &kv, &s, err) == DS_OK);
    CHECK(sched_seq_limit(s) == 8);
    int32_t prompt[3] = {1, 2, 3};
    sched_req *r[12];
    for (int i = 0; i < 12; i++) r[i] = sched_add(s, prompt, 3, NULL);
    sched_set_seq_limit(s, 3);
    sched_batch b;
    CHECK(sched_schedule(s, &b) == 3);
    fake_forward(&b);
    sched_step_done(s, &b);
    sched_stats st;
    sched_get_stats(s, &st);
    CHECK(st.n_running == 3 && st.n_waiting == 9 && st.seq_limit == 3);
    for (int i = 0; i < 3; i++) sched_append(s, r[i], 5);
    sched_set_seq_limit(s, 1);   /* lowered below what runs: nothing is preempted, nothing admitted */
    CHECK(sched_schedule(s, &b) == 3 && b.n_preempted == 0);
    fake_forward(&b);
    sched_step_done(s, &b);
    sched_finish(s, r[0]);
    sched_finish(s, r[1]);
    sched_append(s, r[2], 6);
    CHECK(sched_schedule(s, &b) == 1);   /* r[2] alone: one runs under a limit of 1 */
    fake_forward(&b);
    sched_step_done(s, &b);
    sched_set_seq_limit(s, 100);   /* clamped to max_num_seqs */
    CHECK(sched_seq_limit(s) == 8);
    sched_append(s, r[2], 7);
    CHECK(sched_schedule(s, &b) == 8);   /* r[2] and 7 admitted */
    sched_set_seq_limit(s, 0);
    CHECK(sched_seq_limit(s) == 1);
    CHECK(sched_check(s, err) == DS_OK);
    sched_free(s);
    CHECK(P.n_free == 1024);
    free(P.ref);
}

int main(void) {
    test_lowers();
    test_raises();
    test_holds();
    test_bounds_random();
    test_sched_limit();
    return test_result("test_adaptive");
}
