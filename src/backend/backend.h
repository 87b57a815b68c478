/* The backend contract: every op the model's forward pass needs. The CPU reference (backend/cpu)
 * implements it; the CUDA backend implements the same table. The model code (src/model) calls only
 * these entries and never touches memory itself.
 *
 * Memory: activations are float32 arrays in the backend's memory (host for CPU, device for CUDA),
 * allocated with alloc(). Weights are ds_weight views of the checkpoint in their stored dtype; a
 * backend may keep its own copy after prepare_weights (CUDA uploads them).
 *
 * The KV cache of one layer is `cache` = [n_pages, page_size, ds_kv_token_bytes(cfg)] bytes: per token
 * the normalised latent c_kv (C) then k_pe after RoPE (dr), as float32, or in the FP8 layout when
 * cfg->kv_fp8 (see loader/config.h). A sequence's token at position p lives in
 * page page_table[seq][p / page_size], slot p % page_size. */
#ifndef DS_BACKEND_H
#define DS_BACKEND_H

#include <stdint.h>

#include "dsinfer.h"
#include "loader/config.h"
#include "model/weights.h"

#define DS_FP8_ROW_BYTES(D) ((size_t)(D) + 4 * (size_t)((D) / 128))

/* One forward step's layout, built by the model on the host. */
typedef struct {
    int n_tokens;               /* M: new tokens over all sequences */
    int n_seqs;
    const int32_t *tokens;      /* [M] */
    const int32_t *positions;   /* [M] absolute position of each new token */
    const int32_t *seq_start;   /* [n_seqs + 1] offset of each sequence's first new token */
    const int32_t *seq_ctx;     /* [n_seqs] context length after this step (cached + new) */
    const int32_t *page_table;  /* [n_seqs, pt_stride] page ids */
    int pt_stride;
    int page_size;
} ds_batch_meta;

/* The next layer's input side, for layer_tail1: its input norm and its two projections of the norm's output (attn_in's
 * q and kv, or q_a and kv_a where the model has q_lora; before the kv norm and RoPE) into q and kv. */
typedef struct {
    const ds_weight *in_norm, *wq, *wkv;
    float *q, *kv;   /* [M, wq rows], [M, wkv rows] */
} ds_next_in;

/* attn_in's q_lora side (V3): attn_in's wq is then q_a, qa = xn . q_a^T, and q = (RMSNorm(qa) * q_a_norm (eps)) .
 * q_b^T, as backend normed_linear(q, qa, qa, q_a_norm, eps, q_b) makes it (qa may be left normed or not: scratch). */
typedef struct {
    float *qa;                         /* [M, q_lora_rank] */
    const ds_weight *q_a_norm, *q_b;   /* [q_lora_rank], [H * qk_head_dim, q_lora_rank] */
    float eps;
} ds_qlora_in;

typedef struct ds_backend ds_backend;
struct ds_backend {
    const char *name;
    const ds_config *cfg;

    void (*destroy)(ds_backend *be);
    /* Backend memory for activations and the KV cache. NULL on failure. */
    float *(*alloc)(ds_backend *be, size_t n_floats);
    void (*release)(ds_backend *be, float *p);
    /* Fills n floats with bytes 0xFF, a NaN in fp32, bf16 and e4m3 alike (poisons unused KV pages so a
     * read of one shows). */
    void (*fill_nan)(ds_backend *be, float *p, size_t n);
    /* Copies n floats from backend memory to host memory, and from host memory to backend memory. */
    void (*to_host)(ds_backend *be, float *dst, const float *src, size_t n);
    void (*from_host)(ds_backend *be, float *dst, const float *src, size_t n);
    /* Optional (NULL: malloc / free): host memory that to_host copies into fastest (CUDA: page-locked). */
    void *(*host_alloc)(ds_backend *be, size_t bytes);
    void (*host_free)(ds_backend *be, void *p);
    /* Makes the batch layout visible to the ops that follow (CUDA copies it to the device). */
    ds_status (*set_batch)(ds_backend *be, const ds_batch_meta *b, char *err);

