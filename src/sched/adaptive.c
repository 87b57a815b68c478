/* The adaptive decode batch limit (contract and rule in adaptive.h). Plain arithmetic, no clock. */
#include "sched/adaptive.h"

#include <string.h>

void adapt_init(adapt_ctl *c, const adapt_config *cfg) {
    memset(c, 0, sizeof(*c));
    c->cfg = *cfg;
    adapt_config *k = &c->cfg;
    if (k->max_limit < 1) k->max_limit = 1;
    if (k->min_limit < 1) k->min_limit = 1;
    if (k->min_limit > k->max_limit) k->min_limit = k->max_limit;
    if (!(k->interval > 0)) k->interval = 0.5;
    if (!(k->headroom > 0 && k->headroom <= 1)) k->headroom = 0.8;
    if (!(k->decrease > 0 && k->decrease < 1)) k->decrease = 0.75;
    c->limit = k->max_limit;
    c->window_start = -1;
    c->last_mean = -1;
}

int adapt_limit(const adapt_ctl *c) { return c->limit; }

/* The window is over: decide, then start a new one. */
static void decide(adapt_ctl *c, double now) {
    const adapt_config *k = &c->cfg;
    double mean = c->sum / c->n;
    c->last_mean = mean;
    if (mean > k->slo) {
        int next = (int)(c->limit * k->decrease);
        if (next >= c->limit) next = c->limit - 1;
        if (next < k->min_limit) next = k->min_limit;
        if (next < c->limit) c->n_lowered++;
        c->limit = next;
    } else if (mean < k->headroom * k->slo && c->saturated) {
        int step = c->limit / 4 > 1 ? c->limit / 4 : 1;
        int next = c->limit > k->max_limit - step ? k->max_limit : c->limit + step;
        if (next > c->limit) c->n_raised++;
        c->limit = next;
    }
    c->n_windows++;
    c->window_start = now;
    c->sum = 0;
    c->n = 0;
    c->saturated = 0;
}

int adapt_observe(adapt_ctl *c, double now, double latency, int running) {
    if (!(c->cfg.slo > 0) || !(latency >= 0)) return c->limit;
    if (c->n == 0 && (c->window_start < 0 || now - c->window_start > c->cfg.interval)) c->window_start = now;
    c->sum += latency;
    c->n++;
    if (running >= c->limit) c->saturated = 1;
    if (now - c->window_start >= c->cfg.interval) decide(c, now);
    return c->limit;
}
