/* Storage dtypes of checkpoint tensors and their conversion to float32. */
#ifndef DS_CORE_DTYPE_H
#define DS_CORE_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum {
    DS_DTYPE_F32 = 0,
    DS_DTYPE_F16,
    DS_DTYPE_BF16,
    DS_DTYPE_F8_E4M3,
    DS_DTYPE_I32,
    DS_DTYPE_I64,
    DS_DTYPE_U8,
    DS_DTYPE_NVFP4,   /* not a safetensors dtype: a U8 [rows, cols/2] weight with its NVFP4 scales */
    DS_DTYPE_COUNT
} ds_dtype;

size_t ds_dtype_size(ds_dtype t);
const char *ds_dtype_name(ds_dtype t);
/* Parses a safetensors dtype string ("BF16", "F8_E4M3", ...); returns -1 when unknown. */
int ds_dtype_parse(const char *s);

static inline float ds_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Round-to-nearest-even; NaN stays NaN. */
static inline uint16_t ds_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float ds_f16_to_f32(uint16_t h);

/* float8_e4m3fn: bias 7, no infinities, S.1111.111 = NaN, subnormals 2^-6 * m/8. */
extern float ds_fp8_e4m3_table[256];
void ds_dtype_init(void);   /* fills the lookup tables; idempotent, thread-safe */
static inline float ds_fp8_e4m3_to_f32(uint8_t v) { return ds_fp8_e4m3_table[v]; }
float ds_fp8_e4m3_decode(uint8_t v);  /* by formula; the table is built from it */

/* float32 -> float8_e4m3fn, round to nearest even, saturating to +-448 (NaN stays NaN). */
uint8_t ds_f32_to_fp8_e4m3(float x);

/* NVFP4 element: E2M1 code (bit 3 sign; magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6). */
extern const float ds_e2m1_values[16];
/* Nearest E2M1 code of x (clamped to +-6; ties as in the reference quantizers: spec 13.4). */
uint8_t ds_f32_to_e2m1(float x);

/* Converts n elements of dtype t at src into float32 at dst. */
void ds_convert_to_f32(ds_dtype t, const void *src, float *dst, size_t n);

#endif
