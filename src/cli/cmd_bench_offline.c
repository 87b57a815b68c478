/* `dsinfer bench` (offline, no server): decode and prefill throughput of one model on the CUDA backend
 * with dummy weights, each row beside its roofline.
 *
 *   decode  tokens/s at batch B and context L: B sequences holding L tokens each (one prefilled
 *           sequence forked B times, so every sequence reads its own KV pages), then timed decode steps
 *           (one new token per sequence, logits copied to the host as the API returns them);
 *   prefill tokens/s of one prompt of P tokens in one forward.
 * Roofline of a row = max(bytes / copy bandwidth, FLOPs / BF16 matrix rate), both ceilings measured on
 * the same GPU (`dsinfer bench --ceilings`, or at the start of every run). Bytes: the weights the step
 * must read (experts: the expected number of distinct experts B tokens route to under uniform routing,
 * E (1 - (1 - K/E)^B)), the KV cache rows read and written in the backend's layout, embeddings and the
 * fp32 logits written. FLOPs: 2 x active parameters per token plus attention (absorbed for decode,
 * naive for prefill). The achieved fraction is roofline time over measured time.
 * Rows go to stdout as a table and, with --csv, to a CSV file. `--mla` times the absorbed MLA decode op
 * alone (64 sequences x 4K context, 16 and 128 heads) against the copy bandwidth. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "core/bench_plot.h"
#include "core/roofline.h"
#include "core/status.h"
#include "dist/launch.h"
#include "loader/config.h"
#ifdef DS_HAVE_CUDA
#include "backend/cuda/cuda_api.h"
#include "dist/ep_moe.h"
#include "model/engine.h"
#endif

#define MAX_LIST 16

typedef struct {
    const char *model, *dtype, *csv, *label, *kv;   /* kv: --kv-cache-dtype, "auto" or "fp8" */
    const char *plot, *plot_from;                    /* --plot SVG (of --csv after the run, or of --plot-from) */
    char dtype_col[40];                              /* the table's dtype column: weights, "+kv8" for an FP8 cache,
                                                        " dp2+ep" for a data-parallel group */
    int batches[MAX_LIST], n_batches, ctxs[MAX_LIST], n_ctxs, prompts[MAX_LIST], n_prompts;
    int steps, ceilings_only, mla, ops, fa;
    int ctx_given;                                   /* --ctx was on the command line (--mla: its contexts, else 4K) */
    int batch_fit;                                   /* --batch fit: the most sequences of the (one) context that fit */
    int ops_ms[MAX_LIST], n_ops_ms;                   /* --ops-m */
    int ops_shapes[MAX_LIST][2], n_ops_shapes;        /* --ops-shapes N x K (0: the V3 set) */
    double bw_gbs, tflops;
    ds_dp_spec dp;                                   /* --data-parallel-size ...: one process per GPU (dist/launch.h) */
    int ep;                                          /* --enable-expert-parallel: the routed experts split over them */
    int tp;                                          /* --tensor-parallel-size: the group (dp) is one TP group */
    int pp;                                          /* --pipeline-parallel-size: the group (dp) is one pipeline */
} bench_opts;

#ifdef DS_HAVE_CUDA   /* the timing runs exist only in a CUDA build */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif

