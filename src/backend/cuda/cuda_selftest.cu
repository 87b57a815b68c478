/* Host-side check of the element conversions the CUDA kernels share with the CPU backend (cuda.h: the
 * FP8 KV entry, e4m3 and bf16 encoders, the NVFP4 decoder). They are __host__ __device__, so their
 * logic can be compared with the CPU's functions here, bit for bit, without a GPU; on the device the
 * same IEEE operations (division, rint, frexp, ldexp, multiply) give the same bits. Also the host-side
 * planning of the wgmma GEMMs (K splits, the MoE's tile table). Called by tests/unit/test_cuda_host.c (runs
 * in CI). */
#include <stdio.h>
#include <stdlib.h>

#include "backend/cuda/cuda.h"

extern "C" {
#include "core/dtype.h"
/* from backend/cpu/cpu.h (not included here: its OpenMP pragmas are not for nvcc) */
void cpu_kv_pack_fp8(const ds_config *cfg, const float *src, unsigned char *dst);
void cpu_kv_unpack_fp8(const ds_config *cfg, const unsigned char *src, float *dst);
}

static int same_bits(float a, float b) { return (isnan(a) && isnan(b)) || cu_f32_bits(a) == cu_f32_bits(b); }

static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Every check below adds its mismatches; the first is described in msg. */
#define MISMATCH(...)                                                                                 \
    do {                                                                                              \
        if (!bad++) snprintf(msg, len, __VA_ARGS__);                                                  \
    } while (0)

