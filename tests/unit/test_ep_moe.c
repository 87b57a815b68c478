/* Expert parallelism (issue 10) on the CPU: the MoE block split over R ranks (threads, dist/comm_local.c)
 * with dist/ep_moe.c gives the single-rank MoE's output (be->moe) for every token, on the fixtures'
 * MoE layers (sigmoid + noaux_tc, softmax greedy, group-limited):
 *  - R = 1, 2, 3, 4; tokens split unevenly, one rank with no tokens at all (it still serves experts);
 *  - redundant replicas of hot experts (placement from a skewed load), so one expert runs on two ranks;
 *  - every output element a number, NMSE against the reference within fp32 reordering (1e-12);
 *  - FP8 dispatch (rows travel as e4m3 records): equal to a reference computed here that routes on x and
 *    feeds the experts the FP8-rounded rows; its distance to the fp32 MoE is printed and bounded;
 *  - the W8A8 experts' CPU emulation (DSINFER_MOE_W8A8=1) against a reference built from the same records.
 * The same code runs the CUDA backend over NCCL (dist/comm_nccl.cu); that run needs two GPUs. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "dist/ep_moe.h"
#include "golden.h"
#include "model/engine.h"
#include "testutil.h"

typedef struct {
    ds_comm_local_group *g;
    const ds_ep_placement *pl;
    const ds_config *cfg;
    const ds_layer_weights *L;
    const float *x;    /* this rank's rows */
    float *out;
    int rank, M, fp8;
    ds_status st;
    char err[DS_ERRLEN];
} rank_job;

/* The CPU backend sizes its scratch in set_batch: a plain batch of n tokens. */
static void prime(ds_backend *be, int n) {
    int32_t z[1] = {0}, start[2] = {0, n}, ctx[1] = {n};
    int32_t *tok = calloc((size_t)(n > 0 ? n : 1), sizeof(int32_t)), *pos = calloc((size_t)(n > 0 ? n : 1), sizeof(int32_t));
    for (int i = 0; i < n; i++) pos[i] = i;
    ds_batch_meta b = {.n_tokens = n, .n_seqs = 1, .tokens = tok, .positions = pos, .seq_start = start, .seq_ctx = ctx,
                       .page_table = z, .pt_stride = 1, .page_size = n > 0 ? n : 1};
    char err[DS_ERRLEN];
    CHECK(be->set_batch(be, &b, err) == DS_OK);
    free(tok);
    free(pos);
}

static void *rank_main(void *arg) {
    rank_job *j = arg;
    ds_backend *be = ds_backend_cpu_new(j->cfg, 1);
    prime(be, j->M);
    ds_comm *cm = ds_comm_local_new(j->g, j->rank);
    ds_ep_ws *ws = calloc(1, sizeof *ws);   /* a workspace, used twice: the second call reuses it */
    ws->be = be;
    ds_ep ep = {cm, j->pl, j->fp8, ws};
    j->st = ds_ep_moe(&ep, be, j->out, j->x, j->L, j->M, j->err);
    if (!j->st) j->st = ds_ep_moe(&ep, be, j->out, j->x, j->L, j->M, j->err);
    ds_ep_ws_free(ws);
    cm->destroy(cm);
    be->destroy(be);
    return NULL;
}