static int parse_list(const char *s, int *out) {
    int n = 0;
    while (s && *s && n < MAX_LIST) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v <= 0) return -1;
        if (*end == 'K' || *end == 'k') { v *= 1024; end++; }
        out[n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

/* "NxK[,NxK...]" -> out[i] = {N, K}: N from 1, K a multiple of 128 (the FP8 block scales' width), both at most 2^20;
 * the count (1 .. MAX_LIST), or -1 when the list does not parse, is empty or is longer */
static int parse_shapes(const char *s, int (*out)[2]) {
    int n = 0;
    while (s && *s) {
        char *end;
        long N = strtol(s, &end, 10), K;
        if (end == s || (*end != 'x' && *end != 'X') || N < 1 || N > (1L << 20) || n == MAX_LIST) return -1;
        s = end + 1;
        K = strtol(s, &end, 10);
        if (end == s || K < 128 || K > (1L << 20) || K % 128 || (*end && *end != ',')) return -1;
        out[n][0] = (int)N;
        out[n++][1] = (int)K;
        s = *end ? end + 1 : end;
        if (*end && !*s) return -1;   /* a trailing comma */
    }
    return n ? n : -1;
}

/* ---- the byte and FLOP model ----------------------------------------------------------------------- */
typedef struct {
    double attn, dense, router, shared, expert;   /* parameters per layer (attention, ...) */
    double head, wsz;                             /* lm_head parameters; bytes per linear weight */
    double mlp_wsz;                               /* bytes per MLP / expert weight (NVFP4: 0.5 + a scale per 16) */
    int n_dense, n_moe;
} model_sizes;

#ifdef DS_HAVE_CUDA
static model_sizes sizes_of(const ds_config *c) {
    model_sizes s;
    double D = c->hidden_size, H = c->num_heads, dqk = c->qk_head_dim, C = c->kv_lora_rank, dr = c->qk_rope_head_dim;
    double q = c->q_lora_rank ? D * c->q_lora_rank + (double)c->q_lora_rank * H * dqk : D * H * dqk;
    s.attn = q + D * (C + dr) + C * H * (c->qk_nope_head_dim + c->v_head_dim) + H * c->v_head_dim * D;
    s.dense = 3 * D * c->intermediate_size;
    s.router = (double)c->n_routed_experts * D;
    s.shared = 3 * D * (double)c->moe_intermediate_size * c->n_shared_experts;
    s.expert = 3 * D * (double)c->moe_intermediate_size;
    s.head = (double)c->vocab_size * D;
    s.wsz = c->fp8 ? 1.0 + 4.0 / (128.0 * 128.0) : 2.0;
    s.mlp_wsz = c->nvfp4 ? 0.5 + 1.0 / 16.0 : s.wsz;
    s.n_moe = 0;
    for (int l = 0; l < c->num_layers; l++) s.n_moe += ds_config_layer_is_moe(c, l);
    s.n_dense = c->num_layers - s.n_moe;
    return s;
}

static double experts_touched(const ds_config *c, double tokens) {
    double E = c->n_routed_experts, K = c->num_experts_per_tok;
    return E ? E * (1.0 - pow(1.0 - K / E, tokens)) : 0;
}

/* Bytes and FLOPs of one step: T new tokens over B sequences whose contexts sum to ctx_sum tokens
 * (read), attention work att_flops. */
static void step_cost(const ds_config *c, double T, double att_flops, double kv_read_tokens, double *bytes,
                      double *flops) {
    model_sizes s = sizes_of(c);
    double ex = experts_touched(c, T), kvb = (double)ds_kv_token_bytes(c);
    double w = s.n_dense * (s.attn * s.wsz + s.dense * s.mlp_wsz) +
               s.n_moe * (s.attn * s.wsz + (s.shared + ex * s.expert) * s.mlp_wsz + s.router * 2);
    *bytes = w + s.head * 2 + T * c->hidden_size * 2 + (kv_read_tokens + T) * c->num_layers * kvb + T * c->vocab_size * 4.0;
    double active = s.n_dense * (s.attn + s.dense) + s.n_moe * (s.attn + s.shared + s.router +
                                                                c->num_experts_per_tok * s.expert) + s.head;
    *flops = 2 * T * active + att_flops;
}

/* One GPU's share of a data-parallel step of B sequences per rank over n ranks: every rank reads the
 * non-expert weights (attention, dense layers, shared experts, router, head); with expert parallelism the
 * routed experts the n * B tokens touch are read once across the group (each by the rank holding it),
 * without it every rank reads those its own B tokens touch. Bytes and FLOPs per GPU (the group's total
 * over n), so the roofline is per GPU and comparable with a one-GPU row. */
static void dp_step_cost(const ds_config *c, int n, int ep, double B, double att_flops_per_rank, double kv_per_rank,
                         double *bytes, double *flops) {
    if (!ep) {
        step_cost(c, B, att_flops_per_rank, kv_per_rank, bytes, flops);
        return;
    }
    model_sizes s = sizes_of(c);
    double nonexp = s.n_dense * (s.attn * s.wsz + s.dense * s.mlp_wsz) +
                    s.n_moe * (s.attn * s.wsz + s.shared * s.mlp_wsz + s.router * 2) + s.head * 2;
    double tb, tf;
    step_cost(c, n * B, n * att_flops_per_rank, n * kv_per_rank, &tb, &tf);
    *bytes = (tb + (n - 1) * nonexp) / n;
    *flops = tf / n;
}

/* One GPU's share of a tensor-parallel step over R ranks: the head-split attention weights (q_b or q,
 * kv_b, o), every MLP and expert width are 1/R a GPU; q_a, kv_a, router, embeddings and lm_head, the KV
 * cache (MLA's latent is not split) and the logits are whole on every GPU. FLOPs: the split share / R. */
static void tp_step_cost(const ds_config *c, int R, double B, double att_flops, double kv_tokens, double *bytes,
                         double *flops) {
    model_sizes s = sizes_of(c);
    double D = c->hidden_size, H = c->num_heads, dqk = c->qk_head_dim;
    double qb = c->q_lora_rank ? (double)c->q_lora_rank * H * dqk : D * H * dqk;
    double split_attn = qb + (double)c->kv_lora_rank * H * (c->qk_nope_head_dim + c->v_head_dim) + H * c->v_head_dim * D;
    double ex = experts_touched(c, B);
    double split = s.n_dense * (split_attn * s.wsz + s.dense * s.mlp_wsz) +
                   s.n_moe * (split_attn * s.wsz + (s.shared + ex * s.expert) * s.mlp_wsz);
    double tb, tf;
    step_cost(c, B, att_flops, kv_tokens, &tb, &tf);
    *bytes = tb - split * (1.0 - 1.0 / R);
    *flops = tf / R;   /* attention heads and MLP widths split; the whole parts are small beside them */
}

/* ---- rows ----------------------------------------------------------------------------------------- */
typedef struct {
    FILE *csv;
    const bench_opts *o;
    const ds_config *cfg;
    ds_comm *dp;   /* a data-parallel group (this process one rank of it), or NULL */
} out_ctx;

static void emit(out_ctx *x, const char *kind, int batch, int len, double tok_s, double step_ms, double bytes,
                 double flops) {
    double t_mem = bytes / (x->o->bw_gbs * 1e9), t_fl = flops / (x->o->tflops * 1e12);
    double roof_ms = 1e3 * (t_mem > t_fl ? t_mem : t_fl);
    const char *bound = t_mem > t_fl ? "memory" : "compute";
    printf("%-8s %-5s batch %4d %s %6d  %10.1f tok/s  %9.3f ms  %8.2f GB  %9.1f GFLOP  roofline %8.3f ms (%s)  %5.1f%%\n",
           kind, x->o->dtype_col, batch, strcmp(kind, "prefill") ? "ctx" : "len", len, tok_s, step_ms, bytes / 1e9,
           flops / 1e9, roof_ms, bound, 100.0 * roof_ms / step_ms);
    fflush(stdout);
    if (x->csv)
        fprintf(x->csv, "%s,%s,%s,%d,%d,%.2f,%.4f,%.4f,%.2f,%.4f,%s,%.4f,%.1f,%.1f\n", x->o->label, kind, x->o->dtype_col,
                batch, len, tok_s, step_ms, bytes / 1e9, flops / 1e9, roof_ms, bound, roof_ms / step_ms, x->o->bw_gbs,
                x->o->tflops);
}

static uint32_t rng_next(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

/* Feeds n random tokens to seq in chunks of at most 8192. */
static ds_status prefill(ds_engine *e, ds_seq *seq, int n, float *logits, uint64_t *rng, char *err) {
    int V = ds_engine_vocab_size(e);
    int32_t *ids = ds_xmalloc(sizeof(int32_t) * 8192);
    ds_status st = DS_OK;
    for (int done = 0; done < n && !st; done += 8192) {
        int k = n - done < 8192 ? n - done : 8192;
        for (int i = 0; i < k; i++) ids[i] = (int32_t)(rng_next(rng) % (uint32_t)V);
        ds_batch_item it = {seq, ids, k, 0};
        st = ds_engine_forward(e, &it, 1, logits, err);
    }
    free(ids);
    return st;
}

static double attn_decode_flops(const ds_config *c, double B, double L) {
    double H = c->num_heads, C = c->kv_lora_rank, dr = c->qk_rope_head_dim;
    return c->num_layers * B * H * (2.0 * c->qk_nope_head_dim * C + 2.0 * (C + dr) * L + 2.0 * C * L + 2.0 * C * c->v_head_dim);
}

/* *dt = the largest of the ranks' *dt (microseconds through the group's host exchange). */
static ds_status dp_slowest(ds_comm *cm, double *dt, char *err) {
    int64_t send[64], recv[64];
    for (int r = 0; r < cm->size; r++) send[r] = (int64_t)(*dt * 1e6);
    ds_status st = cm->exchange_counts(cm, send, recv, err);
    for (int r = 0; r < cm->size && !st; r++) *dt = recv[r] / 1e6 > *dt ? recv[r] / 1e6 : *dt;
    return st;
}

/* decode rows: B sequences of ctx tokens (per rank in a data-parallel group, whose row counts all ranks') */
static ds_status bench_decode(ds_engine *e, out_ctx *x, int ctx, char *err) {
    const bench_opts *o = x->o;
    int Bmax = 0, V = ds_engine_vocab_size(e);
    for (int i = 0; i < o->n_batches; i++) Bmax = o->batches[i] > Bmax ? o->batches[i] : Bmax;
    float *logits = ds_engine_logits_alloc(e, Bmax);   /* page-locked on the GPU, as the server's */
    if (!logits) {
        snprintf(err, DS_ERRLEN, "out of host memory for %d rows of logits", Bmax);
        return DS_ERR_NOMEM;
    }
    ds_seq **seqs = ds_xcalloc((size_t)Bmax + 1, sizeof(ds_seq *));
    uint64_t rng = 42;
    ds_status st = ds_seq_new(e, &seqs[Bmax], err);
    if (!st) st = prefill(e, seqs[Bmax], ctx, logits, &rng, err);
    for (int i = 0; i < Bmax && !st; i++) {
        st = ds_seq_new(e, &seqs[i], err);
        if (!st) st = ds_seq_fork(seqs[i], seqs[Bmax], err);
    }
    ds_batch_item *it = ds_xcalloc((size_t)Bmax, sizeof(ds_batch_item));
    int32_t *tok = ds_xmalloc(sizeof(int32_t) * (size_t)Bmax);
    for (int bi = 0; bi < o->n_batches && !st; bi++) {
        int B = o->batches[bi];
        for (int i = 0; i < B; i++) it[i] = (ds_batch_item){seqs[i], &tok[i], 1, 0};
        double t0 = 0;
        int warm = 3;
        for (int s = 0; s < warm + o->steps && !st; s++) {
            if (s == warm) t0 = now_s();
            for (int i = 0; i < B; i++) tok[i] = (int32_t)(rng_next(&rng) % (uint32_t)V);
            st = ds_engine_forward(e, it, B, logits, err);
        }
        if (st) break;
        double dt = now_s() - t0, L = ctx + warm + o->steps / 2.0, bytes, flops;
        int n = x->dp && !o->tp && !o->pp ? x->dp->size : 1;   /* TP, PP: every rank runs the same B sequences */
        if (x->dp && (st = dp_slowest(x->dp, &dt, err))) break;   /* the group's step: its slowest rank */
        if (x->dp && o->pp) step_cost(x->cfg, B, attn_decode_flops(x->cfg, B, L), B * L, &bytes, &flops);   /* stages in turn */
        else if (x->dp && o->tp) tp_step_cost(x->cfg, x->dp->size, B, attn_decode_flops(x->cfg, B, L), B * L, &bytes, &flops);
        else if (x->dp) dp_step_cost(x->cfg, n, o->ep, B, attn_decode_flops(x->cfg, B, L), B * L, &bytes, &flops);
        else step_cost(x->cfg, B, attn_decode_flops(x->cfg, B, L), B * L, &bytes, &flops);
        emit(x, "decode", n * B, ctx, (double)n * B * o->steps / dt, 1e3 * dt / o->steps, bytes, flops);
        for (int i = 0; i < B; i++) ds_seq_truncate(seqs[i], ctx);
    }
    for (int i = 0; i <= Bmax; i++) ds_seq_free(seqs[i]);
    free(seqs); free(it); free(tok);
    ds_engine_logits_free(e, logits);
    return st;
}

static ds_status bench_prefill(ds_engine *e, out_ctx *x, char *err) {
    const bench_opts *o = x->o;
    const ds_config *c = x->cfg;
    float *logits = ds_xmalloc(sizeof(float) * (size_t)ds_engine_vocab_size(e));
    uint64_t rng = 7;
    ds_status st = DS_OK;
    /* each length runs once untimed first: what happens once per shape (CUDA's lazy kernel loading,
     * workspace growth, the tuned-GEMM searches) stays out of the figure, as in a server past its first
     * requests. (Until the fifth session only the first length had this warm-up.) */
    for (int run = 0; run < 2 * o->n_prompts && !st; run++) {
        int P = o->prompts[run / 2], timed = run % 2;
        ds_seq *s = NULL;
        st = ds_seq_new(e, &s, err);
        double t0 = now_s();
        if (!st) st = prefill(e, s, P, logits, &rng, err);
        double dt = now_s() - t0;
        ds_seq_free(s);
        if (st || !timed) continue;
        double H = c->num_heads, tri = (double)P * (P + 1) / 2, bytes, flops;
        double att = c->num_layers * (2.0 * P * c->kv_lora_rank * H * (c->qk_nope_head_dim + c->v_head_dim) +
                                      2.0 * tri * H * (c->qk_head_dim + c->v_head_dim));
        step_cost(c, P, att, 0, &bytes, &flops);
        bytes -= (double)P * c->vocab_size * 4.0 - c->vocab_size * 4.0;   /* logits of the last token only */
        emit(x, "prefill", 1, P, P / dt, 1e3 * dt, bytes, flops);
    }
    free(logits);
    return st;
}

/* ---- setup ---------------------------------------------------------------------------------------- */
static ds_status load_cfg(const bench_opts *o, ds_config *cfg, char **json_out, char *err) {
    FILE *f = fopen(o->model, "rb");
    if (!f) return ds_seterr(err, DS_ERR_IO, "%s: cannot open (give a config .json)", o->model);
    char *txt = ds_xmalloc(1 << 20);
    size_t n = fread(txt, 1, (1 << 20) - 256, f);
    fclose(f);
    txt[n] = 0;
    if (strcmp(o->dtype, "bf16") && !strstr(txt, "quantization_config")) {   /* FP8 128x128 blocks, or NVFP4 */
        char *brace = strchr(txt, '{');
        if (!brace) { free(txt); return ds_seterr(err, DS_ERR_FORMAT, "%s: not a JSON object", o->model); }
        const char *q = !strcmp(o->dtype, "fp8")
                            ? "\n  \"quantization_config\": {\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\", "
                              "\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128]},"
                            : "\n  \"quantization_config\": {\"quant_method\": \"modelopt\", \"quant_algo\": \"NVFP4\", "
                              "\"group_size\": 16},";
        memmove(brace + 1 + strlen(q), brace + 1, strlen(brace + 1) + 1);
        memcpy(brace + 1, q, strlen(q));
    }
    ds_status st = ds_config_parse(txt, o->model, cfg, err);
    *json_out = txt;
    return st;
}

#endif

static void usage(void) {
    fprintf(stderr,
            "usage: dsinfer bench [--model CONFIG.json] [--dtype bf16|fp8|fp4] [--batch 1,8,32,64,128,256] [--ctx 1K,4K]\n"
            "                     [--prompt 512,2K,8K] [--steps N] [--csv FILE [--plot FILE.svg]] [--label NAME]\n"
            "                     [--bw GB/s --tflops T]\n"
            "                     [--kv-cache-dtype auto|bf16|fp8|fp32]\n"
            "                     [--data-parallel-size N [--enable-expert-parallel]\n"
            "                      [--nnodes K --node-rank R --master-addr HOST --master-port P]]\n"
            "                     [--tensor-parallel-size N]\n"
            "       --batch fit: one batch, the most sequences of --ctx tokens whose KV fits in the GPU memory left\n"
            "                    after the weights (less a reserve for activations); prints the capacity\n"
            "       dsinfer bench --ceilings        measure copy bandwidth and the BF16 matrix rate only\n"
            "       dsinfer bench --mla [--ctx 1K,4K]  the absorbed MLA decode op alone (64 seqs x each --ctx, default 4K;\n"
            "                                       16 and 128 heads)\n"
            "       dsinfer bench --fa [--prompt 2048,8192]  the naive-form prefill attention op alone (one sequence,\n"
            "                                       16 and 128 heads; v3 on wgmma, overlapped or not, v2 on mma.sync)\n"
            "       dsinfer bench --ops [--ops-m 1,64,128,4096] [--ops-shapes NxK,...]  the FP8 GEMMs of the V3 shapes\n"
            "                                       (or the given N x K) alone: W8A8 as the engine runs it, cuBLASLt\n"
            "                                       block-scaled FP8, cuBLAS BF16\n"
            "       --data-parallel-size N: one process per GPU (N / K on each of K nodes, rank 0 at --master-addr:\n"
            "                    --master-port; one node: 127.0.0.1 and a free port), each decoding --batch sequences of\n"
            "                    its own; rows count the whole group (batch N x B, the slowest rank's step);\n"
            "                    --enable-expert-parallel splits the routed experts over the ranks (NCCL exchanges)\n"
            "       --pipeline-parallel-size N: one process per GPU, each a stage of the layers (its KV cache holds only\n"
            "                    its layers: about N times the sequences); the stages run one after another\n"
            "       --tensor-parallel-size N: one process per GPU as above, the group one engine (heads and widths\n"
            "                    split, all-reduces over NCCL); every rank runs the same --batch sequences; with\n"
            "                    --enable-expert-parallel the routed experts stay whole, split across the ranks\n"
            "       dsinfer bench --plot-from FILE.csv --plot FILE.svg  draw a bench CSV (no GPU): decode rows' roofline\n"
            "                                       fraction against the batch, prefill rows' against the prompt length;\n"
            "                                       --plot with --csv draws the CSV after the run\n"
            "       dsinfer bench serve ...         load-test a running server (dsinfer bench serve --help)\n"
            "  Offline throughput on the CUDA backend with dummy weights (default configs/deepseek-v2-lite.json);\n"
            "  --batch/--ctx/--prompt take comma lists (0 rows: give an empty list as ''); each row prints its\n"
            "  roofline and the achieved fraction. Speed paths: DSINFER_CUDA_* variables (src/backend/cuda/cuda.h).\n");
}

static int parse_opts(int argc, char **argv, bench_opts *o) {
    static const struct option lo[] = {
        {"model", 1, 0, 'm'}, {"dtype", 1, 0, 'd'}, {"batch", 1, 0, 'b'}, {"ctx", 1, 0, 'c'}, {"prompt", 1, 0, 'p'},
        {"steps", 1, 0, 's'}, {"csv", 1, 0, 'o'}, {"label", 1, 0, 'l'}, {"bw", 1, 0, 'w'}, {"tflops", 1, 0, 't'},
        {"ceilings", 0, 0, 'C'}, {"mla", 0, 0, 'A'}, {"kv-cache-dtype", 1, 0, 'k'}, {"ops", 0, 0, 'O'},
        {"ops-m", 1, 0, 'M'}, {"help", 0, 0, 'h'}, {"data-parallel-size", 1, 0, 'D'},
        {"enable-expert-parallel", 0, 0, 'E'}, {"nnodes", 1, 0, 'N'}, {"node-rank", 1, 0, 'R'},
        {"master-addr", 1, 0, 'a'}, {"master-port", 1, 0, 'P'}, {"tensor-parallel-size", 1, 0, 'T'},
        {"pipeline-parallel-size", 1, 0, 'L'}, {"plot", 1, 0, 'G'}, {"plot-from", 1, 0, 'F'}, {"fa", 0, 0, 'Y'},
        {"ops-shapes", 1, 0, 'S'}, {0, 0, 0, 0}};
    *o = (bench_opts){.model = "configs/deepseek-v2-lite.json", .dtype = "bf16", .label = "dsinfer", .steps = 16,
                      .kv = "auto", .dp = {.size = 1, .nnodes = 1}};
    int prompts_given = 0;
    o->n_batches = parse_list("1,8,32,64,128,256", o->batches);
    o->n_ctxs = parse_list("1024,4096", o->ctxs);
    o->n_prompts = parse_list("512,2048,8192", o->prompts);
    o->n_ops_ms = parse_list("1,64,128,4096", o->ops_ms);
    optind = 1;
    int ch;
    /* a list flag that does not parse is named with its value; -1 from parse_list */
#define LIST_OR_FAIL(flag, n, v)                                                                               \
    do {                                                                                                       \
        if ((n) < 0) {                                                                                         \
            fprintf(stderr, "dsinfer bench: bad " flag " list \"%s\" (positive integers, K = 1024, commas)\n", v); \
            return 2;                                                                                          \
        }                                                                                                      \
    } while (0)
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 'm': o->model = optarg; break;
        case 'd': o->dtype = optarg; break;
        case 'b':
            o->batch_fit = !strcmp(optarg, "fit");
            o->n_batches = o->batch_fit ? 1 : parse_list(optarg, o->batches);
            if (o->batch_fit) o->batches[0] = 1;   /* set after the weights are on the device */
            LIST_OR_FAIL("--batch", o->n_batches, optarg);
            break;
        case 'c':
            o->n_ctxs = parse_list(optarg, o->ctxs);
            o->ctx_given = 1;
            LIST_OR_FAIL("--ctx", o->n_ctxs, optarg);
            break;
        case 'p':
            o->n_prompts = parse_list(optarg, o->prompts);
            LIST_OR_FAIL("--prompt", o->n_prompts, optarg);
            prompts_given = o->n_prompts > 0;
            break;
        case 'D': case 'N': case 'R': case 'P': case 'T': case 'L': {   /* whole numbers; the ranges are checked with the spec */
            char *end;
            long v = strtol(optarg, &end, 10);
            if (!*optarg || *end || v < 0 || v > 1000000) {
                fprintf(stderr, "dsinfer bench: bad --%s \"%s\" (a whole number)\n",
                        ch == 'D' ? "data-parallel-size" : ch == 'N' ? "nnodes" : ch == 'R' ? "node-rank" :
                        ch == 'T' ? "tensor-parallel-size" : ch == 'L' ? "pipeline-parallel-size" : "master-port", optarg);
                return 2;
            }
            if (ch == 'T') o->tp = (int)v;
            else if (ch == 'L') o->pp = (int)v;
            else if (ch == 'D') o->dp.size = (int)v;
            else if (ch == 'N') o->dp.nnodes = (int)v;
            else if (ch == 'R') o->dp.node_rank = (int)v;
            else o->dp.port = (int)v;
            break;
        }
        case 'E': o->ep = 1; break;
        case 'a': o->dp.addr = optarg; break;
        case 's':
            o->steps = atoi(optarg);
            if (o->steps <= 0 || o->steps > 100000) {
                fprintf(stderr, "dsinfer bench: bad --steps \"%s\" (1 to 100000)\n", optarg);
                return 2;
            }
            break;
        case 'o': o->csv = optarg; break;
        case 'G': o->plot = optarg; break;
        case 'F': o->plot_from = optarg; break;
        case 'l': o->label = optarg; break;
        case 'w': o->bw_gbs = atof(optarg); break;
        case 't': o->tflops = atof(optarg); break;
        case 'C': o->ceilings_only = 1; break;
        case 'A': o->mla = 1; break;
        case 'Y': o->fa = 1; break;
        case 'k': o->kv = optarg; break;
        case 'O': o->ops = 1; break;
        case 'M':
            o->n_ops_ms = parse_list(optarg, o->ops_ms);
            LIST_OR_FAIL("--ops-m", o->n_ops_ms, optarg);
            if (!o->n_ops_ms) {
                fprintf(stderr, "dsinfer bench: --ops-m needs at least one M\n");
                return 2;
            }
            break;
        case 'S':
            o->n_ops_shapes = parse_shapes(optarg, o->ops_shapes);
            if (o->n_ops_shapes < 0) {
                fprintf(stderr, "dsinfer bench: bad --ops-shapes \"%s\" (NxK,... : N >= 1, K a multiple of 128, at most %d shapes)\n",
                        optarg, MAX_LIST);
                return 2;
            }
            break;
        case 'h': usage(); return 1;
        default: usage(); return 2;
        }
    }
#undef LIST_OR_FAIL
    if (o->plot_from && !o->plot) {
        fprintf(stderr, "dsinfer bench: --plot-from needs --plot FILE.svg\n");
        return 2;
    }
    if (o->mla && o->ctx_given && o->n_ctxs == 0) {
        fprintf(stderr, "dsinfer bench: --mla times the op at each --ctx; the list is empty\n");
        return 2;
    }
    if (o->plot && (o->ops || o->mla || o->fa || o->ceilings_only)) {
        fprintf(stderr, "dsinfer bench: --plot draws decode and prefill rows, not --ops, --mla or --ceilings\n");
        return 2;
    }
    if (o->plot && !o->plot_from && !o->csv) {
        fprintf(stderr, "dsinfer bench: --plot needs --csv FILE (the rows it draws) or --plot-from FILE\n");
        return 2;
    }
    if (strcmp(o->dtype, "bf16") && strcmp(o->dtype, "fp8") && strcmp(o->dtype, "fp4")) {
        fprintf(stderr, "dsinfer bench: unknown --dtype \"%s\" (expected bf16, fp8 or fp4)\n", o->dtype);
        return 2;
    }
    if (o->batch_fit && o->n_ctxs != 1) {
        fprintf(stderr, "dsinfer bench: --batch fit needs exactly one --ctx\n");
        return 2;
    }
    const char *kv = ds_kv_cache_dtype_resolve(o->kv);   /* the engine's names: from here on bf16, fp8 or fp32 */
    if (!kv) {
        fprintf(stderr, "dsinfer bench: unknown --kv-cache-dtype \"%s\" (expected auto, bf16, fp8 or fp32)\n", o->kv);
        return 2;
    }
    o->kv = kv;
    if (o->pp) {   /* one process per GPU, each a stage of one pipeline */
        if (o->tp || o->dp.size != 1 || o->ep || o->batch_fit) {
            fprintf(stderr, "dsinfer bench: --pipeline-parallel-size with --tensor-parallel-size, --data-parallel-size, "
                            "--enable-expert-parallel or --batch fit is not supported yet\n");
            return 2;
        }
        o->dp.size = o->pp;
    }
    if (o->tp) {   /* one process per GPU as for data parallelism, the group one tensor-parallel engine */
        if (o->dp.size != 1) {   /* with --enable-expert-parallel: TP attention, the routed experts whole per rank */
            fprintf(stderr, "dsinfer bench: --tensor-parallel-size with --data-parallel-size is not supported yet\n");
            return 2;
        }
        o->dp.size = o->tp;
    }
    if (o->dp.size != 1 || o->ep || o->dp.nnodes != 1 || o->dp.node_rank || o->dp.addr || o->dp.port) {
        char err[DS_ERRLEN];
        if (ds_dp_spec_check(&o->dp, err)) {
            fprintf(stderr, "dsinfer bench: %s\n", err);
            return 2;
        }
        if (o->dp.size < 2) {
            fprintf(stderr, "dsinfer bench: --enable-expert-parallel, --nnodes, --node-rank and --master-* need "
                            "--data-parallel-size (or --tensor-parallel-size) of 2 or more\n");
            return 2;
        }
        if (o->mla || o->ops || o->fa || o->ceilings_only || prompts_given) {
            fprintf(stderr, "dsinfer bench: --data-parallel-size times decode rows only (not with --mla, --ops, "
                            "--ceilings or --prompt)\n");
            return 2;
        }
        o->n_prompts = 0;
    }
    char par[24] = "";
    if (o->tp > 1) snprintf(par, sizeof par, " tp%d%s", o->tp, o->ep ? "+ep" : "");
    else if (o->pp > 1) snprintf(par, sizeof par, " pp%d", o->pp);
    else if (o->dp.size > 1) snprintf(par, sizeof par, " dp%d%s", o->dp.size, o->ep ? "+ep" : "");
    snprintf(o->dtype_col, sizeof o->dtype_col, "%s%s%s", o->dtype, !strcmp(o->kv, "fp8") ? "+kv8" : !strcmp(o->kv, "fp32") ? "+kv32" : "", par);
    return 0;
}

