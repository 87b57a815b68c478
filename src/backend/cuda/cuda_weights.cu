/* Weights on the device: every tensor of the model copied once from the mmapped checkpoint into one
 * device allocation, in its stored dtype (FP8 with its fp32 block scales), with a progress line on a
 * terminal; or, for dummy weights (no checkpoint), generated on the device from a counter-based hash,
 * so the same config always gives the same model. Before anything is allocated the total is checked
 * against the GPU's free memory and a clear error says how much is needed and free. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/cuda/cuda.h"

#define WEIGHT_ALIGN 256
#define UPLOAD_CHUNK ((size_t)256 << 20)
#define DUMMY_SEED 0x5eed5eedull
#define DUMMY_STD 0.02f           /* uniform weights of this standard deviation */
#define DUMMY_FP8_RANGE 240.0f    /* FP8 codes drawn uniformly in +-range, scales bring them to DUMMY_STD */
#define GIB (1024.0 * 1024.0 * 1024.0)

/* ---- the list of tensors --------------------------------------------------------------------------- */
/* slot[i]: w[i]'s place among every tensor the model could have (absent ones, and those a parallel rank
 * forgot, counted too): dummy weights are generated from it, so every rank's copy of a tensor holds the
 * same values as the one-GPU model's */
typedef struct {
    ds_weight **w;
    int *slot;
    int n, cap, next_slot;
} wlist;

static void wl_add(wlist *l, ds_weight *w) {
    int slot = l->next_slot++;
    if (!w->data) return;   /* absent optional tensor, or one this rank does not hold */
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->w = (ds_weight **)ds_xrealloc(l->w, sizeof(ds_weight *) * (size_t)l->cap);
        l->slot = (int *)ds_xrealloc(l->slot, sizeof(int) * (size_t)l->cap);
    }
    l->slot[l->n] = slot;
    l->w[l->n++] = w;
}

static void wl_layer(wlist *l, ds_layer_weights *L, int n_experts) {
    ds_weight *fixed[] = {&L->input_norm, &L->post_norm, &L->q_a, &L->q_a_norm, &L->q_b, &L->q, &L->kv_a,
                          &L->kv_a_norm, &L->kv_b, &L->o, &L->gate, &L->up, &L->down, &L->router,
                          &L->router_bias, &L->sh_gate, &L->sh_up, &L->sh_down};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) wl_add(l, fixed[i]);
    if (L->is_moe)   /* every expert counts a slot, held or not */
        for (int e = 0; e < n_experts; e++) {
            wl_add(l, &L->exp_gate[e]);
            wl_add(l, &L->exp_up[e]);
            wl_add(l, &L->exp_down[e]);
        }
}

/* Every distinct tensor; lm_head is left out when tied to the embedding (it is re-pointed after). */
static wlist collect(const ds_config *c, ds_model_weights *w) {
    wlist l = {NULL, 0, 0};
    wl_add(&l, &w->embed);
    wl_add(&l, &w->final_norm);
    if (!c->tie_word_embeddings) wl_add(&l, &w->lm_head);
    for (int i = 0; i < w->n_layers; i++) wl_layer(&l, &w->layers[i], c->n_routed_experts);
    if (w->mtp.present) {
        ds_weight *m[] = {&w->mtp.enorm, &w->mtp.hnorm, &w->mtp.eh_proj, &w->mtp.head_norm, &w->mtp.head};
        for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) wl_add(&l, m[i]);
        wl_layer(&l, &w->mtp.layer, c->n_routed_experts);
    }
    return l;
}

static size_t align_up(size_t n) { return (n + WEIGHT_ALIGN - 1) / WEIGHT_ALIGN * WEIGHT_ALIGN; }
/* NVFP4 (spec 13): data U8 [rows, cols/2], its "scale" bytes are the F8_E4M3 block scales [rows, cols/16]
 * (ds_weight.block_scale); the global scale travels in the ds_weight itself. */
static size_t data_bytes(const ds_weight *w) {
    if (w->dtype == DS_DTYPE_NVFP4) return (size_t)w->rows * (size_t)(w->cols / 2);
    return (size_t)w->rows * (size_t)w->cols * ds_dtype_size(w->dtype);
}
/* FP8 scales on the device: [ceil(rows / 128), ceil(cols / 128)], compact even when the host view is a
 * column slice whose scale rows are longer (scale_cols of the whole weight) */
static size_t scale_bytes(const ds_weight *w) {
    if (w->dtype == DS_DTYPE_NVFP4) return (size_t)w->rows * (size_t)(w->cols / 16);
    return w->scale ? (size_t)((w->rows + 127) / 128) * (size_t)((w->cols + 127) / 128) * sizeof(float) : 0;
}

