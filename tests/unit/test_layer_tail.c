/* The forward's contract with backend layer_tail1 and layer1 (issue 7; src/model/forward.c layer_tail, layer_whole,
 * backend.h): for one token
 * (M == 1) the engine offers a MoE layer's tail (attn_out, then the MoE block, and the next layer's input side up to its
 * two projections where there is a next layer) as one call, and goes on from what the call says it did: 0 nothing (the
 * separate calls follow), 1 the tail without the next layer's part, 2 with it (h then holds ff, and the next layer's
 * attention starts after its projections). Checked on the CPU backend with the tiny V2 and V3 fixtures (V3: q_lora, so
 * the next attention starts at q_a's norm): the engine's backend gets a layer_tail1 made of the CPU's own ops in the
 * order of the calls it stands for, which
 *  - mode 2 takes whole, mode 1 takes without the next layer's part, mode 0 declines;
 *  - checks that it is offered only at M == 1, only for MoE layers, and the next layer's part exactly where a next layer
 *    exists (its input norm and projection weights, the engine's q or q_a and kv buffers);
 *  - poisons (NaN) the buffers the skipped calls would have written and not read since (q, kv while its part is not
 *    taken), so a read of them shows in the logits.
 * layer1 (the whole MoE layer from its projections: the rest of attn_in, the absorbed attention, then the tail) is
 * offered only where the previous call made this layer's projections (a tail or layer1 that returned 2); made of the
 * CPU's ops too, taken (wmode 1) or declined (wmode 0: the layer then runs as attention() from its projections and a
 * tail offer).
 * The logits must be the same bits as an engine without either, prompts fed whole, in chunks of 3 and token by token,
 * and the calls must be counted as expected: every MoE layer of every one-token step offered a tail or (taken) layer1,
 * with the next layer's part for every one of them but the last layer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "dsinfer.h"
#include "golden.h"
#include "model/engine.h"
#include "testutil.h"

static ds_backend orig;         /* the wrapped backend's own ops */
static const ds_engine *eng;    /* the wrapped engine (its weights and activations, for the contract's checks) */
static int mode;                /* layer_tail1: 2 all, 1 without the next layer's part, 0 decline */
static int wmode;               /* layer1: 1 take, 0 decline */
static long offered, offered_next, took, took_next, w_offered, w_took;
static int projected;           /* the last tail or layer1 returned 2: the next layer's projections are made */

/* the layer whose weights L are (-1: none of the engine's) */
static int layer_of(const ds_layer_weights *L) {
    for (int l = 0; l < eng->cfg.num_layers; l++)
        if (&eng->w.layers[l] == L) return l;
    return -1;
}

static int t_layer_tail1(ds_backend *be, float *xn, float *h, float *ff, const float *x, const ds_layer_weights *L,
                         float eps, const ds_next_in *nx, int M) {
    const ds_config *c = be->cfg;
    int l = layer_of(L), D = c->hidden_size;
    offered++;
    offered_next += nx != NULL;
    projected = 0;
    CHECKF(M == 1 && l >= 0 && L->is_moe, "layer_tail1 offered for M=%d, layer %d (moe %d)", M, l, l >= 0 && L->is_moe);
    CHECKF(xn == eng->a.xn && h == eng->a.h && ff == eng->a.ff && x == eng->a.ao && eps == c->rms_norm_eps,
           "layer_tail1 of layer %d: not the engine's buffers or eps", l);
    CHECKF((nx != NULL) == (l + 1 < c->num_layers), "layer_tail1 of layer %d (of %d): next layer's part %s", l,
           c->num_layers, nx ? "given" : "missing");
    if (nx && l >= 0 && l + 1 < c->num_layers) {
        const ds_layer_weights *N = &eng->w.layers[l + 1];
        CHECKF(nx->in_norm == &N->input_norm && nx->wq == (c->q_lora_rank ? &N->q_a : &N->q) && nx->wkv == &N->kv_a &&
               nx->q == (c->q_lora_rank ? eng->a.qa : eng->a.q) && nx->kv == eng->a.kv,
               "layer_tail1 of layer %d: the next layer's part is not layer %d's input side", l, l + 1);
    }
    if (mode == 0 || M != 1) return 0;
    /* the calls it stands for, in their order: attn_out (linear, then add_norm's add_rmsnorm), moe */
    orig.linear(be, ff, x, &L->o, M);
    orig.add_rmsnorm(be, xn, h, ff, &L->post_norm, M, D, eps);
    orig.moe(be, ff, xn, L, M);
    took++;
    if (mode == 1 || !nx) {
        if (nx) {   /* not taken: whatever the next attn_in writes first must not be read before it */
            for (int i = 0; i < nx->wq->rows; i++) nx->q[i] = NAN;
            for (int i = 0; i < nx->wkv->rows; i++) nx->kv[i] = NAN;
        }
        return 1;
    }
    /* the next layer's input side up to its projections: add_norm, then the two linears */
    orig.add_rmsnorm(be, xn, h, ff, nx->in_norm, M, D, eps);
    orig.linear(be, nx->q, xn, nx->wq, M);
    orig.linear(be, nx->kv, xn, nx->wkv, M);
    for (int i = 0; i < D; i++) ff[i] = NAN;   /* in h already: a second add shows */
    took_next++;
    projected = 1;
    return 2;
}

