/* The MoE block of one token by intermediate ownership (issue 7, batch 1; DSINFER_CUDA_MOEO, opt-in; KERNELS.md "Batch 1
 * as tensor parallelism across SMs").
 *
 * The experts' work of one token is split the way tensor parallelism splits an MLP over GPUs, with a block in place of
 * a GPU: the intermediate rows of the shared experts and of the K chosen experts, laid end to end ([shared sI | choice 0
 * I | .. | choice K-1 I]), are cut into units of U rows (U EB = 16 bytes: 16 FP8 rows, 8 BF16 ones), and block b owns
 * units b, b + grid, ... For a unit it streams the U gate rows and the U up rows (x . row: U sums, then SiLU(g) u times
 * the choice's routing weight) and down's U columns as a strip of 16 bytes of each of its D rows (a 2-D TMA box of 16
 * bytes x 256 rows), and adds down[d][j..j+U) . its U products to its partial sum of every output d. Gate / up and down
 * need nothing from another block: no dependency inside the launch at all. At the end each block adds its partial
 * [D] onto out by one bulk reduction (cp.reduce.async.bulk .add.f32), out zeroed before the launch.
 *
 * The routing (router_fused: one kernel) runs before, so every block knows the choices from the start. Launches a layer:
 * the router, out's memset, this kernel: 3 where the graph's GEMV path has ~8 and moe1_kernel's one launch has three
 * grid barriers inside.
 *
 * Warp 0's lane 0 is the producer: 1-D bulk copies of a unit's rows (one copy where they are whole rows, D <= MO_PC;
 * else a copy a row of MO_PC columns a stage) and the down strip's boxes (MO_PC rows a stage) into a ring of nst 32 KB
 * stages, each stage's FP8 block scales coming by one more bulk copy with its bytes (gate / up: a row of their scales;
 * down: a row of a transposed copy of its scales, made with the maps). Warps 1 .. MO_CW consume: for gate / up stages
 * warp w takes rows w RW .. (RW = U / MO_CW), a lane the 16-byte chunks lane, lane + 32, .. of each, x from shared
 * memory read once for the RW rows; for down stages thread t takes rows t, t + 256, .. of the strip (16 bytes each, one
 * U-value dot) into its accumulators acc[d / 256]. The arithmetic is the grouped GEMV's (fp32 x, FP8 codes with their
 * 128 x 128 block scale, here applied once a 16-value chunk, or BF16; fp32 sums) in another order of additions, and the
 * weighted experts' outputs are added inside one sum: NMSE-level differences against the usual launches (op test moeo).
 *
 * The route form (opt.moeo 5, moeo_kernel<EB, true>, a cooperative launch) needs no router kernel and no memset: a tenth
 * warp of each block makes its share of the router's logits, meets the others at a split grid barrier and routes the
 * token itself (moeo_route) while the producer and consumers stream the shared experts' units, which need no routing.
 * Measured (bench/RESULTS.md, forty-fourth session, H100): form 1 (opt-in) makes FP8 b1 -7.4% and BF16 -5.3% a step
 * (moeo_kernel 37.1 us a layer, 1.87 TB/s); the route form saves ~0.9 us a layer more in BF16 only. */
#include <pthread.h>

#include "backend/cuda/cuda_route.h"
#include "backend/cuda/cuda_own.h"
#include "backend/cuda/cuda_wgmma.h"

#define MO_STAGE (32 * 1024)
#define MO_ST_MAX 6
#define MO_CW 8                         /* consumer warps */
#define MO_THREADS (32 + 32 * MO_CW + 32)   /* the producer warp, the consumers, the router warp (route form) */
#define MO_CT (32 * MO_CW)              /* consumer threads */
#define MO_PC 2048                      /* a stage: MO_PC columns of U gate / up rows, or MO_PC rows of the down strip */
#define MO_BOX 256                      /* the down strip's TMA box rows (16 bytes each) */
#define MO_NA 32                        /* a consumer thread's accumulators: D <= MO_NA MO_CT = 8192 */
#define MO_SMEM_MAX (227 * 1024)
#define MO_ROUTE_FORM 5                 /* opt.moeo's value for the route form (2 .. 4: the labs) */

typedef struct {
    const float *x;           /* [D] the token's normed hidden state */
    float *out;               /* [D] zero at the launch; every block's partial sums are added to it */
    const int32_t *ids;       /* [K] the chosen experts (router_fused's) */
    const float *w;           /* [K] their weights (scaled as the combine takes them) */
    const cu_wview *tab;      /* the layer's expert table (cuda_moe.cu moe_table): gate [E], up [E], down [E] */
    cu_wview sg, su, sd;      /* the shared experts as one MLP of sI rows (sI 0: none) */
    const CUtensorMap *maps;  /* [E + 1] the down matrices as strips (cu_tma_map_strip): expert e at e, the shared at E */
    const float *const *dst;  /* [E + 1] FP8: their block scales transposed, [I / 128][D / 128] (a strip's in a row) */
    const unsigned char *const *strips;   /* [E + 1] or NULL: the down matrices with each unit's strip contiguous,
                                           * [n_e / U][D][16 bytes] (opt.moeo_strips; mo_strips_kernel): a strip stage is
                                           * one bulk copy, not 16-byte pieces of 2048 rows gathered by TMA */
    int D, I, sI, K, E, nst;
    int l2ef;                 /* the weight copies with L2 evict_first (cu_l2ef's CU_L2EF_MOEO) */
    int lab;                  /* timing only, wrong sums (opt.moeo - 1): 1 the down strips read as contiguous 1-D copies
                               * of the same bytes, 2 no down stages at all, 3 the consumers skip the arithmetic (the
                               * stream alone) */
    /* the route form (opt.moeo 5; ids and w NULL): the router and the routing inside the launch (see moeo_route) */
    int route;
    cu_wview router, bias;    /* [E, D] BF16 or fp32; [E] noaux_tc's correction (data NULL: none) */
    float *logits;            /* [E] */
    unsigned *bar;            /* [2] the split grid barrier's count and generation (zero between launches) */
    route_cfg rc;
    /* the tail form (opt.moeo_tail, moeo_kernel<EB, false, true>, a cooperative launch; backend layer_tail1): once every
     * block's partial is in out, the next layer's input side: h += out, xn = RMSNorm(h) * nw (eps), q = xn . wq^T, kv =
     * xn . wkv^T, its rows in units of U (tail units t = b, b + grid, ..: wq's nq0 first, then wkv's), their weights
     * streamed by the producer right after the block's MoE units */
    float *h, *xn, *q, *kv;   /* [D], [D], [wq rows], [wkv rows] */
    cu_wview nw, wq, wkv;
    float eps;
    unsigned *cnt;            /* [2] the blocks' count (cumulative: each launch adds the grid) and the launches' epoch */
    int nq0, NQ;              /* tail units of wq, of both */
} mo_args;

/* unit u's matrices and first row j (within them); k: its choice (-1: the shared experts), m: its down map */
__device__ __forceinline__ void mo_unit(const mo_args &a, const int *ids, int u, int U, const cu_wview **g,
                                        const cu_wview **up, const cu_wview **dn, int *j, int *k, int *m) {
    const int r = u * U;
    if (r < a.sI) {
        *g = &a.sg;
        *up = &a.su;
        *dn = &a.sd;
        *j = r;
        *k = -1;
        *m = a.E;
        return;
    }
    const int kk = (r - a.sI) / a.I, e = ids[kk];
    *g = &a.tab[e];
    *up = &a.tab[a.E + e];
    *dn = &a.tab[2 * a.E + e];
    *j = r - a.sI - kk * a.I;
    *k = kk;
    *m = e;
}

/* the dot of a 16-byte chunk's U = 16 / EB values (times s, once) with iv [U] (shared memory, the same for every thread) */
template <int EB>
__device__ __forceinline__ float mo_dot_iv(uint4 q, float s, const float *iv) {
    const uint32_t wd[4] = {q.x, q.y, q.z, q.w};
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if constexpr (EB == 1) {
            float w[4];
            cu_fp8x4_raw(wd[i], w);
            acc += w[0] * iv[4 * i] + w[1] * iv[4 * i + 1] + w[2] * iv[4 * i + 2] + w[3] * iv[4 * i + 3];
        } else {
            acc += __uint_as_float(wd[i] << 16) * iv[2 * i] + __uint_as_float(wd[i] & 0xffff0000u) * iv[2 * i + 1];
        }
    }
    return EB == 1 ? acc * s : acc;
}

/* shared memory: the ring [nst][MO_STAGE] (1024-byte aligned), full [nst], empty [nst], routed [1] mbarriers, x [D], iv
 * [2][16] (a unit's SiLU products (x 16 bytes past routed: aligned), alternate units alternating), the stages' FP8 block scales [nst][MO_SC], ids [K] int,
 * wk [K]; the route form's lg, bs, s, b [E], g [MOE_MAX_GROUPS], red [32], taken [E] bytes */
#define MO_SC (MO_PC / 128)   /* a stage's block scales: its MO_PC columns of the unit's rows, or its MO_PC strip rows */
static CU_HD size_t mo_smem(int D, int K, int nst, int E) {
    return 1024 + (size_t)nst * MO_STAGE + (2 * (size_t)nst + 2) * 8 + (size_t)D * 4 + 2 * 16 * 4 + (size_t)nst * MO_SC * 4 +
           2 * (size_t)K * 4 + 4 * (size_t)E * 4 + (MOE_MAX_GROUPS + 32) * 4 + (size_t)E;
}

/* the tail form's shared memory past mo_smem's: the block's partial sums [D] (16-byte aligned; the ring keeps streaming
 * the tail's rows, so they cannot go into its first stage) */
static CU_HD size_t mo_smem_tail(int D, int K, int nst, int E) { return mo_smem(D, K, nst, E) + 16 + (size_t)D * 4; }

/* A consumer warp's RW rows of one matrix (U rows a unit, rp bytes a row in a stage) through the ring's stages: the
 * row sums p (zeroed first) of those rows against xs [D], its stages from it on (it advanced past them); each stage given
 * back once the warp has read it. lab3: the consumers skip the arithmetic (mo_args.lab 3, the stream alone). */