/* ---- progress on a terminal ----------------------------------------------------------------------- */
typedef struct {
    const char *what;
    size_t total, done;
    double t0, last;
    int tty;
} progress;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void progress_show(progress *p, int final) {
    double t = now_s();
    if (!p->tty || (!final && t - p->last < 0.25)) return;
    p->last = t;
    double el = t - p->t0, rate = el > 0 ? (double)p->done / el : 0;
    double eta = rate > 0 ? (double)(p->total - p->done) / rate : 0;
    fprintf(stderr, "\r%s: %.2f / %.2f GiB  %.2f GiB/s  ETA %.0f s   ", p->what, (double)p->done / GIB,
            (double)p->total / GIB, rate / GIB, eta);
    if (final) fprintf(stderr, "\n");
}

/* ---- dummy weights ---------------------------------------------------------------------------------- */
__device__ __forceinline__ float hash_unit(uint64_t key, uint64_t i) {   /* uniform in [-1, 1) */
    uint64_t z = key + (i + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 8388608.0f) - 1.0f;
}

/* Where element i of an array [n / cols, cols] sits in the whole array [., full_cols] it was cut from at
 * (r0, c0): the hash takes that index, so a tensor-parallel slice holds the one-GPU model's values. */
typedef struct {
    size_t cols, full_cols, r0, c0;
} dummy_slice;

/* kind 0: a 1-D norm weight (1 + 0.1u); 1: a 1-D fp32 bias (0.01u); 2: a linear (std DUMMY_STD);
 * 3: FP8 block scales; 4: NVFP4 block scales (e4m3 near 1); 5: NVFP4 codes (uniform random bytes, two
 * E2M1 codes each; dtype U8). */
__global__ void dummy_kernel(void *dst, int dtype, size_t n, uint64_t key, int kind, dummy_slice sl) {
    const float amp = DUMMY_STD * 1.7320508f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t whole = (sl.r0 + i / sl.cols) * sl.full_cols + sl.c0 + i % sl.cols;
        float u = hash_unit(key, whole), v;
        if (kind == 0) v = 1.0f + 0.1f * u;
        else if (kind == 1) v = 0.01f * u;
        else if (kind == 3) v = amp / DUMMY_FP8_RANGE * (1.0f + 0.25f * u);
        else if (kind == 4) v = 1.0f + 0.25f * u;
        else if (kind == 5) {
            ((uint8_t *)dst)[i] = (uint8_t)((u + 1.0f) * 128.0f);
            continue;
        }
        else v = dtype == DS_DTYPE_F8_E4M3 ? u * DUMMY_FP8_RANGE : amp * u;
        switch (dtype) {
        case DS_DTYPE_F32: ((float *)dst)[i] = v; break;
        case DS_DTYPE_BF16: ((__nv_bfloat16 *)dst)[i] = __float2bfloat16(v); break;
        case DS_DTYPE_F16: ((__half *)dst)[i] = __float2half(v); break;
        case DS_DTYPE_F8_E4M3: ((__nv_fp8_storage_t *)dst)[i] = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3); break;
        default: break;
        }
    }
}

/* n values of an array with cols columns; the weight x says where its slice sits in the whole tensor;
 * div: how many of the weight's columns (and, for FP8 block scales, rows) one array entry covers (1 for
 * the values, 128 for FP8 block scales, 16 for NVFP4 block scales; NVFP4 codes: 2 columns a byte). */
static void dummy_fill(void *dst, int dtype, size_t n, size_t cols, const ds_weight *x, int div, int row_div,
                       uint64_t key, int kind) {
    dummy_slice sl = {cols ? cols : 1, cols ? cols : 1, 0, 0};
    if (x->dummy_full_cols) {
        sl.full_cols = ((size_t)x->dummy_full_cols + div - 1) / div;
        sl.r0 = (size_t)x->dummy_r0 / row_div;
        sl.c0 = (size_t)x->dummy_c0 / div;
    }
    size_t blocks = cu_blocks(n, 256);
    dummy_kernel<<<(unsigned)(blocks < 16384 ? blocks : 16384), 256, 0, cu_stream>>>(dst, dtype, n, key, kind, sl);
    CUDA_LAUNCH_CHECK();
}

/* ---- prepare -------------------------------------------------------------------------------------- */
static void upload(void *dst, const void *src, size_t n, progress *p) {
    for (size_t off = 0; off < n; off += UPLOAD_CHUNK) {
        size_t k = n - off < UPLOAD_CHUNK ? n - off : UPLOAD_CHUNK;
        CUDA_CHECK(cudaMemcpy((char *)dst + off, (const char *)src + off, k, cudaMemcpyHostToDevice));
        p->done += k;
        progress_show(p, 0);
    }
}