/* One split: R ranks with counts[r] tokens each (sum = M), placement with `red` redundant slots. */
static void run_split(const char *name, const ds_config *cfg, const ds_layer_weights *L, const float *x,
                      const float *ref, int M, int R, const int *counts, int red, int fp8) {
    int E = cfg->n_routed_experts, D = cfg->hidden_size;
    double *load = malloc(sizeof(double) * E);
    for (int e = 0; e < E; e++) load[e] = e == 0 ? 8.0 : e == 1 ? 4.0 : 1.0;   /* experts 0, 1 hot */
    ds_ep_placement pl;
    char err[DS_ERRLEN];
    CHECKF(ds_ep_place(E, R, red, red ? load : NULL, &pl, err) == DS_OK, "%s", err);
    ds_comm_local_group *g = ds_comm_local_group_new(R);
    rank_job *jobs = calloc((size_t)R, sizeof *jobs);
    pthread_t *th = calloc((size_t)R, sizeof *th);
    float *out = malloc(sizeof(float) * ((size_t)M * D + 1));
    for (size_t i = 0; i < (size_t)M * D; i++) out[i] = NAN;
    int off = 0;
    for (int r = 0; r < R; r++) {
        jobs[r] = (rank_job){g, &pl, cfg, L, x + (size_t)off * D, out + (size_t)off * D, r, counts[r], fp8, DS_OK, ""};
        off += counts[r];
        pthread_create(&th[r], NULL, rank_main, &jobs[r]);
    }
    for (int r = 0; r < R; r++) {
        pthread_join(th[r], NULL);
        CHECKF(jobs[r].st == DS_OK, "%s rank %d: %s", name, r, jobs[r].err);
    }
    double num = 0, den = 0;
    size_t nan_n = 0;
    for (size_t i = 0; i < (size_t)M * D; i++) {
        if (isnan(out[i])) { nan_n++; continue; }
        double e = (double)out[i] - ref[i];
        num += e * e;
        den += (double)ref[i] * ref[i];
    }
    int replicated = 0;
    for (int e = 0; e < E; e++) replicated += pl.n_replicas[e] > 1;
    printf("  %-14s %s R=%d tokens", name, fp8 ? "fp8 " : "fp32", R);
    for (int r = 0; r < R; r++) printf(" %d", counts[r]);
    printf(", %d experts replicated: nmse %.2e, %zu NaN\n", replicated, num / (den > 0 ? den : 1), nan_n);
    CHECKF(nan_n == 0 && num <= 1e-12 * den, "%s R=%d: nmse %g, %zu NaN", name, R, num / den, nan_n);
    if (red) CHECKF(replicated > 0, "%s: no expert replicated with %d redundant slots", name, red);
    free(out);
    free(jobs);
    free(th);
    free(load);
    ds_comm_local_group_free(g);
    ds_ep_placement_free(&pl);
}

/* The fixture's engine (CPU, one thread) and its first MoE layer in *L; NULL (a failed check) when it has none. */
static ds_engine *open_moe_fixture(const char *fx, const ds_layer_weights **L) {
    char dir[512], err[DS_ERRLEN];
    snprintf(dir, sizeof dir, "%s/%s", fixtures_dir(), fx);
    ds_engine *e = NULL;
    ds_engine_opts o = {.n_threads = 1, .attn_no_measure = 1};
    CHECKF(ds_engine_open(dir, &o, &e, err) == DS_OK, "%s", err);
    if (!e) return NULL;
    *L = NULL;
    for (int l = 0; l < e->cfg.num_layers && !*L; l++)
        if (e->w.layers[l].is_moe) *L = &e->w.layers[l];
    CHECKF(*L != NULL, "%s: no MoE layer", fx);
    if (!*L) { ds_engine_free(e); return NULL; }
    return e;
}

/* n values uniform in [-1, 1) from a fixed LCG seed */
static float *rand_values(size_t n, uint64_t z) {
    float *x = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) {
        z = z * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(z >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
    }
    return x;
}

/* Each of the M tokens' top-K experts (ids [M, K]) and weights (w [M, K]): router logits on be, ds_route_token. */
static void route_tokens(ds_backend *be, const ds_config *c, const ds_layer_weights *L, const float *x, int M, int32_t *ids,
                         float *w) {
    int E = c->n_routed_experts, K = c->num_experts_per_tok;
    float *lg = malloc(sizeof(float) * (size_t)M * E), *bias = malloc(sizeof(float) * E), *scr = malloc(sizeof(float) * 2 * E);
    be->linear(be, lg, x, &L->router, M);
    if (L->router_bias.data) ds_weight_row_f32(&L->router_bias, 0, bias);
    for (int m = 0; m < M; m++)
        ds_route_token(c, lg + (size_t)m * E, L->router_bias.data ? bias : NULL, ids + (size_t)m * K, w + (size_t)m * K, scr);
    free(lg); free(bias); free(scr);
}

/* The MoE with FP8 dispatch computed directly: routing (router logits, ds_route_token) on x, the routed
 * experts on x's rows rounded through an FP8 record (quant/dequant_rows_fp8), the shared experts on x,
 * contributions added in ascending expert order after the shared ones (as cpu_moe and combine_rows). */
