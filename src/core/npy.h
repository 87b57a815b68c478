/* NumPy .npy files (format version 1.0), float32 little-endian, C order. */
#ifndef DS_CORE_NPY_H
#define DS_CORE_NPY_H
#include "dsinfer.h"
ds_status ds_npy_write_f32(const char *path, const float *data, int rows, int cols, char *err);
#endif