template <int EB, int RW>
__device__ __forceinline__ void mo_rows(float (&p)[RW], const unsigned char *ring, uint64_t *full, uint64_t *empty,
                                        const float *scs, const float *xs, int D, int nst, int rp, int cw, int lane,
                                        bool lab3, int &it) {
    constexpr int V = 16 / EB;
#pragma unroll
    for (int i = 0; i < RW; i++) p[i] = 0.0f;
    for (int c0 = 0; c0 < D; c0 += MO_PC, it++) {
        const int s = it % nst, nc = (D - c0 < MO_PC ? D - c0 : MO_PC) / V;   /* 16-byte chunks a row */
        const unsigned char *st = ring + (size_t)s * MO_STAGE;
        mbar_wait(&full[s], (it / nst) & 1);
#pragma unroll
        for (int mm = 0; mm < (lab3 ? 0 : MO_PC / V / 32); mm++) {   /* the warp's RW rows' chunk c together (x read once) */
            const int c = lane + 32 * mm;
            if (c < nc) {
                uint4 q[RW];
#pragma unroll
                for (int i = 0; i < RW; i++) q[i] = *(const uint4 *)(st + (size_t)(cw * RW + i) * rp + (size_t)c * 16);
                mo_dot<EB, RW>(q, EB == 1 ? scs[s * MO_SC + ((c * V) >> 7)] : 1.0f, xs + c0 + c * V, lane, p);
            }
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[s]);
    }
}

/* The consumers' down stages of a unit (its U products iv in shared memory): thread ct's rows ct, ct + MO_CT, .. of each
 * stage's strip into acc [d / MO_CT]; each stage given back once the warp has read it */
template <int EB>
__device__ __forceinline__ void mo_down(const mo_args &a, float (&acc)[MO_NA], const float *iv, const unsigned char *ring,
                                        uint64_t *full, uint64_t *empty, const float *scs, int D, int nst, int ct, int lane,
                                        int &it) {
#pragma unroll
    for (int pc = 0; pc < MO_NA * MO_CT / MO_PC; pc++) {
        const int d0 = pc * MO_PC;
        if (d0 >= D || a.lab == 2) break;
        const int s = it % nst;
        const unsigned char *st = ring + (size_t)s * MO_STAGE;
        mbar_wait(&full[s], (it / nst) & 1);
#pragma unroll
        for (int i = 0; i < MO_PC / MO_CT; i++) {
            const int d = d0 + ct + i * MO_CT;
            if (d < D && a.lab != 3) {
                const uint4 q = *(const uint4 *)(st + (size_t)(ct + i * MO_CT) * 16);
                const float sc = EB == 1 ? scs[s * MO_SC + ((ct + i * MO_CT) >> 7)] : 1.0f;
                acc[pc * (MO_PC / MO_CT) + i] += mo_dot_iv<EB>(q, sc, iv);
            }
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[s]);
        it++;
    }
}

/* ---- the tensor-core sums (TC: opt.moeo_tc, on by default; FP8 here, BF16's form further down) ----
 * One mma.sync m16n8k16 (f16 A and B, fp32 C) takes 16 weight rows x 16 columns against x in B's column 0 (x's high
 * f16 half) and column 1 (its low half): x = hi + lo to ~22 bits after a power-of-two scale that puts max |x| in
 * [2^13, 2^14), so hi never overflows f16; the FP8 codes become f16 exactly (cvt e4m3x2 -> f16x2, 8 a 16-byte chunk
 * against the fp32 decode's 24 conversions and 16 FMAs). A sum over K may take the columns in any order as long as A and
 * B take the same one, so lane (g, t) feeds its own loads to the MMA: a 16-byte chunk's word j (bytes 4j .. 4j + 3 of
 * row g) is A's (row g, k 2t, 2t + 1) and (row g, k 2t + 8, 2t + 9) of MMA j, and B's same k are x's f16 at those four
 * columns. Column 0 / 1 of C (hi / lo) land in lanes t = 0: c0 + c1 is row g's sum, c2 + c3 row g + 8's. */
__device__ __forceinline__ uint32_t mo_f16x2(uint32_t two_codes) {   /* (the low byte to the low half) */
    __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(two_codes & 0xffff), __NV_E4M3);
    return (uint32_t)h.x | ((uint32_t)h.y << 16);
}
/* c += A (16 x 16: rows g, g + 8 of lane (g, t): a0 = (g, 2t..), a1 = (g + 8, 2t..), a2 = (g, 2t + 8..), a3 = (g + 8,
 * 2t + 8..)) times B (16 x 8: b0 = (2t.., column g), b1 = (2t + 8.., g)); f16 operands, BF: bf16 */
template <bool BF = false>
__device__ __forceinline__ void mo_mma(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                       uint32_t b1) {
#define MO_MMA(T)                                                                                                        \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." T "." T ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, " \
                 "{%0, %1, %2, %3};\n"                                                                                   \
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                                        \
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1))
    if constexpr (BF)
        MO_MMA("bf16");
    else
        MO_MMA("f16");
#undef MO_MMA
}
/* v's high and low f16 halves after the scale sc (a power of two), packed as pairs: (hi, lo) of each value */
__device__ __forceinline__ void mo_split(float v, float sc, __half *hi, __half *lo) {
    const float w = v * sc;
    *hi = __float2half_rn(w);
    *lo = __float2half_rn(w - __half2float(*hi));
}
/* 2^(14 - e) where m = f 2^e (f in [0.5, 1)): max |v| times it in [2^13, 2^14); 1 for m = 0 (e clamped: a finite scale) */
__device__ __forceinline__ float mo_pow2_scale(float m) {
    int e = 0;
    frexpf(m, &e);
    e = m > 0.0f ? (e < -100 ? -100 : e > 100 ? 100 : e) : 14;
    return ldexpf(1.0f, 14 - e);
}

/* A consumer warp's part of one gate / up matrix on the tensor cores: the stages' 64-column groups q = cw, cw + MO_CW,
 * .. (all 16 rows of each), x's halves xh / xl [D] in shared memory; r[0], r[1]: the scaled sums of rows g and g + 8
 * over the warp's groups (meaningful in lanes t = 0; zero elsewhere); stages given back as mo_rows does */
__device__ __forceinline__ void mo_rows_tc(float (&r)[2], const unsigned char *ring, uint64_t *full, uint64_t *empty,
                                           const float *scs, const __half *xh, const __half *xl, int D, int nst, int rp,
                                           int cw, int lane, int &it) {
    const int g = lane >> 2, t = lane & 3;
    const __half *xb = g & 1 ? xl : xh;   /* B's column g: 0 hi, 1 lo, the rest zero */
    r[0] = r[1] = 0.0f;
    for (int c0 = 0; c0 < D; c0 += MO_PC, it++) {
        const int s = it % nst, ng = (D - c0 < MO_PC ? D - c0 : MO_PC) / 64;   /* 64-column groups in the stage */
        const unsigned char *st = ring + (size_t)s * MO_STAGE;
        mbar_wait(&full[s], (it / nst) & 1);
        for (int q = cw; q < ng; q += MO_CW) {
            const uint4 wa = *(const uint4 *)(st + (size_t)g * rp + q * 64 + t * 16);
            const uint4 wb = *(const uint4 *)(st + (size_t)(g + 8) * rp + q * 64 + t * 16);
            uint4 x0 = make_uint4(0, 0, 0, 0), x1 = x0;
            if (g < 2) {
                const uint4 *xp = (const uint4 *)(xb + c0 + q * 64 + t * 16);
                x0 = xp[0];
                x1 = xp[1];
            }
            const uint32_t A[4] = {wa.x, wa.y, wa.z, wa.w}, B8[4] = {wb.x, wb.y, wb.z, wb.w};
            const uint32_t X[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
            float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int j = 0; j < 4; j++)
                mo_mma(c, mo_f16x2(A[j]), mo_f16x2(B8[j]), mo_f16x2(A[j] >> 16), mo_f16x2(B8[j] >> 16), X[2 * j],
                       X[2 * j + 1]);
            const float sc = scs[s * MO_SC + (q >> 1)];   /* (a 64-column group lies in one 128-column block) */
            r[0] += sc * (c[0] + c[1]);
            r[1] += sc * (c[2] + c[3]);
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[s]);
    }
}

/* ldmatrix.x4 of 32 consecutive 16-byte rows at p (lane l's address: row l): m[v] = row 8v + g's 32-bit word t */
__device__ __forceinline__ void mo_ldsm4(const unsigned char *p, int lane, uint32_t (&m)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(m[0]), "=r"(m[1]), "=r"(m[2]), "=r"(m[3])
                 : "r"(cu_smem_addr(p + (size_t)lane * 16)));
}
/* The TC forms' down stages of a unit: for each stage (MO_PC strip rows), group(pc, i, st + 64 q 16) for the warp's
 * 64-row groups q = cw + MO_CW i that the stage holds; each stage given back once the warp has read it */
template <typename F>
__device__ __forceinline__ void mo_down_stages(const unsigned char *ring, uint64_t *full, uint64_t *empty, int D, int nst,
                                               int cw, int lane, int &it, F group) {
#pragma unroll
    for (int pc = 0; pc < MO_NA / 8; pc++) {
        const int d0 = pc * MO_PC;
        if (d0 >= D) break;
        const int s = it % nst, ng = (D - d0 < MO_PC ? D - d0 : MO_PC) / 64;
        const unsigned char *st = ring + (size_t)s * MO_STAGE;
        mbar_wait(&full[s], (it / nst) & 1);
#pragma unroll
        for (int i = 0; i < MO_PC / 64 / MO_CW; i++) {
            const int q = cw + MO_CW * i;
            if (q < ng) group(pc, i, q, s, st + (size_t)q * 64 * 16);
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[s]);
        it++;
    }
}

/* The consumers' down stages of a unit on the tensor cores: the unit's 16 products as f16 halves ivh / ivl (scaled by a
 * power of two; inv undoes it); warp cw takes the strip's 64-row groups q = cw, cw + MO_CW, .. of each stage, four MMAs
 * a group (rows 16 v .. 16 v + 15, A by ldmatrix: a 16-byte strip row is 8 b16 of an 8 x 8 matrix, so lane (g, t)
 * receives row g's bytes 4t .. 4t + 3). MMA v's B holds the halves in columns 2v (hi) and 2v + 1 (lo) only, so the
 * four MMAs add into one C and lane (g, t) ends with MMA t's rows: c0 + c1 row 16t + g, c2 + c3 row 16t + g + 8.
 * acc[pc * 8 + 2i + h]: row pc MO_PC + 64 (cw + MO_CW i) + 16t + g + 8h (mo_tc_row) */