#ifdef DS_HAVE_CUDA
/* The GEMM shapes of issue 8 (DeepSeek-V3, N x K): q_a + kv_a fused, q_b, kv_b, o, dense gate/up (one of
 * the two), expert down, router, lm_head. */
static const int OPS_SHAPES[][2] = {{2112, 7168}, {24576, 1536}, {32768, 512}, {7168, 16384},
                                    {4096, 7168}, {7168, 2048}, {256, 7168}, {129280, 7168}};

static double tflops_of(const ds_ops_row *r, double us) { return 2.0 * r->M * (double)r->N * r->K / (us * 1e-6) / 1e12; }

static int run_ops(const ds_config *cfg, const bench_opts *o) {
    char err[DS_ERRLEN];
    double fp8_peak = 0;
    if (ds_cuda_fp8_peak(&fp8_peak, err)) { fprintf(stderr, "dsinfer bench --ops: %s\n", err); return 1; }
    printf("ceilings: FP8 GEMM 8192^3 (cuBLASLt, per-tensor scale) %.1f TFLOP/s, BF16 GEMM %.1f TFLOP/s\n", fp8_peak,
           o->tflops);
    FILE *csv = NULL;
    if (o->csv && !(csv = fopen(o->csv, "a"))) { fprintf(stderr, "dsinfer bench: cannot open %s\n", o->csv); return 1; }
    if (csv) {
        fseek(csv, 0, SEEK_END);
        if (ftell(csv) == 0)
            fprintf(csv, "label,N,K,M,engine_us,engine_tflops,own_us,own_tflops,lt_us,lt_tflops,lt_ok,bf16_us,bf16_tflops,"
                         "fp8_peak,bf16_peak,roof_us\n");
    }
    /* engine: quantization + GEMM as the linear runs; own: the wgmma GEMM alone; ratio: own over cuBLASLt; roof: the
     * FP8 GEMM's roofline on the measured copy bandwidth and FP8 rate (core/roofline.h), and own's / cuBLASLt's
     * fraction of it */
    printf("%-13s %5s | %9s %8s | %9s %8s %6s | %9s %8s %6s | %6s | %8s %5s %5s | %9s %8s %6s\n", "N x K", "M", "engine us",
           "TFLOP/s", "own us", "TFLOP/s", "%fp8", "cuBLASLt", "TFLOP/s", "%fp8", "ratio", "roof us", "%own", "%lt",
           "BF16 us", "TFLOP/s", "%bf16");
    double lg_eng[MAX_LIST] = {0}, lg_own[MAX_LIST] = {0}, lg_lt[MAX_LIST] = {0}, lg_roof[MAX_LIST] = {0};
    int n_lg[MAX_LIST] = {0};
    int n_shapes = o->n_ops_shapes ? o->n_ops_shapes : (int)(sizeof OPS_SHAPES / sizeof OPS_SHAPES[0]);
    const int(*shapes)[2] = o->n_ops_shapes ? (const int(*)[2])o->ops_shapes : OPS_SHAPES;
    for (int si = 0; si < n_shapes; si++) {
        ds_ops_row rows[MAX_LIST];
        if (ds_cuda_bench_ops(cfg, shapes[si][0], shapes[si][1], o->ops_ms, o->n_ops_ms, rows, err)) {
            fprintf(stderr, "dsinfer bench --ops: %s\n", err);
            if (csv) fclose(csv);
            return 1;
        }
        for (int i = 0; i < o->n_ops_ms; i++) {
            const ds_ops_row *r = &rows[i];
            double te = tflops_of(r, r->w8a8_us), to = tflops_of(r, r->own_us), tb = tflops_of(r, r->bf16_us);
            double tl = r->lt_ok ? tflops_of(r, r->lt_us) : 0;
            double roof = ds_fp8_gemm_roof_us(r->M, r->N, r->K, o->bw_gbs, fp8_peak);
            char nk[32];
            snprintf(nk, sizeof nk, "%dx%d", r->N, r->K);
            printf("%-13s %5d | %9.1f %8.1f | %9.1f %8.1f %5.1f%% | %9.1f %8.1f %5.1f%% | %6.2f | %8.2f %4.0f%% %4.0f%% | %9.1f "
                   "%8.1f %5.1f%%\n", nk, r->M, r->w8a8_us, te, r->own_us, to, 100 * to / fp8_peak, r->lt_ok ? r->lt_us : 0.0,
                   tl, 100 * tl / fp8_peak, r->lt_ok ? to / tl : 0.0, roof, 100 * roof / r->own_us,
                   r->lt_ok ? 100 * roof / r->lt_us : 0.0, r->bf16_us, tb, o->tflops > 0 ? 100 * tb / o->tflops : 0.0);
            if (csv)
                fprintf(csv, "%s,%d,%d,%d,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%d,%.2f,%.2f,%.1f,%.1f,%.3f\n", o->label, r->N, r->K,
                        r->M, r->w8a8_us, te, r->own_us, to, r->lt_us, tl, r->lt_ok, r->bf16_us, tb, fp8_peak, o->tflops, roof);
            if (r->lt_ok) {
                lg_own[i] += log(to);
                lg_eng[i] += log(te);
                lg_lt[i] += log(tl);
                lg_roof[i] += log(tflops_of(r, roof));
                n_lg[i]++;
            }
        }
    }
    for (int i = 0; i < o->n_ops_ms; i++)
        if (n_lg[i])
            printf("geomean M=%-5d over %d shapes: engine %.1f TFLOP/s, own GEMM %.1f TFLOP/s, cuBLASLt block-scaled %.1f "
                   "TFLOP/s (%.1f%% of FP8 peak); own / cuBLASLt %.2f\n",
                   o->ops_ms[i], n_lg[i], exp(lg_eng[i] / n_lg[i]), exp(lg_own[i] / n_lg[i]), exp(lg_lt[i] / n_lg[i]),
                   100 * exp(lg_lt[i] / n_lg[i]) / fp8_peak, exp((lg_own[i] - lg_lt[i]) / n_lg[i]));
    /* the most any kernel could reach: the rooflines' geomean, and so the largest own / cuBLASLt geomean possible (issue
     * 8 asks 2x at 64 and 128 rows: where this is below 2, no kernel can meet it on these shapes) */
    for (int i = 0; i < o->n_ops_ms; i++)
        if (n_lg[i])
            printf("roofline M=%-5d over %d shapes (copy %.0f GB/s, FP8 %.0f TFLOP/s): geomean %.1f TFLOP/s; own at %.1f%%, "
                   "cuBLASLt at %.1f%%; the most own / cuBLASLt can be: %.2f\n", o->ops_ms[i], n_lg[i], o->bw_gbs, fp8_peak,
                   exp(lg_roof[i] / n_lg[i]), 100 * exp((lg_own[i] - lg_roof[i]) / n_lg[i]),
                   100 * exp((lg_lt[i] - lg_roof[i]) / n_lg[i]), exp((lg_roof[i] - lg_lt[i]) / n_lg[i]));
    if (csv) fclose(csv);
    return 0;
}