/* rows of width bytes, pitch bytes apart on the host (a column slice, tensor parallelism), packed on the device */
static void upload_rows(void *dst, const void *src, size_t width, size_t pitch, size_t rows, progress *p) {
    if (pitch == width) {
        upload(dst, src, width * rows, p);
        return;
    }
    CUDA_CHECK(cudaMemcpy2D(dst, width, src, pitch, width, rows, cudaMemcpyHostToDevice));
    p->done += width * rows;
    progress_show(p, 0);
}

static ds_status check_fits(size_t need, char *err) {
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    const size_t reserve = (size_t)1 << 30;   /* KV cache, activations and workspaces come after */
    if (need + reserve > free_b) {
        cudaDeviceProp prop;
        CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
        return ds_seterr(err, DS_ERR_NOMEM,
                         "the model does not fit in GPU memory: its weights need %.2f GiB (+%.1f GiB for the KV "
                         "cache and activations), %s has %.2f GiB free of %.2f GiB",
                         (double)need / GIB, (double)reserve / GIB, prop.name, (double)free_b / GIB,
                         (double)total_b / GIB);
    }
    return DS_OK;
}

/* The absorbed attention's W_UK / W_UV in BF16 (cuda_attn.cu kvb_bf16): for an FP8 kv_b, a copy per layer made here,
 * once (opt.kvb_bf16), instead of at every step; keyed by the prepared weight's address, which does not change while
 * the backend lives. A copy that does not fit is not made (those layers keep the per-step conversion). */
ds_status ds_cuda_kvb_copy(ds_backend *be, const ds_weight *kv, char *err) {
    ds_cuda_backend *cb = cu_of(be);
    if (!kv->data || kv->dtype != DS_DTYPE_F8_E4M3 || !kv->scale)
        return ds_seterr(err, DS_ERR_ARG, "kv_b's BF16 copy: the weight is not FP8 with block scales");
    void *p = NULL;
    if (cudaMalloc(&p, (size_t)kv->rows * kv->cols * 2) != cudaSuccess) {
        cudaGetLastError();
        return ds_seterr(err, DS_ERR_NOMEM, "kv_b's BF16 copy: %zu bytes of GPU memory not available", (size_t)kv->rows * kv->cols * 2);
    }
    cu_own(cb, p);
    cu_weight_bf16((__nv_bfloat16 *)p, cu_view(kv), 0, kv->rows);
    cu_kvb16 e = {kv->data, (const __nv_bfloat16 *)p};
    for (int i = 0; i < cb->n_kvb16; i++)
        if (cb->kvb16[i].key == kv->data) {   /* made again for the same address: the new copy replaces it */
            cb->kvb16[i] = e;
            return DS_OK;
        }
    cb->kvb16 = (cu_kvb16 *)ds_xrealloc(cb->kvb16, sizeof(*cb->kvb16) * (size_t)(cb->n_kvb16 + 1));
    cb->kvb16[cb->n_kvb16++] = e;
    return DS_OK;
}

static void kvb_copies(ds_cuda_backend *cb, const ds_model_weights *w) {
    char err[DS_ERRLEN];
    for (int i = 0; i < w->n_layers; i++) {
        const ds_weight *kv = &w->layers[i].kv_b;
        if (!kv->data || kv->dtype != DS_DTYPE_F8_E4M3 || !kv->scale) continue;
        if (ds_cuda_kvb_copy(&cb->base, kv, err)) {
            fprintf(stderr, "dsinfer: %s (layer %d on convert at every step)\n", err, i);
            return;
        }
    }
}