extern "C" long ds_cuda_host_selftest(char *msg, size_t len) {
    long bad = 0;
    ds_dtype_init();
    snprintf(msg, len, "ok");
    /* e4m3 decode: all 256 codes */
    for (int b = 0; b < 256; b++)
        if (!same_bits(cu_fp8_to_f32((unsigned char)b), ds_fp8_e4m3_to_f32((uint8_t)b)))
            MISMATCH("fp8 decode of 0x%02x: %g vs cpu %g", b, cu_fp8_to_f32((unsigned char)b), ds_fp8_e4m3_to_f32((uint8_t)b));
    /* e4m3 and bf16 encode: every 97th float bit pattern (44M values: all exponents, signs, NaN, inf)
     * and the rounding ties of e4m3 around every code */
    for (uint64_t u = 0; u < (1ull << 32); u += 97) {
        float x = cu_bits_f32((unsigned)u);
        if (cu_f32_to_fp8(x) != ds_f32_to_fp8_e4m3(x)) MISMATCH("fp8 encode of %a: 0x%02x vs cpu 0x%02x", x, cu_f32_to_fp8(x), ds_f32_to_fp8_e4m3(x));
        if (cu_f32_to_bf16_bits(x) != ds_f32_to_bf16(x)) MISMATCH("bf16 encode of %a", x);
    }
    for (int b = 0; b < 255; b++) {
        float lo = ds_fp8_e4m3_to_f32((uint8_t)b), hi = ds_fp8_e4m3_to_f32((uint8_t)(b + 1));
        if (isnan(lo) || isnan(hi) || (b & 0x7f) == 0x7f) continue;
        float mid = 0.5f * (lo + hi);
        float xs[3] = {mid, nextafterf(mid, -INFINITY), nextafterf(mid, INFINITY)};
        for (int i = 0; i < 3; i++)
            if (cu_f32_to_fp8(xs[i]) != ds_f32_to_fp8_e4m3(xs[i])) MISMATCH("fp8 encode of the tie %a", xs[i]);
    }
    /* the conversion-free e4m3 decode (cu_fp8_scaled): every code times scales from tiny to past 2^7 (the
     * two-step branch), against the CPU's decode times the scale, bit for bit; s = 1 gives the code's
     * value, which must fit a BF16 exactly (the tensor-core kernels take its upper half) */
    const float scales[] = {1.0f, 0.001953125f, 3.7e-3f, 1.1754944e-38f, 2.5e-7f, 0.75f, 100.0f, 200.0f, 6.0e4f};
    for (size_t k = 0; k < sizeof scales / sizeof scales[0]; k++) {
        float s = scales[k], s120 = s * 0x1p120f;
        for (int b = 0; b < 256; b++) {
            float got = cu_fp8_scaled((unsigned)b, s, s120), want = ds_fp8_e4m3_to_f32((uint8_t)b) * s;
            if (!same_bits(got, want)) MISMATCH("fp8 scaled decode of 0x%02x times %g: %a vs cpu %a", b, s, got, want);
            if (s == 1.0f && !isnan(got) && (cu_f32_bits(got) & 0xffffu))
                MISMATCH("fp8 code 0x%02x is not exact in bf16 (%a)", b, got);
        }
    }
    /* e2m1 codes */
    for (unsigned c = 0; c < 16; c++)
        if (!same_bits(cu_e2m1(c), ds_e2m1_values[c])) MISMATCH("e2m1 code %u: %g vs cpu %g", c, cu_e2m1(c), ds_e2m1_values[c]);
    /* FP8 KV entries packed by the CPU, read back element by element: C = 512 (V3) and C = 199 (two
     * scale blocks, the second partial, odd byte offsets) */
    int Cs[2] = {512, 199};
    for (int ci = 0; ci < 2; ci++) {
        ds_config c;
        memset(&c, 0, sizeof c);
        c.kv_lora_rank = Cs[ci];
        c.qk_rope_head_dim = 64;
        c.kv_fp8 = 1;
        int W = c.kv_lora_rank + c.qk_rope_head_dim;
        size_t tb = ds_kv_token_bytes(&c);
        unsigned char *e = (unsigned char *)malloc(tb * 3);
        float *src = (float *)malloc(sizeof(float) * W), *ref = (float *)malloc(sizeof(float) * W);
        for (int t = 0; t < 3; t++) {
            for (int k = 0; k < W; k++) src[k] = (float)((int64_t)(mix(t * 1000003ull + k) % 2000001) - 1000000) * (t + 1) * 1e-6f;
            cpu_kv_pack_fp8(&c, src, e + t * tb);
            cpu_kv_unpack_fp8(&c, e + t * tb, ref);
            for (int k = 0; k < W; k++)
                if (!same_bits(cu_kv_at(e + t * tb, 1, c.kv_lora_rank, k), ref[k]))
                    MISMATCH("kv entry C=%d token %d element %d: %g vs cpu %g", Cs[ci], t, k,
                             cu_kv_at(e + t * tb, 1, c.kv_lora_rank, k), ref[k]);
            /* the packer's arithmetic as the kernel does it: per block scale, x / scale in e4m3 */
            for (int b0 = 0; b0 * 128 < c.kv_lora_rank; b0++) {
                int lo = b0 * 128, hi = lo + 128 < c.kv_lora_rank ? lo + 128 : c.kv_lora_rank;
                float amax = 0.0f;
                for (int i = lo; i < hi; i++) amax = fmaxf(amax, fabsf(src[i]));
                float scale = fmaxf(amax, 1e-12f) / 448.0f;
                if (cu_f32_bits(scale) != cu_f32_bits(cu_ld_f32_bytes(e + t * tb + c.kv_lora_rank + 4 * b0)))
                    MISMATCH("kv scale C=%d block %d", Cs[ci], b0);
                for (int i = lo; i < hi; i++)
                    if (cu_f32_to_fp8(src[i] / scale) != e[t * tb + i]) MISMATCH("kv code C=%d element %d", Cs[ci], i);
            }
        }
        free(e);
        free(src);
        free(ref);
    }
    /* the wgmma GEMM's K splits: 128-column multiples, none empty, covering K; split only when the blocks
     * leave room in one wave, and then within it; at least 4 stages a split when split */
    {
        const int NK[][2] = {{2112, 7168}, {24576, 1536}, {32768, 512}, {7168, 16384}, {4096, 7168},
                             {7168, 2048}, {256, 7168}, {129280, 7168}, {92, 1280}, {260, 384}};
        const int Ms[] = {1, 9, 63, 64, 65, 128, 131, 1024, 4096};
        for (size_t a = 0; a < sizeof NK / sizeof NK[0]; a++)
            for (size_t b = 0; b < sizeof Ms / sizeof Ms[0]; b++) {
                int N = NK[a][0], K = NK[a][1], M = Ms[b], kc = 0, ks = cu_f8_splits(M, N, K, 132, &kc);
                int rows = M <= 64 ? 64 : 128, room = M <= 64 ? 264 : 132;
                int blocks = ((M + rows - 1) / rows) * ((N + 127) / 128);
                if (kc <= 0 || kc % 128 || (long)ks * kc < K || (long)(ks - 1) * kc >= K)
                    MISMATCH("splits of %dx%dx%d: %d of %d columns do not tile K", M, N, K, ks, kc);
                else if (ks > 1 && ((long)blocks * ks > room || kc < 4 * 128))
                    MISMATCH("splits of %dx%dx%d: %d splits of %d columns for %d blocks", M, N, K, ks, kc, blocks);
            }
    }
    /* the dense form of moe_wg_kernel: splits of whole stages that tile K with none empty, each holding its token
     * scales in shared memory; beyond what that needs, at most 4, at least 2 stages each, all in one wave of the
     * SMs, never more tiles than tickets */
    {
        const int NK[][2] = {{2112, 7168}, {576, 2048}, {3072, 2048}, {7168, 16384}, {92, 1280}, {260, 384}, {129280, 7168}};
        const int Ms[] = {9, 32, 33, 64, 131, 256};
        for (size_t a = 0; a < sizeof NK / sizeof NK[0]; a++)
            for (size_t b = 0; b < sizeof Ms / sizeof Ms[0]; b++) {
                int N = NK[a][0], K = NK[a][1], M = Ms[b], nt = M <= 32 ? 32 : 64, kc = 0;
                int ks = cu_f8_wg_splits(M, N, K, 132, nt, &kc), LK = K / 128;
                int tiles = (M + nt - 1) / nt * ((N + 127) / 128);
                int forced = (LK * nt + CU_MOE_WG_XS - 1) / CU_MOE_WG_XS;   /* the item's scales must fit */
                if (ks < 1 || kc < 1 || (long)ks * kc < LK || (long)(ks - 1) * kc >= LK || kc * nt > CU_MOE_WG_XS)
                    MISMATCH("wg splits of %dx%dx%d: %d of %d stages do not tile %d", M, N, K, ks, kc, LK);
                else if (ks > 1 && ks > forced && (kc < 2 || ks > 4 || tiles > CU_F8_WG_TICKETS || (long)tiles * ks > 132))
                    MISMATCH("wg splits of %dx%dx%d: %d splits of %d stages for %d tiles", M, N, K, ks, kc, tiles);
            }
    }
    /* the grouped MoE's tile table: each expert's rows x column blocks exactly once, rows from off[e] in steps of 128, row
     * end off[e+1]; the count as announced (the caller sizes the table with a NULL pass); an expert's tiles together, row
     * blocks first (a row block's column tiles consecutive), or with cols_first column blocks first */
    for (int cols_first = 0; cols_first < 2; cols_first++) {
        enum { bm = 128 };
        enum { E = 37, COLS = 384 };
        int32_t off[E + 1];
        off[0] = 0;
        for (int e = 0; e < E; e++) off[e + 1] = off[e] + (int)(mix(e + 5) % 300) * (e % 5 != 0);   /* some empty */
        int n = cu_f8_expert_tiles(NULL, off, E, COLS, cols_first);
        int4 *t = (int4 *)malloc(sizeof(int4) * (size_t)(n > 0 ? n : 1));
        unsigned char *seen = (unsigned char *)calloc((size_t)off[E] * (COLS / 128) + 1, 1);
        if (!t || !seen) {
            MISMATCH("tile table check: out of memory");
        } else {
            int want = 0;
            for (int e = 0; e < E; e++) want += (off[e + 1] - off[e] + bm - 1) / bm * (COLS / 128);
            if (cu_f8_expert_tiles(t, off, E, COLS, cols_first) != n || n != want)
                MISMATCH("tile table: %d tiles, expected %d", n, want);
            for (int i = 0; i < n && i < want; i++) {
                int e = t[i].x, r0 = t[i].y, c = t[i].z;
                if (e < 0 || e >= E || t[i].w != off[e + 1] || (r0 - off[e]) % bm || r0 < off[e] || r0 >= off[e + 1] ||
                    c % 128 || c < 0 || c >= COLS) {
                    MISMATCH("tile %d: (%d, %d, %d, %d) outside expert %d's rows", i, e, r0, c, t[i].w, e);
                    continue;
                }
                for (int r = r0; r < r0 + bm && r < off[e + 1]; r++) seen[(size_t)r * (COLS / 128) + c / 128]++;
                if (i > 0) {   /* the order: experts ascending; within one, the stated block order */
                    int4 p = t[i - 1];
                    long key = cols_first ? (long)c * 100000 + r0 : (long)r0 * 100000 + c;
                    long pk = cols_first ? (long)p.z * 100000 + p.y : (long)p.y * 100000 + p.z;
                    if (p.x > e || (p.x == e && pk >= key))
                        MISMATCH("tile table: tile %d (%d, %d, %d) after (%d, %d, %d)", i, e, r0, c, p.x, p.y, p.z);
                }
            }
            for (int i = 0; i < off[E] * (COLS / 128); i++)
                if (seen[i] != 1) MISMATCH("tile table: row %d column block %d covered %d times", i / (COLS / 128),
                                           i % (COLS / 128), seen[i]);
        }
        free(t);
        free(seen);
    }
    /* moe_wg_kernel's work items: over t < chunks x NB x ks, every (row, weight block, stage) of every expert exactly
     * once, each item inside its expert's rows with 1 .. nt of them, whole splits of kc stages, tiles in range;
     * experts without rows (every fifth) have no item */
    {
        enum { E = 37, NB = 3 };
        int32_t off[E + 1];
        int pre[E + 1];
        off[0] = 0;
        for (int e = 0; e < E; e++) off[e + 1] = off[e] + (int)(mix(e + 11) % 150) * (e % 5 != 0);
        const int cfg[][3] = {{1, 16, 16}, {3, 6, 16}, {2, 2, 3}};   /* ks, kc, LK */
        unsigned char *seen = (unsigned char *)malloc((size_t)off[E] * NB * 16 + 1);
        for (int nt = 32; nt <= 64 && seen; nt += 32)
            for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
                int ks = cfg[c][0], kc = cfg[c][1], LK = cfg[c][2], stop = 0;   /* the first mismatch of a case ends it */
                pre[0] = 0;
                for (int e = 0; e < E; e++) pre[e + 1] = pre[e] + (off[e + 1] - off[e] + nt - 1) / nt;
                memset(seen, 0, (size_t)off[E] * NB * LK);
                for (int t = 0; t < pre[E] * NB * ks && !stop; t++) {
                    int m[8];
                    cu_moe_wg_item(t, NB, pre, off, E, ks, kc, LK, nt, m);
                    int e = m[0], r0 = m[1], cnt = m[2], nb = m[3], kb0 = m[5], kb1 = m[6];
                    if (e < 0 || e >= E || r0 < off[e] || cnt < 1 || cnt > nt || r0 + cnt > off[e + 1] || nb < 0 || nb >= NB ||
                        kb0 != m[4] * kc || kb1 != (kb0 + kc < LK ? kb0 + kc : LK) || m[7] < 0 || m[7] >= pre[E] * NB) {
                        MISMATCH("wg item %d (nt %d, ks %d): expert %d rows %d+%d block %d stages %d..%d tile %d", t, nt, ks, e,
                                 r0, cnt, nb, kb0, kb1, m[7]);
                        stop = 1;
                        continue;
                    }
                    for (int r = r0; r < r0 + cnt; r++)
                        for (int kb = kb0; kb < kb1; kb++) seen[((size_t)r * NB + nb) * LK + kb]++;
                }
                for (size_t i = 0; i < (size_t)off[E] * NB * LK && !stop; i++)
                    if (seen[i] != 1) {
                        MISMATCH("wg items (nt %d, ks %d): row %zu block %zu stage %zu covered %d times", nt, ks,
                                 i / LK / NB, i / LK % NB, i % LK, seen[i]);
                        stop = 1;
                    }
            }
        if (!seen) MISMATCH("wg item check: out of memory");
        free(seen);
    }
    /* the shared experts as moe_wg_kernel's virtual experts (cu_moe_wg_virtual after the routed tables): ns experts of
     * ms rows from row rr = the routed rows' end; every row of both kinds in exactly one item of its own expert, chunks of
     * nt rows (a routed expert's rows never run into the virtual ones) */
    {
        enum { E = 9, NS = 2, NB = 2 };
        const int ms_cases[] = {1, 31, 64, 200};
        for (int nt = 32; nt <= 64; nt += 32)
            for (size_t c = 0; c < sizeof ms_cases / sizeof ms_cases[0]; c++) {
                int ms = ms_cases[c], pre[E + NS + 1], offs[E + NS + 1], stop = 0;
                offs[0] = pre[0] = 0;
                for (int e = 0; e < E; e++) {
                    offs[e + 1] = offs[e] + (int)(mix(e + 23) % 70) * (e % 4 != 1);
                    pre[e + 1] = pre[e] + (offs[e + 1] - offs[e] + nt - 1) / nt;
                }
                int rr = offs[E], R = rr + NS * ms;
                cu_moe_wg_virtual(pre, offs, E, NS, ms, rr, nt);
                unsigned char *seen = (unsigned char *)calloc((size_t)R * NB, 1);
                if (!seen) {
                    MISMATCH("wg virtual check: out of memory");
                    break;
                }
                if (pre[E + NS] != pre[E] + NS * ((ms + nt - 1) / nt) || offs[E + NS] != R)
                    MISMATCH("wg virtual tables (nt %d, ms %d): %d chunks to row %d", nt, ms, pre[E + NS], offs[E + NS]);
                for (int t = 0; t < pre[E + NS] * NB && !stop; t++) {
                    int m[8];
                    cu_moe_wg_item(t, NB, pre, offs, E + NS, 1, 4, 4, nt, m);
                    int e = m[0], r0 = m[1], cnt = m[2];
                    int lo = e < E ? offs[e] : rr + (e - E) * ms, hi = e < E ? offs[e + 1] : lo + ms;
                    if (e < 0 || e >= E + NS || r0 < lo || cnt < 1 || cnt > nt || r0 + cnt > hi) {
                        MISMATCH("wg virtual item %d (nt %d, ms %d): expert %d rows %d+%d outside %d..%d", t, nt, ms, e, r0, cnt, lo, hi);
                        stop = 1;
                        continue;
                    }
                    for (int r = r0; r < r0 + cnt; r++) seen[(size_t)r * NB + m[3]]++;
                }
                for (int r = 0; r < R && !stop; r++)
                    for (int nb = 0; nb < NB; nb++) {
                        if (seen[(size_t)r * NB + nb] != 1) {
                            MISMATCH("wg virtual items (nt %d, ms %d): row %d block %d covered %d times", nt, ms, r, nb,
                                     seen[(size_t)r * NB + nb]);
                            stop = 1;
                            break;
                        }
                    }
                free(seen);
            }
    }
    /* an NVFP4 weight [3, 48]: every element against the CPU's row decoder */
    {
        enum { R = 3, K = 48 };
        uint8_t q[R * K / 2], bs[R * K / 16];
        for (int i = 0; i < R * K / 2; i++) q[i] = (uint8_t)mix(i + 7);
        for (int i = 0; i < R * K / 16; i++) bs[i] = (uint8_t)(0x28 + (mix(i + 99) % 0x30));
        ds_weight w;
        memset(&w, 0, sizeof w);
        w.dtype = DS_DTYPE_NVFP4;
        w.rows = R;
        w.cols = K;
        w.data = q;
        w.block_scale = bs;
        w.global_scale = 0.013f;
        cu_wview v = cu_view(&w);
        float row[K];
        for (int r = 0; r < R; r++) {
            ds_weight_row_f32(&w, r, row);
            for (int k = 0; k < K; k++)
                if (!same_bits(cu_w_nvfp4(v, r, k), row[k])) MISMATCH("nvfp4 [%d, %d]: %g vs cpu %g", r, k, cu_w_nvfp4(v, r, k), row[k]);
        }
    }
    return bad;
}