__device__ __forceinline__ int mo_tc_row(int pc, int i, int h, int cw, int lane) {
    return pc * MO_PC + 64 * (cw + MO_CW * i) + 16 * (lane & 3) + (lane >> 2) + 8 * h;
}
__device__ __forceinline__ void mo_down_tc(const mo_args &a, float (&acc)[MO_NA], const __half *ivh, const __half *ivl,
                                           float inv, const unsigned char *ring, uint64_t *full, uint64_t *empty,
                                           const float *scs, int D, int nst, int cw, int lane, int &it) {
    const int g = lane >> 2, t = lane & 3;
    const uint2 bv = *(const uint2 *)((g & 1 ? ivl : ivh) + 4 * t);   /* B's column g at k 4t .. 4t + 3 */
    mo_down_stages(ring, full, empty, D, nst, cw, lane, it, [&](int pc, int i, int q, int s, const unsigned char *grp) {
        float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int hv = 0; hv < 2; hv++) {   /* MMAs 2hv, 2hv + 1: rows 32hv .. 32hv + 31 of the group */
            uint32_t m[4];
            mo_ldsm4(grp + 32 * hv * 16, lane, m);
            const bool on0 = (g >> 1) == 2 * hv, on1 = (g >> 1) == 2 * hv + 1;
            mo_mma(c, mo_f16x2(m[0]), mo_f16x2(m[1]), mo_f16x2(m[0] >> 16), mo_f16x2(m[1] >> 16), on0 ? bv.x : 0u,
                   on0 ? bv.y : 0u);
            mo_mma(c, mo_f16x2(m[2]), mo_f16x2(m[3]), mo_f16x2(m[2] >> 16), mo_f16x2(m[3] >> 16), on1 ? bv.x : 0u,
                   on1 ? bv.y : 0u);
        }
        const float sc = scs[s * MO_SC + (q >> 1)] * inv;   /* (64 rows in one 128-row block) */
        acc[pc * 8 + 2 * i] += sc * (c[0] + c[1]);
        acc[pc * 8 + 2 * i + 1] += sc * (c[2] + c[3]);
    });
}

/* BF16 (EB 2, U = 8 rows a unit) on the tensor cores: mma.sync m16n8k16 bf16 takes the rows as they are (no
 * conversion); x and the products as three bf16 parts (hi + mid + lo: ~24 bits, bf16 has fp32's range: no scale) in B's
 * columns 0 .. 2. Gate / up: A's rows 0 .. 7 the unit's (rows 8 .. 15 zero), a 16-byte chunk (8 values) two MMAs: words
 * 2jj, 2jj + 1 as (row g, k 2t ..) and (row g, k 2t + 8 ..); C's columns 0, 1 land in lane t = 0, column 2 in t = 1
 * (summed by one shuffle at the end; no block scales: C adds over the whole row). The MMAs: mo_mma<true>.
 * mo_split3: v as its three bf16 parts (hi + mid + lo). */
__device__ __forceinline__ void mo_split3(float v, __nv_bfloat16 *hi, __nv_bfloat16 *mid, __nv_bfloat16 *lo) {
    *hi = __float2bfloat16_rn(v);
    const float r = v - __bfloat162float(*hi);
    *mid = __float2bfloat16_rn(r);
    *lo = __float2bfloat16_rn(r - __bfloat162float(*mid));
}
/* mo_rows_tc for BF16: the stages' 32-column (64-byte) groups q = cw, cw + MO_CW, .. of the unit's 8 rows, x's parts xp[3]
 * [D]; r: this warp's sum of row g (lane t = 0) */
__device__ __forceinline__ void mo_rows_tcb(float &r, const unsigned char *ring, uint64_t *full, uint64_t *empty,
                                            const __nv_bfloat16 *const *xp, int D, int nst, int rp, int cw, int lane,
                                            int &it) {
    const int g = lane >> 2, t = lane & 3;
    const __nv_bfloat16 *xb = g == 0 ? xp[0] : g == 1 ? xp[1] : xp[2];   /* B's column g: 0 hi, 1 mid, 2 lo, the rest zero */
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int c0 = 0; c0 < D; c0 += MO_PC, it++) {
        const int s = it % nst, ng = (D - c0 < MO_PC ? D - c0 : MO_PC) / 32;   /* 32-column groups in the stage */
        const unsigned char *st = ring + (size_t)s * MO_STAGE;
        mbar_wait(&full[s], (it / nst) & 1);
        for (int q = cw; q < ng; q += MO_CW) {
            const uint4 w = *(const uint4 *)(st + (size_t)g * rp + q * 64 + t * 16);
            uint4 x = make_uint4(0, 0, 0, 0);
            if (g < 3) x = *(const uint4 *)(xb + c0 + q * 32 + t * 8);
            mo_mma<true>(c, w.x, 0u, w.y, 0u, x.x, x.y);
            mo_mma<true>(c, w.z, 0u, w.w, 0u, x.z, x.w);
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[s]);
    }
    r = c[0] + c[1];   /* (lane t = 1: column 2 and column 3, which is zero) */
    r += __shfl_down_sync(0xffffffffu, r, 1);
}
/* mo_down_tc for BF16: a strip row is the unit's 8 values (k 0 .. 7: A's a0 by ldmatrix, a2 = a3 = 0); the products'
 * parts ivp[3] in B's columns 0 .. 2 for the group's MMAs 0, 2 and 4 .. 6 for MMAs 1, 3 (rows 16 .. 31 of each 32), so
 * two MMAs share a C: c0 + c1 and c2 + c3 of lanes t, t + 1 (t even) are the rows' sums, one shuffle down (row g) and one
 * up (row g + 8). acc[pc * 8 + 2i + hv]: row mo_tcb_row(pc, i, hv, cw, lane) */
__device__ __forceinline__ int mo_tcb_row(int pc, int i, int hv, int cw, int lane) {
    const int t = lane & 3;
    return pc * MO_PC + 64 * (cw + MO_CW * i) + 32 * hv + 16 * (t >> 1) + 8 * (t & 1) + (lane >> 2);
}
__device__ __forceinline__ void mo_down_tcb(float (&acc)[MO_NA], const __nv_bfloat16 *const *ivp, const unsigned char *ring,
                                            uint64_t *full, uint64_t *empty, int D, int nst, int cw, int lane, int &it) {
    const int g = lane >> 2, t = lane & 3;
    /* B's column g: variant 0 (g 0 .. 2) and variant 1 (g 4 .. 6) carry the parts at k 2t, 2t + 1 */
    const int pt = g & 3;
    const uint32_t bv = pt < 3 ? *(const uint32_t *)((pt == 0 ? ivp[0] : pt == 1 ? ivp[1] : ivp[2]) + 2 * t) : 0u;
    const uint32_t b_v0 = g < 4 ? bv : 0u, b_v1 = g >= 4 ? bv : 0u;
    mo_down_stages(ring, full, empty, D, nst, cw, lane, it, [&](int pc, int i, int, int, const unsigned char *grp) {
#pragma unroll
        for (int hv = 0; hv < 2; hv++) {   /* rows 32hv .. 32hv + 31 of the group: MMA (m0, m1) and (m2, m3) */
            uint32_t m[4];
            mo_ldsm4(grp + 32 * hv * 16, lane, m);
            float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            mo_mma<true>(c, m[0], m[1], 0u, 0u, b_v0, 0u);
            mo_mma<true>(c, m[2], m[3], 0u, 0u, b_v1, 0u);
            const float e = c[0] + c[1], f = c[2] + c[3];
            const float en = __shfl_down_sync(0xffffffffu, e, 1), fu = __shfl_up_sync(0xffffffffu, f, 1);
            acc[pc * 8 + 2 * i + hv] += t & 1 ? f + fu : e + en;
        }
    });
}

/* TC's shared memory (16-byte aligned at its start): the warps' partial row sums [2][MO_CW][16], the warps' max |x|
 * [MO_CW], the unit products' parts [3][2][16] (FP8: 2 f16 halves; BF16: 3 bf16 parts), their inverse scales [2]; BF16
 * also x's third part [D] (its first two take xs's place) */
#define MO_TC_SMEM (16 + 2 * MO_CW * 16 * 4 + MO_CW * 4 + 3 * 2 * 16 * 2 + 16)
static size_t mo_tc_bytes(int eb, int D) { return MO_TC_SMEM + (eb == 2 ? 2 * (size_t)D : 0); }
/* the bytes mo_smem's layout lacks for TC's area: all of it in the route form, else what the unused route area (4E
 * floats, MOE_MAX_GROUPS + 32 floats, E bytes) does not hold (FP8 none from E = 55 up: the ring's depth as without TC) */
static size_t mo_tc_extra(int route, int E, int eb, int D) {
    const size_t area = 4 * (size_t)E * 4 + (MOE_MAX_GROUPS + 32) * 4 + (size_t)E, need = mo_tc_bytes(eb, D);
    return route ? need : area >= need ? 0 : need - area;
}

/* The producer's stages of one gate / up matrix's rows j .. j + U (W [rows, D]): MO_PC columns a stage, its FP8 block
 * scales (one block row: the unit's rows) by one more bulk copy with it; each stage taken once the consumers gave it back */