/* The absorbed decode op alone, 64 sequences x 4096 tokens, 16 and 128 heads, in its three kernels:
 * tensor cores (DSINFER_CUDA_MLA_TC=1), the fp32 fused kernel, the per-sequence one. bw: the copy
 * bandwidth for the fraction column (GB/s; 1 or less prints none). */
/* --batch fit: opens the model with a one-page cache to learn what the weights leave free, then sets the
 * batch to the most sequences of o->ctxs[0] (+ steps and margin) tokens whose KV fits in that memory less
 * a reserve (workspaces, logits of every row, cuBLAS); prints the capacity line. */
/* dp: one rank of a data-parallel group (its share of the experts with --enable-expert-parallel); every rank
 * then takes the group's smallest fit, and the line counts the group. */
static ds_status fit_batch(const char *cfg_path, bench_opts *o, const ds_config *cfg, ds_comm *dp, char *err) {
    size_t token_bytes = ds_kv_token_bytes(cfg) * (size_t)cfg->num_layers, free0, free1, total;
    ds_status st = ds_cuda_mem_info(&free0, &total, err);
    if (st) return st;
    ds_engine_opts eo = {.backend = "cuda", .dummy_weights = 1, .kv_cache_dtype = o->kv, .kv_cache_bytes = 64 * token_bytes};
    if (dp && o->ep && !o->tp) {
        eo.expert_parallel_size = dp->size;
        eo.expert_parallel_rank = dp->rank;
    }
    if (dp && o->tp) {   /* this rank's share of the weights; the latent KV is whole on every rank */
        eo.tensor_parallel_size = dp->size;
        eo.tensor_parallel_one_rank = 1;
        eo.tensor_parallel_rank = dp->rank;
        eo.tensor_expert_parallel = o->ep;
    }
    ds_engine *e = NULL;
    st = ds_engine_open(cfg_path, &eo, &e, err);
    if (st) return st;
    st = ds_cuda_mem_info(&free1, &total, err);
    int V = ds_engine_vocab_size(e);
    ds_engine_free(e);
    if (st) return st;
    size_t per_seq = (size_t)(o->ctxs[0] + o->steps + 64) * token_bytes;
    double reserve = 6.0 * (1u << 30);
    double room = (double)free1 - reserve;
    long fit = room > 0 ? (long)(room / ((double)per_seq + 2.0 * 4 * V)) - 1 : 0;
    if (dp) {   /* the group's smallest */
        int64_t send[64], recv[64];
        for (int r = 0; r < dp->size; r++) send[r] = fit;
        if ((st = dp->exchange_counts(dp, send, recv, err))) return st;
        for (int r = 0; r < dp->size; r++) fit = recv[r] < fit ? (long)recv[r] : fit;
    }
    if (fit < 1)
        return ds_seterr(err, DS_ERR_NOMEM, "--batch fit: no sequence of %d tokens fits (%.2f GiB free after the weights)",
                         o->ctxs[0], (double)free1 / (1u << 30));
    printf("capacity: weights %.2f GiB; %.2f GiB free of %.2f GiB after them; KV %zu bytes per token (%d layers); "
           "%ld sequences of %d tokens fit (%.2f GiB kept for activations)\n",
           (double)(free0 - free1) / (1u << 30), (double)free1 / (1u << 30), (double)total / (1u << 30), token_bytes,
           cfg->num_layers, fit, o->ctxs[0], reserve / (1u << 30));
    if (dp && o->tp)   /* every rank holds every sequence's latent cache: the group holds what one rank does */
        printf("capacity: tensor parallel %d: %ld sequences on the %d GPUs (the latent KV is replicated, not split)\n",
               dp->size, fit, dp->size);
    else if (dp)
        printf("capacity: %s: %ld sequences a GPU (the smallest of the group), %ld on the %d GPUs\n",
               o->ep ? "data parallel with the routed experts split" : "data parallel, every GPU all experts", fit,
               fit * dp->size, dp->size);
    o->batches[0] = (int)fit;
    return DS_OK;
}

