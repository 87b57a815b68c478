/* The kernel lab's programs' CUDA return-code check: the call, its file and line and the error's name, then exit 1. */
#ifndef DS_LAB_CHECK_H
#define DS_LAB_CHECK_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                                              \
    do {                                                                                                   \
        cudaError_t e_ = (x);                                                                              \
        if (e_ != cudaSuccess) {                                                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));            \
            exit(1);                                                                                       \
        }                                                                                                  \
    } while (0)

#endif