    /* out[M, D] = emb[tokens[m]] */
    void (*embed)(ds_backend *be, float *out, const ds_weight *emb);
    /* out[m, 0:n] = RMSNorm(x[m, 0:n]) * w, rows strided (x_stride, out_stride floats). */
    void (*rmsnorm)(ds_backend *be, float *out, int out_stride, const float *x, int x_stride,
                    const ds_weight *w, int M, int n, float eps);
    /* h[0:n] += x[0:n] */
    void (*add)(ds_backend *be, float *h, const float *x, size_t n);
    /* The residual add and the next norm in one pass: h[M, n] += x[M, n], then xn[M, n] = RMSNorm(h) * w
     * (rows contiguous). The same values as add then rmsnorm. Optional: NULL means call those two. */
    void (*add_rmsnorm)(ds_backend *be, float *xn, float *h, const float *x, const ds_weight *w, int M, int n,
                        float eps);
    /* out[M, w->rows] = x[M, w->cols] . w^T (fp32 accumulation) */
    void (*linear)(ds_backend *be, float *out, const float *x, const ds_weight *w, int M);
    /* out[M, w->rows] = (RMSNorm(x[M, K]) * norm) . w^T (K = w->cols, rows contiguous; eps): rmsnorm into xn [M, K]
     * then linear, where xn is the caller's scratch (it may be x itself; its contents afterwards are either the normed
     * rows or unchanged: no caller reads them). x is not written unless xn == x. The same values as those two calls up
     * to fp32 rounding. Optional: NULL means call those (the CUDA backend folds the norm into batch 1's GEMV: the
     * GEMV scales each row's sum by 1 / RMS, no norm kernel first). */
    void (*normed_linear)(ds_backend *be, float *out, float *xn, const float *x, const ds_weight *norm, float eps,
                          const ds_weight *w, int M);
    /* out1[M, w1->rows] = x . w1^T and out2[M, w2->rows] = x . w2^T for one x[M, K] (w1->cols == w2->cols == K):
     * the q (or q_a) and kv_a projections of an MLA block, which read the same normed input. The same values as
     * two linear calls. Optional: NULL means call linear twice (the CUDA backend runs both weights in one launch
     * where it can: horizontal fusion). */
    void (*linear2)(ds_backend *be, float *out1, float *out2, const float *x, const ds_weight *w1, const ds_weight *w2,
                    int M);
    /* Interleaved-pair RoPE (spec 7.4) in place on x[m, h*head_stride + offset + 0 .. dr), for every
     * token m at positions[m] and head h < n_heads; rows are row_stride floats apart. */
    void (*rope)(ds_backend *be, float *x, int row_stride, int n_heads, int head_stride, int offset);
    /* Writes kv[m, 0 : C+dr] (latent after norm, k_pe after RoPE) of every new token into its slot. */
    void (*kv_store)(ds_backend *be, void *cache, const float *kv);
    /* The MLA block's steps between its projections and its attention, for the batch's tokens: kv's latent part
     * [0, C) RMS-normed with kv_norm (eps), RoPE on q (every head's rope part) and on kv's (at C), kv stored into
     * cache: the same values as rmsnorm, rope, rope and kv_store. Optional: NULL means call those four.
     * kv_b (NULL: none) tells the backend that the caller's next use of q is attn_absorbed over all of the batch's tokens
     * with this kv_b, q unchanged until then: it may make that attention's q product (W_UK^T q_nope) now, beside these
     * steps, and attn_absorbed take it (the same values). */
    void (*qkv_finish)(ds_backend *be, float *q, float *kv, void *cache, const ds_weight *kv_norm, float eps,
                       const ds_weight *kv_b);
    /* The MLA block's input end to end: h[M, D] += add (add NULL: h as it is), xn = RMSNorm(h) * in_norm (eps),
     * q = xn . wq^T and kv = xn . wkv^T, then qkv_finish(q, kv, cache, kv_norm, kv_eps, kv_b). With ql (a model with
     * q_lora, V3; NULL: none) wq is q_a: ql->qa = xn . wq^T and q = normed_linear of it (ds_qlora_in) before
     * qkv_finish. The same values as add_rmsnorm (rmsnorm without add), linear2, (normed_linear,) qkv_finish. Optional:
     * NULL means call those (the CUDA backend makes its W8A8 chain three launches here: the input quantized by the norm,
     * the split-K sums by qkv_finish; at one token it folds the norm into the projections' GEMV). */
    void (*attn_in)(ds_backend *be, float *xn, float *h, const float *add, const ds_weight *in_norm, float eps, float *q,
                    float *kv, const ds_weight *wq, const ds_weight *wkv, void *cache, const ds_weight *kv_norm,
                    float kv_eps, const ds_weight *kv_b, const ds_qlora_in *ql, int M);
    /* A projection into the residual stream and the next norm: ff[M, D] = x . w^T, h += ff, xn = RMSNorm(h) * norm
     * (eps). The same values as linear then add_rmsnorm. Optional: NULL means call those (the CUDA backend sums the
     * W8A8 GEMM's split-K partials inside the norm's kernel). */
    void (*linear_add_rmsnorm)(ds_backend *be, float *xn, float *h, float *ff, const float *x, const ds_weight *w,
                               const ds_weight *norm, int M, float eps);
    /* Naive MLA (spec 6.2) for the listed sequences: decompresses K/V of the whole context from the
     * cache with kv_b, causal softmax attention. q[M, H*dqk] (rope part already rotated),
     * out[M, H*dv]. */
    void (*attn_naive)(ds_backend *be, float *out, const float *q, const void *cache,
                       const ds_weight *kv_b, const int *seqs, int n_seqs);
    /* Absorbed MLA (spec 6.3) over the latent cache for the listed sequences; same in and out. */
    void (*attn_absorbed)(ds_backend *be, float *out, const float *q, const void *cache,
                          const ds_weight *kv_b, const int *seqs, int n_seqs);
    /* Dense MLP: out[M, D] = down(SiLU(gate(x)) * up(x)). */
    void (*mlp)(ds_backend *be, float *out, const float *x, const ds_weight *gate, const ds_weight *up,
                const ds_weight *down, int M);
    /* MoE block (spec 9): routing, routed experts weighted, plus shared experts. out[M, D]. */
    void (*moe)(ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int M);
    /* moe, for a caller whose next call on this backend is attn_in with add == out (the next layer's input; nothing reads
     * out before it): the backend may leave out's last sum to that attn_in (the CUDA backend's combine inside its norm
     * kernel). The same values as moe then attn_in. Optional: NULL means moe. */
    void (*moe_to_attn_in)(ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int M);
    /* A MoE layer's tail for one token (M == 1) in one call where the backend has a form for these weights: ff = x . o^T,
     * h += ff, xn = RMSNorm(h) * post_norm (eps; linear_add_rmsnorm's values), then ff = moe(xn); then, where nx is not
     * NULL and its weights suit the form too: h += ff, xn = RMSNorm(h) * nx->in_norm (eps), nx->q = xn . nx->wq^T, nx->kv =
     * xn . nx->wkv^T (the next attn_in's values up to its projections; ff is then in h already). Its sums are made in
     * other orders than those calls' (NMSE-level differences, the same routing choices away from ties). Returns 0
     * (nothing done), 1 (done without nx's part) or 2 (done with it). Optional: NULL means the separate calls. */
    int (*layer_tail1)(ds_backend *be, float *xn, float *h, float *ff, const float *x, const ds_layer_weights *L,
                       float eps, const ds_next_in *nx, int M);
    /* A MoE layer for one token (M == 1) whose input side is made up to its two projections (q and kv, without q_lora:
     * the previous layer's layer_tail1 or layer1 made them), in one call where the backend has a form for it: the rest of
     * attn_in (kv's norm with kv_norm and kv_eps, both RoPEs, kv's cache entry), attn_absorbed of the batch's one sequence
     * into ao, then layer_tail1's work with x = ao. The same values as those calls up to the orders of sums; returns as
     * layer_tail1 (0: nothing done). Optional: NULL. */
    int (*layer1)(ds_backend *be, float *xn, float *h, float *ff, float *ao, float *q, float *kv, void *cache,
                  const ds_layer_weights *L, float eps, float kv_eps, const ds_next_in *nx, int M);
    /* out[M, D] = the routed experts e0 <= e < e1 only (no shared experts), routing over all experts as moe
     * does: for each token, the sum of w_k * expert(x) over its choices in that range, in ascending expert
     * order (expert parallelism over gathered tokens: dist/ep_moe.c). Optional (NULL: not available). */
    void (*moe_routed)(ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int M, int e0, int e1);
    /* out[i, :] = x[rows[i], :] for i < n, rows of width n_cols. */
    void (*gather_rows)(ds_backend *be, float *out, const float *x, const int32_t *rows, int n, int n_cols);
    /* The MoE combine of expert outputs computed elsewhere (expert parallelism): for m < M,
     * out[m, :] = (accumulate ? out[m, :] : 0) + sum_{j < K} w[m*K + j] * y[m*K + j, :], the terms added
     * in j order. y [M*K, D] and w [M*K] in backend memory. */
    void (*combine_rows)(ds_backend *be, float *out, const float *y, const float *w, int M, int K, int D,
                         int accumulate);
    /* FP8 rows for the wire (expert parallelism's dispatch), D % 128 == 0: row i of x[n, D] becomes a
     * record of DS_FP8_ROW_BYTES(D) bytes at rec + i * that: D e4m3 codes, then D/128 fp32 scales, with
     * the activation rule of spec 12.2 (s = max(amax, 1e-4) / 448 per 128 columns, round half to even).
     * dequant_rows_fp8 gives back x = code * s. rec in backend memory. */
    void (*quant_rows_fp8)(ds_backend *be, void *rec, const float *x, int n, int D);
    void (*dequant_rows_fp8)(ds_backend *be, float *x, const void *rec, int n, int D);

