/* The adaptive decode batch limit: a feedback controller that keeps the per-token latency under a
 * service level by changing how many requests may run at once.
 *
 * It reads no clock: the caller passes the time of each observation (seconds, any monotonic origin)
 * with the observed per-token latency (the duration of a step that produced decode tokens) and the
 * number of running requests, and gets back the limit. The unit test drives it with a fake clock.
 *
 * Windows: a window opens at the previous decision (or at the first observation, and again at the
 * first observation after an idle gap longer than `interval`) and closes at the first observation at
 * least `interval` later; then the controller decides on the window's observations.
 *
 * Rule (additive-increase / multiplicative-decrease, once per window):
 *   - the mean latency of the window is over the SLO       -> limit = max(min, floor(limit * decrease)),
 *     and at least one less;
 *   - it is under headroom * SLO and the limit was reached
 *     (running >= limit at some step of the window)          -> limit = min(max, limit + max(1, limit / 4));
 *   - otherwise (between the two, or the limit did not bind) -> unchanged.
 * A window with no observations (an idle server) changes nothing. With slo <= 0 the controller is off
 * and the limit stays at max. The limit never leaves [min_limit, max_limit]. */
#ifndef DS_SCHED_ADAPTIVE_H
#define DS_SCHED_ADAPTIVE_H

#include <stdint.h>

typedef struct {
    int min_limit, max_limit;  /* bounds, 1 <= min_limit <= max_limit (max: --max-num-seqs) */
    double slo;                /* per-token latency target, seconds; <= 0: off */
    double interval;           /* seconds between decisions (> 0) */
    double headroom;           /* raise only under headroom * slo (0 < headroom <= 1) */
    double decrease;           /* multiplicative decrease (0 < decrease < 1) */
} adapt_config;

typedef struct {
    adapt_config cfg;
    int limit;
    double window_start;       /* when the window opened; < 0: before the first observation */
    double sum;                /* latencies observed in the window */
    int n;
    int saturated;             /* running >= limit at some observation of the window */
    double last_mean;          /* mean latency of the last decided window, -1 before */
    uint64_t n_windows, n_lowered, n_raised;   /* decisions taken, and those that moved the limit */
} adapt_ctl;

/* Fills defaults for what is 0 (interval 0.5 s, headroom 0.8, decrease 0.75, min 1), clamps the rest;
 * the limit starts at max_limit. */
void adapt_init(adapt_ctl *c, const adapt_config *cfg);
/* One observation at time `now`: a step's per-token latency (seconds) with `running` requests in the
 * batch. Returns the limit to apply from now on. */
int adapt_observe(adapt_ctl *c, double now, double latency, int running);
int adapt_limit(const adapt_ctl *c);

#endif
