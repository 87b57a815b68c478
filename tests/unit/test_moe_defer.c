/* The forward's contract with backend moe_to_attn_in (issue 7; src/model/forward.c ffn, backend.h): the engine calls it
 * only where its next call on the backend is attn_in with add == out, so that a backend may leave out's last sum to that
 * attn_in (the CUDA backend's combine inside its norm kernel, DSINFER_CUDA_COMBINE_NORM). Checked here on the CPU backend
 * with the tiny V2 fixtures and the tiny V3 one (q_lora: attn_in with its ds_qlora_in): the engine's backend gets
 *  - an attn_in made of the CPU ops, in the order of forward.c's attn_in_ops;
 *  - a moe_to_attn_in that computes the MoE block into a side buffer and leaves out full of NaN; attn_in puts the sum
 *    back when its add is that out, as the CUDA backend's norm kernel makes it there;
 *  - every other op the forward runs wrapped so that it fails the test if it runs while a sum is left.
 * The logits must be the same bits as an engine without those two ops, prompts fed whole, in chunks and token by token,
 * and every MoE layer but the last must have left its sum once a step (a read of the NaN would also show in the logits).
 * The same wrappers check the contract of attn_in's kv_b (backend.h qkv_finish): where the engine passes one, its next
 * call on the backend is attn_absorbed on that q with that kv_b over every sequence of the batch (the CUDA backend's q
 * product made in qkv_finish's launch, DSINFER_CUDA_QKV_ABSORB, relies on it), and it passes one at some steps. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "dsinfer.h"
#include "golden.h"
#include "model/engine.h"
#include "testutil.h"

static ds_backend orig;   /* the wrapped backend's own ops */
static struct {
    float *out, *saved;   /* the left sum: out (NaN meanwhile) and its values */
    size_t n, cap;
    int active;
} pend;
static long left, taken, calls_while_left;
static struct {
    const float *q;       /* attn_in's q and kv_b, given: the next call must be attn_absorbed on them */
    const ds_weight *kv_b;
    int n_seqs;           /* the batch's sequences (set_batch) */
} qk;
static long kvb_given, kvb_taken, calls_while_kvb;

/* an op other than attn_absorbed called while attn_in's kv_b promised that call next */
static void guard_kvb(const char *op) {
    if (!qk.kv_b) return;
    calls_while_kvb++;
    CHECKF(0, "%s called between attn_in given kv_b and the absorbed attention", op);
    qk.kv_b = NULL;
}

static void guard(const char *op) {
    guard_kvb(op);
    if (!pend.active) return;
    calls_while_left++;
    CHECKF(0, "%s called while the MoE output is left to the next attn_in", op);
}

static void t_attn_in(ds_backend *be, float *xn, float *h, const float *add, const ds_weight *in_norm, float eps, float *q,
                      float *kv, const ds_weight *wq, const ds_weight *wkv, void *cache, const ds_weight *kv_norm,
                      float kv_eps, const ds_weight *kv_b, const ds_qlora_in *ql, int M) {
    const ds_config *c = be->cfg;
    guard_kvb("attn_in");
    int D = wq->cols, C = c->kv_lora_rank, dr = c->qk_rope_head_dim, H = c->num_heads;
    if (pend.active) {
        CHECKF(add == pend.out && pend.n == (size_t)M * D, "attn_in after moe_to_attn_in: add %p (left %p), %d rows",
               (const void *)add, (void *)pend.out, M);
        memcpy(pend.out, pend.saved, pend.n * sizeof(float));
        pend.active = 0;
        taken++;
    }
    if (add) orig.add_rmsnorm(be, xn, h, add, in_norm, M, D, eps);
    else orig.rmsnorm(be, xn, D, h, D, in_norm, M, D, eps);
    orig.linear(be, ql ? ql->qa : q, xn, wq, M);
    orig.linear(be, kv, xn, wkv, M);
    if (ql) {   /* forward.c normed_linear's two ops (the CPU backend has no normed_linear) */
        int R = ql->q_b->cols;
        orig.rmsnorm(be, ql->qa, R, ql->qa, R, ql->q_a_norm, M, R, ql->eps);
        orig.linear(be, q, ql->qa, ql->q_b, M);
    }
    orig.rmsnorm(be, kv, C + dr, kv, C + dr, kv_norm, M, C, kv_eps);
    orig.rope(be, q, H * c->qk_head_dim, H, c->qk_head_dim, c->qk_nope_head_dim);
    orig.rope(be, kv, C + dr, 1, 0, C);
    orig.kv_store(be, cache, kv);
    if (kv_b) {
        qk.q = q;
        qk.kv_b = kv_b;
        kvb_given++;
    }
}

static void t_moe_to_attn_in(ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int M) {
    guard("moe_to_attn_in");
    orig.moe(be, out, x, L, M);
    size_t n = (size_t)M * be->cfg->hidden_size;
    if (n > pend.cap) {
        pend.saved = realloc(pend.saved, n * sizeof(float));
        pend.cap = n;
    }
    memcpy(pend.saved, out, n * sizeof(float));
    for (size_t i = 0; i < n; i++) out[i] = NAN;
    pend.out = out;
    pend.n = n;
    pend.active = 1;
    left++;
}

