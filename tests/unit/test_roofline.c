/* core/roofline.c: an FP8 GEMM's roofline is its bytes over the bandwidth where it moves more than it computes (a
 * decode-sized M) and its FLOPs over the matrix rate where it computes more (a prefill-sized M), the bytes counting
 * the weight's and the activations' codes and block scales and the fp32 output; bad sizes and ceilings give -1. */
#include <math.h>
#include <stdio.h>

#include "core/roofline.h"
#include "testutil.h"

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b); }

int main(void) {
    /* M 64, N 7168, K 2048 (V3's expert down at decode): 14680064 + 4 x 56 x 16 bytes of W, 131072 + 4 x 64 x 16 of x,
     * 4 x 64 x 7168 of out = 16653824 bytes: 4.163456 us at 4000 GB/s; 1.879e9 FLOPs: 1.342 us at 1400 TFLOP/s */
    double t = ds_fp8_gemm_roof_us(64, 7168, 2048, 4000, 1400);
    CHECKF(near(t, 16653824.0 / 4000e9 * 1e6), "M 64: %.6f us", t);
    /* M 4096, N = K = 7168: 2 x 4096 x 7168^2 FLOPs = 420.9 GFLOP, 300.6 us at 1400 TFLOP/s; its ~199 MB take ~50 us */
    t = ds_fp8_gemm_roof_us(4096, 7168, 7168, 4000, 1400);
    CHECKF(near(t, 2.0 * 4096 * 7168.0 * 7168 / 1400e12 * 1e6), "M 4096: %.6f us", t);
    /* a partial block counts whole: N 130, K 129 -> 2 x 2 scale blocks of W, 2 a row of x */
    t = ds_fp8_gemm_roof_us(1, 130, 129, 1, 1e9);
    CHECKF(near(t, (130.0 * 129 + 16 + 129 + 8 + 4 * 130) / 1e9 * 1e6), "partial blocks: %.6f us", t);
    CHECK(ds_fp8_gemm_roof_us(0, 1, 1, 1, 1) == -1.0);
    CHECK(ds_fp8_gemm_roof_us(1, -1, 1, 1, 1) == -1.0);
    CHECK(ds_fp8_gemm_roof_us(1, 1, 0, 1, 1) == -1.0);
    CHECK(ds_fp8_gemm_roof_us(1, 1, 1, 0, 1) == -1.0);
    CHECK(ds_fp8_gemm_roof_us(1, 1, 1, 1, NAN) == -1.0);
    return test_result("test_roofline");
}
