/* The forward's contract with backend normed_linear (src/model/forward.c normed_linear, backend.h): the engine calls it
 * for V3's q_a norm before q_b (q_lora models: x = xn = qa, in place) and for the final norm before the LM head
 * (x = h, or the gathered rows, xn = the xn buffer), and reads xn after neither call, so a backend may fold the norm
 * into the GEMV and never write xn (the CUDA backend at one token, DSINFER_CUDA_NORM_FOLD). Checked on the CPU backend
 * with the tiny fixtures: the wrapped engine's normed_linear is the CPU's rmsnorm then linear, after which xn is filled
 * with NaN (a read of it would show in the logits), and x is checked unchanged where xn is another buffer. The logits
 * must be the same bits as the engine without the op (which runs the same two ops), prompts fed whole, in chunks and
 * token by token, with one call a layer where the model has q_lora and one a step for the head. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "dsinfer.h"
#include "golden.h"
#include "model/engine.h"
#include "testutil.h"

static ds_backend orig;      /* the wrapped backend's own ops */
static long calls, in_place, x_changed;

/* backend.h normed_linear by the backend's own rmsnorm and linear; xn poisoned after (no caller may read it) */
static void t_normed_linear(ds_backend *be, float *out, float *xn, const float *x, const ds_weight *norm, float eps,
                            const ds_weight *w, int M) {
    const int K = w->cols;
    const size_t n = (size_t)M * (size_t)K;
    float *x0 = NULL;
    if (xn != x) {
        x0 = malloc(n * sizeof(float));
        DS_CHECK(x0 != NULL);
        memcpy(x0, x, n * sizeof(float));
    }
    orig.rmsnorm(be, xn, K, x, K, norm, M, K, eps);
    orig.linear(be, out, xn, w, M);
    for (size_t i = 0; i < n; i++) xn[i] = NAN;
    if (x0) {
        x_changed += memcmp(x0, x, n * sizeof(float)) != 0;
        free(x0);
    }
    calls++;
    in_place += xn == x;
}

static void check_fixture(const char *name) {
    ds_st_set *g;
    ds_engine *plain, *wrapped;
    if (!golden_engine_pair(name, &g, &plain, &wrapped)) return;
    CHECKF(plain->be->normed_linear == NULL, "%s: the CPU backend has its own normed_linear (this test wraps the ops)", name);
    orig = *wrapped->be;
    wrapped->be->normed_linear = t_normed_linear;
    const int V = ds_engine_vocab_size(plain), L = wrapped->cfg.num_layers, qlora = wrapped->cfg.q_lora_rank > 0;
    const int chunks[] = {0, 3, 1};
    for (int p = 0; golden_get(g, p, "input_ids"); p++) {
        const ds_st_tensor *ids = golden_get(g, p, "input_ids");
        const int T = (int)ids->numel;
        for (int c = 0; c < 3; c++) {
            const int steps = chunks[c] ? (T + chunks[c] - 1) / chunks[c] : 1;
            const long c0 = calls, i0 = in_place;
            const size_t differ = golden_pair_differ(plain, wrapped, ids->data, T, chunks[c], V);
            printf("%s p%d chunk %d: %d steps, %ld normed_linear calls (%ld in place), %zu of %zu logits differ\n", name, p,
                   chunks[c], steps, calls - c0, in_place - i0, differ, (size_t)T * V);
            CHECKF(differ == 0, "%s p%d chunk %d: %zu logits differ from the engine without normed_linear", name, p,
                   chunks[c], differ);
            CHECKF(calls - c0 == (long)steps * (qlora * L + 1) && in_place - i0 == (long)steps * qlora * L,
                   "%s p%d chunk %d: %ld calls, %ld in place (%d steps x (%d + 1) expected, %d x %d in place)", name, p,
                   chunks[c], calls - c0, in_place - i0, steps, qlora * L, steps, qlora * L);
        }
    }
    CHECKF(x_changed == 0, "%s: x changed by %ld calls whose xn was another buffer", name, x_changed);
    ds_engine_free(plain);
    ds_engine_free(wrapped);
    ds_st_close(g);
}

int main(void) {
    check_fixture("tiny-v3");   /* q_lora: the q_a norm in place, and the head */
    check_fixture("tiny-v2");   /* the head only */
    return test_result("test_normed_linear");
}