/* the 64 sequences of ctx tokens: each variant's op and kernel time, bandwidth and (kernel) FLOP rate */
static int run_mla_ctx(const ds_config *base, int ctx, double bw, double tflops) {
    char err[DS_ERRLEN];
    int heads[2] = {16, 128};
    /* tc: the default tensor-core kernel (the BF16 cache: 64 heads a block on wgmma where the heads are a multiple of
     * 64, v2 of it where TMA can load the rows, else the mma.sync v2); tc-wg1: the wgmma kernel's v1 there; tc-mma:
     * the mma.sync v2 (16 heads a block) where the default is a wgmma kernel; tc-v1: the mma.sync v2's first version
     * (BF16 cache only) */
    enum { MLA_VARIANTS = 6 };
    const char *name[MLA_VARIANTS] = {"tc", "tc-wg1", "tc-mma", "tc-v1", "fused", "per-seq"};
    const char *fused_env[MLA_VARIANTS] = {"1", "1", "1", "1", "1", "0"}, *tc_env[MLA_VARIANTS] = {"1", "1", "1", "1", "0", "0"};
    const char *tc2_env[MLA_VARIANTS] = {"1", "1", "1", "0", "1", "1"};
    /* DSINFER_CUDA_MLA_WG as the caller set it, except 1 for tc-wg1 and off for tc-mma and tc-v1 (restored after) */
    const char *wg_set = getenv("DSINFER_CUDA_MLA_WG");
    char *wg_user = wg_set ? ds_xstrdup(wg_set) : NULL;
    for (int hi = 0; hi < 2; hi++)
        for (int k = 0; k < MLA_VARIANTS; k++) {
            if (k >= 1 && k <= 3 && !base->kv_bf16) continue;
            if ((k == 1 || k == 2) && heads[hi] % 64) continue;   /* tc is the mma.sync v2 there already */
            ds_config c = *base;
            c.num_heads = heads[hi];
            setenv("DSINFER_CUDA_FUSED_ATTN", fused_env[k], 1);
            setenv("DSINFER_CUDA_MLA_TC", tc_env[k], 1);
            setenv("DSINFER_CUDA_MLA_TC2", tc2_env[k], 1);
            if (k == 1) setenv("DSINFER_CUDA_MLA_WG", "1", 1);
            else if (k == 2 || k == 3) setenv("DSINFER_CUDA_MLA_WG", "0", 1);
            else if (wg_user) setenv("DSINFER_CUDA_MLA_WG", wg_user, 1);
            else unsetenv("DSINFER_CUDA_MLA_WG");
            double ms = 0, gbs = 0, kms = 0, kgbs = 0;
            if (ds_cuda_bench_mla(&c, 64, ctx, &ms, &gbs, &kms, &kgbs, err)) {
                fprintf(stderr, "bench mla: %s\n", err);
                free(wg_user);
                return 1;
            }
            printf("mla-decode %-9s heads %3d  64 seqs x %4d ctx  %s cache  op %8.3f ms  %7.1f GB/s", name[k], heads[hi], ctx,
                   c.kv_fp8 ? "fp8 " : c.kv_bf16 ? "bf16" : "fp32", ms, gbs);
            if (bw > 1) printf(" %5.1f%%", 100 * gbs / bw);
            if (k < MLA_VARIANTS - 1) {   /* per-seq is not one kernel */
                printf("  kernel %8.3f ms  %7.1f GB/s", kms, kgbs);
                if (bw > 1) printf(" %5.1f%%", 100 * kgbs / bw);
                /* its FLOPs: scores over 576 and values over 512 columns, per head and cached row (at 128 heads
                 * with BF16 MMAs the matrix rate, not the bytes, is the roofline) */
                double fl = 2.0 * heads[hi] * 64 * (double)ctx * (double)(c.kv_lora_rank + c.qk_rope_head_dim + c.kv_lora_rank);
                printf("  %6.1f TFLOP/s", fl / (kms * 1e-3) / 1e12);
                if (tflops > 1) printf(" %5.1f%%", 100 * fl / (kms * 1e-3) / 1e12 / tflops);
            }
            if (bw > 1) printf("  (of %.0f GB/s, %.0f TFLOP/s)", bw, tflops);
            printf("\n");
        }
    unsetenv("DSINFER_CUDA_FUSED_ATTN");
    unsetenv("DSINFER_CUDA_MLA_TC");
    unsetenv("DSINFER_CUDA_MLA_TC2");
    if (wg_user) setenv("DSINFER_CUDA_MLA_WG", wg_user, 1);
    else unsetenv("DSINFER_CUDA_MLA_WG");
    free(wg_user);
    return 0;
}