/* the ops forward.c and the engine run, each refused while a sum is left */
static void t_embed(ds_backend *be, float *h, const ds_weight *w) { guard("embed"); orig.embed(be, h, w); }
static void t_rmsnorm(ds_backend *be, float *out, int os, const float *x, int xs, const ds_weight *w, int M, int n, float eps) {
    guard("rmsnorm");
    orig.rmsnorm(be, out, os, x, xs, w, M, n, eps);
}
static void t_add(ds_backend *be, float *y, const float *x, size_t n) { guard("add"); orig.add(be, y, x, n); }
static void t_add_rmsnorm(ds_backend *be, float *xn, float *h, const float *add, const ds_weight *w, int M, int n, float eps) {
    guard("add_rmsnorm");
    orig.add_rmsnorm(be, xn, h, add, w, M, n, eps);
}
static void t_linear(ds_backend *be, float *out, const float *x, const ds_weight *w, int M) {
    guard("linear");
    orig.linear(be, out, x, w, M);
}
static void t_rope(ds_backend *be, float *x, int stride, int n_heads, int head_dim, int offset) {
    guard("rope");
    orig.rope(be, x, stride, n_heads, head_dim, offset);
}
static void t_kv_store(ds_backend *be, void *cache, const float *kv) { guard("kv_store"); orig.kv_store(be, cache, kv); }
static void t_attn_naive(ds_backend *be, float *out, const float *q, const void *cache, const ds_weight *kv_b, const int *seqs,
                         int n) {
    guard("attn_naive");
    orig.attn_naive(be, out, q, cache, kv_b, seqs, n);
}
static void t_attn_absorbed(ds_backend *be, float *out, const float *q, const void *cache, const ds_weight *kv_b,
                            const int *seqs, int n) {
    if (qk.kv_b) {   /* the call attn_in's kv_b promised: its q and kv_b, every sequence in order */
        int all = n == qk.n_seqs;
        for (int k = 0; k < n && all; k++) all = seqs[k] == k;
        CHECKF(q == qk.q && kv_b == qk.kv_b && all, "attn_absorbed after attn_in's kv_b: q %s, kv_b %s, %d of %d sequences%s",
               q == qk.q ? "the same" : "another", kv_b == qk.kv_b ? "the same" : "another", n, qk.n_seqs,
               all ? "" : " (not all in order)");
        qk.kv_b = NULL;
        kvb_taken++;
    }
    guard("attn_absorbed");
    orig.attn_absorbed(be, out, q, cache, kv_b, seqs, n);
}
static void t_mlp(ds_backend *be, float *out, const float *x, const ds_weight *g, const ds_weight *u, const ds_weight *d, int M) {
    guard("mlp");
    orig.mlp(be, out, x, g, u, d, M);
}
static void t_moe(ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int M) {
    guard("moe");
    orig.moe(be, out, x, L, M);
}
static ds_status t_set_batch(ds_backend *be, const ds_batch_meta *m, char *err) {
    guard("set_batch");
    qk.n_seqs = m->n_seqs;
    return orig.set_batch(be, m, err);
}

static void wrap(ds_backend *be) {
    orig = *be;
    be->attn_in = t_attn_in;
    be->moe_to_attn_in = t_moe_to_attn_in;
    be->embed = t_embed;
    be->rmsnorm = t_rmsnorm;
    be->add = t_add;
    be->add_rmsnorm = t_add_rmsnorm;
    be->linear = t_linear;
    be->rope = t_rope;
    be->kv_store = t_kv_store;
    be->attn_naive = t_attn_naive;
    be->attn_absorbed = t_attn_absorbed;
    be->mlp = t_mlp;
    be->moe = t_moe;
    be->set_batch = t_set_batch;
}

static void check_fixture(const char *name) {
    ds_st_set *g;
    ds_engine *plain, *wrapped;
    if (!golden_engine_pair(name, &g, &plain, &wrapped)) return;
    wrap(wrapped->be);
    int V = ds_engine_vocab_size(plain), L = wrapped->cfg.num_layers, moe_layers = 0;
    for (int l = 0; l + 1 < L; l++) moe_layers += wrapped->w.layers[l].is_moe;   /* those that leave their sum */
    CHECKF(moe_layers > 0, "%s: no MoE layer before the last (the test would check nothing)", name);
    const int chunks[] = {0, 3, 1};
    for (int p = 0; golden_get(g, p, "input_ids"); p++) {
        const ds_st_tensor *ids = golden_get(g, p, "input_ids");
        int T = (int)ids->numel;
        for (int c = 0; c < 3; c++) {
            int steps = chunks[c] ? (T + chunks[c] - 1) / chunks[c] : 1;
            long left0 = left, taken0 = taken;
            const size_t differ = golden_pair_differ(plain, wrapped, ids->data, T, chunks[c], V);
            printf("%s p%d chunk %d: %d steps, %ld sums left and %ld taken by attn_in, %zu of %zu logits differ\n", name, p,
                   chunks[c], steps, left - left0, taken - taken0, differ, (size_t)T * V);
            CHECKF(differ == 0, "%s p%d chunk %d: %zu logits differ from the engine without moe_to_attn_in", name, p,
                   chunks[c], differ);
            CHECKF(left - left0 == (long)steps * moe_layers && taken - taken0 == left - left0,
                   "%s p%d chunk %d: %ld sums left, %ld taken (%d steps x %d layers expected)", name, p, chunks[c],
                   left - left0, taken - taken0, steps, moe_layers);
        }
    }
    CHECKF(!pend.active, "%s: a sum still left after the last step", name);
    CHECK(calls_while_left == 0);
    printf("%s: attn_in given kv_b %ld times, the absorbed attention on it next %ld times\n", name, kvb_given, kvb_taken);
    CHECKF(kvb_given > 0 && kvb_taken == kvb_given && !qk.kv_b && calls_while_kvb == 0,
           "%s: kv_b given %ld times, taken %ld, %ld other calls between", name, kvb_given, kvb_taken, calls_while_kvb);
    ds_engine_free(plain);
    ds_engine_free(wrapped);
    ds_st_close(g);
}

int main(void) {
    check_fixture("tiny-v2");
    check_fixture("tiny-v2-group");
    check_fixture("tiny-v3");
    free(pend.saved);
    return test_result("test_moe_defer");
}