static void ref_fp8_dispatch(const ds_config *c, const ds_layer_weights *L, const float *x, int M, float *out) {
    int E = c->n_routed_experts, K = c->num_experts_per_tok, D = c->hidden_size;
    ds_backend *be = ds_backend_cpu_new(c, 1);
    prime(be, M);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)M * K);
    float *w = malloc(sizeof(float) * (size_t)M * K), *xq = malloc(sizeof(float) * (size_t)M * D);
    unsigned char *rec = malloc(DS_FP8_ROW_BYTES(D) * (size_t)M);
    float *xin = malloc(sizeof(float) * (size_t)M * D), *y = malloc(sizeof(float) * (size_t)M * D);
    int32_t *rows = malloc(sizeof(int32_t) * (size_t)M);
    float *rw = malloc(sizeof(float) * (size_t)M);
    route_tokens(be, c, L, x, M, ids, w);
    be->quant_rows_fp8(be, rec, x, M, D);
    be->dequant_rows_fp8(be, xq, rec, M, D);
    if (c->n_shared_experts) be->mlp(be, out, x, &L->sh_gate, &L->sh_up, &L->sh_down, M);
    else memset(out, 0, sizeof(float) * (size_t)M * D);
    for (int e = 0; e < E; e++) {
        int n = 0;
        for (int m = 0; m < M; m++)
            for (int k = 0; k < K; k++)
                if (ids[(size_t)m * K + k] == e) { rows[n] = m; rw[n++] = w[(size_t)m * K + k]; }
        if (!n) continue;
        be->gather_rows(be, xin, xq, rows, n, D);
        be->mlp(be, y, xin, &L->exp_gate[e], &L->exp_up[e], &L->exp_down[e], n);
        for (int i = 0; i < n; i++)
            for (int d = 0; d < D; d++) out[(size_t)rows[i] * D + d] += rw[i] * y[(size_t)i * D + d];
    }
    be->destroy(be);
    free(ids); free(w); free(xq); free(rec); free(xin); free(y); free(rows); free(rw);
}