/* `--mla`: the absorbed decode op at each context of --ctx (4K where --ctx is not given) */
static int run_mla(const ds_config *base, const bench_opts *o) {
    if (!o->ctx_given) return run_mla_ctx(base, 4096, o->bw_gbs, o->tflops);
    for (int i = 0; i < o->n_ctxs; i++)
        if (run_mla_ctx(base, o->ctxs[i], o->bw_gbs, o->tflops)) return 1;
    return 0;
}

/* `--fa`: the naive-form prefill attention op at 16 and 128 heads, each --prompt length (default 2048, 8192), v3
 * (wgmma) overlapped within a warpgroup (DSINFER_CUDA_FA3=2) and not (=1), and v2 (=0); TFLOP/s of the kernel over the causal FLOPs, 2 H (P (P + 1) / 2)
 * (q/k width + v width), and its fraction of the BF16 matrix rate. */
static int run_fa(const ds_config *base, const bench_opts *o) {
    char err[DS_ERRLEN];
    int heads[2] = {16, 128}, def_p[2] = {2048, 8192}, np = o->n_prompts ? o->n_prompts : 2;
    const int *ps = o->n_prompts ? o->prompts : def_p;
    const char *name[3] = {"v3-ovl", "v3-wgmma", "v2-mma"}, *env[3] = {"2", "1", "0"};
    for (int hi = 0; hi < 2; hi++)
        for (int pi = 0; pi < np; pi++)
            for (int k = 0; k < 3; k++) {
                ds_config c = *base;
                c.num_heads = heads[hi];
                setenv("DSINFER_CUDA_FA3", env[k], 1);
                double ms = 0, kms = 0, P = ps[pi];
                if (ds_cuda_bench_fa(&c, ps[pi], &ms, &kms, err)) {
                    fprintf(stderr, "bench fa: %s\n", err);
                    unsetenv("DSINFER_CUDA_FA3");
                    return 1;
                }
                double fl = 2.0 * heads[hi] * (P * (P + 1) / 2) *
                            (double)(c.qk_nope_head_dim + c.qk_rope_head_dim + c.v_head_dim);
                printf("fa-prefill %-8s heads %3d  len %6d  op %8.3f ms  kernel %8.3f ms  %6.1f TFLOP/s", name[k], heads[hi],
                       ps[pi], ms, kms, fl / (kms * 1e-3) / 1e12);
                if (o->tflops > 1) printf(" %5.1f%% (of %.0f TFLOP/s)", 100 * fl / (kms * 1e-3) / 1e12 / o->tflops, o->tflops);
                printf("\n");
            }
    unsetenv("DSINFER_CUDA_FA3");
    return 0;
}
#endif

#ifdef DS_HAVE_CUDA
/* Joins this rank's engine to the group's expert parallelism (its experts were the only ones loaded). The
 * placement and the ds_ep live as long as the engine (freed by the caller after it). */
static ds_status join_ep(ds_engine *e, ds_comm *cm, ds_ep_placement *pl, ds_ep *ep, char *err) {
    ds_status st = ds_ep_place(e->cfg.n_routed_experts, cm->size, 0, NULL, pl, err);
    if (st) return st;
    ep->comm = cm;
    ep->pl = pl;
    ep->fp8_dispatch = 0;
    ep->ws = ds_xcalloc(1, sizeof(ds_ep_ws));
    ep->ws->be = e->be;
    return ds_engine_set_expert_parallel(e, ep, err);
}