    /* Makes the weights resident in the backend's memory, once, before the first op; NULL where the
     * ops read the mmapped checkpoint directly (CPU). CUDA copies every tensor to the device in its
     * stored dtype (or generates it there when its data is DS_WEIGHT_DUMMY) and repoints w's data and
     * scale at the device copies. Fails with DS_ERR_NOMEM, saying how much is needed and free, when the
     * weights do not fit. */
    ds_status (*prepare_weights)(ds_backend *be, ds_model_weights *w, char *err);

    /* ---- optional entries (NULL where a backend has none), but copy_bytes, which all backends have ---- */
    /* Runs fn(ctx) (ops of one step, after set_batch) as a replay of a graph captured for `key`: the
     * first call for a key runs fn eagerly, the second captures and replays it, later ones replay. The
     * key must name everything the ops bake in (batch size, page-table width, activation and cache
     * addresses); the backend drops its graphs itself when its workspaces move. NULL: call fn directly. */
    ds_status (*run_graph)(ds_backend *be, uint64_t key, void (*fn)(void *ctx), void *ctx, char *err);
    /* Starts pulling the dense weights of layer L (the ones every token reads) towards the device's cache, beside the
     * ops that follow; changes no value. NULL: nothing to do. */
    void (*prefetch_layer)(ds_backend *be, const ds_layer_weights *L);
    /* Copies n bytes within backend memory (KV pages, for ds_seq_fork). Required. */
    void (*copy_bytes)(ds_backend *be, void *dst, const void *src, size_t n);
};

/* Creates the CPU backend; n_threads 0 = all cores. */
ds_backend *ds_backend_cpu_new(const ds_config *cfg, int n_threads);
/* The CUDA backend (backend/cuda/cuda_api.h) exists in builds with DS_HAVE_CUDA only. */

#endif