template <int EB>
__device__ __forceinline__ void mo_put_rows(const mo_args &a, const cu_wview &W, int j, unsigned char *ring, uint64_t *full,
                                            uint64_t *empty, float *scs, int &it, uint64_t pol) {
    constexpr int U = 16 / EB;
    const int D = a.D, nst = a.nst;
    const unsigned char *base = (const unsigned char *)W.data + (size_t)j * D * EB;
    for (int c0 = 0; c0 < D; c0 += MO_PC, it++) {
        const int s = it % nst, len = (D - c0 < MO_PC ? D - c0 : MO_PC) * EB;
        const int scb = EB == 1 ? len / 128 * 4 : 0;   /* the unit's rows: one block row of scales */
        if (it >= nst) mbar_wait(&empty[s], (it / nst - 1) & 1);
        mbar_expect_tx(&full[s], U * len + scb);
        if (EB == 1)
            bulk_load(scs + s * MO_SC, W.scale + (size_t)(j >> 7) * W.scale_cols + (size_t)(c0 >> 7), scb, &full[s]);
        if (D <= MO_PC)   /* whole rows: the unit's U rows are one contiguous block, one copy */
            bulk_load_stream(ring + (size_t)s * MO_STAGE, base, U * len, &full[s], a.l2ef, pol);
        else   /* a piece of each row (rows MO_PC EB bytes apart in the stage) */
            for (int r = 0; r < U; r++)
                bulk_load_stream(ring + (size_t)s * MO_STAGE + (size_t)r * MO_PC * EB, base + ((size_t)r * D + c0) * EB, len, &full[s], a.l2ef, pol);
    }
}

/* The producer's stages of a unit's down strip (columns j .. j + U of down map m; dn its matrix, for lab 1): MO_PC rows
 * a stage by TMA boxes, its FP8 scales (a row of the transposed copy) with it */
template <int EB>
__device__ __forceinline__ void mo_put_strip(const mo_args &a, const cu_wview *dn, int m, int j, unsigned char *ring,
                                             uint64_t *full, uint64_t *empty, float *scs, int &it, uint64_t pol) {
    const int D = a.D, nst = a.nst;
    for (int d0 = 0; d0 < D && a.lab != 2; d0 += MO_PC, it++) {
        const int s = it % nst, rows = D - d0 < MO_PC ? D - d0 : MO_PC;
        const int scb = EB == 1 ? rows / 128 * 4 : 0;   /* the strip's 128-row blocks: a row of the transposed scales */
        if (it >= nst) mbar_wait(&empty[s], (it / nst - 1) & 1);
        mbar_expect_tx(&full[s], rows * 16 + scb);
        if (EB == 1)
            bulk_load(scs + s * MO_SC, a.dst[m] + (size_t)(j >> 7) * (D / 128) + (size_t)(d0 >> 7), scb, &full[s]);
        if (a.strips)   /* the strip-layout copy: the stage's rows d0 .. d0 + rows of unit j / U, contiguous */
            bulk_load_stream(ring + (size_t)s * MO_STAGE, a.strips[m] + ((size_t)(j / (16 / EB)) * D + d0) * 16, rows * 16,
                             &full[s], a.l2ef, pol);
        else if (a.lab == 1)   /* (lab) the strip's bytes as one contiguous copy from the matrix's start */
            bulk_load(ring + (size_t)s * MO_STAGE, (const unsigned char *)dn->data + (size_t)d0 * 16, rows * 16, &full[s]);
        else
            for (int b = 0; b < rows; b += MO_BOX)
                tma_load_stream(ring + (size_t)s * MO_STAGE + (size_t)b * 16, &a.maps[m], j * EB, d0 + b, &full[s], a.l2ef, pol);
    }
}

/* the route form's router warp (block b): out zeroed (block 0), the router's logits t = b, b + grid, .. of x into
 * a.logits, then the split grid barrier (every block's warp: the generation read, the count's add; the last to add puts
 * it back to zero and moves the generation, the others poll it: cu_grid_sync's steps with one warp a block), then the
 * routing of all E logits by route_warp into ids, wk; lane 0 arrives on routed (release: the choices, and out's zeros
 * as the barrier made them visible, for the producer and the consumers, who wait on it before their first routed unit
 * and before their reduction onto out). The producer and consumers stream the shared experts' units meanwhile. */
__device__ __forceinline__ void moeo_route(const mo_args &a, int *ids, float *wk, float *lg, float *bs, float *s, float *b,
                                           float *g, float *red, unsigned char *taken, uint64_t *routed) {
    const int lane = threadIdx.x & 31, D = a.D, E = a.rc.E;
    if (blockIdx.x == 0) {
        for (int i = lane; i < D / 4; i += 32) ((float4 *)a.out)[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        asm volatile("fence.proxy.async.global;\n" ::: "memory");   /* the zeros before the blocks' bulk reductions */
    }
    const bool rbf = a.router.dtype == DS_DTYPE_BF16;
    const int V = rbf ? 8 : 4, nc = D / V;   /* 16-byte chunks of a router row */
    for (int t = blockIdx.x; t < E; t += gridDim.x) {
        const unsigned char *row = (const unsigned char *)a.router.data + (size_t)t * D * (rbf ? 2 : 4);
        float acc = 0.0f;
        for (int c = lane; c < nc; c += 32) {
            const uint4 q = __ldg((const uint4 *)row + c);
            const float *xv = a.x + (size_t)c * V;
            if (rbf) {
                const float4 x0 = __ldg((const float4 *)xv), x1 = __ldg((const float4 *)xv + 1);
                acc += __uint_as_float(q.x << 16) * x0.x + __uint_as_float(q.x & 0xffff0000u) * x0.y +
                       __uint_as_float(q.y << 16) * x0.z + __uint_as_float(q.y & 0xffff0000u) * x0.w +
                       __uint_as_float(q.z << 16) * x1.x + __uint_as_float(q.z & 0xffff0000u) * x1.y +
                       __uint_as_float(q.w << 16) * x1.z + __uint_as_float(q.w & 0xffff0000u) * x1.w;
            } else {
                const float4 x0 = __ldg((const float4 *)xv);
                acc += __uint_as_float(q.x) * x0.x + __uint_as_float(q.y) * x0.y + __uint_as_float(q.z) * x0.z +
                       __uint_as_float(q.w) * x0.w;
            }
        }
        acc = cu_warp_sum(acc);
        if (lane == 0) a.logits[t] = acc;
    }
    __syncwarp();
    if (lane == 0) {
        unsigned gen, old, v;
        __threadfence();   /* this warp's logits (and block 0's zeros) before the count */
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(gen) : "l"(a.bar + 1) : "memory");
        asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(a.bar) : "memory");
        if (old == gridDim.x - 1) {
            asm volatile("st.relaxed.gpu.global.u32 [%0], 0;" ::"l"(a.bar) : "memory");
            asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(a.bar + 1) : "memory");
        } else {
            do {
                asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(a.bar + 1) : "memory");
            } while (v == gen);
        }
        __threadfence();
    }
    __syncwarp();
    for (int e = lane; e < E; e += 32) {
        lg[e] = __ldcg(a.logits + e);   /* (other blocks' writes: from L2) */
        if (a.bias.data) bs[e] = cu_w(a.bias, 0, e);
    }
    __syncwarp();
    route_warp(lg, a.bias.data ? bs : NULL, ids, wk, 0, a.rc, s, b, g, taken, red);
    __syncwarp();
    if (lane == 0) mbar_arrive(routed);
}

/* MOEO_PROF (a diagnostic build, -DMOEO_PROF; dev/cuda/build_prof.sh): every block of moeo_kernel stamps %globaltimer
 * (ns, one clock for all SMs) into moeo_prof_t[TAIL][block]: [0] entry, [1] the producer's last copy issued, [2] the
 * consumers' MoE units done, [3] the block's sums' reduction onto out complete, and in the tail form [4] the count
 * passed, [5] the tail's rows done, [6] h + out and the norm done (xn in shared memory), [7] its first tail unit done,
 * [8] the norm step's reads of out done (its sum of squares' barrier passed), [9] thread 0's xn written (its norm weights
 * read): where the norm step's 15 us go (forty-eighth session, RESULTS run 2); [10] thread 0's norm weights in registers
 * (between [8] and [9]: 13.6 us of them in the forty-ninth session's run 1).
 * cu_moeo_prof_print (at the backend's destroy) prints each stamp's quantiles over the blocks of each form's last
 * launch, from that launch's earliest entry. Why: the tail form's launch took 65 us against
 * the plain form's 37 (ncu, s47a) where ~42 were predicted; where the difference goes decides what to change. */
#ifdef MOEO_PROF
#include "backend/cuda/cuda_prof.h"
#define MO_PROF_MAXB 1024
#define MO_PROF_N 11
__device__ unsigned long long moeo_prof_t[2][MO_PROF_MAXB][MO_PROF_N];
__device__ __forceinline__ void mo_prof_stamp(int form, int k) {
    if (blockIdx.x < MO_PROF_MAXB) {
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        moeo_prof_t[form][blockIdx.x][k] = t;
    }
}
#define MO_STAMP(form, k) mo_prof_stamp(form, k)
static int mo_prof_grid[2];   /* each form's last launch's grid */
extern "C" void cu_moeo_prof_print(void) {
    static unsigned long long t[2][MO_PROF_MAXB][MO_PROF_N];
    static const char *name[MO_PROF_N] = {"entry", "producer done", "units done", "sums reduced", "count passed",
                                          "tail done", "norm done", "tail unit 1", "out read", "xn written",
                                          "norm w read"};
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpyFromSymbol(t, moeo_prof_t, sizeof(t)));
    for (int f = 0; f < 2; f++) {
        const int n = mo_prof_grid[f] < MO_PROF_MAXB ? mo_prof_grid[f] : MO_PROF_MAXB;
        if (n <= 0) continue;
        unsigned long long t0 = ~0ull;
        for (int b = 0; b < n; b++) t0 = t[f][b][0] < t0 ? t[f][b][0] : t0;
        double *v = (double *)malloc(sizeof(double) * (size_t)n);
        for (int k = 0; k < (f ? MO_PROF_N : 4); k++) {
            for (int b = 0; b < n; b++) v[b] = (double)(t[f][b][k] - t0) * 1e-3;
            cu_prof_quantiles(stderr, f ? "moeo-prof tail " : "moeo-prof plain", 13, name[k], v, n);
        }
        free(v);
    }
}
#else
#define MO_STAMP(form, k) do { } while (0)
#endif

/* The tail form's consumers (MO_CT threads, after the block's last MoE stage; it: the stages taken so far). The block's
 * partial sums acc go onto out by one bulk reduction (from their own buffer past mo_smem's: the ring is streaming the
 * tail's rows); once it is complete, the block's count onto a.cnt[0] by a proxy fence and a gpu-scope release,
 * thread 0 waits until the count reaches the launch's target ((epoch + 1) grid, a.cnt[1] the epoch, read at the start
 * by every block before its own add: block 0 moves it after passing), then
 * every block makes h + out and its RMS itself (block 0 writes h and xn back), xn into xs, and consumes its tail units as
 * gate / up's stages of one matrix, each row's sum into q or kv. */
