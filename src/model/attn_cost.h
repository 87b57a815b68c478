/* Which MLA form a sequence's step attends in, by measured cost (issue 8).
 *
 * The two forms (spec 6.2, 6.3) do different work for T new tokens over a context of L:
 *   naive:    decompress K and V of all L context tokens, attend with head dims dqk / dv;
 *   absorbed: fold W_UK into the queries and W_UV into the outputs, attend over the latent rows.
 * ds_attn_macs_* count their multiply-adds. How fast each form runs those differs by backend and shape
 * (GEMM-shaped decompression vs. the latent attention kernel), so at engine open the backend runs both
 * forms at two (T, L) points and a line time = fixed + per_mac * macs is fitted per form; a step takes
 * the form with the smaller predicted time. Without a measurement (opts.attn_no_measure) the rates
 * are equal and fixed costs zero: the multiply-add model alone. */
#ifndef DS_MODEL_ATTN_COST_H
#define DS_MODEL_ATTN_COST_H

#include "core/status.h"
#include "loader/config.h"

typedef struct ds_engine ds_engine;

typedef struct {
    double naive_fixed, naive_per_mac;   /* seconds, seconds per multiply-add */
    double abs_fixed, abs_per_mac;
    int measured;                        /* 0: the multiply-add model alone */
} ds_attn_cost;

double ds_attn_macs_naive(const ds_config *c, double T, double L);
double ds_attn_macs_absorbed(const ds_config *c, double T, double L);
/* The multiply-add model alone (equal rates, no fixed costs). */
ds_attn_cost ds_attn_cost_model_only(void);
/* Predicted seconds of each form for T new tokens over a context of L. */
double ds_attn_cost_naive(const ds_attn_cost *m, const ds_config *c, double T, double L);
double ds_attn_cost_absorbed(const ds_attn_cost *m, const ds_config *c, double T, double L);
/* 1 when the absorbed form is predicted cheaper (T = 1 always is: one token decompressing the whole
 * context is never the better deal). */
int ds_attn_prefers_absorbed(const ds_attn_cost *m, const ds_config *c, int T, int L);
/* Times both forms on e's backend (one layer's attention op, KV pages taken from the pool and given
 * back, inputs NaN-filled: the timing does not depend on values) and fits *out. Needs the pool to have
 * the pages of a 512-token context (else a shorter one); returns an error only if it has none free. */
ds_status ds_attn_cost_measure(ds_engine *e, ds_attn_cost *out, char *err);

#endif
