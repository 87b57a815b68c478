/* Rooflines of single operations for `dsinfer bench` (issue 8's op benchmark, `bench --ops`): the time no kernel can beat
 * on the measured ceilings, so that each timing is shown as a fraction of what is possible. */
#ifndef DS_CORE_ROOFLINE_H
#define DS_CORE_ROOFLINE_H

/* One FP8 block-scaled GEMM out[M, N] = x[M, K] W[N, K]^T (the checkpoints' format: W's e4m3 codes with a scale a
 * 128 x 128 block, x's codes with a scale a row and 128 columns, fp32 out): its bytes (W's codes and scales once, x's
 * codes and scales once, out written once) over bw_gbs (GB/s), or its 2 M N K FLOPs over tflops (TFLOP/s), whichever
 * takes longer, in microseconds. -1 when a size or a ceiling is not positive. */
double ds_fp8_gemm_roof_us(int M, int N, int K, double bw_gbs, double tflops);

#endif
