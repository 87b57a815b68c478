/* The memory plan (issue 12): parameter counts of the released shapes (spec 1.2-1.3: V3 671.03 B without
 * MTP, V2-Lite 15.7 B), the FP8 release's size, DP+EP keeping one KV copy per request against TP's
 * replicated cache, and the full V3 shape not fitting one H200. */
#include <math.h>

#include "dist/memplan.h"
#include "loader/config.h"
#include "testutil.h"

static void load(const char *path, ds_config *c) {
    char err[DS_ERRLEN], buf[16384];
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    CHECKF(ds_config_parse(buf, path, c, err) == DS_OK, "%s", err);
}

int main(void) {
    ds_config v3, lite;
    load("configs/deepseek-v3.json", &v3);
    load("configs/deepseek-v2-lite.json", &lite);
    ds_plan p;
    ds_plan_input one = {.mode = DS_PAR_DP_EP, .n_gpus = 1, .fp8_weights = 1, .kv_fp8 = 1, .gpu_bytes = 141e9,
                         .utilization = 0.9, .activation_bytes = 4e9};
    ds_memory_plan(&v3, &one, &p);
    CHECKF(fabs(p.params_total - 671.03e9) < 0.002 * 671.03e9, "V3 parameters %.4g", p.params_total);
    CHECKF(fabs(p.params_active - 37.5e9) < 0.05 * 37.5e9, "V3 active parameters %.4g", p.params_active);
    CHECKF(p.weight_bytes_total > 0.67e12 && p.weight_bytes_total < 0.70e12, "V3 FP8 bytes %.4g", p.weight_bytes_total);
    CHECK(!p.fits);
    CHECK(p.kv_bytes_per_token == 656.0 * 61);
    ds_plan_input dp8 = one, tp8 = one;
    dp8.n_gpus = tp8.n_gpus = 8;
    tp8.mode = DS_PAR_TP;
    ds_plan a, b;
    ds_memory_plan(&v3, &dp8, &a);
    ds_memory_plan(&v3, &tp8, &b);
    CHECK(a.fits && b.fits);
    CHECK(b.weight_bytes_per_gpu < a.weight_bytes_per_gpu);           /* TP splits attention too */
    CHECK(a.tokens_total > 4 * b.tokens_total);                        /* DP does not replicate the KV */
    printf("V3 on 8 x H200, FP8: DP8+EP8 %.1f GB/GPU of weights, %.3g KV tokens in all; TP8 %.1f GB/GPU, %.3g tokens\n",
           a.weight_bytes_per_gpu / 1e9, a.tokens_total, b.weight_bytes_per_gpu / 1e9, b.tokens_total);
    one.fp8_weights = 0;
    one.kv_fp8 = 0;
    ds_memory_plan(&lite, &one, &p);
    CHECKF(fabs(p.params_total - 15.7e9) < 0.02 * 15.7e9, "V2-Lite parameters %.4g", p.params_total);
    CHECK(p.fits && p.kv_bytes_per_token == 2.0 * 576 * 27);
    return test_result("test_memplan");
}
