#include "core/npy.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/status.h"

/* Header: magic, version 1.0, u16 header length, then a Python dict padded with spaces and ending in
 * '\n' so that the data starts at a multiple of 64 bytes. */
ds_status ds_npy_write_f32(const char *path, const float *data, int rows, int cols, char *err) {
    char dict[128];
    int n = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", rows, cols);
    int total = 10 + n + 1;
    int pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f) return ds_seterr(err, DS_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    unsigned short hlen = (unsigned short)(n + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hlen & 0xff, f);
    fputc(hlen >> 8, f);
    fwrite(dict, 1, (size_t)n, f);
    for (int i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    size_t cnt = (size_t)rows * (size_t)cols;
    size_t wrote = fwrite(data, sizeof(float), cnt, f);
    if (fclose(f) != 0 || wrote != cnt) return ds_seterr(err, DS_ERR_IO, "%s: write failed", path);
    return DS_OK;
}
