/* CPU linear layers: out[M, N] = x[M, K] . W^T with W [N, K] in its stored dtype.
 *
 * Each thread takes a block of NB weight rows, turns them into fp32 (dequantizing FP8 blocks) laid out
 * k-major ([K][NB]), and runs a register-blocked kernel over all M activation rows: 4 rows of x times NB
 * outputs per pass, so every weight element is read once per call whatever M is, and the inner loop is
 * NB-wide SIMD. The kernel is compiled for AVX2+FMA and for baseline x86-64, chosen at run time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "core/status.h"

#define NB 16   /* weight rows per block = outputs per pass */
#define MB 4    /* activation rows per pass */

/* 8 floats in a SIMD register (GCC vector extension; one AVX register, two SSE ones). */
typedef float v8f __attribute__((vector_size(32)));

#define LOAD8(v, p) memcpy(&(v), (p), sizeof(v8f))

/* out[m, n0 + j] for j < nb, all m; wt is [K][NB] (columns >= nb are zero). Accumulators stay in
 * registers: MB rows x NB outputs = 8 vectors. fp-contract lets the compiler fuse multiply-adds. */
__attribute__((target_clones("arch=x86-64-v3", "default"), optimize("fp-contract=fast")))
static void block_kernel(float *out, int N, const float *x, int M, int K, const float *wt, int n0, int nb) {
    int m = 0;
    for (; m + MB <= M; m += MB) {
        v8f a00 = {0}, a01 = {0}, a10 = {0}, a11 = {0}, a20 = {0}, a21 = {0}, a30 = {0}, a31 = {0};
        const float *x0 = x + (size_t)m * K, *x1 = x0 + K, *x2 = x1 + K, *x3 = x2 + K;
        for (int k = 0; k < K; k++) {
            v8f w0, w1;
            LOAD8(w0, wt + (size_t)k * NB);
            LOAD8(w1, wt + (size_t)k * NB + 8);
            a00 += x0[k] * w0; a01 += x0[k] * w1;
            a10 += x1[k] * w0; a11 += x1[k] * w1;
            a20 += x2[k] * w0; a21 += x2[k] * w1;
            a30 += x3[k] * w0; a31 += x3[k] * w1;
        }
        float acc[MB][NB];
        memcpy(acc[0], &a00, 32); memcpy(acc[0] + 8, &a01, 32);
        memcpy(acc[1], &a10, 32); memcpy(acc[1] + 8, &a11, 32);
        memcpy(acc[2], &a20, 32); memcpy(acc[2] + 8, &a21, 32);
        memcpy(acc[3], &a30, 32); memcpy(acc[3] + 8, &a31, 32);
        for (int r = 0; r < MB; r++)
            for (int j = 0; j < nb; j++) out[(size_t)(m + r) * N + n0 + j] = acc[r][j];
    }
    for (; m < M; m++) {
        v8f a0 = {0}, a1 = {0};
        const float *xr = x + (size_t)m * K;
        for (int k = 0; k < K; k++) {
            v8f w0, w1;
            LOAD8(w0, wt + (size_t)k * NB);
            LOAD8(w1, wt + (size_t)k * NB + 8);
            a0 += xr[k] * w0;
            a1 += xr[k] * w1;
        }
        float acc[NB];
        memcpy(acc, &a0, 32);
        memcpy(acc + 8, &a1, 32);
        for (int j = 0; j < nb; j++) out[(size_t)m * N + n0 + j] = acc[j];
    }
}

/* Rows n0 .. n0+nb-1 of w into wt [K][NB], k-major; row is a K-float scratch. */
static void load_block(const ds_weight *w, int n0, int nb, float *wt, float *row) {
    int K = w->cols;
    if (nb < NB) memset(wt, 0, sizeof(float) * (size_t)K * NB);
    for (int j = 0; j < nb; j++) {
        ds_weight_row_f32(w, n0 + j, row);
        for (int k = 0; k < K; k++) wt[(size_t)k * NB + j] = row[k];
    }
}

size_t cpu_linear_scratch_floats(int max_cols) { return (size_t)max_cols * (NB + 1); }

void cpu_linear(ds_backend *be, float *out, const float *x, const ds_weight *w, int M) {
    ds_cpu_backend *cb = cpu_of(be);
    int N = w->rows, K = w->cols, n_blocks = (N + NB - 1) / NB;
    DS_CHECK(cpu_linear_scratch_floats(K) <= cb->thread_work_n);
#pragma omp parallel num_threads(cb->n_threads) if (CPU_PAR((double)N * K * M))
    {
        float *wt = cpu_thread_scratch(cb), *row = wt + (size_t)K * NB;
#pragma omp for schedule(static)
        for (int b = 0; b < n_blocks; b++) {
            int n0 = b * NB, nb = N - n0 < NB ? N - n0 : NB;
            load_block(w, n0, nb, wt, row);
            block_kernel(out, N, x, M, K, wt, n0, nb);
        }
    }
}

static inline float silu(float z) { return z / (1.0f + expf(-z)); }

/* Dense MLP / one expert (spec 8): out = down(SiLU(gate x) * up x). The [M, I] intermediates live in
 * the backend's mlp_work, sized by set_batch for the step's token count and grown here when an expert
 * gets more rows than that (expert parallelism: rows arrive from other ranks). */
void cpu_act_fp8(float *x, int n, int K) {
    for (size_t i = 0; i < (size_t)n; i++)
        for (int b = 0; b < K; b += 128) {
            float *r = x + i * (size_t)K + b, amax = 0.0f;
            for (int k = 0; k < 128; k++) amax = fmaxf(amax, fabsf(r[k]));
            float sc = fmaxf(amax, 1e-4f) / 448.0f;
            for (int k = 0; k < 128; k++) r[k] = ds_fp8_e4m3_to_f32(ds_f32_to_fp8_e4m3(r[k] / sc)) * sc;
        }
}

void cpu_mlp(ds_backend *be, float *out, const float *x, const ds_weight *gate, const ds_weight *up,
             const ds_weight *down, int M) {
    cpu_mlp_act(be, out, x, gate, up, down, M, 0);
}

void cpu_mlp_act(ds_backend *be, float *out, const float *x, const ds_weight *gate, const ds_weight *up,
                 const ds_weight *down, int M, int act_fp8) {
    ds_cpu_backend *cb = cpu_of(be);
    int I = gate->rows;
    size_t n = (size_t)M * (size_t)I;
    if (2 * n > cb->mlp_work_n) {
        free(cb->mlp_work);
        cb->mlp_work = ds_xmalloc(2 * n * sizeof(float));
        cb->mlp_work_n = 2 * n;
    }
    float *g = cb->mlp_work, *u = cb->mlp_work + n;
    cpu_linear(be, g, x, gate, M);
    cpu_linear(be, u, x, up, M);
#pragma omp parallel for num_threads(cb->n_threads) schedule(static) if (CPU_PAR(n * 16))
    for (size_t i = 0; i < n; i++) g[i] = silu(g[i]) * u[i];
    if (act_fp8) {   /* the engine's W8A8 experts store SiLU(g) * u in BF16, then quantize it */
        for (size_t i = 0; i < n; i++) g[i] = ds_bf16_to_f32(ds_f32_to_bf16(g[i]));
        cpu_act_fp8(g, M, I);
    }
    cpu_linear(be, out, g, down, M);
}