static void check_fixture(const char *fx) {
    const ds_layer_weights *L = NULL;
    ds_engine *e = open_moe_fixture(fx, &L);
    if (!e) return;
    const ds_config *c = &e->cfg;
    int M = 37, D = c->hidden_size;
    float *x = rand_values((size_t)M * D, 0x1234), *ref = malloc(sizeof(float) * (size_t)M * D);
    ds_backend *be = ds_backend_cpu_new(c, 1);
    prime(be, M);
    be->moe(be, ref, x, L, M);
    be->destroy(be);
    int c1[] = {37}, c2[] = {20, 17}, c3[] = {30, 0, 7}, c4[] = {5, 11, 1, 20};
    run_split(fx, c, L, x, ref, M, 1, c1, 0, 0);
    run_split(fx, c, L, x, ref, M, 2, c2, 0, 0);
    run_split(fx, c, L, x, ref, M, 3, c3, 0, 0);
    run_split(fx, c, L, x, ref, M, 4, c4, 1, 0);
    run_split(fx, c, L, x, ref, M, 2, c2, 2, 0);
    float *ref8 = malloc(sizeof(float) * (size_t)M * D);
    ref_fp8_dispatch(c, L, x, M, ref8);
    double num = 0, den = 0;
    for (size_t i = 0; i < (size_t)M * D; i++) {
        num += ((double)ref8[i] - ref[i]) * ((double)ref8[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    printf("  %-14s FP8 dispatch moves the MoE output by nmse %.2e against fp32 rows\n", fx, num / den);
    CHECKF(num > 0 && num <= 1e-2 * den, "%s: FP8 dispatch nmse %g (expected small and non-zero)", fx, num / den);
    run_split(fx, c, L, x, ref8, M, 1, c1, 0, 1);
    run_split(fx, c, L, x, ref8, M, 3, c3, 0, 1);
    run_split(fx, c, L, x, ref8, M, 4, c4, 1, 1);
    free(ref8);
    free(x);
    free(ref);
    ds_engine_free(e);
}

/* W8A8 experts emulated on the CPU (DSINFER_MOE_W8A8=1 at backend creation, cpu_moe.c cpu_act_fp8): be->moe
 * against a reference computed here through the FP8 records of the dispatch path (quant/dequant_rows_fp8,
 * the same rule written apart): routing on x, each expert's rows quantized, gate and up, SiLU(g) * u rounded
 * to BF16 and quantized, down; shared experts on x. Must agree to fp32 reordering and differ from the exact
 * MoE (the switch did something). Needs FP8 experts with widths that are multiples of 128 (tiny-v3-fp8). */
static void check_w8a8(const char *fx) {
    const ds_layer_weights *L = NULL;
    ds_engine *e = open_moe_fixture(fx, &L);
    if (!e) return;
    const ds_config *c = &e->cfg;
    CHECKF(L->exp_gate[0].dtype == DS_DTYPE_F8_E4M3, "%s: its MoE experts are not FP8", fx);
    if (L->exp_gate[0].dtype != DS_DTYPE_F8_E4M3) { ds_engine_free(e); return; }
    int M = 29, D = c->hidden_size, E = c->n_routed_experts, K = c->num_experts_per_tok, I = L->exp_gate[0].rows;
    size_t MD = (size_t)M * D;
    float *x = rand_values(MD, 0x5678), *exact = malloc(sizeof(float) * MD), *w8 = malloc(sizeof(float) * MD);
    float *ref = malloc(sizeof(float) * MD);
    ds_backend *be = ds_backend_cpu_new(c, 1);
    prime(be, M);
    be->moe(be, exact, x, L, M);
    setenv("DSINFER_MOE_W8A8", "1", 1);
    ds_backend *bq = ds_backend_cpu_new(c, 1);
    unsetenv("DSINFER_MOE_W8A8");
    prime(bq, M);
    bq->moe(bq, w8, x, L, M);
    bq->destroy(bq);
    /* the reference */
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)M * K), *rows = malloc(sizeof(int32_t) * (size_t)M);
    float *w = malloc(sizeof(float) * (size_t)M * K), *rw = malloc(sizeof(float) * (size_t)M);
    float *xin = malloc(sizeof(float) * MD), *y = malloc(sizeof(float) * MD);
    float *g = malloc(sizeof(float) * (size_t)M * I), *u = malloc(sizeof(float) * (size_t)M * I);
    size_t rb = DS_FP8_ROW_BYTES(D > I ? D : I);
    unsigned char *rec = malloc(rb * (size_t)M);
    route_tokens(be, c, L, x, M, ids, w);
    if (c->n_shared_experts) be->mlp(be, ref, x, &L->sh_gate, &L->sh_up, &L->sh_down, M);
    else memset(ref, 0, sizeof(float) * MD);
    for (int ex = 0; ex < E; ex++) {
        int n = 0;
        for (int m = 0; m < M; m++)
            for (int k = 0; k < K; k++)
                if (ids[(size_t)m * K + k] == ex) { rows[n] = m; rw[n++] = w[(size_t)m * K + k]; }
        if (!n) continue;
        be->gather_rows(be, xin, x, rows, n, D);
        be->quant_rows_fp8(be, rec, xin, n, D);
        be->dequant_rows_fp8(be, xin, rec, n, D);
        be->linear(be, g, xin, &L->exp_gate[ex], n);
        be->linear(be, u, xin, &L->exp_up[ex], n);
        for (size_t i = 0; i < (size_t)n * I; i++)
            g[i] = ds_bf16_to_f32(ds_f32_to_bf16(g[i] / (1.0f + expf(-g[i])) * u[i]));
        be->quant_rows_fp8(be, rec, g, n, I);
        be->dequant_rows_fp8(be, g, rec, n, I);
        be->linear(be, y, g, &L->exp_down[ex], n);
        for (int i = 0; i < n; i++)
            for (int d = 0; d < D; d++) ref[(size_t)rows[i] * D + d] += rw[i] * y[(size_t)i * D + d];
    }
    be->destroy(be);
    double num = 0, den = 0, nq = 0;
    for (size_t i = 0; i < MD; i++) {
        num += ((double)w8[i] - ref[i]) * ((double)w8[i] - ref[i]);
        nq += ((double)w8[i] - exact[i]) * ((double)w8[i] - exact[i]);
        den += (double)exact[i] * exact[i];
    }
    printf("  %-14s W8A8 experts: nmse %.2e against the reference, %.2e against the exact MoE\n", fx, num / den, nq / den);
    CHECKF(num <= 1e-8 * den, "%s: W8A8 MoE nmse %g against the reference", fx, num / den);
    CHECKF(nq > 1e-7 * den && nq < 1e-2 * den, "%s: W8A8 moves the MoE by nmse %g (expected 1e-7 .. 1e-2)", fx, nq / den);
    free(ids); free(rows); free(w); free(rw); free(xin); free(y); free(g); free(u); free(rec);
    free(x); free(exact); free(w8); free(ref);
    ds_engine_free(e);
}

int main(void) {
    check_w8a8("tiny-v3-fp8");
    check_fixture("tiny-v3");
    check_fixture("tiny-v2");
    check_fixture("tiny-v2-group");
    return test_result("test_ep_moe");
}
