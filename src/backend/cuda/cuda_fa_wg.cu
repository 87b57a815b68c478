/* Prefill attention in the naive MLA form on Hopper's warpgroup MMAs (issue 8; DSINFER_CUDA_FA3): FlashAttention-3's
 * layout (a producer warpgroup issuing TMA copies, two consumer warpgroups of 64 query rows on wgmma) for the DeepSeek
 * head widths (q/k 128 + 64 rope, v 128).
 *
 * The contract and the arithmetic are fa_prefill2_kernel's (cuda_fa_tc.cu): for the T new tokens t0 .. t0+T-1 of one
 * sequence, out[m, h, :] = softmax_p(scale * q[m, h] . [k_nope[p, h] ; k_pe[p]]) v[p, h] over the context rows
 * p <= positions[m]; kvb16 [L, H * 256] (128 k_nope then 128 v a head) and kpe16 [L, 64] BF16, q and out fp32;
 * q, k, v and the probabilities in BF16, sums in fp32. The outputs match v2's up to the order of the sums.
 *
 * Why: v2 runs mma.sync m16n8k16 from ldmatrix fragments with every warp re-reading K and V from shared memory for
 * 16 rows; at 8K tokens (V2-Lite, 16 heads, 344 GFLOP a layer) it is the largest single kernel of prefill. Here a
 * block = 128 query rows x one head: warpgroup 1 + w (w = 0, 1) owns rows 64w .. 64w + 63 and runs
 *   S = Q K^T    12 x m64n128k16, Q (its 64 rows) and K [128 rows][192] both K-major from shared memory;
 *   softmax      online, FlashAttention-2's running max and sum, exp2 with the scale folded into one FFMA;
 *   O += P V     8 x m64n128k16, P in registers (the S accumulator's layout is wgmma's A fragment layout), V
 *                [128 rows][128] from shared memory read as an MN-major B.
 * Warpgroup 0 gives its registers up (setmaxnreg) and one thread copies K and V of each 128-row tile by TMA into a
 * two-stage ring (K and V on their own barriers, so S starts before V has landed): K as three boxes of 64 columns x
 * 128 rows (k_nope's two halves from kvb16, k_pe from kpe16), V as two, each landing in the 128-byte swizzle the
 * descriptors name; rows past L read as zeros (the map's extent) and are masked with the causal mask. The two
 * consumer warpgroups run independently, so one's softmax overlaps the other's MMAs.
 *
 * Shared memory: Q [128][192] 48 KB (converted from fp32 by the consumers), per stage K 48 KB + V 32 KB; 208 KB. */
#include "backend/cuda/cuda.h"

#include <cuda_bf16.h>
#include <string.h>

#include "backend/cuda/cuda_mma.h"
#include "backend/cuda/cuda_wgmma.h"

#define F3Q 128                  /* query rows a block: two consumer warpgroups of 64 */
#define F3N 128                  /* context rows a tile */
#define F3_THREADS 384
#define F3_CH (F3N * 128)        /* a 64-column chunk of 128 rows, 128 bytes a row: 16 KB */
#define F3_QB (3 * F3_CH)        /* Q [128][192] */
#define F3_KB (3 * F3_CH)        /* K [128][128 k_nope + 64 k_pe] */
#define F3_VB (2 * F3_CH)        /* V [128][128] */
#define F3_ST 2
#define F3_BAR_OFF (F3_QB + F3_ST * (F3_KB + F3_VB))
#define F3_SMEM (1024 + F3_BAR_OFF + 8 * sizeof(uint64_t) + F3Q * sizeof(int))
static_assert(F3_SMEM <= 227 * 1024, "fa_prefill3_kernel: Q and two K/V stages must fit an SM's shared memory");

int cu_fa3 = 2;   /* DSINFER_CUDA_FA3 (backend creation): 2 fa_prefill3o_kernel (overlapped), 1 fa_prefill3_kernel, where TMA maps can be made; 0 v2 */

/* d[64 x 128] (+)= a[64 x 16] b[128 x 16]^T, BF16, both K-major from shared memory (d[4j + e]: row 16 (warp & 3) + lane / 4
 * + 8 (e / 2), column 8j + 2 (lane & 3) + (e & 1)) */
