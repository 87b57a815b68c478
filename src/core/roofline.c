/* core/roofline.h */
#include "core/roofline.h"

double ds_fp8_gemm_roof_us(int M, int N, int K, double bw_gbs, double tflops) {
    if (M <= 0 || N <= 0 || K <= 0 || !(bw_gbs > 0) || !(tflops > 0)) return -1.0;
    double m = M, n = N, k = K, kb = (K + 127) / 128, nb = (N + 127) / 128;
    double bytes = n * k + 4.0 * nb * kb   /* W: codes, block scales */
                   + m * k + 4.0 * m * kb  /* x: codes, row-block scales */
                   + 4.0 * m * n;          /* out: fp32 */
    double t_mem = bytes / (bw_gbs * 1e9), t_fl = 2.0 * m * n * k / (tflops * 1e12);
    return 1e6 * (t_mem > t_fl ? t_mem : t_fl);
}