ds_status cu_prepare_weights(ds_backend *be, ds_model_weights *w, char *err) {
    ds_cuda_backend *cb = cu_of(be);
    const ds_config *c = be->cfg;
    wlist l = collect(c, w);
    size_t need = 0;
    for (int i = 0; i < l.n; i++) need += align_up(data_bytes(l.w[i])) + align_up(scale_bytes(l.w[i]));
    ds_status st = check_fits(need, err);
    if (st) { free(l.w); free(l.slot); return st; }
    if (cudaMalloc(&cb->weight_pool, need ? need : WEIGHT_ALIGN) != cudaSuccess) {
        cudaGetLastError();
        free(l.w);
        free(l.slot);
        return ds_seterr(err, DS_ERR_NOMEM, "cannot allocate %.2f GiB of GPU memory for the weights", (double)need / GIB);
    }
    cb->weight_bytes = need;
    int dummy = l.n && l.w[0]->data == DS_WEIGHT_DUMMY;
    progress p = {dummy ? "generating dummy weights on the GPU" : "uploading weights to the GPU", need, 0, now_s(), 0,
                  isatty(2)};
    char *pool = (char *)cb->weight_pool;
    for (int i = 0; i < l.n; i++) {
        ds_weight *x = l.w[i];
        size_t db = data_bytes(x), sb = scale_bytes(x);
        char *d = pool, *s = pool + align_up(db);
        pool = s + align_up(sb);
        if (x->data == DS_WEIGHT_DUMMY) {
            int kind = x->rows == 1 ? (x->dtype == DS_DTYPE_F32 ? 1 : 0) : 2;
            uint64_t kd = DUMMY_SEED * (uint64_t)(2 * l.slot[i] + 1), ks = DUMMY_SEED * (uint64_t)(2 * l.slot[i] + 2);
            size_t cols = (size_t)x->cols;
            if (x->dtype == DS_DTYPE_NVFP4) {
                dummy_fill(d, DS_DTYPE_U8, db, cols / 2, x, 2, 1, kd, 5);
                dummy_fill(s, DS_DTYPE_F8_E4M3, sb, cols / 16, x, 16, 1, ks, 4);
            } else {
                dummy_fill(d, x->dtype, (size_t)x->rows * cols, cols, x, 1, 1, kd, kind);
                if (sb) dummy_fill(s, DS_DTYPE_F32, sb / sizeof(float), (cols + 127) / 128, x, 128, 128, ks, 3);
            }
            p.done += db + sb;
            progress_show(&p, 0);
        } else {
            /* a view with ld != cols (a tensor-parallel column slice) is packed row by row */
            size_t ld = (size_t)(x->ld ? x->ld : x->cols), rows = (size_t)x->rows, cols = (size_t)x->cols;
            if (x->dtype == DS_DTYPE_NVFP4) {
                upload_rows(d, x->data, cols / 2, ld / 2, rows, &p);
                upload_rows(s, x->block_scale, cols / 16, ld / 16, rows, &p);
            } else {
                size_t eb = ds_dtype_size(x->dtype);
                upload_rows(d, x->data, cols * eb, ld * eb, rows, &p);
                if (sb) {
                    size_t sr = (rows + 127) / 128, sc = (cols + 127) / 128;
                    upload_rows(s, x->scale, sc * sizeof(float), (size_t)x->scale_cols * sizeof(float), sr, &p);
                }
            }
            x->ld = 0;
            if (x->scale) x->scale_cols = (x->cols + 127) / 128;
        }
        x->data = d;
        if (x->dtype == DS_DTYPE_NVFP4) x->block_scale = (const uint8_t *)s;
        else x->scale = sb ? (const float *)s : NULL;
    }
    if (c->tie_word_embeddings) w->lm_head = w->embed;
    if (cb->opt.kvb_bf16 && cb->opt.tc && cb->opt.absorb_tc) kvb_copies(cb, w);
    CUDA_CHECK(cudaDeviceSynchronize());
    progress_show(&p, 1);
    free(l.w);
    free(l.slot);
    return DS_OK;
}

ds_status ds_cuda_weight_upload(ds_backend *be, const ds_weight *host, ds_weight *dev, char *err) {
    ds_cuda_backend *cb = cu_of(be);
    size_t db = data_bytes(host), sb = scale_bytes(host);
    char *p = NULL;
    if (cudaMalloc(&p, align_up(db) + align_up(sb) + WEIGHT_ALIGN) != cudaSuccess) {
        cudaGetLastError();
        return ds_seterr(err, DS_ERR_NOMEM, "cannot allocate %zu bytes for weight %s", db + sb,
                         host->name ? host->name : "?");
    }
    cu_own(cb, p);
    *dev = *host;
    CUDA_CHECK(cudaMemcpy(p, host->data, db, cudaMemcpyHostToDevice));
    dev->data = p;
    if (sb && host->dtype == DS_DTYPE_NVFP4) {
        CUDA_CHECK(cudaMemcpy(p + align_up(db), host->block_scale, sb, cudaMemcpyHostToDevice));
        dev->block_scale = (const uint8_t *)(p + align_up(db));
    } else if (sb) {
        CUDA_CHECK(cudaMemcpy(p + align_up(db), host->scale, sb, cudaMemcpyHostToDevice));
        dev->scale = (const float *)(p + align_up(db));
    }
    return DS_OK;
}