template <int EB>
__device__ __forceinline__ void moeo_tail(const mo_args &a, const float (&acc)[MO_NA], unsigned char *ring, uint64_t *full,
                                          uint64_t *empty, const float *scs, float *xs, int it) {
    constexpr int U = 16 / EB, RW = U / MO_CW;
    const int ct = threadIdx.x - 32, cw = ct >> 5, lane = threadIdx.x & 31, D = a.D, nst = a.nst;
    extern __shared__ unsigned char mo_raw[];
    unsigned char *tail0 = (unsigned char *)(((uintptr_t)mo_raw + mo_smem(D, a.K, nst, a.rc.E) + 15) & ~(uintptr_t)15);
    float *part = (float *)tail0, *red = part;   /* (red: the norm's warp sums, after the reduction has read part) */
    unsigned epoch = 0;   /* (thread ct 0's alone: a static shared word would pass the 227 KB the launch asks with MO_SMEM_MAX) */
    float hv[MO_NA];   /* h, read before this block's count: block 0 writes h + out back once every block has counted */
#pragma unroll
    for (int i = 0; i < MO_NA; i++) hv[i] = ct + i * MO_CT < D ? __ldcg(a.h + ct + i * MO_CT) : 0.0f;
    /* the next layer's input-norm weight towards L2 now, ~10 us before the norm reads it: MOEO_PROF measured 13.6 us
     * between the norm step's sum of squares and xn written, where those reads are the only global loads (the forty-ninth
     * session, RESULTS run 1); its lines, 128 bytes a consumer thread */
    const int nwb = a.nw.dtype == DS_DTYPE_F32 ? 4 : a.nw.dtype == DS_DTYPE_NVFP4 ? 0 : a.nw.dtype == DS_DTYPE_F8_E4M3 ? 1 : 2;
    cu_prefetch_l2(a.nw.data, (size_t)D * nwb, ct, MO_CT);
    if (ct == 0) {
        epoch = __ldcg(a.cnt + 1);   /* (before this block's add: no block has passed the count yet) */
    }
#pragma unroll
    for (int i = 0; i < MO_NA; i++)
        if (ct + i * MO_CT < D) part[ct + i * MO_CT] = acc[i];
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    asm volatile("bar.sync 1, %0;\n" ::"n"(MO_CT) : "memory");
    if (ct == 0) {
        asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n"
                     "cp.async.bulk.commit_group;\n"
                     "cp.async.bulk.wait_group 0;\n" ::"l"(a.out), "r"(cu_smem_addr(part)), "r"(D * 4)
                     : "memory");
        MO_STAMP(1, 3);
        /* the count by the book: the sums' writes (complete, seen by this thread) ordered before a gpu-scope release.
         * (The forty-sixth session's other writer, a bulk add of the count after the sums' bulk reduction with no
         * release, gave stale sums to the readers in op test moeotail on V2-Lite FP8: the forty-seventh session's
         * s47a, h NMSE 1e-4 .. 2e-3. Removed.) */
        asm volatile("fence.proxy.async.global;\n"
                     "red.release.gpu.global.add.u32 [%0], 1;\n" ::"l"(a.cnt)
                     : "memory");
        const unsigned target = (epoch + 1u) * gridDim.x;
        unsigned v;
        do {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(a.cnt) : "memory");
        } while ((int)(v - target) < 0);
        MO_STAMP(1, 4);
        asm volatile("fence.proxy.async.global;\n" ::: "memory");   /* (the other blocks' sums came by the async proxy) */
        if (blockIdx.x == 0) __stcg(a.cnt + 1, epoch + 1u);   /* the next launch's epoch */
    }
    asm volatile("bar.sync 1, %0;\n" ::"n"(MO_CT) : "memory");   /* every block's sums in out */
    /* h + out, its sum of squares, xn into xs (x is no longer needed: every MoE unit is done) */
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < MO_NA; i++) {
        const int d = ct + i * MO_CT;
        if (d < D) {
            hv[i] += __ldcg(a.out + d);
            ss += hv[i] * hv[i];
        }
    }
    ss = cu_warp_sum(ss);
    if (lane == 0) red[cw] = ss;   /* (part was read by the completed reduction) */
    asm volatile("bar.sync 1, %0;\n" ::"n"(MO_CT) : "memory");
    if (ct == 0) MO_STAMP(1, 8);
    float tot = 0.0f;
#pragma unroll
    for (int w = 0; w < MO_CW; w++) tot += red[w];
    const float r = 1.0f / sqrtf(tot / (float)D + a.eps);
    float nv[MO_NA];   /* the norm weights, every load issued before any is used */
#pragma unroll
    for (int i = 0; i < MO_NA; i++) nv[i] = ct + i * MO_CT < D ? cu_w(a.nw, 0, ct + i * MO_CT) : 0.0f;
    if (ct == 0) MO_STAMP(1, 10);
#pragma unroll
    for (int i = 0; i < MO_NA; i++) {
        const int d = ct + i * MO_CT;
        if (d < D) {
            const float xv = hv[i] * r * nv[i];
            xs[d] = xv;
            if (blockIdx.x == 0) {
                a.h[d] = hv[i];
                a.xn[d] = xv;
            }
        }
    }
    if (ct == 0) MO_STAMP(1, 9);
    asm volatile("bar.sync 1, %0;\n" ::"n"(MO_CT) : "memory");   /* xn in xs */
    if (ct == 0) MO_STAMP(1, 6);
    const int rp = (D < MO_PC ? D : MO_PC) * EB;
    for (int t = blockIdx.x; t < a.NQ; t += gridDim.x) {
        float p[RW];
        mo_rows<EB, RW>(p, ring, full, empty, scs, xs, D, nst, rp, cw, lane, false, it);
        float *o = t < a.nq0 ? a.q : a.kv;
        const int j = (t < a.nq0 ? t : t - a.nq0) * U + cw * RW;
#pragma unroll
        for (int i = 0; i < RW; i++) {
            const float sum = cu_warp_sum(p[i]);
            if (lane == 0) o[j + i] = sum;
        }
        if (ct == 0 && t == (int)blockIdx.x) MO_STAMP(1, 7);
    }
    if (ct == 0) MO_STAMP(1, 5);
}

/* EB: the experts' bytes an element (1 FP8, 2 BF16); ROUTE: the route form (a.route; its own instantiation: with the
 * router warp's code in it the compiler moved the streaming loops' sums to local memory, FP8 b1 +0.17 ms a step in
 * both forms, s44e, and as a call the route form faulted). Grid: a block an SM (the route form: a cooperative launch;
 * else no block waits for another); MO_THREADS threads; mo_smem() bytes of dynamic shared memory. */
