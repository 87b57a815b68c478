/* Every CUDA op against the CPU op on fresh random inputs (like ggml's test-backend-ops):
 *  - shapes: DeepSeek-V3 (FP8 weights, 128 heads, 256 experts top-8) and V2-Lite (BF16, 16 heads,
 *    64 experts top-6) from configs/, and odd ones: 1, 3 and 63 heads, the tiny FP8 fixture's
 *    partial 128-blocks; M (new tokens) in {1, 4, 128, 4096} for every op. Where the CPU reference of
 *    the whole output would take too long (more than REF_FULL_MACS multiply-adds: lm_head, MLP and MoE
 *    at 4096 tokens, V3 attention at 4096) the GPU still computes all M rows, every row is checked for
 *    NaN (unwritten) and the sentinel, and the NMSE is taken on REF_ROWS sampled rows that the CPU
 *    computes alone (rows are independent in these ops; attention keeps each sampled query's position
 *    and whole cached context, see check_attention_sampled);
 *  - batches: ragged sequences with cached context, a zero-length sequence, an empty one, shuffled
 *    page tables, unused KV pages full of NaN, page sizes 16 and 5;
 *  - outputs poisoned with NaN before each op (unwritten elements show) and followed by a sentinel
 *    (writes past the end show); errors as NMSE = sum (gpu - cpu)^2 / sum cpu^2 per op; NaN never passes.
 * Both backends compute in fp32 from the same stored-dtype weights, so the thresholds are those of fp32
 * summation order, the same for BF16 and FP8 weights (THR_*).
 * The seed is printed; DSINFER_SEED=<n> repeats a run, and with DSINFER_OPS_ONLY=<name> one test of it (each test's
 * data comes from the seed and the test's call; DSINFER_OPS_SHARED_RNG=1: one sequence through the run, as before the
 * fifty-sixth session; DSINFER_OPS_STOP_AFTER=<run_name> ends the run after that test). DSINFER_OPS_SMALL=1
 * runs only the small shapes (for compute-sanitizer); DSINFER_OPS_MAX_M=<n> skips the cases with more than n tokens
 * (quick GPU runs: the CPU reference of the 4096-token cases is most of the time). The opt-in BF16 tensor-core GEMM path
 * (DSINFER_CUDA_TC=1) is checked on a second CUDA backend against the same fp32 CPU op with a bf16-level
 * threshold (THR_TC). Skips (exit 77) without a CUDA build or a Hopper GPU. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "core/dtype.h"
#include "core/tune_cache.h"
#include "core/status.h"
#include "dsinfer.h"
#include "loader/config.h"
#include "testutil.h"

#ifndef DS_HAVE_CUDA
int main(void) { test_skip("built without CUDA (nvcc not found at build time)"); }
#else
#include <unistd.h>

#include "backend/cuda/cuda_api.h"
#include "core/env_check.h"

#define PAD 64                 /* sentinel floats after every output */
#define SENTINEL 1234567.0f
#define THR_EXACT 1e-12        /* copies, gathers, elementwise */
#define THR_GEMM 1e-9          /* fp32 dot products in another order */
#define THR_ATTN 1e-9
#define THR_MOE 1e-8
#define MAX_TC_MS 8
#define GEMV_MAX_M_TEST 8     /* the CUDA backend's GEMV_MAX_M (cuda.h): GEMV kernels up to this many rows */
#define THR_TC 1e-4            /* BF16 tensor cores: activations rounded to bf16 (NMSE ~1e-6 expected) */
#define THR_GUB 3e-4           /* the grouped prefill MoE with gate / up's sums rounded to BF16 before the SiLU kernel's FP8
                                  codes (DSINFER_CUDA_MOE_GU_BF16, the default since the forty-second session; vLLM's and
                                  SGLang's FP8 MoE keep that intermediate in BF16 too): where a product's rounding moves its
                                  FP8 code a step; measured 1.15e-4 at V3 (M 1100), 1.8e-5 at V2-Lite, against the CPU's
                                  fp32 sums. Taken only where the process-wide count says such a launch ran. */
#define THR_W8A8 1e-6          /* FP8 GEMM vs a CPU reference quantizing x the same way: FP8 tensor-core
                                  accumulation inside each 128-block (~14 bits), fp32 across blocks */
#define REF_FULL_MACS 5e11   /* above this many multiply-adds the CPU reference runs on sampled rows */
#define REF_ROWS 192           /* rows sampled (the first and the last always among them) */
static int max_m = 1 << 30;    /* DSINFER_OPS_MAX_M */

static uint64_t rng_state;
static uint64_t rnd(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float unif(void) { return (float)(rnd() >> 40) * (1.0f / 8388608.0f) - 1.0f; }   /* [-1, 1) */
static int rint_below(int n) { return n > 0 ? (int)(rnd() % (uint64_t)n) : 0; }

typedef struct {
    const char *name;
    ds_config cfg;
    ds_backend *cpu, *gpu;
    int page_size;
    double thr_absorbed;   /* the absorbed attention's threshold; 0: THR_ATTN */
    double thr_naive;      /* the naive attention's threshold; 0: THR_ATTN */
} setup;

/* ---- buffers: host reference and device copy, both with sentinels ------------------------------- */
typedef struct {
    float *h;    /* host (CPU backend memory), n + PAD */
    float *d;    /* device, n + PAD */
    size_t n;
} buf;

static buf buf_new(setup *s, size_t n) {
    buf b = {malloc((n + PAD) * sizeof(float)), s->gpu->alloc(s->gpu, n + PAD), n};
    DS_CHECK(b.h && b.d);
    return b;
}
static void buf_free(setup *s, buf *b) { free(b->h); s->gpu->release(s->gpu, b->d); }

/* Same random content (scaled by amp) on both sides. */
static void buf_rand(buf *b, float amp) {
    for (size_t i = 0; i < b->n; i++) b->h[i] = amp * unif();
    for (size_t i = 0; i < PAD; i++) b->h[b->n + i] = SENTINEL;
    ds_cuda_from_host(NULL, b->d, b->h, b->n + PAD);
}
/* An output: NaN everywhere, sentinel after. */
static void buf_poison(buf *b) {
    for (size_t i = 0; i < b->n; i++) b->h[i] = NAN;
    for (size_t i = 0; i < PAD; i++) b->h[b->n + i] = SENTINEL;
    ds_cuda_from_host(NULL, b->d, b->h, b->n + PAD);
}

/* Compares the device buffer with the host reference; nan_ok: NaN in both at the same place passes
 * (KV pages left unused on purpose). Prints one line. */
static void compare(setup *s, const char *op, int M, const buf *b, double thr, int nan_ok) {
    float *g = malloc((b->n + PAD) * sizeof(float));
    ds_cuda_download_bytes(s->gpu, g, b->d, (b->n + PAD) * sizeof(float));
    double num = 0, den = 0;
    size_t bad_nan = 0, sent = 0;
    for (size_t i = 0; i < b->n; i++) {
        int gn = isnan(g[i]), rn = isnan(b->h[i]);
        if (gn || rn) {
            if (!(gn && rn && nan_ok)) bad_nan++;
            continue;
        }
        double d = (double)g[i] - b->h[i];
        num += d * d;
        den += (double)b->h[i] * b->h[i];
    }
    for (size_t i = 0; i < PAD; i++) sent += g[b->n + i] != SENTINEL;
    double nmse = num / (den > 0 ? den : 1);
    int ok = !bad_nan && !sent && nmse <= thr;
    /* the reference's rms shows the outputs are not trivially zero (NMSE 0 means bitwise equal sums) */
    printf("  %-8s %-22s M=%-5d n=%-10zu nmse %.2e (thr %.0e) ref rms %.3g%s%s\n", s->name, op, M, b->n, nmse, thr,
           sqrt(den / (double)(b->n ? b->n : 1)), bad_nan ? "  NaN/unwritten!" : "", sent ? "  SENTINEL OVERWRITTEN!" : "");
    CHECKF(ok, "%s %s M=%d: nmse %.3g, %zu NaN mismatches, %zu sentinel writes", s->name, op, M, nmse, bad_nan, sent);
    free(g);
}

/* R distinct sorted row indices of [0, M): 0 and M-1 always, the rest random. Returns R. */
static int sample_rows(int M, int want, int32_t *rows) {
    if (want >= M) {
        for (int i = 0; i < M; i++) rows[i] = i;
        return M;
    }
    char *taken = calloc((size_t)M, 1);
    int R = 0;
    taken[0] = taken[M - 1] = 1;
    R = M > 1 ? 2 : 1;
    while (R < want) {
        int r = rint_below(M);
        if (!taken[r]) { taken[r] = 1; R++; }
    }
    R = 0;
    for (int i = 0; i < M; i++) if (taken[i]) rows[R++] = i;
    free(taken);
    return R;
}

/* The device output d[M, W] (+ sentinel) against a host reference of R sampled rows ref[R, W]: every
 * element of all M rows must be a number (NaN means unwritten: d was poisoned), the sentinel intact,
 * and the NMSE over the sampled rows within thr. exclude (may be NULL): per sampled row, 1 = left out of
 * the NMSE (routing near-ties, see check_moe). */
static void compare_rows(setup *s, const char *op, int M, const float *d, int W, const float *ref, const int32_t *rows,
                         int R, const char *exclude, double thr) {
    size_t n = (size_t)M * W;
    float *g = malloc((n + PAD) * sizeof(float));
    ds_cuda_download_bytes(s->gpu, g, d, (n + PAD) * sizeof(float));
    size_t nan_n = 0, sent = 0;
    for (size_t i = 0; i < n; i++) nan_n += isnan(g[i]) != 0;
    for (size_t i = 0; i < PAD; i++) sent += g[n + i] != SENTINEL;
    double num = 0, den = 0;
    int used = 0;
    for (int r = 0; r < R; r++) {
        if (exclude && exclude[r]) continue;
        used++;
        for (int k = 0; k < W; k++) {
            double gv = g[(size_t)rows[r] * W + k], rv = ref[(size_t)r * W + k];
            if (isnan(rv)) { nan_n++; continue; }
            num += (gv - rv) * (gv - rv);
            den += rv * rv;
        }
    }
    double nmse = num / (den > 0 ? den : 1);
    int ok = !nan_n && !sent && nmse <= thr && used > 0;
    printf("  %-8s %-22s M=%-5d n=%-10zu nmse %.2e (thr %.0e) on %d sampled rows, ref rms %.3g%s%s\n", s->name, op, M,
           n, nmse, thr, used, sqrt(den / ((double)used * W > 0 ? (double)used * W : 1)), nan_n ? "  NaN/unwritten!" : "",
           sent ? "  SENTINEL OVERWRITTEN!" : "");
    CHECKF(ok, "%s %s M=%d: nmse %.3g on %d rows, %zu NaN, %zu sentinel writes", s->name, op, M, nmse, used, nan_n, sent);
    free(g);
}

/* x[rows[r], 0:W] for r < R, into a new host array [R, W]. */
static float *take_rows(const float *x, int W, const int32_t *rows, int R) {
    float *t = malloc(sizeof(float) * (size_t)R * W);
    for (int r = 0; r < R; r++) memcpy(t + (size_t)r * W, x + (size_t)rows[r] * W, sizeof(float) * W);
    return t;
}

/* ---- weights ------------------------------------------------------------------------------------ */
typedef struct {
    ds_weight h, d;
} wpair;

/* FP8 weights from mk_weight hold every e4m3 code but the two NaNs (each run of 256 values a permutation of the codes:
 * zeros and subnormals included, which the random codes never are) while set (run_fp8_codes) */
static int w_all_codes = 0;
static uint8_t all_codes_at(size_t j) {
    uint8_t b = (uint8_t)((j * 37 + j / 256) & 0xff);
    return (b & 0x7f) == 0x7f ? (uint8_t)(b ^ 1) : b;   /* NaN (0x7f, 0xff) -> +-448 (0x7e, 0xfe) */
}

/* A random weight [rows, cols] in dtype (FP8 with random block scales), on the host and the device. */
static wpair mk_weight(setup *s, int rows, int cols, ds_dtype dt, float amp, const char *name) {
    wpair w;
    memset(&w, 0, sizeof w);
    size_t n = (size_t)rows * cols;
    w.h.dtype = dt;
    w.h.rows = rows;
    w.h.cols = cols;
    w.h.name = name;
    void *data = malloc(dt == DS_DTYPE_NVFP4 ? n / 2 + 1 : n * ds_dtype_size(dt) + 1);
    if (dt == DS_DTYPE_NVFP4) {   /* cols % 16 == 0: random E2M1 codes, block scales in [0.25, 3.75], global amp/4 */
        uint8_t *p = data, *bs = malloc(n / 16 + 1);
        for (size_t i = 0; i < n / 2; i++) p[i] = (uint8_t)rnd();
        for (size_t i = 0; i < n / 16; i++) {
            uint8_t b = (uint8_t)rnd();
            bs[i] = (uint8_t)(((5 + ((b >> 3) & 3)) << 3) | (b & 7));   /* positive, like the checkpoints' */
        }
        w.h.block_scale = bs;
        w.h.global_scale = amp * 0.25f;
    } else if (dt == DS_DTYPE_F8_E4M3) {
        uint8_t *p = data;
        uint64_t seed = rnd();
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i += 8) {
            uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
            z ^= z >> 31;
            for (size_t j = i; j < i + 8 && j < n; j++, z >>= 8) {
                uint8_t b = (uint8_t)z;   /* sign, mantissa random; exponent 5..8: |v| in [0.25, 3.75] */
                p[j] = w_all_codes ? all_codes_at(j) : (uint8_t)((b & 0x80) | ((5 + ((b >> 3) & 3)) << 3) | (b & 7));
            }
        }
        int sr = (rows + 127) / 128, sc = (cols + 127) / 128;
        float *scale = malloc(sizeof(float) * (size_t)sr * sc);
        for (int i = 0; i < sr * sc; i++) scale[i] = amp * (0.5f + 0.25f * (unif() + 1.0f));
        w.h.scale = scale;
        w.h.scale_cols = sc;
    } else if (dt == DS_DTYPE_BF16) {
        uint16_t *p = data;
        for (size_t i = 0; i < n; i++) p[i] = ds_f32_to_bf16(amp * unif());
    } else {
        float *p = data;
        for (size_t i = 0; i < n; i++) p[i] = amp * unif();
    }
    w.h.data = data;
    char err[DS_ERRLEN];
    CHECKF(ds_cuda_weight_upload(s->gpu, &w.h, &w.d, err) == DS_OK, "%s", err);
    return w;
}

static void free_weight(wpair *w) {
    free((void *)w->h.data);
    free((void *)w->h.scale);
    free((void *)w->h.block_scale);
}

static ds_dtype linear_dtype(const setup *s) { return s->cfg.fp8 ? DS_DTYPE_F8_E4M3 : DS_DTYPE_BF16; }
static float linear_amp(const setup *s, int cols) {   /* keeps outputs O(1) for inputs O(1) */
    return (s->cfg.fp8 ? 0.5f : 1.0f) / sqrtf((float)cols);
}

/* ---- batches ------------------------------------------------------------------------------------ */
typedef struct {
    ds_batch_meta m;
    int32_t tokens[8192], positions[8192], seq_start[65], seq_ctx[64], *pt;
    int n_pages, max_pages;
    int seqs[64];
} batch;

/* Ragged batch of M new tokens: random sequences with cached context up to max_cached, plus a
 * zero-length sequence (cached context, no new token) and an empty one; pages handed out shuffled
 * from a pool with spare (NaN) pages. */
static void mk_batch(setup *s, batch *b, int M, int max_cached, int vocab) {
    memset(b, 0, sizeof *b);
    int n_new[64], cached[64], S = 0, left = M, ps = s->page_size;
    int zl = rint_below(3);   /* where the zero-length and empty sequences go */
    while (left > 0 || S < zl + 2) {
        if (S == zl) { n_new[S] = 0; cached[S++] = 1 + rint_below(max_cached > 0 ? max_cached : 1); continue; }
        if (S == zl + 1) { n_new[S] = 0; cached[S++] = 0; continue; }
        int n = left <= 1 || rint_below(3) == 0 ? (left > 0) : 1 + rint_below(left);
        if (S >= 60) n = left;
        n_new[S] = n;
        cached[S++] = rint_below(max_cached + 1);
        left -= n;
    }
    int pt_stride = 1, total_pages = 8;   /* 8 spare pages stay unused */
    for (int i = 0; i < S; i++) {
        int np = (cached[i] + n_new[i] + ps - 1) / ps;
        pt_stride = np > pt_stride ? np : pt_stride;
        total_pages += np;
    }
    int *perm = malloc(sizeof(int) * total_pages);
    for (int i = 0; i < total_pages; i++) perm[i] = i;
    for (int i = total_pages - 1; i > 0; i--) {
        int j = rint_below(i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    b->pt = calloc((size_t)S * pt_stride, sizeof(int32_t));
    int m = 0, next = 0;
    for (int i = 0; i < S; i++) {
        b->seq_start[i] = m;
        b->seq_ctx[i] = cached[i] + n_new[i];
        for (int p = 0; p < (b->seq_ctx[i] + ps - 1) / ps; p++) b->pt[(size_t)i * pt_stride + p] = perm[next++];
        for (int t = 0; t < n_new[i]; t++, m++) {
            b->tokens[m] = rint_below(vocab);
            b->positions[m] = cached[i] + t;
        }
        b->seqs[i] = i;
    }
    b->seq_start[S] = m;
    free(perm);
    b->n_pages = total_pages;
    b->m = (ds_batch_meta){.n_tokens = M, .n_seqs = S, .tokens = b->tokens, .positions = b->positions,
                           .seq_start = b->seq_start, .seq_ctx = b->seq_ctx, .page_table = b->pt,
                           .pt_stride = pt_stride, .page_size = ps};
}

static void set_batch(setup *s, batch *b) {
    char err[DS_ERRLEN];
    CHECK(s->cpu->set_batch(s->cpu, &b->m, err) == DS_OK);
    CHECK(s->gpu->set_batch(s->gpu, &b->m, err) == DS_OK);
}

/* The CPU backend sizes its scratch in set_batch: a plain batch of M tokens before ops called alone. */
static void prime(setup *s, int M) {
    batch b;
    mk_batch(s, &b, M, 0, 16);
    set_batch(s, &b);
    free(b.pt);
}

/* prime for the CPU backend alone (a CPU reference on R sampled rows after a GPU op on M rows: the GPU
 * backend's batch stays as the op saw it). */
static void prime_cpu(setup *s, int R) {
    batch b;
    char err[DS_ERRLEN];
    mk_batch(s, &b, R, 0, 16);
    CHECK(s->cpu->set_batch(s->cpu, &b.m, err) == DS_OK);
    free(b.pt);
}

/* A KV cache for b: every context position random, unused pages NaN (bytes 0xFF, NaN in fp32 and in
 * e4m3 alike). With cfg.kv_fp8 / kv_bf16 the entries are in that layout (packed by the CPU's packer) and the
 * buffer holds the bytes rounded up to whole floats. */
static buf mk_cache(setup *s, const batch *b) {
    int w = s->cfg.kv_lora_rank + s->cfg.qk_rope_head_dim, ps = s->page_size;
    size_t tb = ds_kv_token_bytes(&s->cfg), bytes = (size_t)b->n_pages * ps * tb;
    buf c = buf_new(s, (bytes + 3) / 4);
    memset(c.h, 0xFF, c.n * sizeof(float));
    float *row = malloc(sizeof(float) * w);
    for (int i = 0; i < b->m.n_seqs; i++)
        for (int p = 0; p < b->seq_ctx[i]; p++) {
            unsigned char *e = (unsigned char *)c.h + ((size_t)b->pt[(size_t)i * b->m.pt_stride + p / ps] * ps + p % ps) * tb;
            for (int k = 0; k < w; k++) row[k] = unif();
            cpu_kv_pack(&s->cfg, row, e);
        }
    free(row);
    for (size_t i = 0; i < PAD; i++) c.h[c.n + i] = SENTINEL;
    ds_cuda_from_host(NULL, c.d, c.h, c.n + PAD);
    return c;
}

/* how many of the n units of `unit` bytes differ between device buffers a and b (the bit-for-bit checks of a path
 * against the one it replaces) */
static size_t device_units_differ(setup *s, const void *a, const void *b, size_t n, size_t unit) {
    unsigned char *x = malloc(n * unit), *y = malloc(n * unit);
    ds_cuda_download_bytes(s->gpu, x, a, n * unit);
    ds_cuda_download_bytes(s->gpu, y, b, n * unit);
    size_t diff = 0;
    for (size_t i = 0; i < n; i++) diff += memcmp(x + i * unit, y + i * unit, unit) != 0;
    free(x);
    free(y);
    return diff;
}

/* NMSE of device fp32 a against b, n values */
static double device_nmse(setup *s, const float *a, const float *b, size_t n) {
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    ds_cuda_download_bytes(s->gpu, x, a, n * sizeof(float));
    ds_cuda_download_bytes(s->gpu, y, b, n * sizeof(float));
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)x[i] - y[i];
        num += e * e;
        den += (double)y[i] * y[i];
    }
    free(x);
    free(y);
    return den > 0 ? num / den : num > 0 ? INFINITY : 0;
}

/* The FP8 cache after kv_store on both sides: byte for byte equal (same packer arithmetic), the
 * untouched NaN pages and the sentinel included. */
static void compare_cache_bytes(setup *s, int M, const buf *c) {
    size_t nb = (c->n + PAD) * sizeof(float), differ = 0, first = (size_t)-1;
    unsigned char *g = malloc(nb);
    ds_cuda_download_bytes(s->gpu, g, c->d, nb);
    const unsigned char *h = (const unsigned char *)c->h;
    for (size_t i = 0; i < nb; i++)
        if (g[i] != h[i]) {
            differ++;
            if (first == (size_t)-1) first = i;
        }
    const char *layout = s->cfg.kv_fp8 ? "FP8" : "BF16";
    printf("  %-8s kv_store %-4s (NaN pages) M=%-5d bytes=%-9zu %zu bytes differ%s\n", s->name, layout, M, nb, differ,
           differ ? "  MISMATCH!" : "");
    CHECKF(!differ, "%s kv_store %s M=%d: %zu of %zu bytes differ (first at byte %zu, entry %zu)", s->name, layout, M, differ,
           nb, first, first / ds_kv_token_bytes(&s->cfg));
    free(g);
}

/* ---- op checks ---------------------------------------------------------------------------------- */
static void check_elementwise(setup *s, int M) {
    const ds_config *c = &s->cfg;
    int D = c->hidden_size, C = c->kv_lora_rank, dr = c->qk_rope_head_dim, H = c->num_heads, dqk = c->qk_head_dim;
    int vocab = 4096;   /* embedding rows: the op depends on D only; a real vocabulary would be 2 GB here */
    batch b;
    mk_batch(s, &b, M, 40, vocab);
    set_batch(s, &b);
    wpair emb = mk_weight(s, vocab, D, DS_DTYPE_BF16, 1.0f, "embed");
    buf out = buf_new(s, (size_t)M * D);
    buf_poison(&out);
    s->cpu->embed(s->cpu, out.h, &emb.h);
    s->gpu->embed(s->gpu, out.d, &emb.d);
    compare(s, "embed", M, &out, THR_EXACT, 0);

    wpair nw = mk_weight(s, 1, D, DS_DTYPE_BF16, 1.0f, "norm");
    buf x = buf_new(s, (size_t)M * D);
    buf_rand(&x, 3.0f);
    buf_poison(&out);
    s->cpu->rmsnorm(s->cpu, out.h, D, x.h, D, &nw.h, M, D, c->rms_norm_eps);
    s->gpu->rmsnorm(s->gpu, out.d, D, x.d, D, &nw.d, M, D, c->rms_norm_eps);
    compare(s, "rmsnorm", M, &out, THR_GEMM, 0);

    s->cpu->add(s->cpu, out.h, x.h, (size_t)M * D);
    s->gpu->add(s->gpu, out.d, x.d, (size_t)M * D);
    compare(s, "add", M, &out, THR_EXACT, 0);

    /* the fused residual add + norm: both the residual stream (h += x) and the normed rows; and the
     * latent norm's odd width through it (n % 4 != 0: the unfused kernels) */
    buf xn = buf_new(s, (size_t)M * D);
    buf_poison(&xn);
    s->cpu->add_rmsnorm(s->cpu, xn.h, out.h, x.h, &nw.h, M, D, c->rms_norm_eps);
    s->gpu->add_rmsnorm(s->gpu, xn.d, out.d, x.d, &nw.d, M, D, c->rms_norm_eps);
    compare(s, "add_rmsnorm residual", M, &out, THR_EXACT, 0);
    compare(s, "add_rmsnorm normed", M, &xn, THR_GEMM, 0);
    buf_free(s, &xn);

    /* latent norm in place on [M, C+dr] rows: the k_pe part must stay as it is */
    wpair kvn = mk_weight(s, 1, C, DS_DTYPE_BF16, 1.0f, "kv_norm");
    buf kv = buf_new(s, (size_t)M * (C + dr));
    buf_rand(&kv, 2.0f);
    s->cpu->rmsnorm(s->cpu, kv.h, C + dr, kv.h, C + dr, &kvn.h, M, C, 1e-6f);
    s->gpu->rmsnorm(s->gpu, kv.d, C + dr, kv.d, C + dr, &kvn.d, M, C, 1e-6f);
    compare(s, "rmsnorm strided inplace", M, &kv, THR_GEMM, 0);

    s->cpu->rope(s->cpu, kv.h, C + dr, 1, 0, C);
    s->gpu->rope(s->gpu, kv.d, C + dr, 1, 0, C);
    compare(s, "rope kv", M, &kv, THR_GEMM, 0);

    buf q = buf_new(s, (size_t)M * H * dqk);
    buf_rand(&q, 1.0f);
    for (int i = 0; i < M; i++) b.positions[i] = rint_below(16384);   /* long positions (YaRN) */
    set_batch(s, &b);
    s->cpu->rope(s->cpu, q.h, H * dqk, H, dqk, c->qk_nope_head_dim);
    s->gpu->rope(s->gpu, q.d, H * dqk, H, dqk, c->qk_nope_head_dim);
    compare(s, "rope q (pos < 16384)", M, &q, THR_GEMM, 0);

    mk_batch(s, &b, M, 40, vocab);   /* kv_store needs consistent positions */
    set_batch(s, &b);
    buf cache = mk_cache(s, &b);
    /* Both sides store the same rows: the rope above leaves ~1e-15 differences, enough to move a value
     * across an e4m3 rounding boundary and change one code (seen on the H200, 2026-11-30). */
    ds_cuda_from_host(NULL, kv.d, kv.h, kv.n + PAD);
    s->cpu->kv_store(s->cpu, cache.h, kv.h);
    s->gpu->kv_store(s->gpu, cache.d, kv.d);
    if (c->kv_fp8 || c->kv_bf16) compare_cache_bytes(s, M, &cache);
    else compare(s, "kv_store (NaN pages)", M, &cache, THR_EXACT, 1);

    int R = M < 3 ? M : M / 3 + 1;
    int32_t *rows = malloc(sizeof(int32_t) * R);
    for (int i = 0; i < R; i++) rows[i] = rint_below(M);
    buf g = buf_new(s, (size_t)R * D);
    buf_poison(&g);
    s->cpu->gather_rows(s->cpu, g.h, x.h, rows, R, D);
    s->gpu->gather_rows(s->gpu, g.d, x.d, rows, R, D);
    compare(s, "gather_rows", R, &g, THR_EXACT, 0);

    free(rows);
    free(b.pt);
    buf *bufs[] = {&out, &x, &kv, &q, &cache, &g};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) buf_free(s, bufs[i]);
    free_weight(&emb); free_weight(&nw); free_weight(&kvn);
}

/* tc: the linear runs on a second CUDA backend created with DSINFER_CUDA_TC=1 (M > GEMV_MAX_M on the
 * tensor cores), compared with THR_TC. */
static void check_linear_on(setup *s, const char *what, int N, int K, ds_dtype dt, const int *Ms, int nM, int tc) {
    ds_backend *gpu = s->gpu;
    if (tc) {
        char err[DS_ERRLEN];
        setenv("DSINFER_CUDA_TC", "1", 1);
        if (!strcmp(what, "skinny")) setenv("DSINFER_CUDA_SKINNY", "1", 1);   /* opt-in: cuda_moe_tc.cu */
        int w8_set = getenv("DSINFER_CUDA_FP8_GEMM") != NULL;   /* W8A8 linears (default with TC) where asked */
        if (!w8_set) setenv("DSINFER_CUDA_FP8_GEMM", "0", 1);
        gpu = ds_backend_cuda_new(&s->cfg, err);
        unsetenv("DSINFER_CUDA_TC");
        unsetenv("DSINFER_CUDA_SKINNY");
        if (!w8_set) unsetenv("DSINFER_CUDA_FP8_GEMM");
        if (!gpu) { CHECKF(0, "%s", err); return; }
    }
    wpair w = mk_weight(s, N, K, dt, dt == DS_DTYPE_F8_E4M3 ? 0.5f / sqrtf((float)K) : 1.0f / sqrtf((float)K), what);
    for (int i = 0; i < nM; i++) {
        int M = Ms[i];
        if (M > max_m) continue;
        prime(s, M);
        buf x = buf_new(s, (size_t)M * K), out = buf_new(s, (size_t)M * N);
        buf_rand(&x, 1.0f);
        buf_poison(&out);
        gpu->linear(gpu, out.d, x.d, &w.d, M);
        char name[96];
        snprintf(name, sizeof name, "linear%s %s %s", tc ? " TC" : "", what, ds_dtype_name(dt));
        if ((double)M * N * K <= REF_FULL_MACS) {
            s->cpu->linear(s->cpu, out.h, x.h, &w.h, M);
            compare(s, name, M, &out, tc ? THR_TC : THR_GEMM, 0);
        } else {
            int32_t rows[REF_ROWS];
            int R = sample_rows(M, REF_ROWS, rows);
            float *xs = take_rows(x.h, K, rows, R);
            prime_cpu(s, R);
            s->cpu->linear(s->cpu, out.h, xs, &w.h, R);
            compare_rows(s, name, M, out.d, N, out.h, rows, R, NULL, tc ? THR_TC : THR_GEMM);
            free(xs);
        }
        buf_free(s, &x);
        buf_free(s, &out);
    }
    free_weight(&w);
    if (tc) gpu->destroy(gpu);
}

/* x quantized per row x 128 columns as the W8A8 path does (cuda_fp8gemm.cu, spec 12.2), dequantized. */
static void act_quant_ref(float *dst, const float *x, int M, int K) {
    for (int m = 0; m < M; m++)
        for (int b0 = 0; b0 < K; b0 += 128) {
            const float *r = x + (size_t)m * K + b0;
            float amax = 0.0f;
            for (int k = 0; k < 128; k++) amax = fmaxf(amax, fabsf(r[k]));
            float sc = fmaxf(amax, 1e-4f) / 448.0f;
            for (int k = 0; k < 128; k++)
                dst[(size_t)m * K + b0 + k] = ds_fp8_e4m3_to_f32(ds_f32_to_fp8_e4m3(r[k] / sc)) * sc;
        }
}

/* x [M, K]: new uniform values with one outlier a row (x40), uploaded: the W8A8 checks' input */
static void w8a8_input(buf *x, int M, int K) {
    buf_rand(x, 1.0f);
    for (int m = 0; m < M; m++) x->h[(size_t)m * K + (size_t)(m % K)] *= 40.0f;
    ds_cuda_from_host(NULL, x->d, x->h, x->n + PAD);
}

/* W8A8 (DSINFER_CUDA_FP8_GEMM=1, cuBLASLt block-scaled FP8) on a second CUDA backend, against the CPU
 * linear of the same weight on x quantized the same way (THR_W8A8); the distance to the fp32-activation
 * result is printed (the accuracy cost of quantizing activations, not a check). M not a multiple of 4
 * exercises the padding. */
static void check_linear_w8a8(setup *s, const char *what, int N, int K, const int *Ms, int nM) {
    char err[DS_ERRLEN];
    setenv("DSINFER_CUDA_FP8_GEMM", "1", 1);
    ds_backend *gpu = ds_backend_cuda_new(&s->cfg, err);
    unsetenv("DSINFER_CUDA_FP8_GEMM");
    if (!gpu) { CHECKF(0, "%s", err); return; }
    wpair w = mk_weight(s, N, K, DS_DTYPE_F8_E4M3, 0.5f / sqrtf((float)K), what);
    for (int i = 0; i < nM; i++) {
        int M = Ms[i];
        if (M > max_m) continue;
        prime(s, M);
        buf x = buf_new(s, (size_t)M * K), out = buf_new(s, (size_t)M * N);
        /* twice, on different inputs: the second launch finds the split-K tickets the first one left (zero) and
         * the first one's partials in the split-K buffer, which a sum taken too early would read */
        for (int pass = 0; pass < 2; pass++) {
            w8a8_input(&x, M, K);
            buf_poison(&out);
            gpu->linear(gpu, out.d, x.d, &w.d, M);
        }
        float *xq = malloc(sizeof(float) * (size_t)M * K), *exact = malloc(sizeof(float) * (size_t)M * N);
        act_quant_ref(xq, x.h, M, K);
        s->cpu->linear(s->cpu, exact, x.h, &w.h, M);
        s->cpu->linear(s->cpu, out.h, xq, &w.h, M);
        double num = 0, den = 0;
        for (size_t k = 0; k < (size_t)M * N; k++) {
            num += ((double)out.h[k] - exact[k]) * ((double)out.h[k] - exact[k]);
            den += (double)exact[k] * exact[k];
        }
        printf("  %-8s W8A8 %s: activation quantization alone moves the output by nmse %.2e\n", s->name, what, num / den);
        char name[96];
        snprintf(name, sizeof name, "linear W8A8 %s", what);
        compare(s, name, M, &out, THR_W8A8, 0);
        free(xq);
        free(exact);
        buf_free(s, &x);
        buf_free(s, &out);
    }
    free_weight(&w);
    gpu->destroy(gpu);
}

/* A W8A8 backend (DSINFER_CUDA_FP8_GEMM=1, TC on), with env name set to val unless val is NULL */
static ds_backend *w8_backend_with(setup *s, const char *name, const char *val, char *err) {
    setenv("DSINFER_CUDA_FP8_GEMM", "1", 1);
    setenv("DSINFER_CUDA_TC", "1", 1);
    if (val) setenv(name, val, 1);
    ds_backend *gpu = ds_backend_cuda_new(&s->cfg, err);
    unsetenv("DSINFER_CUDA_FP8_GEMM");
    unsetenv("DSINFER_CUDA_TC");
    if (val) unsetenv(name);
    return gpu;
}

/* linear2 (two weights of one input, backend.h; cuda_linear.cu cu_linear2: one launch where it can, DSINFER_CUDA_HFUSE)
 * against the CPU's two linears, on a backend with the W8A8 linears on (DSINFER_CUDA_FP8_GEMM=1): BF16 weights by
 * the v2 GEMV in its two-weight form at 1, 4 and 8 rows (THR_GEMM against fp32 activations) and two tensor-core
 * linears above (THR_TC); FP8 ones by the GEMV below w8_min_m rows (1 by default), from there by the W8A8 kernel (4 ..
 * 64: both weights in one launch, split K; 65, 130: x quantized once, DSINFER_CUDA_W8_SHARED_X) against the CPU on x
 * quantized the same way (THR_W8A8). Each launch twice, the second on a new x (the
 * split-K tickets and partials the first one left). */
#define W8_MIN_M_TEST 2   /* the CUDA backend's default DSINFER_CUDA_FP8_GEMM_MIN_M (cuda_backend.cu) */
static int w8_min_m = W8_MIN_M_TEST;   /* rows from which FP8 linears are W8A8 (run_w8a8_small sets it to 1) */

static void check_linear2(setup *s, const char *what, int N1, int N2, int K, ds_dtype dt) {
    char err[DS_ERRLEN];
    ds_backend *gpu = w8_backend_with(s, NULL, NULL, err);
    if (!gpu) { CHECKF(0, "%s", err); return; }
    float amp = dt == DS_DTYPE_F8_E4M3 ? 0.5f / sqrtf((float)K) : 1.0f / sqrtf((float)K);
    wpair w1 = mk_weight(s, N1, K, dt, amp, what), w2 = mk_weight(s, N2, K, dt, amp, what);
    const int Ms[] = {1, 4, 8, 9, 63, 64, 65, 130};
    for (int i = 0; i < (int)(sizeof Ms / sizeof Ms[0]); i++) {
        int M = Ms[i];
        if (M > max_m) continue;
        prime(s, M);
        buf x = buf_new(s, (size_t)M * K), o1 = buf_new(s, (size_t)M * N1), o2 = buf_new(s, (size_t)M * N2);
        for (int pass = 0; pass < 2; pass++) {
            w8a8_input(&x, M, K);
            buf_poison(&o1);
            buf_poison(&o2);
            gpu->linear2(gpu, o1.d, o2.d, x.d, &w1.d, &w2.d, M);
        }
        int w8 = M >= w8_min_m && dt == DS_DTYPE_F8_E4M3;
        float *xr = x.h;
        if (w8) {
            xr = malloc(sizeof(float) * (size_t)M * K);
            act_quant_ref(xr, x.h, M, K);
        }
        s->cpu->linear(s->cpu, o1.h, xr, &w1.h, M);
        s->cpu->linear(s->cpu, o2.h, xr, &w2.h, M);
        double thr = w8 ? THR_W8A8 : M <= GEMV_MAX_M_TEST ? THR_GEMM : THR_TC;
        char name[96];
        snprintf(name, sizeof name, "linear2 %s %s (first)", what, ds_dtype_name(dt));
        compare(s, name, M, &o1, thr, 0);
        snprintf(name, sizeof name, "linear2 %s %s (second)", what, ds_dtype_name(dt));
        compare(s, name, M, &o2, thr, 0);
        if (w8) free(xr);
        buf_free(s, &x);
        buf_free(s, &o1);
        buf_free(s, &o2);
    }
    free_weight(&w1);
    free_weight(&w2);
    gpu->destroy(gpu);
}

static void check_linear(setup *s, const char *what, int N, int K, ds_dtype dt, const int *Ms, int nM) {
    check_linear_on(s, what, N, K, dt, Ms, nM, 0);
}

/* Both attention forms over one ragged batch; the same q, cache and kv_b on both sides. */
static void check_attention(setup *s, int M, int max_cached) {
    const ds_config *c = &s->cfg;
    int H = c->num_heads, C = c->kv_lora_rank, hw = c->qk_nope_head_dim + c->v_head_dim;
    batch b;
    mk_batch(s, &b, M, max_cached, 16);
    set_batch(s, &b);
    buf cache = mk_cache(s, &b);
    wpair kvb = mk_weight(s, H * hw, C, linear_dtype(s), linear_amp(s, C), "kv_b");
    buf q = buf_new(s, (size_t)M * H * c->qk_head_dim), out = buf_new(s, (size_t)M * H * c->v_head_dim);
    buf_rand(&q, 1.0f);
    buf_poison(&out);
    s->cpu->attn_naive(s->cpu, out.h, q.h, cache.h, &kvb.h, b.seqs, b.m.n_seqs);
    s->gpu->attn_naive(s->gpu, out.d, q.d, cache.d, &kvb.d, b.seqs, b.m.n_seqs);
    char name[64];
    snprintf(name, sizeof name, "attn naive (%d seqs)", b.m.n_seqs);
    compare(s, name, M, &out, s->thr_naive ? s->thr_naive : THR_ATTN, 0);
    buf_poison(&out);
    s->cpu->attn_absorbed(s->cpu, out.h, q.h, cache.h, &kvb.h, b.seqs, b.m.n_seqs);
    s->gpu->attn_absorbed(s->gpu, out.d, q.d, cache.d, &kvb.d, b.seqs, b.m.n_seqs);
    snprintf(name, sizeof name, "attn absorbed (%d seqs)", b.m.n_seqs);
    compare(s, name, M, &out, s->thr_absorbed ? s->thr_absorbed : THR_ATTN, 0);
    free(b.pt);
    buf_free(s, &cache); buf_free(s, &q); buf_free(s, &out);
    free_weight(&kvb);
}

/* check_attention where the CPU reference of all M queries is too slow: the GPU runs the whole ragged
 * batch; the CPU runs a batch of the last `tail` new tokens of every sequence (same positions, same
 * page tables, so the same cached context and causal mask) and the NMSE is taken on those rows. The
 * last tokens see the longest contexts. */
static void check_attention_sampled(setup *s, int M, int max_cached, int tail) {
    const ds_config *c = &s->cfg;
    int H = c->num_heads, C = c->kv_lora_rank, hw = c->qk_nope_head_dim + c->v_head_dim;
    int Wq = H * c->qk_head_dim, Wo = H * c->v_head_dim;
    batch b;
    mk_batch(s, &b, M, max_cached, 16);
    set_batch(s, &b);
    buf cache = mk_cache(s, &b);
    wpair kvb = mk_weight(s, H * hw, C, linear_dtype(s), linear_amp(s, C), "kv_b");
    buf q = buf_new(s, (size_t)M * Wq), out = buf_new(s, (size_t)M * Wo), out2 = buf_new(s, (size_t)M * Wo);
    buf_rand(&q, 1.0f);
    buf_poison(&out);
    buf_poison(&out2);
    s->gpu->attn_naive(s->gpu, out.d, q.d, cache.d, &kvb.d, b.seqs, b.m.n_seqs);
    s->gpu->attn_absorbed(s->gpu, out2.d, q.d, cache.d, &kvb.d, b.seqs, b.m.n_seqs);

    /* the sub-batch: per sequence its last min(tail, n_new) tokens */
    batch *sb = malloc(sizeof *sb);
    memset(sb, 0, sizeof *sb);
    int32_t *rows = malloc(sizeof(int32_t) * (size_t)M);
    int R = 0;
    for (int i = 0; i < b.m.n_seqs; i++) {
        int n_new = b.seq_start[i + 1] - b.seq_start[i], t = n_new < tail ? n_new : tail;
        sb->seq_start[i] = R;
        sb->seq_ctx[i] = b.seq_ctx[i];
        sb->seqs[i] = i;
        for (int k = b.seq_start[i + 1] - t; k < b.seq_start[i + 1]; k++, R++) {
            rows[R] = k;
            sb->tokens[R] = b.tokens[k];
            sb->positions[R] = b.positions[k];
        }
    }
    sb->seq_start[b.m.n_seqs] = R;
    sb->m = b.m;
    sb->m.n_tokens = R;
    sb->m.tokens = sb->tokens;
    sb->m.positions = sb->positions;
    sb->m.seq_start = sb->seq_start;
    sb->m.seq_ctx = sb->seq_ctx;
    char err[DS_ERRLEN];
    CHECK(s->cpu->set_batch(s->cpu, &sb->m, err) == DS_OK);
    float *qs = take_rows(q.h, Wq, rows, R), *ref = malloc(sizeof(float) * (size_t)R * Wo);
    char name[64];
    s->cpu->attn_naive(s->cpu, ref, qs, cache.h, &kvb.h, sb->seqs, b.m.n_seqs);
    snprintf(name, sizeof name, "attn naive (%d seqs)", b.m.n_seqs);
    compare_rows(s, name, M, out.d, Wo, ref, rows, R, NULL, s->thr_naive ? s->thr_naive : THR_ATTN);
    s->cpu->attn_absorbed(s->cpu, ref, qs, cache.h, &kvb.h, sb->seqs, b.m.n_seqs);
    snprintf(name, sizeof name, "attn absorbed (%d seqs)", b.m.n_seqs);
    compare_rows(s, name, M, out2.d, Wo, ref, rows, R, NULL, s->thr_absorbed ? s->thr_absorbed : THR_ATTN);
    free(qs); free(ref); free(rows); free(sb);
    free(b.pt);
    buf_free(s, &cache); buf_free(s, &q); buf_free(s, &out); buf_free(s, &out2);
    free_weight(&kvb);
}

static void check_mlp(setup *s, int I, const int *Ms, int nM) {
    int D = s->cfg.hidden_size;
    ds_dtype dt = linear_dtype(s);
    wpair g = mk_weight(s, I, D, dt, linear_amp(s, D), "gate"), u = mk_weight(s, I, D, dt, linear_amp(s, D), "up");
    wpair dn = mk_weight(s, D, I, dt, linear_amp(s, I), "down");
    for (int i = 0; i < nM; i++) {
        int M = Ms[i];
        if (M > max_m) continue;
        prime(s, M);
        buf x = buf_new(s, (size_t)M * D), out = buf_new(s, (size_t)M * D);
        buf_rand(&x, 1.0f);
        buf_poison(&out);
        s->gpu->mlp(s->gpu, out.d, x.d, &g.d, &u.d, &dn.d, M);
        if (3.0 * M * I * D <= REF_FULL_MACS) {
            s->cpu->mlp(s->cpu, out.h, x.h, &g.h, &u.h, &dn.h, M);
            compare(s, "mlp", M, &out, THR_GEMM, 0);
        } else {
            int32_t rows[REF_ROWS];
            int R = sample_rows(M, REF_ROWS, rows);
            float *xs = take_rows(x.h, D, rows, R);
            prime_cpu(s, R);
            s->cpu->mlp(s->cpu, out.h, xs, &g.h, &u.h, &dn.h, R);
            compare_rows(s, "mlp", M, out.d, D, out.h, rows, R, NULL, THR_GEMM);
            free(xs);
        }
        buf_free(s, &x);
        buf_free(s, &out);
    }
    free_weight(&g); free_weight(&u); free_weight(&dn);
}

/* The routing kernel of backend be on identical logits: ids must equal the CPU's, weights match. ties: the logits drawn
 * from five values (-1, -0, +0, 0.5, 2) and the bias 0, so that most choices are among equal scores (the rule: ties to
 * the lower index; -0 and +0 equal) */
static void check_route_on(setup *s, ds_backend *be, const char *how, int M, int ties) {
    const ds_config *c = &s->cfg;
    int E = c->n_routed_experts, K = c->num_experts_per_tok;
    float *lg = malloc(sizeof(float) * (size_t)M * E), *bias = malloc(sizeof(float) * E);
    static const float few[5] = {-1.0f, -0.0f, 0.0f, 0.5f, 2.0f};
    for (size_t i = 0; i < (size_t)M * E; i++) lg[i] = ties ? few[rint_below(5)] : 3.0f * unif();
    for (int e = 0; e < E; e++) bias[e] = ties ? 0.0f : 0.1f * unif();
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)M * K), *gids = malloc(sizeof(int32_t) * (size_t)M * K);
    float *w = malloc(sizeof(float) * (size_t)M * K), *gw = malloc(sizeof(float) * (size_t)M * K);
    float *scratch = malloc(sizeof(float) * 2 * E);
    for (int m = 0; m < M; m++) ds_route_token(c, lg + (size_t)m * E, bias, ids + (size_t)m * K, w + (size_t)m * K, scratch);
    float *d_lg = ds_cuda_alloc_bytes(s->gpu, sizeof(float) * (size_t)M * E), *d_bias = ds_cuda_alloc_bytes(s->gpu, sizeof(float) * E);
    int32_t *d_ids = ds_cuda_alloc_bytes(s->gpu, sizeof(int32_t) * (size_t)M * K);
    float *d_w = ds_cuda_alloc_bytes(s->gpu, sizeof(float) * (size_t)M * K);
    ds_cuda_upload_bytes(s->gpu, d_lg, lg, sizeof(float) * (size_t)M * E);
    ds_cuda_upload_bytes(s->gpu, d_bias, bias, sizeof(float) * E);
    ds_cuda_route(be, d_lg, d_bias, d_ids, d_w, M);
    ds_cuda_download_bytes(s->gpu, gids, d_ids, sizeof(int32_t) * (size_t)M * K);
    ds_cuda_download_bytes(s->gpu, gw, d_w, sizeof(float) * (size_t)M * K);
    int id_mismatch = 0;
    double num = 0, den = 0;
    for (size_t i = 0; i < (size_t)M * K; i++) {
        id_mismatch += ids[i] != gids[i];
        num += ((double)w[i] - gw[i]) * ((double)w[i] - gw[i]);
        den += (double)w[i] * w[i];
    }
    printf("  %-8s %-22s M=%-5d ids differing %d of %d, weights nmse %.2e\n", s->name, how, M, id_mismatch, M * K,
           num / den);
    CHECKF(id_mismatch == 0 && num / den <= THR_EXACT, "%s %s M=%d: %d ids differ, nmse %.3g", s->name, how, M,
           id_mismatch, num / den);
    s->gpu->release(s->gpu, d_lg); s->gpu->release(s->gpu, d_bias);
    s->gpu->release(s->gpu, (float *)d_ids); s->gpu->release(s->gpu, d_w);
    free(lg); free(bias); free(ids); free(gids); free(w); free(gw); free(scratch);
}

static void check_route(setup *s, int M) { check_route_on(s, s->gpu, "route (fused kernel)", M, 0); }

/* The routing warp's two forms (DSINFER_CUDA_ROUTE_FAST 0: shared memory, 1: registers), each on its own backend (the
 * form is read at its creation), on random and on tied logits */
static void check_route_forms(setup *s, const int *Ms, int nM) {
    char err[DS_ERRLEN];
    for (int f = 0; f <= 1; f++) {
        char v[2] = {(char)('0' + f), 0}, how[40];
        setenv("DSINFER_CUDA_ROUTE_FAST", v, 1);
        ds_backend *be = ds_backend_cuda_new(&s->cfg, err);
        unsetenv("DSINFER_CUDA_ROUTE_FAST");
        if (!be) { CHECKF(0, "%s", err); return; }
        for (int i = 0; i < nM; i++) {
            if (Ms[i] > max_m) continue;
            for (int ties = 0; ties <= 1; ties++) {
                snprintf(how, sizeof how, "route fast %d%s", f, ties ? " ties" : "");
                check_route_on(s, be, how, Ms[i], ties);
            }
        }
        be->destroy(be);
    }
}

/* The router v1 (one thread per token, DSINFER_CUDA_ROUTE2=0; the default is v2, one warp per token):
 * the switch is read at backend creation (a process-wide flag), so a throwaway backend turns v1 on for
 * these checks and another sets the default back. */
static void check_route_v1(setup *s, const int *Ms, int nM) {
    char err[DS_ERRLEN];
    setenv("DSINFER_CUDA_ROUTE2", "0", 1);
    ds_backend *on = ds_backend_cuda_new(&s->cfg, err);
    unsetenv("DSINFER_CUDA_ROUTE2");
    if (!on) { CHECKF(0, "%s", err); return; }
    printf("  %-8s router v1 (thread per token):\n", s->name);
    for (int i = 0; i < nM; i++) if (Ms[i] <= max_m) check_route(s, Ms[i]);
    on->destroy(on);
    ds_backend *off = ds_backend_cuda_new(&s->cfg, err);
    if (off) off->destroy(off);
}

/* The whole MoE block. A token whose router logits differ in the last bit between the two GEMMs may
 * pick another expert at a near-tie; at most M/100 such rows are tolerated (and reported). */
/* tc: on a second CUDA backend with DSINFER_CUDA_TC=1 (grouped routed experts on the tensor cores,
 * cuda_moe_tc.cu, and BF16 GEMMs for the shared expert above GEMV_MAX_M rows; the router stays fp32),
 * compared at THR_TC; a row counts as a routing near-tie above NMSE 1e-3 then. */
/* tc 1 runs BF16 experts by moe_tc_kernel (DSINFER_CUDA_MOE_TC2=0); tc 2 by moe_tc2_kernel (weights staged in
 * shared memory, 32 or 64 tokens a pass; DSINFER_CUDA_MOE_WG_BF16=0); tc 3 by moe_wg_kernel (the default: BF16
 * wgmma, the weights by TMA). FP8 experts go by DSINFER_CUDA_MOE_WG and DSINFER_MOE_W8A8 (run_moe_w8a8). */
/* routed: the routed experts of one expert range only (backend moe_routed, [E/3, 2E/3): the gathered
 * expert-parallel form), against the CPU's moe_routed. */
/* run_side_stream's settings for check_moe_dt: twin: a second backend made with moe_twin_env=moe_twin_val (there: the
 * shared experts in line, DSINFER_CUDA_SHARED_STREAM=0), whose output must equal the first one's bit for bit (the same
 * kernels, one stream instead of two); thr: the CPU comparison's threshold instead of THR_TC (0: THR_TC) */
static int moe_twin;
static const char *moe_twin_env = "DSINFER_CUDA_SHARED_STREAM", *moe_twin_val = "0";   /* how the twin is made */
static double moe_thr_tc;
/* > 0: the twin's output need not be the same bits, only within this NMSE (run_moe_shared_in: the shared experts' sums
 * in another order, their SiLU products rounded to BF16 before quantization as the routed experts' are); up to
 * moe_twin_differ_m tokens the first backend must have run the shared experts inside the routed launches
 * (ds_cuda_moe_shared_in_runs), above not (and then the same bits), the twin never */
static double moe_twin_nmse;
static int moe_twin_differ_m;
static int moe_twin_nmse_only;   /* run_moe1: moe_twin_nmse bounds the twin's difference, with no shared-in checks */
/* moe_twin_pdl: the checked backend must launch moe_wg_kernel this many times with PDL in one moe call (gate / up and
 * down at DSINFER_CUDA_MOE_WG_PDL=2), the twin never: the evidence that the twin compares two different paths */
static int moe_twin_pdl;
static int moe_twin_order;  /* run_moe_order: the checked backend's grouped moe_wg launches must all have taken
                             * DSINFER_CUDA_MOE_WG_ORDER's item order (2 a call: gate / up and down), the twin's none */
static int moe_twin_nt48;  /* run_moe_nt48: the checked backend's two moe_wg launches a call at 48 tokens a chunk, the twin's none */
static int moe_twin_sx;     /* run_moe_sx: the checked backend's grouped moe_wg launches a call whose token scales the producer
                             * warpgroup staged must be those whose items fit (ds_cuda_moe_wg_sx_fits), the twin's none */
/* run_moe_st2: a launch counter (moe_twin_what) the checked backend's one moe call must advance by
 * moe_twin_want, the twin's call not at all: the evidence that the two compare different paths */
static long (*moe_twin_count)(ds_backend *);
static int moe_twin_want;
static const char *moe_twin_what;
static int moe_twin_pipe;   /* run_moe_pipe: DSINFER_CUDA_MOE_WG_PIPE of the checked backend (1: its down launch pipelined, 2: and
                             * gate / up at 32 tokens a chunk), the twin none */

/* How close row x's routing is to a tie on the CPU: the gap between its K-th and (K+1)-th choice scores (softmax or
 * sigmoid of the router logits, plus the bias for noaux_tc; over all experts, the group stage left out) over the
 * largest score. A GPU sum order flips a choice only where this is about fp32 rounding of the logits. */
static double route_margin(setup *s, const ds_layer_weights *Lh, const float *x) {
    const ds_config *c = &s->cfg;
    int E = c->n_routed_experts, K = c->num_experts_per_tok;
    float *lg = malloc(sizeof(float) * (size_t)E);
    double *b = malloc(sizeof(double) * (size_t)E), mx = -INFINITY, sum = 0, top = 0;
    s->cpu->linear(s->cpu, lg, x, &Lh->router, 1);
    for (int e = 0; e < E; e++) mx = lg[e] > mx ? lg[e] : mx;
    for (int e = 0; e < E; e++) {
        b[e] = c->scoring == DS_SCORE_SIGMOID ? 1.0 / (1.0 + exp(-(double)lg[e])) : exp((double)lg[e] - mx);
        sum += b[e];
    }
    for (int e = 0; e < E; e++) {
        if (c->scoring != DS_SCORE_SIGMOID) b[e] /= sum;
        if (c->topk_method == DS_TOPK_NOAUX_TC && Lh->router_bias.data) b[e] += ((const float *)Lh->router_bias.data)[e];
    }
    double kth = 0, next = -INFINITY;
    for (int k = 0; k <= K && k < E; k++) {   /* the K + 1 largest, by selection */
        int best = -1;
        for (int e = 0; e < E; e++) if (b[e] > -INFINITY && (best < 0 || b[e] > b[best])) best = e;
        if (k == 0) top = fabs(b[best]);
        if (k == K - 1) kth = b[best];
        if (k == K) next = b[best];
        b[best] = -INFINITY;
    }
    free(lg);
    free(b);
    return (kth - next) / (top > 0 ? top : 1);
}
#define ROUTE_TIE 1e-5   /* route_margin below this: a near-tie (fp32 logits differ by ~1e-7 relative) */

static void check_moe_dt(setup *s, const int *Ms, int nM, ds_dtype dt, int tc, int routed) {
    const ds_config *c = &s->cfg;
    ds_backend *gpu = s->gpu, *twin = NULL;
    char err[DS_ERRLEN];
    if (tc) {
        setenv("DSINFER_CUDA_TC", "1", 1);
        setenv("DSINFER_CUDA_MOE_TC2", tc >= 2 ? "1" : "0", 1);
        setenv("DSINFER_CUDA_MOE_WG_BF16", tc == 3 ? "1" : "0", 1);
        int w8_set = getenv("DSINFER_MOE_W8A8") != NULL;   /* W8A8 experts (default on the GPU) only where asked */
        if (!w8_set) setenv("DSINFER_MOE_W8A8", "0", 1);
        int l8_set = getenv("DSINFER_CUDA_FP8_GEMM") != NULL;   /* and W8A8 linears (the shared expert's) */
        if (!l8_set) setenv("DSINFER_CUDA_FP8_GEMM", "0", 1);
        gpu = ds_backend_cuda_new(&s->cfg, err);
        if (gpu && moe_twin) {
            const char *was = getenv(moe_twin_env);
            char keep[16];
            snprintf(keep, sizeof keep, "%s", was ? was : "");
            setenv(moe_twin_env, moe_twin_val, 1);
            twin = ds_backend_cuda_new(&s->cfg, err);
            if (was) setenv(moe_twin_env, keep, 1);
            else unsetenv(moe_twin_env);
            if (!twin) gpu->destroy(gpu);
            gpu = twin ? gpu : NULL;
        }
        unsetenv("DSINFER_CUDA_TC");
        unsetenv("DSINFER_CUDA_MOE_TC2");
        unsetenv("DSINFER_CUDA_MOE_WG_BF16");
        if (!w8_set) unsetenv("DSINFER_MOE_W8A8");
        if (!l8_set) unsetenv("DSINFER_CUDA_FP8_GEMM");
        if (!gpu) { CHECKF(0, "%s", err); return; }
    }
    int D = c->hidden_size, E = c->n_routed_experts, mI = c->moe_intermediate_size, sI = mI * c->n_shared_experts;
    ds_layer_weights Lh, Ld;
    memset(&Lh, 0, sizeof Lh);
    memset(&Ld, 0, sizeof Ld);
    wpair *ws = calloc((size_t)3 * E + 5, sizeof(wpair));
    int nw = 0;
    ws[nw] = mk_weight(s, E, D, DS_DTYPE_BF16, 2.0f / sqrtf((float)D), "router");
    Lh.router = ws[nw].h; Ld.router = ws[nw++].d;
    if (c->topk_method == DS_TOPK_NOAUX_TC) {
        ws[nw] = mk_weight(s, 1, E, DS_DTYPE_F32, 0.05f, "bias");
        Lh.router_bias = ws[nw].h; Ld.router_bias = ws[nw++].d;
    }
    Lh.exp_gate = calloc(E, sizeof(ds_weight)); Lh.exp_up = calloc(E, sizeof(ds_weight)); Lh.exp_down = calloc(E, sizeof(ds_weight));
    Ld.exp_gate = calloc(E, sizeof(ds_weight)); Ld.exp_up = calloc(E, sizeof(ds_weight)); Ld.exp_down = calloc(E, sizeof(ds_weight));
    for (int e = 0; e < E; e++) {
        ws[nw] = mk_weight(s, mI, D, dt, linear_amp(s, D), "exp_gate"); Lh.exp_gate[e] = ws[nw].h; Ld.exp_gate[e] = ws[nw++].d;
        ws[nw] = mk_weight(s, mI, D, dt, linear_amp(s, D), "exp_up"); Lh.exp_up[e] = ws[nw].h; Ld.exp_up[e] = ws[nw++].d;
        ws[nw] = mk_weight(s, D, mI, dt, linear_amp(s, mI), "exp_down"); Lh.exp_down[e] = ws[nw].h; Ld.exp_down[e] = ws[nw++].d;
    }
    if (sI) {
        ws[nw] = mk_weight(s, sI, D, dt, linear_amp(s, D), "sh_gate"); Lh.sh_gate = ws[nw].h; Ld.sh_gate = ws[nw++].d;
        ws[nw] = mk_weight(s, sI, D, dt, linear_amp(s, D), "sh_up"); Lh.sh_up = ws[nw].h; Ld.sh_up = ws[nw++].d;
        ws[nw] = mk_weight(s, D, sI, dt, linear_amp(s, sI), "sh_down"); Lh.sh_down = ws[nw].h; Ld.sh_down = ws[nw++].d;
    }
    Lh.is_moe = Ld.is_moe = 1;
    for (int i = 0; i < nM; i++) {
        int M = Ms[i];
        if (M > max_m) continue;
        prime(s, M);
        if (tc) {
            batch b;
            mk_batch(s, &b, M, 0, 16);
            CHECK(gpu->set_batch(gpu, &b.m, err) == DS_OK);
            if (twin) CHECK(twin->set_batch(twin, &b.m, err) == DS_OK);
            free(b.pt);
        }
        buf x = buf_new(s, (size_t)M * D), out = buf_new(s, (size_t)M * D);
        buf_rand(&x, 1.0f);
        buf_poison(&out);
        int e0 = E / 3, e1 = 2 * E / 3;
        if (moe_twin && !routed) {   /* first on another x: workspaces and tables exist before the checked launch (no
                                      * first-use copies between), and a launch that reused what the one before it left
                                      * (a grouping ticket not put back) shows */
            buf x2 = buf_new(s, (size_t)M * D);
            buf_rand(&x2, 1.0f);
            gpu->moe(gpu, out.d, x2.d, &Ld, M);
            buf_free(s, &x2);
            buf_poison(&out);
        }
        long runs0 = ds_cuda_moe_shared_in_runs(gpu), truns0 = twin ? ds_cuda_moe_shared_in_runs(twin) : 0;
        long pdl0 = tc ? ds_cuda_moe_wg_pdl_launches(gpu) : 0, tpdl0 = twin ? ds_cuda_moe_wg_pdl_launches(twin) : 0;
        long pipe0 = tc ? ds_cuda_moe_wg_pipe_launches(gpu) : 0, tpipe0 = twin ? ds_cuda_moe_wg_pipe_launches(twin) : 0;
        long ord0 = tc ? ds_cuda_moe_wg_order_launches(gpu) : 0, tord0 = twin ? ds_cuda_moe_wg_order_launches(twin) : 0;
        long sx0 = tc ? ds_cuda_moe_wg_sx_launches(gpu) : 0, tsx0 = twin ? ds_cuda_moe_wg_sx_launches(twin) : 0;
        long gub0 = ds_cuda_moe_gu_bf16_launches();
        long cn0 = moe_twin_count && tc ? moe_twin_count(gpu) : 0, tcn0 = moe_twin_count && twin ? moe_twin_count(twin) : 0;
        long n480 = tc ? ds_cuda_moe_wg_nt48_launches(gpu) : 0, tn480 = twin ? ds_cuda_moe_wg_nt48_launches(twin) : 0;
        if (routed) gpu->moe_routed(gpu, out.d, x.d, &Ld, M, e0, e1);
        else gpu->moe(gpu, out.d, x.d, &Ld, M);
        const int gub = ds_cuda_moe_gu_bf16_launches() > gub0;   /* gate / up's sums in BF16 in this call */
        if (twin && !routed) {   /* the same op with the shared experts in line: the same bits */
            buf o2 = buf_new(s, (size_t)M * D);
            buf_poison(&o2);
            twin->moe(twin, o2.d, x.d, &Ld, M);
            long runs = ds_cuda_moe_shared_in_runs(gpu) - runs0, truns = ds_cuda_moe_shared_in_runs(twin) - truns0;
            size_t diff = device_units_differ(s, out.d, o2.d, (size_t)M * D, sizeof(float));
            double tn = moe_twin_nmse > 0 ? device_nmse(s, out.d, o2.d, (size_t)M * D) : 0;
            printf("  %-8s moe M=%d %s: against %s=%s: %zu of %zu values differ, NMSE %.3g\n", s->name, M, ds_dtype_name(dt),
                   moe_twin_env, moe_twin_val, diff, (size_t)M * D, tn);
            if (moe_twin_pdl) {
                long np = ds_cuda_moe_wg_pdl_launches(gpu) - pdl0, tp = ds_cuda_moe_wg_pdl_launches(twin) - tpdl0;
                printf("  %-8s moe M=%d: moe_wg launches with PDL %ld (twin %ld)\n", s->name, M, np, tp);
                CHECKF(np == moe_twin_pdl && tp == 0, "%s moe M=%d: %ld PDL launches (twin %ld), expected %d and 0", s->name, M,
                       np, tp, moe_twin_pdl);
            }
            if (moe_twin_nt48) {
                long no = ds_cuda_moe_wg_nt48_launches(gpu) - n480, to = ds_cuda_moe_wg_nt48_launches(twin) - tn480;
                printf("  %-8s moe M=%d: moe_wg launches at 48 tokens a chunk: %ld (twin %ld)\n", s->name, M, no, to);
                CHECKF(no == 2 && to == 0, "%s moe M=%d: %ld moe_wg launches at 48 tokens a chunk (twin %ld), expected 2 and 0",
                       s->name, M, no, to);
            }
            if (moe_twin_order) {
                long no = ds_cuda_moe_wg_order_launches(gpu) - ord0, to = ds_cuda_moe_wg_order_launches(twin) - tord0;
                printf("  %-8s moe M=%d: moe_wg launches in item order %d: %ld (twin %ld)\n", s->name, M, moe_twin_order, no, to);
                CHECKF(no == 2 && to == 0, "%s moe M=%d: %ld moe_wg launches in item order %d (twin %ld), expected 2 and 0",
                       s->name, M, no, moe_twin_order, to);
            }
            if (moe_twin_sx) {   /* gate / up's items have D columns, down's mI */
                int nt = ds_cuda_moe_wg_chunk(gpu, M * c->num_experts_per_tok, E);
                int want = ds_cuda_moe_wg_sx_fits(nt, D) + ds_cuda_moe_wg_sx_fits(nt, mI);
                long n = ds_cuda_moe_wg_sx_launches(gpu) - sx0, tn = ds_cuda_moe_wg_sx_launches(twin) - tsx0;
                printf("  %-8s moe M=%d: moe_wg launches with staged token scales %ld (twin %ld)\n", s->name, M, n, tn);
                CHECKF(n == want && tn == 0, "%s moe M=%d: %ld moe_wg launches with staged token scales (twin %ld), expected %d "
                       "and 0", s->name, M, n, tn, want);
            }
            if (moe_twin_count) {
                long n = moe_twin_count(gpu) - cn0, tn = moe_twin_count(twin) - tcn0;
                printf("  %-8s moe M=%d: moe_wg launches %s %ld (twin %ld)\n", s->name, M, moe_twin_what, n, tn);
                CHECKF(n == moe_twin_want && tn == 0, "%s moe M=%d: %ld moe_wg launches %s (twin %ld), expected %d and 0",
                       s->name, M, n, moe_twin_what, tn, moe_twin_want);
            }
            if (moe_twin_pipe) {
                /* the backend's chunk (cu_moe_wg_chunk): PIPE has no 48-token form, and gate / up's only at 32 tokens */
                int nt = ds_cuda_moe_wg_chunk(gpu, M * c->num_experts_per_tok, E);
                int want = (nt != 48) + (moe_twin_pipe == 2 && nt == 32);
                long np = ds_cuda_moe_wg_pipe_launches(gpu) - pipe0, tp = ds_cuda_moe_wg_pipe_launches(twin) - tpipe0;
                printf("  %-8s moe M=%d: pipelined moe_wg launches %ld (twin %ld)\n", s->name, M, np, tp);
                CHECKF(np == want && tp == 0, "%s moe M=%d: %ld pipelined moe_wg launches (twin %ld), expected %d and 0", s->name,
                       M, np, tp, want);
            }
            if (moe_twin_nmse > 0) {
                CHECKF(tn <= moe_twin_nmse, "%s moe M=%d: NMSE %.3g against %s=%s (bound %.1g)", s->name, M, tn, moe_twin_env,
                       moe_twin_val, moe_twin_nmse);
            }
            if (moe_twin_nmse > 0 && !moe_twin_nmse_only) {
                printf("  %-8s moe M=%d: shared experts inside the routed launches: %ld of 1 calls (twin: %ld)\n", s->name, M,
                       runs, truns);
                CHECKF(runs == (M <= moe_twin_differ_m) && truns == 0, "%s moe M=%d: shared experts inside the routed launches "
                       "%ld times, twin %ld (expected %d, 0)", s->name, M, runs, truns, M <= moe_twin_differ_m);
                if (M > moe_twin_differ_m) CHECKF(diff == 0, "%s moe M=%d: %zu values differ with both in line", s->name, M, diff);
            } else if (moe_twin_nmse <= 0)
                CHECKF(diff == 0, "%s moe M=%d: %zu values differ from %s=%s", s->name, M, diff, moe_twin_env, moe_twin_val);
            buf_free(s, &o2);
        }
        /* the CPU reference on all rows, or on sampled ones (rows[r] = r when all) */
        int32_t *rows = malloc(sizeof(int32_t) * (size_t)M);
        int R = M;
        double macs = (double)M * D * 3.0 * (c->num_experts_per_tok * mI + sI);
        if (macs > REF_FULL_MACS) {
            R = sample_rows(M, REF_ROWS, rows);
            float *xs = take_rows(x.h, D, rows, R);
            prime_cpu(s, R);
            if (routed) s->cpu->moe_routed(s->cpu, out.h, xs, &Lh, R, e0, e1);
            else s->cpu->moe(s->cpu, out.h, xs, &Lh, R);
            free(xs);
        } else {
            for (int m = 0; m < M; m++) rows[m] = m;
            if (routed) s->cpu->moe_routed(s->cpu, out.h, x.h, &Lh, M, e0, e1);
            else s->cpu->moe(s->cpu, out.h, x.h, &Lh, M);
        }
        /* rows that differ by more than fp32 rounding: routing near-ties, at most 1 in 100 left out */
        float *g = malloc(sizeof(float) * (size_t)M * D);
        char *exclude = calloc((size_t)R, 1);
        ds_cuda_download_bytes(s->gpu, g, out.d, sizeof(float) * (size_t)M * D);
        int flips = 0;
        double thr = tc ? (moe_thr_tc > 0 ? moe_thr_tc : THR_TC) : THR_MOE;
        if (gub && thr < THR_GUB) thr = THR_GUB;
        double row_thr = thr > 1e-6 ? thr : 1e-6;
        for (int r = 0; r < R; r++) {
            double num = 0, den = 0;
            const float *gr = g + (size_t)rows[r] * D, *hr = out.h + (size_t)r * D;
            for (int d = 0; d < D; d++) {
                double e = (double)gr[d] - hr[d];
                num += e * e;
                den += (double)hr[d] * hr[d];
            }
            if (num > (tc ? 1e-3 : 1e-6) * den && flips < R / 100) {   /* NaN is never tolerated: NaN > x is false */
                flips++;
                exclude[r] = 1;
                printf("  %-8s moe M=%d: row %d differs (routing near-tie), excluded\n", s->name, M, rows[r]);
            } else if (num > row_thr * den) {   /* past the allowance and the comparison's threshold: excluded only if
                                                 * the CPU's routing of the row is itself a near-tie */
                double margin = route_margin(s, &Lh, x.h + (size_t)rows[r] * D);
                int tie = margin < ROUTE_TIE && !routed;
                printf("  %-8s moe M=%d: row %d differs, nmse %.3g, routing margin %.3g: %s\n", s->name, M, rows[r],
                       num / (den > 0 ? den : 1), margin, tie ? "a near-tie, excluded" : "not a near-tie");
                exclude[r] = tie;
            }
        }
        char name[64];
        snprintf(name, sizeof name, "moe%s%s E=%d top-%d %s", routed ? " routed" : "", tc == 3 ? " WG" : tc == 2 ? " TC2" : tc ? " TC" : "", E,
                 c->num_experts_per_tok, ds_dtype_name(dt));
        compare_rows(s, name, M, out.d, D, out.h, rows, R, exclude, thr);
        free(exclude);
        free(rows);
        free(g);
        buf_free(s, &x);
        buf_free(s, &out);
    }
    for (int i = 0; i < nw; i++) free_weight(&ws[i]);
    free(ws);
    free(Lh.exp_gate); free(Lh.exp_up); free(Lh.exp_down); free(Ld.exp_gate); free(Ld.exp_up); free(Ld.exp_down);
    if (tc) gpu->destroy(gpu);
    if (twin) twin->destroy(twin);
}

/* the exact MoE at every M; the tensor-core one at the M where it runs (above GEMV_MAX_M) */
static void check_moe(setup *s, const int *Ms, int nM) {
    check_moe_dt(s, Ms, nM, linear_dtype(s), 0, 0);
    check_moe_dt(s, Ms, nM, linear_dtype(s), 0, 1);
    int tcM[MAX_TC_MS], n = 0;
    for (int i = 0; i < nM && n < MAX_TC_MS; i++) if (Ms[i] > 8) tcM[n++] = Ms[i];
    if (n) check_moe_dt(s, tcM, n, linear_dtype(s), 1, 0);
    if (n) check_moe_dt(s, tcM, n, linear_dtype(s), 1, 1);
    if (n && linear_dtype(s) == DS_DTYPE_BF16) {
        for (int tc = 2; tc <= 3; tc++) {
            check_moe_dt(s, tcM, n, DS_DTYPE_BF16, tc, 0);
            check_moe_dt(s, tcM, n, DS_DTYPE_BF16, tc, 1);
        }
    }
}

/* GPU sampling against the CPU sampler (no penalties, no min_p): same logits, same seed, same tokens. */
static void check_sample(setup *s) {
    int V = s->cfg.vocab_size, R = 8;
    struct { float t; int k; float p; } P[] = {{0, 0, 1}, {0.7f, 0, 1}, {1.0f, 50, 1}, {0.8f, 0, 0.9f}, {1.2f, 20, 0.5f}};
    float *lg = malloc(sizeof(float) * (size_t)R * V), *row = malloc(sizeof(float) * V);
    float *d = ds_cuda_alloc_bytes(s->gpu, sizeof(float) * (size_t)R * V);
    for (size_t i = 0; i < (size_t)R * V; i++) lg[i] = 4.0f * unif();
    lg[3] = lg[5] = 9.0f;   /* a tie for greedy in row 0: the first index wins */
    ds_cuda_upload_bytes(s->gpu, d, lg, sizeof(float) * (size_t)R * V);
    int differ = 0, n = 0;
    for (size_t c = 0; c < sizeof P / sizeof P[0]; c++) {
        ds_sampling_params sp;
        ds_sampling_defaults(&sp);
        sp.temperature = P[c].t;
        sp.top_k = P[c].k;
        sp.top_p = P[c].p;
        sp.seed = rnd();
        ds_sampler *smp;
        char err[DS_ERRLEN];
        CHECK(ds_sampler_new(&sp, V, &smp, err) == DS_OK);
        int32_t got[8];
        uint64_t rng = sp.seed;
        ds_cuda_sample(s->gpu, d, R, V, sp.temperature, sp.top_k, sp.top_p, &rng, got);
        for (int r = 0; r < R; r++) {
            memcpy(row, lg + (size_t)r * V, sizeof(float) * V);
            int32_t want = ds_sampler_sample(smp, row);
            differ += want != got[r];
            n++;
        }
        ds_sampler_free(smp);
    }
    printf("  %-8s %-22s vocab %d: %d of %d tokens differ from the CPU sampler\n", s->name, "sample (greedy/T/k/p)", V,
           differ, n);
    CHECKF(differ == 0, "%s sample: %d of %d differ", s->name, differ, n);
    s->gpu->release(s->gpu, d);
    free(lg);
    free(row);
}

/* ---- setups ------------------------------------------------------------------------------------- */
/* kv_rank (0: the config's) overrides kv_lora_rank; kv_layout selects the KV cache layout (KV_F32, KV_FP8,
 * KV_BF16). */
enum { KV_F32 = 0, KV_FP8 = 1, KV_BF16 = 2 };
/* cfg from the config.json at path; 0 (a failed check naming why) when it cannot be read or parsed */
static int read_config(const char *path, ds_config *cfg) {
    FILE *f = fopen(path, "rb");
    if (!f) { CHECKF(0, "cannot open %s", path); return 0; }
    static char txt[1 << 16];
    size_t n = fread(txt, 1, sizeof txt - 1, f);
    fclose(f);
    txt[n] = 0;
    char err[DS_ERRLEN];
    if (ds_config_parse(txt, path, cfg, err) != DS_OK) { CHECKF(0, "%s", err); return 0; }
    return 1;
}

static int load_setup_kv(setup *s, const char *name, const char *path, int heads, int page_size, int kv_rank, int kv_layout) {
    char err[DS_ERRLEN];
    memset(s, 0, sizeof *s);
    if (!read_config(path, &s->cfg)) return 0;
    if (heads) s->cfg.num_heads = heads;
    if (kv_rank) s->cfg.kv_lora_rank = kv_rank;
    s->cfg.kv_fp8 = kv_layout == KV_FP8;
    s->cfg.kv_bf16 = kv_layout == KV_BF16;
    s->name = name;
    s->page_size = page_size;
    s->cpu = ds_backend_cpu_new(&s->cfg, 0);
    /* the fp32 attention kernels (THR_ATTN) unless the caller asked for the tensor-core ones (run_mla_tc) */
    int tc_set = getenv("DSINFER_CUDA_MLA_TC") != NULL;
    if (!tc_set) {
        setenv("DSINFER_CUDA_MLA_TC", "0", 1);
        setenv("DSINFER_CUDA_ATTN_TC", "0", 1);
    }
    s->gpu = ds_backend_cuda_new(&s->cfg, err);
    if (!tc_set) {
        unsetenv("DSINFER_CUDA_MLA_TC");
        unsetenv("DSINFER_CUDA_ATTN_TC");
    }
    if (!s->gpu) { CHECKF(0, "%s", err); return 0; }
    return 1;
}

static int load_setup(setup *s, const char *name, const char *path, int heads, int page_size) {
    return load_setup_kv(s, name, path, heads, page_size, 0, 0);
}

static void free_setup(setup *s) {
    if (s->cpu) s->cpu->destroy(s->cpu);
    if (s->gpu) s->gpu->destroy(s->gpu);
}

#define NM(a) (int)(sizeof(a) / sizeof(a[0]))

static const char *only;   /* DSINFER_OPS_ONLY=mla | w8a8 | moe8 | moebf | side | linear2 | kvb | qkv | router | w8small
                            * | f8t1 | f8tp | f8ss | f8ts | moehalf | moepipe | quantw | moeqf | moepdl | group3 | shin | f8r2 | f8lab | fa3 | moecomb | attnin | nfold | nfoldv3 | nlin | combnorm | mlafold | moeorder | moent48 | moesx | moest2 | moe1 | moeo | moeotc | tail1 | attn1 | gemv1 (main): only run_mla_tc, the W8A8 runs, run_moe_w8a8, run_moe_wg_bf16,
                            * run_side_stream, run_linear2, run_kvb_copy, run_qkv_finish, run_router, run_w8a8_small or
                            * run_f8_lab */

static void run_v3(void) {
    if (only) return;
    setup s;
    if (!load_setup(&s, "v3", "configs/deepseek-v3.json", 0, 16)) return;
    const int all[] = {1, 4, 128, 4096}, gemm[] = {1, 4, 128};
    for (int i = 0; i < NM(all); i++) if (all[i] <= max_m) check_elementwise(&s, all[i]);
    struct { const char *n; int N, K; ds_dtype dt; } L[] = {
        {"q_a", 1536, 7168, DS_DTYPE_F8_E4M3}, {"q_b", 24576, 1536, DS_DTYPE_F8_E4M3},
        {"kv_a", 576, 7168, DS_DTYPE_F8_E4M3}, {"kv_b", 32768, 512, DS_DTYPE_F8_E4M3},
        {"o", 7168, 16384, DS_DTYPE_F8_E4M3}, {"gate/up", 18432, 7168, DS_DTYPE_F8_E4M3},
        {"down", 7168, 18432, DS_DTYPE_F8_E4M3}, {"router", 256, 7168, DS_DTYPE_BF16}};
    for (int i = 0; i < NM(L); i++) check_linear(&s, L[i].n, L[i].N, L[i].K, L[i].dt, all, NM(all));
    check_linear(&s, "lm_head", 129280, 7168, DS_DTYPE_BF16, all, NM(all));
    for (int i = 0; i < NM(gemm); i++) check_attention(&s, gemm[i], 200);
    if (4096 <= max_m) check_attention_sampled(&s, 4096, 200, 6);
    check_mlp(&s, s.cfg.intermediate_size, all, NM(all));
    for (int i = 0; i < NM(gemm); i++) check_route(&s, gemm[i]);
    if (4096 <= max_m) check_route(&s, 4096);
    check_route_v1(&s, all, NM(all));
    const int tcm[] = {64, 128, 256};
    check_linear_on(&s, "q_a", 1536, 7168, DS_DTYPE_F8_E4M3, tcm, NM(tcm), 1);
    check_linear_on(&s, "skinny", 1536, 7168, DS_DTYPE_F8_E4M3, tcm, NM(tcm), 1);   /* the opt-in kernel, V3 q_a */
    check_linear(&s, "gate/up", 18432, 7168, DS_DTYPE_NVFP4, all, NM(all));
    check_moe(&s, all, NM(all));
    check_sample(&s);
    free_setup(&s);
}

static void run_lite(void) {
    if (only) return;
    setup s;
    if (!load_setup(&s, "v2-lite", "configs/deepseek-v2-lite.json", 0, 16)) return;
    const int all[] = {1, 4, 128, 4096}, gemm[] = {1, 4, 128};
    const int kva[] = {1, 4, 128, 4096};
    for (int i = 0; i < NM(all); i++) if (all[i] <= max_m) check_elementwise(&s, all[i]);
    check_linear(&s, "kv_a", 576, 2048, DS_DTYPE_BF16, kva, NM(kva));
    struct { const char *n; int N, K; } L[] = {{"q", 3072, 2048}, {"kv_b", 4096, 512}, {"o", 2048, 2048},
                                                {"gate/up", 10944, 2048}, {"down", 2048, 10944}, {"router", 64, 2048}};
    for (int i = 0; i < NM(L); i++) check_linear(&s, L[i].n, L[i].N, L[i].K, DS_DTYPE_BF16, gemm, NM(gemm));
    check_linear(&s, "lm_head", 102400, 2048, DS_DTYPE_BF16, all, NM(all));
    for (int i = 0; i < NM(gemm); i++) check_attention(&s, gemm[i], 300);
    if (4096 <= max_m) check_attention(&s, 4096, 64);
    const int tcm[] = {128};
    check_linear_on(&s, "q", 3072, 2048, DS_DTYPE_BF16, tcm, NM(tcm), 1);
    check_linear(&s, "q", 3072, 2048, DS_DTYPE_NVFP4, all, NM(all));
    check_linear_on(&s, "q", 3072, 2048, DS_DTYPE_NVFP4, tcm, NM(tcm), 1);
    check_mlp(&s, s.cfg.intermediate_size, all, NM(all));
    for (int i = 0; i < NM(all); i++) if (all[i] <= max_m) check_route(&s, all[i]);
    check_route_v1(&s, all, NM(all));
    check_moe(&s, all, NM(all));
    check_moe_dt(&s, gemm, NM(gemm), DS_DTYPE_NVFP4, 0, 0);
    const int tcm128[] = {128};
    check_moe_dt(&s, tcm128, 1, DS_DTYPE_NVFP4, 1, 0);
    /* moe_tc2_kernel at 9 tokens (most experts empty), 33 (odd counts) and 600 (a mean of 56 rows: 64 tokens
     * a pass, experts with two passes); then 600 again at 32 tokens a pass (two or three passes) */
    const int tc2m[] = {9, 33, 600}, tc2m600[] = {600};
    check_moe_dt(&s, tc2m, NM(tc2m), DS_DTYPE_BF16, 2, 0);
    printf("  %-8s (moe_tc2_kernel at 32 tokens a pass)\n", s.name);
    setenv("DSINFER_CUDA_MOE_TC2_TOK", "32", 1);
    check_moe_dt(&s, tc2m600, 1, DS_DTYPE_BF16, 2, 0);
    unsetenv("DSINFER_CUDA_MOE_TC2_TOK");
    free_setup(&s);
}

/* moe_wg_kernel's BF16 form (the default for BF16 experts above GEMV_MAX_M rows, DSINFER_CUDA_MOE_WG_BF16) against
 * the CPU at THR_TC: V2-Lite at 9 tokens (most experts empty), 33 (odd counts), 63 and 256 (32 / 64 tokens a
 * chunk), 600 (a mean of 56: experts of two chunks), 600 again at 32 a chunk (two or three), the expert-range
 * form at 63; V3 (256 experts, K = 7168) at 64 (DSINFER_OPS_SMALL: 9 and 63 only). DSINFER_OPS_ONLY=moebf runs
 * these alone. */
/* The grouped experts on the tensor cores at 1 .. 8 tokens too (DSINFER_CUDA_MOE_TC_MIN_M=1; by default GEMVs
 * take them): experts of one to a few rows, most experts without any. */
static void moe_small_tc(setup *s, ds_dtype dt, int tc) {
    const int m[] = {1, 2, 5, 8};
    setenv("DSINFER_CUDA_MOE_TC_MIN_M", "1", 1);
    check_moe_dt(s, m, NM(m), dt, tc, 0);
    unsetenv("DSINFER_CUDA_MOE_TC_MIN_M");
}

static void run_moe_wg_bf16(void) {
    if (only && strcmp(only, "moebf")) return;
    setup s;
    int small = getenv("DSINFER_OPS_SMALL") != NULL;   /* under compute-sanitizer: 9 and 63 tokens only */
    if (load_setup(&s, "v2l-wgbf", "configs/deepseek-v2-lite.json", 3, 16)) {
        const int m[] = {9, 63, 33, 256, 600}, m600[] = {600}, r[] = {63};
        check_moe_dt(&s, m, small ? 2 : NM(m), DS_DTYPE_BF16, 3, 0);
        moe_small_tc(&s, DS_DTYPE_BF16, 3);
        if (small) {
            free_setup(&s);
            return;
        }
        check_moe_dt(&s, r, NM(r), DS_DTYPE_BF16, 3, 1);
        setenv("DSINFER_CUDA_MOE_WG_NT", "32", 1);
        check_moe_dt(&s, m600, 1, DS_DTYPE_BF16, 3, 0);
        unsetenv("DSINFER_CUDA_MOE_WG_NT");
        free_setup(&s);
    }
    if (load_setup(&s, "v3-wgbf", "configs/deepseek-v3.json", 3, 16)) {
        const int m[] = {64};
        check_moe_dt(&s, m, NM(m), DS_DTYPE_BF16, 3, 0);
        free_setup(&s);
    }
}

/* Odd head counts, page size 5, partial FP8 blocks; small enough for compute-sanitizer. */
static void run_odd(const char *name, const char *path, int heads) {
    if (only) return;
    setup s;
    if (!load_setup(&s, name, path, heads, 5)) return;
    const int Ms[] = {1, 3, 4, 63};
    for (int i = 0; i < NM(Ms); i++) check_elementwise(&s, Ms[i]);
    check_linear(&s, "odd", 200, 300, DS_DTYPE_F8_E4M3, Ms, NM(Ms));
    check_linear(&s, "odd", 129, 77, DS_DTYPE_BF16, Ms, NM(Ms));
    check_linear(&s, "odd", 33, 65, DS_DTYPE_F32, Ms, NM(Ms));
    check_linear(&s, "odd", 200, 304, DS_DTYPE_NVFP4, Ms, NM(Ms));
    const int tcm[] = {63};
    check_linear_on(&s, "odd", 200, 300, DS_DTYPE_F8_E4M3, tcm, NM(tcm), 1);
    /* the skinny FP8 kernel: rows not a multiple of 16, partial token groups, the largest M it takes */
    const int skm[] = {9, 63, 256};
    check_linear_on(&s, "skinny", 200, 384, DS_DTYPE_F8_E4M3, skm, NM(skm), 1);
    check_linear_on(&s, "skinny", 200, 384, DS_DTYPE_NVFP4, skm, NM(skm), 1);   /* NVFP4 in registers, TC */
    check_linear_on(&s, "odd", 129, 77, DS_DTYPE_BF16, tcm, NM(tcm), 1);
    check_linear_on(&s, "odd", 200, 304, DS_DTYPE_NVFP4, tcm, NM(tcm), 1);
    for (int i = 0; i < NM(Ms); i++) check_attention(&s, Ms[i], 23);
    check_mlp(&s, s.cfg.intermediate_size > 512 ? 333 : s.cfg.intermediate_size, Ms, NM(Ms));
    for (int i = 0; i < NM(Ms); i++) check_route(&s, Ms[i]);
    check_route_v1(&s, Ms, NM(Ms));
    check_moe(&s, Ms, NM(Ms));
    if (s.cfg.hidden_size % 16 == 0 && s.cfg.moe_intermediate_size % 16 == 0) {
        check_moe_dt(&s, Ms, NM(Ms), DS_DTYPE_NVFP4, 0, 0);
        const int tcm63[] = {63};   /* NVFP4 experts decoded in registers on the tensor cores (cuda_moe_tc.cu) */
        check_moe_dt(&s, tcm63, 1, DS_DTYPE_NVFP4, 1, 0);
    }
    check_sample(&s);
    free_setup(&s);
}

/* The FP8 and BF16 KV caches (issue 9): kv_store byte for byte equal to the CPU's packer, both attention
 * forms over such a cache (NaN pages, shuffled tables) against the CPU reading the same bytes. unfused:
 * the absorbed form through the per-sequence kernel instead of the fused decode
 * (DSINFER_CUDA_FUSED_ATTN=0). */
static void run_kv(const char *name, const char *path, int heads, int kv_rank, int page_size, int unfused, int kv_layout,
                   const int *Ms, int nM, int max_cached) {
    if (only) return;
    setup s;
    if (unfused) setenv("DSINFER_CUDA_FUSED_ATTN", "0", 1);
    int ok = load_setup_kv(&s, name, path, heads, page_size, kv_rank, kv_layout);
    unsetenv("DSINFER_CUDA_FUSED_ATTN");
    if (!ok) return;
    for (int i = 0; i < nM; i++) if (Ms[i] <= max_m) check_elementwise(&s, Ms[i]);
    for (int i = 0; i < nM; i++) if (Ms[i] <= max_m) check_attention(&s, Ms[i], max_cached);
    free_setup(&s);
}

/* The tensor-core attention kernels at the widths they serve (kv_lora_rank 512, rope 64, heads 128 + 64 /
 * 128): the MLA decode (DSINFER_CUDA_MLA_TC=1, cuda_mla_tc.cu) for the absorbed form and the FlashAttention
 * prefill (DSINFER_CUDA_ATTN_TC=1, cuda_fa_tc.cu) for the naive form, against the fp32 CPU ops at THR_TC
 * (q, cache rows and probabilities in BF16); fp32 and FP8 caches, 16 and 128 heads and odd counts (3: one partial group; 20: a full and a
 * partial one), ragged batches over shuffled tables with NaN in the unused pages, contexts of several
 * 64-row tiles, splits left empty. */
static void run_attn_tc(const char *name, const char *path, int heads, int kv_layout, int page_size, const int *Ms,
                        int nM, int max_cached, int sampled_M) {
    setup s;
    setenv("DSINFER_CUDA_MLA_TC", "1", 1);
    setenv("DSINFER_CUDA_ATTN_TC", "1", 1);
    setenv("DSINFER_CUDA_TC", "1", 1);   /* and above 8 tokens the W_UK / W_UV products as batched BF16 GEMMs */
    setenv("DSINFER_CUDA_FP8_GEMM", "0", 1);   /* the attention alone (no W8A8 linear in these checks) */
    int ok = load_setup_kv(&s, name, path, heads, page_size, 0, kv_layout);
    unsetenv("DSINFER_CUDA_MLA_TC");
    unsetenv("DSINFER_CUDA_ATTN_TC");
    unsetenv("DSINFER_CUDA_TC");
    unsetenv("DSINFER_CUDA_FP8_GEMM");
    if (!ok) return;
    s.thr_absorbed = THR_TC;
    s.thr_naive = THR_TC;
    for (int i = 0; i < nM; i++) if (Ms[i] <= max_m) check_attention(&s, Ms[i], max_cached);
    if (sampled_M && sampled_M <= max_m) check_attention_sampled(&s, sampled_M, max_cached, 6);
    free_setup(&s);
}

static void run_mla_tc(const char *name, const char *path, int heads, int kv_layout, int page_size, const int *Ms,
                       int nM, int max_cached) {
    if (only && strcmp(only, "mla")) return;
    run_attn_tc(name, path, heads, kv_layout, page_size, Ms, nM, max_cached, 0);
}

/* DSINFER_OPS_ONLY=fa3: the naive-form prefill attention on wgmma (DSINFER_CUDA_FA3=1 and 2, the default; cuda_fa_wg.cu)
 * against the fp32 CPU at THR_TC: 3, 16, 20 and 128 heads; runs of new tokens across 128-row query blocks and key
 * tiles (129, 300, 600 tokens over ragged sequences with cached prefixes up to 300: a block's rows at positions
 * that do not start at a tile, warpgroups with no valid row, tiles only one warpgroup reaches); 4096 tokens with
 * the CPU on each sequence's last rows (the longest contexts); the overlapped form (=2); and v2 (=0) beside them. The
 * flag is read at backend creation. */
static void run_fa3(void) {
    if (only && strcmp(only, "fa3")) return;
    const int few[] = {1, 3, 63, 129}, many[] = {129, 300, 600}, v3m[] = {4, 200};
    setenv("DSINFER_CUDA_FA3", "1", 1);   /* without the overlap (fa_prefill3_kernel) */
    run_attn_tc("h3-fa3", "configs/deepseek-v2-lite.json", 3, KV_BF16, 5, few, NM(few), 300, 0);
    run_attn_tc("v2l-fa3", "configs/deepseek-v2-lite.json", 0, KV_BF16, 16, many, NM(many), 300, 4096);
    run_attn_tc("h20-fa3", "configs/deepseek-v2-lite.json", 20, KV_FP8, 7, many, NM(many), 150, 0);
    run_attn_tc("v3-fa3", "configs/deepseek-v3.json", 0, KV_BF16, 16, v3m, NM(v3m), 150, 0);
    /* the overlapped form (=2, the default: a warpgroup's S of tile k before P V of tile k - 1, P in two register sets
     * that swap roles every other tile: odd and even tile counts) */
    setenv("DSINFER_CUDA_FA3", "2", 1);
    run_attn_tc("h3-fa3o", "configs/deepseek-v2-lite.json", 3, KV_BF16, 5, few, NM(few), 300, 0);
    run_attn_tc("v2l-fa3o", "configs/deepseek-v2-lite.json", 0, KV_BF16, 16, many, NM(many), 300, 4096);
    run_attn_tc("v3-fa3o", "configs/deepseek-v3.json", 0, KV_BF16, 16, v3m, NM(v3m), 150, 0);
    setenv("DSINFER_CUDA_FA3", "0", 1);
    run_attn_tc("v2l-fa2", "configs/deepseek-v2-lite.json", 0, KV_BF16, 16, many, NM(many), 300, 0);
    unsetenv("DSINFER_CUDA_FA3");
}

/* qkv_finish fused (DSINFER_CUDA_QKV_FUSE=1: the kv_a RMSNorm, both RoPEs and the cache store in one launch) against
 * the same op on a backend without the switch (the four kernels, each checked against the CPU elsewhere): q, kv and
 * the whole cache (NaN pages, sentinels) bit for bit. */
static int bits_equal(setup *s, const buf *a, const buf *b, const char *what, int M) {
    size_t nb = (a->n + PAD) * sizeof(float), diff = device_units_differ(s, a->d, b->d, nb, 1);
    printf("  %-8s qkv_finish M=%-4d %-5s fused against four launches: %zu of %zu bytes differ\n", s->name, M, what, diff, nb);
    CHECKF(diff == 0, "%s qkv_finish M=%d: %s differs in %zu bytes", s->name, M, what, diff);
    return diff == 0;
}

static void check_qkv_finish(setup *s, ds_backend *fu, int M) {
    const ds_config *c = &s->cfg;
    char err[DS_ERRLEN];
    int C = c->kv_lora_rank, w = C + c->qk_rope_head_dim, H = c->num_heads;
    batch b;
    mk_batch(s, &b, M, 24, 16);
    set_batch(s, &b);
    CHECK(fu->set_batch(fu, &b.m, err) == DS_OK);
    buf c1 = mk_cache(s, &b), c2 = buf_new(s, c1.n);
    memcpy(c2.h, c1.h, (c1.n + PAD) * sizeof(float));
    ds_cuda_from_host(NULL, c2.d, c2.h, c2.n + PAD);
    buf q1 = buf_new(s, (size_t)M * H * c->qk_head_dim), q2 = buf_new(s, q1.n);
    buf k1 = buf_new(s, (size_t)M * w), k2 = buf_new(s, k1.n);
    buf_rand(&q1, 2.0f);
    buf_rand(&k1, 2.0f);
    memcpy(q2.h, q1.h, (q1.n + PAD) * sizeof(float));
    memcpy(k2.h, k1.h, (k1.n + PAD) * sizeof(float));
    ds_cuda_from_host(NULL, q2.d, q2.h, q2.n + PAD);
    ds_cuda_from_host(NULL, k2.d, k2.h, k2.n + PAD);
    wpair nw = mk_weight(s, 1, C, DS_DTYPE_F32, 1.0f, "kv_a_norm");
    s->gpu->qkv_finish(s->gpu, q1.d, k1.d, c1.d, &nw.d, 1e-6f, NULL);
    fu->qkv_finish(fu, q2.d, k2.d, c2.d, &nw.d, 1e-6f, NULL);
    bits_equal(s, &q1, &q2, "q", M);
    bits_equal(s, &k1, &k2, "kv", M);
    bits_equal(s, &c1, &c2, "cache", M);
    free(b.pt);
    buf *bufs[] = {&c1, &c2, &q1, &q2, &k1, &k2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) buf_free(s, bufs[i]);
    free_weight(&nw);
}

/* V2-Lite (16 heads) and V3 (128 heads: the RoPE pairs loop over the block several times) with the fp32, FP8 and
 * BF16 caches, 1 to 200 tokens over ragged sequences with cached prefixes. DSINFER_OPS_ONLY=qkv runs these alone. */
static void run_qkv_finish(void) {
    if (only && strcmp(only, "qkv")) return;
    const char *paths[2] = {"configs/deepseek-v2-lite.json", "configs/deepseek-v3.json"};
    const int layouts[3] = {KV_F32, KV_FP8, KV_BF16}, Ms[] = {1, 4, 63, 200};
    for (int p = 0; p < 2; p++)
        for (int l = 0; l < 3; l++) {
            setup s;
            setenv("DSINFER_CUDA_QKV_FUSE", "0", 1);   /* s.gpu: the four launches (the default is the fused form) */
            int ok = load_setup_kv(&s, p ? "v3-qkv" : "v2l-qkv", paths[p], 0, 16, 0, layouts[l]);
            unsetenv("DSINFER_CUDA_QKV_FUSE");
            if (!ok) continue;
            /* the fused launch with one block a token (split 0) and with q's heads in blocks of 4 (the default) and of
             * 3 (V2-Lite's 16 heads: a last block of one head), each against the four launches */
            const char *splits[3] = {"0", "4", "3"};
            for (int sp = 0; sp < 3; sp++) {
                char err[DS_ERRLEN];
                setenv("DSINFER_CUDA_QKV_FUSE", "1", 1);
                setenv("DSINFER_CUDA_QKV_SPLIT", splits[sp], 1);
                ds_backend *fu = ds_backend_cuda_new(&s.cfg, err);
                unsetenv("DSINFER_CUDA_QKV_FUSE");
                unsetenv("DSINFER_CUDA_QKV_SPLIT");
                if (!fu) { CHECKF(0, "%s", err); continue; }
                printf("  qkv_finish with DSINFER_CUDA_QKV_SPLIT=%s\n", splits[sp]);
                for (int i = 0; i < NM(Ms); i++) {
                    if (Ms[i] > max_m) continue;
                    long n0 = ds_cuda_qkv_split_launches(fu);
                    check_qkv_finish(&s, fu, Ms[i]);
                    long n = ds_cuda_qkv_split_launches(fu) - n0;
                    CHECKF(n == (sp > 0), "%s M=%d split %s: %ld launches with q's heads apart, expected %d", s.name, Ms[i],
                           splits[sp], n, sp > 0);
                }
                fu->destroy(fu);
            }
            free_setup(&s);
        }
}

/* The smallest gap, over the largest |score|, at the routing's choices for one token's logits lg[E] as the CPU scores
 * them in fp32 (ds_route_token's arithmetic): between the topk_group-th and the next group score (grouped routing) and
 * between consecutive ones of the K + 1 largest biased scores of the kept groups' experts (the K-th against the next:
 * which experts; the others: their order, which the ids' comparison sees too). The GPU's expf is within 2 ulp (CUDA's
 * documented bound), not the CPU's: a gap of a few ulp can flip a choice or swap two on the same logits (a seed of the
 * fifty-fifth session: V3 token 141's 7th and 8th biased scores 1 ulp apart, the two ids in the other order). */
static double route_ulp_gap(const ds_config *c, const float *lg, const float *bias) {
    const int E = c->n_routed_experts, K = c->num_experts_per_tok;
    const int G = c->topk_method != DS_TOPK_GREEDY && c->n_group > 1 ? c->n_group : 1, per = E / G;
    float *sc = malloc(sizeof(float) * 2 * (size_t)E), *b = sc + E, gs[1024];
    double top = 0, gap = INFINITY;
    DS_CHECK(sc && G <= 1024);
    float mx = -INFINITY, sum = 0.0f;
    for (int e = 0; e < E; e++) mx = lg[e] > mx ? lg[e] : mx;
    for (int e = 0; e < E; e++) {
        sc[e] = c->scoring == DS_SCORE_SIGMOID ? 1.0f / (1.0f + expf(-lg[e])) : expf(lg[e] - mx);
        sum += sc[e];
    }
    for (int e = 0; e < E; e++) {
        if (c->scoring != DS_SCORE_SIGMOID) sc[e] /= sum;
        b[e] = sc[e] + (c->topk_method == DS_TOPK_NOAUX_TC && bias ? bias[e] : 0.0f);
        top = fabs(b[e]) > top ? fabs(b[e]) : top;
    }
    if (G > 1) {   /* the group scores (restrict_groups'), the topk_group best kept, the others' experts dropped */
        unsigned char kept[1024] = {0};
        for (int g = 0; g < G; g++) {
            float m1 = -INFINITY, m2 = -INFINITY;
            for (int j = 0; j < per; j++) {
                float v = c->topk_method == DS_TOPK_NOAUX_TC ? b[g * per + j] : sc[g * per + j];
                if (v > m1) { m2 = m1; m1 = v; }
                else if (v > m2) m2 = v;
            }
            gs[g] = c->topk_method == DS_TOPK_NOAUX_TC && per > 1 ? m1 + m2 : m1;
        }
        float kth = 0, next = -INFINITY;
        for (int t = 0; t <= c->topk_group && t < G; t++) {   /* the topk_group + 1 largest, by selection */
            int best = -1;
            for (int g = 0; g < G; g++) if (!kept[g] && (best < 0 || gs[g] > gs[best])) best = g;
            if (t == c->topk_group) { next = gs[best]; break; }
            kth = gs[best];
            kept[best] = 1;
        }
        if (next > -INFINITY) gap = (double)kth - next;
        for (int e = 0; e < E; e++) if (!kept[e / per]) b[e] = -INFINITY;
    }
    float prev = 0;
    for (int k = 0; k <= K && k < E; k++) {   /* the K + 1 largest of the kept experts, each against the one before */
        int best = -1;
        for (int e = 0; e < E; e++) if (b[e] > -INFINITY && (best < 0 || b[e] > b[best])) best = e;
        if (best < 0) break;
        if (k > 0 && (double)prev - b[best] < gap) gap = (double)prev - b[best];
        prev = b[best];
        b[best] = -INFINITY;
    }
    free(sc);
    return gap / (top > 0 ? top : 1);
}
#define ROUTE_ULP_TIE 2e-6   /* route_ulp_gap below this: a tie at the scores' last bits (an ulp is 1.2e-7 of the score) */

/* A token whose choices differ from the CPU's (not at a tie): its gap, both routings and every logit (and bias) as hex
 * floats, so that the case can be rerun on the CPU from the log */
static void route_diag(const ds_config *c, int m, const float *lg, const float *bias, const int32_t *gid, const float *gw,
                       const int32_t *rid, const float *rw) {
    const int E = c->n_routed_experts, K = c->num_experts_per_tok;
    printf("  route_diag token %d: gap %.3g\n  route_diag gpu:", m, route_ulp_gap(c, lg, bias));
    for (int k = 0; k < K; k++) printf(" %d:%.9g", gid[k], gw[k]);
    printf("\n  route_diag cpu:");
    for (int k = 0; k < K; k++) printf(" %d:%.9g", rid[k], rw[k]);
    printf("\n  route_diag logits:");
    for (int e = 0; e < E; e++) printf(" %a", lg[e]);
    if (bias) {
        printf("\n  route_diag bias:");
        for (int e = 0; e < E; e++) printf(" %a", bias[e]);
    }
    printf("\n");
    fflush(stdout);   /* (before the CHECK's message on stderr: the lines stay whole in a shared log) */
}

/* The MoE routing as the backend runs it (ds_cuda_router): the router GEMM and the top-k in one kernel up to 256
 * tokens (DSINFER_CUDA_ROUTER_FUSED, default on), the GEMM then the routing kernel above (and with the switch
 * off). Per case: the logits against the CPU's linear (fp32 sums in another order: THR_GEMM), the choices against
 * the CPU's ds_route_token on the GPU's own logits (ids equal, weights THR_EXACT: routing near-ties cannot hide
 * an error here), every output NaN-poisoned before the call. Each M runs twice on new inputs (the kernel's tickets
 * must be back at zero after a launch). */
static void check_router(setup *s, ds_backend *gpu, const char *how, int M, const wpair *rw, const wpair *rb) {
    const ds_config *c = &s->cfg;
    int D = c->hidden_size, E = c->n_routed_experts, K = c->num_experts_per_tok;
    for (int rep = 0; rep < 2; rep++) {
        buf x = buf_new(s, (size_t)M * D), lg = buf_new(s, (size_t)M * E), w = buf_new(s, (size_t)M * K);
        buf ids = buf_new(s, (size_t)M * K);   /* int32 in float-sized units */
        buf_rand(&x, 1.0f);
        buf_poison(&lg);
        buf_poison(&w);
        buf_poison(&ids);
        ds_cuda_router(gpu, x.d, &rw->d, rb ? &rb->d : NULL, M, lg.d, (int32_t *)(void *)ids.d, w.d);
        s->cpu->linear(s->cpu, lg.h, x.h, &rw->h, M);
        char name[64];
        snprintf(name, sizeof name, "router logits %s", how);
        compare(s, name, M, &lg, THR_GEMM, 0);
        float *g = malloc(sizeof(float) * (size_t)M * E), *gw = malloc(sizeof(float) * (size_t)M * K);
        float *rwt = malloc(sizeof(float) * (size_t)M * K), *scratch = malloc(sizeof(float) * 2 * (size_t)E);
        int32_t *gid = malloc(sizeof(int32_t) * (size_t)M * K), *rid = malloc(sizeof(int32_t) * (size_t)M * K);
        float *bias = rb ? malloc(sizeof(float) * (size_t)E) : NULL;
        if (bias) for (int e = 0; e < E; e++) bias[e] = ((const float *)rb->h.data)[e];
        ds_cuda_download_bytes(gpu, g, lg.d, sizeof(float) * (size_t)M * E);
        ds_cuda_download_bytes(gpu, gw, w.d, sizeof(float) * (size_t)M * K);
        ds_cuda_download_bytes(gpu, gid, ids.d, sizeof(int32_t) * (size_t)M * K);
        for (int m = 0; m < M; m++)
            ds_route_token(c, g + (size_t)m * E, bias, rid + (size_t)m * K, rwt + (size_t)m * K, scratch);
        int differ = 0, ties = 0;
        double num = 0, den = 0;
        for (int m = 0; m < M; m++) {
            const size_t r = (size_t)m * K;
            int d = 0;
            for (int k = 0; k < K; k++) d += gid[r + k] != rid[r + k];
            if (d && route_ulp_gap(c, g + (size_t)m * E, bias) < ROUTE_ULP_TIE) {   /* a last-bits tie: not compared */
                ties++;
                continue;
            }
            if (d && differ < 2 * K) route_diag(c, m, g + (size_t)m * E, bias, gid + r, gw + r, rid + r, rwt + r);
            differ += d;
            for (int k = 0; k < K; k++) {
                num += ((double)gw[r + k] - rwt[r + k]) * ((double)gw[r + k] - rwt[r + k]);   /* NaN (unwritten) fails below */
                den += (double)rwt[r + k] * rwt[r + k];
            }
        }
        double nmse = num / (den > 0 ? den : 1);
        printf("  %-8s router %-12s M=%-4d (%s input): ids differing from the CPU's routing of its logits %d of %d "
               "(%d tokens at a last-bits tie left out), weights nmse %.2e\n", s->name, how, M, rep ? "second" : "first",
               differ, M * K, ties, nmse);
        CHECKF(differ == 0 && nmse <= THR_EXACT, "%s router %s M=%d: %d ids differ, weights nmse %.3g", s->name, how, M,
               differ, nmse);
        CHECKF(ties <= 1 + M / 64, "%s router %s M=%d: %d tokens at a last-bits tie (a few in thousands expected)", s->name,
               how, M, ties);
        free(g); free(gw); free(rwt); free(scratch); free(gid); free(rid); free(bias);
        buf_free(s, &x); buf_free(s, &lg); buf_free(s, &w); buf_free(s, &ids);
    }
}

/* A router form (backend b: DSINFER_CUDA_ROUTER_TOK=1 | 2, _ROUTER_XS, _ROUTE_FAST) against its reference (backend a) on
 * the same input: logits, ids and weights the same bytes (each token's sums are made the same way whatever its group). */
static void check_router_same(setup *s, ds_backend *a, ds_backend *b, const char *how, int M, const wpair *rw, const wpair *rb) {
    const ds_config *c = &s->cfg;
    int D = c->hidden_size, E = c->n_routed_experts, K = c->num_experts_per_tok;
    buf x = buf_new(s, (size_t)M * D), l1 = buf_new(s, (size_t)M * E), l2 = buf_new(s, (size_t)M * E);
    buf w1 = buf_new(s, (size_t)M * K), w2 = buf_new(s, (size_t)M * K), i1 = buf_new(s, (size_t)M * K), i2 = buf_new(s, (size_t)M * K);
    buf_rand(&x, 1.0f);
    buf_poison(&l1); buf_poison(&l2); buf_poison(&w1); buf_poison(&w2); buf_poison(&i1); buf_poison(&i2);
    ds_cuda_router(a, x.d, &rw->d, rb ? &rb->d : NULL, M, l1.d, (int32_t *)(void *)i1.d, w1.d);
    ds_cuda_router(b, x.d, &rw->d, rb ? &rb->d : NULL, M, l2.d, (int32_t *)(void *)i2.d, w2.d);
    size_t dl = device_units_differ(s, l1.d, l2.d, (size_t)M * E, sizeof(float));
    size_t di = device_units_differ(s, i1.d, i2.d, (size_t)M * K, sizeof(float));
    size_t dw = device_units_differ(s, w1.d, w2.d, (size_t)M * K, sizeof(float));
    printf("  %-8s router %-12s M=%-4d against the reference form: %zu logits, %zu ids, %zu weights differ\n", s->name, how, M,
           dl, di, dw);
    CHECKF(dl == 0 && di == 0 && dw == 0, "%s router %s M=%d: %zu logits, %zu ids, %zu weights differ from the reference form",
           s->name, how, M, dl, di, dw);
    buf_free(s, &x); buf_free(s, &l1); buf_free(s, &l2); buf_free(s, &w1); buf_free(s, &w2); buf_free(s, &i1); buf_free(s, &i2);
}

/* V2-Lite (softmax, greedy, 64 experts), V2-Lite with 60 experts (a partial slice of 8), V3 (sigmoid, noaux_tc
 * with the bias, 8 groups, 256 experts over 32 slices), each fused (ticket and cluster forms) and not; 1 .. 257 tokens (257: past the fused
 * kernel's limit, the two launches). DSINFER_OPS_ONLY=router runs these alone. */
static void run_router(void) {
    if (only && strcmp(only, "router")) return;
    const char *paths[3] = {"configs/deepseek-v2-lite.json", "configs/deepseek-v2-lite.json", "configs/deepseek-v3.json"};
    const char *names[3] = {"v2l-rt", "v2l60-rt", "v3-rt"};
    const int Ms[] = {1, 3, 4, 5, 63, 64, 130, 256, 257};
    for (int p = 0; p < 3; p++) {
        setup s;
        memset(&s, 0, sizeof s);
        char err[DS_ERRLEN];
        if (!read_config(paths[p], &s.cfg)) continue;
        if (p == 1) s.cfg.n_routed_experts = 60;   /* before the backends read the config */
        s.name = names[p];
        s.page_size = 16;
        s.cpu = ds_backend_cpu_new(&s.cfg, 0);
        /* the reference forms up to the K-slice and register-routing cases below: one K slice, route_warp's shared-memory
         * top-k (whatever the defaults) */
        setenv("DSINFER_CUDA_ROUTER_KS", "1", 1);
        setenv("DSINFER_CUDA_ROUTE_FAST", "0", 1);
        setenv("DSINFER_CUDA_ROUTER_FUSED", "0", 1);
        s.gpu = ds_backend_cuda_new(&s.cfg, err);   /* the router GEMM then the routing kernel */
        setenv("DSINFER_CUDA_ROUTER_FUSED", "1", 1);
        setenv("DSINFER_CUDA_ROUTER_FUSED_MIN_M", "1", 1);   /* from one token, whatever the default */
        setenv("DSINFER_CUDA_ROUTER_XS", "0", 1);            /* x read from global memory: the reference of the XS form */
        ds_backend *fu = ds_backend_cuda_new(&s.cfg, err);
        unsetenv("DSINFER_CUDA_ROUTER_XS");
        unsetenv("DSINFER_CUDA_ROUTER_FUSED");
        unsetenv("DSINFER_CUDA_ROUTER_FUSED_MIN_M");
        if (!s.gpu || !fu) {
            CHECKF(0, "%s", err);
            if (fu) fu->destroy(fu);
            free_setup(&s);
            continue;
        }
        int D = s.cfg.hidden_size, E = s.cfg.n_routed_experts;
        wpair rw = mk_weight(&s, E, D, DS_DTYPE_BF16, 2.0f / sqrtf((float)D), "router");
        int has_bias = s.cfg.topk_method == DS_TOPK_NOAUX_TC;
        wpair rb;
        memset(&rb, 0, sizeof rb);
        if (has_bias) rb = mk_weight(&s, 1, E, DS_DTYPE_F32, 0.1f, "router_bias");
        for (int i = 0; i < NM(Ms); i++) {
            if (Ms[i] > max_m) continue;
            check_router(&s, fu, "fused", Ms[i], &rw, has_bias ? &rb : NULL);
            check_router(&s, s.gpu, "two launches", Ms[i], &rw, has_bias ? &rb : NULL);
        }
        /* the fused kernel's token loop with its exit (DSINFER_CUDA_ROUTER_CLAMP=0; the flag is process-wide, read at
         * backend creation: these run last, and the next setup's backends set it back) */
        setenv("DSINFER_CUDA_ROUTER_CLAMP", "0", 1);
        setenv("DSINFER_CUDA_ROUTER_FUSED_MIN_M", "1", 1);
        ds_backend *fx = ds_backend_cuda_new(&s.cfg, err);
        unsetenv("DSINFER_CUDA_ROUTER_CLAMP");
        unsetenv("DSINFER_CUDA_ROUTER_FUSED_MIN_M");
        CHECKF(fx != NULL, "%s", err);
        const int Mx[] = {3, 5, 63};
        for (int i = 0; fx && i < NM(Mx); i++) check_router(&s, fx, "fused exit", Mx[i], &rw, has_bias ? &rb : NULL);
        if (fx) fx->destroy(fx);
        /* 1 and 2 tokens a block (DSINFER_CUDA_ROUTER_TOK): against the CPU, and the same bytes as 4 a block */
        for (int tok = 1; tok <= 2; tok++) {
            setenv("DSINFER_CUDA_ROUTER_TOK", tok == 1 ? "1" : "2", 1);
            setenv("DSINFER_CUDA_ROUTER_FUSED_MIN_M", "1", 1);
            ds_backend *ft = ds_backend_cuda_new(&s.cfg, err);
            unsetenv("DSINFER_CUDA_ROUTER_TOK");
            unsetenv("DSINFER_CUDA_ROUTER_FUSED_MIN_M");
            CHECKF(ft != NULL, "%s", err);
            const char *how = tok == 1 ? "fused tok 1" : "fused tok 2";
            for (int i = 0; ft && i < NM(Ms); i++) {
                if (Ms[i] > max_m) continue;
                check_router(&s, ft, how, Ms[i], &rw, has_bias ? &rb : NULL);
                if (Ms[i] <= 256) check_router_same(&s, fu, ft, how, Ms[i], &rw, has_bias ? &rb : NULL);
            }
            if (ft) ft->destroy(ft);
        }
        /* x's rows staged in shared memory (DSINFER_CUDA_ROUTER_XS=1) at 4 and 1 tokens a block: against the CPU, the same
         * bytes as the global-memory form, and its launches counted (V3's 4 x 7168 x 4 bytes pass 48 KB: none there) */
        for (int tok = 4; tok >= 1; tok -= 3) {
            setenv("DSINFER_CUDA_ROUTER_XS", "1", 1);
            setenv("DSINFER_CUDA_ROUTER_TOK", tok == 1 ? "1" : "0", 1);
            setenv("DSINFER_CUDA_ROUTER_FUSED_MIN_M", "1", 1);
            ds_backend *fx2 = ds_backend_cuda_new(&s.cfg, err);
            unsetenv("DSINFER_CUDA_ROUTER_XS");
            unsetenv("DSINFER_CUDA_ROUTER_TOK");
            unsetenv("DSINFER_CUDA_ROUTER_FUSED_MIN_M");
            CHECKF(fx2 != NULL, "%s", err);
            const char *how = tok == 1 ? "fused xs 1" : "fused xs 4";
            const int staged = (size_t)tok * D * 4 <= 48 * 1024;
            for (int i = 0; fx2 && i < NM(Ms); i++) {
                if (Ms[i] > max_m || Ms[i] > 256) continue;
                long n0 = ds_cuda_router_xs_launches(fx2);
                check_router(&s, fx2, how, Ms[i], &rw, has_bias ? &rb : NULL);
                long n = ds_cuda_router_xs_launches(fx2) - n0;
                CHECKF((n > 0) == staged, "%s router %s M=%d: %ld launches with x in shared memory (expected %s)", s.name, how,
                       Ms[i], n, staged ? "some" : "none");
                check_router_same(&s, fu, fx2, how, Ms[i], &rw, has_bias ? &rb : NULL);
            }
            if (fx2) fx2->destroy(fx2);
        }
        unsetenv("DSINFER_CUDA_ROUTER_KS");
        unsetenv("DSINFER_CUDA_ROUTE_FAST");
        check_route_forms(&s, Ms, NM(Ms));   /* the routing launch alone, its two forms, on random and tied logits */
        /* the routing warps' top-k in registers (DSINFER_CUDA_ROUTE_FAST=1), in the fused kernel's tail (4 tokens a
         * block and 1 with 4 K slices) and in the routing launch after the GEMM: against the CPU, and the same bytes as
         * route_warp */
        for (int f = 0; f < 3; f++) {
            setenv("DSINFER_CUDA_ROUTE_FAST", "1", 1);
            setenv("DSINFER_CUDA_ROUTER_FUSED", f < 2 ? "1" : "0", 1);
            setenv("DSINFER_CUDA_ROUTER_FUSED_MIN_M", "1", 1);
            setenv("DSINFER_CUDA_ROUTER_KS", f == 1 ? "4" : "1", 1);   /* (one slice: the same sums as the reference) */
            if (f == 1) setenv("DSINFER_CUDA_ROUTER_TOK", "1", 1);
            ds_backend *ff = ds_backend_cuda_new(&s.cfg, err);
            unsetenv("DSINFER_CUDA_ROUTE_FAST");
            unsetenv("DSINFER_CUDA_ROUTER_FUSED");
            unsetenv("DSINFER_CUDA_ROUTER_FUSED_MIN_M");
            unsetenv("DSINFER_CUDA_ROUTER_KS");
            unsetenv("DSINFER_CUDA_ROUTER_TOK");
            CHECKF(ff != NULL, "%s", err);
            const char *how = f == 0 ? "fast fused" : f == 1 ? "fast ks 4" : "fast 2 launch";
            for (int i = 0; ff && i < NM(Ms); i++) {
                if (Ms[i] > max_m || Ms[i] > 256) continue;
                check_router(&s, ff, how, Ms[i], &rw, has_bias ? &rb : NULL);
                if (f != 1) check_router_same(&s, f == 0 ? fu : s.gpu, ff, how, Ms[i], &rw, has_bias ? &rb : NULL);
            }
            if (ff) ff->destroy(ff);
        }
        /* the columns in 2 and 4 K slices (DSINFER_CUDA_ROUTER_KS), at 4 and 1 tokens a block: against the CPU (another
         * summation order, so not the same bytes as one slice), and the sliced launches counted (every setup's D divides;
         * KS_MAX_M 256: at every size the fused kernel takes) */
        for (int ks = 2; ks <= 4; ks += 2)
            for (int tok = 4; tok >= 1; tok -= 3) {
                setenv("DSINFER_CUDA_ROUTER_KS", ks == 2 ? "2" : "4", 1);
                setenv("DSINFER_CUDA_ROUTER_TOK", tok == 1 ? "1" : "0", 1);
                setenv("DSINFER_CUDA_ROUTER_FUSED_MIN_M", "1", 1);
                setenv("DSINFER_CUDA_ROUTER_KS_MAX_M", "256", 1);
                ds_backend *fk = ds_backend_cuda_new(&s.cfg, err);
                unsetenv("DSINFER_CUDA_ROUTER_KS_MAX_M");
                unsetenv("DSINFER_CUDA_ROUTER_KS");
                unsetenv("DSINFER_CUDA_ROUTER_TOK");
                unsetenv("DSINFER_CUDA_ROUTER_FUSED_MIN_M");
                CHECKF(fk != NULL, "%s", err);
                char how[32];
                snprintf(how, sizeof how, "fused ks %d tok %d", ks, tok);
                for (int i = 0; fk && i < NM(Ms); i++) {
                    if (Ms[i] > max_m || Ms[i] > 256) continue;
                    long n0 = ds_cuda_router_ks_launches(fk);
                    check_router(&s, fk, how, Ms[i], &rw, has_bias ? &rb : NULL);
                    long n = ds_cuda_router_ks_launches(fk) - n0;
                    CHECKF(n == 2, "%s router %s M=%d: %ld launches with K slices (expected 2)", s.name, how, Ms[i], n);
                }
                if (fk) fk->destroy(fk);
            }
        free_weight(&rw);
        if (has_bias) free_weight(&rb);
        fu->destroy(fu);
        free_setup(&s);
    }
}

/* kv_b's BF16 copy made once (ds_cuda_kvb_copy; DSINFER_CUDA_KVB_BF16 makes one a layer at weight upload), read by
 * the absorbed attention's batched GEMMs (tensor cores, all of a batch's tokens, more than 8): the same bits as
 * the per-call conversion it replaces, and the CPU at THR_TC. V2-Lite with an FP8 kv_b, ragged sequences with
 * cached prefixes. DSINFER_OPS_ONLY=kvb runs these alone. */
static void check_kvb_copy(setup *s, ds_backend *c32, int M) {
    const ds_config *c = &s->cfg;
    char err[DS_ERRLEN];
    int H = c->num_heads, C = c->kv_lora_rank, hw = c->qk_nope_head_dim + c->v_head_dim;
    batch b;
    mk_batch(s, &b, M, 64, 16);
    set_batch(s, &b);
    buf cache = mk_cache(s, &b);
    wpair kvb = mk_weight(s, H * hw, C, DS_DTYPE_F8_E4M3, 0.5f / sqrtf((float)C), "kv_b");
    size_t n = (size_t)M * H * c->v_head_dim;
    buf q = buf_new(s, (size_t)M * H * c->qk_head_dim), o1 = buf_new(s, n), o2 = buf_new(s, n);
    buf_rand(&q, 1.0f);
    buf_poison(&o1);
    buf_poison(&o2);
    s->gpu->attn_absorbed(s->gpu, o1.d, q.d, cache.d, &kvb.d, b.seqs, b.m.n_seqs);   /* converted in the call */
    CHECKF(ds_cuda_kvb_copy(s->gpu, &kvb.d, err) == DS_OK, "%s", err);
    s->gpu->attn_absorbed(s->gpu, o2.d, q.d, cache.d, &kvb.d, b.seqs, b.m.n_seqs);   /* the copy */
    size_t diff = device_units_differ(s, o1.d, o2.d, n, sizeof(float));
    printf("  %-8s attn absorbed M=%d: kv_b's BF16 copy against the per-call conversion: %zu of %zu values differ\n",
           s->name, M, diff, n);
    CHECKF(diff == 0, "%s M=%d: kv_b's BF16 copy changes %zu values", s->name, M, diff);
    /* mla_combine writing the W_UV GEMM's BF16 input itself (s->gpu) against fp32 + a conversion launch (c32) */
    CHECK(c32->set_batch(c32, &b.m, err) == DS_OK);
    buf_poison(&o1);
    c32->attn_absorbed(c32, o1.d, q.d, cache.d, &kvb.d, b.seqs, b.m.n_seqs);
    diff = device_units_differ(s, o1.d, o2.d, n, sizeof(float));
    printf("  %-8s attn absorbed M=%d: the combine's BF16 output against fp32 + conversion: %zu of %zu values differ\n",
           s->name, M, diff, n);
    CHECKF(diff == 0, "%s M=%d: the combine's BF16 output changes %zu values", s->name, M, diff);
    s->cpu->attn_absorbed(s->cpu, o2.h, q.h, cache.h, &kvb.h, b.seqs, b.m.n_seqs);
    compare(s, "attn absorbed, kv_b's BF16 copy", M, &o2, THR_TC, 0);
    free(b.pt);
    buf_free(s, &cache); buf_free(s, &q); buf_free(s, &o1); buf_free(s, &o2);
    free_weight(&kvb);
}

/* s loaded with the absorbed attention's batched-GEMM flags (tensor cores, the MLA decode on them, no W8A8) and env=1,
 * and *twin a backend of the same config with env=0: 1, else 0 (nothing to free; a twin that could not be made is a
 * failed check) */
static int load_absorbed_twin(setup *s, const char *name, const char *path, int heads, const char *env, ds_backend **twin) {
    setenv("DSINFER_CUDA_MLA_TC", "1", 1);
    setenv("DSINFER_CUDA_ATTN_TC", "1", 1);
    setenv("DSINFER_CUDA_TC", "1", 1);
    setenv("DSINFER_CUDA_FP8_GEMM", "0", 1);
    setenv(env, "1", 1);
    int ok = load_setup(s, name, path, heads, 16);
    char err[DS_ERRLEN];
    setenv(env, "0", 1);
    *twin = ok ? ds_backend_cuda_new(&s->cfg, err) : NULL;
    unsetenv(env);
    unsetenv("DSINFER_CUDA_MLA_TC");
    unsetenv("DSINFER_CUDA_ATTN_TC");
    unsetenv("DSINFER_CUDA_TC");
    unsetenv("DSINFER_CUDA_FP8_GEMM");
    if (ok && !*twin) {
        CHECKF(0, "%s", err);
        free_setup(s);
        ok = 0;
    }
    return ok;
}

static void run_kvb_copy(void) {
    if (only && strcmp(only, "kvb")) return;
    setup s;
    ds_backend *c32;   /* the combine's output in fp32, converted by a launch */
    if (!load_absorbed_twin(&s, "v2l-kvb", "configs/deepseek-v2-lite.json", 0, "DSINFER_CUDA_COMBINE_BF16", &c32)) return;
    char err[DS_ERRLEN];
    check_kvb_copy(&s, c32, 40);
    check_kvb_copy(&s, c32, 9);
    c32->destroy(c32);
    ds_weight bf = {0};
    bf.dtype = DS_DTYPE_BF16;
    bf.data = &bf;   /* any non-NULL address: refused before it is read */
    CHECK(ds_cuda_kvb_copy(s.gpu, &bf, err) == DS_ERR_ARG && strstr(err, "not FP8"));
    free_setup(&s);
}

/* The MLA split combine with its loads issued at once (mla_combine_v2_kernel; DSINFER_CUDA_COMBINE2=2: at every grid
 * size, by default small grids only; mla_combine_v3_kernel, =3) against mla_combine_kernel (=0): the absorbed attention's
 * output the same bits.
 * The switch is a process-wide flag read at backend creation: the setup's backend is made with it off, runs, then a
 * second backend turns it on and the setup's backend runs again. Ragged batches of M tokens with cached prefixes of up to max_cached rows: at 1
 * token up to 64 splits (two a lane in the kernel's warp 0), some of them empty. DSINFER_OPS_ONLY=combine. */
static void check_combine2(const char *name, const char *path, int heads, int M, int max_cached) {
    setup s;
    char err[DS_ERRLEN];
    setenv("DSINFER_CUDA_COMBINE2", "0", 1);
    setenv("DSINFER_CUDA_COMB_UV", "0", 1);   /* (the combine kernels themselves: at 1 .. 8 tokens COMB_UV would take them) */
    int ok = load_setup(&s, name, path, heads, 16);
    unsetenv("DSINFER_CUDA_COMBINE2");
    unsetenv("DSINFER_CUDA_COMB_UV");
    if (!ok) return;
    const ds_config *c = &s.cfg;
    int H = c->num_heads, C = c->kv_lora_rank, hw = c->qk_nope_head_dim + c->v_head_dim;
    batch b;
    mk_batch(&s, &b, M, max_cached, 16);
    set_batch(&s, &b);
    buf cache = mk_cache(&s, &b);
    wpair kvb = mk_weight(&s, H * hw, C, DS_DTYPE_BF16, 1.0f / sqrtf((float)C), "kv_b");
    size_t n = (size_t)M * H * c->v_head_dim;
    buf q = buf_new(&s, (size_t)M * H * c->qk_head_dim), o1 = buf_new(&s, n), o2 = buf_new(&s, n);
    buf_rand(&q, 1.0f);
    buf_poison(&o1);
    buf_poison(&o2);
    s.gpu->attn_absorbed(s.gpu, o1.d, q.d, cache.d, &kvb.d, b.seqs, b.m.n_seqs);   /* mla_combine_kernel */
    setenv("DSINFER_CUDA_COMBINE2", "2", 1);
    ds_backend *on = ds_backend_cuda_new(&s.cfg, err);                              /* v2 at every size */
    unsetenv("DSINFER_CUDA_COMBINE2");
    CHECKF(on != NULL, "%s", err);
    if (on) {
        s.gpu->attn_absorbed(s.gpu, o2.d, q.d, cache.d, &kvb.d, b.seqs, b.m.n_seqs);   /* mla_combine_v2_kernel */
        size_t diff = device_units_differ(&s, o1.d, o2.d, n, sizeof(float));
        printf("  %-8s attn absorbed M=%d (cached <= %d): combine v2 against v1: %zu of %zu values differ\n", s.name, M,
               max_cached, diff, n);
        CHECKF(diff == 0, "%s M=%d: mla_combine_v2_kernel changes %zu values", s.name, M, diff);
        s.cpu->attn_absorbed(s.cpu, o2.h, q.h, cache.h, &kvb.h, b.seqs, b.m.n_seqs);
        compare(&s, "attn absorbed, combine v2", M, &o2, THR_TC, 0);
        on->destroy(on);
        setenv("DSINFER_CUDA_COMBINE2", "3", 1);
        on = ds_backend_cuda_new(&s.cfg, err);                                          /* v3 at every size */
        unsetenv("DSINFER_CUDA_COMBINE2");
        CHECKF(on != NULL, "%s", err);
        if (on) {
            buf_poison(&o2);
            s.gpu->attn_absorbed(s.gpu, o2.d, q.d, cache.d, &kvb.d, b.seqs, b.m.n_seqs);   /* mla_combine_v3_kernel */
            diff = device_units_differ(&s, o1.d, o2.d, n, sizeof(float));
            printf("  %-8s attn absorbed M=%d (cached <= %d): combine v3 against v1: %zu of %zu values differ\n", s.name, M,
                   max_cached, diff, n);
            CHECKF(diff == 0, "%s M=%d: mla_combine_v3_kernel changes %zu values", s.name, M, diff);
            on->destroy(on);
        }
        ds_backend *dflt = ds_backend_cuda_new(&s.cfg, err);   /* the flag back to its default for the tests after */
        if (dflt) dflt->destroy(dflt);
    }
    free(b.pt);
    buf_free(&s, &cache); buf_free(&s, &q); buf_free(&s, &o1); buf_free(&s, &o2);
    free_weight(&kvb);
    free_setup(&s);
}

static void run_combine2(void) {
    if (only && strcmp(only, "combine")) return;
    check_combine2("v2l-cb2", "configs/deepseek-v2-lite.json", 0, 1, 3000);
    check_combine2("v2l-cb2", "configs/deepseek-v2-lite.json", 0, 4, 1500);
    check_combine2("v2l-cb2", "configs/deepseek-v2-lite.json", 0, 40, 300);
    check_combine2("v3-cb2", "configs/deepseek-v3.json", 0, 1, 3000);   /* 128 heads: the wgmma decode's splits */
    check_combine2("h20-cb2", "configs/deepseek-v2-lite.json", 20, 3, 700);
    check_combine2("v2l-cb2", "configs/deepseek-v2-lite.json", 0, 64, 1100);   /* a decode batch (v1's size, v3's target) */
    check_combine2("v2l-cb2", "configs/deepseek-v2-lite.json", 0, 200, 300);
}

/* DSINFER_OPS_ONLY=mlafold: the MLA decode's split combine folded into the decode kernel (DSINFER_CUDA_MLA_FOLD=1: each
 * (entry, head group)'s last split block merges the splits, cuda_mla_tc.cu t2_fold_combine) against the combine launch
 * (=0) on the same inputs: the absorbed attention's output the same bits, and the folded decodes counted (the BF16 cache's
 * mma.sync kernel, and the FP8 cache's with DSINFER_CUDA_MLA_TC2_FP8=1; not the FP8 raw-row kernel, =2, nor 128 heads'
 * wgmma kernel: there the launch runs and nothing is counted). V2-Lite's 16 heads, 20 heads (two groups, the second of
 * 4), 1 .. 200 tokens with cached prefixes (splits with no rows among them at one token). */
/* The MLA twins' switch: env=val on the twin's backend, its runs counted by count (of the twin, or of the default backend),
 * `want` of them expected a call on the twin, none on the default */
typedef struct {
    const char *env, *val, *what;
    long (*count)(ds_backend *);
    double nmse;   /* 0: the same bits as the default; else the NMSE against it at most this (another order of additions) */
    int fp8_kvb;   /* kv_b FP8 with block scales (else BF16) */
} mla_twin;

static void check_mla_twin(const mla_twin *tw, const char *name, const char *path, int heads, int kv_layout, int M,
                           int max_cached, int want) {
    setup s;
    char err[DS_ERRLEN];
    setenv("DSINFER_CUDA_MLA_TC", "1", 1);
    setenv("DSINFER_CUDA_TC", "1", 1);
    setenv("DSINFER_CUDA_COMB_UV", "0", 1);   /* both sides' combine and W_UV apart, unless the twin is COMB_UV itself */
    int ok = load_setup_kv(&s, name, path, heads, 16, 0, kv_layout);
    setenv(tw->env, tw->val, 1);
    ds_backend *on = ok ? ds_backend_cuda_new(&s.cfg, err) : NULL;
    unsetenv(tw->env);
    unsetenv("DSINFER_CUDA_COMB_UV");
    unsetenv("DSINFER_CUDA_MLA_TC");
    unsetenv("DSINFER_CUDA_TC");
    if (!ok) return;
    CHECKF(on != NULL, "%s", err);
    if (!on) { free_setup(&s); return; }
    const ds_config *c = &s.cfg;
    int H = c->num_heads, C = c->kv_lora_rank, hw = c->qk_nope_head_dim + c->v_head_dim;
    batch b;
    mk_batch(&s, &b, M, max_cached, 16);
    set_batch(&s, &b);
    CHECK(on->set_batch(on, &b.m, err) == DS_OK);
    buf cache = mk_cache(&s, &b);
    wpair kvb = mk_weight(&s, H * hw, C, tw->fp8_kvb ? DS_DTYPE_F8_E4M3 : DS_DTYPE_BF16, 1.0f / sqrtf((float)C), "kv_b");
    size_t n = (size_t)M * H * c->v_head_dim;
    buf q = buf_new(&s, (size_t)M * H * c->qk_head_dim), o1 = buf_new(&s, n), o2 = buf_new(&s, n);
    buf_rand(&q, 1.0f);
    buf_poison(&o1);
    buf_poison(&o2);
    long f0 = tw->count(on);
    /* first on another q: the checked launch finds what the first left (the fold's tickets put back, the workspaces
     * holding another result), so that a twin that did not run (or ran early) shows */
    buf q0 = buf_new(&s, q.n);
    buf_rand(&q0, 1.0f);
    on->attn_absorbed(on, o2.d, q0.d, cache.d, &kvb.d, b.seqs, b.m.n_seqs);
    buf_free(&s, &q0);
    buf_poison(&o2);
    on->attn_absorbed(on, o2.d, q.d, cache.d, &kvb.d, b.seqs, b.m.n_seqs);
    long ran = tw->count(on) - f0, plain = tw->count(s.gpu);
    s.gpu->attn_absorbed(s.gpu, o1.d, q.d, cache.d, &kvb.d, b.seqs, b.m.n_seqs);
    plain = tw->count(s.gpu) - plain;
    size_t diff = device_units_differ(&s, o1.d, o2.d, n, sizeof(float));
    double nm = device_nmse(&s, o2.d, o1.d, n);
    printf("  %-8s attn absorbed M=%d (cached <= %d): %s %ld time(s) (without the switch %ld), %zu of %zu values differ "
           "from the default (NMSE %.3g)\n", s.name, M, max_cached, tw->what, ran, plain, diff, n, nm);
    if (tw->nmse > 0) CHECKF(nm <= tw->nmse, "%s M=%d: %s: NMSE %.3g against the default (at most %.3g)", s.name, M, tw->env,
                             nm, tw->nmse);
    else CHECKF(diff == 0, "%s M=%d: %s changes %zu values", s.name, M, tw->env, diff);
    CHECKF(ran == (want ? 2 : 0) && plain == 0, "%s M=%d: %s %ld / %ld times (expected %d / 0)", s.name, M, tw->what, ran,
           plain, want ? 2 : 0);
    s.cpu->attn_absorbed(s.cpu, o2.h, q.h, cache.h, &kvb.h, b.seqs, b.m.n_seqs);
    compare(&s, tw->what, M, &o2, THR_TC, 0);
    free(b.pt);
    buf_free(&s, &cache); buf_free(&s, &q); buf_free(&s, &o1); buf_free(&s, &o2);
    free_weight(&kvb);
    on->destroy(on);
    free_setup(&s);
}

/* DSINFER_OPS_ONLY=combuv: the split combine and W_UV in one launch (DSINFER_CUDA_COMB_UV=1, mla_comb_uv_kernel) against
 * the combine launch and the GEMV: the output within NMSE 1e-12 of the default (the product's additions in another order)
 * and against the CPU; counted on 1 .. 8 tokens (the GEMV's range with every sequence), not at 9; BF16 and FP8 kv_b,
 * V2-Lite's 16 heads and 20, the BF16 and the FP8 caches, contexts up to 3000 (many splits, some with no rows), and at
 * most 8 splits (DSINFER_CUDA_MLA_MAX_SPLITS, on both backends: no split past the preloaded ones). */
static void run_comb_uv(void) {
    if (only && strcmp(only, "combuv")) return;
    static const mla_twin uv = {"DSINFER_CUDA_COMB_UV", "1", "combine and W_UV in one launch", ds_cuda_comb_uv_runs, 1e-12, 0};
    static const mla_twin uv8 = {"DSINFER_CUDA_COMB_UV", "1", "combine and W_UV in one launch", ds_cuda_comb_uv_runs, 1e-12, 1};
    const int Ms[] = {1, 2, 5, 8, 9};
    for (int i = 0; i < NM(Ms); i++) {
        if (Ms[i] > max_m) continue;
        const int want = Ms[i] <= 8;
        check_mla_twin(&uv, "v2l-uv", "configs/deepseek-v2-lite.json", 0, KV_BF16, Ms[i], Ms[i] == 1 ? 3000 : 900, want);
        check_mla_twin(&uv8, "v2l-uv8", "configs/deepseek-v2-lite.json", 0, KV_FP8, Ms[i], 700, want);
        check_mla_twin(&uv8, "h20-uv8", "configs/deepseek-v2-lite.json", 20, KV_BF16, Ms[i], 700, want);
        setenv("DSINFER_CUDA_MLA_MAX_SPLITS", "8", 1);   /* (both backends: every split's partials loaded at once) */
        check_mla_twin(&uv, "v2l-uvs8", "configs/deepseek-v2-lite.json", 0, KV_BF16, Ms[i], 900, want);
        unsetenv("DSINFER_CUDA_MLA_MAX_SPLITS");
    }
}

static void run_mla_fold(void) {
    if (only && strcmp(only, "mlafold")) return;
    static const mla_twin fold = {"DSINFER_CUDA_MLA_FOLD", "1", "the split combine folded", ds_cuda_mla_fold_runs, 0, 0};
    const int Ms[] = {1, 4, 64, 200};
    for (int i = 0; i < NM(Ms); i++) {
        if (Ms[i] > max_m) continue;
        check_mla_twin(&fold, "v2l-fold", "configs/deepseek-v2-lite.json", 0, KV_BF16, Ms[i], Ms[i] == 1 ? 3000 : 900, 1);
        check_mla_twin(&fold, "h20-fold", "configs/deepseek-v2-lite.json", 20, KV_BF16, Ms[i], 700, 1);
    }
    setenv("DSINFER_CUDA_MLA_TC2_FP8", "1", 1);   /* the FP8 cache on the mma.sync kernel with BF16 decode: folds */
    check_mla_twin(&fold, "v2l-fold8", "configs/deepseek-v2-lite.json", 0, KV_FP8, 64, 900, 1);
    unsetenv("DSINFER_CUDA_MLA_TC2_FP8");
    /* raw rows (=2, the default; its backends put the process-wide flag back for the tests after): no fold */
    check_mla_twin(&fold, "v2l-fold8", "configs/deepseek-v2-lite.json", 0, KV_FP8, 64, 900, 0);
}

/* One W8A8 linear (w2 NULL) or linear2 of x on a fresh backend with env=flag (process-wide, read at creation), twice
 * (the second launch finds what the first left), into o1 (o2) poisoned first */
static void f8alt_run(setup *s, const char *env, const char *flag, const wpair *w1, const wpair *w2, const buf *x, buf *o1,
                      buf *o2, int M) {
    char err[DS_ERRLEN];
    ds_backend *gpu = w8_backend_with(s, env, flag, err);
    if (!gpu) { CHECKF(0, "%s", err); return; }
    buf_poison(o1);
    if (w2) buf_poison(o2);
    for (int pass = 0; pass < 2; pass++) {
        if (w2) gpu->linear2(gpu, o1->d, o2->d, x->d, &w1->d, &w2->d, M);
        else gpu->linear(gpu, o1->d, x->d, &w1->d, M);
    }
    gpu->destroy(gpu);
}

/* A W8A8 path switched by env (=on) against the one it replaces (=off) on the same x: linear (N x K at each M) or, with
 * N2 > 0, linear2 (two weights; one launch up to 64 rows). `same`: the outputs must be the same bits; always against
 * the CPU on x quantized the same way (THR_W8A8). */
static void check_f8_alt_v(setup *s, const char *env, const char *off, const char *on, const char *what, int N, int N2, int K,
                           const int *Ms, int nM, int same) {
    wpair w1 = mk_weight(s, N, K, DS_DTYPE_F8_E4M3, 0.5f / sqrtf((float)K), what), w2;
    memset(&w2, 0, sizeof w2);
    if (N2) w2 = mk_weight(s, N2, K, DS_DTYPE_F8_E4M3, 0.5f / sqrtf((float)K), what);
    for (int i = 0; i < nM; i++) {
        int M = Ms[i];
        if (M > max_m) continue;
        prime(s, M);
        buf x = buf_new(s, (size_t)M * K), a1 = buf_new(s, (size_t)M * N), b1 = buf_new(s, (size_t)M * N);
        buf a2 = buf_new(s, (size_t)M * (N2 ? N2 : 1)), b2 = buf_new(s, (size_t)M * (N2 ? N2 : 1));
        w8a8_input(&x, M, K);
        f8alt_run(s, env, off, &w1, N2 ? &w2 : NULL, &x, &a1, &a2, M);
        f8alt_run(s, env, on, &w1, N2 ? &w2 : NULL, &x, &b1, &b2, M);
        size_t diff = device_units_differ(s, a1.d, b1.d, a1.n + PAD, sizeof(float));
        if (N2) diff += device_units_differ(s, a2.d, b2.d, a2.n + PAD, sizeof(float));
        printf("  %-8s W8A8 %s M=%d: %s=%s against =%s: %zu values differ%s\n", s->name, what, M, env, on, off, diff,
               same ? "" : " (not required equal)");
        if (same) CHECKF(diff == 0, "%s %s M=%d: %s=%s changes %zu values", s->name, what, M, env, on, diff);
        float *xq = malloc(sizeof(float) * (size_t)M * K);
        act_quant_ref(xq, x.h, M, K);
        char name[96];
        s->cpu->linear(s->cpu, b1.h, xq, &w1.h, M);
        snprintf(name, sizeof name, "W8A8 %s %s", env + 12, what);
        compare(s, name, M, &b1, THR_W8A8, 0);
        if (N2) {
            s->cpu->linear(s->cpu, b2.h, xq, &w2.h, M);
            snprintf(name, sizeof name, "W8A8 %s %s (second)", env + 12, what);
            compare(s, name, M, &b2, THR_W8A8, 0);
        }
        free(xq);
        buf_free(s, &x); buf_free(s, &a1); buf_free(s, &b1); buf_free(s, &a2); buf_free(s, &b2);
    }
    free_weight(&w1);
    if (N2) free_weight(&w2);
}

static void check_f8_alt(setup *s, const char *env, const char *what, int N, int N2, int K, const int *Ms, int nM, int same) {
    check_f8_alt_v(s, env, "0", "1", what, N, N2, K, Ms, nM, same);
}

static void check_mlp_w8a8(setup *s, int I, const char *hfuse, int fuse);

/* DSINFER_OPS_ONLY=f8t1: the one-warpgroup W8A8 GEMM with its stages loaded by TMA (DSINFER_CUDA_F8_TMA1=1,
 * f8_tma1_kernel) against the cp.async kernel it replaces: the same bits, at V2-Lite's decode shapes (o, the shared
 * down, q + kv_a as linear2), V3's q_a + kv_a (K 7168, 14 splits), odd shapes (partial column blocks, rows below 64,
 * K/128 = 3, 10), splits longer than the ring and none; then the fused W8A8 MLP (its gate / up launch) against the
 * CPU with the switch on. */
static void run_f8_tma1(void) {
    if (only && strcmp(only, "f8t1")) return;
    setup s;
    if (!load_setup(&s, "v2l-f8t1", "configs/deepseek-v2-lite.json", 0, 16)) return;
    const char *E = "DSINFER_CUDA_F8_TMA1";
    const int Ms[] = {2, 9, 63, 64}, M2[] = {4, 33, 64};
    check_f8_alt(&s, E, "v2l o", 2048, 0, 2048, Ms, NM(Ms), 1);
    check_f8_alt(&s, E, "v2l sh down", 2048, 0, 2816, Ms, NM(Ms), 1);
    check_f8_alt(&s, E, "v2l q+kv_a", 3072, 576, 2048, M2, NM(M2), 1);
    check_f8_alt(&s, E, "odd", 260, 0, 384, Ms, NM(Ms), 1);
    check_f8_alt(&s, E, "odd", 92, 132, 1280, M2, NM(M2), 1);
    check_f8_alt(&s, E, "v3 q_a+kv_a", 2112, 0, 7168, Ms, NM(Ms), 1);
    check_f8_alt(&s, E, "wide", 16384, 0, 1280, Ms, NM(Ms), 1);   /* 2 splits of 5 stages: the ring refilled */
    check_f8_alt(&s, E, "no split", 33920, 0, 384, Ms, NM(Ms), 1);   /* 265 column blocks: one split */
    setenv(E, "1", 1);
    check_mlp_w8a8(&s, 2816, "2", 1);
    unsetenv(E);
    free_setup(&s);
    if (load_setup(&s, "f8t1-off", "tests/fixtures/tiny-v3-fp8/config.json", 3, 16)) free_setup(&s);   /* flag back off */
}

/* DSINFER_OPS_ONLY=f8tp: the TMA kernel (above 64 rows) loading a k-block's scales before waiting for its stage
 * (DSINFER_CUDA_F8_TM_PREF=1) against it loading them after the MMAs: the same bits at V2-Lite's decode shapes, V3's
 * q_a + kv_a, an odd shape (a partial column block, K/128 = 3: one and two k-blocks a tile's tail), prefill-sized 1024
 * rows; then the prefill MoE's grouped form (the same kernel, GROUPED) against the CPU with the switch on. */
static void run_f8_tm_pref(void) {
    if (only && strcmp(only, "f8tp")) return;
    setup s;
    const char *E = "DSINFER_CUDA_F8_TM_PREF";
    if (load_setup(&s, "v2l-f8tp", "configs/deepseek-v2-lite.json", 3, 16)) {
        const int Ms[] = {65, 130, 200, 256}, Mb[] = {129, 1024};
        check_f8_alt(&s, E, "v2l o", 2048, 0, 2048, Ms, NM(Ms), 1);
        check_f8_alt(&s, E, "v2l sh down", 2048, 0, 2816, Mb, NM(Mb), 1);
        check_f8_alt(&s, E, "v3 q_a+kv_a", 2112, 0, 7168, Ms, NM(Ms), 1);
        check_f8_alt(&s, E, "odd", 260, 0, 384, Ms, NM(Ms), 1);
        free_setup(&s);
    }
    setenv("DSINFER_MOE_W8A8", "1", 1);
    setenv(E, "1", 1);   /* read by the setup's backend at its creation */
    if (load_setup(&s, "v2l-f8tpm", "configs/deepseek-v2-lite.json", 3, 16)) {
        const int m[] = {1100};
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
        free_setup(&s);
    }
    unsetenv(E);
    unsetenv("DSINFER_MOE_W8A8");
    if (load_setup(&s, "f8tp-off", "tests/fixtures/tiny-v3-fp8/config.json", 3, 16)) free_setup(&s);   /* flags back off */
}

/* DSINFER_OPS_ONLY=f8ss: the TMA kernel with each k-block's scales staged into shared memory by its producer warp
 * (DSINFER_CUDA_F8_TM_SS=1, =2) or by each consumer warp's cp.async into its ring (=4, plain and TMA-store forms, counted)
 * against the global loads (=0): the same bits, in the plain dense form (65 .. 256 rows) and
 * the TMA-store form (TM_STORE_MIN_M=1: every row count) with its 4-stage ring (=1) and with 5 stages and the epilogue in
 * halves (=2), and with the scales bulk-copied from their transposed form into a 5-stage ring (=3: the weight scale
 * picked from a 16-byte window whose place varies with the row's start: K/128 = 22, 3, 5; where the shared memory's start
 * is not 1024-byte aligned =3 runs the plain form and the launch count below fails), at V2-Lite's o and shared down, V3's q_a +
 * kv_a (K 7168), an odd 260 x 384 (K/128 = 3, a partial column block) and K/128 = 1 and 2 (tiles shorter than the ring),
 * 129 and 1024 rows (a last row block with one row: the staged rows past M are zeros); then the prefill MoE's grouped form
 * against the CPU with it on (experts' partial tiles: rows past an expert's end). */
static void run_f8_tm_ss(void) {
    if (only && strcmp(only, "f8ss")) return;
    setup s;
    const char *E = "DSINFER_CUDA_F8_TM_SS";
    if (load_setup(&s, "v2l-f8ss", "configs/deepseek-v2-lite.json", 3, 16)) {
        const int Ms[] = {65, 130, 200, 256}, Mb[] = {129, 1024};
        for (int v = 0; v < 6; v++) {   /* SS 1 plain, SS 1 TMA-store, SS 2, 3 TMA-store, SS 4 plain, SS 4 TMA-store */
            const char *on[] = {"1", "1", "2", "3", "4", "4"};
            if (v && v != 4) setenv("DSINFER_CUDA_F8_TM_STORE_MIN_M", "1", 1);
            long xt0 = ds_cuda_f8_tm_xt_launches(), rg0 = ds_cuda_f8_tm_ring_launches();
            check_f8_alt_v(&s, E, "0", on[v], "v2l o", 2048, 0, 2048, Ms, NM(Ms), 1);
            check_f8_alt_v(&s, E, "0", on[v], "v2l sh down", 2048, 0, 2816, Mb, NM(Mb), 1);
            check_f8_alt_v(&s, E, "0", on[v], "v3 q_a+kv_a", 2112, 0, 7168, Ms, NM(Ms), 1);
            check_f8_alt_v(&s, E, "0", on[v], "odd", 260, 0, 384, Ms, NM(Ms), 1);
            check_f8_alt_v(&s, E, "0", on[v], "K 128", 384, 0, 128, Mb, NM(Mb), 1);
            check_f8_alt_v(&s, E, "0", on[v], "K 256", 384, 0, 256, Mb, NM(Mb), 1);
            if (v >= 3) check_f8_alt_v(&s, E, "0", on[v], "K 640", 640, 0, 640, Mb, NM(Mb), 1);   /* K/128 = 5: windows at 4 .. 7 */
            long xt = ds_cuda_f8_tm_xt_launches() - xt0;   /* =3: every GEMM of =on[v] by the transposed scales' form */
            long rg = ds_cuda_f8_tm_ring_launches() - rg0;   /* =4: every GEMM of =on[v] by the scale rings' form */
            int want = 0;   /* 3 shapes at Ms, 4 at Mb (K 640 with them) */
            for (int k = 0; k < NM(Ms); k++) want += 3 * (Ms[k] <= max_m);
            for (int k = 0; k < NM(Mb); k++) want += 4 * (Mb[k] <= max_m);
            printf("  %-8s W8A8 =%s%s: %ld launches of the transposed scales' form (at least %d expected), %ld of the scale "
                   "rings' (at least %d)\n", s.name, on[v], v == 4 ? " plain" : "", xt, v == 3 ? want : 0, rg, v >= 4 ? want : 0);
            CHECKF(v == 3 ? xt >= want : xt == 0, "%s =%s: %ld launches of the transposed scales' form", s.name, on[v], xt);
            CHECKF(v >= 4 ? rg >= want : rg == 0, "%s =%s: %ld launches of the scale rings' form", s.name, on[v], rg);
            unsetenv("DSINFER_CUDA_F8_TM_STORE_MIN_M");
        }
        free_setup(&s);
    }
    setenv("DSINFER_MOE_W8A8", "1", 1);
    setenv(E, "1", 1);   /* read by the setup's backend at its creation */
    if (load_setup(&s, "v2l-f8ssm", "configs/deepseek-v2-lite.json", 3, 16)) {
        const int m[] = {1100};
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
        free_setup(&s);
    }
    unsetenv(E);
    unsetenv("DSINFER_MOE_W8A8");
    if (load_setup(&s, "f8ss-off", "tests/fixtures/tiny-v3-fp8/config.json", 3, 16)) free_setup(&s);   /* flags back off */
}

/* DSINFER_OPS_ONLY=moeqf: the FP8 decode experts with gate / up's epilogue quantizing the down input
 * (DSINFER_CUDA_MOE_WG_QF, cuda_moe_wg.cu: =1 mw_store_qf, a byte a thread; =2 mw_store_qf_rows, whole rows through
 * shared memory) against the BF16 copy and quantizer launch (the twin, =0): the same bits, at 2 .. 256 tokens (32, 48 and
 * 64 tokens a chunk; experts of several chunks at 256), V2-Lite and V3 (256 experts, K = 7168), and against the CPU. =2's
 * gate / up launches are counted (one a call), and its two stagings both run: past the ring's stages (32 and 48 tokens a
 * chunk) and in the item's held last stage (64: V2-Lite at 256 tokens, 24 rows an expert; V3 at 64 tokens with
 * DSINFER_CUDA_MOE_WG_NT=64). With =2 also under PIPE=2 (gate / up pipelined at 32 tokens, the spare staging). */
static void run_moe_qf(void) {
    if (only && strcmp(only, "moeqf")) return;
    setup s;
    setenv("DSINFER_MOE_W8A8", "1", 1);
    moe_twin = 1;
    moe_twin_env = "DSINFER_CUDA_MOE_WG_QF";
    for (int form = 1; form <= 3; form++) {   /* 3: =2 with PIPE=2 */
        setenv("DSINFER_CUDA_MOE_WG_QF", form == 1 ? "1" : "2", 1);   /* the backends check_moe_dt makes; its twin with =0 */
        if (form == 3) setenv("DSINFER_CUDA_MOE_WG_PIPE", "2", 1);
        moe_twin_count = form >= 2 ? ds_cuda_moe_wg_qfrow_launches : NULL;
        moe_twin_what = "storing the codes as rows";
        moe_twin_want = 1;
        long hold0 = ds_cuda_moe_wg_qfhold_launches();
        if (load_setup(&s, form == 1 ? "v2l-qf" : form == 2 ? "v2l-qf2" : "v2l-qf2p", "configs/deepseek-v2-lite.json", 3, 16)) {
            const int m[] = {2, 9, 63, 130, 256};
            check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
            free_setup(&s);
        }
        if (form != 3 && load_setup(&s, form == 1 ? "v3-qf" : "v3-qf2", "configs/deepseek-v3.json", 3, 16)) {
            const int m[] = {4, 64};
            check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
            setenv("DSINFER_CUDA_MOE_WG_NT", "64", 1);
            const int m64[] = {64};
            check_moe_dt(&s, m64, NM(m64), DS_DTYPE_F8_E4M3, 2, 0);
            unsetenv("DSINFER_CUDA_MOE_WG_NT");
            free_setup(&s);
        }
        unsetenv("DSINFER_CUDA_MOE_WG_PIPE");
        long held = ds_cuda_moe_wg_qfhold_launches() - hold0;
        printf("  moeqf =%d%s: %ld launches of the rows form staged in a held stage\n", form == 1 ? 1 : 2,
               form == 3 ? " (PIPE=2)" : "", held);
        if (max_m >= 256) CHECKF(form == 1 ? held == 0 : held > 0, "moeqf form %d: %ld launches staged in a held stage", form, held);
    }
    moe_twin = 0;
    moe_twin_count = NULL;
    moe_twin_env = "DSINFER_CUDA_SHARED_STREAM";
    unsetenv("DSINFER_CUDA_MOE_WG_QF");
    unsetenv("DSINFER_MOE_W8A8");
}

/* DSINFER_OPS_ONLY=moe1: the MoE block of one token as one cooperative launch (DSINFER_CUDA_MOE1=1, cuda_moe1.cu) against
 * the usual launches (the twin, =0) and the CPU: V2-Lite with FP8 and with BF16 experts (64 experts, top-6, two shared
 * experts as one MLP; FP8 again with DSINFER_CUDA_MOE1_PF=1), V3 with FP8 experts (256 experts, top-8 within the best 4 of 8 groups, the bias, one shared
 * expert; with route_warp's register form and, DSINFER_CUDA_ROUTE_FAST=0, its shared-memory form). Another order of fp32
 * additions (the router's, the rows', and the weighted experts inside one sum where the combine adds them one by one)
 * with the same choices: NMSE against the twin at most 1e-9 (a different choice gives ~1e-1); the launch counted (one a
 * call, none in the twin). */
static void run_moe1(void) {
    if (only && strcmp(only, "moe1")) return;
    setup s;
    setenv("DSINFER_CUDA_MOE1", "1", 1);   /* the backends check_moe_dt makes; its twin with =0 */
    moe_twin = 1;
    moe_twin_env = "DSINFER_CUDA_MOE1";
    moe_twin_count = ds_cuda_moe1_runs;
    moe_twin_what = "by the one-token launch";
    moe_twin_want = 1;
    moe_twin_nmse = 1e-9;
    moe_twin_nmse_only = 1;
    const int m[] = {1};
    if (load_setup(&s, "v2l-moe1", "configs/deepseek-v2-lite.json", 3, 16)) {
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
        check_moe_dt(&s, m, NM(m), DS_DTYPE_BF16, 3, 0);
        setenv("DSINFER_CUDA_MOE1_PF", "1", 1);   /* the rows asked of L2 before each barrier (the twin: separate launches) */
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
        unsetenv("DSINFER_CUDA_MOE1_PF");
        free_setup(&s);
    }
    for (int fast = 1; fast >= 0; fast--) {   /* route_warp's register form and its shared-memory form inside the launch */
        setenv("DSINFER_CUDA_ROUTE_FAST", fast ? "1" : "0", 1);
        if (load_setup(&s, fast ? "v3-moe1" : "v3-moe1r", "configs/deepseek-v3.json", 3, 16)) {
            check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
            free_setup(&s);
        }
    }
    unsetenv("DSINFER_CUDA_ROUTE_FAST");
    moe_twin = 0;
    moe_twin_count = NULL;
    moe_twin_nmse = 0;
    moe_twin_nmse_only = 0;
    moe_twin_env = "DSINFER_CUDA_SHARED_STREAM";
    unsetenv("DSINFER_CUDA_MOE1");
}

/* DSINFER_OPS_ONLY=moeo: the MoE block of one token by intermediate ownership (DSINFER_CUDA_MOEO=1, cuda_moeo.cu: the
 * router, then one launch in which each block owns units of the experts' intermediate rows) against the usual launches
 * (the twin, =0) and the CPU: V2-Lite with FP8 and with BF16 experts (64 experts, top-6, two shared experts as one MLP
 * of 2816 rows: 176 FP8 units, more than the grid's blocks), V3 with FP8 experts (256 experts, top-8, the bias, D = 7168:
 * gate / up rows in 4 column pieces, down strips in 4 row pieces, the last of each short). The same choices (the same
 * router kernel), another order of fp32 additions: NMSE against the twin at most 1e-9 (a lost unit, a wrong scale or
 * a wrong routing weight gives ~1e-3 or more); the launch counted (one a call, none in the twin). Both forms: =1 (the
 * router_fused launch and a memset before it) and =5 (the route form: the router's logits, a split grid barrier, each
 * block's own routing and out's zeros inside the one cooperative launch; its logits in another order of additions, the
 * same choices on these inputs). =1 again with DSINFER_CUDA_ROUTE_ZERO=1: out's zeros written by the routing's launch
 * (out is NaN-poisoned before each call: zeros missing give NaN). */
static void run_moeo_form(const char *form, const char *zero);
static void run_moeo(void) {
    if (only && strcmp(only, "moeo")) return;
    run_moeo_form("1", "0");
    run_moeo_form("1", "1");
    run_moeo_form("5", "0");
}
/* The ownership launch's cases (one token: V2-Lite with FP8 and, where bf16, with BF16 experts, V3 with FP8) against a
 * twin made with env=0 (the checked backend's launches of the form counted by count, named what), the twin's NMSE at
 * most 1e-9; the twin settings reset after, DSINFER_CUDA_MOEO back to main's 0 */
static void moeo_twin_cases(const char *v2l, const char *v3, const char *env, long (*count)(ds_backend *), const char *what,
                            int bf16) {
    setup s;
    moe_twin = 1;
    moe_twin_env = env;
    moe_twin_count = count;
    moe_twin_what = what;
    moe_twin_want = 1;
    moe_twin_nmse = 1e-9;
    moe_twin_nmse_only = 1;
    const int m[] = {1};
    if (load_setup(&s, v2l, "configs/deepseek-v2-lite.json", 3, 16)) {
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
        if (bf16) check_moe_dt(&s, m, NM(m), DS_DTYPE_BF16, 3, 0);
        free_setup(&s);
    }
    if (load_setup(&s, v3, "configs/deepseek-v3.json", 3, 16)) {
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
        free_setup(&s);
    }
    moe_twin = 0;
    moe_twin_count = NULL;
    moe_twin_nmse = 0;
    moe_twin_nmse_only = 0;
    moe_twin_env = "DSINFER_CUDA_SHARED_STREAM";
    setenv("DSINFER_CUDA_MOEO", "0", 1);   /* (main's setting for the other cases) */
}
static void run_moeo_form(const char *form, const char *zero) {
    printf("  moeo: DSINFER_CUDA_MOEO=%s DSINFER_CUDA_ROUTE_ZERO=%s\n", form, zero);
    setenv("DSINFER_CUDA_MOEO", form, 1);
    setenv("DSINFER_CUDA_ROUTE_ZERO", zero, 1);
    moeo_twin_cases("v2l-moeo", "v3-moeo", "DSINFER_CUDA_MOEO", ds_cuda_moeo_runs, "by the ownership launch", 1);
    unsetenv("DSINFER_CUDA_ROUTE_ZERO");
}

/* DSINFER_OPS_ONLY=moeostrips: moeo_kernel's down strips from the strip-layout copy of each layer's down matrices
 * (DSINFER_CUDA_MOEO_STRIPS=1: a stage is one bulk copy of [rows][16 bytes] from mo_strips_kernel's copy) against the
 * same launch gathering the strips by TMA (the twin, =0): the same bytes land in the same stage places, and the sums
 * differ only by the order in which the blocks' bulk reductions land on out (not fixed from one launch to the next:
 * about 1800 of 2048 values differ in their last bits between two launches of the same form), so NMSE against the twin
 * at most 1e-9 (a wrong strip or stage gives ~1e-1); V2-Lite FP8 (16 columns a unit) and BF16 (8), V3 FP8 (D 7168: a
 * strip in four stages, the last short); the copy's launches counted (one a call, none in the twin); and the CPU's
 * check as every MoE case. */
static void run_moeostrips(void) {
    if (only && strcmp(only, "moeostrips")) return;
    setenv("DSINFER_CUDA_MOEO", "1", 1);
    setenv("DSINFER_CUDA_MOEO_STRIPS", "1", 1);
    moeo_twin_cases("v2l-mostr", "v3-mostr", "DSINFER_CUDA_MOEO_STRIPS", ds_cuda_moeo_strips_runs,
                    "with the strip-layout copies", 1);
    unsetenv("DSINFER_CUDA_MOEO_STRIPS");
}

/* DSINFER_OPS_ONLY=moeotc: moeo_kernel's sums on the tensor cores (DSINFER_CUDA_MOEO_TC=1: FP8 by mma.sync f16 with x
 * and the SiLU products as high and low f16 halves, ~22 bits; BF16 by mma.sync bf16 with them as three bf16 parts, ~24
 * bits; fp32 sums) against the same form's fp32 arithmetic (the twin, =0): NMSE at most 1e-9 (the parts' rounding gives
 * ~1e-13; a lost MMA, a wrong lane's rows, a wrong part or scale gives 1e-3 or more), and the CPU's check as every MoE
 * case; V2-Lite FP8 and BF16 (D 2048: one stage a matrix and a strip) and V3 FP8 (D 7168: four stages, the last half
 * full; 8 choices and the bias), in the plain form (=1) and the route form (=5); the TC launches counted (one a call). */
static void run_moeotc(void) {
    if (only && strcmp(only, "moeotc")) return;
    static const char *forms[] = {"1", "5"};
    for (int f = 0; f < 2; f++) {
        printf("  moeotc: DSINFER_CUDA_MOEO=%s\n", forms[f]);
        setenv("DSINFER_CUDA_MOEO", forms[f], 1);
        setenv("DSINFER_CUDA_MOEO_TC", "1", 1);
        moeo_twin_cases("v2l-motc", "v3-motc", "DSINFER_CUDA_MOEO_TC", ds_cuda_moeo_tc_runs, "with the tensor-core sums", 1);
    }
    unsetenv("DSINFER_CUDA_MOEO_TC");
}

/* ---- the MoE layer's tail for one token as one launch (run_tail1) ------------------------------------------------- */

/* A device buffer with b's host content (another backend's copy of an input it changes in place). */
static buf buf_copy(setup *s, const buf *b) {
    buf c = buf_new(s, b->n);
    memcpy(c.h, b->h, (b->n + PAD) * sizeof(float));
    ds_cuda_from_host(NULL, c.d, c.h, c.n + PAD);
    return c;
}

/* The twin's value of one output against the checked backend's: NMSE at most bound (NaN fails) */
static void tail1_twin(setup *s, const char *what, const buf *a, const buf *b, double bound) {
    double n = device_nmse(s, a->d, b->d, a->n);
    printf("  %-8s tail1 %-4s against DSINFER_CUDA_MOE1=0's calls: NMSE %.3g\n", s->name, what, n);
    CHECKF(n <= bound, "%s tail1 %s: NMSE %.3g against the separate calls (bound %.1g)", s->name, what, n, bound);
}

/* A MoE layer's weights for check_tail1 / check_attn1 into ws (3 E + 12 of room; returns how many), host views in Lh and
 * device views in Ld: o, the post-attention norm, the router (and bias), the experts, the shared experts, kv_b and
 * kv_a_norm (the layer's attention), and in input_norm, q and kv_a the next layer's input side. */
static int tail1_layer(setup *s, ds_dtype dt, ds_layer_weights *lh, ds_layer_weights *ld, wpair *ws) {
    const ds_config *c = &s->cfg;
    int D = c->hidden_size, E = c->n_routed_experts, mI = c->moe_intermediate_size, sI = mI * c->n_shared_experts;
    int HV = c->num_heads * c->v_head_dim, Rq = c->q_lora_rank ? c->q_lora_rank : c->num_heads * c->qk_head_dim;
    int Rkv = c->kv_lora_rank + c->qk_rope_head_dim, C = c->kv_lora_rank;
    int nkvb = c->num_heads * (c->qk_nope_head_dim + c->v_head_dim);
    ds_layer_weights Lh, Ld;
    memset(&Lh, 0, sizeof Lh);
    memset(&Ld, 0, sizeof Ld);
    int nw = 0;
#define TW(field, r, cols, wdt, amp, name) do { ws[nw] = mk_weight(s, r, cols, wdt, amp, name); Lh.field = ws[nw].h; \
                                               Ld.field = ws[nw++].d; } while (0)
    TW(o, D, HV, dt, linear_amp(s, HV), "o");
    TW(post_norm, 1, D, DS_DTYPE_BF16, 1.0f, "post_norm");
    TW(router, E, D, DS_DTYPE_BF16, 2.0f / sqrtf((float)D), "router");
    if (c->topk_method == DS_TOPK_NOAUX_TC) TW(router_bias, 1, E, DS_DTYPE_F32, 0.05f, "bias");
    Lh.exp_gate = calloc(E, sizeof(ds_weight)); Lh.exp_up = calloc(E, sizeof(ds_weight)); Lh.exp_down = calloc(E, sizeof(ds_weight));
    Ld.exp_gate = calloc(E, sizeof(ds_weight)); Ld.exp_up = calloc(E, sizeof(ds_weight)); Ld.exp_down = calloc(E, sizeof(ds_weight));
    for (int e = 0; e < E; e++) {
        TW(exp_gate[e], mI, D, dt, linear_amp(s, D), "exp_gate");
        TW(exp_up[e], mI, D, dt, linear_amp(s, D), "exp_up");
        TW(exp_down[e], D, mI, dt, linear_amp(s, mI), "exp_down");
    }
    if (sI) {
        TW(sh_gate, sI, D, dt, linear_amp(s, D), "sh_gate");
        TW(sh_up, sI, D, dt, linear_amp(s, D), "sh_up");
        TW(sh_down, D, sI, dt, linear_amp(s, sI), "sh_down");
    }
    TW(kv_b, nkvb, C, dt, linear_amp(s, C), "kv_b");
    TW(kv_a_norm, 1, C, DS_DTYPE_BF16, 1.0f, "kv_a_norm");
    TW(input_norm, 1, D, DS_DTYPE_BF16, 1.0f, "in_norm");   /* (the next layer's, kept in this struct) */
    TW(q, Rq, D, dt, linear_amp(s, D), "q");
    TW(kv_a, Rkv, D, dt, linear_amp(s, D), "kv_a");
#undef TW
    Lh.is_moe = Ld.is_moe = 1;
    *lh = Lh;
    *ld = Ld;
    return nw;
}

/* One check of layer_tail1 at s's shape with dt weights (next: with the next layer's part): the backend with
 * DSINFER_CUDA_MOE1=2 against a twin with =0 making the calls it stands for (linear_add_rmsnorm, moe, then add_rmsnorm
 * and linear2), NMSE <= 1e-9 on h, xn, ff (and q, kv); both against the CPU making the same calls (1e-8); the one
 * launch counted; a backend with =1 taking none of it (0 returned, its outputs left as they were); and one with =2 and
 * DSINFER_CUDA_MOE1_PF=1 (the rows asked of L2 before each barrier) giving the same bits. */
static void check_tail1(setup *s, ds_dtype dt, int next) {
    const ds_config *c = &s->cfg;
    char err[DS_ERRLEN];
    ds_backend *be[4] = {NULL, NULL, NULL, NULL};   /* =2, the twin =0, =1, =2 with PF */
    const char *val[4] = {"2", "0", "1", "2"};
    for (int i = 0; i < 4; i++) {
        setenv("DSINFER_CUDA_MOE1", val[i], 1);
        if (i == 3) setenv("DSINFER_CUDA_MOE1_PF", "1", 1);
        be[i] = ds_backend_cuda_new(&s->cfg, err);
        CHECKF(be[i] != NULL, "%s", err);
    }
    unsetenv("DSINFER_CUDA_MOE1");
    unsetenv("DSINFER_CUDA_MOE1_PF");
    if (!be[0] || !be[1] || !be[2] || !be[3]) {
        for (int i = 0; i < 4; i++) if (be[i]) be[i]->destroy(be[i]);
        return;
    }
    int D = c->hidden_size, E = c->n_routed_experts;
    int HV = c->num_heads * c->v_head_dim, Rq = c->q_lora_rank ? c->q_lora_rank : c->num_heads * c->qk_head_dim;
    int Rkv = c->kv_lora_rank + c->qk_rope_head_dim;
    float eps = c->rms_norm_eps;
    ds_layer_weights Lh, Ld;
    wpair *ws = calloc((size_t)3 * E + 12, sizeof(wpair));
    int nw = tail1_layer(s, dt, &Lh, &Ld, ws);
    for (int i = 0; i < 4; i++) {
        batch b;
        mk_batch(s, &b, 1, 0, 16);
        CHECK(be[i]->set_batch(be[i], &b.m, err) == DS_OK);
        free(b.pt);
    }
    prime_cpu(s, 1);
    /* the inputs: ao, h (the twin's own copy of h: both change it); the CPU's reference of every output */
    buf ao = buf_new(s, (size_t)HV), h = buf_new(s, (size_t)D);
    float *rh = malloc(sizeof(float) * D), *rxn = malloc(sizeof(float) * D), *rff = malloc(sizeof(float) * D);
    float *rq = malloc(sizeof(float) * Rq), *rkv = malloc(sizeof(float) * Rkv), *t = malloc(sizeof(float) * D);
    for (int draw = 0; draw < 4; draw++) {   /* inputs whose routing is no near-tie on the CPU */
        buf_rand(&ao, 1.0f);
        buf_rand(&h, 1.0f);
        s->cpu->linear(s->cpu, t, ao.h, &Lh.o, 1);
        for (int d = 0; d < D; d++) rh[d] = h.h[d] + t[d];
        s->cpu->rmsnorm(s->cpu, rxn, D, rh, D, &Lh.post_norm, 1, D, eps);
        double margin = route_margin(s, &Lh, rxn);
        if (margin >= ROUTE_TIE) break;
        printf("  %-8s tail1: routing margin %.2g on draw %d, drawn again\n", s->name, margin, draw);
    }
    s->cpu->moe(s->cpu, rff, rxn, &Lh, 1);
    if (next) {
        for (int d = 0; d < D; d++) rh[d] += rff[d];
        s->cpu->rmsnorm(s->cpu, rxn, D, rh, D, &Lh.input_norm, 1, D, eps);
        s->cpu->linear(s->cpu, rq, rxn, &Lh.q, 1);
        s->cpu->linear(s->cpu, rkv, rxn, &Lh.kv_a, 1);
    }
    buf h2 = buf_copy(s, &h), h3 = buf_copy(s, &h);
    buf xn = buf_new(s, (size_t)D), ff = buf_new(s, (size_t)D), q = buf_new(s, (size_t)Rq), kv = buf_new(s, (size_t)Rkv);
    buf xn2 = buf_new(s, (size_t)D), ff2 = buf_new(s, (size_t)D), q2 = buf_new(s, (size_t)Rq), kv2 = buf_new(s, (size_t)Rkv);
    buf xn3 = buf_new(s, (size_t)D);
    buf xn4 = buf_new(s, (size_t)D), ff4 = buf_new(s, (size_t)D), q4 = buf_new(s, (size_t)Rq), kv4 = buf_new(s, (size_t)Rkv);
    buf *outs[] = {&xn, &ff, &q, &kv, &xn2, &ff2, &q2, &kv2, &xn3, &xn4, &ff4, &q4, &kv4};
    for (int i = 0; i < NM(outs); i++) buf_poison(outs[i]);
    ds_next_in nx = {&Ld.input_norm, &Ld.q, &Ld.kv_a, q.d, kv.d}, nx2 = {&Ld.input_norm, &Ld.q, &Ld.kv_a, q2.d, kv2.d};
    ds_next_in nx3 = {&Ld.input_norm, &Ld.q, &Ld.kv_a, q2.d, kv2.d}, nx4 = {&Ld.input_norm, &Ld.q, &Ld.kv_a, q4.d, kv4.d};
    /* the checked call */
    long r0 = ds_cuda_tail1_runs(be[0]), n0 = ds_cuda_tail1_next_runs(be[0]), m0 = ds_cuda_moe1_runs(be[0]);
    int ran = be[0]->layer_tail1(be[0], xn.d, h.d, ff.d, ao.d, &Ld, eps, next ? &nx : NULL, 1);
    long runs = ds_cuda_tail1_runs(be[0]) - r0, nruns = ds_cuda_tail1_next_runs(be[0]) - n0, mruns = ds_cuda_moe1_runs(be[0]) - m0;
    printf("  %-8s tail1 %s%s: returned %d, launches %ld (with the next layer's part %ld, moe1 %ld)\n", s->name,
           ds_dtype_name(dt), next ? " with the next layer's projections" : "", ran, runs, nruns, mruns);
    CHECKF(ran == (next ? 2 : 1) && runs == 1 && nruns == next && mruns == 1, "%s tail1: returned %d, %ld / %ld / %ld launches "
           "(expected %d, 1 / %d / 1)", s->name, ran, runs, nruns, mruns, next ? 2 : 1, next);
    /* the twin: the calls it stands for; =0 and =1 must decline */
    int ran_twin = be[1]->layer_tail1(be[1], xn2.d, h2.d, ff2.d, ao.d, &Ld, eps, next ? &nx2 : NULL, 1);
    int ran_one = be[2]->layer_tail1(be[2], xn3.d, h3.d, ff2.d, ao.d, &Ld, eps, next ? &nx3 : NULL, 1);
    CHECKF(ran_twin == 0 && ran_one == 0, "%s tail1: DSINFER_CUDA_MOE1=0 / 1 returned %d / %d (expected 0 / 0)", s->name,
           ran_twin, ran_one);
    double dh3 = device_nmse(s, h3.d, h2.d, (size_t)D);   /* (h2 untouched so far, as h3 must be) */
    CHECKF(dh3 == 0 && device_units_differ(s, xn3.d, xn2.d, (size_t)D, sizeof(float)) == 0,
           "%s tail1: DSINFER_CUDA_MOE1=1 changed h or xn while declining", s->name);
    /* =2 with PF on h3 (still the input h): the same bits as the checked call */
    int ran_pf = be[3]->layer_tail1(be[3], xn4.d, h3.d, ff4.d, ao.d, &Ld, eps, next ? &nx4 : NULL, 1);
    size_t dpf = device_units_differ(s, h3.d, h.d, (size_t)D, sizeof(float)) +
                 device_units_differ(s, xn4.d, xn.d, (size_t)D, sizeof(float)) +
                 device_units_differ(s, ff4.d, ff.d, (size_t)D, sizeof(float)) +
                 (next ? device_units_differ(s, q4.d, q.d, (size_t)Rq, sizeof(float)) +
                         device_units_differ(s, kv4.d, kv.d, (size_t)Rkv, sizeof(float)) : 0);
    printf("  %-8s tail1 with DSINFER_CUDA_MOE1_PF=1: returned %d, %zu values differ\n", s->name, ran_pf, dpf);
    CHECKF(ran_pf == ran && dpf == 0, "%s tail1 with MOE1_PF=1: returned %d, %zu values differ from PF=0", s->name, ran_pf,
           dpf);
    be[1]->linear_add_rmsnorm(be[1], xn2.d, h2.d, ff2.d, ao.d, &Ld.o, &Ld.post_norm, 1, eps);
    be[1]->moe(be[1], ff2.d, xn2.d, &Ld, 1);
    if (next) {
        be[1]->add_rmsnorm(be[1], xn2.d, h2.d, ff2.d, &Ld.input_norm, 1, D, eps);
        be[1]->linear2(be[1], q2.d, kv2.d, xn2.d, &Ld.q, &Ld.kv_a, 1);
    }
    tail1_twin(s, "h", &h, &h2, 1e-9);
    tail1_twin(s, "xn", &xn, &xn2, 1e-9);
    tail1_twin(s, "ff", &ff, &ff2, 1e-9);
    if (next) {
        tail1_twin(s, "q", &q, &q2, 1e-9);
        tail1_twin(s, "kv", &kv, &kv2, 1e-9);
    } else {   /* q and kv not written: still the poison */
        float v[2];
        ds_cuda_download_bytes(s->gpu, v, q.d, sizeof(float));
        ds_cuda_download_bytes(s->gpu, v + 1, kv.d, sizeof(float));
        CHECKF(isnan(v[0]) && isnan(v[1]), "%s tail1: q or kv written without the next layer's part", s->name);
    }
    /* both against the CPU */
    memcpy(h.h, rh, sizeof(float) * D);
    memcpy(h2.h, rh, sizeof(float) * D);
    memcpy(xn.h, rxn, sizeof(float) * D);
    memcpy(xn2.h, rxn, sizeof(float) * D);
    memcpy(ff.h, rff, sizeof(float) * D);
    memcpy(ff2.h, rff, sizeof(float) * D);
    compare(s, "tail1 h", 1, &h, 1e-8, 0);
    compare(s, "tail1 xn", 1, &xn, 1e-8, 0);
    compare(s, "tail1 ff", 1, &ff, 1e-8, 0);
    compare(s, "tail1 twin h", 1, &h2, 1e-8, 0);
    compare(s, "tail1 twin ff", 1, &ff2, 1e-8, 0);
    if (next) {
        memcpy(q.h, rq, sizeof(float) * Rq);
        memcpy(kv.h, rkv, sizeof(float) * Rkv);
        compare(s, "tail1 q", 1, &q, 1e-8, 0);
        compare(s, "tail1 kv", 1, &kv, 1e-8, 0);
    }
    buf *all[] = {&ao, &h, &h2, &h3, &xn, &ff, &q, &kv, &xn2, &ff2, &q2, &kv2, &xn3, &xn4, &ff4, &q4, &kv4};
    for (int i = 0; i < NM(all); i++) buf_free(s, all[i]);
    free(rh); free(rxn); free(rff); free(rq); free(rkv); free(t);
    for (int i = 0; i < 4; i++) be[i]->destroy(be[i]);
    for (int i = 0; i < nw; i++) {
        free_weight(&ws[i]);
    }
    free(ws);
    free(Lh.exp_gate); free(Lh.exp_up); free(Lh.exp_down);
    free(Ld.exp_gate); free(Ld.exp_up); free(Ld.exp_down);
}

/* One check of layer_tail1 by moeo_kernel's tail form (DSINFER_CUDA_MOEO=1 with DSINFER_CUDA_MOEO_TAIL=mode,
 * DSINFER_CUDA_ROUTE_ZERO=zero and DSINFER_CUDA_ROUTER_NORM=rn) at s's shape with dt weights: returned 2 and one tail
 * launch counted (mode "0", the tail form off, with rn on: returned 1, no tail launch), one router_norm launch where rn;
 * against a twin with MOEO_TAIL=0 (it declines: 0) making the calls it stands for (linear_add_rmsnorm, moe, add_rmsnorm,
 * linear2; without the tail the first two): NMSE <= 1e-9 on h, xn, ff, q and kv (without the tail: h, xn and ff); twice
 * over (the launches' count is cumulative: the second launch's wait must see only its own blocks), the first time also
 * against the CPU (1e-8); with the tail form, without the next layer's part it declines. */
static void check_moeo_tail(setup *s, ds_dtype dt, const char *mode, const char *zero, const char *rn) {
    const int tail = strcmp(mode, "0") != 0, want_rn = strcmp(rn, "0") != 0;
    const ds_config *c = &s->cfg;
    char err[DS_ERRLEN];
    ds_backend *be[2] = {NULL, NULL};   /* the tail form, the twin */
    setenv("DSINFER_CUDA_MOEO", "1", 1);
    for (int i = 0; i < 2; i++) {
        setenv("DSINFER_CUDA_MOEO_TAIL", i ? "0" : mode, 1);
        setenv("DSINFER_CUDA_ROUTE_ZERO", i ? "0" : zero, 1);
        setenv("DSINFER_CUDA_ROUTER_NORM", i ? "0" : rn, 1);
        be[i] = ds_backend_cuda_new(&s->cfg, err);
        CHECKF(be[i] != NULL, "%s", err);
    }
    unsetenv("DSINFER_CUDA_MOEO_TAIL");
    unsetenv("DSINFER_CUDA_ROUTE_ZERO");
    unsetenv("DSINFER_CUDA_ROUTER_NORM");
    setenv("DSINFER_CUDA_MOEO", "0", 1);   /* (main's setting for the other cases) */
    if (!be[0] || !be[1]) {
        for (int i = 0; i < 2; i++) if (be[i]) be[i]->destroy(be[i]);
        return;
    }
    int D = c->hidden_size, E = c->n_routed_experts;
    int HV = c->num_heads * c->v_head_dim, Rq = c->q_lora_rank ? c->q_lora_rank : c->num_heads * c->qk_head_dim;
    int Rkv = c->kv_lora_rank + c->qk_rope_head_dim;
    float eps = c->rms_norm_eps;
    ds_layer_weights Lh, Ld;
    wpair *ws = calloc((size_t)3 * E + 12, sizeof(wpair));
    int nw = tail1_layer(s, dt, &Lh, &Ld, ws);
    for (int i = 0; i < 2; i++) {
        batch b;
        mk_batch(s, &b, 1, 0, 16);
        CHECK(be[i]->set_batch(be[i], &b.m, err) == DS_OK);
        free(b.pt);
    }
    prime_cpu(s, 1);
    buf ao = buf_new(s, (size_t)HV), h = buf_new(s, (size_t)D);
    float *rh = malloc(sizeof(float) * D), *rxn = malloc(sizeof(float) * D), *rff = malloc(sizeof(float) * D);
    float *rq = malloc(sizeof(float) * Rq), *rkv = malloc(sizeof(float) * Rkv), *t = malloc(sizeof(float) * D);
    float *rh1 = malloc(sizeof(float) * D), *rxn1 = malloc(sizeof(float) * D);   /* h + o, the post-attention norm */
    for (int rep = 0; rep < 2; rep++) {
        for (int draw = 0; draw < 4; draw++) {   /* inputs whose routing is no near-tie on the CPU */
            buf_rand(&ao, 1.0f);
            buf_rand(&h, 1.0f);
            s->cpu->linear(s->cpu, t, ao.h, &Lh.o, 1);
            for (int d = 0; d < D; d++) rh[d] = h.h[d] + t[d];
            s->cpu->rmsnorm(s->cpu, rxn, D, rh, D, &Lh.post_norm, 1, D, eps);
            if (route_margin(s, &Lh, rxn) >= ROUTE_TIE) break;
        }
        memcpy(rh1, rh, sizeof(float) * D);
        memcpy(rxn1, rxn, sizeof(float) * D);
        s->cpu->moe(s->cpu, rff, rxn, &Lh, 1);
        for (int d = 0; d < D; d++) rh[d] += rff[d];
        s->cpu->rmsnorm(s->cpu, rxn, D, rh, D, &Lh.input_norm, 1, D, eps);
        s->cpu->linear(s->cpu, rq, rxn, &Lh.q, 1);
        s->cpu->linear(s->cpu, rkv, rxn, &Lh.kv_a, 1);
        buf h2 = buf_copy(s, &h);
        buf xn = buf_new(s, (size_t)D), ff = buf_new(s, (size_t)D), q = buf_new(s, (size_t)Rq), kv = buf_new(s, (size_t)Rkv);
        buf xn2 = buf_new(s, (size_t)D), ff2 = buf_new(s, (size_t)D), q2 = buf_new(s, (size_t)Rq), kv2 = buf_new(s, (size_t)Rkv);
        buf *outs[] = {&xn, &ff, &q, &kv, &xn2, &ff2, &q2, &kv2};
        for (int i = 0; i < NM(outs); i++) buf_poison(outs[i]);
        ds_next_in nx = {&Ld.input_norm, &Ld.q, &Ld.kv_a, q.d, kv.d}, nx2 = {&Ld.input_norm, &Ld.q, &Ld.kv_a, q2.d, kv2.d};
        long t0 = ds_cuda_moeo_tail_runs(be[0]), n0 = ds_cuda_router_norm_runs(be[0]);
        int ran = be[0]->layer_tail1(be[0], xn.d, h.d, ff.d, ao.d, &Ld, eps, &nx, 1);
        long tr = ds_cuda_moeo_tail_runs(be[0]) - t0, nr = ds_cuda_router_norm_runs(be[0]) - n0;
        int ran_twin = be[1]->layer_tail1(be[1], xn2.d, h2.d, ff2.d, ao.d, &Ld, eps, &nx2, 1);
        /* (without the tail form, ROUTER_NORM takes the call without nx: that would change the twin's inputs) */
        int ran_none = rep || !tail ? 0 : be[0]->layer_tail1(be[0], xn2.d, h2.d, ff2.d, ao.d, &Ld, eps, NULL, 1);
        printf("  %-8s moeo tail=%s route_zero=%s router_norm=%s %s (call %d): returned %d, tail launches %ld, router_norm "
               "launches %ld; MOEO_TAIL=0 returned %d, without the next layer's part %d\n", s->name, mode, zero, rn,
               ds_dtype_name(dt), rep + 1, ran, tr, nr, ran_twin, ran_none);
        CHECKF(ran == (tail ? 2 : 1) && tr == tail && nr == want_rn && ran_twin == 0 && ran_none == 0,
               "%s moeo tail: returned %d with %ld tail launches and %ld router_norm launches, the twin %d, without the next "
               "part %d (expected %d, %d, %d, 0, 0)", s->name, ran, tr, nr, ran_twin, ran_none, tail ? 2 : 1, tail, want_rn);
        be[1]->linear_add_rmsnorm(be[1], xn2.d, h2.d, ff2.d, ao.d, &Ld.o, &Ld.post_norm, 1, eps);
        be[1]->moe(be[1], ff2.d, xn2.d, &Ld, 1);
        if (tail) {
            be[1]->add_rmsnorm(be[1], xn2.d, h2.d, ff2.d, &Ld.input_norm, 1, D, eps);
            be[1]->linear2(be[1], q2.d, kv2.d, xn2.d, &Ld.q, &Ld.kv_a, 1);
        }
        const buf *pa[] = {&h, &xn, &ff, &q, &kv}, *pb[] = {&h2, &xn2, &ff2, &q2, &kv2};
        const char *names[] = {"h", "xn", "ff", "q", "kv"};
        for (int i = 0; i < (tail ? 5 : 3); i++) {   /* (without the tail: h + o, the post-attention norm, the MoE) */
            double n = device_nmse(s, pa[i]->d, pb[i]->d, pa[i]->n);
            printf("  %-8s moeo tail %-3s against the separate calls: NMSE %.3g\n", s->name, names[i], n);
            CHECKF(n <= 1e-9, "%s moeo tail %s (call %d): NMSE %.3g against the separate calls (bound 1e-9)", s->name,
                   names[i], rep + 1, n);
        }
        if (rep == 0) {   /* against the CPU (ff is the MoE's output: the CPU's rff) */
            memcpy(h.h, tail ? rh : rh1, sizeof(float) * D);
            memcpy(xn.h, tail ? rxn : rxn1, sizeof(float) * D);
            memcpy(ff.h, rff, sizeof(float) * D);
            memcpy(q.h, rq, sizeof(float) * Rq);
            memcpy(kv.h, rkv, sizeof(float) * Rkv);
            compare(s, "moeo tail h", 1, &h, 1e-8, 0);
            compare(s, "moeo tail xn", 1, &xn, 1e-8, 0);
            compare(s, "moeo tail ff", 1, &ff, 1e-8, 0);
            if (tail) {
                compare(s, "moeo tail q", 1, &q, 1e-8, 0);
                compare(s, "moeo tail kv", 1, &kv, 1e-8, 0);
            }
        }
        buf *all[] = {&h2, &xn, &ff, &q, &kv, &xn2, &ff2, &q2, &kv2};
        for (int i = 0; i < NM(all); i++) buf_free(s, all[i]);
    }
    buf_free(s, &ao);
    buf_free(s, &h);
    free(rh); free(rxn); free(rff); free(rq); free(rkv); free(t); free(rh1); free(rxn1);
    for (int i = 0; i < 2; i++) be[i]->destroy(be[i]);
    for (int i = 0; i < nw; i++) free_weight(&ws[i]);
    free(ws);
    free(Lh.exp_gate); free(Lh.exp_up); free(Lh.exp_down);
    free(Ld.exp_gate); free(Ld.exp_up); free(Ld.exp_down);
}

/* DSINFER_OPS_ONLY=moeotail: batch 1's layer tail by moeo_kernel's tail form (check_moeo_tail; its count by a
 * gpu-scope release: the bulk-add writer failed here on V2-Lite FP8 and is gone), with out's zeros by the routing's launch (ROUTE_ZERO 1), and with the norm, router and routing
 * as one launch (ROUTER_NORM 1; also with the tail form off, layer_tail1 then returning 1): V2-Lite FP8 and BF16, V3 FP8 (q_a's
 * 1536 rows, D 7168: the tail's rows in pieces of MO_PC columns; 64 experts in its 8 groups; not under
 * DSINFER_OPS_SMALL) */
static void run_moeo_tail(void) {
    if (only && strcmp(only, "moeotail")) return;
    setup s;
    if (load_setup(&s, "v2l-motail", "configs/deepseek-v2-lite.json", 0, 16)) {
        check_moeo_tail(&s, DS_DTYPE_F8_E4M3, "1", "0", "0");
        check_moeo_tail(&s, DS_DTYPE_F8_E4M3, "1", "1", "0");
        check_moeo_tail(&s, DS_DTYPE_F8_E4M3, "1", "0", "1");
        check_moeo_tail(&s, DS_DTYPE_F8_E4M3, "0", "0", "1");
        check_moeo_tail(&s, DS_DTYPE_BF16, "1", "0", "0");
        check_moeo_tail(&s, DS_DTYPE_BF16, "1", "1", "0");
        check_moeo_tail(&s, DS_DTYPE_BF16, "0", "0", "1");
        free_setup(&s);
    }
    if (getenv("DSINFER_OPS_SMALL")) return;   /* (under compute-sanitizer: V2-Lite only) */
    if (load_setup(&s, "v3-motail", "configs/deepseek-v3.json", 16, 16)) {
        s.cfg.n_routed_experts = 64;
        check_moeo_tail(&s, DS_DTYPE_F8_E4M3, "1", "0", "0");
        check_moeo_tail(&s, DS_DTYPE_F8_E4M3, "1", "1", "0");
        check_moeo_tail(&s, DS_DTYPE_F8_E4M3, "1", "0", "1");
        check_moeo_tail(&s, DS_DTYPE_F8_E4M3, "0", "0", "1");
        free_setup(&s);
    }
}

/* DSINFER_OPS_ONLY=tail1: a MoE layer's tail for one token as one cooperative launch (DSINFER_CUDA_MOE1=2, backend
 * layer_tail1, cuda_moe1.cu's phases O and D around the MoE block) against the separate calls and the CPU (check_tail1):
 * V2-Lite with FP8 and BF16 weights (16 heads: o's 2048 columns; q's 3072 rows), with and without the next layer's
 * part; V3 with FP8 weights (q_a's 1536 rows, the bias and groups; 64 experts in its 8 groups to keep the test small). */
static void run_tail1(void) {
    if (only && strcmp(only, "tail1")) return;
    setup s;
    if (load_setup(&s, "v2l-tail1", "configs/deepseek-v2-lite.json", 0, 16)) {
        check_tail1(&s, DS_DTYPE_F8_E4M3, 1);
        check_tail1(&s, DS_DTYPE_F8_E4M3, 0);
        check_tail1(&s, DS_DTYPE_BF16, 1);
        free_setup(&s);
    }
    if (load_setup(&s, "v3-tail1", "configs/deepseek-v3.json", 16, 16)) {
        s.cfg.n_routed_experts = 64;
        check_tail1(&s, DS_DTYPE_F8_E4M3, 1);
        free_setup(&s);
    }
}

/* A batch of one sequence with one new token at position ctx - 1 (ctx - 1 cached), its pages shuffled among 8 spare */
static void mk_batch_one(setup *s, batch *b, int ctx) {
    memset(b, 0, sizeof *b);
    int ps = s->page_size > 0 ? s->page_size : 16, np = ctx > 0 ? (ctx + ps - 1) / ps : 1, total = np + 8;
    int *perm = malloc(sizeof(int) * (size_t)total);
    for (int i = 0; i < total; i++) perm[i] = i;
    for (int i = total - 1; i > 0; i--) {
        int j = rint_below(i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    b->pt = calloc((size_t)np + 1, sizeof(int32_t));
    for (int i = 0; i < np; i++) b->pt[i] = perm[i];
    free(perm);
    b->seq_start[1] = 1;
    b->seq_ctx[0] = ctx;
    b->tokens[0] = rint_below(16);
    b->positions[0] = ctx - 1;
    b->n_pages = total;
    b->m = (ds_batch_meta){.n_tokens = 1, .n_seqs = 1, .tokens = b->tokens, .positions = b->positions,
                           .seq_start = b->seq_start, .seq_ctx = b->seq_ctx, .page_table = b->pt, .pt_stride = np,
                           .page_size = ps};
}

/* a against b on the device, n BF16 values: NaN at the same places only (the caches' unused entries), NMSE of the values
 * over the rest */
static double device_nmse_bf16(setup *s, const void *a, const void *b, size_t n, size_t *nan_bad) {
    uint16_t *x = malloc(n * 2), *y = malloc(n * 2);
    ds_cuda_download_bytes(s->gpu, x, a, n * 2);
    ds_cuda_download_bytes(s->gpu, y, b, n * 2);
    double num = 0, den = 0;
    *nan_bad = 0;
    for (size_t i = 0; i < n; i++) {
        float fx = ds_bf16_to_f32(x[i]), fy = ds_bf16_to_f32(y[i]);
        if (isnan(fx) || isnan(fy)) {
            *nan_bad += !(isnan(fx) && isnan(fy));
            continue;
        }
        double e = (double)fx - fy;
        num += e * e;
        den += (double)fy * fy;
    }
    free(x);
    free(y);
    return den > 0 ? num / den : num > 0 ? INFINITY : 0;
}

/* One check of layer1 (DSINFER_CUDA_MOE1=3: the whole MoE layer for one token from its projections, cuda_moe1.cu's
 * phases I1 .. I3 before the tail's) at s's shape (the BF16 cache) with dt weights and ctx - 1 cached tokens: against a
 * twin with =0 making the calls it stands for (qkv_finish, attn_absorbed with the fp32 attention kernels, then
 * layer_tail1's calls), NMSE <= 1e-9 on q (roped), kv (normed, roped), the cache (the new row; NaN in the unused pages
 * and slots at the same places), ao, h, xn, ff and the next layer's q and kv; the launch counted; and with the FP8
 * cache layout declined (0, h unchanged). */
static void check_attn1(setup *s, ds_dtype dt, int ctx) {
    const ds_config *c = &s->cfg;
    char err[DS_ERRLEN];
    ds_backend *be[2] = {NULL, NULL};   /* =3, the twin =0 */
    setenv("DSINFER_CUDA_MLA_TC", "0", 1);
    setenv("DSINFER_CUDA_ATTN_TC", "0", 1);
    for (int i = 0; i < 2; i++) {
        setenv("DSINFER_CUDA_MOE1", i ? "0" : "3", 1);
        be[i] = ds_backend_cuda_new(&s->cfg, err);
        CHECKF(be[i] != NULL, "%s", err);
    }
    unsetenv("DSINFER_CUDA_MOE1");
    unsetenv("DSINFER_CUDA_MLA_TC");
    unsetenv("DSINFER_CUDA_ATTN_TC");
    if (!be[0] || !be[1]) {
        for (int i = 0; i < 2; i++) if (be[i]) be[i]->destroy(be[i]);
        return;
    }
    int D = c->hidden_size, E = c->n_routed_experts, H = c->num_heads, C = c->kv_lora_rank, dr = c->qk_rope_head_dim;
    int HV = H * c->v_head_dim, Rq = H * c->qk_head_dim, Rkv = C + dr, w = C + dr;
    float eps = c->rms_norm_eps;
    ds_layer_weights Lh, Ld;
    wpair *ws = calloc((size_t)3 * E + 12, sizeof(wpair));
    int nw = tail1_layer(s, dt, &Lh, &Ld, ws);
    batch b;
    mk_batch_one(s, &b, ctx);
    for (int i = 0; i < 2; i++) CHECK(be[i]->set_batch(be[i], &b.m, err) == DS_OK);
    /* the cache: random BF16 rows in the cached tokens' slots, NaN (0xffff) in every other slot and spare page */
    size_t n_slots = (size_t)b.n_pages * s->page_size, nf = n_slots * w / 2;
    uint16_t *hc = malloc(n_slots * w * sizeof(uint16_t));
    for (size_t i = 0; i < n_slots * w; i++) hc[i] = 0xffff;
    for (int j = 0; j < ctx - 1; j++) {
        size_t slot = (size_t)b.pt[j / s->page_size] * s->page_size + (size_t)(j % s->page_size);
        for (int k = 0; k < w; k++) hc[slot * w + k] = ds_f32_to_bf16(unif());
    }
    float *cache = s->gpu->alloc(s->gpu, nf), *cache2 = s->gpu->alloc(s->gpu, nf);
    ds_cuda_from_host(NULL, cache, (const float *)hc, nf);
    ds_cuda_from_host(NULL, cache2, (const float *)hc, nf);
    buf q = buf_new(s, (size_t)Rq), kv = buf_new(s, (size_t)Rkv), h = buf_new(s, (size_t)D);
    buf_rand(&q, 1.0f);
    buf_rand(&kv, 1.0f);
    buf_rand(&h, 1.0f);
    buf q2 = buf_copy(s, &q), kv2 = buf_copy(s, &kv), h2 = buf_copy(s, &h);
    buf ao = buf_new(s, (size_t)HV), xn = buf_new(s, (size_t)D), ff = buf_new(s, (size_t)D), qn = buf_new(s, (size_t)Rq),
        kvn = buf_new(s, (size_t)Rkv);
    buf ao2 = buf_new(s, (size_t)HV), xn2 = buf_new(s, (size_t)D), ff2 = buf_new(s, (size_t)D),
        qn2 = buf_new(s, (size_t)Rq), kvn2 = buf_new(s, (size_t)Rkv);
    buf *outs[] = {&ao, &xn, &ff, &qn, &kvn, &ao2, &xn2, &ff2, &qn2, &kvn2};
    for (int i = 0; i < NM(outs); i++) buf_poison(outs[i]);
    ds_next_in nx = {&Ld.input_norm, &Ld.q, &Ld.kv_a, qn.d, kvn.d}, nx2 = {&Ld.input_norm, &Ld.q, &Ld.kv_a, qn2.d, kvn2.d};
    /* the FP8 cache layout: declined, nothing changed */
    int bf = s->cfg.kv_bf16;
    s->cfg.kv_bf16 = 0;
    s->cfg.kv_fp8 = 1;
    int ran8 = be[0]->layer1(be[0], xn.d, h.d, ff.d, ao.d, q.d, kv.d, cache, &Ld, eps, 1e-6f, &nx, 1);
    s->cfg.kv_bf16 = bf;
    s->cfg.kv_fp8 = 0;
    CHECKF(ran8 == 0 && device_units_differ(s, h.d, h2.d, (size_t)D, sizeof(float)) == 0,
           "%s attn1: with the FP8 cache layout returned %d or changed h", s->name, ran8);
    long a0 = ds_cuda_attn1_runs(be[0]);
    int ran = be[0]->layer1(be[0], xn.d, h.d, ff.d, ao.d, q.d, kv.d, cache, &Ld, eps, 1e-6f, &nx, 1);
    long runs = ds_cuda_attn1_runs(be[0]) - a0;
    printf("  %-8s attn1 %s ctx %d: returned %d, launches with the attention %ld\n", s->name, ds_dtype_name(dt), ctx, ran,
           runs);
    CHECKF(ran == 2 && runs == 1, "%s attn1 ctx %d: returned %d, %ld launches (expected 2, 1)", s->name, ctx, ran, runs);
    CHECKF(be[1]->layer1(be[1], xn2.d, h2.d, ff2.d, ao2.d, q2.d, kv2.d, cache2, &Ld, eps, 1e-6f, &nx2, 1) == 0,
           "%s attn1: DSINFER_CUDA_MOE1=0 took layer1", s->name);
    /* the twin: the calls it stands for */
    const int seq0 = 0;
    be[1]->qkv_finish(be[1], q2.d, kv2.d, cache2, &Ld.kv_a_norm, 1e-6f, NULL);
    be[1]->attn_absorbed(be[1], ao2.d, q2.d, cache2, &Ld.kv_b, &seq0, 1);
    be[1]->linear_add_rmsnorm(be[1], xn2.d, h2.d, ff2.d, ao2.d, &Ld.o, &Ld.post_norm, 1, eps);
    be[1]->moe(be[1], ff2.d, xn2.d, &Ld, 1);
    be[1]->add_rmsnorm(be[1], xn2.d, h2.d, ff2.d, &Ld.input_norm, 1, D, eps);
    be[1]->linear2(be[1], qn2.d, kvn2.d, xn2.d, &Ld.q, &Ld.kv_a, 1);
    const char *nm[] = {"q", "kv", "ao", "h", "xn", "ff", "next q", "next kv"};
    const buf *x1[] = {&q, &kv, &ao, &h, &xn, &ff, &qn, &kvn}, *x2[] = {&q2, &kv2, &ao2, &h2, &xn2, &ff2, &qn2, &kvn2};
    for (int i = 0; i < NM(nm); i++) {
        double n = device_nmse(s, x1[i]->d, x2[i]->d, x1[i]->n);
        printf("  %-8s attn1 ctx %-5d %-8s against DSINFER_CUDA_MOE1=0's calls: NMSE %.3g\n", s->name, ctx, nm[i], n);
        CHECKF(n <= 1e-9, "%s attn1 ctx %d %s: NMSE %.3g against the separate calls", s->name, ctx, nm[i], n);
    }
    size_t nan_bad = 0;
    double nc = device_nmse_bf16(s, cache, cache2, n_slots * w, &nan_bad);
    /* (the new row's BF16 roundings of two fp32 norms a ulp apart may differ in a rare value: one BF16 ulp in one of its
     * values is ~3e-8 of the row; a wrong row ~1 of it, 2e-4 of the cache at 4K tokens) */
    printf("  %-8s attn1 ctx %-5d cache    against the separate calls: NMSE %.3g, %zu NaN places differ\n", s->name, ctx,
           nc, nan_bad);
    CHECKF(nan_bad == 0 && nc <= 1e-6, "%s attn1 ctx %d: the cache differs (NMSE %.3g, %zu NaN places)", s->name, ctx, nc,
           nan_bad);
    buf *all[] = {&q, &kv, &h, &q2, &kv2, &h2, &ao, &xn, &ff, &qn, &kvn, &ao2, &xn2, &ff2, &qn2, &kvn2};
    for (int i = 0; i < NM(all); i++) buf_free(s, all[i]);
    s->gpu->release(s->gpu, cache);
    s->gpu->release(s->gpu, cache2);
    free(hc);
    free(b.pt);
    for (int i = 0; i < 2; i++) be[i]->destroy(be[i]);
    for (int i = 0; i < nw; i++) free_weight(&ws[i]);
    free(ws);
    free(Lh.exp_gate); free(Lh.exp_up); free(Lh.exp_down);
    free(Ld.exp_gate); free(Ld.exp_up); free(Ld.exp_down);
}

/* DSINFER_OPS_ONLY=attn1: the whole MoE layer for one token as one launch (DSINFER_CUDA_MOE1=3, backend layer1;
 * check_attn1): V2-Lite (16 heads, the BF16 cache, 16-token pages) with FP8 weights at 1, 37, 1000 and 4100 tokens of
 * context (phase I2's splits of 16 tokens: one, a partial one, 63, and 257: more splits than blocks), BF16 at 37. */
static void run_attn1(void) {
    if (only && strcmp(only, "attn1")) return;
    setup s;
    if (load_setup_kv(&s, "v2l-attn1", "configs/deepseek-v2-lite.json", 0, 16, 0, KV_BF16)) {
        const int ctx[] = {1, 37, 1000, 4100};
        for (int i = 0; i < NM(ctx); i++) check_attn1(&s, DS_DTYPE_F8_E4M3, ctx[i]);
        check_attn1(&s, DS_DTYPE_BF16, 37);
        free_setup(&s);
    }
}

/* DSINFER_OPS_ONLY=moepdl: the decode experts on moe_wg_kernel launched with programmatic dependent launch
 * (DSINFER_CUDA_MOE_WG_PDL=2: gate / up and down start before the kernel before them ends; the first ring of stages gets
 * its weight tiles before the wait, its rows' codes after) against plain launches (the twin, =0): the same bits and
 * the PDL launches counted, FP8 (W8A8, with the separate quantizer and with gate / up's quantizing epilogue in both forms:
 * down right after gate / up) at 2 .. 256 tokens (32 and 64 tokens a chunk: a ring of 10 and of 8 stages, items of 11 and 16),
 * V3 (256 experts, K 7168) at 4 and 64, BF16 experts at 64, 130 and 256; and against the CPU. */
static void run_moe_pdl(void) {
    if (only && strcmp(only, "moepdl")) return;
    setup s;
    setenv("DSINFER_CUDA_MOE_WG_PDL", "2", 1);   /* the backends check_moe_dt makes; its twin with =0 */
    moe_twin = 1;
    moe_twin_env = "DSINFER_CUDA_MOE_WG_PDL";
    moe_twin_pdl = 2;
    setenv("DSINFER_MOE_W8A8", "1", 1);
    for (int qf = 0; qf < 3; qf++) {   /* gate / up's quantizing epilogue: none, a byte a thread, whole rows */
        setenv("DSINFER_CUDA_MOE_WG_QF", qf == 0 ? "0" : qf == 1 ? "1" : "2", 1);
        if (load_setup(&s, qf == 0 ? "v2l-pdl" : qf == 1 ? "v2l-pdlqf" : "v2l-pdlqf2", "configs/deepseek-v2-lite.json", 3, 16)) {
            const int m[] = {2, 9, 63, 130, 256};
            check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
            free_setup(&s);
        }
    }
    unsetenv("DSINFER_CUDA_MOE_WG_QF");
    if (load_setup(&s, "v3-pdl", "configs/deepseek-v3.json", 3, 16)) {
        const int m[] = {4, 64};
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
        free_setup(&s);
    }
    unsetenv("DSINFER_MOE_W8A8");
    if (load_setup(&s, "v2l-pdlbf", "configs/deepseek-v2-lite.json", 3, 16)) {
        const int m[] = {64, 130, 256};   /* (BF16 experts below ~16 tokens run as grouped GEMVs, not moe_wg_kernel) */
        check_moe_dt(&s, m, NM(m), DS_DTYPE_BF16, 3, 0);
        free_setup(&s);
    }
    moe_twin = 0;
    moe_twin_pdl = 0;
    moe_twin_env = "DSINFER_CUDA_SHARED_STREAM";
    unsetenv("DSINFER_CUDA_MOE_WG_PDL");
}

/* DSINFER_OPS_ONLY=moent48: the decode experts at 48 tokens a chunk (DSINFER_CUDA_MOE_WG_NT48=32: from 13 to 32 routed rows
 * an expert on average, V2-Lite 130 and 256 tokens; the shared experts' 256 rows then 6 chunks, one of 16) against 64
 * (the twin, =0): the same bits (each token's sums are its own column of the MMAs, whatever N), both launches of a call
 * at 48 (counted); FP8 (W8A8, with and without gate / up's quantizing epilogue) and BF16 experts; and against the CPU. */
static void run_moe_nt48(void) {
    if (only && strcmp(only, "moent48")) return;
    setup s;
    moe_twin = 1;
    moe_twin_env = "DSINFER_CUDA_MOE_WG_NT48";
    moe_twin_nt48 = 1;
    setenv("DSINFER_CUDA_MOE_WG_NT48", "32", 1);   /* the backends check_moe_dt makes; its twin =0 */
    setenv("DSINFER_MOE_W8A8", "1", 1);
    for (int qf = 0; qf < 2; qf++) {
        setenv("DSINFER_CUDA_MOE_WG_QF", qf ? "1" : "0", 1);
        if (load_setup(&s, qf ? "v2l-n48qf" : "v2l-n48", "configs/deepseek-v2-lite.json", 3, 16)) {
            const int m[] = {130, 256};
            check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
            free_setup(&s);
        }
    }
    unsetenv("DSINFER_CUDA_MOE_WG_QF");
    unsetenv("DSINFER_MOE_W8A8");
    if (load_setup(&s, "v2l-n48bf", "configs/deepseek-v2-lite.json", 3, 16)) {
        const int m[] = {130, 256};
        check_moe_dt(&s, m, NM(m), DS_DTYPE_BF16, 3, 0);
        free_setup(&s);
    }
    moe_twin = 0;
    moe_twin_nt48 = 0;
    moe_twin_env = "DSINFER_CUDA_SHARED_STREAM";
    unsetenv("DSINFER_CUDA_MOE_WG_NT48");
}

/* DSINFER_OPS_ONLY=moeorder: the decode experts' items taken by the persistent CTAs in another order
 * (DSINFER_CUDA_MOE_WG_ORDER=1: round robin over the fewest CTAs that keep the rounds; =2: contiguous runs a CTA) against
 * round robin over the whole grid (the twin, =0): the same bits, both launches of a call in that order (counted); FP8
 * (W8A8) at 2 .. 256 tokens (items of 11 and 16 k-blocks, 32 and 64 tokens a chunk; the shared experts inside), with
 * gate / up's quantizing epilogue too, V3 at 4 and 64, BF16 experts at 64 and 256; and against the CPU. */
static void run_moe_order(void) {
    if (only && strcmp(only, "moeorder")) return;
    setup s;
    moe_twin = 1;
    moe_twin_env = "DSINFER_CUDA_MOE_WG_ORDER";
    for (int mode = 1; mode <= 2; mode++) {
        setenv("DSINFER_CUDA_MOE_WG_ORDER", mode == 1 ? "1" : "2", 1);   /* the backends check_moe_dt makes; its twin =0 */
        moe_twin_order = mode;
        setenv("DSINFER_MOE_W8A8", "1", 1);
        for (int qf = 0; qf < 2; qf++) {
            setenv("DSINFER_CUDA_MOE_WG_QF", qf ? "1" : "0", 1);
            if (load_setup(&s, qf ? "v2l-ordqf" : "v2l-ord", "configs/deepseek-v2-lite.json", 3, 16)) {
                const int m[] = {2, 9, 63, 130, 256};
                check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
                free_setup(&s);
            }
        }
        unsetenv("DSINFER_CUDA_MOE_WG_QF");
        if (load_setup(&s, "v3-ord", "configs/deepseek-v3.json", 3, 16)) {
            const int m[] = {4, 64};
            check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
            free_setup(&s);
        }
        unsetenv("DSINFER_MOE_W8A8");
        if (load_setup(&s, "v2l-ordbf", "configs/deepseek-v2-lite.json", 3, 16)) {
            const int m[] = {64, 256};
            check_moe_dt(&s, m, NM(m), DS_DTYPE_BF16, 3, 0);
            free_setup(&s);
        }
    }
    moe_twin = 0;
    moe_twin_order = 0;
    moe_twin_env = "DSINFER_CUDA_SHARED_STREAM";
    unsetenv("DSINFER_CUDA_MOE_WG_ORDER");
}

/* DSINFER_OPS_ONLY=moesx: the FP8 decode experts' token scales staged by the producer warpgroup's idle warps
 * (DSINFER_CUDA_MOE_WG_SX=1, mw_args.sx: two item buffers handed over by mbarriers) against the consumers' own staging (the
 * twin, =0): the same bits and the staged launches counted (both a call where the items' scales fit: V2-Lite; V3's gate / up
 * at 64 tokens a chunk does not), at 2 .. 256 tokens (32, 48 and 64 tokens a chunk; 16 and 11 k-blocks an item; the shared
 * experts inside), with gate / up's quantizing epilogue, with the pipelined consumers (=2 on both), V3 at 4 and 64 (at its
 * own chunk and at 64 tokens a chunk); and against the CPU. */
static void run_moe_sx(void) {
    if (only && strcmp(only, "moesx")) return;
    setup s;
    moe_twin = 1;
    moe_twin_env = "DSINFER_CUDA_MOE_WG_SX";
    setenv("DSINFER_CUDA_MOE_WG_SX", "1", 1);   /* the backends check_moe_dt makes; its twin =0 */
    moe_twin_sx = 1;
    setenv("DSINFER_MOE_W8A8", "1", 1);
    for (int mode = 0; mode < 3; mode++) {   /* 0 plain, 1 gate / up's quantizing epilogue, 2 the pipelined consumers */
        setenv("DSINFER_CUDA_MOE_WG_QF", mode == 1 ? "1" : "0", 1);
        setenv("DSINFER_CUDA_MOE_WG_PIPE", mode == 2 ? "2" : "0", 1);
        if (load_setup(&s, mode == 0 ? "v2l-sx" : mode == 1 ? "v2l-sxqf" : "v2l-sxpipe", "configs/deepseek-v2-lite.json", 3, 16)) {
            const int m[] = {2, 9, 63, 130, 200, 256};
            check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
            free_setup(&s);
        }
    }
    unsetenv("DSINFER_CUDA_MOE_WG_QF");
    unsetenv("DSINFER_CUDA_MOE_WG_PIPE");
    for (int nt64 = 0; nt64 < 2; nt64++) {   /* V3 at its own chunk (32: both staged) and at 64 (gate / up's 56 k-blocks not) */
        if (nt64) setenv("DSINFER_CUDA_MOE_WG_NT", "64", 1);
        if (load_setup(&s, nt64 ? "v3-sx64" : "v3-sx", "configs/deepseek-v3.json", 3, 16)) {
            const int m[] = {4, 64};
            check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
            free_setup(&s);
        }
        unsetenv("DSINFER_CUDA_MOE_WG_NT");
    }
    unsetenv("DSINFER_MOE_W8A8");
    moe_twin = 0;
    moe_twin_sx = 0;
    moe_twin_env = "DSINFER_CUDA_SHARED_STREAM";
    unsetenv("DSINFER_CUDA_MOE_WG_SX");
}

/* DSINFER_OPS_ONLY=moest2: the decode experts' gate / up store (BF16 SiLU(g) * u) as whole 32-byte sectors through shared
 * memory (DSINFER_CUDA_MOE_WG_ST2=1, mw_store_pair) against the plain store (the twin, =0): the same bits and the launches
 * counted (gate / up's, none with its quantizing epilogue), FP8 (W8A8) at 2 .. 256 tokens (32, 48 and 64 tokens a chunk:
 * partial 8-token groups at an expert's last chunk; the shared experts inside), with the staged items (SX=1 on both) and
 * with the quantizing epilogue, V3 at 4 and 64; BF16 experts at 64 and 256; and against the CPU. */
static void run_moe_st2(void) {
    if (only && strcmp(only, "moest2")) return;
    setup s;
    moe_twin = 1;
    moe_twin_env = "DSINFER_CUDA_MOE_WG_ST2";
    moe_twin_count = ds_cuda_moe_wg_st2_launches;
    moe_twin_what = "storing whole sectors";
    setenv("DSINFER_CUDA_MOE_WG_ST2", "1", 1);   /* the backends check_moe_dt makes; its twin =0 */
    setenv("DSINFER_MOE_W8A8", "1", 1);
    for (int mode = 0; mode < 3; mode++) {   /* 0 plain, 1 with the staged items, 2 gate / up's quantizing epilogue */
        setenv("DSINFER_CUDA_MOE_WG_SX", mode == 1 ? "1" : "0", 1);
        setenv("DSINFER_CUDA_MOE_WG_QF", mode == 2 ? "1" : "0", 1);
        moe_twin_want = mode == 2 ? 0 : 1;
        if (load_setup(&s, mode == 0 ? "v2l-st2" : mode == 1 ? "v2l-st2sx" : "v2l-st2qf", "configs/deepseek-v2-lite.json", 3, 16)) {
            const int m[] = {2, 9, 63, 130, 200, 256};
            check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
            free_setup(&s);
        }
    }
    unsetenv("DSINFER_CUDA_MOE_WG_SX");
    unsetenv("DSINFER_CUDA_MOE_WG_QF");
    moe_twin_want = 1;
    if (load_setup(&s, "v3-st2", "configs/deepseek-v3.json", 3, 16)) {
        const int m[] = {4, 64};
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
        free_setup(&s);
    }
    unsetenv("DSINFER_MOE_W8A8");
    if (load_setup(&s, "v2l-st2bf", "configs/deepseek-v2-lite.json", 3, 16)) {
        const int m[] = {64, 256};
        check_moe_dt(&s, m, NM(m), DS_DTYPE_BF16, 3, 0);
        free_setup(&s);
    }
    moe_twin = 0;
    moe_twin_count = NULL;
    moe_twin_env = "DSINFER_CUDA_SHARED_STREAM";
    unsetenv("DSINFER_CUDA_MOE_WG_ST2");
}

/* DSINFER_OPS_ONLY=moeduo: batch 1's shared experts as the second part of the routed experts' two GEMV launches
 * (DSINFER_CUDA_MOE_DUO=1, cu_gemv_group_duo) against them in line (=0, the twin): in the duo each part's K is unsplit,
 * where the in-line launches split it by their own occupancy (another order of the partial sums: within an NMSE bound
 * against the twin), and both within the CPU's threshold; the checked backend's two duo launches a call counted, the
 * twin's none. V2-Lite (two shared experts: one 2816-row weight), FP8 and BF16 experts, and V3 (one; 7168 hidden
 * columns), FP8, at one token; V2-Lite at 2 and 9 tokens: no duo launch and the same bits. */
static void run_moe_duo(void) {
    if (only && strcmp(only, "moeduo")) return;
    setup s;
    moe_twin = 1;
    moe_twin_env = "DSINFER_CUDA_MOE_DUO";
    moe_twin_count = ds_cuda_moe_duo_launches;
    moe_twin_what = "(GEMV) with the shared experts as their second part";
    moe_twin_nmse = 1e-10;
    moe_twin_nmse_only = 1;
    setenv("DSINFER_CUDA_MOE_DUO", "1", 1);   /* the backends check_moe_dt makes; its twin =0 */
    const char *cfgs[] = {"configs/deepseek-v2-lite.json", "configs/deepseek-v3.json"};
    const ds_dtype dts[] = {DS_DTYPE_F8_E4M3, DS_DTYPE_BF16};
    for (int k = 0; k < 2; k++)
        for (int d = 0; d < 2; d++) {
            char name[32];
            if (k && d) continue;   /* (V3's 256 experts in BF16: 22 GB of test weights for a case FP8 covers) */
            snprintf(name, sizeof name, "%s-duo%s", k ? "v3" : "v2l", d ? "bf" : "f8");
            if (!load_setup(&s, name, cfgs[k], 3, 16)) continue;
            const int one[] = {1}, more[] = {2, 9};
            moe_twin_want = 2;
            moe_twin_nmse = 1e-10;
            check_moe_dt(&s, one, NM(one), dts[d], 1, 0);
            moe_twin_want = 0;
            moe_twin_nmse = 0;   /* (the same bits) */
            if (!k) check_moe_dt(&s, more, NM(more), dts[d], 1, 0);
            free_setup(&s);
        }
    moe_twin = 0;
    moe_twin_count = NULL;
    moe_twin_nmse = 0;
    moe_twin_nmse_only = 0;
    moe_twin_want = 1;
    moe_twin_env = "DSINFER_CUDA_SHARED_STREAM";
    unsetenv("DSINFER_CUDA_MOE_DUO");
}

/* An FP8 MoE layer's device weights into Ld (memset first): a BF16 router (with its bias for noaux_tc), the routed experts
 * and the shared ones in FP8; returns the pairs made, *nw of them (free_moe_layer frees them and Ld's arrays) */
static wpair *mk_moe_fp8_layer(setup *s, ds_layer_weights *Ld, int *nw) {
    const ds_config *c = &s->cfg;
    int D = c->hidden_size, E = c->n_routed_experts, mI = c->moe_intermediate_size, sI = mI * c->n_shared_experts, n = 0;
    memset(Ld, 0, sizeof *Ld);
    wpair *ws = calloc((size_t)3 * E + 5, sizeof(wpair));
    ws[n] = mk_weight(s, E, D, DS_DTYPE_BF16, 2.0f / sqrtf((float)D), "router");
    Ld->router = ws[n++].d;
    if (c->topk_method == DS_TOPK_NOAUX_TC) {
        ws[n] = mk_weight(s, 1, E, DS_DTYPE_F32, 0.05f, "bias");
        Ld->router_bias = ws[n++].d;
    }
    Ld->exp_gate = calloc(E, sizeof(ds_weight));
    Ld->exp_up = calloc(E, sizeof(ds_weight));
    Ld->exp_down = calloc(E, sizeof(ds_weight));
    for (int e = 0; e < E; e++) {
        ws[n] = mk_weight(s, mI, D, DS_DTYPE_F8_E4M3, linear_amp(s, D), "exp_gate"); Ld->exp_gate[e] = ws[n++].d;
        ws[n] = mk_weight(s, mI, D, DS_DTYPE_F8_E4M3, linear_amp(s, D), "exp_up"); Ld->exp_up[e] = ws[n++].d;
        ws[n] = mk_weight(s, D, mI, DS_DTYPE_F8_E4M3, linear_amp(s, mI), "exp_down"); Ld->exp_down[e] = ws[n++].d;
    }
    ws[n] = mk_weight(s, sI, D, DS_DTYPE_F8_E4M3, linear_amp(s, D), "sh_gate"); Ld->sh_gate = ws[n++].d;
    ws[n] = mk_weight(s, sI, D, DS_DTYPE_F8_E4M3, linear_amp(s, D), "sh_up"); Ld->sh_up = ws[n++].d;
    ws[n] = mk_weight(s, D, sI, DS_DTYPE_F8_E4M3, linear_amp(s, sI), "sh_down"); Ld->sh_down = ws[n++].d;
    Ld->is_moe = 1;
    *nw = n;
    return ws;
}

static void free_moe_layer(ds_layer_weights *Ld, wpair *ws, int nw) {
    for (int j = 0; j < nw; j++) free_weight(&ws[j]);
    free(ws);
    free(Ld->exp_gate);
    free(Ld->exp_up);
    free(Ld->exp_down);
}

/* DSINFER_OPS_ONLY=moepipe: the decode experts' FP8 launches with two k-blocks' MMAs in flight a consumer warpgroup
 * (DSINFER_CUDA_MOE_WG_PIPE=1: down, moe_wg_kernel<false, NT, false, true>; =2: gate / up too at 32 tokens a chunk,
 * <true, 32, false, true>) against the plain loop (the twin, =0): the same bits and the pipelined launches a call
 * counted, at 2 .. 256 tokens (32 and 64 tokens a chunk; V2-Lite's 11 k-blocks a down item and 16 a gate / up item: the odd
 * and the even tail), with gate / up's quantizing epilogue too (=1), V3 (16 k-blocks a down item, 56 a gate / up one) at 4
 * and 64; against the CPU. */
static void run_moe_pipe(void) {
    if (only && strcmp(only, "moepipe")) return;
    setup s;
    moe_twin = 1;
    moe_twin_env = "DSINFER_CUDA_MOE_WG_PIPE";
    setenv("DSINFER_MOE_W8A8", "1", 1);
  for (int mode = 1; mode <= 2; mode++) {
    setenv("DSINFER_CUDA_MOE_WG_PIPE", mode == 1 ? "1" : "2", 1);   /* the backends check_moe_dt makes; its twin with =0 */
    moe_twin_pipe = mode;
    for (int qf = 0; qf < 2; qf++) {
        setenv("DSINFER_CUDA_MOE_WG_QF", qf ? "1" : "0", 1);
        if (load_setup(&s, qf ? "v2l-pipeqf" : "v2l-pipe", "configs/deepseek-v2-lite.json", 3, 16)) {
            const int m[] = {2, 9, 63, 130, 256};
            check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
            free_setup(&s);
        }
    }
    unsetenv("DSINFER_CUDA_MOE_WG_QF");
    if (load_setup(&s, "v3-pipe", "configs/deepseek-v3.json", 3, 16)) {
        const int m[] = {4, 64};
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
        free_setup(&s);
    }
  }
    unsetenv("DSINFER_MOE_W8A8");
    moe_twin = 0;
    moe_twin_pipe = 0;
    moe_twin_env = "DSINFER_CUDA_SHARED_STREAM";
    unsetenv("DSINFER_CUDA_MOE_WG_PIPE");
}

/* DSINFER_OPS_ONLY=f8ts: the TMA W8A8 GEMM's sums written by TMA stores through shared memory
 * (DSINFER_CUDA_F8_TM_STORE=1 from 1 row here, _MIN_M=1; tm_store_tma: swizzled boxes of 64 rows x 32 columns, clipped at M and N) against its
 * direct stores: the same bits, at V2-Lite's o (4 splits at 256 rows: partials), the shared down at 129 and 1024 rows
 * (a row block with one valid row; no split), a kv_b-like 4096 x 512 at 1024 rows (4 k-blocks: the epilogue often),
 * V3's q_a + kv_a (K 7168, 7 splits at 65 rows), an odd 260 x 384 (the last box 4 columns wide); rows 65, 130, 200
 * (partial 64-row halves) and 256. Then the W8A8 MLP above 64 rows (its gate / up partials by this path). */
static void run_f8_tm_store(void) {
    if (only && strcmp(only, "f8ts")) return;
    setup s;
    const char *E = "DSINFER_CUDA_F8_TM_STORE";
    setenv("DSINFER_CUDA_F8_TM_STORE_MIN_M", "1", 1);   /* (default 512) every row count here through it */
    if (!load_setup(&s, "v2l-f8ts", "configs/deepseek-v2-lite.json", 3, 16)) { unsetenv("DSINFER_CUDA_F8_TM_STORE_MIN_M"); return; }
    const int Ms[] = {65, 130, 200, 256}, Mb[] = {129, 1024};
    check_f8_alt(&s, E, "v2l o", 2048, 0, 2048, Ms, NM(Ms), 1);
    check_f8_alt(&s, E, "v2l sh down", 2048, 0, 2816, Mb, NM(Mb), 1);
    check_f8_alt(&s, E, "kv_b-like", 4096, 0, 512, Mb, NM(Mb), 1);
    check_f8_alt(&s, E, "v3 q_a+kv_a", 2112, 0, 7168, Ms, NM(Ms), 1);
    check_f8_alt(&s, E, "odd", 260, 0, 384, Ms, NM(Ms), 1);
    check_f8_alt(&s, E, "v2l q+kv_a", 3072, 576, 2048, Ms, NM(Ms), 1);
    free_setup(&s);
    setenv(E, "1", 1);   /* read by the MLP's backends at their creation */
    if (load_setup(&s, "v2l-f8ts-mlp", "configs/deepseek-v2-lite.json", 3, 16)) {
        check_mlp_w8a8(&s, 2816, "2", 2);
        free_setup(&s);
    }
    unsetenv(E);
    unsetenv("DSINFER_CUDA_F8_TM_STORE_MIN_M");
    if (load_setup(&s, "f8ts-off", "tests/fixtures/tiny-v3-fp8/config.json", 3, 16)) free_setup(&s);   /* flag back off */
}

/* DSINFER_OPS_ONLY=moehalf: the prefill MoE's grouped W8A8 launches with tiles of at most 64 of their expert's rows
 * loading only those 64 rows (DSINFER_CUDA_MOE_HALF=1) against the 128-row loads (the twin, =0): the same bits, and the
 * launches with it counted (two a MoE call); against the CPU. V2-Lite at 1100 tokens (~103 rows an expert: few half
 * tiles) and 2100 (~197: a 128-row tile and a remainder, at most 64 rows for some experts), and with the grouped path
 * from 256 tokens (DSINFER_CUDA_MOE_GEMM_MIN_M) at 300 (~28 rows an expert: every tile half); V3 (256 experts, K 7168)
 * at 1100 (~34 rows an expert). */
static void moe_half_case(const char *name, const char *cfg, const int *m, int nm, long (*launches)(void), const char *what,
                          int per_call) {
    setup s;
    if (!load_setup(&s, name, cfg, 3, 16)) return;
    long n0 = launches();
    check_moe_dt(&s, m, nm, DS_DTYPE_F8_E4M3, 2, 0);
    long n = launches() - n0;
    int want = 0;   /* check_moe_dt's backend runs the MoE twice at each M (a first call on another x), per_call launches each */
    for (int i = 0; i < nm; i++) want += m[i] <= max_m ? 2 * per_call : 0;
    printf("  %-8s moe: %ld grouped launches %s (expected %d)\n", name, n, what, want);
    CHECKF(n == want, "%s: %ld grouped launches %s, expected %d", name, n, what, want);
    free_setup(&s);
}

/* the grouped prefill MoE's three cases with the twin set up by the caller: V2-Lite at 1100 and 2100 tokens, at 300 with
 * the grouped path from 256 tokens, V3 at 1100 (names: tag with "v2l-", "v2l-" .. "3", "v3-" before it) */
static void moe_grouped_cases(const char *tag, long (*launches)(void), const char *what, int per_call) {
    const int m[] = {1100, 2100}, m3[] = {1100}, ms[] = {300};
    char n1[32], n2[32], n3[32];
    snprintf(n1, sizeof n1, "v2l-%s", tag);
    snprintf(n2, sizeof n2, "v2l-%s3", tag);
    snprintf(n3, sizeof n3, "v3-%s", tag);
    moe_half_case(n1, "configs/deepseek-v2-lite.json", m, NM(m), launches, what, per_call);
    setenv("DSINFER_CUDA_MOE_GEMM_MIN_M", "256", 1);
    moe_half_case(n2, "configs/deepseek-v2-lite.json", ms, NM(ms), launches, what, per_call);
    unsetenv("DSINFER_CUDA_MOE_GEMM_MIN_M");
    moe_half_case(n3, "configs/deepseek-v3.json", m3, NM(m3), launches, what, per_call);
}

static void run_moe_half(void) {
    if (only && strcmp(only, "moehalf")) return;
    setenv("DSINFER_MOE_W8A8", "1", 1);
    setenv("DSINFER_CUDA_MOE_HALF", "1", 1);   /* the backends check_moe_dt makes; its twin with =0 */
    moe_twin = 1;
    moe_twin_env = "DSINFER_CUDA_MOE_HALF";
    moe_grouped_cases("half", ds_cuda_moe_half_launches, "with 64-row tiles", 2);
    moe_twin = 0;
    moe_twin_env = "DSINFER_CUDA_SHARED_STREAM";
    unsetenv("DSINFER_CUDA_MOE_HALF");
    unsetenv("DSINFER_MOE_W8A8");
}

/* DSINFER_OPS_ONLY=moedyn: the prefill MoE's grouped W8A8 launches with their tiles fetched by free blocks in table order
 * (DSINFER_CUDA_MOE_DYN=1, row blocks first; =2, column blocks first) against tiles dealt round-robin (the twin, =0): the
 * same bits (a tile's sums do not depend on which block runs it, or when), the fetched launches counted (two a MoE call),
 * and against the CPU. V2-Lite at 1100 and 2100 tokens (one and two row tiles an expert), at 300 with the grouped path
 * from 256 tokens (fewer tiles than SMs: no fetch past the first wave), with 64-row tiles (MOE_HALF on both); V3 (256
 * experts, K 7168) at 1100. */
static void run_moe_dyn(void) {
    if (only && strcmp(only, "moedyn")) return;
    setenv("DSINFER_MOE_W8A8", "1", 1);
    setenv("DSINFER_CUDA_MOE_Y_BF16", "0", 1);   /* fp32 rows in both: only the fetched-tile form makes BF16 ones */
    setenv("DSINFER_CUDA_MOE_GU_BF16", "0", 1);   /* fp32 gate / up sums in both, likewise */
    moe_twin = 1;
    moe_twin_env = "DSINFER_CUDA_MOE_DYN";
    const int m[] = {1100, 2100};
    for (int form = 1; form <= 2; form++) {
        char v[2] = {(char)('0' + form), 0};
        setenv("DSINFER_CUDA_MOE_DYN", v, 1);   /* the backends check_moe_dt makes; its twin with =0 */
        moe_grouped_cases(form == 1 ? "dyn1" : "dyn2", ds_cuda_moe_dyn_launches, "with fetched tiles", 2);
        setenv("DSINFER_CUDA_MOE_HALF", "1", 1);
        moe_half_case("v2l-dynh", "configs/deepseek-v2-lite.json", m, NM(m), ds_cuda_moe_dyn_launches, "with fetched tiles", 2);
        unsetenv("DSINFER_CUDA_MOE_HALF");
    }
    moe_twin = 0;
    moe_twin_env = "DSINFER_CUDA_SHARED_STREAM";
    unsetenv("DSINFER_CUDA_MOE_DYN");
    unsetenv("DSINFER_CUDA_MOE_Y_BF16");
    unsetenv("DSINFER_CUDA_MOE_GU_BF16");
    unsetenv("DSINFER_MOE_W8A8");
}

/* The grouped MoE's BF16 epilogue forms env=1 (direct stores) and =2 (staged rows, a bulk copy a row) against =0 (the twin,
 * fp32): within NMSE nmse of the twin, one counted launch a MoE call (count), and against the CPU; the three grouped cases
 * (moe_grouped_cases), tagged tag1 and tag2 (tag with the form) */
static void moe_bf16_forms(const char *env, double nmse, const char *tag, long (*count)(void), const char *what) {
    setenv("DSINFER_MOE_W8A8", "1", 1);
    moe_twin = 1;
    moe_twin_env = env;
    moe_twin_nmse = nmse;
    moe_twin_nmse_only = 1;
    for (int form = 1; form <= 2; form++) {
        char v[2] = {(char)('0' + form), 0}, t[16];
        snprintf(t, sizeof t, "%s%d", tag, form);
        setenv(env, v, 1);   /* the backends check_moe_dt makes; its twin with =0 */
        moe_grouped_cases(t, count, what, 1);
    }
    moe_twin_nmse = 0;
    moe_twin_nmse_only = 0;
    moe_twin = 0;
    moe_twin_env = "DSINFER_CUDA_SHARED_STREAM";
    unsetenv(env);
    unsetenv("DSINFER_MOE_W8A8");
}

/* DSINFER_OPS_ONLY=moeyb: the prefill MoE's grouped W8A8 down with its rows rounded to BF16 in the epilogue and the combine
 * reading them (DSINFER_CUDA_MOE_Y_BF16=1: direct stores; =2: through shared memory, a bulk copy a row) against fp32 rows
 * (the twin, =0): not the same bits (one more rounding, 2^-9 relative at most a value), within NMSE 1e-5 of the twin, the
 * BF16 down launches counted (one a MoE call), and against the CPU; the three grouped cases, each form. */
static void run_moe_y_bf16(void) {
    if (only && strcmp(only, "moeyb")) return;
    moe_bf16_forms("DSINFER_CUDA_MOE_Y_BF16", 1e-5, "yb", ds_cuda_moe_y_bf16_launches, "with BF16 rows");
}

/* DSINFER_OPS_ONLY=moegub: the prefill MoE's grouped W8A8 gate / up with its sums rounded to BF16 in the epilogue and the
 * SiLU kernel reading them (DSINFER_CUDA_MOE_GU_BF16=1: direct stores; =2: through shared memory, a bulk copy a row;
 * gate's and up's tiles at columns w I + n of the 2I-wide rows) against fp32 sums (the twin, =0): not the same bits
 * (gate and up rounded before SiLU; where the product's rounding moves, its FP8 code moves a step), within NMSE 3e-4 of the
 * twin, the BF16 gate / up launches counted (one a MoE call), and against the CPU (THR_GUB); the three grouped cases,
 * each form. The bound: about 3x the measured 1.07e-4 at V3 (2.7e-6 at V2-Lite; forty-second session, H100); a CPU model
 * of one expert had predicted 2.4e-4; a wrong layout (up read from the gate half, fp32 sums read as BF16) is O(1). */
static void run_moe_gu_bf16(void) {
    if (only && strcmp(only, "moegub")) return;
    moe_bf16_forms("DSINFER_CUDA_MOE_GU_BF16", 3e-4, "gub", ds_cuda_moe_gu_bf16_launches, "with BF16 gate / up sums");
}

/* DSINFER_OPS_ONLY=moesilu: the prefill MoE's gate / up with SiLU * up and its FP8 codes in the epilogue
 * (DSINFER_CUDA_MOE_SILU_EPI=1, f8_gu_silu_kernel: 128-row tiles of 64 gate + 64 up columns a pass, two passes) against
 * the separate SiLU kernel
 * over fp32 gate / up sums (the twin, =0): the same bits, its launches counted (one a MoE call), and against the CPU.
 * V2-Lite (I 1408: 11 column blocks) at 1100 and 2100 tokens, at 300 with the grouped path from 256 tokens (fewer tiles
 * than SMs), V3 (256 experts, K 7168, I 2048) at 1100. */
static void run_moe_silu(void) {
    if (only && strcmp(only, "moesilu")) return;
    setenv("DSINFER_MOE_W8A8", "1", 1);
    moe_twin = 1;
    moe_twin_env = "DSINFER_CUDA_MOE_SILU_EPI";
    setenv("DSINFER_CUDA_MOE_SILU_EPI", "1", 1);   /* the backends check_moe_dt makes; its twin with =0 */
    setenv("DSINFER_CUDA_MOE_GU_BF16", "0", 1);   /* the twin's SiLU from fp32 sums, as the epilogue's: the same bits */
    moe_grouped_cases("silu", ds_cuda_moe_silu_launches, "with SiLU in the epilogue", 1);
    unsetenv("DSINFER_CUDA_MOE_GU_BF16");
    moe_twin = 0;
    moe_twin_env = "DSINFER_CUDA_SHARED_STREAM";
    unsetenv("DSINFER_CUDA_MOE_SILU_EPI");
    unsetenv("DSINFER_MOE_W8A8");
}

/* DSINFER_OPS_ONLY=quantw: the FP8 decode experts with their BF16 down input quantized a warp a 128 values
 * (DSINFER_CUDA_QUANT_WARP=1, rows_fp8_bf16_warp_kernel) against the block-a-128-values kernel (the twin, =0): the MoE
 * output the same bits, and against the CPU; V2-Lite (I 1408: 11 blocks a row) at 2 .. 256 tokens, V3 (I 2048) at 4
 * and 64. */
static void run_quant_warp(void) {
    if (only && strcmp(only, "quantw")) return;
    setup s;
    setenv("DSINFER_MOE_W8A8", "1", 1);
    setenv("DSINFER_CUDA_QUANT_WARP", "1", 1);   /* the backends check_moe_dt makes; its twin with =0 */
    moe_twin = 1;
    moe_twin_env = "DSINFER_CUDA_QUANT_WARP";
    if (load_setup(&s, "v2l-qw", "configs/deepseek-v2-lite.json", 3, 16)) {
        const int m[] = {2, 9, 63, 130, 256};
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
        free_setup(&s);
    }
    if (load_setup(&s, "v3-qw", "configs/deepseek-v3.json", 3, 16)) {
        const int m[] = {4, 64};
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
        free_setup(&s);
    }
    moe_twin = 0;
    moe_twin_env = "DSINFER_CUDA_SHARED_STREAM";
    unsetenv("DSINFER_CUDA_QUANT_WARP");
    unsetenv("DSINFER_MOE_W8A8");
}

/* DSINFER_OPS_ONLY=moecomb: the routed experts' combine a token a block with 16-byte loads (DSINFER_CUDA_MOE_COMBINE2=1, the
 * default) against v1 (the twin, =0): the same bits, and against the CPU; V2-Lite FP8 (W8A8) and BF16 experts at 1 ..
 * 600 tokens (the grouped path, and the GEMM-per-expert path of prefill above its largest size), V3 FP8 (D 7168). */
static void run_moe_combine2(void) {
    if (only && strcmp(only, "moecomb")) return;
    setup s;
    setenv("DSINFER_MOE_W8A8", "1", 1);   /* read at backend creation: the CPU's reference quantizes as the GPU does */
    moe_twin = 1;
    moe_twin_env = "DSINFER_CUDA_MOE_COMBINE2";
    for (int v = 1; v <= 2; v++) {   /* =2: every row requested before the first addition (the same bits) */
        setenv("DSINFER_CUDA_MOE_COMBINE2", v == 1 ? "1" : "2", 1);
        if (load_setup(&s, v == 1 ? "v2l-cb2" : "v2l-cb3", "configs/deepseek-v2-lite.json", 3, 16)) {
            const int m8[] = {1, 9, 130, 600}, m16[] = {2, 200, 600};
            check_moe_dt(&s, m8, NM(m8), DS_DTYPE_F8_E4M3, 2, 0);
            check_moe_dt(&s, m16, NM(m16), DS_DTYPE_BF16, 1, 0);
            free_setup(&s);
        }
        if (load_setup(&s, v == 1 ? "v3-cb2" : "v3-cb3", "configs/deepseek-v3.json", 3, 16)) {
            const int m[] = {4, 64};
            check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
            free_setup(&s);
        }
    }
    moe_twin = 0;
    moe_twin_env = "DSINFER_CUDA_SHARED_STREAM";
    unsetenv("DSINFER_MOE_W8A8");
    unsetenv("DSINFER_CUDA_MOE_COMBINE2");
}

/* The twin settings of run_group3: backends made with env=1 and a twin with env=0 compared bit for
 * bit, W8A8 experts and linears on, the CPU comparison at 1e-2 (the shared experts' W8A8 input against the CPU's
 * unquantized one; the exact check is the twin's); _end puts those back (env itself stays set: the caller unsets it). */
static void twin_w8a8_begin(const char *env) {
    setenv(env, "1", 1);
    moe_twin = 1;
    moe_twin_env = env;
    moe_thr_tc = 1e-2;
    setenv("DSINFER_MOE_W8A8", "1", 1);
    setenv("DSINFER_CUDA_FP8_GEMM", "1", 1);
}
static void twin_w8a8_end(void) {
    unsetenv("DSINFER_MOE_W8A8");
    unsetenv("DSINFER_CUDA_FP8_GEMM");
    moe_thr_tc = 0;
    moe_twin = 0;
    moe_twin_env = "DSINFER_CUDA_SHARED_STREAM";
}

/* The grouping a thread a pair (DSINFER_CUDA_GROUP3=1, group_v3_kernel, up to 2048 pairs): the whole MoE block against
 * the CPU and bit for bit against a twin backend with it off (group_v2_kernel, or the three-launch wide grouping from
 * 1024 pairs): V2-Lite FP8 (W8A8 experts) and BF16, V3 FP8 up to 256 tokens x top-8 = 2048 pairs (64 KB of shared
 * memory); 342 tokens (2052 pairs) past its limit; then V2-Lite BF16 and FP8 on the fp32 grouped GEMVs (the live list)
 * against the CPU. DSINFER_OPS_ONLY=group3 runs these alone. */
static void run_group3(void) {
    if (only && strcmp(only, "group3")) return;
    setup s;
    twin_w8a8_begin("DSINFER_CUDA_GROUP3");
    if (load_setup(&s, "v2l-g3", "configs/deepseek-v2-lite.json", 3, 16)) {
        const int m[] = {1, 2, 8, 9, 33, 64, 170, 171, 256, 341, 342}, b[] = {1, 5, 64, 200};
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
        check_moe_dt(&s, b, NM(b), DS_DTYPE_BF16, 3, 0);
        free_setup(&s);
    }
    if (load_setup(&s, "v3-g3", "configs/deepseek-v3.json", 3, 16)) {
        const int m[] = {1, 8, 64, 127, 256};
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
        free_setup(&s);
    }
    twin_w8a8_end();
    if (load_setup(&s, "v2l-g3f", "configs/deepseek-v2-lite.json", 3, 16)) {   /* the fp32 grouped GEMVs against the CPU
                                                                               * at THR_MOE: below 11 tokens they launch
                                                                               * the live experts' blocks from the list */
        const int b[] = {1, 5, 64, 200};
        check_moe_dt(&s, b, NM(b), DS_DTYPE_BF16, 0, 0);
        check_moe_dt(&s, b, NM(b), DS_DTYPE_F8_E4M3, 0, 0);
        free_setup(&s);
    }
    unsetenv("DSINFER_CUDA_GROUP3");
}

/* DSINFER_OPS_ONLY=f8r2: a linear2's two split-K sums in one launch (DSINFER_CUDA_F8_REDUCE2=1, the default) against a
 * launch each (=0): the same bits, and against the CPU; V2-Lite q + kv_a, V3 q_a + kv_a, odd widths, 2 .. 64 rows (the
 * one-warpgroup kernel's split K). */
static void run_f8_reduce2(void) {
    if (only && strcmp(only, "f8r2")) return;
    setup s;
    if (!load_setup(&s, "v2l-f8r2", "configs/deepseek-v2-lite.json", 0, 16)) return;
    const char *E = "DSINFER_CUDA_F8_REDUCE2";
    const int M2[] = {2, 9, 33, 64};
    check_f8_alt(&s, E, "v2l q+kv_a", 3072, 576, 2048, M2, NM(M2), 1);
    check_f8_alt(&s, E, "v3 q_a+kv_a", 1536, 576, 7168, M2, NM(M2), 1);
    check_f8_alt(&s, E, "odd", 92, 132, 1280, M2, NM(M2), 1);
    free_setup(&s);
}

/* One attn_in (and linear_add_rmsnorm) case at M rows: the fused backend op against the ops it stands for, run on the
 * same backend on copies of the same inputs (h, the residual add or none, the cache with its cached prefixes, NaN-poisoned
 * outputs): every output (h, xn, q, kv, the cache; ff) the same bits. Returns how many of the two ran fused
 * (ds_cuda_chain_fused_runs). */
static int check_attn_in_case(setup *s, int M, int with_add, const wpair *wq, const wpair *wkv, const wpair *wo,
                              const wpair *in_norm, const wpair *kv_norm, const wpair *kvb) {
    const ds_config *c = &s->cfg;
    ds_backend *g = s->gpu;
    int D = c->hidden_size, C = c->kv_lora_rank, w = C + c->qk_rope_head_dim, NQ = wq->h.rows, NO = wo->h.cols;
    batch b;
    mk_batch(s, &b, M, 24, 16);
    set_batch(s, &b);
    long runs0 = ds_cuda_chain_fused_runs(g);
    buf c1 = mk_cache(s, &b), c2 = buf_new(s, c1.n);
    memcpy(c2.h, c1.h, (c1.n + PAD) * sizeof(float));
    ds_cuda_from_host(NULL, c2.d, c2.h, c2.n + PAD);
    buf h1 = buf_new(s, (size_t)M * D), h2 = buf_new(s, h1.n), ad = buf_new(s, h1.n), x = buf_new(s, (size_t)M * NO);
    buf_rand(&h1, 2.0f);
    buf_rand(&ad, 1.0f);
    buf_rand(&x, 1.0f);
    memcpy(h2.h, h1.h, (h1.n + PAD) * sizeof(float));
    ds_cuda_from_host(NULL, h2.d, h2.h, h2.n + PAD);
    buf xn1 = buf_new(s, h1.n), xn2 = buf_new(s, h1.n), q1 = buf_new(s, (size_t)M * NQ), q2 = buf_new(s, q1.n);
    buf k1 = buf_new(s, (size_t)M * w), k2 = buf_new(s, k1.n), f1 = buf_new(s, h1.n), f2 = buf_new(s, h1.n);
    buf *outs[] = {&xn1, &xn2, &q1, &q2, &k1, &k2, &f1, &f2};
    for (int i = 0; i < NM(outs); i++) buf_poison(outs[i]);
    const float eps = 1e-6f;
    /* the fused ops first: the workspaces they read (codes, partials) then hold another case's values, not the ones the
     * ops below would leave there, so that a value the fused form fails to write cannot pass */
    long r0 = ds_cuda_chain_fused_runs(g);
    g->attn_in(g, xn2.d, h2.d, with_add ? ad.d : NULL, &in_norm->d, eps, q2.d, k2.d, &wq->d, &wkv->d, c2.d, &kv_norm->d,
               1e-6f, NULL, NULL, M);
    int fused_in = (int)(ds_cuda_chain_fused_runs(g) - r0);
    g->linear_add_rmsnorm(g, xn2.d, h2.d, f2.d, x.d, &wo->d, &in_norm->d, M, eps);
    /* the ops one by one */
    if (with_add) g->add_rmsnorm(g, xn1.d, h1.d, ad.d, &in_norm->d, M, D, eps);
    else g->rmsnorm(g, xn1.d, D, h1.d, D, &in_norm->d, M, D, eps);
    g->linear2(g, q1.d, k1.d, xn1.d, &wq->d, &wkv->d, M);
    g->qkv_finish(g, q1.d, k1.d, c1.d, &kv_norm->d, 1e-6f, NULL);
    g->linear(g, f1.d, x.d, &wo->d, M);
    g->add_rmsnorm(g, xn1.d, h1.d, f1.d, &in_norm->d, M, D, eps);
    struct { const buf *a, *b; const char *what; } cmp[] = {
        {&q1, &q2, "q"}, {&k1, &k2, "kv"}, {&c1, &c2, "cache"}, {&h1, &h2, "h"}, {&xn1, &xn2, "xn"}, {&f1, &f2, "ff"}};
    size_t total = 0;
    for (int i = 0; i < NM(cmp); i++) {
        size_t nb = (cmp[i].a->n + PAD) * sizeof(float), diff = device_units_differ(s, cmp[i].a->d, cmp[i].b->d, nb, 1);
        total += diff;
        CHECKF(diff == 0, "%s attn_in / linear_add_rmsnorm M=%d%s: %s differs in %zu bytes", s->name, M,
               with_add ? "" : " (no add)", cmp[i].what, diff);
    }
    int fused = (int)(ds_cuda_chain_fused_runs(g) - runs0);
    printf("  %-8s attn_in + linear_add_rmsnorm M=%-3d%s: fused %d of 2 (attn_in %d), %zu bytes differ from the ops one by "
           "one\n", s->name, M, with_add ? "" : " (no add)", fused, fused_in, total);
    if (kvb) {   /* the absorbed attention on both: q2 (converted in the call) and q1, whose BF16 copy the last qkv_finish
                  * (the ops' own) wrote where DSINFER_CUDA_QB_FUSE is on and the batch takes the batched GEMMs */
        size_t no = (size_t)M * c->num_heads * c->v_head_dim;
        buf o1 = buf_new(s, no), o2 = buf_new(s, no);
        buf_poison(&o1);
        buf_poison(&o2);
        long qb0 = ds_cuda_qb_fused_runs(g);
        g->attn_absorbed(g, o2.d, q2.d, c2.d, &kvb->d, b.seqs, b.m.n_seqs);
        long qb1 = ds_cuda_qb_fused_runs(g);
        g->attn_absorbed(g, o1.d, q1.d, c1.d, &kvb->d, b.seqs, b.m.n_seqs);
        long qb2 = ds_cuda_qb_fused_runs(g);
        size_t od = device_units_differ(s, o1.d, o2.d, no, sizeof(float));
        int want = M > 8;   /* GEMV_MAX_M: the batched GEMMs from 9 tokens */
        printf("  %-8s attn absorbed M=%-3d: q's BF16 copy from qkv_finish taken %ld time(s) (then %ld), %zu of %zu values "
               "differ from the conversion in the call\n", s->name, M, qb2 - qb1, qb1 - qb0, od, no);
        CHECKF(od == 0, "%s attn absorbed M=%d: %zu values differ with q's BF16 copy from qkv_finish", s->name, M, od);
        CHECKF(qb1 - qb0 == 0 && qb2 - qb1 == want, "%s attn absorbed M=%d: the copy taken %ld / %ld times (expected 0 / %d)",
               s->name, M, qb1 - qb0, qb2 - qb1, want);
        buf_free(s, &o1);
        buf_free(s, &o2);
    }
    free(b.pt);
    buf *bufs[] = {&c1, &c2, &h1, &h2, &ad, &x, &xn1, &xn2, &q1, &q2, &k1, &k2, &f1, &f2};
    for (int i = 0; i < NM(bufs); i++) buf_free(s, bufs[i]);
    return fused;
}

/* DSINFER_OPS_ONLY=attnin: backend attn_in and linear_add_rmsnorm (DSINFER_CUDA_CHAIN_FUSE=1 and =2): the W8A8
 * chain's input quantized by the norm kernel and its split-K sums inside qkv_finish / the next norm, against the ops
 * they stand for on the same backend: the same bits (check_attn_in_case). V2-Lite FP8 q / kv_a / o with the BF16 and
 * FP8 caches, with and without the residual add; =1 fuses from 2 to 64 rows (the one-launch GEMM's, split K there; the
 * counter must show both ops fused), the ops themselves at 1 and 65 rows (the counter must not move); =2 fuses on to
 * 256 rows too (the TMA GEMM's partials, a launch a weight: q split in 2 and kv_a in 4 from 129 rows), not at 257. */
static void run_attn_in(void) {
    if (only && strcmp(only, "attnin")) return;
    const int layouts[2] = {KV_BF16, KV_FP8}, Ms[] = {1, 2, 9, 33, 64, 65, 128, 200, 256, 257};
    for (int mode = 1; mode <= 2; mode++)
    for (int l = 0; l < 2; l++) {
        setup s;
        setenv("DSINFER_CUDA_FP8_GEMM", "1", 1);   /* the W8A8 linears (the decode defaults with DSINFER_CUDA_TC=1) */
        setenv("DSINFER_CUDA_CHAIN_FUSE", mode == 1 ? "1" : "2", 1);
        setenv("DSINFER_CUDA_NORM_FOLD", "0", 1);   /* (byte equality at one token: the fold is op test nfold's) */
        if (mode == 2) {   /* and the absorbed attention's batched GEMMs reading q's BF16 copy from qkv_finish, whose
                            * q heads run in blocks of their own while it sums the partials (mode 1: one block a token) */
            setenv("DSINFER_CUDA_TC", "1", 1);
            setenv("DSINFER_CUDA_QB_FUSE", "1", 1);
            setenv("DSINFER_CUDA_QKV_SPLIT_PARTS", "1", 1);
        }
        int ok = load_setup_kv(&s, l ? "v2l-ain8" : "v2l-ain", "configs/deepseek-v2-lite.json", 0, 16, 0, layouts[l]);
        unsetenv("DSINFER_CUDA_FP8_GEMM");
        unsetenv("DSINFER_CUDA_CHAIN_FUSE");
        unsetenv("DSINFER_CUDA_NORM_FOLD");
        unsetenv("DSINFER_CUDA_TC");
        unsetenv("DSINFER_CUDA_QB_FUSE");
        unsetenv("DSINFER_CUDA_QKV_SPLIT_PARTS");
        if (!ok) continue;
        printf("  %-8s attn_in: DSINFER_CUDA_CHAIN_FUSE=%d\n", s.name, mode);
        const ds_config *c = &s.cfg;
        int D = c->hidden_size, H = c->num_heads, C = c->kv_lora_rank, w = C + c->qk_rope_head_dim;
        wpair wq = mk_weight(&s, H * c->qk_head_dim, D, DS_DTYPE_F8_E4M3, 0.5f / sqrtf((float)D), "q");
        wpair wkv = mk_weight(&s, w, D, DS_DTYPE_F8_E4M3, 0.5f / sqrtf((float)D), "kv_a");
        wpair wo = mk_weight(&s, D, H * c->v_head_dim, DS_DTYPE_F8_E4M3, 0.5f / sqrtf((float)(H * c->v_head_dim)), "o");
        wpair in_norm = mk_weight(&s, 1, D, DS_DTYPE_BF16, 1.0f, "input_norm");
        wpair kv_norm = mk_weight(&s, 1, C, DS_DTYPE_F32, 1.0f, "kv_a_norm");
        wpair kvb = mk_weight(&s, H * (c->qk_nope_head_dim + c->v_head_dim), C, DS_DTYPE_BF16, 1.0f / sqrtf((float)C), "kv_b");
        for (int i = 0; i < NM(Ms); i++) {
            int M = Ms[i];
            if (M > max_m || (mode == 1 && M > 65)) continue;
            for (int a = 1; a >= (i == 2 || i == 8 ? 0 : 1); a--) {
                long sp0 = ds_cuda_qkv_split_launches(s.gpu);
                int fused = check_attn_in_case(&s, M, a, &wq, &wkv, &wo, &in_norm, &kv_norm, mode == 2 ? &kvb : NULL);
                long sp = ds_cuda_qkv_split_launches(s.gpu) - sp0;   /* mode 2: attn_in's and the ops' qkv_finish, both split */
                if (mode == 2)
                    CHECKF(sp == 2, "%s attn_in M=%d: %ld qkv_finish launches with q's heads apart (2 expected)", s.name, M, sp);
                int want = M >= 2 && M <= (mode == 1 ? 64 : 256) ? 2 : 0;
                CHECKF(fused == want, "%s attn_in M=%d: %d of the two ops ran fused (%d expected)", s.name, M, fused, want);
            }
        }
        wpair *ws[] = {&wq, &wkv, &wo, &in_norm, &kv_norm, &kvb};
        for (int i = 0; i < NM(ws); i++) free_weight(ws[i]);
        free_setup(&s);
    }
}

/* DSINFER_OPS_ONLY=nfold: batch 1's attn_in with the input norm folded into the q / kv_a GEMV (DSINFER_CUDA_NORM_FOLD=1:
 * the GEMV reads h and add and scales its sums by 1 / RMS; qkv_absorb_kernel's extra block makes h and xn) against the ops
 * one by one (add_rmsnorm or rmsnorm, linear2, qkv_finish) on the same backend from copies of the same inputs: h and xn
 * the same bytes (rmsnorm_vec's arithmetic), q, kv and the absorbed attention's output (over the cache each side wrote)
 * within NMSE 1e-10 (the sums' fp32 rounding: xn's 1 / RMS applied after the dot), and the fold counted
 * (ds_cuda_norm_fold_runs): once a call with kv_b (qkv_absorb_kernel), never without it (the folded GEMV, then the norm
 * and qkv_finish as launches of their own: the same checks hold). V2-Lite FP8 and BF16 weights, the BF16 and FP8
 * caches, with and without the residual add, the norm's weight BF16 and F32. */
static void run_norm_fold(void) {
    if (only && strcmp(only, "nfold")) return;
    for (int l = 0; l < 2; l++) {
        setup s;
        setenv("DSINFER_CUDA_TC", "1", 1);
        setenv("DSINFER_CUDA_NORM_FOLD", "1", 1);
        int ok = load_setup_kv(&s, l ? "v2l-nf8" : "v2l-nf", "configs/deepseek-v2-lite.json", 0, 16, 0, l ? KV_FP8 : KV_BF16);
        unsetenv("DSINFER_CUDA_TC");
        unsetenv("DSINFER_CUDA_NORM_FOLD");
        if (!ok) continue;
        ds_backend *g = s.gpu;
        const ds_config *c = &s.cfg;
        const int D = c->hidden_size, H = c->num_heads, C = c->kv_lora_rank, w = C + c->qk_rope_head_dim;
        const int NQ = H * c->qk_head_dim, hw = c->qk_nope_head_dim + c->v_head_dim;
        for (int wt = 0; wt < 2; wt++) {
            const ds_dtype dt = wt ? DS_DTYPE_BF16 : DS_DTYPE_F8_E4M3;
            wpair wq = mk_weight(&s, NQ, D, dt, 0.5f / sqrtf((float)D), "q");
            wpair wkv = mk_weight(&s, w, D, dt, 0.5f / sqrtf((float)D), "kv_a");
            wpair in_norm = mk_weight(&s, 1, D, wt ? DS_DTYPE_F32 : DS_DTYPE_BF16, 1.0f, "input_norm");
            wpair kv_norm = mk_weight(&s, 1, C, DS_DTYPE_F32, 1.0f, "kv_a_norm");
            wpair kvb = mk_weight(&s, H * hw, C, dt, 1.0f / sqrtf((float)C), "kv_b");
            for (int cs = 0; cs < 3; cs++) {   /* add and kv_b; no add and kv_b; add, no kv_b */
                const int with_add = cs != 1, with_kvb = cs != 2;
                batch b;
                mk_batch(&s, &b, 1, 24, 16);
                set_batch(&s, &b);
                buf c1 = mk_cache(&s, &b), c2 = buf_copy(&s, &c1);
                buf h1 = buf_new(&s, (size_t)D), ad = buf_new(&s, h1.n);
                buf_rand(&h1, 2.0f);
                buf_rand(&ad, 1.0f);
                buf h2 = buf_copy(&s, &h1);
                buf xn1 = buf_new(&s, h1.n), xn2 = buf_new(&s, h1.n), q1 = buf_new(&s, (size_t)NQ), q2 = buf_new(&s, q1.n);
                buf k1 = buf_new(&s, (size_t)w), k2 = buf_new(&s, k1.n);
                const size_t no = (size_t)H * c->v_head_dim;
                buf o1 = buf_new(&s, no), o2 = buf_new(&s, no);
                buf *outs[] = {&xn1, &xn2, &q1, &q2, &k1, &k2, &o1, &o2};
                for (int i = 0; i < NM(outs); i++) buf_poison(outs[i]);
                const float eps = 1e-6f;
                const long r0 = ds_cuda_norm_fold_runs(g);
                g->attn_in(g, xn2.d, h2.d, with_add ? ad.d : NULL, &in_norm.d, eps, q2.d, k2.d, &wq.d, &wkv.d, c2.d, &kv_norm.d,
                           1e-6f, with_kvb ? &kvb.d : NULL, NULL, 1);
                const long folded = ds_cuda_norm_fold_runs(g) - r0;
                g->attn_absorbed(g, o2.d, q2.d, c2.d, &kvb.d, b.seqs, b.m.n_seqs);
                if (with_add) g->add_rmsnorm(g, xn1.d, h1.d, ad.d, &in_norm.d, 1, D, eps);
                else g->rmsnorm(g, xn1.d, D, h1.d, D, &in_norm.d, 1, D, eps);
                g->linear2(g, q1.d, k1.d, xn1.d, &wq.d, &wkv.d, 1);
                g->qkv_finish(g, q1.d, k1.d, c1.d, &kv_norm.d, 1e-6f, NULL);
                g->attn_absorbed(g, o1.d, q1.d, c1.d, &kvb.d, b.seqs, b.m.n_seqs);
                const size_t dh = device_units_differ(&s, h1.d, h2.d, h1.n, sizeof(float));
                const size_t dx = device_units_differ(&s, xn1.d, xn2.d, xn1.n, sizeof(float));
                const double eq = device_nmse(&s, q2.d, q1.d, q1.n), ek = device_nmse(&s, k2.d, k1.d, k1.n);
                const double eo = device_nmse(&s, o2.d, o1.d, no);
                printf("  %-8s nfold %s weights, norm %s, %s add, %s kv_b: folded %ld, h / xn %zu / %zu values differ, NMSE q "
                       "%.2e kv %.2e attention %.2e\n", s.name, wt ? "BF16" : "FP8", wt ? "F32" : "BF16",
                       with_add ? "with" : "no", with_kvb ? "with" : "no", folded, dh, dx, eq, ek, eo);
                CHECKF(dh == 0 && dx == 0, "%s nfold case %d/%d: h / xn differ in %zu / %zu values", s.name, wt, cs, dh, dx);
                CHECKF(eq <= 1e-10 && ek <= 1e-10 && eo <= 1e-10, "%s nfold case %d/%d: NMSE q %.3g kv %.3g attention %.3g",
                       s.name, wt, cs, eq, ek, eo);
                CHECKF(folded == with_kvb, "%s nfold case %d/%d: folded %ld times (expected %d)", s.name, wt, cs, folded,
                       with_kvb);
                free(b.pt);
                buf *bufs[] = {&c1, &c2, &h1, &h2, &ad, &xn1, &xn2, &q1, &q2, &k1, &k2, &o1, &o2};
                for (int i = 0; i < NM(bufs); i++) buf_free(&s, bufs[i]);
            }
            wpair *ws[] = {&wq, &wkv, &in_norm, &kv_norm, &kvb};
            for (int i = 0; i < NM(ws); i++) free_weight(ws[i]);
        }
        free_setup(&s);
    }
}

/* DSINFER_OPS_ONLY=nfoldv3: attn_in with V3's q_lora (ds_qlora_in: wq is q_a, then q = q_b . RMSNorm(qa)) against the
 * ops one by one (add_rmsnorm or rmsnorm, linear2 into qa and kv, rmsnorm of qa and the q_b linear, qkv_finish) on the
 * same backend from copies of the same inputs. One token (DSINFER_CUDA_NORM_FOLD=1): the input norm folded into the
 * q_a / kv_a GEMV and q_a's norm into q_b's, both counted (ds_cuda_norm_fold_runs once where kv_b is given, as op test
 * nfold; ds_cuda_normed_linear_folds once a call); h and xn the same bytes, q, kv and the absorbed attention's output
 * (over the cache each side wrote) within NMSE 1e-10. Three tokens: the composition, every output the same bytes, no
 * fold. V3 shapes (D 7168, 128 heads, q_lora 1536), FP8 and BF16 weights, the BF16 cache. */
static void run_norm_fold_v3(void) {
    if (only && strcmp(only, "nfoldv3")) return;
    setup s;
    setenv("DSINFER_CUDA_TC", "1", 1);
    setenv("DSINFER_CUDA_NORM_FOLD", "1", 1);
    int ok = load_setup_kv(&s, "v3-nf", "configs/deepseek-v3.json", 0, 16, 0, KV_BF16);
    unsetenv("DSINFER_CUDA_TC");
    unsetenv("DSINFER_CUDA_NORM_FOLD");
    if (!ok) return;
    ds_backend *g = s.gpu;
    const ds_config *c = &s.cfg;
    const int D = c->hidden_size, H = c->num_heads, C = c->kv_lora_rank, w = C + c->qk_rope_head_dim, R = c->q_lora_rank;
    const int NQ = H * c->qk_head_dim, hw = c->qk_nope_head_dim + c->v_head_dim;
    for (int wt = 0; wt < 2; wt++) {
        const ds_dtype dt = wt ? DS_DTYPE_BF16 : DS_DTYPE_F8_E4M3;
        wpair wqa = mk_weight(&s, R, D, dt, 0.5f / sqrtf((float)D), "q_a");
        wpair wqb = mk_weight(&s, NQ, R, dt, 0.5f / sqrtf((float)R), "q_b");
        wpair wkv = mk_weight(&s, w, D, dt, 0.5f / sqrtf((float)D), "kv_a");
        wpair in_norm = mk_weight(&s, 1, D, wt ? DS_DTYPE_F32 : DS_DTYPE_BF16, 1.0f, "input_norm");
        wpair qa_norm = mk_weight(&s, 1, R, wt ? DS_DTYPE_BF16 : DS_DTYPE_F32, 1.0f, "q_a_norm");
        wpair kv_norm = mk_weight(&s, 1, C, DS_DTYPE_F32, 1.0f, "kv_a_norm");
        wpair kvb = mk_weight(&s, H * hw, C, dt, 1.0f / sqrtf((float)C), "kv_b");
        for (int cs = 0; cs < 4; cs++) {   /* one token: add and kv_b; no add and kv_b; add, no kv_b; three tokens */
            const int M = cs == 3 ? 3 : 1, with_add = cs != 1, with_kvb = cs != 2;
            batch b;
            mk_batch(&s, &b, M, 24, 16);
            set_batch(&s, &b);
            buf c1 = mk_cache(&s, &b), c2 = buf_copy(&s, &c1);
            buf h1 = buf_new(&s, (size_t)M * D), ad = buf_new(&s, h1.n);
            buf_rand(&h1, 2.0f);
            buf_rand(&ad, 1.0f);
            buf h2 = buf_copy(&s, &h1);
            buf xn1 = buf_new(&s, h1.n), xn2 = buf_new(&s, h1.n), q1 = buf_new(&s, (size_t)M * NQ), q2 = buf_new(&s, q1.n);
            buf qa1 = buf_new(&s, (size_t)M * R), qa2 = buf_new(&s, qa1.n);
            buf k1 = buf_new(&s, (size_t)M * w), k2 = buf_new(&s, k1.n);
            const size_t no = (size_t)M * H * c->v_head_dim;
            buf o1 = buf_new(&s, no), o2 = buf_new(&s, no);
            buf *outs[] = {&xn1, &xn2, &q1, &q2, &qa1, &qa2, &k1, &k2, &o1, &o2};
            for (int i = 0; i < NM(outs); i++) buf_poison(outs[i]);
            const float eps = 1e-6f;
            const ds_qlora_in ql = {qa2.d, &qa_norm.d, &wqb.d, 1e-6f};
            const long r0 = ds_cuda_norm_fold_runs(g), n0 = ds_cuda_normed_linear_folds(g);
            g->attn_in(g, xn2.d, h2.d, with_add ? ad.d : NULL, &in_norm.d, eps, q2.d, k2.d, &wqa.d, &wkv.d, c2.d, &kv_norm.d,
                       1e-6f, with_kvb ? &kvb.d : NULL, &ql, M);
            const long folded = ds_cuda_norm_fold_runs(g) - r0, qfolded = ds_cuda_normed_linear_folds(g) - n0;
            if (with_kvb) g->attn_absorbed(g, o2.d, q2.d, c2.d, &kvb.d, b.seqs, b.m.n_seqs);
            if (with_add) g->add_rmsnorm(g, xn1.d, h1.d, ad.d, &in_norm.d, M, D, eps);
            else g->rmsnorm(g, xn1.d, D, h1.d, D, &in_norm.d, M, D, eps);
            g->linear2(g, qa1.d, k1.d, xn1.d, &wqa.d, &wkv.d, M);
            g->rmsnorm(g, qa1.d, R, qa1.d, R, &qa_norm.d, M, R, 1e-6f);
            g->linear(g, q1.d, qa1.d, &wqb.d, M);
            g->qkv_finish(g, q1.d, k1.d, c1.d, &kv_norm.d, 1e-6f, NULL);
            if (with_kvb) g->attn_absorbed(g, o1.d, q1.d, c1.d, &kvb.d, b.seqs, b.m.n_seqs);
            const size_t dh = device_units_differ(&s, h1.d, h2.d, h1.n, sizeof(float));
            const size_t dx = device_units_differ(&s, xn1.d, xn2.d, xn1.n, sizeof(float));
            const size_t dq = device_units_differ(&s, q1.d, q2.d, q1.n, sizeof(float));
            const size_t dk = device_units_differ(&s, k1.d, k2.d, k1.n, sizeof(float));
            const double eq = device_nmse(&s, q2.d, q1.d, q1.n), ek = device_nmse(&s, k2.d, k1.d, k1.n);
            const double eo = with_kvb ? device_nmse(&s, o2.d, o1.d, no) : 0.0;
            printf("  %-8s nfoldv3 %s weights M=%d, %s add, %s kv_b: folded %ld / q_b %ld, h / xn %zu / %zu values differ, q / "
                   "kv %zu / %zu, NMSE q %.2e kv %.2e attention %.2e\n", s.name, wt ? "BF16" : "FP8", M,
                   with_add ? "with" : "no", with_kvb ? "with" : "no", folded, qfolded, dh, dx, dq, dk, eq, ek, eo);
            CHECKF(dh == 0 && dx == 0, "nfoldv3 %d/%d: h / xn differ in %zu / %zu values", wt, cs, dh, dx);
            CHECKF(eq <= 1e-10 && ek <= 1e-10 && eo <= 1e-10, "nfoldv3 %d/%d: NMSE q %.3g kv %.3g attention %.3g", wt, cs, eq,
                   ek, eo);
            if (M == 1) {
                CHECKF(folded == with_kvb && qfolded == 1, "nfoldv3 %d/%d: folded %ld / %ld times (expected %d / 1)", wt, cs,
                       folded, qfolded, with_kvb);
            } else {   /* the composition: the ops' own kernels, the same bytes */
                const size_t dc = device_units_differ(&s, c1.d, c2.d, c1.n, sizeof(float));
                const size_t d_o = device_units_differ(&s, o1.d, o2.d, no, sizeof(float));
                CHECKF(folded == 0 && qfolded == 0, "nfoldv3 M=%d: folded %ld / %ld times (expected none)", M, folded, qfolded);
                CHECKF(dq == 0 && dk == 0 && dc == 0 && d_o == 0, "nfoldv3 M=%d: q / kv / cache / attention differ in %zu / "
                       "%zu / %zu / %zu values", M, dq, dk, dc, d_o);
            }
            free(b.pt);
            buf *bufs[] = {&c1, &c2, &h1, &h2, &ad, &xn1, &xn2, &q1, &q2, &qa1, &qa2, &k1, &k2, &o1, &o2};
            for (int i = 0; i < NM(bufs); i++) buf_free(&s, bufs[i]);
        }
        wpair *ws[] = {&wqa, &wqb, &wkv, &in_norm, &qa_norm, &kv_norm, &kvb};
        for (int i = 0; i < NM(ws); i++) free_weight(ws[i]);
    }
    free_setup(&s);
}

/* DSINFER_OPS_ONLY=nlin: backend normed_linear (out = RMSNorm(x) norm . w^T; V3's q_a norm before q_b, the final norm
 * before the LM head) with DSINFER_CUDA_NORM_FOLD=1: at one token the norm folded into the GEMV (x only read), counted by
 * ds_cuda_normed_linear_folds once a call; at 3 tokens the norm and the linear (counted never). Each call against the
 * same backend's rmsnorm + linear (NMSE <= 1e-10: the 1 / RMS factor applied after the dot) and the CPU's (THR_GEMM); x
 * unchanged where xn is another buffer, and xn == x (in place, forward.c's q_a) gives the same out. Shapes: V3's q_b
 * (24576 x 1536), a head-like odd row count (4099 x 2048: a last warp of 3 rows) and a small odd one (203 x 304); FP8
 * and BF16 weights, norm weights F32 and BF16. */
static void run_normed_linear(void) {
    if (only && strcmp(only, "nlin")) return;
    setup s;
    setenv("DSINFER_CUDA_NORM_FOLD", "1", 1);
    int ok = load_setup(&s, "v3-nlin", "configs/deepseek-v3.json", 0, 16);
    unsetenv("DSINFER_CUDA_NORM_FOLD");
    if (!ok) return;
    ds_backend *g = s.gpu;
    static const struct { int N, K; } shapes[] = {{24576, 1536}, {4099, 2048}, {203, 304}};
    for (int sh = 0; sh < NM(shapes); sh++) {
        const int N = shapes[sh].N, K = shapes[sh].K;
        for (int wt = 0; wt < 2; wt++) {
            const ds_dtype dt = wt ? DS_DTYPE_BF16 : DS_DTYPE_F8_E4M3;
            wpair w = mk_weight(&s, N, K, dt, wt ? 1.0f / sqrtf((float)K) : 0.5f / sqrtf((float)K), "w");
            wpair nw = mk_weight(&s, 1, K, (wt ^ sh) & 1 ? DS_DTYPE_F32 : DS_DTYPE_BF16, 1.0f, "norm");
            for (int mi = 0; mi < 2; mi++) {
                const int M = mi ? 3 : 1;
                const float eps = 1e-6f;
                prime(&s, M);
                buf x = buf_new(&s, (size_t)M * K), xn = buf_new(&s, x.n);
                buf o = buf_new(&s, (size_t)M * N), r = buf_new(&s, o.n), oi = buf_new(&s, o.n);
                buf_rand(&x, 2.0f);
                buf x0 = buf_copy(&s, &x), xr = buf_copy(&s, &x);   /* (xr rewritten in place below) */
                buf *outs[] = {&xn, &o, &r, &oi};
                for (int i = 0; i < NM(outs); i++) buf_poison(outs[i]);
                const long f0 = ds_cuda_normed_linear_folds(g);
                g->normed_linear(g, o.d, xn.d, x.d, &nw.d, eps, &w.d, M);
                const long folded = ds_cuda_normed_linear_folds(g) - f0;
                g->normed_linear(g, oi.d, xr.d, xr.d, &nw.d, eps, &w.d, M);   /* xn == x */
                g->rmsnorm(g, xn.d, K, x0.d, K, &nw.d, M, K, eps);
                g->linear(g, r.d, xn.d, &w.d, M);
                const size_t dxc = device_units_differ(&s, x.d, x0.d, x.n, sizeof(float));
                const double e1 = device_nmse(&s, o.d, r.d, o.n), e2 = device_nmse(&s, oi.d, o.d, o.n);
                printf("  %-8s nlin %s %dx%d norm %s M=%d: folded %ld, x changed in %zu values, NMSE against rmsnorm + "
                       "linear %.2e, in place against not %.2e\n", s.name, wt ? "BF16" : "FP8", N, K,
                       nw.h.dtype == DS_DTYPE_F32 ? "F32" : "BF16", M, folded, dxc, e1, e2);
                CHECKF(folded == (M == 1), "nlin %dx%d dtype %d M=%d: folded %ld times (expected %d)", N, K, wt, M, folded,
                       M == 1);
                CHECKF(dxc == 0, "nlin %dx%d dtype %d M=%d: x changed in %zu values", N, K, wt, M, dxc);
                CHECKF(e1 <= 1e-10 && e2 <= 1e-10, "nlin %dx%d dtype %d M=%d: NMSE %.3g against the two ops, %.3g in place",
                       N, K, wt, M, e1, e2);
                s.cpu->rmsnorm(s.cpu, xn.h, K, x.h, K, &nw.h, M, K, eps);
                s.cpu->linear(s.cpu, o.h, xn.h, &w.h, M);
                char what[64];
                snprintf(what, sizeof what, "nlin %s %dx%d", wt ? "bf16" : "fp8", N, K);
                compare(&s, what, M, &o, THR_GEMM, 0);
                buf *bufs[] = {&x, &x0, &xn, &xr, &o, &r, &oi};
                for (int i = 0; i < NM(bufs); i++) buf_free(&s, bufs[i]);
            }
            free_weight(&w);
            free_weight(&nw);
        }
    }
    free_setup(&s);
}

/* DSINFER_OPS_ONLY=qkvabs: qkv_finish given the layer's kv_b with DSINFER_CUDA_QKV_ABSORB=1 (qkv_absorb_kernel: the
 * absorbed attention's q product made in qkv_finish's launch, taken by attn_absorbed) against qkv_finish without it on
 * copies of the same q, kv and cache: q, kv, the cache and the attention's output the same bytes; the q product made
 * with qkv_finish and taken by the attention at 1 .. 8 tokens (absorb_q_v3_kernel's range), at 9 neither. Then two
 * guards: the attention again on the same q (made by its own launch: taken once only), and the attention after qkv_finish
 * given kv_b with another kv_b (not taken; the same bytes as that kv_b's attention on the plain side). V2-Lite shapes: the
 * BF16 cache with a BF16 kv_b and q's heads in blocks of their own (DSINFER_CUDA_QKV_SPLIT's default), the FP8 cache with
 * an FP8 block-scaled kv_b and one block a token (QKV_SPLIT=0). */
static void run_qkv_absorb(void) {
    if (only && strcmp(only, "qkvabs")) return;
    const int Ms[] = {1, 2, 3, 5, 8, 9};
    for (int l = 0; l < 2; l++) {
        setup s;
        setenv("DSINFER_CUDA_TC", "1", 1);
        setenv("DSINFER_CUDA_QKV_ABSORB", "1", 1);
        if (l) setenv("DSINFER_CUDA_QKV_SPLIT", "0", 1);
        int ok = load_setup_kv(&s, l ? "v2l-qa8" : "v2l-qa", "configs/deepseek-v2-lite.json", 0, 16, 0, l ? KV_FP8 : KV_BF16);
        unsetenv("DSINFER_CUDA_TC");
        unsetenv("DSINFER_CUDA_QKV_ABSORB");
        unsetenv("DSINFER_CUDA_QKV_SPLIT");
        if (!ok) continue;
        ds_backend *g = s.gpu;
        const ds_config *c = &s.cfg;
        const int H = c->num_heads, C = c->kv_lora_rank, w = C + c->qk_rope_head_dim, hw = c->qk_nope_head_dim + c->v_head_dim;
        const ds_dtype dt = l ? DS_DTYPE_F8_E4M3 : DS_DTYPE_BF16;
        wpair kv_norm = mk_weight(&s, 1, C, DS_DTYPE_F32, 1.0f, "kv_a_norm");
        wpair kvb = mk_weight(&s, H * hw, C, dt, 1.0f / sqrtf((float)C), "kv_b");
        wpair kvb2 = mk_weight(&s, H * hw, C, dt, 1.0f / sqrtf((float)C), "kv_b2");
        for (int i = 0; i < NM(Ms); i++) {
            const int M = Ms[i];
            if (M > max_m) continue;
            batch b;
            mk_batch(&s, &b, M, 24, 16);
            set_batch(&s, &b);
            buf c1 = mk_cache(&s, &b), c2 = buf_copy(&s, &c1), c3 = buf_copy(&s, &c1);
            buf q1 = buf_new(&s, (size_t)M * H * c->qk_head_dim), k1 = buf_new(&s, (size_t)M * w);
            buf_rand(&q1, 1.0f);
            buf_rand(&k1, 1.0f);
            buf q2 = buf_copy(&s, &q1), k2 = buf_copy(&s, &k1), q3 = buf_copy(&s, &q1), k3 = buf_copy(&s, &k1);
            const size_t no = (size_t)M * H * c->v_head_dim;
            buf o[5];
            for (int j = 0; j < 5; j++) {
                o[j] = buf_new(&s, no);
                buf_poison(&o[j]);
            }
            const long r0 = ds_cuda_qkv_absorb_runs(g), t0 = ds_cuda_qlat_taken_runs(g);
            g->qkv_finish(g, q2.d, k2.d, c2.d, &kv_norm.d, 1e-6f, &kvb.d);   /* the q product made here where it fits */
            const long made = ds_cuda_qkv_absorb_runs(g) - r0;
            g->attn_absorbed(g, o[1].d, q2.d, c2.d, &kvb.d, b.seqs, b.m.n_seqs);
            const long taken = ds_cuda_qlat_taken_runs(g) - t0;
            g->attn_absorbed(g, o[2].d, q2.d, c2.d, &kvb.d, b.seqs, b.m.n_seqs);   /* again: its own product */
            const long again = ds_cuda_qlat_taken_runs(g) - t0 - taken;
            g->qkv_finish(g, q3.d, k3.d, c3.d, &kv_norm.d, 1e-6f, &kvb.d);
            g->attn_absorbed(g, o[3].d, q3.d, c3.d, &kvb2.d, b.seqs, b.m.n_seqs);   /* another kv_b: not taken */
            const long other = ds_cuda_qlat_taken_runs(g) - t0 - taken - again;
            g->qkv_finish(g, q1.d, k1.d, c1.d, &kv_norm.d, 1e-6f, NULL);   /* the plain side */
            g->attn_absorbed(g, o[0].d, q1.d, c1.d, &kvb.d, b.seqs, b.m.n_seqs);
            g->attn_absorbed(g, o[4].d, q1.d, c1.d, &kvb2.d, b.seqs, b.m.n_seqs);
            const long plain = ds_cuda_qkv_absorb_runs(g) - r0 - 2 * made;   /* (the kv_b2 case made one too) */
            struct { const buf *a, *b; const char *what; } cmp[] = {
                {&q1, &q2, "q"}, {&k1, &k2, "kv"}, {&c1, &c2, "cache"}, {&o[0], &o[1], "attention output"},
                {&o[0], &o[2], "attention again"}, {&q1, &q3, "q (kv_b2 case)"}, {&c1, &c3, "cache (kv_b2 case)"},
                {&o[4], &o[3], "attention with kv_b2"}};
            size_t total = 0;
            for (int j = 0; j < NM(cmp); j++) {
                size_t nb = (cmp[j].a->n + PAD) * sizeof(float), diff = device_units_differ(&s, cmp[j].a->d, cmp[j].b->d, nb, 1);
                total += diff;
                CHECKF(diff == 0, "%s qkv_finish with kv_b M=%d: %s differs in %zu bytes", s.name, M, cmp[j].what, diff);
            }
            const long want = M <= 8;
            printf("  %-8s qkv_finish with kv_b M=%d: q product made there %ld, taken %ld (again %ld, with another kv_b "
                   "%ld), %zu bytes differ from qkv_finish then the attention\n", s.name, M, made, taken, again, other, total);
            CHECKF(made == want && taken == want && again == 0 && other == 0 && plain == 0,
                   "%s qkv_finish with kv_b M=%d: made %ld, taken %ld, again %ld, other %ld, plain side %ld (expected %ld, "
                   "%ld, 0, 0, 0)", s.name, M, made, taken, again, other, plain, want, want);
            free(b.pt);
            buf *bufs[] = {&c1, &c2, &c3, &q1, &q2, &q3, &k1, &k2, &k3};
            for (int j = 0; j < NM(bufs); j++) buf_free(&s, bufs[j]);
            for (int j = 0; j < 5; j++) buf_free(&s, &o[j]);
        }
        wpair *ws[] = {&kv_norm, &kvb, &kvb2};
        for (int j = 0; j < NM(ws); j++) free_weight(ws[j]);
        free_setup(&s);
    }
}

/* DSINFER_OPS_ONLY=combnorm: backend moe_to_attn_in then attn_in (DSINFER_CUDA_COMBINE_NORM=1: the MoE combine's sums made
 * by attn_in's norm kernel, cu_norm_chain_comb) against moe then attn_in on the same backend: ff, h, xn, q, kv and the cache
 * the same bytes; the left combine taken by the norm counted at every M: by the fused chain's norm (2 .. 64 rows with
 * CHAIN_FUSE=1, 2 .. 256 with =2) or by the composition's (1 row, and 65 with =1: the same kernel with no codes). V2-Lite, FP8 experts
 * (W8A8, the grouped tensor-core path) with the shared experts inside the experts' launch (ns = 2) and in line
 * (DSINFER_CUDA_MOE_SHARED_IN=0: ns = 0, the combine adds to what they left in ff). The fused pair runs first, so that
 * the workspaces hold another case's values when the ops run. */
static void run_comb_norm(void) {
    if (only && strcmp(only, "combnorm")) return;
    const int Ms[] = {1, 2, 9, 64, 65, 130, 256};
    for (int mode = 1; mode <= 2; mode++)
    for (int shin = 1; shin >= 0; shin--) {
        setup s;
        setenv("DSINFER_CUDA_FP8_GEMM", "1", 1);
        setenv("DSINFER_CUDA_CHAIN_FUSE", mode == 1 ? "1" : "2", 1);
        setenv("DSINFER_CUDA_TC", "1", 1);
        setenv("DSINFER_MOE_W8A8", "1", 1);
        setenv("DSINFER_CUDA_COMBINE_NORM", "1", 1);
        setenv("DSINFER_CUDA_COMBINE_NORM_MIN_M", "1", 1);   /* (every M: the default takes 65 and more) */
        if (!shin) setenv("DSINFER_CUDA_MOE_SHARED_IN", "0", 1);
        setenv("DSINFER_CUDA_NORM_FOLD", "0", 1);   /* (the plain side's attn_in at one token: byte equality) */
        int ok = load_setup_kv(&s, shin ? "v2l-cn" : "v2l-cn0", "configs/deepseek-v2-lite.json", 0, 16, 0, KV_BF16);
        unsetenv("DSINFER_CUDA_NORM_FOLD");
        unsetenv("DSINFER_CUDA_FP8_GEMM");
        unsetenv("DSINFER_CUDA_CHAIN_FUSE");
        unsetenv("DSINFER_CUDA_TC");
        unsetenv("DSINFER_MOE_W8A8");
        unsetenv("DSINFER_CUDA_COMBINE_NORM");
        unsetenv("DSINFER_CUDA_COMBINE_NORM_MIN_M");
        unsetenv("DSINFER_CUDA_MOE_SHARED_IN");
        if (!ok) continue;
        ds_backend *g = s.gpu;
        const ds_config *c = &s.cfg;
        int D = c->hidden_size, H = c->num_heads, C = c->kv_lora_rank, wd = C + c->qk_rope_head_dim;
        printf("  %-8s moe_to_attn_in + attn_in: DSINFER_CUDA_CHAIN_FUSE=%d, shared experts %s\n", s.name, mode,
               shin ? "in the experts' launch" : "in line");
        wpair wq = mk_weight(&s, H * c->qk_head_dim, D, DS_DTYPE_F8_E4M3, 0.5f / sqrtf((float)D), "q");
        wpair wkv = mk_weight(&s, wd, D, DS_DTYPE_F8_E4M3, 0.5f / sqrtf((float)D), "kv_a");
        wpair in_norm = mk_weight(&s, 1, D, DS_DTYPE_BF16, 1.0f, "input_norm");
        wpair kv_norm = mk_weight(&s, 1, C, DS_DTYPE_F32, 1.0f, "kv_a_norm");
        ds_layer_weights Ld;
        int nw;
        wpair *ws = mk_moe_fp8_layer(&s, &Ld, &nw);
        for (int i = 0; i < NM(Ms); i++) {
            int M = Ms[i];
            if (M > max_m || (mode == 1 && M > 65)) continue;
            batch b;
            mk_batch(&s, &b, M, 24, 16);
            set_batch(&s, &b);
            buf c1 = mk_cache(&s, &b), c2 = buf_new(&s, c1.n);
            memcpy(c2.h, c1.h, (c1.n + PAD) * sizeof(float));
            ds_cuda_from_host(NULL, c2.d, c2.h, c2.n + PAD);
            buf h1 = buf_new(&s, (size_t)M * D), h2 = buf_new(&s, h1.n), x = buf_new(&s, h1.n);
            buf_rand(&h1, 2.0f);
            buf_rand(&x, 1.0f);
            memcpy(h2.h, h1.h, (h1.n + PAD) * sizeof(float));
            ds_cuda_from_host(NULL, h2.d, h2.h, h2.n + PAD);
            buf xn1 = buf_new(&s, h1.n), xn2 = buf_new(&s, h1.n), q1 = buf_new(&s, (size_t)M * wq.h.rows), q2 = buf_new(&s, q1.n);
            buf k1 = buf_new(&s, (size_t)M * wd), k2 = buf_new(&s, k1.n), f1 = buf_new(&s, h1.n), f2 = buf_new(&s, h1.n);
            buf *outs[] = {&xn1, &xn2, &q1, &q2, &k1, &k2, &f1, &f2};
            for (int j = 0; j < NM(outs); j++) buf_poison(outs[j]);
            long r0 = ds_cuda_comb_norm_runs(g);
            g->moe_to_attn_in(g, f2.d, x.d, &Ld, M);
            g->attn_in(g, xn2.d, h2.d, f2.d, &in_norm.d, c->rms_norm_eps, q2.d, k2.d, &wq.d, &wkv.d, c2.d, &kv_norm.d, 1e-6f, NULL, NULL, M);
            long taken = ds_cuda_comb_norm_runs(g) - r0;
            g->moe(g, f1.d, x.d, &Ld, M);
            g->attn_in(g, xn1.d, h1.d, f1.d, &in_norm.d, c->rms_norm_eps, q1.d, k1.d, &wq.d, &wkv.d, c1.d, &kv_norm.d, 1e-6f, NULL, NULL, M);
            long plain = ds_cuda_comb_norm_runs(g) - r0 - taken;
            struct { const buf *a, *b; const char *what; } cmp[] = {
                {&f1, &f2, "ff"}, {&h1, &h2, "h"}, {&xn1, &xn2, "xn"}, {&q1, &q2, "q"}, {&k1, &k2, "kv"}, {&c1, &c2, "cache"}};
            size_t total = 0;
            for (int j = 0; j < NM(cmp); j++) {
                size_t nb = (cmp[j].a->n + PAD) * sizeof(float), diff = device_units_differ(&s, cmp[j].a->d, cmp[j].b->d, nb, 1);
                total += diff;
                CHECKF(diff == 0, "%s moe_to_attn_in + attn_in M=%d: %s differs in %zu bytes", s.name, M, cmp[j].what, diff);
            }
            long want = 1;   /* (the composition at 1 and 65 rows (=1) takes it too, since the thirty-fifth session) */
            printf("  %-8s moe_to_attn_in + attn_in M=%-3d: the combine made by the norm %ld time(s) (then %ld), %zu bytes "
                   "differ from moe then attn_in\n", s.name, M, taken, plain, total);
            CHECKF(taken == want && plain == 0, "%s moe_to_attn_in + attn_in M=%d: the combine taken by the norm %ld / %ld times "
                   "(expected %ld / 0)", s.name, M, taken, plain, want);
            free(b.pt);
            buf *bufs[] = {&c1, &c2, &h1, &h2, &x, &xn1, &xn2, &q1, &q2, &k1, &k2, &f1, &f2};
            for (int j = 0; j < NM(bufs); j++) buf_free(&s, bufs[j]);
        }
        free_moe_layer(&Ld, ws, nw);
        wpair *w4[] = {&wq, &wkv, &in_norm, &kv_norm};
        for (int j = 0; j < NM(w4); j++) free_weight(w4[j]);
        free_setup(&s);
    }
}

/* A backend with DSINFER_CUDA_GEMV_T1 set to val (then unset: the default) */
static ds_backend *gemv_t1_backend(setup *s, const char *val, char *err) {
    setenv("DSINFER_CUDA_GEMV_T1", val, 1);
    ds_backend *b = ds_backend_cuda_new(&s->cfg, err);
    unsetenv("DSINFER_CUDA_GEMV_T1");
    return b;
}

/* The one-row GEMV op test's linears (gemv1): V2-Lite's q, o and shared experts' down, a V3-wide K, odd shapes
 * (K 304: 19 chunks, fewer than a warp's lanes; 203 rows: a warp of the four-row form with 3 valid rows), FP8 and BF16,
 * and NVFP4 and FP32 for the forms that take them */
typedef struct { const char *what; int N, K; ds_dtype dt; } one_row_case;
static const one_row_case one_row_cases[] = {
    {"q", 3072, 2048, DS_DTYPE_F8_E4M3}, {"o", 2048, 2048, DS_DTYPE_F8_E4M3}, {"shared down", 2048, 2816, DS_DTYPE_F8_E4M3},
    {"v3 wide", 512, 7168, DS_DTYPE_F8_E4M3}, {"odd", 200, 304, DS_DTYPE_F8_E4M3}, {"odd rows", 203, 304, DS_DTYPE_F8_E4M3},
    {"q", 3072, 2048, DS_DTYPE_BF16}, {"o", 2048, 2048, DS_DTYPE_BF16}, {"odd", 200, 304, DS_DTYPE_BF16},
    {"odd rows", 203, 304, DS_DTYPE_BF16}, {"o", 2048, 2048, DS_DTYPE_NVFP4},
    {"router", 64, 2048, DS_DTYPE_F32}};
#define N_ONE_ROW_CASES NM(one_row_cases)
/* a case's weight amplitude (FP8's smaller: its codes' range) */
static float one_row_amp(const one_row_case *c) {
    return c->dt == DS_DTYPE_F8_E4M3 ? 0.5f / sqrtf((float)c->K) : 1.0f / sqrtf((float)c->K);
}

/* One row through b: linear of w1 into o1, or linear2's two-weight form (w1 into o1, w2 into o2) where w2 is given */
static void one_row_run(ds_backend *b, buf *o1, buf *o2, const buf *x, const wpair *w1, const wpair *w2) {
    if (w2) b->linear2(b, o1->d, o2->d, x->d, &w1->d, &w2->d, 1);
    else b->linear(b, o1->d, x->d, &w1->d, 1);
}

/* a1 (and a2 where w2 is given), the GPU's one-row outputs of x, against the CPU's linear (THR_GEMM); then the five
 * buffers of a one-row case freed */
static void one_row_vs_cpu(setup *s, const char *name, buf *x, buf *a1, buf *b1, buf *a2, buf *b2, const wpair *w1,
                           const wpair *w2) {
    s->cpu->linear(s->cpu, a1->h, x->h, &w1->h, 1);
    compare(s, name, 1, a1, THR_GEMM, 0);
    if (w2) {
        s->cpu->linear(s->cpu, a2->h, x->h, &w2->h, 1);
        compare(s, name, 1, a2, THR_GEMM, 0);
    }
    buf *bs[] = {x, a1, b1, a2, b2};
    for (int i = 0; i < NM(bs); i++) buf_free(s, bs[i]);
}

/* One linear (and linear2 where w2 is given) of one row on the one-row GEMV form (t1) and on the 8-row kernel (t8): within
 * NMSE 1e-10 of each other (not the same bits: where the two forms split K differently, the partial sums are added in
 * another order; the GPU run showed 1e-12-scale differences at V2-Lite's widths, 0 where the split is the same), the
 * one-row form launched once per call and the other never, and t1's output against the CPU (THR_GEMM). */
static void check_gemv_t1_case(setup *s, ds_backend *t1, ds_backend *t8, const char *what, const wpair *w1, const wpair *w2,
                               int want_t2, int want_t4) {
    int K = w1->h.cols, N1 = w1->h.rows, N2 = w2 ? w2->h.rows : 0;
    prime(s, 1);
    buf x = buf_new(s, (size_t)K), a1 = buf_new(s, (size_t)N1), b1 = buf_new(s, (size_t)N1);
    buf a2 = buf_new(s, (size_t)(N2 ? N2 : 1)), b2 = buf_new(s, (size_t)(N2 ? N2 : 1));
    buf_rand(&x, 1.0f);
    buf_poison(&a1); buf_poison(&b1); buf_poison(&a2); buf_poison(&b2);
    long n0 = ds_cuda_gemv_t1_launches(), m0 = ds_cuda_gemv_t2_launches(), f0 = ds_cuda_gemv_t4_launches();
    one_row_run(t1, &a1, &a2, &x, w1, w2);
    long n1 = ds_cuda_gemv_t1_launches(), m1 = ds_cuda_gemv_t2_launches(), f1 = ds_cuda_gemv_t4_launches();
    one_row_run(t8, &b1, &b2, &x, w1, w2);
    long n2 = ds_cuda_gemv_t1_launches();
    size_t diff = device_units_differ(s, a1.d, b1.d, (size_t)N1, 4) + (w2 ? device_units_differ(s, a2.d, b2.d, (size_t)N2, 4) : 0);
    double nm = device_nmse(s, a1.d, b1.d, (size_t)N1), nm2 = w2 ? device_nmse(s, a2.d, b2.d, (size_t)N2) : 0;
    if (nm2 > nm) nm = nm2;
    printf("  %-8s gemv t1 %-14s %s %dx%d%s: %zu values differ from DSINFER_CUDA_GEMV_T1=0 (NMSE %.2e); one-row launches "
           "%ld / %ld\n", s->name, what, ds_dtype_name(w1->h.dtype), N1 + N2, K, w2 ? " (two weights)" : "", diff, nm,
           n1 - n0, n2 - n1);
    CHECKF(nm <= 1e-10, "%s gemv t1 %s: NMSE %.3g against the 8-row kernel (bound 1e-10)", s->name, what, nm);
    CHECKF(n1 - n0 == 1 && n2 == n1, "%s gemv t1 %s: one-row launches %ld (want 1), with =0 %ld (want 0)", s->name, what,
           n1 - n0, n2 - n1);
    CHECKF(m1 - m0 == want_t2, "%s gemv t1 %s: two-rows-a-warp launches %ld (want %d)", s->name, what, m1 - m0, want_t2);
    CHECKF(f1 - f0 == want_t4, "%s gemv t1 %s: four-rows-a-warp launches %ld (want %d)", s->name, what, f1 - f0, want_t4);
    char name[96];
    snprintf(name, sizeof name, "gemv t1 %s", what);
    one_row_vs_cpu(s, name, &x, &a1, &b1, &a2, &b2, w1, w2);
}

/* DSINFER_OPS_ONLY=gemv1: the one-row GEMV form (DSINFER_CUDA_GEMV_T1=1; =4 the default; cuda_linear.cu gemv_v2_kernel
 * TMAX = 1) against the 8-row kernel (=0): linear at one row over V2-Lite's and V3's widths (q, o, the shared experts'
 * down K 2816, V3 K 7168, an odd 200 x 304), BF16, FP8, NVFP4 and FP32 weights, linear2's two-weight form (q + kv_a),
 * within NMSE 1e-10 of each other and against the CPU; then the grouped MoE at one token (gate/up pairs, down: every
 * expert one row) against a twin with =0 within NMSE 1e-10, the one-row launches counted. With =1, =2 (FP8 and BF16
 * weights two rows a warp: the launches of that form counted too) and =4 (four rows a warp, counted; 203 rows: a warp
 * with 3 valid rows; the MoE's gate / up pairs two rows of each a warp, counted). */
static void run_gemv_t1(void) {
    if (only && strcmp(only, "gemv1")) return;
    setup s;
    if (load_setup(&s, "v2l-t1", "configs/deepseek-v2-lite.json", 0, 16)) {
        char err[DS_ERRLEN];
      for (int mode = 1; mode <= 4; mode *= 2) {   /* =2 / =4: FP8 / BF16 with two / four weight rows a warp */
        ds_backend *t1 = gemv_t1_backend(&s, mode == 1 ? "1" : mode == 2 ? "2" : "4", err), *t8 = t1 ? gemv_t1_backend(&s, "0", err) : NULL;
        CHECKF(t1 && t8, "%s", err);
        printf("  %-8s gemv t1: DSINFER_CUDA_GEMV_T1=%d\n", s.name, mode);
        const one_row_case *cs = one_row_cases;
        for (int i = 0; t1 && t8 && i < N_ONE_ROW_CASES; i++) {
            wpair w = mk_weight(&s, cs[i].N, cs[i].K, cs[i].dt, one_row_amp(&cs[i]), cs[i].what);
            int rw = cs[i].dt == DS_DTYPE_F8_E4M3 || cs[i].dt == DS_DTYPE_BF16;   /* the forms of several rows a warp */
            check_gemv_t1_case(&s, t1, t8, cs[i].what, &w, NULL, mode == 2 && rw, mode == 4 && rw);
            free_weight(&w);
        }
        for (int d = 0; t1 && t8 && d < 2; d++) {
            ds_dtype dt = d ? DS_DTYPE_BF16 : DS_DTYPE_F8_E4M3;
            float amp = d ? 1.0f / sqrtf(2048.0f) : 0.5f / sqrtf(2048.0f);
            wpair wq = mk_weight(&s, 3072, 2048, dt, amp, "q"), wkv = mk_weight(&s, 576, 2048, dt, amp, "kv_a");
            check_gemv_t1_case(&s, t1, t8, "q + kv_a", &wq, &wkv, mode == 2, mode == 4);
            free_weight(&wq);
            free_weight(&wkv);
        }
        if (t1) t1->destroy(t1);
        if (t8) t8->destroy(t8);
      }
        free_setup(&s);
    }
    moe_twin = 1;
    moe_twin_env = "DSINFER_CUDA_GEMV_T1";
    moe_twin_nmse = 1e-10;   /* the splits of K may differ (another order of the partial sums); 0 shared-in runs at M 1 */
    moe_twin_differ_m = 0;
    for (int mode = 1; mode <= 4; mode *= 2) {
        setenv("DSINFER_CUDA_GEMV_T1", mode == 1 ? "1" : mode == 2 ? "2" : "4", 1);   /* the backends check_moe_dt makes; the twin =0 */
        if (load_setup(&s, mode == 1 ? "v2l-t1m" : mode == 2 ? "v2l-t2m" : "v2l-t4m", "configs/deepseek-v2-lite.json", 3, 16)) {
            const int m[] = {1};
            for (int d = 0; d < 2; d++) {
                long n0 = ds_cuda_gemv_t1_launches(), m0 = ds_cuda_gemv_t2_launches(), f0 = ds_cuda_gemv_t4_launches();
                long p0 = ds_cuda_gemv_p4_launches();
                check_moe_dt(&s, m, NM(m), d ? DS_DTYPE_BF16 : DS_DTYPE_F8_E4M3, 0, 0);
                long n = ds_cuda_gemv_t1_launches() - n0, n2 = ds_cuda_gemv_t2_launches() - m0, n4 = ds_cuda_gemv_t4_launches() - f0;
                long np = ds_cuda_gemv_p4_launches() - p0;
                printf("  %-8s gemv t1 moe M=1 %s: %ld one-row launches, %ld with two rows a warp, %ld with four (%ld of them "
                       "gate / up pairs)\n", s.name, d ? "BF16" : "F8_E4M3", n, n2, n4, np);
                CHECKF(mode == 4 ? np >= 1 : np == 0, "%s gemv t1 moe M=1: %ld pair launches with two rows each a warp (the "
                       "experts' gate / up: %s)", s.name, np, mode == 4 ? "at least 1" : "none");
                CHECKF(n >= 4, "%s gemv t1 moe M=1: %ld one-row launches (the routed and shared experts' gate/up and down: at "
                       "least 4)", s.name, n);
                CHECKF(mode == 2 ? n2 >= 2 : n2 == 0, "%s gemv t1 moe M=1: %ld launches with two rows a warp (the downs: %s)",
                       s.name, n2, mode == 2 ? "at least 2" : "none");
                CHECKF(mode == 4 ? n4 >= 2 : n4 == 0, "%s gemv t1 moe M=1: %ld launches with four rows a warp (the downs: %s)",
                       s.name, n4, mode == 4 ? "at least 2" : "none");
            }
            free_setup(&s);
        }
    }
    unsetenv("DSINFER_CUDA_GEMV_T1");
    moe_twin_nmse = 0;
    moe_twin = 0;
    moe_twin_env = "DSINFER_CUDA_SHARED_STREAM";
}

/* A backend with DSINFER_CUDA_ROWO set to val (then unset: the default) */
static ds_backend *rowo_backend(setup *s, const char *val, char *err) {
    setenv("DSINFER_CUDA_ROWO", val, 1);
    ds_backend *b = ds_backend_cuda_new(&s->cfg, err);
    unsetenv("DSINFER_CUDA_ROWO");
    return b;
}

/* One linear (linear2 where w2 is given) of one row on the row-ownership launch (ro, DSINFER_CUDA_ROWO=1 or 2) and on the
 * one-row GEMV (gv, =0): within NMSE 1e-9 of each other (another order of additions: the scale once a 16-value chunk, a
 * warp's lanes over 16-byte chunks of a 4 KB piece), ro's launch counted once where the weights suit it (want) and never
 * on gv, and ro's output against the CPU (THR_GEMM). chain: x is first made on the device by a norm (rmsnorm of a random
 * h, in place over a NaN-poisoned x) right before the linear, so that a launch reading x before the norm has ended (the
 * programmatic dependent launch's wait) gives NaN */
static void check_rowo_case(setup *s, ds_backend *ro, ds_backend *gv, const char *what, const wpair *w1, const wpair *w2,
                            int want, int chain, const wpair *norm) {
    int K = w1->h.cols, N1 = w1->h.rows, N2 = w2 ? w2->h.rows : 0;
    prime(s, 1);
    buf x = buf_new(s, (size_t)K), h = buf_new(s, (size_t)K), a1 = buf_new(s, (size_t)N1), b1 = buf_new(s, (size_t)N1);
    buf a2 = buf_new(s, (size_t)(N2 ? N2 : 1)), b2 = buf_new(s, (size_t)(N2 ? N2 : 1));
    buf_rand(&x, 1.0f);
    buf_rand(&h, 1.0f);
    buf_poison(&a1); buf_poison(&b1); buf_poison(&a2); buf_poison(&b2);
    long r0 = ds_cuda_rowo_runs(ro), g0 = ds_cuda_rowo_runs(gv);
    for (int pass = 0; pass < 2; pass++) {   /* (ro, then gv on the same x) */
        ds_backend *b = pass ? gv : ro;
        if (chain) {
            buf_poison(&x);
            b->rmsnorm(b, x.d, K, h.d, K, &norm->d, 1, K, 1e-6f);
        }
        one_row_run(b, pass ? &b1 : &a1, pass ? &b2 : &a2, &x, w1, w2);
    }
    long nr = ds_cuda_rowo_runs(ro) - r0, ng = ds_cuda_rowo_runs(gv) - g0;
    if (chain) s->gpu->to_host(s->gpu, x.h, x.d, (size_t)K);   /* the norm's output: the CPU's input */
    size_t diff = device_units_differ(s, a1.d, b1.d, (size_t)N1, 4) + (w2 ? device_units_differ(s, a2.d, b2.d, (size_t)N2, 4) : 0);
    double nm = device_nmse(s, a1.d, b1.d, (size_t)N1), nm2 = w2 ? device_nmse(s, a2.d, b2.d, (size_t)N2) : 0;
    if (nm2 > nm || nm2 != nm2) nm = nm2;
    printf("  %-8s rowo %-16s %s %dx%d%s%s: %zu values differ from DSINFER_CUDA_ROWO=0 (NMSE %.2e); row-ownership launches "
           "%ld / %ld\n", s->name, what, ds_dtype_name(w1->h.dtype), N1 + N2, K, w2 ? " (two weights)" : "",
           chain ? " after a norm" : "", diff, nm, nr, ng);
    CHECKF(nm <= 1e-9, "%s rowo %s: NMSE %.3g against the one-row GEMV (bound 1e-9)", s->name, what, nm);
    CHECKF(nr == want && ng == 0, "%s rowo %s: row-ownership launches %ld (want %d), with =0 %ld (want 0)", s->name, what,
           nr, want, ng);
    char name[96];
    snprintf(name, sizeof name, "rowo %s", what);
    buf_free(s, &h);
    one_row_vs_cpu(s, name, &x, &a1, &b1, &a2, &b2, w1, w2);
}

/* DSINFER_OPS_ONLY=rowo: the dense linears of one token by row ownership (cuda_rowo.cu, DSINFER_CUDA_ROWO=1 with the
 * programmatic dependent launch, =2 without) against the one-row GEMV (=0) and the CPU: the one-row cases of gemv1 (the
 * FP8 K 304 ones, NVFP4 and FP32 declined: no launch), K 512 with 203 rows (a last unit of 3 rows), linear2's V2-Lite
 * q + kv_a (FP8, BF16), V3's q_a + kv_a (K 7168: two pieces a row), two weights of 203 and 93 rows, K 10240 (three
 * pieces, x 40 KB; V3's o_proj width, 16384, is past the V2-Lite CPU backend's scratch) and each q + kv_a again right
 * after a norm that makes x; with ROWO 1 and 2, 3 (a copy a row), 5 (a block's units one contiguous run) and 10 (x by
 * the producer's bulk copy after its wait: the case after a norm checks that wait) */
static void run_rowo(void) {
    if (only && strcmp(only, "rowo")) return;
    setup s;
    if (!load_setup(&s, "v2l-rowo", "configs/deepseek-v2-lite.json", 0, 16)) return;
    char err[DS_ERRLEN];
    const char *modes[] = {"1", "2", "3", "5", "10"};
    for (int mi = 0; mi < NM(modes); mi++) {
        const int mode = atoi(modes[mi]);
        ds_backend *ro = rowo_backend(&s, modes[mi], err), *gv = ro ? rowo_backend(&s, "0", err) : NULL;
        CHECKF(ro && gv, "%s", err);
        if (!ro || !gv) {
            if (ro) ro->destroy(ro);
            break;
        }
        printf("  %-8s rowo: DSINFER_CUDA_ROWO=%d\n", s.name, mode);
        for (int i = 0; i < N_ONE_ROW_CASES; i++) {
            const one_row_case *c = &one_row_cases[i];
            wpair w = mk_weight(&s, c->N, c->K, c->dt, one_row_amp(c), c->what);
            int fits = c->dt == DS_DTYPE_BF16 || (c->dt == DS_DTYPE_F8_E4M3 && c->K % 512 == 0);
            check_rowo_case(&s, ro, gv, c->what, &w, NULL, fits, 0, NULL);
            free_weight(&w);
        }
        wpair norm = mk_weight(&s, 1, 16384, DS_DTYPE_BF16, 1.0f, "norm");   /* (a norm of K values reads its first K) */
        typedef struct { const char *what; int N1, N2, K; } two_case;
        const two_case tc[] = {{"odd rows 512", 203, 0, 512}, {"q + kv_a", 3072, 576, 2048}, {"v3 q_a + kv_a", 1536, 576, 7168},
                               {"odd two", 203, 93, 512}, {"wide 10240", 520, 0, 10240}};
        for (int d = 0; d < 2; d++) {
            ds_dtype dt = d ? DS_DTYPE_BF16 : DS_DTYPE_F8_E4M3;
            for (int i = 0; i < NM(tc); i++) {
                float amp = (d ? 1.0f : 0.5f) / sqrtf((float)tc[i].K);
                wpair w1 = mk_weight(&s, tc[i].N1, tc[i].K, dt, amp, tc[i].what), w2;
                if (tc[i].N2) w2 = mk_weight(&s, tc[i].N2, tc[i].K, dt, amp, tc[i].what);
                for (int chain = 0; chain <= (tc[i].N2 == 576); chain++)
                    check_rowo_case(&s, ro, gv, tc[i].what, &w1, tc[i].N2 ? &w2 : NULL, 1, chain, &norm);
                free_weight(&w1);
                if (tc[i].N2) free_weight(&w2);
            }
        }
        free_weight(&norm);
        ro->destroy(ro);
        gv->destroy(gv);
    }
    free_setup(&s);
}

/* DSINFER_OPS_ONLY=shin: the shared experts as virtual experts of the routed experts' moe_wg_kernel launches
 * (DSINFER_CUDA_MOE_SHARED_IN=1, the default) against a twin with them in line (=0): the whole MoE block within NMSE 1e-5
 * of the twin (the shared sums in two halves and another order; BF16 SiLU products may round apart) and some value
 * different (the virtual experts did run) up to 256 tokens, the same bits above (257: in line on both), and against the
 * CPU. V2-Lite (two shared experts of 1408: two virtual experts; down's scales a row of 22 blocks, a slice of 11) FP8
 * W8A8 and BF16, V3 (one shared expert: 257 experts in the tables) FP8. */
static void run_moe_shared_in(void) {
    if (only && strcmp(only, "shin")) return;
    setup s;
    twin_w8a8_begin("DSINFER_CUDA_MOE_SHARED_IN");
    moe_twin_val = "0";
    /* measured (twenty-first session run 2): FP8 1.1 .. 1.4e-4 (V2-Lite), 3.7 .. 6.9e-5 (V3), from the in-line W8A8 MLP's
     * SiLU products quantized without the BF16 rounding the experts' path applies (one e4m3 step where the two roundings
     * part); BF16 <= 7.4e-6. A lost or misplaced shared expert is ~2e-2 .. 0.9. */
    moe_twin_nmse = 1e-3;
    moe_twin_differ_m = 256;
    if (load_setup(&s, "v2l-shin", "configs/deepseek-v2-lite.json", 3, 16)) {
        const int m[] = {2, 8, 9, 33, 64, 200, 256, 257}, b[] = {4, 64, 256};
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
        check_moe_dt(&s, b, NM(b), DS_DTYPE_BF16, 3, 0);
        free_setup(&s);
    }
    if (load_setup(&s, "v3-shin", "configs/deepseek-v3.json", 3, 16)) {
        const int m[] = {2, 64};
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
        free_setup(&s);
    }
    moe_twin_nmse = 0;
    moe_twin_differ_m = 0;
    twin_w8a8_end();
    unsetenv("DSINFER_CUDA_MOE_SHARED_IN");
}

/* FP8 weights with every e4m3 code but NaN (w_all_codes: zeros and subnormals too, absent from the random weights,
 * whose exponents are 5 .. 8): the GEMV at 1 and 4 rows, also scaling once a chunk (DSINFER_CUDA_GEMV_F8C=1), the
 * W8A8 linear at 2, 9 and 64 rows, the grouped MoE at 1, 4 and 63 tokens, against the CPU.
 * DSINFER_OPS_ONLY=f8codes. */
static void run_fp8_codes(void) {
    if (only && strcmp(only, "f8codes")) return;
    setup s;
    const int g[] = {1, 4}, w8[] = {2, 9, 64}, m[] = {1, 4, 63};
    w_all_codes = 1;
    if (load_setup(&s, "v3-codes", "configs/deepseek-v3.json", 0, 16)) {
        check_linear(&s, "all codes", 512, 2048, DS_DTYPE_F8_E4M3, g, NM(g));
        check_linear_w8a8(&s, "all codes", 512, 2048, w8, NM(w8));
        free_setup(&s);
    }
    if (load_setup(&s, "v2l-codes", "configs/deepseek-v2-lite.json", 3, 16)) {
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 0, 0);
        free_setup(&s);
    }
    setenv("DSINFER_CUDA_GEMV_F8C", "1", 1);
    if (load_setup(&s, "v3-codesc", "configs/deepseek-v3.json", 0, 16)) {
        check_linear(&s, "all codes f8c", 512, 2048, DS_DTYPE_F8_E4M3, g, NM(g));
        free_setup(&s);
    }
    unsetenv("DSINFER_CUDA_GEMV_F8C");
    w_all_codes = 0;
    if (load_setup(&s, "codes-off", "tests/fixtures/tiny-v3-fp8/config.json", 3, 16)) free_setup(&s);   /* flag back off */
}

/* The v2 GEMV's FP8 weights scaled once a 16-code chunk and token (DSINFER_CUDA_GEMV_F8C=1, cuda_linear.cu VT_FP8C;
 * another rounding order): linear at 1 and 4 rows (V3 q_a, an odd 200x304: the plain, split-K and partial-block
 * forms) at THR_GEMM against the CPU, linear2's two-weight form (V2-Lite q + kv_a), the grouped MoE's GEMVs at 1 and 4
 * tokens. The flag is process-wide, read at backend creation; the last line turns it off. DSINFER_OPS_ONLY=f8c. */
static void run_gemv_f8c(void) {
    if (only && strcmp(only, "f8c")) return;
    setup s;
    setenv("DSINFER_CUDA_GEMV_F8C", "1", 1);
    setenv("DSINFER_CUDA_FP8_GEMM_MIN_M", "9", 1);   /* linear2 and the MoE at 4 rows on the GEMVs too */
    setenv("DSINFER_CUDA_MOE_TC_MIN_M", "9", 1);
    w8_min_m = GEMV_MAX_M_TEST + 1;
    if (load_setup(&s, "v3-f8c", "configs/deepseek-v3.json", 0, 16)) {
        const int g[] = {1, 4};
        check_linear(&s, "q_a f8c", 1536, 7168, DS_DTYPE_F8_E4M3, g, NM(g));
        check_linear(&s, "odd f8c", 200, 304, DS_DTYPE_F8_E4M3, g, NM(g));
        check_linear2(&s, "v2l q+kv_a f8c", 3072, 576, 2048, DS_DTYPE_F8_E4M3);
        free_setup(&s);
    }
    if (load_setup(&s, "v2l-f8c", "configs/deepseek-v2-lite.json", 3, 16)) {   /* FP8 experts of V2-Lite's widths */
        const int m[] = {1, 4};
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 0, 0);
        free_setup(&s);
    }
    w8_min_m = W8_MIN_M_TEST;
    unsetenv("DSINFER_CUDA_GEMV_F8C");
    unsetenv("DSINFER_CUDA_FP8_GEMM_MIN_M");
    unsetenv("DSINFER_CUDA_MOE_TC_MIN_M");
    if (load_setup(&s, "f8c-off", "tests/fixtures/tiny-v3-fp8/config.json", 3, 16)) free_setup(&s);   /* flag back off */
}

/* FP8 weights decoded without the conversion unit (DSINFER_CUDA_FP8_FAST=1, cuda.h cu_fp8_scaled: the same
 * values as the cvt path, checked code by code on the host by test_cuda_host): the GEMV v2 at the exact
 * thresholds (M = 1, 4: V3 q_a, an odd 200x304), the grouped MoE on it (M = 1, 4) and on the tensor cores
 * (M = 63 / 128 at THR_TC), the skinny kernel (M = 9, 63). The switch is a process-wide flag read at
 * backend creation; the setup's backend turns it on and the last line creates one to turn it off. */
static void run_fp8_fast(void) {
    if (only) return;
    setup s;
    setenv("DSINFER_CUDA_FP8_FAST", "1", 1);
    if (load_setup(&s, "v3-f8f", "configs/deepseek-v3.json", 0, 16)) {
        const int g[] = {1, 4}, sk[] = {9, 63};
        check_linear(&s, "q_a fast", 1536, 7168, DS_DTYPE_F8_E4M3, g, NM(g));
        check_linear(&s, "odd fast", 200, 304, DS_DTYPE_F8_E4M3, g, NM(g));
        check_linear_on(&s, "skinny", 200, 384, DS_DTYPE_F8_E4M3, sk, NM(sk), 1);
        free_setup(&s);
    }
    if (load_setup(&s, "v2l-f8f", "configs/deepseek-v2-lite.json", 3, 16)) {   /* FP8 experts of V2-Lite's widths */
        const int m[] = {1, 4, 63}, t[] = {63};
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 0, 0);
        check_moe_dt(&s, t, NM(t), DS_DTYPE_F8_E4M3, 1, 0);
        free_setup(&s);
    }
    unsetenv("DSINFER_CUDA_FP8_FAST");
    if (load_setup(&s, "f8f-off", "tests/fixtures/tiny-v3-fp8/config.json", 3, 16)) free_setup(&s);   /* flag back off */
}

/* The W8A8 linear (DSINFER_CUDA_FP8_GEMM=1) at the V3 shapes of issue 8 (q_a+kv_a fused 2112, q_b, kv_b, o,
 * expert down) and V2-Lite's expert down: up to 256 rows the own FP8-MMA kernel (DSINFER_CUDA_FP8_OWN=1,
 * opt-in; split K; 9 and 64 rows: 32 and 64 tokens a block, 131: two token blocks, the second partial), 1024
 * cuBLASLt; odd shapes (K/128 = 4 and 3, N not a multiple of 64) at 9, 63, 200; and cuBLASLt at 64 rows (the
 * default). */
static void run_w8a8_linear(void) {
    if (only && strcmp(only, "w8a8")) return;
    setup s;
    if (load_setup(&s, "v3-w8l", "configs/deepseek-v3.json", 3, 16)) {
        const int w8m[] = {9, 64, 131, 1024};
        struct { const char *n; int N, K; } W8[] = {{"q_a+kv_a", 2112, 7168}, {"q_b", 24576, 1536}, {"kv_b", 32768, 512},
                                                   {"o", 7168, 16384}, {"expert down", 7168, 2048},
                                                   {"v2l down", 2048, 1408}};
        const int odd[] = {9, 63, 200};
        /* own = 1: moe_f8_kernel up to 256 rows (1024: cuBLASLt); 2 (the default): moe_wg_kernel's dense form up
         * to 256 rows (9, 63, 64: 32 / 64 tokens a chunk; 131, 200: chunks of 64, the last partial; split K where
         * the tiles are few), the TMA kernel at 1024; 3: wgmma with DSINFER_CUDA_FP8_WG_MAX_M=0 (9, 64: the
         * cp.async kernel, one warpgroup a block; 131, 200, 1024: the TMA kernel, partial row blocks); 4: that
         * with DSINFER_CUDA_FP8_TMA=0 (131, 200, 1024: the cp.async kernel with two warpgroups); 5: 3 with the
         * split-K sums by the reduce kernel (DSINFER_CUDA_F8_TICKETS=0; 3 and 4 sum in the kernel), 9 and 64 rows */
        for (int own = 1; own <= 5; own++) {
            setenv("DSINFER_CUDA_FP8_OWN", own == 1 ? "1" : "2", 1);   /* read by check_linear_w8a8's backends */
            setenv("DSINFER_CUDA_FP8_TMA", own == 4 ? "0" : "1", 1);
            setenv("DSINFER_CUDA_FP8_WG_MAX_M", own >= 3 ? "0" : "256", 1);
            setenv("DSINFER_CUDA_F8_TICKETS", own == 5 ? "0" : "1", 1);
            printf("  DSINFER_CUDA_FP8_OWN=%d DSINFER_CUDA_FP8_TMA=%d DSINFER_CUDA_FP8_WG_MAX_M=%d DSINFER_CUDA_F8_TICKETS=%d\n",
                   own == 1 ? 1 : 2, own != 4, own >= 3 ? 0 : 256, own != 5);
            for (int i = 0; i < NM(W8); i++) check_linear_w8a8(&s, W8[i].n, W8[i].N, W8[i].K, w8m, own == 5 ? 2 : NM(w8m));
            check_linear_w8a8(&s, "odd", 132, 512, odd, NM(odd));   /* K/128 = 4: the scales used in place */
            check_linear_w8a8(&s, "odd", 260, 384, odd, NM(odd));   /* K/128 = 3: re-packed scales, partial N block */
            check_linear_w8a8(&s, "odd", 92, 1280, odd, NM(odd));   /* one partial N block, K/128 = 10 */
        }
        const int lt[] = {64};
        setenv("DSINFER_CUDA_FP8_OWN", "0", 1);   /* cuBLASLt */
        unsetenv("DSINFER_CUDA_FP8_TMA");
        check_linear_w8a8(&s, "cublasLt q_a+kv_a", 2112, 7168, lt, NM(lt));
        free_setup(&s);
    }
    unsetenv("DSINFER_CUDA_FP8_OWN");
    unsetenv("DSINFER_CUDA_FP8_WG_MAX_M");
    unsetenv("DSINFER_CUDA_F8_TICKETS");
}

/* W8A8 FP8 experts (DSINFER_MOE_W8A8=1: activations quantized per token x 128 columns, FP8 MMAs,
 * moe_wg_kernel at decode sizes, moe_f8_kernel under DSINFER_CUDA_MOE_WG=0) against the CPU backend emulating the same quantization under the same switch, at THR_TC
 * (the shared expert is a BF16 GEMM there; quantizing the activations alone moves the output by ~1e-3, so a
 * path that skipped the quantization on either side fails). V2-Lite's widths (I = 1408: 11 blocks of 128)
 * at 63 rows (32 tokens a pass) and 256 (64 a pass, a mean of 24 rows per expert); V3's at 64. Prefill sizes
 * (1024 tokens and more: the grouped wgmma launches of cu_moe_gemm_f8): V2-Lite at 1100 tokens (~103 rows an
 * expert, partial 128-row tiles), V3 at 1024 (256 experts, ~32 rows each). Both backends read the switch at
 * creation; the last setup turns it off again. */
static void run_moe_w8a8(void) {
    if (only && strcmp(only, "w8a8") && strcmp(only, "moe8")) return;
    setup s;
    setenv("DSINFER_MOE_W8A8", "1", 1);
    if (load_setup(&s, "v2l-w8a8", "configs/deepseek-v2-lite.json", 3, 16)) {
        const int m[] = {63, 256, 1100}, r[] = {63};
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
        check_moe_dt(&s, r, NM(r), DS_DTYPE_F8_E4M3, 2, 1);   /* an expert range only: most experts without rows */
        moe_small_tc(&s, DS_DTYPE_F8_E4M3, 2);
        free_setup(&s);
    }
    if (load_setup(&s, "v3-w8a8", "configs/deepseek-v3.json", 3, 16)) {
        const int m[] = {64, 1024};
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
        free_setup(&s);
    }
    /* moe_wg_kernel (the decode sizes above) with 32 tokens a chunk at a mean of 24 rows an expert: experts of
     * two chunks, each reading the weight again */
    setenv("DSINFER_CUDA_MOE_WG_NT", "32", 1);
    if (load_setup(&s, "v2l-wg32", "configs/deepseek-v2-lite.json", 3, 16)) {
        const int m[] = {256};
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
        free_setup(&s);
    }
    unsetenv("DSINFER_CUDA_MOE_WG_NT");
    /* the mma.sync kernel moe_f8_kernel (DSINFER_CUDA_MOE_WG=0), its fragments converted once for FP16 MMAs,
     * then by ptxas's emulated FP8 mma.sync (DSINFER_CUDA_MOE_F8_CVT=0): 32 and 64 tokens a pass */
    setenv("DSINFER_CUDA_MOE_WG", "0", 1);
    if (load_setup(&s, "v2l-w8f", "configs/deepseek-v2-lite.json", 3, 16)) {
        const int m[] = {63, 256};
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
        free_setup(&s);
    }
    setenv("DSINFER_CUDA_MOE_F8_CVT", "0", 1);
    if (load_setup(&s, "v2l-w8e", "configs/deepseek-v2-lite.json", 3, 16)) {
        const int m[] = {63, 256};
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 2, 0);
        free_setup(&s);
    }
    unsetenv("DSINFER_CUDA_MOE_F8_CVT");
    unsetenv("DSINFER_CUDA_MOE_WG");
    unsetenv("DSINFER_MOE_W8A8");
    if (load_setup(&s, "w8a8-off", "tests/fixtures/tiny-v3-fp8/config.json", 3, 16)) free_setup(&s);   /* flags back off */
}

/* The exact NVFP4 GEMM with the weight decoded in the kernel (DSINFER_CUDA_NVFP4_SIMT=1, cuda_linear.cu
 * nvfp4_sgemm_kernel) at the exact threshold: V2-Lite q (3072 x 2048) and a V3 expert's gate (2048 x 7168) at
 * M = 9, 63, 128 and 4096 (sampled rows), a 200 x 320 weight (partial 64-tiles in both directions). The
 * switch is read at backend creation; the last setup turns it off again. */
static void run_nvfp4_simt(void) {
    if (only) return;
    setup s;
    setenv("DSINFER_CUDA_NVFP4_SIMT", "1", 1);
    if (load_setup(&s, "v2l-f4s", "configs/deepseek-v2-lite.json", 0, 16)) {
        const int m[] = {9, 63, 128, 4096}, odd[] = {9, 63, 130};
        check_linear(&s, "q simt", 3072, 2048, DS_DTYPE_NVFP4, m, NM(m));
        check_linear(&s, "odd simt", 200, 320, DS_DTYPE_NVFP4, odd, NM(odd));
        free_setup(&s);
    }
    if (load_setup(&s, "v3-f4s", "configs/deepseek-v3.json", 0, 16)) {
        const int m[] = {9, 128};
        check_linear(&s, "gate simt", 2048, 7168, DS_DTYPE_NVFP4, m, NM(m));
        free_setup(&s);
    }
    unsetenv("DSINFER_CUDA_NVFP4_SIMT");
    if (load_setup(&s, "f4s-off", "tests/fixtures/tiny-v3-fp8/config.json", 3, 16)) free_setup(&s);   /* flag back off */
}

/* The MoE as one cuBLAS GEMM per expert (DSINFER_CUDA_MOE_GEMM, cuda_moe_gemm.cu) from 9 tokens on
 * (MIN_M=9, so experts with no row, one row and a few rows occur): V2-Lite BF16 (in place; gate and up
 * apart, two GEMMs) and NVFP4 (dequantised per expert into adjacent tiles: gate and up as one GEMM), the FP8
 * fixture's partial 128-blocks, at THR_TC. By default the path starts at
 * 1024 tokens, which check_moe's 4096-token tensor-core rows reach (V2-Lite, V3 FP8 with 256 experts). */
static void run_moe_gemm(void) {
    if (only) return;
    setup s;
    setenv("DSINFER_CUDA_MOE_GEMM_MIN_M", "9", 1);
    const int m[] = {9, 63, 130};
    if (load_setup(&s, "v2l-mg", "configs/deepseek-v2-lite.json", 0, 16)) {
        printf("  %-8s (MoE as GEMMs per expert from 9 tokens)\n", s.name);
        check_moe_dt(&s, m, NM(m), DS_DTYPE_BF16, 1, 0);
        check_moe_dt(&s, m, NM(m), DS_DTYPE_NVFP4, 1, 0);
        free_setup(&s);
    }
    if (load_setup(&s, "f8-mg", "tests/fixtures/tiny-v3-fp8/config.json", 3, 16)) {
        check_moe_dt(&s, m, NM(m), DS_DTYPE_F8_E4M3, 1, 0);
        free_setup(&s);
    }
    unsetenv("DSINFER_CUDA_MOE_GEMM_MIN_M");
}

/* The MLP with W8A8 linears (DSINFER_CUDA_FP8_GEMM=1) on FP8 weights, gate and up as two linears (hfuse "1") or
 * as one linear2 launch ("2"), or in the fused form (fuse: DSINFER_CUDA_MLP_FUSE=1 up to 64 rows; 2: also above, at
 * 65 .. 520 rows: split K, partial row blocks, no split), against the CPU quantizing as
 * the GPU does: x per token x 128 columns for gate / up, then SiLU(g) * u the same way for down (THR_TC: a code of
 * the intermediate may round the other way where the GPU's g differs from the CPU's in its last bits). The fused
 * form also against a twin backend with hfuse 2 unfused: the same bits (same splits, sums, SiLU and quantizer). */
static ds_backend *mlp_backend(setup *s, const char *hfuse, const char *fuse, char *err) {
    setenv("DSINFER_CUDA_FP8_GEMM", "1", 1);
    setenv("DSINFER_CUDA_HFUSE", hfuse, 1);
    setenv("DSINFER_CUDA_MLP_FUSE", fuse, 1);
    ds_backend *gpu = ds_backend_cuda_new(&s->cfg, err);
    unsetenv("DSINFER_CUDA_FP8_GEMM");
    unsetenv("DSINFER_CUDA_HFUSE");
    unsetenv("DSINFER_CUDA_MLP_FUSE");
    return gpu;
}

static void check_mlp_w8a8(setup *s, int I, const char *hfuse, int fuse) {
    char err[DS_ERRLEN];
    int D = s->cfg.hidden_size;
    ds_backend *gpu = mlp_backend(s, hfuse, fuse == 2 ? "2" : fuse ? "1" : "0", err), *twin = NULL;
    if (gpu && fuse && !(twin = mlp_backend(s, "2", "0", err))) gpu->destroy(gpu);
    if (!gpu || (fuse && !twin)) { CHECKF(0, "%s", err); return; }
    wpair g = mk_weight(s, I, D, DS_DTYPE_F8_E4M3, 0.5f / sqrtf((float)D), "gate");
    wpair u = mk_weight(s, I, D, DS_DTYPE_F8_E4M3, 0.5f / sqrtf((float)D), "up");
    wpair dn = mk_weight(s, D, I, DS_DTYPE_F8_E4M3, 0.5f / sqrtf((float)I), "down");
    const int Ms[] = {1, 4, 8, 9, 63, 64, 65, 130}, M2[] = {65, 130, 200, 256, 520};   /* 2: the TMA kernel's sizes */
    const int *ms = fuse == 2 ? M2 : Ms, nm = fuse == 2 ? NM(M2) : NM(Ms);
    for (int i = 0; i < nm; i++) {
        int M = ms[i];
        if (M > max_m || M < w8_min_m) continue;   /* below w8_min_m the GEMVs (exact activations) take the MLP */
        prime(s, M);
        buf x = buf_new(s, (size_t)M * D), out = buf_new(s, (size_t)M * D);
        buf_rand(&x, 1.0f);
        buf_poison(&out);
        gpu->mlp(gpu, out.d, x.d, &g.d, &u.d, &dn.d, M);
        if (twin) {
            buf o2 = buf_new(s, (size_t)M * D);
            buf_poison(&o2);
            twin->mlp(twin, o2.d, x.d, &g.d, &u.d, &dn.d, M);
            size_t diff = device_units_differ(s, out.d, o2.d, (size_t)M * D, sizeof(float));
            printf("  %-8s mlp W8A8 M=%d: fused against unfused: %zu of %zu values differ\n", s->name, M, diff, (size_t)M * D);
            CHECKF(diff == 0, "%s mlp W8A8 M=%d: the fused epilogue changes %zu values", s->name, M, diff);
            buf_free(s, &o2);
        }
        float *xq = malloc(sizeof(float) * (size_t)M * D), *gh = malloc(sizeof(float) * (size_t)M * I);
        float *uh = malloc(sizeof(float) * (size_t)M * I), *hq = malloc(sizeof(float) * (size_t)M * I);
        act_quant_ref(xq, x.h, M, D);
        s->cpu->linear(s->cpu, gh, xq, &g.h, M);
        s->cpu->linear(s->cpu, uh, xq, &u.h, M);
        for (size_t k = 0; k < (size_t)M * I; k++) gh[k] = gh[k] / (1.0f + expf(-gh[k])) * uh[k];
        act_quant_ref(hq, gh, M, I);
        s->cpu->linear(s->cpu, out.h, hq, &dn.h, M);
        char name[64];
        snprintf(name, sizeof name, "mlp W8A8 hfuse %s%s I=%d", hfuse, fuse ? " fused" : "", I);
        compare(s, name, M, &out, THR_TC, 0);
        free(xq); free(gh); free(uh); free(hq);
        buf_free(s, &x);
        buf_free(s, &out);
    }
    free_weight(&g); free_weight(&u); free_weight(&dn);
    gpu->destroy(gpu);
    if (twin) twin->destroy(twin);
}

/* The dense FP8 linears as W8A8 at 1 .. 8 rows (DSINFER_CUDA_FP8_GEMM_MIN_M=1; by default from 2 rows, the GEMVs take
 * batch 1): linear (V3 q_a + kv_a, V2-Lite's shared down, an odd shape), linear2 (V2-Lite q + kv_a, an odd pair) and
 * the W8A8 MLP (two linears, linear2, fused; the fused one bit for bit against the unfused), against the CPU on x
 * quantized the same way; then linear2 above 64 rows with x quantized once (DSINFER_CUDA_W8_SHARED_X, default) and
 * per GEMM. The twelfth session's switches (defaults since the fourteenth); DSINFER_OPS_ONLY=w8small runs these
 * alone. */
static void run_w8a8_small(void) {
    if (only && strcmp(only, "w8small")) return;
    setup s;
    setenv("DSINFER_CUDA_FP8_GEMM_MIN_M", "1", 1);
    w8_min_m = 1;
    if (load_setup(&s, "v3-w8s", "configs/deepseek-v3.json", 3, 16)) {
        const int Ms[] = {1, 2, 5, 8};
        check_linear_w8a8(&s, "q_a+kv_a", 2112, 7168, Ms, NM(Ms));
        check_linear_w8a8(&s, "v2l down", 2048, 1408, Ms, NM(Ms));
        check_linear_w8a8(&s, "odd", 260, 384, Ms, NM(Ms));
        check_linear2(&s, "v2l q+kv_a", 3072, 576, 2048, DS_DTYPE_F8_E4M3);
        check_linear2(&s, "odd", 260, 92, 384, DS_DTYPE_F8_E4M3);
        free_setup(&s);
    }
    if (load_setup(&s, "v2l-w8s", "configs/deepseek-v2-lite.json", 0, 16)) {
        check_mlp_w8a8(&s, 2816, "1", 0);
        check_mlp_w8a8(&s, 2816, "2", 0);
        check_mlp_w8a8(&s, 2816, "2", 1);
        free_setup(&s);
    }
    w8_min_m = W8_MIN_M_TEST;
    unsetenv("DSINFER_CUDA_FP8_GEMM_MIN_M");
    /* linear2's two W8A8 GEMMs above 64 rows with x quantized once (DSINFER_CUDA_W8_SHARED_X=1, the default) and once
     * per GEMM (=0): linear2's 65 and 130 rows, the MLP's gate / up at 65 and 130 with hfuse 2 */
    for (int shared = 1; shared >= 0; shared--) {
        setenv("DSINFER_CUDA_W8_SHARED_X", shared ? "1" : "0", 1);
        if (load_setup(&s, shared ? "v3-w8x" : "v3-w8x0", "configs/deepseek-v3.json", 3, 16)) {
            check_linear2(&s, "v3 q_a+kv_a", 1536, 576, 7168, DS_DTYPE_F8_E4M3);
            check_linear2(&s, "odd", 260, 92, 384, DS_DTYPE_F8_E4M3);
            free_setup(&s);
        }
        if (load_setup(&s, shared ? "v2l-w8x" : "v2l-w8x0", "configs/deepseek-v2-lite.json", 0, 16)) {
            check_mlp_w8a8(&s, 2816, "2", 0);
            free_setup(&s);
        }
    }
    unsetenv("DSINFER_CUDA_W8_SHARED_X");
}

/* linear (N x K) and linear2 (N x K, N2 x K) on two backends that differ only in name = val: every output value the
 * same bits (switches that change how the W8A8 kernels load or sum, not what they add). Each M twice on new inputs
 * (the second launch finds the first one's partials and tickets). */
static void check_w8_same_bits(setup *s, const char *name, const char *val, int N, int N2, int K, const int *Ms, int nM) {
    char err[DS_ERRLEN];
    ds_backend *a = w8_backend_with(s, name, NULL, err), *b = a ? w8_backend_with(s, name, val, err) : NULL;
    if (!a || !b) {
        if (a) a->destroy(a);
        CHECKF(0, "%s", err);
        return;
    }
    wpair w = mk_weight(s, N, K, DS_DTYPE_F8_E4M3, 0.5f / sqrtf((float)K), "w");
    wpair w2 = mk_weight(s, N2, K, DS_DTYPE_F8_E4M3, 0.5f / sqrtf((float)K), "w2");
    for (int i = 0; i < nM; i++) {
        int M = Ms[i];
        if (M > max_m) continue;
        prime(s, M);
        buf x = buf_new(s, (size_t)M * K), oa = buf_new(s, (size_t)M * N), ob = buf_new(s, (size_t)M * N);
        buf pa = buf_new(s, (size_t)M * N2), pb = buf_new(s, (size_t)M * N2);
        size_t d1 = 0, d2 = 0;
        for (int pass = 0; pass < 2; pass++) {
            w8a8_input(&x, M, K);
            buf_poison(&oa); buf_poison(&ob);
            a->linear(a, oa.d, x.d, &w.d, M);
            b->linear(b, ob.d, x.d, &w.d, M);
            d1 += device_units_differ(s, oa.d, ob.d, (size_t)M * N, sizeof(float));
            buf_poison(&oa); buf_poison(&ob); buf_poison(&pa); buf_poison(&pb);
            a->linear2(a, oa.d, pa.d, x.d, &w.d, &w2.d, M);
            b->linear2(b, ob.d, pb.d, x.d, &w.d, &w2.d, M);
            d2 += device_units_differ(s, oa.d, ob.d, (size_t)M * N, sizeof(float)) +
                  device_units_differ(s, pa.d, pb.d, (size_t)M * N2, sizeof(float));
        }
        printf("  %-8s W8A8 %dx%d (+%d) M=%d, %s=%s against unset: %zu (linear) and %zu (linear2) values differ\n", s->name,
               N, K, N2, M, name, val, d1, d2);
        CHECKF(d1 == 0 && d2 == 0, "%s W8A8 %dx%d M=%d: %s=%s changes %zu + %zu values", s->name, N, K, M, name, val, d1, d2);
        buf_free(s, &x); buf_free(s, &oa); buf_free(s, &ob); buf_free(s, &pa); buf_free(s, &pb);
    }
    free_weight(&w);
    free_weight(&w2);
    a->destroy(a);
    b->destroy(b);
}

/* The W8A8 kernels' opt-in switches of the thirteenth session: DSINFER_CUDA_F8_PRELOAD (the cp.async kernel's ring
 * all in flight at its start) and DSINFER_CUDA_F8_REDUCE_VEC (the split-K sum four values a thread) bit for bit
 * against their absence (V3 q_a + kv_a at K 7168: 56 stages, splits of 4; V2-Lite q + kv_a at K 2048; an odd pair at
 * K 384 with partial column blocks; 1 .. 130 rows: GEMV, cp.async kernel with and without split K, TMA kernel); then
 * each of the three (and DSINFER_CUDA_F8_SPLIT_KB=2, which changes the splits and so the order of the sum) against
 * the CPU: linear, linear2 and the fused W8A8 MLP. DSINFER_OPS_ONLY=f8lab runs these alone. */
static void run_f8_lab(void) {
    if (only && strcmp(only, "f8lab")) return;
    setup s;
    if (!load_setup(&s, "v3-f8lab", "configs/deepseek-v3.json", 3, 16)) return;
    const int Ms[] = {1, 9, 33, 64, 65, 130};
    const char *bits[] = {"DSINFER_CUDA_F8_PRELOAD", "DSINFER_CUDA_F8_REDUCE_VEC"};
    for (int v = 0; v < 2; v++) {
        check_w8_same_bits(&s, bits[v], "1", 1536, 576, 7168, Ms, NM(Ms));
        check_w8_same_bits(&s, bits[v], "1", 3072, 576, 2048, Ms, NM(Ms));
        check_w8_same_bits(&s, bits[v], "1", 260, 92, 384, Ms, NM(Ms));
    }
    free_setup(&s);
    const char *envs[][2] = {{"DSINFER_CUDA_F8_PRELOAD", "1"}, {"DSINFER_CUDA_F8_REDUCE_VEC", "1"},
                             {"DSINFER_CUDA_F8_SPLIT_KB", "2"}};
    for (int v = 0; v < 3; v++) {
        setenv(envs[v][0], envs[v][1], 1);
        printf("  %s=%s against the CPU\n", envs[v][0], envs[v][1]);
        if (load_setup(&s, "v3-f8lb", "configs/deepseek-v3.json", 3, 16)) {
            check_linear_w8a8(&s, "q_a+kv_a", 2112, 7168, Ms + 1, NM(Ms) - 1);
            check_linear_w8a8(&s, "odd", 260, 384, Ms + 1, NM(Ms) - 1);
            check_linear2(&s, "v2l q+kv_a", 3072, 576, 2048, DS_DTYPE_F8_E4M3);
            free_setup(&s);
        }
        if (load_setup(&s, "v2l-f8lb", "configs/deepseek-v2-lite.json", 0, 16)) {
            check_mlp_w8a8(&s, 2816, "2", 1);
            free_setup(&s);
        }
        unsetenv(envs[v][0]);
    }
}

/* linear2 at the MLA shapes: V2-Lite's q + kv_a, V3's q_a + kv_a, an odd pair (partial column blocks, K = 384);
 * BF16 and FP8; then the W8A8 MLP at V2-Lite's shared-expert width with gate / up as two linears and as one
 * (DSINFER_CUDA_HFUSE=2), and fused (DSINFER_CUDA_MLP_FUSE=1; also at 1408). DSINFER_OPS_ONLY=linear2 runs these
 * alone. */
static void run_linear2(void) {
    if (only && strcmp(only, "linear2")) return;
    setup s;
    if (load_setup(&s, "v3-lin2", "configs/deepseek-v3.json", 3, 16)) {
        for (int f = 0; f < 3; f++) {   /* BF16, FP8, FP8 with the split-K sums in the kernel (DSINFER_CUDA_F8_TICKETS) */
            ds_dtype dt = f ? DS_DTYPE_F8_E4M3 : DS_DTYPE_BF16;
            if (f == 2) setenv("DSINFER_CUDA_F8_TICKETS", "1", 1);
            check_linear2(&s, "v2l q+kv_a", 3072, 576, 2048, dt);
            check_linear2(&s, "v3 q_a+kv_a", 1536, 576, 7168, dt);
            check_linear2(&s, "odd", 260, 92, 384, dt);
            unsetenv("DSINFER_CUDA_F8_TICKETS");
        }
        free_setup(&s);
    }
    if (load_setup(&s, "v2l-mlp8", "configs/deepseek-v2-lite.json", 0, 16)) {   /* the shared experts' width */
        check_mlp_w8a8(&s, 2816, "1", 0);
        check_mlp_w8a8(&s, 2816, "2", 0);
        check_mlp_w8a8(&s, 2816, "2", 1);
        check_mlp_w8a8(&s, 1408, "2", 1);   /* 11 column blocks */
        check_mlp_w8a8(&s, 2816, "2", 2);   /* above 64 rows: the TMA kernel's partials into silu_quant_kernel */
        check_mlp_w8a8(&s, 1408, "2", 2);
        free_setup(&s);
    }
}

/* The shared experts on the second stream (cuda_side.cu, DSINFER_CUDA_SHARED_STREAM, opt-in), with the side
 * stream held back 300 us before its work (DSINFER_CUDA_SIDE_DELAY_NS) so that the routed experts always finish
 * first: the sum is right only if the combine waits for the shared experts. V2-Lite (two shared experts): the
 * grouped GEMVs (1, 9 tokens), BF16 experts on wgmma with BF16 shared GEMMs (63, 256), W8A8 experts with the
 * shared expert's W8A8 linears (63, 64: the split-K tickets; 200: the TMA kernel), the GEMM-per-expert path of
 * prefill (1100: cuBLAS on both streams), each op run twice (the second time with no first-use copies, which
 * synchronise) and, on the tensor-core paths, against a twin backend with the shared experts in line (bit for
 * bit); then the switch off (63). Then the same without holding the side back (the streams overlap: a buffer both
 * use shows; the grouped GEMV case at 9 tokens, whose router and shared GEMMs both dequantize into ws_deq without
 * the tensor cores, found one). DSINFER_OPS_ONLY=side runs these alone. */
static void run_side_stream(void) {
    if (only && strcmp(only, "side")) return;
    setup s;
    setenv("DSINFER_CUDA_MOE_SHARED_IN", "0", 1);   /* the twin (side off) keeps them in line too: the same kernels */
    setenv("DSINFER_CUDA_SHARED_STREAM", "1", 1);          /* opt-in */
    setenv("DSINFER_CUDA_SHARED_STREAM_MIN_M", "1", 1);   /* at every size (the default: 9 .. 128 tokens) */
    setenv("DSINFER_CUDA_SHARED_STREAM_MAX_M", "100000", 1);
    /* held back (the routed experts finish first: a missing join), then not (the two overlap: a shared buffer) */
    for (int held = 1; held >= 0; held--) {
        if (held) setenv("DSINFER_CUDA_SIDE_DELAY_NS", "300000", 1);
        else unsetenv("DSINFER_CUDA_SIDE_DELAY_NS");
        if (!load_setup(&s, held ? "v2l-side" : "v2l-sid0", "configs/deepseek-v2-lite.json", 0, 16)) continue;
        const int g[] = {1, 9}, m[] = {63, 256}, m63[] = {63}, pre[] = {1100};
        moe_twin = 1;
        check_moe_dt(&s, g, NM(g), DS_DTYPE_BF16, 0, 0);
        check_moe_dt(&s, m, NM(m), DS_DTYPE_BF16, 3, 0);
        /* W8A8 experts and the shared experts' W8A8 linears (the CPU reference keeps the shared expert's input
         * unquantized: ~2e-3 apart, so the CPU bound is loose here and the exact check is the twin's) */
        setenv("DSINFER_MOE_W8A8", "1", 1);
        setenv("DSINFER_CUDA_FP8_GEMM", "1", 1);
        moe_thr_tc = 1e-2;
        const int f8m[] = {63, 64, 200};
        check_moe_dt(&s, f8m, NM(f8m), DS_DTYPE_F8_E4M3, 2, 0);
        moe_thr_tc = 0;
        unsetenv("DSINFER_MOE_W8A8");
        unsetenv("DSINFER_CUDA_FP8_GEMM");
        if (held) check_moe_dt(&s, pre, NM(pre), DS_DTYPE_BF16, 3, 0);
        moe_twin = 0;
        if (held) {
            setenv("DSINFER_CUDA_SHARED_STREAM", "0", 1);
            printf("  %-8s (shared experts in line)\n", s.name);
            check_moe_dt(&s, m63, 1, DS_DTYPE_BF16, 3, 0);
            setenv("DSINFER_CUDA_SHARED_STREAM", "1", 1);
        }
        free_setup(&s);
    }
    unsetenv("DSINFER_CUDA_SIDE_DELAY_NS");
    unsetenv("DSINFER_CUDA_SHARED_STREAM");
    unsetenv("DSINFER_CUDA_SHARED_STREAM_MIN_M");
    unsetenv("DSINFER_CUDA_SHARED_STREAM_MAX_M");
    unsetenv("DSINFER_CUDA_MOE_SHARED_IN");
}

/* One TC linear on gpu against the CPU (THR_TC); M small enough for the whole reference. */
static void lt_linear_once(setup *s, ds_backend *gpu, wpair *w, int N, int K, int M, const char *name) {
    prime(s, M);
    buf x = buf_new(s, (size_t)M * K), out = buf_new(s, (size_t)M * N);
    buf_rand(&x, 1.0f);
    buf_poison(&out);
    gpu->linear(gpu, out.d, x.d, &w->d, M);
    s->cpu->linear(s->cpu, out.h, x.h, &w->h, M);
    compare(s, name, M, &out, THR_TC, 0);
    buf_free(s, &x);
    buf_free(s, &out);
}

static ds_backend *tc_backend(setup *s, const char *lt_tune) {
    char err[DS_ERRLEN];
    setenv("DSINFER_CUDA_TC", "1", 1);
    setenv("DSINFER_CUDA_LT_TUNE", lt_tune, 1);
    ds_backend *gpu = ds_backend_cuda_new(&s->cfg, err);
    unsetenv("DSINFER_CUDA_TC");
    unsetenv("DSINFER_CUDA_LT_TUNE");
    CHECKF(gpu != NULL, "%s", err);
    return gpu;
}

/* The tuned cuBLASLt BF16 GEMMs (DSINFER_CUDA_LT_TUNE, cuda_lt_tune.cu) in a cache directory of their own:
 * a first set of backends searches each shape (BF16 weights at M 9 .. 4096, an odd 200 x 320; FP8 weights,
 * dequantised to a BF16 tile, stay on cuBLAS's default) and writes the file; a new backend takes the same shape from the file without a search;
 * a file that does not parse is reported, searched again and rewritten; LT_TUNE=0 leaves it unused. Every
 * result against the CPU at THR_TC. */
static void run_lt_tune(void) {
    if (only) return;
    if (max_m < 130) {   /* its file holds the buckets of M 9, 33, 64 and 130: fewer rows would leave it partial */
        printf("  lt tune: skipped (DSINFER_OPS_MAX_M %d < 130, the rows its cache file's entries need)\n", max_m);
        return;
    }
    setup s;
    char dir[128], path[512], err[DS_ERRLEN];
    snprintf(dir, sizeof dir, "/tmp/dsinfer-lt-%d", (int)getpid());
    setenv("DSINFER_CACHE_DIR", dir, 1);
    if (!load_setup(&s, "v2l-lt", "configs/deepseek-v2-lite.json", 0, 16)) {
        unsetenv("DSINFER_CACHE_DIR");
        return;
    }
    CHECK(ds_cuda_lt_tune_path(path, sizeof path, err) == DS_OK);
    setenv("DSINFER_CUDA_LT_TUNE", "1", 1);   /* check_linear_on's TC backends read it at creation */
    const int m[] = {9, 64, 130, 4096}, odd[] = {9, 33}, f8[] = {64};
    check_linear_on(&s, "q lt", 3072, 2048, DS_DTYPE_BF16, m, NM(m), 1);
    check_linear_on(&s, "odd lt", 200, 320, DS_DTYPE_BF16, odd, NM(odd), 1);
    check_linear_on(&s, "fp8 no lt", 3072, 2048, DS_DTYPE_F8_E4M3, f8, NM(f8), 1);   /* its tile stays on cuBLAS */
    unsetenv("DSINFER_CUDA_LT_TUNE");
    ds_tune_cache c = {0};
    int want = max_m >= 4096 ? 6 : 5;   /* buckets: q 16, 64, 256 (4096); odd 16, 64; FP8 none */
    CHECKF(ds_tune_cache_load(&c, path, err) == DS_OK && c.n == want, "%s: %d entries, want %d (%s)", path, c.n, want, err);
    CHECK(ds_tune_cache_find(&c, "bf16f32:N3072:K2048:M64") != NULL);
    CHECK(ds_tune_cache_find(&c, "bf16f32:N200:K320:M64") != NULL);
    printf("  %-8s tuned cuBLASLt algorithms: %d shapes in %s\n", s.name, c.n, path);
    ds_tune_cache_free(&c);

    wpair w = mk_weight(&s, 3072, 2048, DS_DTYPE_BF16, 1.0f / sqrtf(2048.0f), "q lt2");
    int searched, from_disk, untimed;
    ds_backend *gpu = tc_backend(&s, "1");   /* the shape from the file */
    if (gpu) {
        lt_linear_once(&s, gpu, &w, 3072, 2048, 50, "linear TC lt from file");   /* bucket 64, M 50 */
        ds_cuda_lt_tune_stats(gpu, &searched, &from_disk, &untimed);
        CHECKF(searched == 0 && from_disk == 1 && untimed == 0, "searched %d, from file %d", searched, from_disk);
        gpu->destroy(gpu);
    }
    FILE *f = fopen(path, "w");   /* a file that does not parse */
    if (f) {
        fputs("# dsinfer tune cache v1\nbf16f32:N3072:K2048:M64 1 2 three\n", f);
        fclose(f);
    }
    gpu = tc_backend(&s, "1");
    if (gpu) {
        lt_linear_once(&s, gpu, &w, 3072, 2048, 64, "linear TC lt after a bad file");
        ds_cuda_lt_tune_stats(gpu, &searched, &from_disk, &untimed);
        CHECKF(searched == 1 && from_disk == 0, "searched %d, from file %d", searched, from_disk);
        gpu->destroy(gpu);
    }
    CHECKF(ds_tune_cache_load(&c, path, err) == DS_OK && c.n == 1, "rewritten: %d entries (%s)", c.n, err);
    ds_tune_cache_free(&c);
    gpu = tc_backend(&s, "0");   /* switched off: cuBLAS's default algorithm, the tuner untouched */
    if (gpu) {
        lt_linear_once(&s, gpu, &w, 3072, 2048, 64, "linear TC cuBLAS default");
        ds_cuda_lt_tune_stats(gpu, &searched, &from_disk, &untimed);
        CHECK(searched == 0 && from_disk == 0 && untimed == 0);
        gpu->destroy(gpu);
    }
    free_weight(&w);
    free_setup(&s);
    remove(path);
    rmdir(dir);
    unsetenv("DSINFER_CACHE_DIR");
}

/* DSINFER_OPS_PART=k/n (0 <= k < n <= 16): only the k-th of every n run groups of main (RUN), so that the whole suite can
 * run as n device calls of a bounded length; the environment main sets between groups is set in every part alike */
static int ops_part, ops_parts = 1;
static int in_part(void) {
    static int idx;
    return idx++ % ops_parts == ops_part;
}
/* DSINFER_OPS_STOP_AFTER=<text>: the run stops after the first RUN whose call contains text */
static const char *stop_after;
/* Each RUN's data: the generator restarted from the run's seed and the call's text (FNV-1a), so a test's inputs do not
 * depend on which tests ran before it: DSINFER_SEED=<n> DSINFER_OPS_ONLY=<name> repeats one test's failure on its own.
 * DSINFER_OPS_SHARED_RNG=1: one sequence through the whole run instead (the form before the fifty-sixth session, whose
 * seeds repeat only that way, with every test before the failing one: DSINFER_OPS_STOP_AFTER). */
static uint64_t rng_seed;
static int rng_shared;
static uint64_t call_seed(const char *call) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *call; call++) h = (h ^ (unsigned char)*call) * 0x100000001b3ull;
    return rng_seed ^ h;
}
/* seconds on the monotonic clock: each RUN's wall time is printed (`run <call>: <s> s`), so that a device call's log
 * says which groups fill its time (the whole suite passed one call's 570 s in the fifty-sixth session) */
static double run_clock(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
#define RUN(call)                                                                                              \
    do {                                                                                                       \
        if (!rng_shared) rng_state = call_seed(#call);                                                         \
        if (in_part()) {                                                                                       \
            const double t0_ = run_clock();                                                                    \
            call;                                                                                              \
            const double dt_ = run_clock() - t0_;                                                              \
            if (dt_ >= 0.05) printf("  run %s: %.1f s\n", #call, dt_);                                          \
        }                                                                                                      \
        if (stop_after && strstr(#call, stop_after)) {                                                         \
            printf("test_cuda_ops: stopped after %s (DSINFER_OPS_STOP_AFTER)\n", #call);                        \
            return test_result("test_cuda_ops");                                                              \
        }                                                                                                      \
    } while (0)

int main(void) {
    ds_env_warn_unknown(environ, stderr);   /* a switch set for this run that nothing reads: said in the log */
    char why[256];
    if (!ds_cuda_available(why, sizeof why)) test_skip(why);
    ds_dtype_init();
    {   /* the device-only conversions (the e4m3 encoder by the conversion unit) over every float */
        char msg[256];
        long bad = ds_cuda_device_selftest(msg, sizeof msg);
        printf("  device conversions: %ld mismatches (%s)\n", bad, msg);
        CHECKF(bad == 0, "device conversions: %ld mismatches, first: %s", bad, msg);
    }
    stop_after = getenv("DSINFER_OPS_STOP_AFTER");
    rng_shared = getenv("DSINFER_OPS_SHARED_RNG") && atoi(getenv("DSINFER_OPS_SHARED_RNG"));
    const char *seed = getenv("DSINFER_SEED");
    rng_seed = rng_state = seed ? strtoull(seed, NULL, 0) : (uint64_t)time(NULL);
    printf("test_cuda_ops: seed %llu (DSINFER_SEED repeats it; %s)\n", (unsigned long long)rng_seed,
           rng_shared ? "one sequence through the run: DSINFER_OPS_SHARED_RNG" : "each test's data from it and the test's call");
    int small = getenv("DSINFER_OPS_SMALL") != NULL;
    if (getenv("DSINFER_OPS_MAX_M")) max_m = atoi(getenv("DSINFER_OPS_MAX_M"));
    const char *part = getenv("DSINFER_OPS_PART");
    if (part && (sscanf(part, "%d/%d", &ops_part, &ops_parts) != 2 || ops_parts < 1 || ops_parts > 16 || ops_part < 0 ||
                 ops_part >= ops_parts)) {
        fprintf(stderr, "test_cuda_ops: bad DSINFER_OPS_PART \"%s\" (k/n with 0 <= k < n <= 16)\n", part);
        return 2;
    }
    if (part) printf("test_cuda_ops: part %d of %d (every %d-th run group)\n", ops_part, ops_parts, ops_parts);
    /* DSINFER_OPS_ONLY=mla, w8a8, moe8, moebf, side, linear2, kvb or qkv: the tensor-core MLA decode cases, the W8A8
     * paths, the W8A8 experts, the BF16 experts on wgmma, the shared experts' second stream, linear2 and the W8A8
     * MLP, kv_b's BF16 copy, or the fused qkv_finish alone (a quick check after a change to them) */
    only = getenv("DSINFER_OPS_ONLY");
    /* the one-token MoE by ownership (cuda_moeo.cu) off for every case but run_moeo's (which sets it and puts this back):
     * the other cases' batch-1 MoE checks count the launches of the paths they are about (duo, moe1, the grouped GEMV) */
    setenv("DSINFER_CUDA_MOEO", "0", 1);
    setenv("DSINFER_CUDA_ROWO", "0", 1);   /* (the same for the one-token linears by row ownership: run_rowo's backends set it) */
    const long checks0 = test_checks;   /* the conversions' above */
    RUN(run_odd("h1", "configs/deepseek-v2-lite.json", 1));
    RUN(run_odd("h3-fp8", "tests/fixtures/tiny-v3-fp8/config.json", 3));
    RUN(run_odd("h63", "configs/deepseek-v2-lite.json", 63));
    RUN(run_fp8_fast());
    RUN(run_gemv_f8c());
    RUN(run_fp8_codes());
    RUN(run_moe_w8a8());
    RUN(run_moe_wg_bf16());
    RUN(run_w8a8_linear());
    RUN(run_nvfp4_simt());
    RUN(run_lt_tune());
    RUN(run_moe_gemm());
    RUN(run_side_stream());
    RUN(run_linear2());
    RUN(run_kvb_copy());
    RUN(run_combine2());
    RUN(run_qkv_finish());
    RUN(run_router());
    RUN(run_w8a8_small());
    RUN(run_f8_tma1());
    RUN(run_f8_tm_pref());
    RUN(run_f8_tm_ss());
    RUN(run_quant_warp());
    RUN(run_f8_tm_store());
    RUN(run_moe_half());
    RUN(run_moe_dyn());
    RUN(run_moe_silu());
    RUN(run_moe_y_bf16());
    RUN(run_moe_gu_bf16());
    RUN(run_moe_pipe());
    RUN(run_moe_sx());
    RUN(run_moe_st2());
    RUN(run_moe_duo());
    RUN(run_moe_qf());
    RUN(run_moe1());
    RUN(run_moeo());
    RUN(run_moeostrips());
    RUN(run_moeotc());
    RUN(run_tail1());
    RUN(run_moeo_tail());
    RUN(run_attn1());
    RUN(run_moe_pdl());
    RUN(run_moe_order());
    RUN(run_moe_nt48());
    RUN(run_group3());
    RUN(run_attn_in());
    RUN(run_comb_uv());
    RUN(run_qkv_absorb());
    RUN(run_norm_fold());
    RUN(run_norm_fold_v3());
    RUN(run_normed_linear());
    RUN(run_comb_norm());
    RUN(run_mla_fold());
    RUN(run_gemv_t1());
    RUN(run_rowo());
    RUN(run_moe_shared_in());
    RUN(run_f8_reduce2());
    RUN(run_f8_lab());
    RUN(run_fa3());
    RUN(run_moe_combine2());
    const int kv_small[] = {1, 3, 4, 63}, kv_big[] = {1, 4, 128};
    /* C = 199: two scale blocks, the second partial, entries at odd byte offsets (335 bytes) */
    RUN(run_kv("h3-kv8", "configs/deepseek-v2-lite.json", 3, 199, 5, 0, KV_FP8, kv_small, NM(kv_small), 23));
    RUN(run_kv("h3-kv8u", "configs/deepseek-v2-lite.json", 3, 199, 5, 1, KV_FP8, kv_small, NM(kv_small), 23));
    RUN(run_kv("h3-kv16", "configs/deepseek-v2-lite.json", 3, 199, 5, 0, KV_BF16, kv_small, NM(kv_small), 23));
    RUN(run_kv("h3-kv16u", "configs/deepseek-v2-lite.json", 3, 199, 5, 1, KV_BF16, kv_small, NM(kv_small), 23));
    RUN(run_mla_tc("h3-tc", "configs/deepseek-v2-lite.json", 3, KV_F32, 5, kv_small, NM(kv_small), 150));
    RUN(run_mla_tc("h20-tc8", "configs/deepseek-v2-lite.json", 20, KV_FP8, 5, kv_small, NM(kv_small), 150));
    RUN(run_mla_tc("h3-tc8", "configs/deepseek-v2-lite.json", 3, KV_FP8, 7, kv_small, NM(kv_small), 150));
    RUN(run_mla_tc("h3-tc16", "configs/deepseek-v2-lite.json", 3, KV_BF16, 5, kv_small, NM(kv_small), 150));
    if (!small) {
        RUN(run_mla_tc("v2l-tc", "configs/deepseek-v2-lite.json", 0, KV_F32, 16, kv_big, NM(kv_big), 300));
        RUN(run_mla_tc("v2l-tc8", "configs/deepseek-v2-lite.json", 0, KV_FP8, 16, kv_big, NM(kv_big), 300));
        RUN(run_mla_tc("v2l-tc16", "configs/deepseek-v2-lite.json", 0, KV_BF16, 16, kv_big, NM(kv_big), 300));
        /* 600 new tokens over ragged sequences: several 128-query blocks of one sequence (FA v2), contexts of
         * many 64-row tiles through both cp.async stages, partial last blocks and tiles */
        /* the BF16 cache through the first kernel (DSINFER_CUDA_MLA_TC2=0; the cases above run v2), its tile
         * staged by registers and by cp.async (DSINFER_CUDA_MLA_ASYNC, opt-in) */
        setenv("DSINFER_CUDA_MLA_TC2", "0", 1);
        RUN(run_mla_tc("v2l-tc16v1", "configs/deepseek-v2-lite.json", 0, KV_BF16, 16, kv_big, NM(kv_big), 300));
        RUN(run_mla_tc("v2l-tc8v1", "configs/deepseek-v2-lite.json", 0, KV_FP8, 16, kv_big, NM(kv_big), 300));   /* FP8 in v1 */
        setenv("DSINFER_CUDA_MLA_ASYNC", "1", 1);
        RUN(run_mla_tc("v2l-tc16a", "configs/deepseek-v2-lite.json", 0, KV_BF16, 16, kv_big, NM(kv_big), 300));
        RUN(run_mla_tc("h3-tc16a", "configs/deepseek-v2-lite.json", 3, KV_BF16, 5, kv_small, NM(kv_small), 150));
        unsetenv("DSINFER_CUDA_MLA_ASYNC");
        unsetenv("DSINFER_CUDA_MLA_TC2");
        /* v2 with part (18) or none (0) of Q's fragments in registers (DSINFER_CUDA_MLA_QREG; default all) */
        setenv("DSINFER_CUDA_MLA_QREG", "18", 1);
        RUN(run_mla_tc("v2l-tc16q18", "configs/deepseek-v2-lite.json", 0, KV_BF16, 16, kv_big, NM(kv_big), 300));
        setenv("DSINFER_CUDA_MLA_QREG", "0", 1);
        RUN(run_mla_tc("h3-tc16q0", "configs/deepseek-v2-lite.json", 3, KV_BF16, 5, kv_small, NM(kv_small), 150));
        unsetenv("DSINFER_CUDA_MLA_QREG");
        /* the FP8 cache through v2 (DSINFER_CUDA_MLA_TC2_FP8=1: rows decoded into a BF16 tile; the default, 2,
         * runs the cases above through mla_decode_f8h_kernel): 16 heads, 3 and 20 (partial groups), 128 (V3) */
        setenv("DSINFER_CUDA_MLA_TC2_FP8", "1", 1);
        RUN(run_mla_tc("v2l-tc8v2", "configs/deepseek-v2-lite.json", 0, KV_FP8, 16, kv_big, NM(kv_big), 300));
        RUN(run_mla_tc("h20-tc8v2", "configs/deepseek-v2-lite.json", 20, KV_FP8, 5, kv_small, NM(kv_small), 150));
        RUN(run_mla_tc("h3-tc8v2", "configs/deepseek-v2-lite.json", 3, KV_FP8, 7, kv_small, NM(kv_small), 150));
        RUN(run_mla_tc("v3-tc8v2", "configs/deepseek-v3.json", 0, KV_FP8, 16, kv_big, NM(kv_big), 300));
        unsetenv("DSINFER_CUDA_MLA_TC2_FP8");
        /* v2 at 128 heads (8 blocks of 16 heads per entry and split; the wgmma kernel off) and 20 (a partial head
         * group) */
        setenv("DSINFER_CUDA_MLA_WG", "0", 1);
        RUN(run_mla_tc("v3-tc16", "configs/deepseek-v3.json", 0, KV_BF16, 16, kv_big, NM(kv_big), 300));
        unsetenv("DSINFER_CUDA_MLA_WG");
        RUN(run_mla_tc("h20-tc16", "configs/deepseek-v2-lite.json", 20, KV_BF16, 7, kv_small, NM(kv_small), 150));
        /* 64 heads a block on wgmma (DSINFER_CUDA_MLA_WG, default on; set here in case the environment has it off): V3's 128 heads (two head groups; 1 entry: five
         * splits of one tile, 128 entries: one split of five tiles through both ring slots), 64 heads on 7-row pages */
        setenv("DSINFER_CUDA_MLA_WG", "1", 1);
        setenv("DSINFER_CUDA_MLA_WG_TMA", "0", 1);   /* the rows by cp.async (page 7 takes it anyway) */
        RUN(run_mla_tc("v3-tc16wg", "configs/deepseek-v3.json", 0, KV_BF16, 16, kv_big, NM(kv_big), 300));
        RUN(run_mla_tc("h64-tc16wg", "configs/deepseek-v2-lite.json", 64, KV_BF16, 7, kv_small, NM(kv_small), 150));
        /* its rows by TMA (DSINFER_CUDA_MLA_WG_TMA, default): pages of 16 (four boxes a tile), 8, 64 (one box) and 128 (a
         * tile inside a page); partial last tiles over NaN-poisoned pages */
        setenv("DSINFER_CUDA_MLA_WG_TMA", "1", 1);
        RUN(run_mla_tc("v3-tc16wgt", "configs/deepseek-v3.json", 0, KV_BF16, 16, kv_big, NM(kv_big), 300));
        RUN(run_mla_tc("h64-wgt8", "configs/deepseek-v2-lite.json", 64, KV_BF16, 8, kv_small, NM(kv_small), 150));
        RUN(run_mla_tc("h64-wgt64", "configs/deepseek-v2-lite.json", 64, KV_BF16, 64, kv_small, NM(kv_small), 150));
        RUN(run_mla_tc("h128-wgt128", "configs/deepseek-v2-lite.json", 128, KV_BF16, 128, kv_small, NM(kv_small), 150));
        /* v2, FlashMLA's schedule (DSINFER_CUDA_MLA_WG=2: a warpgroup's own tiles, the other's P from shared memory;
         * TMA page sizes only): the same cases; 128 entries give splits of 1 .. 5 tiles (both warpgroups' last-tile
         * forms), 1 and 4 entries splits of one tile (warpgroup 1 only adds warpgroup 0's) */
        setenv("DSINFER_CUDA_MLA_WG", "2", 1);
        RUN(run_mla_tc("v3-wg2", "configs/deepseek-v3.json", 0, KV_BF16, 16, kv_big, NM(kv_big), 300));
        RUN(run_mla_tc("h64-wg2p8", "configs/deepseek-v2-lite.json", 64, KV_BF16, 8, kv_small, NM(kv_small), 150));
        RUN(run_mla_tc("h64-wg2p64", "configs/deepseek-v2-lite.json", 64, KV_BF16, 64, kv_small, NM(kv_small), 150));
        RUN(run_mla_tc("h128-wg2p128", "configs/deepseek-v2-lite.json", 128, KV_BF16, 128, kv_small, NM(kv_small), 150));
        setenv("DSINFER_CUDA_MLA_WG", "1", 1);
        unsetenv("DSINFER_CUDA_MLA_WG_TMA");
        unsetenv("DSINFER_CUDA_MLA_WG");
        /* the absorbed q's v3 (DSINFER_CUDA_ABSORB2=2): V2-Lite's BF16 kv_b and V3's FP8 (block-scaled) one; to 2 tokens
         * (DSINFER_CUDA_ABSORB3_MAX_T=2: 3 tokens take v2), then to 8 (the default: 3 is a pair and a single) */
        setenv("DSINFER_CUDA_ABSORB2", "2", 1);
        setenv("DSINFER_CUDA_ABSORB3_MAX_T", "2", 1);
        const int abs_m[] = {1, 2, 3};
        RUN(run_mla_tc("v2l-abs3", "configs/deepseek-v2-lite.json", 0, KV_BF16, 16, abs_m, NM(abs_m), 300));
        RUN(run_mla_tc("v3-abs3", "configs/deepseek-v3.json", 0, KV_BF16, 16, abs_m, NM(abs_m), 300));
        setenv("DSINFER_CUDA_ABSORB3_MAX_T", "8", 1);
        const int abs_m8[] = {3, 8};
        RUN(run_mla_tc("v2l-abs3t8", "configs/deepseek-v2-lite.json", 0, KV_BF16, 16, abs_m8, NM(abs_m8), 300));
        RUN(run_mla_tc("v3-abs3t8", "configs/deepseek-v3.json", 0, KV_BF16, 16, abs_m8, NM(abs_m8), 300));
        unsetenv("DSINFER_CUDA_ABSORB3_MAX_T");
        unsetenv("DSINFER_CUDA_ABSORB2");
        /* the first prefill attention kernel (DSINFER_CUDA_FA2=0), still selectable */
        setenv("DSINFER_CUDA_FA2", "0", 1);
        RUN(run_mla_tc("h3-tcfa1", "configs/deepseek-v2-lite.json", 3, KV_BF16, 5, kv_small, NM(kv_small), 150));
        unsetenv("DSINFER_CUDA_FA2");
        setup s_off;   /* the flags are process-wide, read when a backend is created: one more turns them back */
        if (load_setup(&s_off, "flags-off", "tests/fixtures/tiny-v3-fp8/config.json", 3, 16)) free_setup(&s_off);
        const int long_m[] = {600};
        RUN(run_mla_tc("v2l-tcL", "configs/deepseek-v2-lite.json", 0, KV_BF16, 16, long_m, NM(long_m), 300));
        RUN(run_mla_tc("v3-tc", "configs/deepseek-v3.json", 0, KV_F32, 16, kv_big, NM(kv_big), 300));
        RUN(run_mla_tc("v3-tc8", "configs/deepseek-v3.json", 0, KV_FP8, 16, kv_big, NM(kv_big), 300));
        RUN(run_kv("v2l-kv8", "configs/deepseek-v2-lite.json", 0, 0, 16, 0, KV_FP8, kv_big, NM(kv_big), 300));
        RUN(run_kv("v3-kv8", "configs/deepseek-v3.json", 0, 0, 16, 0, KV_FP8, kv_big, NM(kv_big), 200));
        RUN(run_kv("v2l-kv16", "configs/deepseek-v2-lite.json", 0, 0, 16, 0, KV_BF16, kv_big, NM(kv_big), 300));
        RUN(run_lite());
        RUN(run_v3());
    }
    /* a filter that names no test (a typo, or a binary older than the test) must not pass as if it had run one */
    if (only) CHECKF(test_checks > checks0, "DSINFER_OPS_ONLY=%s ran no check: no such test in this build", only);
    return test_result("test_cuda_ops");
}
#endif