__device__ __forceinline__ void f3_mma_s(float (&d)[64], uint64_t da, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(acc));
}

/* d[64 x 128] += a[64 x 16] b[16 x 128], a from registers (the A fragment: mma.sync m16n8k16's A layout, warp i of the
 * warpgroup rows 16i .. 16i + 15), b MN-major (transposed) from shared memory */
__device__ __forceinline__ void f3_mma_o(float (&d)[64], const uint32_t (&a)[4], uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

/* the MN-major descriptor of V: leading byte offset F3_CH (the next 64 columns), stride byte offset 1024 (the next 8
 * rows), 128-byte swizzle */
__device__ __forceinline__ uint64_t f3_desc_v(const void *p) {
    uint64_t a = cu_smem_addr(p);
    return ((a & 0x3FFFF) >> 4) | ((uint64_t)(F3_CH >> 4) << 16) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ float f3_ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ uint32_t f3_pack(float lo, float hi) {
    __nv_bfloat162 b = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&b;
}

/* named barrier among the 128 threads of consumer warpgroup w (ids 1, 2; 0 is __syncthreads) */
__device__ __forceinline__ void f3_bar_wg(int w) { asm volatile("bar.sync %0, 128;\n" ::"r"(1 + w) : "memory"); }

/* Warpgroup w's 64 query rows (block rows 64w ..; rows at or past T zero) from fp32 q into Qs in BF16, swizzled as the
 * TMA would have written them: row r of a chunk at r * 128 bytes, its 16-byte piece k at (k ^ (r % 8)) * 16. */
__device__ __forceinline__ void f3_load_q(unsigned char *Qs, const float *q, int row0, int t0, int T, int H, int h, int w,
                                          int tid) {
#pragma unroll 4
    for (int x = tid; x < 64 * 48; x += 128) {
        int r = x / 48, col = 4 * (x % 48), row = row0 + r;
        float4 v = row < T ? __ldg((const float4 *)(q + ((size_t)(t0 + row) * H + h) * 192 + col))
                           : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        int rc = 64 * w + r, piece = (col & 63) >> 3;
        unsigned char *dst = Qs + (col >> 6) * F3_CH + rc * 128 + ((piece ^ (rc & 7)) << 4) + 2 * (col & 7);
        *(uint2 *)dst = make_uint2(cu_pack_bf16(v.x, v.y), cu_pack_bf16(v.z, v.w));
    }
}

/* A consumer warpgroup's running state: the accumulators' rows A (16 (warp % 4) + lane / 4) and B (A + 8) */
typedef struct {
    float mA, mB, lA, lB;   /* running max (scaled units) and sum */
    int posA, posB, pmin, t;
    float scale;
} f3_rows;

/* S = Q K^T for this warpgroup's 64 rows over the tile Kt (12 k-steps), issued and committed as one group */
__device__ __forceinline__ void f3_scores(float (&sacc)[64], const unsigned char *Qw, const unsigned char *Kt) {
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < 12; kk++) {
        unsigned off = (kk >> 2) * F3_CH + (kk & 3) * 32;
        f3_mma_s(sacc, wg_desc(Qw + off), wg_desc(Kt + off), kk);
    }
    wg_commit();
}

/* O += P V over the tile Vt (8 k-steps, P from registers), issued and committed as one group */
__device__ __forceinline__ void f3_values(float (&o)[64], const uint32_t (&pr)[8][4], const unsigned char *Vt) {
    wg_fence();
    const uint64_t dv = f3_desc_v(Vt);
#pragma unroll
    for (int kk = 0; kk < 8; kk++) f3_mma_o(o, pr[kk], dv + ((kk * 16 * 128) >> 4));
    wg_commit();
}

/* The tile's softmax (its first key kb): the causal mask where a key is above some row's position, the rows' new
 * running max, P = exp(s * scale - max) in BF16 A fragments (pr: k-step kk = keys 16kk ..), the running sums; returns
 * the factors cA, cB = exp(old max - new max) that O must be multiplied by before P V is added. */
__device__ __forceinline__ void f3_softmax(float (&sacc)[64], uint32_t (&pr)[8][4], f3_rows &r, int kb, float &cA,
                                           float &cB) {
    const float L2E = 1.4426950408889634f, sl = r.scale * L2E;
    if (kb + F3N - 1 > r.pmin) {   /* keys above some row's position: masked */
#pragma unroll
        for (int j = 0; j < 16; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                if (kb + 8 * j + 2 * r.t + (e & 1) > (e < 2 ? r.posA : r.posB)) sacc[4 * j + e] = -INFINITY;
    }
    /* the rows' maxima of the raw scores (scale > 0: max(s) * scale is the max of the scaled scores) */
    float xA = -INFINITY, xB = -INFINITY;
#pragma unroll
    for (int j = 0; j < 16; j++) {
        xA = fmaxf(xA, fmaxf(sacc[4 * j], sacc[4 * j + 1]));
        xB = fmaxf(xB, fmaxf(sacc[4 * j + 2], sacc[4 * j + 3]));
    }
    xA = fmaxf(xA, __shfl_xor_sync(0xffffffffu, xA, 1));
    xA = fmaxf(xA, __shfl_xor_sync(0xffffffffu, xA, 2));
    xB = fmaxf(xB, __shfl_xor_sync(0xffffffffu, xB, 1));
    xB = fmaxf(xB, __shfl_xor_sync(0xffffffffu, xB, 2));
    /* tile 0 holds key 0 <= every row's position, so the running max is finite from the first tile on */
    const float nA = fmaxf(r.mA, xA * r.scale), nB = fmaxf(r.mB, xB * r.scale), oA = -nA * L2E, oB = -nB * L2E;
    cA = f3_ex2((r.mA - nA) * L2E);   /* 0 while the old max is -inf */
    cB = f3_ex2((r.mB - nB) * L2E);
    float sA = 0.0f, sB = 0.0f;
#pragma unroll
    for (int j = 0; j < 16; j++) {
        float p0 = f3_ex2(fmaf(sacc[4 * j], sl, oA)), p1 = f3_ex2(fmaf(sacc[4 * j + 1], sl, oA));
        float p2 = f3_ex2(fmaf(sacc[4 * j + 2], sl, oB)), p3 = f3_ex2(fmaf(sacc[4 * j + 3], sl, oB));
        sA += p0 + p1;
        sB += p2 + p3;
        pr[j >> 1][(j & 1) * 2] = f3_pack(p0, p1);
        pr[j >> 1][(j & 1) * 2 + 1] = f3_pack(p2, p3);
    }
    r.lA = r.lA * cA + sA;
    r.lB = r.lB * cB + sB;
    r.mA = nA;
    r.mB = nB;
}

__device__ __forceinline__ void f3_rescale(float (&o)[64], float cA, float cB) {
#pragma unroll
    for (int j = 0; j < 16; j++) {
        o[4 * j] *= cA; o[4 * j + 1] *= cA;
        o[4 * j + 2] *= cB; o[4 * j + 3] *= cB;
    }
}

/* OVL's step for tile k >= 1: S_k issued, then P_{k-1} V_{k-1} (pin); the softmax of S_k into pout while that runs;
 * K_k released once S_k is done, V_{k-1} once P V is; O rescaled for tile k's max */
__device__ __forceinline__ void f3_ovl_step(float (&o)[64], float (&sacc)[64], const uint32_t (&pin)[8][4],
                                            uint32_t (&pout)[8][4], f3_rows &r, const unsigned char *Qw,
                                            const unsigned char *Ks, const unsigned char *Vs, uint64_t *full_k,
                                            uint64_t *full_v, uint64_t *empty_k, uint64_t *empty_v, int k, int lane) {
    const int s = k & 1, ph = (k >> 1) & 1, sp = (k - 1) & 1, php = ((k - 1) >> 1) & 1;
    float cA, cB;
    mbar_wait(&full_k[s], ph);
    mbar_wait(&full_v[sp], php);
    f3_scores(sacc, Qw, Ks + s * F3_KB);   /* S_k */
    f3_values(o, pin, Vs + sp * F3_VB);    /* O += P_{k-1} V_{k-1} */
    wg_wait1();                            /* S_k done (P V may still run) */
    if (lane == 0) mbar_arrive(&empty_k[s]);
    f3_softmax(sacc, pout, r, k * F3N, cA, cB);
    wg_wait0();                            /* P_{k-1} V_{k-1} done: pin and V_{k-1} free */
    if (lane == 0) mbar_arrive(&empty_v[sp]);
    f3_rescale(o, cA, cB);
}

/* OVL's end: the last tile's P V (its P in pin) */
__device__ __forceinline__ void f3_ovl_last(float (&o)[64], const uint32_t (&pin)[8][4], const unsigned char *Vs,
                                            uint64_t *full_v, uint64_t *empty_v, int nt_w, int lane) {
    const int sp = (nt_w - 1) & 1, php = ((nt_w - 1) >> 1) & 1;
    mbar_wait(&full_v[sp], php);
    f3_values(o, pin, Vs + sp * F3_VB);
    wg_wait0();
    if (lane == 0) mbar_arrive(&empty_v[sp]);
}

/* grid (blocks of 128 queries x H heads, the longest blocks first), F3_THREADS, F3_SMEM. mkv: kvb16 as bytes [L, H * 512],
 * mpe: kpe16 as bytes [L, 128], both boxes of 128 bytes x 128 rows. */
__global__ void __launch_bounds__(F3_THREADS, 1) fa_prefill3_kernel(const __grid_constant__ CUtensorMap mkv,
                                                                     const __grid_constant__ CUtensorMap mpe, float *out,
                                                                     const float *q, const int32_t *positions, int t0,
                                                                     int T, int H, float scale) {
    extern __shared__ unsigned char f3_raw[];
    unsigned char *Qs = (unsigned char *)(((uintptr_t)f3_raw + 1023) & ~(uintptr_t)1023);
    unsigned char *Ks = Qs + F3_QB, *Vs = Ks + F3_ST * F3_KB;
    uint64_t *full_k = (uint64_t *)(Qs + F3_BAR_OFF), *full_v = full_k + 2, *empty = full_k + 4;
    int *pos_s = (int *)(full_k + 6);
    const int n_qb = (T + F3Q - 1) / F3Q, qb = n_qb - 1 - (int)(blockIdx.x / H), h = (int)(blockIdx.x % H), q0 = qb * F3Q;
    if (threadIdx.x == 0) {
        for (int s = 0; s < F3_ST; s++) {
            mbar_init(&full_k[s], 1);
            mbar_init(&full_v[s], 1);
            mbar_init(&empty[s], 8);   /* lane 0 of each consumer warp */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if (threadIdx.x < F3Q) pos_s[threadIdx.x] = q0 + (int)threadIdx.x < T ? positions[t0 + q0 + threadIdx.x] : -1;
    __syncthreads();
    int wg = threadIdx.x >> 7;
    if (wg == 0) {   /* producer: one thread copies every tile the block's rows reach */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        if (threadIdx.x == 0) {
            int pmax = -1;
            for (int r = 0; r < F3Q; r++) pmax = max(pmax, pos_s[r]);
            const int nt = (pmax + F3N) / F3N, c_nope = h * 512, c_v = c_nope + 256;
            for (int k = 0; k < nt; k++) {
                int s = k & 1, kb = k * F3N;
                if (k >= F3_ST) mbar_wait(&empty[s], ((k >> 1) - 1) & 1);
                unsigned char *Kt = Ks + s * F3_KB, *Vt = Vs + s * F3_VB;
                mbar_expect_tx(&full_k[s], F3_KB);
                tma_load(Kt, &mkv, c_nope, kb, &full_k[s]);
                tma_load(Kt + F3_CH, &mkv, c_nope + 128, kb, &full_k[s]);
                tma_load(Kt + 2 * F3_CH, &mpe, 0, kb, &full_k[s]);
                mbar_expect_tx(&full_v[s], F3_VB);
                tma_load(Vt, &mkv, c_v, kb, &full_v[s]);
                tma_load(Vt + F3_CH, &mkv, c_v + 128, kb, &full_v[s]);
            }
        }
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    /* w through a shuffle: the compiler then knows it is the same across a warp (a wgmma it cannot prove warp-uniform
     * is serialized) */
    const int warp = threadIdx.x >> 5, w = __shfl_sync(0xffffffffu, wg - 1, 0), lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3, tid = threadIdx.x & 127, rA = 64 * w + 16 * (warp & 3) + g, rB = rA + 8;
    /* the block's and this warpgroup's reach: tiles 0 .. nt - 1 are loaded, 0 .. nt_w - 1 computed here; tiles from
     * the first whose last row is above pmin_w need the causal mask. Rows past T (pos -1) take pmax_w: finite scores
     * that are never stored. */
    int pmax = -1, pmax_w = -1, pmin_w = 0x7fffffff;
    for (int r = 0; r < F3Q; r++) {
        int p = pos_s[r];
        pmax = max(pmax, p);
        if ((r >> 6) == w && p >= 0) {
            pmax_w = max(pmax_w, p);
            pmin_w = min(pmin_w, p);
        }
    }
    const int nt = (pmax + F3N) / F3N, nt_w = __shfl_sync(0xffffffffu, (pmax_w + F3N) / F3N, 0);
    const int posA = pos_s[rA] >= 0 ? pos_s[rA] : pmax_w, posB = pos_s[rB] >= 0 ? pos_s[rB] : pmax_w;

    f3_load_q(Qs, q, q0 + 64 * w, t0, T, H, h, w, tid);
    wg_fence_smem();   /* Q's stores visible to the MMAs */
    f3_bar_wg(w);

    const unsigned char *Qw = Qs + w * 64 * 128;   /* this warpgroup's 64 rows of every chunk */
    const float L2E = 1.4426950408889634f, sl = scale * L2E;
    float o[64];
#pragma unroll
    for (int j = 0; j < 64; j++) o[j] = 0.0f;
    float mA = -INFINITY, mB = -INFINITY, lA = 0.0f, lB = 0.0f;
    int k = 0;
    for (; k < nt_w; k++) {
        const int s = k & 1, ph = (k >> 1) & 1, kb = k * F3N;
        const unsigned char *Kt = Ks + s * F3_KB, *Vt = Vs + s * F3_VB;
        float sacc[64];
        mbar_wait(&full_k[s], ph);
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < 12; kk++) {
            unsigned off = (kk >> 2) * F3_CH + (kk & 3) * 32;
            f3_mma_s(sacc, wg_desc(Qw + off), wg_desc(Kt + off), kk);
        }
        wg_commit();
        wg_wait0();
        if (kb + F3N - 1 > pmin_w) {   /* keys above some row's position: masked */
#pragma unroll
            for (int j = 0; j < 16; j++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (kb + 8 * j + 2 * t + (e & 1) > (e < 2 ? posA : posB)) sacc[4 * j + e] = -INFINITY;
        }
        /* the rows' maxima of the raw scores (scale > 0: max(s) * scale is the max of the scaled scores) */
        float xA = -INFINITY, xB = -INFINITY;
#pragma unroll
        for (int j = 0; j < 16; j++) {
            xA = fmaxf(xA, fmaxf(sacc[4 * j], sacc[4 * j + 1]));
            xB = fmaxf(xB, fmaxf(sacc[4 * j + 2], sacc[4 * j + 3]));
        }
        xA = fmaxf(xA, __shfl_xor_sync(0xffffffffu, xA, 1));
        xA = fmaxf(xA, __shfl_xor_sync(0xffffffffu, xA, 2));
        xB = fmaxf(xB, __shfl_xor_sync(0xffffffffu, xB, 1));
        xB = fmaxf(xB, __shfl_xor_sync(0xffffffffu, xB, 2));
        /* tile 0 holds key 0 <= every row's position, so the running max is finite from the first tile on */
        const float nA = fmaxf(mA, xA * scale), nB = fmaxf(mB, xB * scale), oA = -nA * L2E, oB = -nB * L2E;
        const float cA = f3_ex2((mA - nA) * L2E), cB = f3_ex2((mB - nB) * L2E);   /* 0 while the old max is -inf */
        float sA = 0.0f, sB = 0.0f;
        uint32_t pr[8][4];   /* P as A fragments: k-step kk = keys 16kk ..: rows A, B at 2t, then at 8 + 2t */
#pragma unroll
        for (int j = 0; j < 16; j++) {
            float p0 = f3_ex2(fmaf(sacc[4 * j], sl, oA)), p1 = f3_ex2(fmaf(sacc[4 * j + 1], sl, oA));
            float p2 = f3_ex2(fmaf(sacc[4 * j + 2], sl, oB)), p3 = f3_ex2(fmaf(sacc[4 * j + 3], sl, oB));
            sA += p0 + p1;
            sB += p2 + p3;
            pr[j >> 1][(j & 1) * 2] = f3_pack(p0, p1);
            pr[j >> 1][(j & 1) * 2 + 1] = f3_pack(p2, p3);
        }
        lA = lA * cA + sA;
        lB = lB * cB + sB;
        mA = nA;
        mB = nB;
#pragma unroll
        for (int j = 0; j < 16; j++) {
            o[4 * j] *= cA; o[4 * j + 1] *= cA;
            o[4 * j + 2] *= cB; o[4 * j + 3] *= cB;
        }
        mbar_wait(&full_v[s], ph);
        wg_fence();
        const uint64_t dv = f3_desc_v(Vt);
#pragma unroll
        for (int kk = 0; kk < 8; kk++) f3_mma_o(o, pr[kk], dv + ((kk * 16 * 128) >> 4));
        wg_commit();
        wg_wait0();
        if (lane == 0) mbar_arrive(&empty[s]);   /* this warp no longer reads the stage */
    }
    for (; k < nt; k++) {   /* tiles only the other warpgroup's rows reach: released in order once loaded */
        const int s = k & 1, ph = (k >> 1) & 1;
        mbar_wait(&full_k[s], ph);
        if (lane == 0) mbar_arrive(&empty[s]);
    }
    lA += __shfl_xor_sync(0xffffffffu, lA, 1);
    lA += __shfl_xor_sync(0xffffffffu, lA, 2);
    lB += __shfl_xor_sync(0xffffffffu, lB, 1);
    lB += __shfl_xor_sync(0xffffffffu, lB, 2);
    const float iA = 1.0f / lA, iB = 1.0f / lB;
    const int mrA = q0 + rA, mrB = q0 + rB;
#pragma unroll
    for (int j = 0; j < 16; j++) {
        int col = 8 * j + 2 * t;
        if (mrA < T) *(float2 *)(out + ((size_t)(t0 + mrA) * H + h) * 128 + col) = make_float2(o[4 * j] * iA, o[4 * j + 1] * iA);
        if (mrB < T) *(float2 *)(out + ((size_t)(t0 + mrB) * H + h) * 128 + col) = make_float2(o[4 * j + 2] * iB, o[4 * j + 3] * iB);
    }
}

/* The overlapped form (DSINFER_CUDA_FA3=2; fa_prefill3_kernel's grid, contract and arithmetic): within a warpgroup,
 * tile k's S is issued before tile k - 1's P V, and the softmax of S_k runs while P_{k-1} V_{k-1} is on the tensor cores
 * (FlashAttention-3's intra-warpgroup overlap; P in two register sets). K and V of a stage are released separately (a
 * warp's lane 0 on empty_k once its S MMAs are done, on empty_v once its P V MMAs are), so the producer refills K while
 * V is still read. A kernel of its own beside v1 (=1, kept as measured). 8K x 16 heads 0.583 -> 0.532 ms (646 TFLOP/s, 83% of
 * the BF16 rate), 128 heads x 8K 6.00 -> 5.78 ms (RESULTS nineteenth session run 4); the default since. */
__global__ void __launch_bounds__(F3_THREADS, 1) fa_prefill3o_kernel(const __grid_constant__ CUtensorMap mkv,
                                                                     const __grid_constant__ CUtensorMap mpe, float *out,
                                                                     const float *q, const int32_t *positions, int t0,
                                                                     int T, int H, float scale) {
    extern __shared__ unsigned char f3_raw[];
    unsigned char *Qs = (unsigned char *)(((uintptr_t)f3_raw + 1023) & ~(uintptr_t)1023);
    unsigned char *Ks = Qs + F3_QB, *Vs = Ks + F3_ST * F3_KB;
    uint64_t *full_k = (uint64_t *)(Qs + F3_BAR_OFF), *full_v = full_k + 2, *empty_k = full_k + 4, *empty_v = full_k + 6;
    int *pos_s = (int *)(full_k + 8);
    const int n_qb = (T + F3Q - 1) / F3Q, qb = n_qb - 1 - (int)(blockIdx.x / H), h = (int)(blockIdx.x % H), q0 = qb * F3Q;
    if (threadIdx.x == 0) {
        for (int s = 0; s < F3_ST; s++) {
            mbar_init(&full_k[s], 1);
            mbar_init(&full_v[s], 1);
            mbar_init(&empty_k[s], 8);   /* lane 0 of each consumer warp */
            mbar_init(&empty_v[s], 8);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if (threadIdx.x < F3Q) pos_s[threadIdx.x] = q0 + (int)threadIdx.x < T ? positions[t0 + q0 + threadIdx.x] : -1;
    __syncthreads();
    int wg = threadIdx.x >> 7;
    if (wg == 0) {   /* producer: one thread copies every tile the block's rows reach */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        if (threadIdx.x == 0) {
            int pmax = -1;
            for (int r = 0; r < F3Q; r++) pmax = max(pmax, pos_s[r]);
            const int nt = (pmax + F3N) / F3N, c_nope = h * 512, c_v = c_nope + 256;
            for (int k = 0; k < nt; k++) {
                int s = k & 1, kb = k * F3N, par = ((k >> 1) - 1) & 1;
                unsigned char *Kt = Ks + s * F3_KB, *Vt = Vs + s * F3_VB;
                if (k >= F3_ST) mbar_wait(&empty_k[s], par);
                mbar_expect_tx(&full_k[s], F3_KB);
                tma_load(Kt, &mkv, c_nope, kb, &full_k[s]);
                tma_load(Kt + F3_CH, &mkv, c_nope + 128, kb, &full_k[s]);
                tma_load(Kt + 2 * F3_CH, &mpe, 0, kb, &full_k[s]);
                if (k >= F3_ST) mbar_wait(&empty_v[s], par);
                mbar_expect_tx(&full_v[s], F3_VB);
                tma_load(Vt, &mkv, c_v, kb, &full_v[s]);
                tma_load(Vt + F3_CH, &mkv, c_v + 128, kb, &full_v[s]);
            }
        }
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    /* w through a shuffle: the compiler then knows it is the same across a warp (a wgmma it cannot prove warp-uniform
     * is serialized) */
    const int warp = threadIdx.x >> 5, w = __shfl_sync(0xffffffffu, wg - 1, 0), lane = threadIdx.x & 31;
    const int g = lane >> 2, tid = threadIdx.x & 127, rA = 64 * w + 16 * (warp & 3) + g, rB = rA + 8;
    /* the block's and this warpgroup's reach: tiles 0 .. nt - 1 are loaded, 0 .. nt_w - 1 computed here; tiles from
     * the first whose last row is above pmin need the causal mask. Rows past T (pos -1) take pmax_w: finite scores
     * that are never stored. */
    int pmax = -1, pmax_w = -1, pmin_w = 0x7fffffff;
    for (int r = 0; r < F3Q; r++) {
        int p = pos_s[r];
        pmax = max(pmax, p);
        if ((r >> 6) == w && p >= 0) {
            pmax_w = max(pmax_w, p);
            pmin_w = min(pmin_w, p);
        }
    }
    const int nt = (pmax + F3N) / F3N, reach_w = (pmax_w + F3N) / F3N, nt_w = __shfl_sync(0xffffffffu, reach_w, 0);
    f3_rows r;
    r.posA = pos_s[rA] >= 0 ? pos_s[rA] : pmax_w;
    r.posB = pos_s[rB] >= 0 ? pos_s[rB] : pmax_w;
    r.pmin = pmin_w;
    r.t = lane & 3;
    r.scale = scale;
    r.mA = r.mB = -INFINITY;
    r.lA = r.lB = 0.0f;

    f3_load_q(Qs, q, q0 + 64 * w, t0, T, H, h, w, tid);
    wg_fence_smem();   /* Q's stores visible to the MMAs */
    f3_bar_wg(w);

    const unsigned char *Qw = Qs + w * 64 * 128;   /* this warpgroup's 64 rows of every chunk */
    float o[64];
#pragma unroll
    for (int j = 0; j < 64; j++) o[j] = 0.0f;
    int k = 0;
    {
        uint32_t pa[8][4], pb[8][4];   /* P of the tile whose P V is in flight, and of the one being computed */
        float sacc[64], cA, cB;
        if (nt_w > 0) {
            mbar_wait(&full_k[0], 0);
            f3_scores(sacc, Qw, Ks);
            wg_wait0();
            if (lane == 0) mbar_arrive(&empty_k[0]);
            f3_softmax(sacc, pa, r, 0, cA, cB);   /* O is zero: no rescale */
            k = 1;
        }
        /* two steps a pass, P's register sets swapping roles (a copy between them would be scheduled among the
         * MMAs and make ptxas serialize them) */
        for (; k + 1 < nt_w; k += 2) {
            f3_ovl_step(o, sacc, pa, pb, r, Qw, Ks, Vs, full_k, full_v, empty_k, empty_v, k, lane);
            f3_ovl_step(o, sacc, pb, pa, r, Qw, Ks, Vs, full_k, full_v, empty_k, empty_v, k + 1, lane);
        }
        if (k < nt_w) {
            f3_ovl_step(o, sacc, pa, pb, r, Qw, Ks, Vs, full_k, full_v, empty_k, empty_v, k, lane);
            f3_ovl_last(o, pb, Vs, full_v, empty_v, nt_w, lane);
        } else if (nt_w > 0) {
            f3_ovl_last(o, pa, Vs, full_v, empty_v, nt_w, lane);
        }
    }
    for (k = nt_w; k < nt; k++) {   /* tiles only the other warpgroup's rows reach: released in order once loaded */
        const int s = k & 1, ph = (k >> 1) & 1;
        mbar_wait(&full_k[s], ph);
        if (lane == 0) mbar_arrive(&empty_k[s]);
        mbar_wait(&full_v[s], ph);
        if (lane == 0) mbar_arrive(&empty_v[s]);
    }
    float lA = r.lA, lB = r.lB;
    lA += __shfl_xor_sync(0xffffffffu, lA, 1);
    lA += __shfl_xor_sync(0xffffffffu, lA, 2);
    lB += __shfl_xor_sync(0xffffffffu, lB, 1);
    lB += __shfl_xor_sync(0xffffffffu, lB, 2);
    const float iA = 1.0f / lA, iB = 1.0f / lB;
    const int mrA = q0 + rA, mrB = q0 + rB, t = lane & 3;
#pragma unroll
    for (int j = 0; j < 16; j++) {
        int col = 8 * j + 2 * t;
        if (mrA < T) *(float2 *)(out + ((size_t)(t0 + mrA) * H + h) * 128 + col) = make_float2(o[4 * j] * iA, o[4 * j + 1] * iA);
        if (mrB < T) *(float2 *)(out + ((size_t)(t0 + mrB) * H + h) * 128 + col) = make_float2(o[4 * j + 2] * iB, o[4 * j + 3] * iB);
    }
}

/* The launch over kvb16 [L, H * 256] / kpe16 [L, 64] (BF16, 16-byte aligned); 0 where the tensor maps cannot be made
 * (no driver entry point, a shape TMA cannot describe): the caller runs v2. */
int cu_fa_prefill3_tc(float *out, const float *q, const __nv_bfloat16 *kvb16, const __nv_bfloat16 *kpe16,
                      const int32_t *positions, int t0, int T, int L, int H, float scale) {
    static int smem_set = 0;
    CUtensorMap mkv, mpe;
    memset(&mkv, 0, sizeof mkv);
    memset(&mpe, 0, sizeof mpe);
    if (!cu_tma_map(&mkv, kvb16, L, H * 512, F3N) || !cu_tma_map(&mpe, kpe16, L, 128, F3N)) return 0;
    if (!smem_set) {
        CUDA_CHECK(cudaFuncSetAttribute(fa_prefill3_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)F3_SMEM));
        CUDA_CHECK(cudaFuncSetAttribute(fa_prefill3o_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)F3_SMEM));
        smem_set = 1;
    }
    unsigned grid = (unsigned)(((T + F3Q - 1) / F3Q) * H);
    if (cu_fa3 == 2) fa_prefill3o_kernel<<<grid, F3_THREADS, F3_SMEM, cu_stream>>>(mkv, mpe, out, q, positions, t0, T, H, scale);
    else fa_prefill3_kernel<<<grid, F3_THREADS, F3_SMEM, cu_stream>>>(mkv, mpe, out, q, positions, t0, T, H, scale);
    CUDA_LAUNCH_CHECK();
    return 1;
}