template <int EB, bool ROUTE, bool TAIL = false, bool TC = false>
__global__ void __launch_bounds__(MO_THREADS, 1) moeo_kernel(const mo_args a) {
    static_assert(!TC || !TAIL, "the tensor-core sums: plain and route forms");
    constexpr int U = 16 / EB, RW = U / MO_CW;
    extern __shared__ unsigned char mo_raw[];
    unsigned char *ring = (unsigned char *)(((uintptr_t)mo_raw + 1023) & ~(uintptr_t)1023);
    const int nst = a.nst, D = a.D;
    uint64_t *full = (uint64_t *)(ring + (size_t)nst * MO_STAGE), *empty = full + nst, *routed = empty + nst;
    float *xs = (float *)(routed + 2), *ivs = xs + D, *scs = ivs + 32;   /* (x and the scales 16-byte aligned) */
    int *ids = (int *)(scs + nst * MO_SC);
    float *wk = (float *)(ids + a.K);
    const int NU = (a.sI + a.K * a.I) / U, E = a.rc.E;
    /* TC's area (mo_tc_bytes): tcp [2][MO_CW][16], tcm [MO_CW], the products' parts [3][2][16], ivinv [2], (BF16) x's
     * third part [D]; past the route form's area in that form, else in its place (mo_tc_extra) */
    float *tcp = (float *)(((uintptr_t)(ROUTE ? (unsigned char *)(wk + a.K + 4 * E + MOE_MAX_GROUPS + 32) + E
                                              : (unsigned char *)(wk + a.K)) + 15) & ~(uintptr_t)15);
    float *tcm = tcp + 2 * MO_CW * 16;
    __half *ivh = (__half *)(tcm + MO_CW), *ivl = ivh + 32;
    float *ivinv = (float *)(ivh + 96);
    __nv_bfloat16 *ivb = (__nv_bfloat16 *)ivh;   /* BF16: parts [3][2][16] */
    __nv_bfloat16 *xl3 = (__nv_bfloat16 *)(tcp + 316);   /* BF16: x's third part (byte 1264, past ivinv: 16-byte aligned) */
    if (!ROUTE && !TAIL && (int)blockIdx.x >= NU) return;   /* (the route and tail forms: every block takes part in their counts) */
    if (threadIdx.x == 0) {
        MO_STAMP(TAIL, 0);
        for (int s = 0; s < nst; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], MO_CW);
        }
        mbar_init(routed, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();   /* (the barriers ready: the producer starts at once, the consumers load x and the choices first) */
    if (threadIdx.x >= 32 + MO_CT) {   /* the router warp */
        if constexpr (!ROUTE) return;
        float *lg = wk + a.K, *bs = lg + E, *s = bs + E, *b = s + E, *g = b + E, *red = g + MOE_MAX_GROUPS;
        moeo_route(a, ids, wk, lg, bs, s, b, g, red, (unsigned char *)(red + 32), routed);
        return;
    }

    if (threadIdx.x < 32) {   /* the producer: one thread; a stage's FP8 block scales come by a bulk copy with its bytes */
        if (threadIdx.x) return;
        const uint64_t pol = cu_l2_evict_first();   /* (used where a.l2ef) */
        int it = 0, seen = 0;
        for (int u = blockIdx.x; u < NU; u += gridDim.x) {
            const cu_wview *g, *up, *dn;
            int j, k, m;
            if (ROUTE && !seen && u * U >= a.sI) {   /* the first routed unit: the block's routing done */
                mbar_wait(routed, 0);
                seen = 1;
            }
            /* (the choices: the router warp's, or router_fused's in global memory) */
            mo_unit(a, ROUTE ? ids : a.ids, u, U, &g, &up, &dn, &j, &k, &m);
            for (int mat = 0; mat < 2; mat++) mo_put_rows<EB>(a, mat ? *up : *g, j, ring, full, empty, scs, it, pol);
            mo_put_strip<EB>(a, dn, m, j, ring, full, empty, scs, it, pol);
        }
        if constexpr (TAIL)   /* the next layer's q / kv_a rows: their stages as gate / up's (U rows, MO_PC columns a stage) */
            for (int t = blockIdx.x; t < a.NQ; t += gridDim.x)
                mo_put_rows<EB>(a, t < a.nq0 ? a.wq : a.wkv, (t < a.nq0 ? t : t - a.nq0) * U, ring, full, empty, scs, it, pol);
        MO_STAMP(TAIL, 1);
        return;
    }

    const int ct = threadIdx.x - 32, cw = ct >> 5, lane = threadIdx.x & 31;
    const int rp = (D < MO_PC ? D : MO_PC) * EB;   /* a gate / up row's bytes in a stage */
    __half *xh = (__half *)xs, *xl = xh + D;   /* TC: x's halves in xs's place */
    float xinv = 1.0f;                          /* TC: 1 / their scale */
    if constexpr (TC && EB == 2) {   /* x's three bf16 parts: hi, mid in xs's place, lo in TC's area */
        __nv_bfloat16 *x0 = (__nv_bfloat16 *)xs, *x1 = x0 + D;
        for (int i = ct; i < D; i += MO_CT) mo_split3(__ldg(a.x + i), x0 + i, x1 + i, xl3 + i);
    } else if constexpr (TC) {
        float m = 0.0f;
        for (int i = ct; i < D / 4; i += MO_CT) {
            const float4 v = __ldg((const float4 *)a.x + i);
            m = fmaxf(m, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
        }
        m = cu_warp_max(m);
        if (lane == 0) tcm[cw] = m;
        asm volatile("bar.sync 1, %0;\n" ::"n"(MO_CT) : "memory");
#pragma unroll
        for (int w = 0; w < MO_CW; w++) m = fmaxf(m, tcm[w]);
        const float sc = mo_pow2_scale(m);
        xinv = 1.0f / sc;   /* (exact: a power of two) */
        for (int i = ct; i < D / 4; i += MO_CT) {
            const float4 v = __ldg((const float4 *)a.x + i);
            mo_split(v.x, sc, xh + 4 * i, xl + 4 * i);
            mo_split(v.y, sc, xh + 4 * i + 1, xl + 4 * i + 1);
            mo_split(v.z, sc, xh + 4 * i + 2, xl + 4 * i + 2);
            mo_split(v.w, sc, xh + 4 * i + 3, xl + 4 * i + 3);
        }
    } else
        for (int i = ct; i < D / 4; i += MO_CT) ((float4 *)xs)[i] = __ldg((const float4 *)a.x + i);
    if (!ROUTE)
        for (int i = ct; i < a.K; i += MO_CT) {
            ids[i] = __ldg(a.ids + i);
            wk[i] = __ldg(a.w + i);
        }
    asm volatile("bar.sync 1, %0;\n" ::"n"(MO_CT) : "memory");   /* x and the choices in shared memory */
    int seen = 0;
    float acc[MO_NA];
#pragma unroll
    for (int i = 0; i < MO_NA; i++) acc[i] = 0.0f;
    int it = 0, n = 0;
    for (int u = blockIdx.x; u < NU; u += gridDim.x, n++) {
        const cu_wview *g, *up, *dn;
        int j, k, m;
        if (ROUTE && !seen && u * U >= a.sI) {
            mbar_wait(routed, 0);
            seen = 1;
        }
        mo_unit(a, ids, u, U, &g, &up, &dn, &j, &k, &m);
        if constexpr (TC && EB == 2) {   /* as below, 8 rows a unit, the products as three bf16 parts */
            const __nv_bfloat16 *xp[3] = {(const __nv_bfloat16 *)xs, (const __nv_bfloat16 *)xs + D, xl3};
            float r[2];
#pragma unroll
            for (int mat = 0; mat < 2; mat++) mo_rows_tcb(r[mat], ring, full, empty, xp, D, nst, rp, cw, lane, it);
            if ((lane & 3) == 0)
#pragma unroll
                for (int mat = 0; mat < 2; mat++) tcp[(mat * MO_CW + cw) * 16 + (lane >> 2)] = r[mat];
            asm volatile("bar.sync 1, %0;\n" ::"n"(MO_CT) : "memory");
            const int b2 = (n & 1) * 16;
            if (ct < U) {
                float gs = 0.0f, us = 0.0f;
#pragma unroll
                for (int w = 0; w < MO_CW; w++) {
                    gs += tcp[w * 16 + ct];
                    us += tcp[(MO_CW + w) * 16 + ct];
                }
                const float v = cu_silu_mul(gs, us) * (k < 0 ? 1.0f : wk[k]);
                mo_split3(v, ivb + b2 + ct, ivb + 32 + b2 + ct, ivb + 64 + b2 + ct);
            }
            asm volatile("bar.sync 1, %0;\n" ::"n"(MO_CT) : "memory");
            const __nv_bfloat16 *ivp[3] = {ivb + b2, ivb + 32 + b2, ivb + 64 + b2};
            mo_down_tcb(acc, ivp, ring, full, empty, D, nst, cw, lane, it);
            continue;
        } else if constexpr (TC) {   /* the warps' partial row sums meet in tcp; 16 threads make the products' halves */
            float r[2][2];
#pragma unroll
            for (int mat = 0; mat < 2; mat++) mo_rows_tc(r[mat], ring, full, empty, scs, xh, xl, D, nst, rp, cw, lane, it);
            if ((lane & 3) == 0)
#pragma unroll
                for (int mat = 0; mat < 2; mat++) {
                    tcp[(mat * MO_CW + cw) * 16 + (lane >> 2)] = r[mat][0];
                    tcp[(mat * MO_CW + cw) * 16 + (lane >> 2) + 8] = r[mat][1];
                }
            asm volatile("bar.sync 1, %0;\n" ::"n"(MO_CT) : "memory");   /* every warp's partials in tcp */
            const int b2 = (n & 1) * 16;
            if (ct < 16) {
                float gs = 0.0f, us = 0.0f;
#pragma unroll
                for (int w = 0; w < MO_CW; w++) {
                    gs += tcp[w * 16 + ct];
                    us += tcp[(MO_CW + w) * 16 + ct];
                }
                const float v = cu_silu_mul(gs * xinv, us * xinv) * (k < 0 ? 1.0f : wk[k]);
                float mv = fabsf(v);
#pragma unroll
                for (int o = 8; o; o >>= 1) mv = fmaxf(mv, __shfl_xor_sync(0xffffu, mv, o));
                const float sc = mo_pow2_scale(mv);
                mo_split(v, sc, ivh + b2 + ct, ivl + b2 + ct);
                if (ct == 0) ivinv[n & 1] = 1.0f / sc;
            }
            asm volatile("bar.sync 1, %0;\n" ::"n"(MO_CT) : "memory");   /* the unit's products' halves */
            mo_down_tc(a, acc, ivh + b2, ivl + b2, ivinv[n & 1], ring, full, empty, scs, D, nst, cw, lane, it);
            continue;
        }
        float *iv = ivs + (n & 1) * 16;   /* (two buffers: a slow warp may still read the last unit's products) */
        float sums[2][RW];
#pragma unroll
        for (int mat = 0; mat < 2; mat++) {
            float p[RW];
            mo_rows<EB, RW>(p, ring, full, empty, scs, xs, D, nst, rp, cw, lane, a.lab == 3, it);
#pragma unroll
            for (int i = 0; i < RW; i++) sums[mat][i] = cu_warp_sum(p[i]);
        }
        const float alpha = k < 0 ? 1.0f : wk[k];
        if (lane == 0)
#pragma unroll
            for (int i = 0; i < RW; i++) iv[cw * RW + i] = cu_silu_mul(sums[0][i], sums[1][i]) * alpha;
        asm volatile("bar.sync 1, %0;\n" ::"n"(MO_CT) : "memory");   /* the unit's U products in iv */
        mo_down<EB>(a, acc, iv, ring, full, empty, scs, D, nst, ct, lane, it);
    }
    /* the partial sums [D] into the ring's first stage (every stage consumed: nothing lands there any more), seen by the
     * async proxy, then added onto out by one bulk reduction, complete before the block ends */
    if (ROUTE && !seen) mbar_wait(routed, 0);   /* out zeroed (block 0, before the grid barrier) before the reduction */
    asm volatile("bar.sync 1, %0;\n" ::"n"(MO_CT) : "memory");
    if (ct == 0) MO_STAMP(TAIL, 2);
    if constexpr (TAIL) {
        moeo_tail<EB>(a, acc, ring, full, empty, scs, xs, it);
        return;
    }
    float *part = (float *)ring;
    if constexpr (TC) {   /* (the lanes' rows: mo_tc_row, BF16 mo_tcb_row) */
#pragma unroll
        for (int pc = 0; pc < MO_NA / 8; pc++)
#pragma unroll
            for (int i = 0; i < MO_PC / 64 / MO_CW; i++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int d = EB == 2 ? mo_tcb_row(pc, i, h, cw, lane) : mo_tc_row(pc, i, h, cw, lane);
                    if (d < D) part[d] = acc[pc * 8 + 2 * i + h];
                }
    } else
#pragma unroll
        for (int i = 0; i < MO_NA; i++)
            if (ct + i * MO_CT < D) part[ct + i * MO_CT] = acc[i];
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    asm volatile("bar.sync 1, %0;\n" ::"n"(MO_CT) : "memory");
    if (ct == 0 && ROUTE) asm volatile("fence.proxy.async.global;\n" ::: "memory");   /* (block 0's zeros, generic) */
    if (ct == 0)
        asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n"
                     "cp.async.bulk.commit_group;\n"
                     "cp.async.bulk.wait_group 0;\n" ::"l"(a.out), "r"(cu_smem_addr(part)), "r"(D * 4)
                     : "memory");
    if (ct == 0) MO_STAMP(TAIL, 3);
}

