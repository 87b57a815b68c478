/* The CUDA backend seen from C: how the engine creates it and the few extra entry points the GPU tests
 * use to drive single ops (uploading host data and weights, the router kernel, sampling). Everything
 * here exists only in builds with DS_HAVE_CUDA (nvcc found); callers guard with #ifdef DS_HAVE_CUDA. */
#ifndef DS_BACKEND_CUDA_API_H
#define DS_BACKEND_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 if a CUDA device of compute capability 9.x can be used; else 0 with the reason in `why`. */
int ds_cuda_available(char *why, size_t why_len);
/* Host-side check of the element conversions the kernels share with the CPU (cuda_selftest.cu); needs
 * no GPU. Returns the number of mismatches, the first described in msg. */
long ds_cuda_host_selftest(char *msg, size_t len);

/* Creates the CUDA backend on device 0 (cuBLAS handle, constants). NULL with a message in err. */
ds_backend *ds_backend_cuda_new(const ds_config *cfg, char *err);

/* Copies n floats from host memory into backend (device) memory. */
void ds_cuda_from_host(ds_backend *be, float *dst, const float *src, size_t n);
/* Copies n bytes host -> device / device -> host (any type). */
void ds_cuda_upload_bytes(ds_backend *be, void *dst, const void *src, size_t n);
void ds_cuda_download_bytes(ds_backend *be, void *dst, const void *src, size_t n);
/* Device memory of n bytes owned by the backend (freed with release()). */
void *ds_cuda_alloc_bytes(ds_backend *be, size_t n);

/* A device copy of one host weight view (data and scale), owned by the backend until destroy. */
ds_status ds_cuda_weight_upload(ds_backend *be, const ds_weight *host, ds_weight *dev, char *err);

/* The fused router kernel alone: logits [M, E] (device), bias [E] (device fp32, may be NULL) ->
 * ids [M, K] and weights [M, K] (device), same rules as ds_route_token. */
void ds_cuda_route(ds_backend *be, const float *logits, const float *bias, int32_t *ids, float *weights, int M);

/* Sampling on the GPU from rows of logits in device memory (logits [n_rows, vocab], not modified):
 * temperature 0 = greedy (first index of the maximum); else softmax(logits / temperature) restricted to
 * the top_k largest (0 = all), then to the smallest prefix (sorted by logit, ties by index) whose mass
 * reaches top_p, drawn with u = the next splitmix64 draw of *rng as in ds_sampler_sample (no penalties,
 * no min_p). One draw per row, in row order; *rng advances. out[n_rows] on the host. */
void ds_cuda_sample(ds_backend *be, const float *logits, int n_rows, int vocab, float temperature, int top_k,
                    float top_p, uint64_t *rng, int32_t *out);

/* The ceilings of `dsinfer bench`: device-to-device copy bandwidth (GB/s, bytes read + written) and the
 * cuBLAS BF16 GEMM rate (TFLOP/s, 8192^3, fp32 accumulation, random data). */
ds_status ds_cuda_ceilings(double *copy_gbs, double *bf16_tflops, char *err);
/* The absorbed MLA decode op alone (cfg's heads and widths; fp32 latent cache of n_seqs x ctx tokens in
 * shuffled pages; kv_b BF16): median ms and GB/s (cache + kv_b + q/out bytes over time). */
ds_status ds_cuda_bench_mla(const ds_config *cfg, int n_seqs, int ctx, double *ms, double *gbs, char *err);

#ifdef __cplusplus
}
#endif
#endif
