/* CPU linear layers: out[M, N] = x[M, K] . W^T with W [N, K] in its stored dtype. Each thread turns one
 * weight row into fp32 (dequantizing FP8 blocks) and dots it with all M activation rows, so a weight is
 * read once per call whatever M is. */
#include <math.h>
#include <omp.h>

#include "backend/cpu/cpu.h"
#include "core/status.h"

void cpu_linear(ds_backend *be, float *out, const float *x, const ds_weight *w, int M) {
    ds_cpu_backend *cb = cpu_of(be);
    int N = w->rows, K = w->cols;
#pragma omp parallel num_threads(cb->n_threads)
    {
        float *row = cpu_thread_scratch(cb);
#pragma omp for schedule(static)
        for (int n = 0; n < N; n++) {
            ds_weight_row_f32(w, n, row);
            for (int m = 0; m < M; m++) out[(size_t)m * N + n] = cpu_dot(row, x + (size_t)m * K, K);
        }
    }
}

static inline float silu(float z) { return z / (1.0f + expf(-z)); }

/* Dense MLP / one expert (spec 8): out = down(SiLU(gate x) * up x). The [M, I] intermediates live in
 * the backend's mlp_work, sized by set_batch for the step's token count. */
void cpu_mlp(ds_backend *be, float *out, const float *x, const ds_weight *gate, const ds_weight *up,
             const ds_weight *down, int M) {
    ds_cpu_backend *cb = cpu_of(be);
    int I = gate->rows;
    size_t n = (size_t)M * (size_t)I;
    DS_CHECK(2 * n <= cb->mlp_work_n);
    float *g = cb->mlp_work, *u = cb->mlp_work + n;
    cpu_linear(be, g, x, gate, M);
    cpu_linear(be, u, x, up, M);
#pragma omp parallel for num_threads(cb->n_threads) schedule(static)
    for (size_t i = 0; i < n; i++) g[i] = silu(g[i]) * u[i];
    cpu_linear(be, out, g, down, M);
}