/* The conversion unit's e4m3 encoder (cu_f32_to_fp8_hw) against the software one (cu_f32_to_fp8, checked
 * against the CPU above) for every float bit pattern; on the GPU. */
__global__ void fp8_hw_check_kernel(unsigned long long *bad, unsigned *first) {
    for (uint64_t u = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; u < (1ull << 32); u += (uint64_t)gridDim.x * blockDim.x) {
        float x = cu_bits_f32((unsigned)u);
        if (cu_f32_to_fp8_hw(x) != cu_f32_to_fp8(x)) {
            if (atomicAdd(bad, 1ull) == 0) *first = (unsigned)u;
        }
    }
}

extern "C" long ds_cuda_device_selftest(char *msg, size_t len) {
    unsigned long long *bad = NULL, h_bad = 0;
    unsigned *first = NULL, h_first = 0;
    snprintf(msg, len, "ok");
    if (cudaMalloc(&bad, sizeof *bad) != cudaSuccess || cudaMalloc(&first, sizeof *first) != cudaSuccess) {
        cudaGetLastError();
        if (bad) cudaFree(bad);
        snprintf(msg, len, "cudaMalloc failed");
        return 1;
    }
    CUDA_CHECK(cudaMemset(bad, 0, sizeof *bad));
    fp8_hw_check_kernel<<<4096, 256>>>(bad, first);
    CUDA_LAUNCH_CHECK();
    CUDA_CHECK(cudaMemcpy(&h_bad, bad, sizeof h_bad, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&h_first, first, sizeof h_first, cudaMemcpyDeviceToHost));
    if (h_bad) {
        float x = cu_bits_f32(h_first);
        snprintf(msg, len, "fp8 encode of %a (bits 0x%08x): the conversion unit differs from the software code 0x%02x", x,
                 h_first, cu_f32_to_fp8(x));
    }
    cudaFree(bad);
    cudaFree(first);
    return (long)h_bad;
}