static int run_bench(bench_opts *op, ds_comm *dp);

/* A rank of `dsinfer bench --data-parallel-size N`: the same run on its GPU, rank 0's rows printed */
static int bench_rank(int rank, ds_comm *cm, void *arg) {
    if (rank != 0 && !freopen("/dev/null", "w", stdout)) return 1;
    return run_bench((bench_opts *)arg, cm);
}
#endif

/* the SVG of a bench CSV (core/bench_plot.h); 0, or 1 with the error printed */
static int draw_plot(const char *csv, const char *svg) {
    char err[DS_ERRLEN];
    if (ds_bench_plot(csv, svg, err)) {
        fprintf(stderr, "dsinfer bench: plot: %s\n", err);
        return 1;
    }
    printf("plot: %s (from %s)\n", svg, csv);
    return 0;
}

int cli_bench_offline(int argc, char **argv) {
    bench_opts o;
    int rc = parse_opts(argc, argv, &o);
    if (rc) return rc == 1 ? 0 : rc;
    if (o.plot_from) return draw_plot(o.plot_from, o.plot);
#ifndef DS_HAVE_CUDA
    fprintf(stderr, "dsinfer bench: this dsinfer is built without CUDA\n");
    return 1;
#else
    if (o.dp.size > 1) {
        char err[DS_ERRLEN];
        if (ds_dp_launch(&o.dp, bench_rank, &o, err)) {
            fprintf(stderr, "dsinfer bench: %s\n", err);
            return 1;
        }
        return o.plot ? draw_plot(o.csv, o.plot) : 0;
    }
    rc = run_bench(&o, NULL);
    return !rc && o.plot ? draw_plot(o.csv, o.plot) : rc;
#endif
}

#ifdef DS_HAVE_CUDA
/* `--ceilings`' resident-phases lab (issue 7, batch 1): its line, or a clear error when a form's result is wrong */
static int print_resident_lab(char *err) {
    ds_resident_lab r;
    if (ds_cuda_resident_lab(&r, err)) { fprintf(stderr, "dsinfer bench: %s\n", err); return 1; }
    printf("resident phases (%d dependent GEMVs of %d x %d FP8, %.1f MB, each on the last's output; cold L2; us): a kernel a "
           "phase in a CUDA graph %.2f, as PDL launches copying their rows before their wait %.2f, one cooperative launch "
           "with every phase's rows copied into shared memory at its start and a grid counter between phases %.2f, its "
           "phases alone once every row has landed %.2f; NMSE against the host %.1e / %.1e / %.1e / %.1e\n", r.phases,
           r.rows, r.cols, r.mb, r.chain_us, r.chain_pdl_us, r.resident_us, r.phases_alone_us, r.nmse_chain,
           r.nmse_chain_pdl, r.nmse_resident, r.nmse_clocked);
    const double nmse[] = {r.nmse_chain, r.nmse_chain_pdl, r.nmse_resident, r.nmse_clocked};
    for (int f = 0; f < 4; f++)
        if (!(nmse[f] <= 1e-8)) {
            fprintf(stderr, "dsinfer bench: the resident-phases lab, form %d: NMSE %.3g against the host's chain (wrong)\n", f,
                    nmse[f]);
            return 1;
        }
    return 0;
}

