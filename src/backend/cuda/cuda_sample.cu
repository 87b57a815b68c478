/* Sampling on the GPU from rows of logits in device memory, the same rule as ds_sampler_sample without
 * penalties and min_p (src/sample/sampler.c), so the same seed picks the same token:
 *   temperature 0: the first index of the maximum (a block-wide argmax);
 *   else: logits / temperature sorted descending (CUB radix sort, stable: ties keep index order), the
 *   top_k first kept, p_i = exp(l_i - l_0) summed in double, top_p prefix of the normalised p (double
 *   running sum), then the candidate where the running sum first passes u * total, u the next
 *   splitmix64 draw (taken on the host, as the CPU sampler takes it).
 * The sums run in one thread in candidate order to round exactly like the CPU; fine for one row per
 * step, a parallel scan is speed work. */
#include <cub/cub.cuh>
#include <math.h>

#include "backend/cuda/cuda.h"

#define ARGMAX_THREADS 1024

__global__ void argmax_kernel(const float *x, int n, int32_t *out) {
    __shared__ float sv[ARGMAX_THREADS];
    __shared__ int si[ARGMAX_THREADS];
    float bv = -INFINITY;
    int bi = -1;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        if (bi < 0 || x[i] > bv) {   /* NaN never wins, as on the CPU */
            if (bi < 0 && !(x[i] == x[i])) continue;
            bv = x[i];
            bi = i;
        }
    sv[threadIdx.x] = bv;
    si[threadIdx.x] = bi;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            float v = sv[threadIdx.x + s];
            int i = si[threadIdx.x + s];
            int mine = si[threadIdx.x];
            if (i >= 0 && (mine < 0 || v > sv[threadIdx.x] || (v == sv[threadIdx.x] && i < mine))) {
                sv[threadIdx.x] = v;
                si[threadIdx.x] = i;
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) *out = si[0] < 0 ? 0 : si[0];
}

__global__ void scale_iota_kernel(const float *x, int n, float inv_t, float temperature, float *keys, int32_t *idx) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        keys[i] = x[i] / temperature;
        idx[i] = i;
    }
    (void)inv_t;
}

/* One thread: the CPU sampler's filter and draw over the sorted candidates. */
__global__ void draw_kernel(const float *sorted, const int32_t *order, int n, int top_k, float top_p, double u,
                            int32_t *out) {
    if (threadIdx.x || blockIdx.x) return;
    if (top_k > 0 && top_k < n) n = top_k;
    float mx = sorted[0];
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (double)expf(sorted[i] - mx);
    if (top_p < 1.0f) {
        double cum = 0;
        int keep = n;
        for (int i = 0; i < n; i++) {
            cum += (float)(expf(sorted[i] - mx) / sum);
            if (cum >= top_p) { keep = i + 1; break; }
        }
        n = keep;
    }
    double total = 0;
    for (int i = 0; i < n; i++) total += (float)(expf(sorted[i] - mx) / sum);
    double r = u * total, cum = 0;
    for (int i = 0; i < n; i++) {
        cum += (float)(expf(sorted[i] - mx) / sum);
        if (r < cum) { *out = order[i]; return; }
    }
    *out = order[n - 1];
}

static double next_unit(uint64_t *s) {   /* splitmix64, as src/sample/sampler.c */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

void ds_cuda_sample(ds_backend *be, const float *logits, int n_rows, int vocab, float temperature, int top_k,
                    float top_p, uint64_t *rng, int32_t *out) {
    ds_cuda_backend *cb = cu_of(be);
    if (n_rows <= 0 || vocab <= 0) return;
    size_t tmp_bytes = 0;
    CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(NULL, tmp_bytes, (const float *)NULL, (float *)NULL,
                                                         (const int32_t *)NULL, (int32_t *)NULL, vocab));
    /* workspace: out (256 bytes), keys, keys_out [vocab] fp32, idx, idx_out [vocab] int32, CUB temp */
    size_t v = (size_t)vocab, off_tmp = 256 + (4 * v * 4 + 255) / 256 * 256;
    char *ws = (char *)cu_ws_get(&cb->ws_sample, off_tmp + tmp_bytes);
    int32_t *d_out = (int32_t *)ws;
    float *keys = (float *)(ws + 256), *keys_out = keys + v;
    int32_t *idx = (int32_t *)(keys_out + v), *idx_out = idx + v;
    for (int r = 0; r < n_rows; r++) {
        const float *row = logits + (size_t)r * v;
        if (temperature == 0.0f) {
            argmax_kernel<<<1, ARGMAX_THREADS, 0, cu_stream>>>(row, vocab, d_out);
            CUDA_LAUNCH_CHECK();
        } else {
            double u = next_unit(rng);
            scale_iota_kernel<<<cu_blocks(v, 256) < 4096 ? cu_blocks(v, 256) : 4096, 256, 0, cu_stream>>>(row, vocab, 1.0f / temperature,
                                                                                           temperature, keys, idx);
            CUDA_LAUNCH_CHECK();
            CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(ws + off_tmp, tmp_bytes, keys, keys_out, idx, idx_out,
                                                                 vocab));
            draw_kernel<<<1, 1, 0, cu_stream>>>(keys_out, idx_out, vocab, top_k, top_p, u, d_out);
            CUDA_LAUNCH_CHECK();
        }
        CUDA_CHECK(cudaMemcpy(&out[r], d_out, sizeof(int32_t), cudaMemcpyDeviceToHost));
    }
}