static int t_layer1(ds_backend *be, float *xn, float *h, float *ff, float *ao, float *q, float *kv, void *cache,
                    const ds_layer_weights *L, float eps, float kv_eps, const ds_next_in *nx, int M) {
    const ds_config *c = be->cfg;
    int l = layer_of(L), C = c->kv_lora_rank, dr = c->qk_rope_head_dim, H = c->num_heads;
    w_offered++;
    CHECKF(projected, "layer1 offered for layer %d without its projections made", l);
    CHECKF(M == 1 && l > 0 && L->is_moe && !c->q_lora_rank, "layer1 offered for M=%d, layer %d", M, l);
    CHECKF(ao == eng->a.ao && q == eng->a.q && kv == eng->a.kv && kv_eps == 1e-6f && l >= 0 &&
           cache == ds_engine_layer_cache((ds_engine *)eng, l), "layer1 of layer %d: not the engine's buffers", l);
    projected = 0;
    if (!wmode) return 0;
    /* the rest of attn_in (forward.c attn_in_rest), the absorbed attention of the one sequence, then the tail */
    if (orig.qkv_finish) {
        orig.qkv_finish(be, q, kv, cache, &L->kv_a_norm, kv_eps, &L->kv_b);   /* (the absorbed attention next)*/
    } else {
        orig.rmsnorm(be, kv, C + dr, kv, C + dr, &L->kv_a_norm, M, C, kv_eps);
        orig.rope(be, q, H * c->qk_head_dim, H, c->qk_head_dim, c->qk_nope_head_dim);
        orig.rope(be, kv, C + dr, 1, 0, C);
        orig.kv_store(be, cache, kv);
    }
    const int seq0 = 0;
    orig.attn_absorbed(be, ao, q, cache, &L->kv_b, &seq0, 1);
    w_took++;
    int m = mode;
    mode = 2;   /* (the tail's own work, not counted as a tail offer) */
    long of = offered, on = offered_next;
    int r = t_layer_tail1(be, xn, h, ff, ao, L, eps, nx, M);
    offered = of;
    offered_next = on;
    took--;
    took_next -= r == 2;
    mode = m;
    return r;
}