/* ---- host: the down strips' maps, made once a layer ---- */

typedef struct {
    const void *key;          /* the layer's first gate weight's data */
    CUtensorMap *maps;        /* device: [E + 1] */
    const float **dst;        /* device: [E + 1] the down scales transposed (FP8; else NULL) */
    const unsigned char **strips;   /* device: [E + 1] the down matrices in the strip layout (opt.moeo_strips; else NULL) */
} mo_maps;
#define MO_N_MAPS 1024
static mo_maps mo_cache[MO_N_MAPS];
static pthread_mutex_t mo_cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* whether w is stored as g0 is (dtype, scales), 16-byte aligned, [rows, cols]; sc: and its FP8 scale rows bulk-copyable
 * (16-byte aligned starts: the gate / up rows' scales come by bulk copies, down's from the transposed copy) */
static int mo_same(const ds_weight *w, const ds_weight *g0, int rows, int cols, int sc) {
    return w->data && w->dtype == g0->dtype && !w->scale == !g0->scale && !((uintptr_t)w->data & 15) && w->rows == rows &&
           w->cols == cols && (!sc || !w->scale || (!((uintptr_t)w->scale & 15) && w->scale_cols % 4 == 0));
}

/* the block scales of the FP8 down matrices [D, n_e] (n_e / 128 scale columns each: n_e = I, or sI for the shared at E)
 * transposed to [n_e / 128][D / 128], one device buffer (owned by cb); *ptrs: a device array [E + 1] of each one's
 * start. 0 on a bad shape. (Once a layer, outside a capture: synchronous copies.) */
static int mo_scales_t(ds_cuda_backend *cb, const ds_layer_weights *L, int E, int D, int I, int sI, const float ***ptrs) {
    const int R = D / 128;
    size_t tot = 0;
    for (int e = 0; e <= E; e++) tot += (size_t)R * (e < E ? I : sI) / 128;
    float *h = (float *)malloc(tot * sizeof(float)), *d = NULL, *hs = (float *)malloc((size_t)R * (I > sI ? I : sI) / 128 * sizeof(float));
    const float **hp = (const float **)calloc((size_t)E + 1, sizeof(float *));
    int ok = h && hs && hp;
    if (ok) {
        CUDA_CHECK(cudaMalloc((void **)&d, tot * sizeof(float) + sizeof(float *) * ((size_t)E + 1)));
        cu_own(cb, d);
    }
    size_t o = 0;
    for (int e = 0; e <= E && ok; e++) {
        const ds_weight *w = e < E ? &L->exp_down[e] : &L->sh_down;
        const int C = (e < E ? I : sI) / 128;
        if (!C) continue;
        if (!w->scale || w->scale_cols != C) {
            ok = 0;
            break;
        }
        CUDA_CHECK(cudaMemcpy(hs, w->scale, (size_t)R * C * sizeof(float), cudaMemcpyDeviceToHost));
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) h[o + (size_t)c * R + r] = hs[(size_t)r * C + c];
        hp[e] = d + o;
        o += (size_t)R * C;
    }
    if (ok) {
        CUDA_CHECK(cudaMemcpy(d, h, tot * sizeof(float), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(d + tot, hp, sizeof(float *) * ((size_t)E + 1), cudaMemcpyHostToDevice));
        *ptrs = (const float **)(d + tot);
    }
    free(h);
    free(hs);
    free(hp);
    return ok;
}

/* dst [n_e / U][D][16 bytes] = src [D][n_e EB bytes]'s columns in unit strips: chunk (g, d) is row d's 16 bytes at
 * byte 16 g (U = 16 / EB columns of one unit); one thread a chunk */
__global__ void mo_strips_kernel(unsigned char *dst, const unsigned char *src, int D, int row_bytes) {
    const size_t n = (size_t)D * (size_t)(row_bytes / 16);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const size_t g = i / (size_t)D, d = i - g * (size_t)D;
        ((uint4 *)dst)[i] = *(const uint4 *)(src + d * (size_t)row_bytes + g * 16);
    }
}

/* layer L's down matrices (the E experts', then the shared at E) in the strip layout, one device buffer owned by cb;
 * *ptrs: a device array [E + 1] of each one's start. (Once a layer, outside a capture.) */
