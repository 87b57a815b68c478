#include "core/dtype.h"

#include <math.h>
#include <pthread.h>

static const struct { const char *name; size_t size; } dtype_info[DS_DTYPE_COUNT] = {
    [DS_DTYPE_F32] = {"F32", 4},   [DS_DTYPE_F16] = {"F16", 2}, [DS_DTYPE_BF16] = {"BF16", 2},
    [DS_DTYPE_F8_E4M3] = {"F8_E4M3", 1}, [DS_DTYPE_I32] = {"I32", 4}, [DS_DTYPE_I64] = {"I64", 8},
    [DS_DTYPE_U8] = {"U8", 1}, [DS_DTYPE_NVFP4] = {"NVFP4", 0},
};

size_t ds_dtype_size(ds_dtype t) { return dtype_info[t].size; }
const char *ds_dtype_name(ds_dtype t) { return dtype_info[t].name; }

int ds_dtype_parse(const char *s) {
    for (int i = 0; i <= DS_DTYPE_U8; i++)   /* the dtypes a safetensors header may name */
        if (strcmp(s, dtype_info[i].name) == 0) return i;
    return -1;
}

float ds_f16_to_f32(uint16_t h) {
    int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    float v;
    if (e == 0) v = ldexpf((float)m, -24);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = ldexpf((float)(m + 1024), e - 25);
    return sign ? -v : v;
}

float ds_fp8_e4m3_decode(uint8_t v) {
    int sign = v >> 7, e = (v >> 3) & 15, m = v & 7;
    float x;
    if (e == 15 && m == 7) return NAN;
    if (e == 0) x = ldexpf((float)m / 8.0f, -6);
    else x = ldexpf(1.0f + (float)m / 8.0f, e - 7);
    return sign ? -x : x;
}

uint8_t ds_f32_to_fp8_e4m3(float x) {
    if (isnan(x)) return 0x7f;
    uint8_t sign = signbit(x) ? 0x80 : 0;
    float a = fabsf(x);
    if (a >= 448.0f) return sign | 0x7e;
    if (a < ldexpf(1.0f, -10)) return sign;               /* below half the smallest subnormal */
    int e;
    frexpf(a, &e);                                        /* a = m * 2^e, m in [0.5, 1) */
    int exp = e - 1;                                      /* a = 1.f * 2^exp */
    if (exp < -6) exp = -6;                               /* subnormal range: step 2^-9 */
    float step = ldexpf(1.0f, exp - 3);                   /* 3 mantissa bits */
    float q = nearbyintf(a / step) * step;                /* round half to even (default mode) */
    if (q >= 448.0f) return sign | 0x7e;
    int qe;
    frexpf(q, &qe);
    qe -= 1;
    if (qe < -6 || q < ldexpf(1.0f, -6)) return sign | (uint8_t)(q / ldexpf(1.0f, -9));   /* subnormal */
    int mant = (int)(q / ldexpf(1.0f, qe) * 8.0f) - 8;
    return sign | (uint8_t)((qe + 7) << 3) | (uint8_t)mant;
}

const float ds_e2m1_values[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};

uint8_t ds_f32_to_e2m1(float x) {
    uint8_t sign = x < 0 ? 8 : 0;
    float a = fabsf(x);
    uint8_t c;
    if (!(a > 0.25f)) c = 0;            /* NaN -> 0 */
    else if (a < 0.75f) c = 1;
    else if (a <= 1.25f) c = 2;
    else if (a < 1.75f) c = 3;
    else if (a <= 2.5f) c = 4;
    else if (a < 3.5f) c = 5;
    else if (a <= 5.0f) c = 6;
    else c = 7;
    return sign | c;
}

float ds_fp8_e4m3_table[256];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static void build_tables(void) {
    for (int i = 0; i < 256; i++) ds_fp8_e4m3_table[i] = ds_fp8_e4m3_decode((uint8_t)i);
}
void ds_dtype_init(void) { pthread_once(&tables_once, build_tables); }

/* Loads go through memcpy: safetensors does not promise aligned tensor data. */
#define CONVERT_LOOP(T, expr) do { \
        const unsigned char *s_ = src; \
        for (size_t i = 0; i < n; i++) { T v; memcpy(&v, s_ + i * sizeof(T), sizeof(T)); dst[i] = (expr); } \
    } while (0)

void ds_convert_to_f32(ds_dtype t, const void *src, float *dst, size_t n) {
    switch (t) {
    case DS_DTYPE_F32: memcpy(dst, src, n * 4); break;
    case DS_DTYPE_BF16: CONVERT_LOOP(uint16_t, ds_bf16_to_f32(v)); break;
    case DS_DTYPE_F16: CONVERT_LOOP(uint16_t, ds_f16_to_f32(v)); break;
    case DS_DTYPE_F8_E4M3: CONVERT_LOOP(uint8_t, ds_fp8_e4m3_table[v]); break;
    case DS_DTYPE_I32: CONVERT_LOOP(int32_t, (float)v); break;
    case DS_DTYPE_I64: CONVERT_LOOP(int64_t, (float)v); break;
    case DS_DTYPE_U8: CONVERT_LOOP(uint8_t, (float)v); break;
    default: break;
    }
}