static void check_fixture(const char *name) {
    ds_st_set *g;
    ds_engine *plain, *wrapped;
    if (!golden_engine_pair(name, &g, &plain, &wrapped)) return;
    CHECKF(plain->be->layer_tail1 == NULL, "%s: the CPU backend has a layer_tail1 (the test's plain engine would take it)",
           name);
    CHECKF(wrapped->fused_add_norm, "%s: the engine does not fuse the add into the norm (no tail would be offered)", name);
    CHECKF(plain->be->layer1 == NULL, "%s: the CPU backend has a layer1", name);
    orig = *wrapped->be;
    wrapped->be->layer_tail1 = t_layer_tail1;
    wrapped->be->layer1 = t_layer1;
    eng = wrapped;
    int V = ds_engine_vocab_size(plain), L = wrapped->cfg.num_layers, moe_layers = 0;
    for (int l = 0; l < L; l++) moe_layers += wrapped->w.layers[l].is_moe;
    int last_moe = wrapped->w.layers[L - 1].is_moe;
    CHECKF(moe_layers > 1 && last_moe, "%s: %d MoE layers, last %d (the test wants one with a next layer and the last)",
           name, moe_layers, last_moe);
    const int chunks[] = {0, 3, 1};
    const int modes[4][2] = {{2, 1}, {2, 0}, {1, 1}, {0, 1}};   /* (mode, wmode) */
    long w_took_all = 0;
    for (int mi = 0; mi < 4; mi++)
        for (int p = 0; golden_get(g, p, "input_ids"); p++) {
            mode = modes[mi][0];
            wmode = modes[mi][1];
            projected = 0;
            const ds_st_tensor *ids = golden_get(g, p, "input_ids");
            int T = (int)ids->numel;
            for (int c = 0; c < 3; c++) {
                /* one-token steps: every step token by token, the last step of chunks of 3 where one token is left */
                int steps1 = chunks[c] == 1 ? T : chunks[c] == 3 && T % 3 == 1 ? 1 : chunks[c] == 0 && T == 1;
                long of0 = offered, on0 = offered_next, t0 = took, tn0 = took_next, wo0 = w_offered, wt0 = w_took;
                float *a = golden_prompt_logits(plain, ids->data, T, chunks[c], V);
                float *b = golden_prompt_logits(wrapped, ids->data, T, chunks[c], V);
                size_t differ = 0;
                for (size_t i = 0; i < (size_t)T * V; i++) differ += memcmp(&a[i], &b[i], sizeof(float)) != 0;
                long of = offered - of0, on = offered_next - on0, tk = took - t0, tkn = took_next - tn0;
                long wo = w_offered - wo0, wt = w_took - wt0;
                w_took_all += wt;
                printf("%s mode %d/%d p%d chunk %d: %d one-token steps, tails offered %ld (with the next layer %ld), taken "
                       "%ld (with it %ld); layer1 offered %ld, taken %ld; %zu of %zu logits differ\n", name, mode, wmode, p,
                       chunks[c], steps1, of, on, tk, tkn, wo, wt, differ, (size_t)T * V);
                CHECKF(differ == 0, "%s mode %d/%d p%d chunk %d: %zu logits differ from the engine without layer_tail1 / "
                       "layer1", name, mode, wmode, p, chunks[c], differ);
                /* every MoE layer of a one-token step: one tail offer, or a layer1 taken in its place */
                CHECKF(of + wt == (long)steps1 * moe_layers, "%s mode %d/%d p%d chunk %d: %ld tails offered and %ld layer1 "
                       "taken, expected %d in all", name, mode, wmode, p, chunks[c], of, wt, steps1 * moe_layers);
                CHECKF(wt == (wmode ? wo : 0) && wo <= (long)steps1 * (moe_layers - 1) && (mode == 2 || wo == 0),
                       "%s mode %d/%d p%d chunk %d: layer1 offered %ld, taken %ld", name, mode, wmode, p, chunks[c], wo, wt);
                CHECKF(tk == (mode ? of : 0) && (mode != 2 || tkn == on) && (mode == 2 || tkn == 0),
                       "%s mode %d/%d p%d chunk %d: %ld / %ld taken", name, mode, wmode, p, chunks[c], tk, tkn);
                if (mode != 2 || !wmode)   /* no layer1 taken: every MoE layer's tail, the next layer's part but the last's */
                    CHECKF(of == (long)steps1 * moe_layers && on == (long)steps1 * (moe_layers - 1),
                           "%s mode %d/%d p%d chunk %d: %ld / %ld tails offered, expected %d / %d", name, mode, wmode, p,
                           chunks[c], of, on, steps1 * moe_layers, steps1 * (moe_layers - 1));
                free(a);
                free(b);
            }
        }
    CHECKF(took_next > 0, "%s: no tail with the next layer's part taken (the test checked nothing of it)", name);
    if (!wrapped->cfg.q_lora_rank)
        CHECKF(w_took_all > 0, "%s: no layer1 taken (the test checked nothing of it)", name);
    ds_engine_free(plain);
    ds_engine_free(wrapped);
    ds_st_close(g);
}

int main(void) {
    check_fixture("tiny-v2");
    check_fixture("tiny-v3");
    return test_result("test_layer_tail");
}