static int mo_make_strips(ds_cuda_backend *cb, const ds_layer_weights *L, int E, int D, int I, int sI, int eb,
                          const unsigned char ***ptrs) {
    size_t tot = 0;
    for (int e = 0; e <= E; e++) tot += (size_t)D * (size_t)(e < E ? I : sI) * (size_t)eb;
    const unsigned char **hp = (const unsigned char **)calloc((size_t)E + 1, sizeof(unsigned char *));
    if (!hp) return 0;
    unsigned char *d = NULL;
    if (cudaMalloc((void **)&d, tot + sizeof(unsigned char *) * ((size_t)E + 1)) != cudaSuccess) {
        (void)cudaGetLastError();   /* no room for the copy: the TMA strips stay */
        free(hp);
        return 0;
    }
    cu_own(cb, d);
    size_t o = 0;
    for (int e = 0; e <= E; e++) {
        const ds_weight *w = e < E ? &L->exp_down[e] : &L->sh_down;
        const int n_e = e < E ? I : sI;
        if (!n_e) continue;
        mo_strips_kernel<<<512, 256, 0, cu_stream>>>(d + o, (const unsigned char *)w->data, D, n_e * eb);
        CUDA_LAUNCH_CHECK();
        hp[e] = d + o;
        o += (size_t)D * (size_t)n_e * (size_t)eb;
    }
    CUDA_CHECK(cudaMemcpy(d + tot, hp, sizeof(unsigned char *) * ((size_t)E + 1), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaStreamSynchronize(cu_stream));
    *ptrs = (const unsigned char **)(d + tot);
    free(hp);
    return 1;
}

/* layer L's down maps (device), made on first use where create (not inside a capture); NULL where they cannot be. With
 * opt.moeo_strips, the strip-layout copies too (made once where create; an entry without them keeps the TMA strips) */
static const mo_maps *mo_layer_maps(ds_cuda_backend *cb, const ds_layer_weights *L, int E, int D, int I, int sI, int eb,
                                    int create) {
    mo_maps *res = NULL;
    pthread_mutex_lock(&mo_cache_lock);
    size_t h = ((uintptr_t)L->exp_gate[0].data >> 8) % MO_N_MAPS;
    for (size_t n = 0; n < MO_N_MAPS; n++, h = (h + 1) % MO_N_MAPS) {
        mo_maps *m = &mo_cache[h];
        if (m->key == L->exp_gate[0].data) {
            res = m;
            break;
        }
        if (m->key) continue;
        if (!create) break;
        CUtensorMap *hm = (CUtensorMap *)calloc((size_t)E + 1, sizeof(CUtensorMap));
        int ok = hm != NULL;
        for (int e = 0; e < E && ok; e++) ok = cu_tma_map_strip(&hm[e], L->exp_down[e].data, D, I * eb, 16, MO_BOX);
        if (ok && sI) ok = cu_tma_map_strip(&hm[E], L->sh_down.data, D, sI * eb, 16, MO_BOX);
        const float **dst = NULL;
        if (ok && eb == 1) ok = mo_scales_t(cb, L, E, D, I, sI, &dst);
        if (ok) {
            void *d = NULL;
            CUDA_CHECK(cudaMalloc(&d, sizeof(CUtensorMap) * ((size_t)E + 1)));
            cu_own(cb, d);
            CUDA_CHECK(cudaMemcpy(d, hm, sizeof(CUtensorMap) * ((size_t)E + 1), cudaMemcpyHostToDevice));
            m->key = L->exp_gate[0].data;
            m->maps = (CUtensorMap *)d;
            m->dst = dst;
            m->strips = NULL;
            res = m;
        }
        free(hm);
        break;
    }
    if (res && cb->opt.moeo_strips && !res->strips && create) {   /* (an entry another backend made without them) */
        const unsigned char **sp = NULL;
        if (mo_make_strips(cb, L, E, D, I, sI, eb, &sp)) res->strips = sp;
    }
    pthread_mutex_unlock(&mo_cache_lock);
    return res;
}

void cu_moeo_free(void) {
    pthread_mutex_lock(&mo_cache_lock);
    memset(mo_cache, 0, sizeof mo_cache);
    pthread_mutex_unlock(&mo_cache_lock);
}

int cu_moeo_fits(ds_cuda_backend *cb, const float *out, const float *x, const ds_layer_weights *L, route_cfg rc) {
    const ds_config *c = cb->base.cfg;
    const ds_weight *g0 = &L->exp_gate[0];
    const int D = c->hidden_size, I = g0->rows, E = rc.E, K = rc.K, sI = c->n_shared_experts ? L->sh_gate.rows : 0;
    const int f8 = g0->dtype == DS_DTYPE_F8_E4M3 && g0->scale, bf = g0->dtype == DS_DTYPE_BF16 && !g0->scale;
    const int eb = f8 ? 1 : 2, U = 16 / eb;
    if (!cb->opt.moeo || (!f8 && !bf) || ((uintptr_t)x & 15) || ((uintptr_t)out & 15) || D % MO_BOX ||
        D > MO_NA * MO_CT || I % U || sI % U || K > 16)
        return 0;
    for (int e = 0; e < E; e++)
        if (!mo_same(&L->exp_gate[e], g0, I, D, 1) || !mo_same(&L->exp_up[e], g0, I, D, 1) ||
            !mo_same(&L->exp_down[e], g0, D, I, 0))
            return 0;
    if (sI && (!mo_same(&L->sh_gate, g0, sI, D, 1) || !mo_same(&L->sh_up, g0, sI, D, 1) || !mo_same(&L->sh_down, g0, D, sI, 0)))
        return 0;
    /* FP8: the scales' bulk copies whole 16-byte pieces (D % 512: a stage's 16 or a last piece's multiple of 4; the
     * gate / up scale rows' starts 16-byte aligned) */
    if (f8 && (I % 128 || sI % 128 || D % 512)) return 0;
    if (cb->opt.moeo == MO_ROUTE_FORM) {   /* the router in the launch: BF16 or fp32 [E, D], 16-byte rows */
        const ds_weight *r = &L->router;
        if ((r->dtype != DS_DTYPE_BF16 && r->dtype != DS_DTYPE_F32) || r->scale || r->rows != E || r->cols != D ||
            ((uintptr_t)r->data & 15) || E > 256 || !cu_moe1_bar_ready(cb))
            return 0;
    }
    return mo_layer_maps(cb, L, E, D, I, sI, eb, !cu_capturing()) != NULL;
}

/* a's fields common to the forms (out, x, the experts, the down maps, the ring's stages, the routing) for layer L; *smem
 * the launch's dynamic shared memory (tail: the tail form's); the experts' bytes an element (1 FP8, 2 BF16), or 0 where
 * no ring of two stages fits */
static int mo_prepare(ds_cuda_backend *cb, mo_args *a, float *out, const float *x, const ds_layer_weights *L,
                      const cu_wview *tab, const int32_t *ids, const float *w, route_cfg rc, int tail, size_t *smem) {
    const ds_config *c = cb->base.cfg;
    const ds_weight *g0 = &L->exp_gate[0];
    const int D = c->hidden_size, I = g0->rows, E = rc.E, K = rc.K, sI = c->n_shared_experts ? L->sh_gate.rows : 0;
    const int eb = g0->dtype == DS_DTYPE_F8_E4M3 ? 1 : 2;
    int nst = MO_ST_MAX;
    const size_t tc = !tail && cb->opt.moeo_tc ? mo_tc_extra(cb->opt.moeo == MO_ROUTE_FORM, E, eb, D) : 0;
#define MO_SMEM_OF(n) (tail ? mo_smem_tail(D, K, (n), E) : mo_smem(D, K, (n), E) + tc)
    while (nst > 2 && MO_SMEM_OF(nst) > MO_SMEM_MAX) nst--;
    *smem = MO_SMEM_OF(nst);
#undef MO_SMEM_OF
    if (*smem > MO_SMEM_MAX) return 0;
    static int attrs_set = 0;
    if (!attrs_set) {
        CUDA_CHECK(cudaFuncSetAttribute(moeo_kernel<1, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, MO_SMEM_MAX));
        CUDA_CHECK(cudaFuncSetAttribute(moeo_kernel<2, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, MO_SMEM_MAX));
        CUDA_CHECK(cudaFuncSetAttribute(moeo_kernel<1, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, MO_SMEM_MAX));
        CUDA_CHECK(cudaFuncSetAttribute(moeo_kernel<2, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, MO_SMEM_MAX));
        CUDA_CHECK(cudaFuncSetAttribute(moeo_kernel<1, false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, MO_SMEM_MAX));
        CUDA_CHECK(cudaFuncSetAttribute(moeo_kernel<2, false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, MO_SMEM_MAX));
        CUDA_CHECK(cudaFuncSetAttribute(moeo_kernel<1, false, false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, MO_SMEM_MAX));
        CUDA_CHECK(cudaFuncSetAttribute(moeo_kernel<1, true, false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, MO_SMEM_MAX));
        CUDA_CHECK(cudaFuncSetAttribute(moeo_kernel<2, false, false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, MO_SMEM_MAX));
        CUDA_CHECK(cudaFuncSetAttribute(moeo_kernel<2, true, false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, MO_SMEM_MAX));
        attrs_set = 1;
    }
    memset(a, 0, sizeof *a);
    a->l2ef = (cu_l2ef & CU_L2EF_MOEO) != 0;
    a->x = x;
    a->out = out;
    a->ids = ids;
    a->w = w;
    a->tab = tab;
    if (sI) {
        a->sg = cu_view(&L->sh_gate);
        a->su = cu_view(&L->sh_up);
        a->sd = cu_view(&L->sh_down);
    }
    const mo_maps *mm = mo_layer_maps(cb, L, E, D, I, sI, eb, 0);
    a->maps = mm->maps;
    a->dst = mm->dst;
    a->strips = cb->opt.moeo_strips ? mm->strips : NULL;   /* (NULL where no copy could be made: the TMA strips) */
    a->D = D;
    a->I = I;
    a->sI = sI;
    a->K = K;
    a->E = E;
    a->nst = nst;
    a->rc = rc;
    return eb;
}

/* *p: a device buffer of bytes zeroed once, made at its first use outside a capture (a capture may not allocate); 0
 * while capturing without it */
static int mo_zeroed_buf(void **p, size_t bytes) {
    if (*p) return 1;
    if (cu_capturing()) return 0;
    CUDA_CHECK(cudaMalloc(p, bytes));
    CUDA_CHECK(cudaMemset(*p, 0, bytes));
    return 1;
}

int cu_moeo(ds_cuda_backend *cb, float *out, const float *x, const ds_layer_weights *L, const cu_wview *tab,
            const int32_t *ids, const float *w, float *logits, route_cfg rc, int out_zeroed) {
    if (!cu_moeo_fits(cb, out, x, L, rc) || (!ids) != (cb->opt.moeo == MO_ROUTE_FORM)) return 0;
    mo_args a;
    size_t smem;
    const int eb = mo_prepare(cb, &a, out, x, L, tab, ids, w, rc, 0, &smem), D = a.D;
    if (!eb) return 0;
    const int tc = cb->opt.moeo_tc && (cb->opt.moeo == 1 || cb->opt.moeo == MO_ROUTE_FORM);   /* (not the labs) */
    if (!ids) {   /* the route form: one cooperative launch (its split grid barrier needs every block resident) */
        a.route = 1;
        a.router = cu_view(&L->router);
        if (L->router_bias.data && rc.method == DS_TOPK_NOAUX_TC) a.bias = cu_view(&L->router_bias);
        a.logits = logits;
        a.bar = cb->moe1_bar;
        cu_launch_coop(tc ? (eb == 1 ? moeo_kernel<1, true, false, true> : moeo_kernel<2, true, false, true>)
                          : eb == 1 ? moeo_kernel<1, true> : moeo_kernel<2, true>,
                       dim3((unsigned)cb->n_sm), dim3(MO_THREADS), smem, a);
    } else {
        a.lab = cb->opt.moeo - 1;
        if (!out_zeroed) CUDA_CHECK(cudaMemsetAsync(out, 0, (size_t)D * sizeof(float), cu_stream));
#ifdef MOEO_PROF
        mo_prof_grid[0] = cb->n_sm;
#endif
        if (tc && eb == 1)
            moeo_kernel<1, false, false, true><<<cb->n_sm, MO_THREADS, smem, cu_stream>>>(a);
        else if (tc)
            moeo_kernel<2, false, false, true><<<cb->n_sm, MO_THREADS, smem, cu_stream>>>(a);
        else if (eb == 1)
            moeo_kernel<1, false><<<cb->n_sm, MO_THREADS, smem, cu_stream>>>(a);
        else
            moeo_kernel<2, false><<<cb->n_sm, MO_THREADS, smem, cu_stream>>>(a);
    }
    CUDA_LAUNCH_CHECK();
    cb->moeo_runs++;
    cb->moeo_tc_runs += tc;
    if (a.strips) cb->moeo_strips_runs++;
    return 1;
}

/* whether w can be one of the tail's projections: the experts' dtype and scale form, [rows, D], rows whole units, FP8
 * scale rows bulk-copyable (as the gate / up rows') */
static int mo_tail_weight_ok(const ds_weight *w, const ds_weight *g0, int D, int U) {
    return w && mo_same(w, g0, w->rows, D, 1) && w->rows > 0 && w->rows % U == 0 && (!w->scale || w->scale_cols == D / 128);
}

int cu_moeo_tail_fits(ds_cuda_backend *cb, const float *out, const float *x, const ds_layer_weights *L, route_cfg rc,
                      const ds_next_in *nx) {
    if (cb->opt.moeo != 1 || !cb->opt.moeo_tail || !nx || !cu_moeo_fits(cb, out, x, L, rc)) return 0;
    const ds_weight *g0 = &L->exp_gate[0];
    const int D = cb->base.cfg->hidden_size, U = g0->dtype == DS_DTYPE_F8_E4M3 ? 16 : 8;
    if (!mo_tail_weight_ok(nx->wq, g0, D, U) || !mo_tail_weight_ok(nx->wkv, g0, D, U) || !nx->in_norm ||
        !nx->in_norm->data || nx->in_norm->cols != D || !nx->q || !nx->kv)
        return 0;
    /* the count and the epoch, zero at the first launch */
    return mo_zeroed_buf((void **)&cb->moeo_cnt, 4 * sizeof(unsigned));
}

int cu_moeo_tail(ds_cuda_backend *cb, float *out, const float *x, const ds_layer_weights *L, const cu_wview *tab,
                 const int32_t *ids, const float *w, route_cfg rc, float *h, float *xn, const ds_next_in *nx, float eps,
                 int out_zeroed) {
    if (!ids || !cu_moeo_tail_fits(cb, out, x, L, rc, nx)) return 0;
    const int D = cb->base.cfg->hidden_size, U = L->exp_gate[0].dtype == DS_DTYPE_F8_E4M3 ? 16 : 8;
    mo_args a;
    size_t smem;
    const int eb = mo_prepare(cb, &a, out, x, L, tab, ids, w, rc, 1, &smem);
    if (!eb) return 0;
    a.h = h;
    a.xn = xn;
    a.q = nx->q;
    a.kv = nx->kv;
    a.nw = cu_view(nx->in_norm);
    a.wq = cu_view(nx->wq);
    a.wkv = cu_view(nx->wkv);
    a.eps = eps;
    a.cnt = cb->moeo_cnt;
    a.nq0 = nx->wq->rows / U;
    a.NQ = a.nq0 + nx->wkv->rows / U;
    if (!out_zeroed) CUDA_CHECK(cudaMemsetAsync(out, 0, (size_t)D * sizeof(float), cu_stream));
#ifdef MOEO_PROF
    mo_prof_grid[1] = cb->n_sm;
#endif
    /* a cooperative launch: every block resident, as its count's wait needs */
    cu_launch_coop(eb == 1 ? moeo_kernel<1, false, true> : moeo_kernel<2, false, true>, dim3((unsigned)cb->n_sm),
                   dim3(MO_THREADS), smem, a);
    CUDA_LAUNCH_CHECK();
    cb->moeo_runs++;
    cb->moeo_tail_runs++;
    return 1;
}
