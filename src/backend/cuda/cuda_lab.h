/* What the labs of `dsinfer bench --ceilings` outside cuda_bench.cu share with it. */
#ifndef DS_CUDA_LAB_H
#define DS_CUDA_LAB_H

#include <stddef.h>

/* the L2 emptied before each timed run (a buffer larger than any Hopper L2, read) */
#define CU_LAB_FLUSH_BYTES ((size_t)256 << 20)

/* Median milliseconds of reps runs of fn(ctx) (after one warm-up run), each from a cold L2 (flush: flush_bytes read
 * first) and without the host's issue time (the GPU spins while the host issues fn's work): cuda_bench.cu's timing. */
double cu_lab_time_cold(void (*fn)(void *), void *ctx, int reps, void *flush, size_t flush_bytes);

#endif
