/* The CUDA kernels' element conversions (FP8 KV entries, e4m3 / bf16 encoders, NVFP4 decoder) against
 * the CPU's, bit for bit, on the host, and the wgmma GEMMs' host-side planning (K splits, the multicast pairs, the grouped
 * MoE's tile table): their logic is checked in CI without a GPU (cuda_selftest.cu);
 * the kernels themselves are checked against the CPU ops on the GPU by test_cuda_ops. Skips without a
 * CUDA build. */
#include <stdio.h>

#include "testutil.h"

#ifndef DS_HAVE_CUDA
int main(void) { test_skip("built without CUDA (nvcc not found at build time)"); }
#else
#include "backend/cuda/cuda_api.h"

int main(void) {
    char msg[256];
    long bad = ds_cuda_host_selftest(msg, sizeof msg);
    printf("test_cuda_host: %ld mismatches (%s)\n", bad, msg);
    CHECKF(bad == 0, "%ld mismatches, first: %s", bad, msg);
    return test_result("test_cuda_host");
}
#endif