/* One process's bench on its GPU; dp: its data-parallel group, or NULL. */
static int run_bench(bench_opts *op, ds_comm *dp) {
    bench_opts o = *op;
    char err[DS_ERRLEN];
    if (!o.bw_gbs || !o.tflops) {
        double bw, tf;
        if (ds_cuda_ceilings(&bw, &tf, err)) { fprintf(stderr, "dsinfer bench: %s\n", err); return 1; }
        if (!o.bw_gbs) o.bw_gbs = bw;
        if (!o.tflops) o.tflops = tf;
        printf("ceilings: device-to-device copy %.1f GB/s (read + write), BF16 GEMM 8192^3 %.1f TFLOP/s\n", bw, tf);
    }
    if (o.ceilings_only) {
        ds_launch_gaps g;
        if (ds_cuda_launch_gaps(&g, err)) { fprintf(stderr, "dsinfer bench: %s\n", err); return 1; }
        printf("launch gaps (us a pair of kernels in a CUDA graph): empty %.2f, with PDL %.2f; quantizer-shaped then "
               "persistent %.2f, with PDL %.2f, PDL with the first one's trigger after its stores %.2f\n",
               g.empty_plain_us, g.empty_pdl_us, g.pair_plain_us, g.pair_pdl_us, g.pair_pdl_late_us);
        if (g.grid_barrier_us >= 0)
            printf("grid barrier (us, inside one cooperative launch of a block an SM in a CUDA graph): %.2f with fences, "
                   "%.2f with acquire / release\n", g.grid_barrier_us, g.grid_barrier_ar_us);
        if (g.reads_two_us >= 0)
            printf("6 MB then 4 MB read from DRAM (us): two kernels %.2f, two phases of one launch around a grid barrier %.2f, "
                   "with the second read asked of L2 before the barrier %.2f\n", g.reads_two_us, g.reads_phases_us,
                   g.reads_phases_pf_us);
        if (g.stream_bad) {
            fprintf(stderr, "dsinfer bench: streamed phases, form %d: the bytes' sum is wrong (a byte not read, or read twice)\n",
                    g.stream_bad);
            return 1;
        }
        if (g.stream_free_us >= 0)
            printf("the same 10 MB pairs streamed into shared memory in one launch (us a pair): no barriers %.2f, a grid "
                   "barrier between phases with the loads running ahead %.2f, with the loads waiting for each barrier %.2f, "
                   "running ahead across counters in place of the barriers %.2f, so with the phases dealt in chunks to free "
                   "blocks %.2f\n",
                   g.stream_free_us, g.stream_ahead_us, g.stream_wait_us, g.stream_counter_us, g.stream_dealt_us);
        if (g.counter_prop_us[1] >= 0)
            printf("a counter under the stream (us, p10 / p50 / p90 over blocks and counters of one stamped launch): skew (the "
                   "last block's add less this block's) %.2f / %.2f / %.2f, propagation (the pass less the last add) %.2f / "
                   "%.2f / %.2f\n", g.counter_skew_us[0], g.counter_skew_us[1], g.counter_skew_us[2], g.counter_prop_us[0],
                   g.counter_prop_us[1], g.counter_prop_us[2]);
        if (g.dealt_prop_us[1] >= 0)
            printf("a counter under the stream, phases dealt in chunks (us, p10 / p50 / p90): skew %.2f / %.2f / %.2f, "
                   "propagation %.2f / %.2f / %.2f\n", g.dealt_skew_us[0], g.dealt_skew_us[1], g.dealt_skew_us[2],
                   g.dealt_prop_us[0], g.dealt_prop_us[1], g.dealt_prop_us[2]);
        if (g.relaxed_prop_us[1] >= 0)
            printf("a counter under the stream, relaxed polls and one acquire fence (us a pair %.2f; p10 / p50 / p90): skew "
                   "%.2f / %.2f / %.2f, propagation %.2f / %.2f / %.2f\n", g.relaxed_counter_us, g.relaxed_skew_us[0],
                   g.relaxed_skew_us[1], g.relaxed_skew_us[2], g.relaxed_prop_us[0], g.relaxed_prop_us[1],
                   g.relaxed_prop_us[2]);
        if (g.bulk_prop_us[1] >= 0)
            printf("a counter under the stream, each add a bulk reduction from shared memory (us a pair %.2f; p10 / p50 / "
                   "p90): skew %.2f / %.2f / %.2f, propagation %.2f / %.2f / %.2f\n", g.bulk_counter_us, g.bulk_skew_us[0],
                   g.bulk_skew_us[1], g.bulk_skew_us[2], g.bulk_prop_us[0], g.bulk_prop_us[1], g.bulk_prop_us[2]);
        if (g.bulk_part_prop_us[1] >= 0)
            printf("a counter under the stream, each add a bulk reduction after the block's 8 KB of partial sums' (us a pair "
                   "%.2f; p10 / p50 / p90): skew %.2f / %.2f / %.2f, propagation %.2f / %.2f / %.2f\n", g.bulk_part_us,
                   g.bulk_part_skew_us[0], g.bulk_part_skew_us[1], g.bulk_part_skew_us[2], g.bulk_part_prop_us[0],
                   g.bulk_part_prop_us[1], g.bulk_part_prop_us[2]);
        if (g.ring_free_us[0] >= 0)
            printf("the ring's depth (us a pair; 2 / 3 / 4 stages of 32 KB against 6): no barriers %.2f / %.2f / %.2f, "
                   "counters %.2f / %.2f / %.2f, the counters' propagation p50 %.2f / %.2f / %.2f\n", g.ring_free_us[0],
                   g.ring_free_us[1], g.ring_free_us[2], g.ring_counter_us[0], g.ring_counter_us[1], g.ring_counter_us[2],
                   g.ring_prop_us[0], g.ring_prop_us[1], g.ring_prop_us[2]);
        for (int f = 0; f < DS_GAP_FEW; f++)
            if (g.few_free_us[f] >= 0)
                printf("the 10 MB pairs streamed by %d blocks (a block an SM, no barriers): %.2f us a pair, %.0f GB/s read\n",
                       g.few_blocks[f], g.few_free_us[f], 10.0 * 1048576.0 / (g.few_free_us[f] * 1e3));
        for (int c = 0; c < 2; c++)
            if (g.one_cl_free_us[c] >= 0)
                printf("one cluster of %d blocks alone (one GPC): the 10 MB pairs streamed in %.2f us a pair (%.0f GB/s), with "
                       "st.async messages between phases %.2f\n", 8 << c, g.one_cl_free_us[c],
                       10.0 * 1048576.0 / (g.one_cl_free_us[c] * 1e3), g.one_cl_tx_us[c]);
        if (g.cg_us[0] >= 0)
            printf("batch 1's q + kv_a GEMV (3648 x 2048 FP8, 7.5 MB, a ring and moeo_kernel's consumers): a block an SM %.2f us "
                   "(%.0f GB/s), 16 blocks %.2f (%.0f GB/s), one cluster of 16 %.2f (%.0f GB/s); NMSE against fp32 %.1e / %.1e / "
                   "%.1e\n", g.cg_us[0], 3648.0 * 2048.0 / (g.cg_us[0] * 1e3), g.cg_us[1], 3648.0 * 2048.0 / (g.cg_us[1] * 1e3),
                   g.cg_us[2], 3648.0 * 2048.0 / (g.cg_us[2] * 1e3), g.cg_nmse[0], g.cg_nmse[1], g.cg_nmse[2]);
        for (int f = 0; f < 3; f++)
            if (g.cg_us[f] >= 0 && !(g.cg_nmse[f] <= 1e-9)) {
                fprintf(stderr, "dsinfer bench: the q + kv_a GEMV lab, form %d: NMSE %.3g against the fp32 reference (wrong)\n",
                        f, g.cg_nmse[f]);
                return 1;
            }
        for (int c = 0; c < DS_GAP_CLUSTERS; c++)
            if (g.cl_free_us[c] >= 0)
                printf("dependencies inside clusters of %d blocks (%d blocks launched; us a pair): no dependencies %.2f, "
                       "with them %.2f; skew p50 %.2f, propagation p50 %.2f; as st.async messages %.2f, propagation p50 "
                       "%.2f; the row's sums reduced in the cluster, then counted %.2f, propagation p50 %.2f\n", 1 << c,
                       g.cl_blocks[c], g.cl_free_us[c], g.cl_dep_us[c], g.cl_skew_us[c], g.cl_prop_us[c], g.cl_tx_us[c],
                       g.cl_tx_prop_us[c], g.cl_red_us[c], g.cl_red_prop_us[c]);
        return print_resident_lab(err);
    }
    ds_config cfg;
    char *json = NULL;
    ds_status st = load_cfg(&o, &cfg, &json, err);
    if (st) { fprintf(stderr, "dsinfer bench: %s\n", err); free(json); return 1; }
    cfg.kv_fp8 = !strcmp(o.kv, "fp8");   /* the rooflines' KV bytes (ds_kv_token_bytes) and --mla's cache */
    cfg.kv_bf16 = !strcmp(o.kv, "bf16");
    if (o.mla) { free(json); return run_mla(&cfg, &o); }
    if (o.fa) { free(json); return run_fa(&cfg, &o); }
    if (o.ops) { free(json); return run_ops(&cfg, &o); }
    /* the engine reads the (possibly FP8-patched) config from a temporary file */
    char path[] = "/tmp/dsinfer-bench-XXXXXX.json";
    int fd = mkstemps(path, 5);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) { fprintf(stderr, "dsinfer bench: cannot write a temporary config\n"); free(json); return 1; }
    fputs(json, f);
    fclose(f);
    free(json);
    if (o.batch_fit && fit_batch(path, &o, &cfg, dp, err)) {
        fprintf(stderr, "dsinfer bench: %s\n", err);
        remove(path);
        return 1;
    }
    int Bmax = 1, Lmax = 1, Pmax = 1;
    for (int i = 0; i < o.n_batches; i++) Bmax = o.batches[i] > Bmax ? o.batches[i] : Bmax;
    for (int i = 0; i < o.n_ctxs; i++) Lmax = o.ctxs[i] > Lmax ? o.ctxs[i] : Lmax;
    for (int i = 0; i < o.n_prompts; i++) Pmax = o.prompts[i] > Pmax ? o.prompts[i] : Pmax;
    size_t tokens = (size_t)(Bmax + 1) * (size_t)(Lmax + o.steps + 64) + (size_t)Pmax + 64;
    ds_engine_opts eo = {.backend = "cuda", .dummy_weights = 1, .kv_cache_dtype = o.kv,
                         .kv_cache_bytes = tokens * ds_kv_token_bytes(&cfg) * (size_t)cfg.num_layers};
    if (dp && o.ep && !o.tp) {   /* only this rank's routed experts are loaded */
        eo.expert_parallel_size = dp->size;
        eo.expert_parallel_rank = dp->rank;
    }
    if (dp && o.pp) {   /* only this stage's layers reach the GPU */
        eo.pipeline_parallel_size = dp->size;
        eo.pipeline_parallel_one_rank = 1;
        eo.pipeline_parallel_rank = dp->rank;
    }
    if (dp && o.tp) {   /* only this rank's share of heads and widths (and, with EP, of whole experts) reaches the GPU */
        eo.tensor_parallel_size = dp->size;
        eo.tensor_parallel_one_rank = 1;
        eo.tensor_parallel_rank = dp->rank;
        eo.tensor_expert_parallel = o.ep;
    }
    ds_engine *e = NULL;
    double t0 = now_s();
    st = ds_engine_open(path, &eo, &e, err);
    remove(path);
    ds_ep_placement pl;
    ds_ep ep;
    memset(&pl, 0, sizeof pl);
    memset(&ep, 0, sizeof ep);
    if (!st && dp && o.ep && !o.tp) st = join_ep(e, dp, &pl, &ep, err);
    if (!st && dp && o.tp) st = ds_engine_set_tensor_parallel(e, dp, o.ep, err);
    if (!st && dp && o.pp) st = ds_engine_set_pipeline_stage(e, dp, err);
    if (st) {
        fprintf(stderr, "dsinfer bench%s: %s\n", dp ? " (a data-parallel rank)" : "", err);
        ds_ep_ws_free(ep.ws);   /* its buffers before the backend they live in */
        ds_engine_free(e);
        ds_ep_placement_free(&pl);
        return 1;
    }
    printf("model: %s (opened in %.1f s)%s\n", ds_engine_describe(e), now_s() - t0,
           !dp ? "" : o.pp ? ", one stage of a pipeline (its layers)"
                : o.tp ? ", one GPU of a tensor-parallel group (its share of heads and widths)"
                : o.ep ? ", one GPU of a data-parallel group with the routed experts split" : ", one GPU of a data-parallel group");
    out_ctx x = {NULL, &o, &cfg, dp};
    if (o.csv && (!dp || dp->rank == 0)) {
        x.csv = fopen(o.csv, "a");
        if (!x.csv) { fprintf(stderr, "dsinfer bench: cannot open %s\n", o.csv); ds_engine_free(e); return 1; }
        fseek(x.csv, 0, SEEK_END);
        if (ftell(x.csv) == 0)
            fprintf(x.csv, "label,kind,dtype,batch,len,tok_s,step_ms,gbytes,gflop,roof_ms,bound,roof_frac,bw_gbs,tflops\n");
    }
    for (int ci = 0; ci < o.n_ctxs && !st; ci++) st = bench_decode(e, &x, o.ctxs[ci], err);
    if (!st && o.n_prompts) st = bench_prefill(e, &x, err);
    if (st) fprintf(stderr, "dsinfer bench: %s\n", err);
    if (x.csv) fclose(x.csv);
    ds_ep_ws_free(ep.ws);
    ds_engine_free(e);
    ds_ep_placement_free(&pl);
    return st ? 1 : 0;
}
#endif
