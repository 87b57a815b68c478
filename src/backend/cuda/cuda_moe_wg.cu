/* The routed experts of a decode batch as W8A8 on wgmma, the weights as the MMA's M (issue 7;
 * DSINFER_CUDA_MOE_WG, default 1, with DSINFER_MOE_W8A8 and FP8 experts on the grouped tensor-core path).
 *
 * At decode an expert has a few tokens (V2-Lite at batch 64 x top-6 over 64 experts: 6 on average), so its
 * product is a stream of the expert's weight past a handful of token rows. moe_f8_kernel (cuda_moe_tc.cu)
 * streams it at 2.4-2.7 TB/s by cp.async with FP16 MMAs on converted codes (sm_90 has no FP8 mma.sync). Here
 * the weight tile is wgmma's A operand (64 rows a warpgroup, e4m3 from shared memory, native) and the
 * expert's tokens its N (a chunk of NT = 32 or 64 rows of codes as B; the rows past the chunk belong to the
 * next expert or read as zeros, and their columns are not stored), so nothing is converted and the weights
 * come by TMA.
 *
 * Work items (expert e, token chunk c of NT rows, 128-row weight block nb) are enumerated on the device from
 * off[] (graph-safe: the host never sees the counts): every expert's chunks in expert order, nb fastest. A
 * persistent grid (a CTA an SM) takes items blockIdx.x, + gridDim.x, ...; warpgroup 0's first thread loads each
 * item's stages by TMA into a ring that runs on across items (full / empty mbarriers), warpgroups 1 and 2
 * take 64 weight rows each. A stage is one 128-column block of the weight tile (gate and up for PAIR) and of
 * the chunk's codes: one scale block of both, so its 4 MMAs of k32 go into a fresh accumulator that is
 * promoted with s_w(e, nb, kb) x s_x(token, kb) into fp32 sums (DeepSeek-V3's per-128 promotion, as
 * f8_tma_kernel and the CPU's W8A8 emulation). PAIR writes BF16 SiLU(g) * u [rows, I] (moe_f8_kernel's
 * epilogue), else fp32 [rows, D].
 *
 * Two more forms of the same kernel: BF16 experts (DSINFER_CUDA_MOE_WG_BF16, default 1: BF16 wgmma k16, 64 columns
 * a stage, no scales) and one dense W8A8 weight with split K (DSINFER_CUDA_FP8_WG_MAX_M, opt-in: slower than
 * cu_f8_wgmma_gemm so far). Measured figures: bench/RESULTS.md tenth session; notes: dev/cuda/KERNELS.md. */
#include "backend/cuda/cuda_wgmma.h"

#define MW_BN 128              /* weight rows an item (two consumer warpgroups of 64) */
#define MW_BK 128              /* columns a stage */
#define MW_RING (200 * 1024)   /* bytes of the stage ring */
#define MW_MAX_ST 16           /* mbarriers reserved per kind */
#define MW_MAX_E 272           /* experts the item tables hold: the routed ones and the shared ones as virtual experts */
#define MW_XS CU_MOE_WG_XS     /* token scales an item stages in shared memory (NT x its stages) */
#define MW_MAX_KS 4            /* K splits of the dense form, unless more are needed for MW_XS */

/* a stage: the weight tile(s) [128 rows][128 B] each, then the chunk's NT rows of codes [NT][128 B], every
 * part 1024-byte aligned (the 128-byte swizzle's period) */
template <bool PAIR, int NT>
struct mw_shape {
    static constexpr int W = MW_BN * MW_BK;
    static constexpr int STAGE = (PAIR ? 2 : 1) * W + NT * MW_BK;
    static constexpr int ST = MW_RING / STAGE;
    static_assert(ST >= 2 && ST <= MW_MAX_ST, "the ring holds 2 .. MW_MAX_ST stages");
    static_assert((NT * MW_BK) % 1024 == 0, "the codes' tile keeps the swizzle's alignment");
    /* mw_args.qf == 2 (PAIR): the codes of an item staged as [NT][QR] bytes (a 128-byte row, padded so that the four
     * tokens a store instruction writes fall in four banks); in the ring's spare bytes past its last stage where they
     * fit (32 and 48 tokens a chunk), else in the item's last stage, held until the rows are stored */
    static constexpr int QR = MW_BK + 16;
    static constexpr bool QF_SPARE = ST * STAGE + NT * QR <= MW_RING;
};

#define MW_QF_RED (8 * 64)   /* the quantizing epilogue's per-warp row maxima: 8 consumer warps x NT tokens */
#define MW_STG (8 * 128)     /* mw_store_pair's staging: 8 consumer warps x [8 tokens][16 columns] BF16 */
static size_t mw_smem_bytes(void) {
    return MW_RING + (2 * MW_MAX_ST + 4) * 8 + (2 * (MW_MAX_E + 1) + 4 + MW_XS + MW_QF_RED) * 4 + MW_STG * 2 + 1024;
}

/* d[64 x N] (+)= a[64 x 32] b[N x 32]^T, e4m3 from shared memory; acc = 0 starts from zero. d[4q + h]: row
 * 16 warp + lane / 4 + 8 (h / 2), column (token) 8q + 2 (lane % 4) + h % 2. */
template <int N>
__device__ __forceinline__ void mw_mma(float (&d)[N / 2], uint64_t da, uint64_t db, int acc);
template <> __device__ __forceinline__ void mw_mma<32>(float (&d)[16], uint64_t da, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "l"(da), "l"(db), "r"(acc));
}
template <> __device__ __forceinline__ void mw_mma<48>(float (&d)[24], uint64_t da, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %26, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n48k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23}, %24, %25, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
                 : "l"(da), "l"(db), "r"(acc));
}
template <> __device__ __forceinline__ void mw_mma<64>(float (&d)[32], uint64_t da, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db), "r"(acc));
}

/* the same with BF16 operands, k16 (32 bytes of each row: the same descriptor steps as e4m3's k32), both K-major */
template <int N>
__device__ __forceinline__ void mw_mma_bf(float (&d)[N / 2], uint64_t da, uint64_t db, int acc);
template <> __device__ __forceinline__ void mw_mma_bf<32>(float (&d)[16], uint64_t da, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "l"(da), "l"(db), "r"(acc));
}
template <> __device__ __forceinline__ void mw_mma_bf<48>(float (&d)[24], uint64_t da, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %26, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23}, %24, %25, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
                 : "l"(da), "l"(db), "r"(acc));
}
template <> __device__ __forceinline__ void mw_mma_bf<64>(float (&d)[32], uint64_t da, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db), "r"(acc));
}

/* one work item: expert e's rows row0 .. row0 + cnt - 1 (cnt <= NT) against its weight rows 128 nb .. and
 * the stages kb0 .. kb1 - 1 (split z of the K splits; the grouped form has one); tile: the (chunk, nb) index */
typedef struct {
    int e, row0, cnt, nb, z, kb0, kb1, tile;
} mw_item;

/* What a launch multiplies. Grouped (maps != NULL): the experts' weight maps and scale pointers, rows by off[].
 * Dense (maps == NULL): one weight (the kernel's tw, scales w_scale), rows 0 .. R - 1, split K in ks parts of
 * kc stages; with ks > 1 each split writes its fp32 partial (mw_store's layout) and the last of a tile's
 * splits to finish (tickets[tile], zero before the launch and again after) sums them in z order into out. */
typedef struct {
    const CUtensorMap *maps;     /* [E * NM] or NULL */
    const float *const *scales;  /* [E * NM] */
    const float *w_scale;        /* dense: [ceil(N / 128)][ws_cols] */
    const float *xs;             /* the rows' scales [R][K / 128] */
    const int32_t *off;          /* [E + 1] (grouped) */
    void *out;                   /* [R, ldo]; PAIR with qf: the codes of SiLU(g) * u [R, ldo] (bytes) */
    float *oscale;               /* PAIR with qf: their scales [R][ldo / 128]; else unused */
    int qf;                      /* PAIR, FP8: the epilogue quantizes SiLU(g) * u (DSINFER_CUDA_MOE_WG_QF) */
    float *part;                 /* dense, ks > 1: [ks][tiles][256][NT / 2] */
    int *tickets;                /* dense, ks > 1: [chunks x NB] */
    int R, E, N, K, ws_cols, ldo, ks, kc;
    /* grouped: ns virtual experts E .. E + ns - 1 after the routed ones (the shared experts, each a slice of I rows of
     * their gate / up and of I columns of their down: maps and scales at the same places as a routed expert's), virtual
     * expert s on rows rr + s ms .. rr + (s + 1) ms - 1 (rr = off[E]: mw_append_virtual); sws_cols: their scales' row
     * length (ws_cols: the routed ones') */
    int ns, ms, rr, sws_cols;
    /* grouped (DSINFER_CUDA_MOE_WG_PREF, default 1): the producer asks for the next item's weight maps
     * (prefetch.tensormap) as it starts an item, and the consumers load the item's first weight scales before staging
     * its token scales (one memory round trip an item, not two); the same bits */
    int pref;
    /* grouped (DSINFER_CUDA_MOE_WG_PDL): the launch has the programmatic-dependent-launch attribute, so it may start
     * while the kernel before it (the rows' quantizer, or gate / up) still runs. Before cu_pdl_wait only the item
     * tables (off[]: the grouping, two launches back, complete: the kernel before was launched plainly or waited
     * before its trigger) and the weights: the producer requests the first ring of stages' weight tiles, then waits,
     * then their rows' codes; the consumers wait before the token scales. The same bits. */
    int pdl;
    /* grouped (DSINFER_CUDA_MOE_WG_ORDER): which items a CTA of the persistent grid takes (mw_span): 0 items b, b + G, ...
     * of the G CTAs; 1 the same over the fewest CTAs that keep the number of rounds, A = ceil(items / ceil(items / G)),
     * so that no round but the last has idle CTAs and the last has fewer than G - A would leave (the other G - A CTAs
     * exit at once); 2 contiguous runs of ceil(items / G) items a CTA (a CTA's items consecutive weight blocks of one
     * expert's chunk). An item's arithmetic is the same wherever it runs: the same bits. */
    int order;
    /* LAB (DSINFER_CUDA_MOE_WG_LAB, timing only, wrong results): bit 0 the rows' codes loaded at an item's first stage
     * only (what the stream costs without the codes' bytes), bit 1 the consumers skip the MMAs and promotion, bit 2 the
     * grouped weights' boxes as 16 KB runs (tma_map_lab: what a tiled weight layout would stream), bit 3 gate / up's BF16
     * store without SiLU (g u: what its exp and division cost; with bit 1 the outputs stay zero, the routing unchanged) */
    int lab;
    /* PAIR without qf (DSINFER_CUDA_MOE_WG_ST2): the BF16 SiLU(g) * u stored as whole 32-byte sectors (mw_store_pair),
     * not as 16-byte halves of four rows a warp store; the same values */
    int st2;
    /* grouped, FP8 (DSINFER_CUDA_MOE_WG_SX; mw_launch sets it only where an item fits: cu_moe_wg_sx_fits): the item, its
     * weight scales and its token scales staged by the producer warpgroup's idle warps 1 .. 3 (mw_scale_warps) into two
     * item buffers of MW_XS / 2, handed over by mbarriers (sfull: the warps' 96 arrivals, sempty: the 8 consumer warps'),
     * instead of the consumers' table search, global loads and staging between two barriers of theirs at every item's
     * start (mw_stage_scales): the two consumer warpgroups never wait for each other, and the items are staged up to two
     * ahead. The same values in the same places: the same bits. */
    int sx;
    int l2ef;   /* the weight tiles' copies with L2 evict_first (cu_l2ef's CU_L2EF_MOE_WG) */
} mw_args;

/* the items [t0, t1) a CTA takes, step apart (mw_args.order) */
typedef struct {
    int t0, t1, step;
} mw_span;
__device__ __forceinline__ mw_span mw_span_of(int items, int order) {
    const int G = (int)gridDim.x, b = (int)blockIdx.x, rounds = (items + G - 1) / G;
    if (order == 1 && rounds > 0) {
        int A = (items + rounds - 1) / rounds;
        return mw_span{b < A ? b : items, items, A};
    }
    if (order == 2) {
        int t0 = b * rounds < items ? b * rounds : items, t1 = t0 + rounds < items ? t0 + rounds : items;
        return mw_span{t0, t1, 1};
    }
    return mw_span{b, items, G};
}

/* item t of the tables: pre [E + 1] (pre[e]: the chunks of the experts before e), offs [E + 1] (off[] in shared
 * memory); NB weight blocks, ks splits of kc stages a chunk (order: chunk, split, weight block fastest). The
 * expert is the last e with pre[e] <= chunk (empty experts have no chunk, so that e has one). */
template <int NT>
__host__ __device__ __forceinline__ mw_item mw_item_of(int t, int NB, const int *pre, const int *offs, int E, int ks, int kc,
                                                       int LK) {
    int gc = t / (NB * ks), lo = 0, hi = E;
    while (hi - lo > 1) {
        int mid = (lo + hi) >> 1;
        if (pre[mid] <= gc) lo = mid;
        else hi = mid;
    }
    mw_item m;
    m.e = lo;
    m.row0 = offs[lo] + (gc - pre[lo]) * NT;
    m.cnt = offs[lo + 1] - m.row0 < NT ? offs[lo + 1] - m.row0 : NT;
    m.nb = t % NB;
    m.z = t / NB % ks;
    m.kb0 = m.z * kc;
    m.kb1 = m.kb0 + kc < LK ? m.kb0 + kc : LK;
    m.tile = gc * NB + m.nb;
    return m;
}

/* After the E routed experts' pre [E + 1] and offs [E + 1]: ns virtual experts of ms rows each, expert E + s on rows
 * rr + s ms .., nt rows a chunk; the tables grow to E + ns + 1. Contract: rr == offs[E], the routed rows end where the
 * virtual ones begin (cu_moe's grouping gives every one of its M K pairs a row; offs[E] is set to rr regardless, so
 * that the virtual experts are where the caller put their rows). */
__host__ __device__ __forceinline__ void mw_append_virtual(int *pre, int *offs, int E, int ns, int ms, int rr, int nt) {
    if (ns < 1) return;
    offs[E] = rr;
    for (int s = 0; s < ns; s++) {
        pre[E + s + 1] = pre[E + s] + (ms + nt - 1) / nt;
        offs[E + s + 1] = rr + (s + 1) * ms;
    }
}

/* warp 0: pre and offs from off[] (E <= MW_MAX_E; off NULL: one range of R rows): lane l counts the chunks of
 * experts l per .. l per + per - 1, an exclusive scan over the lanes gives each its start; then the virtual experts
 * (mw_append_virtual, lane 31) */
template <int NT>
__device__ void mw_tables(int *pre, int *offs, const int32_t *off, int E, int R, int ns, int ms, int rr) {
    int lane = threadIdx.x & 31;
    if (!off) {
        if (lane == 0) {
            pre[0] = 0;
            pre[1] = (R + NT - 1) / NT;
            offs[0] = 0;
            offs[1] = R;
        }
        return;
    }
    int per = (E + 31) / 32, e0 = lane * per, e1 = e0 + per < E ? e0 + per : E, s = 0;
    for (int e = e0; e < e1; e++) s += (off[e + 1] - off[e] + NT - 1) / NT;
    int inc = s;
    for (int d = 1; d < 32; d <<= 1) {
        int v = __shfl_up_sync(0xffffffffu, inc, d);
        if (lane >= d) inc += v;
    }
    int run = inc - s;
    for (int e = e0; e < e1; e++) {
        pre[e] = run;
        offs[e] = off[e];
        run += (off[e + 1] - off[e] + NT - 1) / NT;
    }
    if (lane == 31) {
        pre[E] = inc;
        offs[E] = off[E];
        mw_append_virtual(pre, offs, E, ns, ms, rr, NT);
    }
}

/* the 256 consumer threads' barrier (named barrier 1; the producer warpgroup has left) */
__device__ __forceinline__ void mw_consumers_sync(void) { asm volatile("bar.sync 1, 256;\n" ::: "memory"); }

/* The item's token scales into shared memory, xsm[j NT + c] = s_x(row0 + c, kb0 + j) (0 past the chunk), by the
 * 256 consumer threads (tid), between two barriers: the first keeps the previous item's readers, the second
 * makes the copy visible. Read per stage from here (a thread needs NT / 4 of them a stage: as global loads,
 * 256 x NT / 4 requests a stage bounded the stream at small stages). NT x (kb1 - kb0) <= MW_XS (host). */
template <int NT>
__device__ __forceinline__ void mw_stage_scales(float *xsm, const float *xs, const mw_item &m, int LK, int tid) {
    int nk = m.kb1 - m.kb0;
    mw_consumers_sync();
    for (int i = tid; i < NT * nk; i += 256) {
        int c = i / nk, j = i % nk;
        xsm[j * NT + c] = c < m.cnt ? xs[(size_t)(m.row0 + c) * LK + m.kb0 + j] : 0.0f;
    }
    mw_consumers_sync();
}

/* mw_args.sx: warps 1 .. 3 of the producer warpgroup (96 threads, s = threadIdx.x - 32) stage item j into buffer j % 2 of
 * xsm (MW_XS / 2 floats each), after the consumers have given that buffer back (sbar[2 + j % 2], item j - 2's 8 arrivals),
 * then arrive on sbar[j % 2] (each thread after its own stores: release). A buffer: the item (MW_SXH ints, mw_item_put),
 * its weight scales of k-blocks kb0 .. kb1 - 1 [2][nk] (the gate tile's and the up tile's; one tile's twice without PAIR),
 * then its token scales [nk][NT] (mw_stage_scales' layout): the consumers do no table search and no global load for an
 * item. Loads four at once a thread, the token scales in the order of xs's rows (c-major). */
#define MW_SX_THREADS 96
#define MW_SXH 8   /* the item's fields at a buffer's start */
__device__ __forceinline__ void mw_item_put(int *h, const mw_item &m) {
    h[0] = m.e, h[1] = m.row0, h[2] = m.cnt, h[3] = m.nb, h[4] = m.z, h[5] = m.kb0, h[6] = m.kb1, h[7] = m.tile;
}
__device__ __forceinline__ mw_item mw_item_get(const int *h) { return mw_item{h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]}; }
template <bool PAIR, int NT>
__device__ void mw_scale_warps(float *xsm, uint64_t *sbar, const mw_args &a, const int *pre, const int *offs, int E, int NB,
                               int LK, int items) {
    const int s = (int)threadIdx.x - 32, NM = PAIR ? 2 : 1;
    if (a.pdl) cu_pdl_wait();   /* the scales are the kernel before's output */
    const mw_span sp = mw_span_of(items, a.order);
    int j = 0;
    for (int t = sp.t0; t < sp.t1; t += sp.step, j++) {
        mw_item m = mw_item_of<NT>(t, NB, pre, offs, E, a.ks, a.kc, LK);
        float *buf = xsm + (j & 1) * (MW_XS / 2), *xb = buf + MW_SXH + 2 * (m.kb1 - m.kb0);
        const size_t wrow = (size_t)m.nb * (m.e < a.E ? a.ws_cols : a.sws_cols);   /* a virtual expert's scale rows */
        const float *sw0 = a.scales[m.e * NM] + wrow + m.kb0, *sw1 = a.scales[m.e * NM + NM - 1] + wrow + m.kb0;
        if (j >= 2) mbar_wait(&sbar[2 + (j & 1)], ((j >> 1) - 1) & 1);
        const int nk = m.kb1 - m.kb0, n = NT * nk;
        if (s == 0) mw_item_put((int *)buf, m);
        for (int i = s; i < 2 * nk; i += MW_SX_THREADS) buf[MW_SXH + i] = i < nk ? sw0[i] : sw1[i - nk];
        for (int i0 = 0; i0 < n; i0 += 4 * MW_SX_THREADS) {
            float v[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                int i = i0 + u * MW_SX_THREADS + s, c = i / nk, k = i % nk;
                v[u] = i < n && c < m.cnt ? a.xs[(size_t)(m.row0 + c) * LK + m.kb0 + k] : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < 4; u++) {
                int i = i0 + u * MW_SX_THREADS + s;
                if (i < n) xb[(i % nk) * NT + i / nk] = v[u];
            }
        }
        mbar_arrive(&sbar[j & 1]);
    }
}

/* gate / up's epilogue value: SiLU(g) u rounded to BF16 (moe_f8_kernel's and the CPU's order of operations); lab bit 3
 * (mw_args.lab, timing only): g u, without SiLU's exp and division */
__device__ __forceinline__ __nv_bfloat16 mw_silu_mul(float g, float u, int lab) {
    return __float2bfloat16_rn((lab & 8 ? g : g / (1.0f + expf(-g))) * u);
}

/* The epilogue of one item: this thread's sums at rows (tokens) row0 + c, columns n. PAIR: BF16 SiLU(g) * u;
 * one split: fp32 sums. ks splits: each stores its NT / 2 sums contiguous at part[((z tiles + tile) 256 + tid)
 * NT / 2] (tid: the consumer thread; 16-byte stores), then the tile's last split to take its ticket sums the ks
 * partials of its own positions in z order (deterministic) into out. */
/* PAIR with a.qf (FP8 experts): h = SiLU(g) * u rounded to BF16 as the plain epilogue stores it, then per token the
 * item's 128 columns (one scale block of the down projection's input: the two warpgroups' 64 each) quantized as
 * moe_rows_fp8_kernel does from the BF16 copy: scale = max(amax |h|, 1e-4) / 448, code = e4m3(h / scale) (the
 * conversion unit's encoder, equal to the software one for every float: ds_cuda_device_selftest). The maximum goes
 * lanes (shuffles) -> warps (red [8 warps][NT], one consumer barrier). Same bits as the BF16 store plus that launch.
 * mw_qf_max: h, and this warp's maxima into red, then the barrier; mw_qf_scale: token c's scale from red. */
template <int NT>
__device__ __forceinline__ void mw_qf_max(const float (&g)[NT / 2], const float (&u)[NT / 2], int w8, int lane, float *red,
                                          float (&h)[NT / 2]) {
    float mx[NT / 4];   /* mx[2q + e]: this lane's maximum for token 8q + 2 (lane % 4) + e */
#pragma unroll
    for (int i = 0; i < NT / 2; i++) h[i] = __bfloat162float(mw_silu_mul(g[i], u[i], 0));
#pragma unroll
    for (int q = 0; q < NT / 8; q++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            float v = fmaxf(fabsf(h[4 * q + e]), fabsf(h[4 * q + 2 + e]));
            v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 4));
            v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 8));
            v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 16));
            mx[2 * q + e] = v;
        }
    if (lane < 4)
#pragma unroll
        for (int q = 0; q < NT / 8; q++)
#pragma unroll
            for (int e = 0; e < 2; e++) red[w8 * NT + 8 * q + 2 * lane + e] = mx[2 * q + e];
    mw_consumers_sync();
}
template <int NT>
__device__ __forceinline__ float mw_qf_scale(const float *red, int c) {
    float v = red[c];
#pragma unroll
    for (int w = 1; w < 8; w++) v = fmaxf(v, red[w * NT + c]);
    return fmaxf(v, 1e-4f) / 448.0f;
}

/* The item's codes (both forms): token c's 128 columns quantized with its scale (written by the first warp's lanes 0 .. 3
 * for the chunk's rows < m.cnt), each code handed to put(c, the column within the item, code) */
template <int NT, typename Put>
__device__ __forceinline__ void mw_qf_codes(const float (&g)[NT / 2], const float (&u)[NT / 2], const mw_args &a,
                                            const mw_item &m, int cw, int warp, int lane, float *red, Put put) {
    float h[NT / 2];
    const int w8 = cw * 4 + warp, col = cw * 64 + 16 * warp + (lane >> 2);   /* w8: the consumer warp, 0 .. 7 */
    mw_qf_max<NT>(g, u, w8, lane, red, h);
    const int LKo = a.ldo / 128;
#pragma unroll
    for (int q = 0; q < NT / 8; q++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            int c = 8 * q + 2 * (lane & 3) + e;
            float scale = mw_qf_scale<NT>(red, c);
            if (w8 == 0 && lane < 4 && c < m.cnt) a.oscale[(size_t)(m.row0 + c) * LKo + m.nb] = scale;
#pragma unroll
            for (int hh = 0; hh < 2; hh++) put(c, col + 8 * hh, cu_f32_to_fp8_hw(h[4 * q + 2 * hh + e] / scale));
        }
}

/* mw_args.qf == 1: each code stored by its own thread (one byte; a warp instruction writes 8-byte pieces of 4 tokens' rows) */
template <int NT>
__device__ __forceinline__ void mw_store_qf(const float (&g)[NT / 2], const float (&u)[NT / 2], const mw_args &a,
                                            const mw_item &m, int cw, int warp, int lane, float *red) {
    unsigned char *out = (unsigned char *)a.out;
    mw_qf_codes<NT>(g, u, a, m, cw, warp, lane, red, [&](int c, int j, unsigned char v) {
        int n = m.nb * MW_BN + j;
        if (c < m.cnt && n < a.N) out[(size_t)(m.row0 + c) * a.ldo + n] = v;
    });
}

/* mw_args.qf == 2: the same codes as whole rows. Each warp puts its 16 columns of every token into cst ([NT][QR] bytes),
 * then after a consumer barrier the 256 threads store the item's rows as 16-byte pieces (a row's 128 codes by 8 threads:
 * whole sectors, where qf == 1 writes 8-byte pieces). The host takes this form only where N, ldo and out are 16-byte
 * multiples (a piece is all in or all out). The barrier also orders red's reads before the next item's writes (the
 * qf == 1 form's extra barrier under sx). hold: the item's last ring stage when cst is that stage (mw_shape::QF_SPARE
 * false): each warp gives it back after its reads, behind a proxy fence (the next TMA write follows these generic ones). */
template <int NT, int QR>
__device__ __forceinline__ void mw_store_qf_rows(const float (&g)[NT / 2], const float (&u)[NT / 2], const mw_args &a,
                                                 const mw_item &m, int cw, int warp, int lane, float *red, unsigned char *cst,
                                                 uint64_t *hold) {
    mw_qf_codes<NT>(g, u, a, m, cw, warp, lane, red, [&](int c, int j, unsigned char v) { cst[c * QR + j] = v; });
    mw_consumers_sync();
    const int tid = threadIdx.x - 128;
#pragma unroll
    for (int i = tid; i < NT * 8; i += 256) {
        int c = i >> 3, n = m.nb * MW_BN + 16 * (i & 7);
        if (c < m.cnt && n < a.N)
            *(uint4 *)((unsigned char *)a.out + (size_t)(m.row0 + c) * a.ldo + n) = *(const uint4 *)(cst + c * QR + 16 * (i & 7));
    }
    if (hold) {
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncwarp();
        if (lane == 0) mbar_arrive(hold);
    }
}

/* PAIR's BF16 SiLU(g) * u (the plain store's values, bit for bit) as whole 32-byte sectors (mw_args.st2): the plain store
 * writes, per warp instruction, 16-byte halves of four tokens' sectors, which the memory system takes at a fraction of
 * the rate of whole ones (MW_PROF: 7k cycles an item at 64 tokens against 1.4k for down's fp32 stores of whole sectors).
 * Per 8 tokens (q): the warp puts its 16 columns x 8 tokens into its 256 bytes of stg ([token][column]), then lane l
 * stores 8 bytes of token l / 4 (columns 4 (l % 4) ..): each token's 32 bytes in one sector. */
template <int NT>
__device__ __forceinline__ void mw_store_pair(const float (&g)[NT / 2], const float (&u)[NT / 2], const mw_args &a,
                                              const mw_item &m, int cw, int warp, int lane, __nv_bfloat16 *stg) {
    const int n0 = m.nb * MW_BN + cw * 64 + 16 * warp, tr = lane >> 2, tq = lane & 3;   /* n0: the warp's first column */
    const bool col_ok = n0 + 4 * tq < a.N;   /* (N % 4 == 0: the 8 bytes are all in or all out) */
#pragma unroll
    for (int q = 0; q < NT / 8; q++) {
        if (8 * q >= m.cnt) break;   /* (the warp's lanes agree) */
#pragma unroll
        for (int h = 0; h < 4; h++)
            stg[(2 * (lane & 3) + (h & 1)) * 16 + (lane >> 2) + 8 * (h >> 1)] = mw_silu_mul(g[4 * q + h], u[4 * q + h], a.lab);
        __syncwarp();
        uint2 v = *(const uint2 *)(stg + tr * 16 + 4 * tq);
        if (8 * q + tr < m.cnt && col_ok)
            *(uint2 *)((__nv_bfloat16 *)a.out + (size_t)(m.row0 + 8 * q + tr) * a.ldo + n0 + 4 * tq) = v;
        __syncwarp();   /* the reads before the next q's writes */
    }
}

/* cst, hold: mw_store_qf_rows' (a.qf == 2; else unused) */
template <bool PAIR, int NT>
__device__ __forceinline__ void mw_store(const float (&tot0)[NT / 2], const float (&tot1)[NT / 2], const mw_args &a,
                                         const mw_item &m, int tiles, int cw, int warp, int lane, int *flag, float *red,
                                         unsigned char *cst, uint64_t *hold) {
    const int tid = threadIdx.x - 128;
    if (PAIR && a.st2 && !a.qf) {
        mw_store_pair<NT>(tot0, tot1, a, m, cw, warp, lane, (__nv_bfloat16 *)(red + MW_QF_RED) + (cw * 4 + warp) * 128);
        return;
    }
    if (PAIR && a.qf == 2) {
        mw_store_qf_rows<NT, mw_shape<PAIR, NT>::QR>(tot0, tot1, a, m, cw, warp, lane, red, cst, hold);
        return;
    }
    if (PAIR && a.qf) {
        if (a.sx) mw_consumers_sync();   /* red's readers of the item before (without sx: mw_stage_scales' barriers) */
        mw_store_qf<NT>(tot0, tot1, a, m, cw, warp, lane, red);
        return;
    }
    if (!PAIR && a.ks > 1) {
        float4 *p = (float4 *)(a.part + ((size_t)(m.z * tiles + m.tile) * 256 + tid) * (NT / 2));
#pragma unroll
        for (int i = 0; i < NT / 8; i++) p[i] = make_float4(tot0[4 * i], tot0[4 * i + 1], tot0[4 * i + 2], tot0[4 * i + 3]);
        __threadfence();   /* this split's partial is visible device-wide before its ticket */
        mw_consumers_sync();
        if (tid == 0) {
            int last = atomicAdd(&a.tickets[m.tile], 1) == a.ks - 1;
            if (last) a.tickets[m.tile] = 0;   /* every split has taken its ticket: ready for the next launch */
            *flag = last;
        }
        mw_consumers_sync();
        if (!*flag) return;   /* (read before the next item's first barrier, after which thread 128 may write it) */
        __threadfence();
    }
    float sum[NT / 2];
#pragma unroll
    for (int i = 0; i < NT / 2; i++) sum[i] = PAIR || a.ks == 1 ? tot0[i] : 0.0f;
    if (!PAIR && a.ks > 1)
        for (int z = 0; z < a.ks; z += 2) {   /* in z order; two splits' values in flight at once */
            const float4 *p0 = (const float4 *)(a.part + ((size_t)(z * tiles + m.tile) * 256 + tid) * (NT / 2));
            const float4 *p1 = p0 + (size_t)tiles * 256 * (NT / 8);   /* split z + 1 */
            int two = z + 1 < a.ks;
            float4 v0[NT / 8], v1[NT / 8];
#pragma unroll
            for (int i = 0; i < NT / 8; i++) {
                v0[i] = __ldcg(p0 + i);
                v1[i] = two ? __ldcg(p1 + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
#pragma unroll
            for (int i = 0; i < NT / 8; i++) {
                sum[4 * i] += v0[i].x;
                sum[4 * i + 1] += v0[i].y;
                sum[4 * i + 2] += v0[i].z;
                sum[4 * i + 3] += v0[i].w;
                if (two) {
                    sum[4 * i] += v1[i].x;
                    sum[4 * i + 1] += v1[i].y;
                    sum[4 * i + 2] += v1[i].z;
                    sum[4 * i + 3] += v1[i].w;
                }
            }
        }
#pragma unroll
    for (int q = 0; q < NT / 8; q++)
#pragma unroll
        for (int h = 0; h < 4; h++) {
            int c = 8 * q + 2 * (lane & 3) + (h & 1), n = m.nb * MW_BN + cw * 64 + 16 * warp + (lane >> 2) + 8 * (h >> 1);
            if (c >= m.cnt || n >= a.N) continue;
            size_t o = (size_t)(m.row0 + c) * a.ldo + n;
            if (PAIR) {
                ((__nv_bfloat16 *)a.out)[o] = mw_silu_mul(sum[4 * q + h], tot1[4 * q + h], a.lab);
            } else {
                ((float *)a.out)[o] = sum[4 * q + h];
            }
        }
}

/* The producer's side of mw_args.pdl: waits for the kernel before (cu_pdl_wait), then requests the rows' codes of
 * stages 0 .. n - 1 (the first ring, whose weight tiles are already on their way: pkb / prow their k-block and first row,
 * the stage's bytes already expected on full[s]); returns 0 (nothing pending any more). */
template <int ST>
__device__ __forceinline__ int mw_codes_after_wait(unsigned char *sm, int stage_bytes, int codes_at, const CUtensorMap *tx,
                                                   int n, const int *pkb, const int *prow, uint64_t *full) {
    cu_pdl_wait();
    for (int s = 0; s < n; s++) tma_load(sm + s * stage_bytes + codes_at, tx, pkb[s] * MW_BK, prow[s], &full[s]);
    return 0;
}

/* PIPE's stage i of an item (FP8): wait for it, its 4 MMAs of k32 into acc from zero (PAIR: and the up tile's into accu,
 * interleaved as the plain loop issues them), committed as one group. it0: the ring's use count at the item's first
 * stage; ST the ring's stages; W: a weight tile's bytes (the up tile follows the gate tile). */
template <int NT, int ST, bool PAIR>
__device__ __forceinline__ void mw_pipe_issue(float (&acc)[NT / 2], float (&accu)[NT / 2], unsigned char *sm, uint64_t *full, int it0,
                                              int i, int stage, int cw, int W, int codes_at) {
    int it = it0 + i, s = it % ST;
    mbar_wait(&full[s], (it / ST) & 1);
    const unsigned char *a0 = sm + s * stage + cw * 64 * MW_BK, *a1 = a0 + W, *b = sm + s * stage + codes_at;
    wg_fence();
#pragma unroll
    for (int j = 0; j < 4; j++) {
        mw_mma<NT>(acc, wg_desc(a0 + 32 * j), wg_desc(b + 32 * j), j);
        if (PAIR) mw_mma<NT>(accu, wg_desc(a1 + 32 * j), wg_desc(b + 32 * j), j);
    }
    wg_commit();
}

/* PIPE's promotion of stage i (its MMAs complete): the stage given back, then tot += acc x (s_w s_x) (PAIR: totu += accu
 * x (s_u s_x)) as the plain loop does it (the same products in the same k-block order: the same bits); g, gu: the weight
 * tiles' scales for this k-block */
template <int NT, int ST, bool PAIR>
__device__ __forceinline__ void mw_pipe_promote(float (&tot)[NT / 2], float (&totu)[NT / 2], const float (&acc)[NT / 2],
                                                const float (&accu)[NT / 2], uint64_t *empty, int it0, int i, float g, float gu,
                                                const float *xsm, int lane) {
    if (lane == 0) mbar_arrive(&empty[(it0 + i) % ST]);
    const float *sx = xsm + i * NT + 2 * (lane & 3);   /* this thread's tokens 8q + 2 (lane % 4) + h */
#pragma unroll
    for (int q = 0; q < NT / 8; q++)
#pragma unroll
        for (int h = 0; h < 4; h++) {
            tot[4 * q + h] += acc[4 * q + h] * (g * sx[8 * q + (h & 1)]);
            if (PAIR) totu[4 * q + h] += accu[4 * q + h] * (gu * sx[8 * q + (h & 1)]);
        }
}

#ifdef MW_PROF
/* MW_PROF builds only (nvcc -DMW_PROF; dev/cuda/session_run.sh s30n): where a CTA's time goes, summed over the CTAs of a
 * launch in clock64 cycles (consumer thread 128: the item's start and scale staging, waits for a full stage, the MMAs to
 * their completion, the promotion, the store; producer thread 0: waits for an empty slot; both: the whole loop), kept by
 * the last CTA of launches MW_PROF_FIRST .. MW_PROF_FIRST + 3 (graph replays count) and printed by the host at the
 * backend's destruction (cu_moe_wg_prof_print) */
#define MW_PROF_FIRST 400
__device__ unsigned long long mw_prof_acc[8];
__device__ unsigned mw_prof_done, mw_prof_launch;
__device__ unsigned long long mw_prof_snap[4][12];   /* launches MW_PROF_FIRST ..: 8 sums a CTA, PAIR, NT, items, CTAs */
__device__ __forceinline__ long long mw_clock(void) { return clock64(); }
template <bool PAIR, int NT>
__device__ void mw_prof_finish(const long long (&c)[8], int items) {
    if (threadIdx.x == 128 || threadIdx.x == 0)
        for (int k = 0; k < 8; k++) if (c[k]) atomicAdd(&mw_prof_acc[k], (unsigned long long)c[k]);
    __syncthreads();
    if (threadIdx.x != 0) return;
    __threadfence();
    if (atomicAdd(&mw_prof_done, 1u) != gridDim.x - 1) return;
    __threadfence();
    unsigned L = atomicAdd(&mw_prof_launch, 1u);
    unsigned long long v[8];
    for (int k = 0; k < 8; k++) v[k] = atomicExch(&mw_prof_acc[k], 0ull);
    mw_prof_done = 0;
    if (L >= MW_PROF_FIRST && L < MW_PROF_FIRST + 4) {   /* no printf here: a call makes ptxas serialize the wgmma (C7510) */
        unsigned long long *o = mw_prof_snap[L - MW_PROF_FIRST];
        for (int k = 0; k < 8; k++) o[k] = v[k] / gridDim.x;
        o[8] = PAIR;
        o[9] = NT;
        o[10] = (unsigned long long)items;
        o[11] = gridDim.x;
    }
}
/* host: the snapshots, printed (at the backend's destruction) */
void cu_moe_wg_prof_print(void) {
    unsigned long long h[4][12];
    if (cudaMemcpyFromSymbol(h, mw_prof_snap, sizeof h) != cudaSuccess) return;
    for (int i = 0; i < 4; i++)
        if (h[i][11])
            printf("mw_prof launch %d PAIR %llu NT %llu: %llu items over %llu CTAs; cycles a CTA: consumer loop %llu = item start "
                   "+ scales %llu, waits for a full stage %llu, MMAs %llu, promotion %llu, store %llu; producer loop %llu, its "
                   "waits for an empty slot %llu\n", MW_PROF_FIRST + i, h[i][8], h[i][9], h[i][10], h[i][11], h[i][0], h[i][1],
                   h[i][2], h[i][3], h[i][4], h[i][5], h[i][6], h[i][7]);
}
#define MW_T(...) __VA_ARGS__
#else
#define MW_T(...)
#endif

/* Grid: any number of CTAs (the SMs), 384 threads, mw_smem_bytes() of dynamic shared memory.
 * tx: the rows' codes [R, K] (boxes of 128 columns x NT rows); tw: the dense form's weight map (boxes of
 * 128 x 128); a: the rest (mw_args). Weights [N, K] with [ceil(N / 128)][ws_cols] block scales; PAIR (grouped
 * only): gate and up per expert, out BF16 SiLU(g) * u, else fp32. K % 128 == 0.
 * BF (grouped only): BF16 weights and rows instead (a.K their row's bytes, 2K; no scales), a stage 64 columns,
 * k16 MMAs summed into one accumulator over the item's stages.
 * PIPE (FP8; DSINFER_CUDA_MOE_WG_PIPE: 1 the experts' down, 2 gate / up at 32 tokens a chunk too): the consumers keep two
 * k-blocks' MMAs in flight, two accumulator sets in turn: k-block i + 1's MMAs are issued before i's are waited for and
 * promoted (f8_tma_kernel's schedule), so a stage's MMA latency and promotion overlap the next one's. The same bits. */
template <bool PAIR, int NT, bool BF, bool PIPE = false>
__global__ void __launch_bounds__(384, 1) moe_wg_kernel(const __grid_constant__ CUtensorMap tx,
                                                        const __grid_constant__ CUtensorMap tw, const mw_args a) {
    typedef mw_shape<PAIR, NT> S;
    static_assert(!PIPE || !BF, "the pipelined consumers are the FP8 forms'");
    /* E: the experts of the item tables, the virtual ones included */
    const int NM = PAIR ? 2 : 1, NB = (a.N + MW_BN - 1) / MW_BN, LK = a.K / MW_BK, E = a.maps ? a.E + a.ns : 1;
    extern __shared__ unsigned char mw_raw[];
    unsigned char *sm = (unsigned char *)(((uintptr_t)mw_raw + 1023) & ~(uintptr_t)1023);
    uint64_t *full = (uint64_t *)(sm + MW_RING), *empty = full + MW_MAX_ST;
    uint64_t *sbar = empty + MW_MAX_ST;   /* mw_args.sx: [0, 1] the scale buffers full, [2, 3] empty */
    int *pre = (int *)(sbar + 4), *offs = pre + MW_MAX_E + 1, *flag = offs + MW_MAX_E + 1;
    float *xsm = (float *)(flag + 4);   /* [MW_XS]: the item's token scales */
    float *red = xsm + MW_XS;           /* [MW_QF_RED]: mw_store_qf's maxima; then MW_STG BF16: mw_store_pair's staging */
    if (threadIdx.x < 32) mw_tables<NT>(pre, offs, a.maps ? a.off : NULL, a.maps ? a.E : 1, a.R, a.maps ? a.ns : 0, a.ms, a.rr);
    if (threadIdx.x == 32) {
        for (int s = 0; s < S::ST; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 8);   /* the 8 consumer warps */
        }
        for (int p = 0; p < 2; p++) {
            mbar_init(&sbar[p], MW_SX_THREADS);
            mbar_init(&sbar[2 + p], 8);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    /* a kernel launched with PDL after this one (the down projection after gate / up, DSINFER_CUDA_MOE_WG_PDL) may start
     * its CTAs as this one's leave: SMs that finish their items early begin the next launch's weight stream */
    cu_pdl_trigger();
    int items = pre[E] * NB * a.ks, wg = threadIdx.x >> 7;
    if (wg == 0) {   /* producer: one thread */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        MW_T(long long pc[8] = {0}; long long p0 = mw_clock();)
        if (threadIdx.x == 0) {
            int it = 0;
            const uint64_t pol = cu_l2_evict_first();   /* (used where a.l2ef) */
            /* with a.pdl the first ring's stages get their weight tiles only; their codes (another kernel's output)
             * after cu_pdl_wait: pkb / prow [stage] hold each one's block and first row until then */
            int pend = a.pdl ? S::ST : 0, pkb[S::ST], prow[S::ST];
            const mw_span sp = mw_span_of(items, a.order);
            for (int t = sp.t0; t < sp.t1; t += sp.step) {
                mw_item m = mw_item_of<NT>(t, NB, pre, offs, E, a.ks, a.kc, LK);
                const CUtensorMap *wm = a.maps ? a.maps + (size_t)m.e * NM : &tw;
                if (a.pref && a.maps && t + sp.step < sp.t1) {   /* the next item's maps towards the TMA unit */
                    mw_item mn = mw_item_of<NT>(t + sp.step, NB, pre, offs, E, a.ks, a.kc, LK);
                    if (mn.e != m.e) {
                        asm volatile("prefetch.tensormap [%0];\n" ::"l"(a.maps + (size_t)mn.e * NM) : "memory");
                        if (PAIR) asm volatile("prefetch.tensormap [%0];\n" ::"l"(a.maps + (size_t)mn.e * NM + 1) : "memory");
                    }
                }
                for (int kb = m.kb0; kb < m.kb1; kb++, it++) {
                    int s = it % S::ST;
                    if (pend && it == pend) pend = mw_codes_after_wait<S::ST>(sm, S::STAGE, NM * S::W, &tx, pend, pkb, prow, full);
                    MW_T(long long pe = mw_clock();)
                    if (it >= S::ST) mbar_wait(&empty[s], (it / S::ST - 1) & 1);
                    MW_T(pc[7] += mw_clock() - pe;)
                    const int nocodes = (a.lab & 1) && kb > m.kb0 && !pend;
                    mbar_expect_tx(&full[s], nocodes ? NM * S::W : S::STAGE);
                    unsigned char *st = sm + s * S::STAGE;
                    const int wx = (a.lab & 4) && a.maps ? 0 : kb * MW_BK, wy = (a.lab & 4) && a.maps ? (m.nb * LK + kb) * MW_BN : m.nb * MW_BN;
                    tma_load_stream(st, wm, wx, wy, &full[s], a.l2ef, pol);   /* (pol: the weights' L2 policy) */
                    if (PAIR) tma_load_stream(st + S::W, wm + 1, wx, wy, &full[s], a.l2ef, pol);
                    if (nocodes) {
                    } else if (it < pend) {
                        pkb[it] = kb;
                        prow[it] = m.row0;
                    } else {
                        tma_load(st + NM * S::W, &tx, kb * MW_BK, m.row0, &full[s]);
                    }
                }
            }
            if (pend) mw_codes_after_wait<S::ST>(sm, S::STAGE, NM * S::W, &tx, it < pend ? it : pend, pkb, prow, full);
        } else if (!BF && a.sx && threadIdx.x >= 32 && threadIdx.x < 32 + MW_SX_THREADS) {
            mw_scale_warps<PAIR, NT>(xsm, sbar, a, pre, offs, E, NB, LK, items);
        }
        MW_T(pc[6] = threadIdx.x == 0 ? mw_clock() - p0 : 0; mw_prof_finish<PAIR, NT>(pc, items);)
        return;
    }
    if (a.pdl) cu_pdl_wait();   /* the token scales, the codes' stages and the output belong to the kernels around */
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    int cw = wg - 1, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, it = 0, j = 0;   /* j: items done (sx) */
    const bool qhold = PAIR && !BF && !PIPE && !S::QF_SPARE && a.qf == 2;   /* mw_store_qf_rows stages in the last stage */
    float acc0[NT / 2], acc1[NT / 2], tot0[NT / 2], tot1[NT / 2];
    for (int i = 0; i < NT / 2; i++) acc0[i] = acc1[i] = 0.0f;
    const mw_span sp = mw_span_of(items, a.order);
    MW_T(long long cc[8] = {0}; long long c0 = mw_clock(), ct;)
    for (int t = sp.t0; t < sp.t1; t += sp.step) {
        MW_T(ct = mw_clock();)
        float *buf = xsm + (j & 1) * (MW_XS / 2);   /* sx: item j's buffer (mw_scale_warps) */
        if (!BF && a.sx) mbar_wait(&sbar[j & 1], (j >> 1) & 1);
        mw_item m = !BF && a.sx ? mw_item_get((const int *)buf) : mw_item_of<NT>(t, NB, pre, offs, E, a.ks, a.kc, LK);
        if (BF) {   /* no scales: the item's stages straight into acc (zeroed by its first MMA) */
            for (int kb = m.kb0; kb < m.kb1; kb++, it++) {
                int s = it % S::ST;
                mbar_wait(&full[s], (it / S::ST) & 1);
                const unsigned char *a0 = sm + s * S::STAGE + cw * 64 * MW_BK, *a1 = a0 + S::W, *b = sm + s * S::STAGE + NM * S::W;
                wg_fence();
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    mw_mma_bf<NT>(acc0, wg_desc(a0 + 32 * j), wg_desc(b + 32 * j), kb > m.kb0 || j > 0);
                    if (PAIR) mw_mma_bf<NT>(acc1, wg_desc(a1 + 32 * j), wg_desc(b + 32 * j), kb > m.kb0 || j > 0);
                }
                wg_commit();
                wg_wait0();
                if (lane == 0) mbar_arrive(&empty[s]);
            }
            mw_store<PAIR, NT>(acc0, acc1, a, m, pre[E] * NB, cw, warp, lane, flag, red, NULL, NULL);
            continue;
        }
        for (int i = 0; i < NT / 2; i++) tot0[i] = tot1[i] = 0.0f;
        /* sw0 / sw1: the weight tiles' scales of k-block kb at [kb - ko]; xsj: the item's token scales [stage][NT] */
        const float *sw0, *sw1, *xsj;
        int ko;
        float g0 = 0.0f, g1 = 0.0f;   /* the weight tiles' scales, loaded one block ahead */
        if (a.sx) {   /* all in the item's buffer */
            sw0 = buf + MW_SXH;
            sw1 = sw0 + (m.kb1 - m.kb0);
            xsj = sw1 + (m.kb1 - m.kb0);
            ko = m.kb0;
            g0 = sw0[0];
            g1 = sw1[0];
        } else {
            const size_t wrow = (size_t)m.nb * (m.e < a.E ? a.ws_cols : a.sws_cols);   /* a virtual expert's scale rows */
            sw0 = (a.maps ? a.scales[m.e * NM] : a.w_scale) + wrow;
            sw1 = (a.maps ? a.scales[m.e * NM + NM - 1] : a.w_scale) + wrow;
            xsj = xsm;
            ko = 0;
            if (a.pref) {
                g0 = sw0[m.kb0];
                g1 = sw1[m.kb0];
            }
            mw_stage_scales<NT>(xsm, a.xs, m, LK, threadIdx.x - 128);
            if (!a.pref) {
                g0 = sw0[m.kb0];
                g1 = sw1[m.kb0];
            }
        }
        MW_T(cc[1] += mw_clock() - ct;)
        if constexpr (PIPE) {   /* (not BF: static_assert above) */
            /* k-blocks in turn in (acc0, acc1) and (acc2, acc3): gate, up (PAIR) */
            float acc2[NT / 2], acc3[NT / 2];
            for (int q = 0; q < NT / 2; q++) acc2[q] = acc3[q] = 0.0f;
            const int nk = m.kb1 - m.kb0, at = NM * S::W;
            float ga = g0, gua = g1, gb = 0.0f, gub = 0.0f;   /* the weight scales of the k-blocks in the two sets */
            mw_pipe_issue<NT, S::ST, PAIR>(acc0, acc1, sm, full, it, 0, S::STAGE, cw, S::W, at);
            int i = 0;
            for (; i + 2 < nk; i += 2) {   /* i in flight in (acc0, acc1) */
                gb = sw0[m.kb0 + i + 1 - ko];
                if (PAIR) gub = sw1[m.kb0 + i + 1 - ko];
                mw_pipe_issue<NT, S::ST, PAIR>(acc2, acc3, sm, full, it, i + 1, S::STAGE, cw, S::W, at);
                wg_wait1();
                mw_pipe_promote<NT, S::ST, PAIR>(tot0, tot1, acc0, acc1, empty, it, i, ga, gua, xsj, lane);
                ga = sw0[m.kb0 + i + 2 - ko];
                if (PAIR) gua = sw1[m.kb0 + i + 2 - ko];
                mw_pipe_issue<NT, S::ST, PAIR>(acc0, acc1, sm, full, it, i + 2, S::STAGE, cw, S::W, at);
                wg_wait1();
                mw_pipe_promote<NT, S::ST, PAIR>(tot0, tot1, acc2, acc3, empty, it, i + 1, gb, gub, xsj, lane);
            }
            if (i + 1 < nk) {   /* i in (acc0, acc1) and one more */
                gb = sw0[m.kb0 + i + 1 - ko];
                if (PAIR) gub = sw1[m.kb0 + i + 1 - ko];
                mw_pipe_issue<NT, S::ST, PAIR>(acc2, acc3, sm, full, it, i + 1, S::STAGE, cw, S::W, at);
                wg_wait1();
                mw_pipe_promote<NT, S::ST, PAIR>(tot0, tot1, acc0, acc1, empty, it, i, ga, gua, xsj, lane);
                wg_wait0();
                mw_pipe_promote<NT, S::ST, PAIR>(tot0, tot1, acc2, acc3, empty, it, i + 1, gb, gub, xsj, lane);
            } else {
                wg_wait0();
                mw_pipe_promote<NT, S::ST, PAIR>(tot0, tot1, acc0, acc1, empty, it, i, ga, gua, xsj, lane);
            }
            it += nk;
        } else if (a.lab & 2) {
            for (int kb = m.kb0; kb < m.kb1; kb++, it++) {
                mbar_wait(&full[it % S::ST], (it / S::ST) & 1);
                if (lane == 0 && !(qhold && kb + 1 == m.kb1)) mbar_arrive(&empty[it % S::ST]);
            }
        } else {
            for (int kb = m.kb0; kb < m.kb1; kb++, it++) {
                int s = it % S::ST;
                MW_T(long long t0 = mw_clock();)
                mbar_wait(&full[s], (it / S::ST) & 1);
                MW_T(long long t1 = mw_clock(); cc[2] += t1 - t0;)
                const unsigned char *a0 = sm + s * S::STAGE + cw * 64 * MW_BK, *a1 = a0 + S::W, *b = sm + s * S::STAGE + NM * S::W;
                wg_fence();
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    mw_mma<NT>(acc0, wg_desc(a0 + 32 * j), wg_desc(b + 32 * j), j);
                    if (PAIR) mw_mma<NT>(acc1, wg_desc(a1 + 32 * j), wg_desc(b + 32 * j), j);
                }
                wg_commit();
                float n0 = kb + 1 < m.kb1 ? sw0[kb + 1 - ko] : 0.0f, n1 = kb + 1 < m.kb1 ? sw1[kb + 1 - ko] : 0.0f;
                const float *sx = xsj + (kb - m.kb0) * NT + 2 * (lane & 3);   /* this thread's tokens 8q + 2 (lane % 4) + h */
                wg_wait0();
                MW_T(long long t2 = mw_clock(); cc[3] += t2 - t1;)
                if (lane == 0 && !(qhold && kb + 1 == m.kb1)) mbar_arrive(&empty[s]);   /* (qhold: after the item's store) */
#pragma unroll
                for (int q = 0; q < NT / 8; q++)
#pragma unroll
                    for (int h = 0; h < 4; h++) {
                        tot0[4 * q + h] += acc0[4 * q + h] * (g0 * sx[8 * q + (h & 1)]);
                        if (PAIR) tot1[4 * q + h] += acc1[4 * q + h] * (g1 * sx[8 * q + (h & 1)]);
                    }
                g0 = n0;
                g1 = n1;
                MW_T(cc[4] += mw_clock() - t2;)
            }
        }
        if (a.sx) {   /* this warp's reads of the scale buffer are done: give it back */
            __syncwarp();
            if (lane == 0) mbar_arrive(&sbar[2 + (j & 1)]);
        }
        j++;
        MW_T(long long t3 = mw_clock();)
        /* a.qf == 2: the codes' staging, past the ring's stages or in the item's last stage (qhold; the plain loop only:
         * the host takes the spare form or none with PIPE and lab bit 1) */
        unsigned char *cst = S::QF_SPARE ? sm + S::ST * S::STAGE : sm + ((it - 1) % S::ST) * S::STAGE;
        mw_store<PAIR, NT>(tot0, tot1, a, m, pre[E] * NB, cw, warp, lane, flag, red, cst, qhold ? &empty[(it - 1) % S::ST] : NULL);
        MW_T(cc[5] += mw_clock() - t3;)
    }
    MW_T(cc[0] = mw_clock() - c0; if (threadIdx.x != 128) for (int k = 0; k < 8; k++) cc[k] = 0; mw_prof_finish<PAIR, NT>(cc, items);)
}

int cu_moe_wg = 1, cu_moe_wg_nt = 0;   /* DSINFER_CUDA_MOE_WG, DSINFER_CUDA_MOE_WG_NT (backend creation) */
int cu_moe_wg_grid = 0;                /* DSINFER_CUDA_MOE_WG_GRID (backend creation, lab): the grouped launches' CTAs */
int cu_moe_wg_lab = 0;                 /* DSINFER_CUDA_MOE_WG_LAB (backend creation): mw_args.lab, timing only */
int cu_moe_wg_pref = 1;                /* DSINFER_CUDA_MOE_WG_PREF (backend creation): mw_args.pref */
int cu_moe_wg_pref_max_m = 128;        /* DSINFER_CUDA_MOE_WG_PREF_MAX_M: ... up to this many tokens (ncu at 256: +6 us a
                                        * layer with it, twenty-third session run 2; -0.13 ms a step at 32 .. 128) */
int cu_moe_wg_bf16 = 1;                /* DSINFER_CUDA_MOE_WG_BF16 (backend creation) */
long cu_moe_wg_qfhold_count = 0;       /* launches of mw_store_qf_rows' held-stage form, every backend (tests) */
int cu_f8_wg_max_m = 0;               /* DSINFER_CUDA_FP8_WG_MAX_M (backend creation; opt-in, RESULTS tenth session) */

template <bool BF>
static void mw_init(void) {
    CUDA_CHECK(cudaFuncSetAttribute(moe_wg_kernel<true, 32, BF>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)mw_smem_bytes()));
    CUDA_CHECK(cudaFuncSetAttribute(moe_wg_kernel<false, 32, BF>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)mw_smem_bytes()));
    CUDA_CHECK(cudaFuncSetAttribute(moe_wg_kernel<true, 64, BF>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)mw_smem_bytes()));
    CUDA_CHECK(cudaFuncSetAttribute(moe_wg_kernel<false, 64, BF>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)mw_smem_bytes()));
    CUDA_CHECK(cudaFuncSetAttribute(moe_wg_kernel<true, 48, BF>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)mw_smem_bytes()));
    CUDA_CHECK(cudaFuncSetAttribute(moe_wg_kernel<false, 48, BF>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)mw_smem_bytes()));
}

void cu_moe_wg_init(void) {
    mw_init<false>();
    mw_init<true>();
    CUDA_CHECK(cudaFuncSetAttribute(moe_wg_kernel<false, 32, false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)mw_smem_bytes()));
    CUDA_CHECK(cudaFuncSetAttribute(moe_wg_kernel<false, 64, false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)mw_smem_bytes()));
    CUDA_CHECK(cudaFuncSetAttribute(moe_wg_kernel<true, 32, false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)mw_smem_bytes()));
}

/* the kernel with nt (32, 48 or 64) tokens a chunk on a CTA an SM */
template <bool PAIR, bool BF = false>
static void mw_launch(ds_cuda_backend *cb, int nt, const CUtensorMap &tx, const CUtensorMap &tw, const mw_args &a0) {
    /* DSINFER_CUDA_MOE_WG_GRID (lab): at most this many persistent CTAs (any count takes every item: mw_span_of) */
    dim3 grid((unsigned)(cu_moe_wg_grid > 0 && cu_moe_wg_grid < cb->n_sm ? cu_moe_wg_grid : cb->n_sm));
    mw_args a = a0;
    /* grouped launches: the order asked for, by default 1 up to 128 tokens (FP8 b64 -0.045 ms; b256 +0.01 .. +0.04:
     * RESULTS twenty-ninth session run 3) */
    const int ord = cb->opt.moe_wg_order >= 0 ? cb->opt.moe_wg_order : a.ms <= 128 ? 1 : 0;
    a.order = a.maps ? ord : 0;
    a.sx = a.sx && !BF && a.maps && cu_moe_wg_sx_fits(nt, a.K);   /* an item fits one of the two buffers */
    a.st2 = PAIR && !a.qf && cb->opt.moe_wg_st2 && a.N % 4 == 0;
    /* PIPE: down at both chunk sizes, gate / up (=2) at 32 tokens (at 64 its four accumulator sets would not fit) */
    const bool pipe = !BF && cb->opt.moe_wg_pipe && nt != 48 && (!PAIR || (cb->opt.moe_wg_pipe >= 2 && nt == 32));
    if (PAIR && a.qf == 2) {   /* the rows form (mw_store_qf_rows): 16-byte pieces, and PIPE only with the spare staging */
        const bool spare = nt == 32 ? mw_shape<true, 32>::QF_SPARE : nt == 48 ? mw_shape<true, 48>::QF_SPARE : mw_shape<true, 64>::QF_SPARE;
        if (a.N % 16 || a.ldo % 16 || ((uintptr_t)a.out & 15) || (pipe && !spare)) a.qf = 1;
        else cu_moe_wg_qfhold_count += !spare;
    }
    if (pipe) {
        if (PAIR) cu_launch_pdl(a.pdl, moe_wg_kernel<true, 32, false, true>, grid, dim3(384), mw_smem_bytes(), tx, tw, a);
        else if (nt == 32) cu_launch_pdl(a.pdl, moe_wg_kernel<false, 32, false, true>, grid, dim3(384), mw_smem_bytes(), tx, tw, a);
        else cu_launch_pdl(a.pdl, moe_wg_kernel<false, 64, false, true>, grid, dim3(384), mw_smem_bytes(), tx, tw, a);
        cb->moe_wg_pipe_launches++;
    } else if (nt == 32) {
        cu_launch_pdl(a.pdl, moe_wg_kernel<PAIR, 32, BF>, grid, dim3(384), mw_smem_bytes(), tx, tw, a);
    } else if (nt == 48) {
        cu_launch_pdl(a.pdl, moe_wg_kernel<PAIR, 48, BF>, grid, dim3(384), mw_smem_bytes(), tx, tw, a);
        cb->moe_wg_nt48_launches++;
    } else {
        cu_launch_pdl(a.pdl, moe_wg_kernel<PAIR, 64, BF>, grid, dim3(384), mw_smem_bytes(), tx, tw, a);
    }
    CUDA_LAUNCH_CHECK();
    cb->moe_wg_pdl_launches += a.pdl != 0;
    cb->moe_wg_order_launches += a.order != 0;
    cb->moe_wg_sx_launches += a.sx != 0;
    cb->moe_wg_st2_launches += a.st2 != 0;
    cb->moe_wg_qfrow_launches += PAIR && a.qf == 2;
}

/* tokens a chunk: 32 up to a mean of 12 rows an expert (V2-Lite batch 128), 48 from 13 to nt48_max rows (opt.moe_wg_nt48,
 * default 20: V2-Lite b192, 18 rows, FP8 -0.19 ms; at b256, 24 rows, +0.1 .. +0.2: the shared experts' 256 rows take 6
 * chunks instead of 4, their weights read again for each; RESULTS twenty-ninth session run 10), else 64; an expert with
 * more rows than a chunk takes several */
int cu_moe_wg_chunk(int n_rows, int E, int nt48_max) {
    if (cu_moe_wg_nt == 32 || cu_moe_wg_nt == 48 || cu_moe_wg_nt == 64) return cu_moe_wg_nt;
    int mean = (n_rows + E - 1) / E;
    return mean <= 12 ? 32 : mean <= nt48_max ? 48 : 64;
}

/* The rows of one grouped launch pair: n_rows routed ones, then (ns > 0) the shared experts' virtual rows, ns x M
 * tokens (moe_wg_kernel's mw_args.ns / ms / rr); R = n_rows + ns M. tns: the virtual experts the layer's map table
 * holds (cu_expert_maps' ns), whether they run or not: its down maps start at 2 (E + tns). */
typedef struct {
    const int32_t *rows, *off;
    int n_rows, E, ns, M, R, tns;
} mw_rows;

/* mw_args of one grouped launch: maps / sc at the launch's first expert (gate / up or down), its scale rows (ws for the
 * routed experts, sws for the virtual ones), in: the rows' scales (FP8) or NULL, out and its row length ldo */
static mw_args mw_grouped_args(const mw_rows &r, const CUtensorMap *maps, const float *const *sc, const float *in_scales,
                               void *out, int N, int K, int ws, int sws, int kc) {
    mw_args a;
    memset(&a, 0, sizeof a);
    a.maps = maps;
    a.scales = sc;
    a.xs = in_scales;
    a.off = r.off;
    a.out = out;
    a.R = r.R;
    a.E = r.E;
    a.N = N;
    a.K = K;
    a.ws_cols = ws;
    a.ldo = N;
    a.ks = 1;
    a.kc = kc;
    a.ns = r.ns;
    a.ms = r.M;
    a.rr = r.n_rows;
    a.sws_cols = sws;
    a.pref = cu_moe_wg_pref && r.M <= cu_moe_wg_pref_max_m;
    a.lab = cu_moe_wg_lab;
    a.l2ef = (cu_l2ef & CU_L2EF_MOE_WG) != 0;
    return a;
}

/* The BF16 experts: rows gathered as BF16 [R, D] into xs_ws, gate/up writing BF16 SiLU(g) * u [R, I] after them, down
 * reading it: cu_moe_tc's BF16 layout, no quantization. */
static int mw_run_bf16(ds_cuda_backend *cb, float *y, const float *x, const mw_rows &r, int D, int I, const CUtensorMap *maps,
                       const float *const *sc, int nt, void *xs_ws) {
    const int E2 = r.E + r.tns;   /* the table's layout */
    __nv_bfloat16 *xs = (__nv_bfloat16 *)xs_ws, *inter = xs + (size_t)r.R * D;
    CUtensorMap t1, t2;
    if (!cu_tma_map(&t1, xs, r.R, 2 * D, nt) || !cu_tma_map(&t2, inter, r.R, 2 * I, nt)) return 0;
    if (r.ns) {
        if (!cu_rows_gather_sh(xs, NULL, x, r.rows, r.n_rows, r.M, r.R, D, 0)) return 0;
    } else {
        cu_rows_bf16_gather(xs, x, r.rows, r.R, D);
    }
    mw_args a1 = mw_grouped_args(r, maps, sc, NULL, inter, I, 2 * D, 0, 0, 2 * D / MW_BK);
    const int pdl = cb->opt.moe_wg_pdl < 0 ? 2 : cb->opt.moe_wg_pdl;   /* default: both (RESULTS twenty-fourth session run 3) */
    a1.pdl = pdl >= 2;   /* after the gather (launched plainly: the grouping before it is complete) */
    mw_launch<true, true>(cb, nt, t1, t1, a1);
    mw_args a2 = mw_grouped_args(r, maps + 2 * E2, sc ? sc + 2 * E2 : NULL, NULL, y, D, 2 * I, 0, 0, 2 * I / MW_BK);
    a2.pdl = pdl >= 1;
    mw_launch<false, true>(cb, nt, t2, t2, a2);
    return 1;
}

/* The FP8 experts as W8A8. xs_ws as cu_moe_tc's W8A8 form: the gathered rows' codes [R, D] and scales, BF16 SiLU(g) * u
 * [R, I] after R x D x 2 bytes, then its codes and scales over the first ones'. With opt.moe_wg_qf the gate / up
 * epilogue writes those codes and scales itself, where the BF16 copy would be (the first codes are still being read by
 * the launch's other CTAs): one launch fewer, the same bits (opt.moe_wg_qf). */
static int mw_run_f8(ds_cuda_backend *cb, float *y, const float *x, const mw_rows &r, int D, int I, const CUtensorMap *maps,
                     const float *const *sc, int nt, const ds_layer_weights *L, void *xs_ws) {
    const int E2 = r.E + r.tns, R = r.R;   /* E2: the table's layout */
    unsigned char *q = (unsigned char *)xs_ws;
    float *qs = (float *)(q + (size_t)R * D), *is = (float *)(q + (size_t)R * I);
    __nv_bfloat16 *inter = (__nv_bfloat16 *)xs_ws + (size_t)R * D;
    const int qf = cb->opt.moe_wg_qf;
    unsigned char *q2 = qf ? (unsigned char *)inter : q;   /* the down projection's codes */
    if (qf) is = (float *)(q2 + (size_t)R * I);
    CUtensorMap t1, t2;
    if (!cu_tma_map(&t1, q, R, D, nt) || !cu_tma_map(&t2, q2, R, I, nt)) return 0;
    if (r.ns) {
        if (!cu_rows_gather_sh(q, qs, x, r.rows, r.n_rows, r.M, R, D, 1)) return 0;
    } else {
        cu_rows_fp8_gather(q, qs, x, r.rows, R, D);
    }
    mw_args a1 = mw_grouped_args(r, maps, sc, qs, qf ? (void *)q2 : (void *)inter, I, D, L->exp_gate[0].scale_cols,
                                 r.ns ? L->sh_gate.scale_cols : 0, D / MW_BK);
    a1.oscale = is;
    a1.qf = qf;
    a1.sx = cb->opt.moe_wg_sx;
    /* gate / up with PDL only after a plainly launched gather (under CU_F8_PDL the gather itself may start before the
     * grouping ends, and gate / up reads off[] before its wait) */
    const int pdl = cb->opt.moe_wg_pdl < 0 ? 0 : cb->opt.moe_wg_pdl;   /* default none: slower (RESULTS twenty-fourth session run 3) */
    a1.pdl = pdl >= 2 && !CU_F8_PDL;
    mw_launch<true>(cb, nt, t1, t1, a1);
    if (!qf) cu_rows_fp8_bf16(q, is, inter, R, I, cb->opt.quant_warp);
    mw_args a2 = mw_grouped_args(r, maps + 2 * E2, sc + 2 * E2, is, y, D, I, L->exp_down[0].scale_cols,
                                 r.ns ? L->sh_down.scale_cols : 0, I / MW_BK);
    a2.pdl = pdl >= 1;   /* after the quantizer (plain) or gate / up (qf), which wait before they trigger */
    a2.sx = cb->opt.moe_wg_sx;
    mw_launch<false>(cb, nt, t2, t2, a2);
    return 1;
}

int cu_moe_wg_run(ds_cuda_backend *cb, float *y, const float *x, const int32_t *rows, const int32_t *off, int n_rows, int E,
                  int D, int I, const ds_layer_weights *L, void *xs_ws, int sh_m, int *sh_done) {
    const ds_weight *g = &L->exp_gate[0];
    int bf = cu_moe_wg_bf16 && g->dtype == DS_DTYPE_BF16 && !g->scale && D % 64 == 0 && I % 64 == 0;
    int f8 = cu_moe_wg && cu_moe_w8a8 && g->dtype == DS_DTYPE_F8_E4M3 && g->scale && D % MW_BK == 0 && I % MW_BK == 0 &&
             64 * (D > I ? D : I) / MW_BK <= MW_XS && (size_t)I * 33 / 32 <= (size_t)D * 2;
    const CUtensorMap *maps;
    const float *const *sc;
    int ns = 0;
    *sh_done = 0;
    if ((!bf && !f8) || n_rows < 1 || E < 1 || E > MW_MAX_E ||
        !cu_expert_maps(cb, L, E, D, I, !cu_capturing(), &maps, &sc, &ns))
        return 0;
    /* the shared experts as virtual experts where asked for and made (and the tables hold them) */
    mw_rows r = {rows, off, n_rows, E, sh_m > 0 && ns > 0 && E + ns <= MW_MAX_E ? ns : 0, sh_m, 0, ns};
    r.R = n_rows + r.ns * sh_m;
    int nt = cu_moe_wg_chunk(n_rows, E, cb->opt.moe_wg_nt48);   /* by the routed rows: the virtual experts' M tokens take their own chunks */
    int ok = bf ? mw_run_bf16(cb, y, x, r, D, I, maps, sc, nt, xs_ws) : mw_run_f8(cb, y, x, r, D, I, maps, sc, nt, L, xs_ws);
    *sh_done = ok && r.ns;
    return ok;
}

/* whether mw_args.sx can stage an item of nt tokens and K columns (grouped: kc = K / 128) in one of the two buffers */
int cu_moe_wg_sx_fits(int nt, int K) { return MW_SXH + (nt + 2) * (K / MW_BK) <= MW_XS / 2; }

void cu_moe_wg_virtual(int *pre, int *offs, int E, int ns, int ms, int rr, int nt) { mw_append_virtual(pre, offs, E, ns, ms, rr, nt); }

void cu_moe_wg_item(int t, int NB, const int *pre, const int *offs, int E, int ks, int kc, int LK, int nt, int out[8]) {
    mw_item m = nt == 32 ? mw_item_of<32>(t, NB, pre, offs, E, ks, kc, LK) : mw_item_of<64>(t, NB, pre, offs, E, ks, kc, LK);
    int v[8] = {m.e, m.row0, m.cnt, m.nb, m.z, m.kb0, m.kb1, m.tile};
    memcpy(out, v, sizeof v);
}

/* The K splits of the dense form: tiles (chunks x weight blocks) fewer than the SMs are split as far as one
 * wave holds, each split at least 2 stages, and at most MW_XS / nt stages a split (its token scales in shared
 * memory). 0: not possible (more tiles than tickets with a split needed). *kc: stages a split. */
int cu_f8_wg_splits(int M, int N, int K, int n_sm, int nt, int *kc) {
    int tiles = (M + nt - 1) / nt * ((N + MW_BN - 1) / MW_BN), LK = K / MW_BK;
    /* one wave (a second, partial one would double the time), at most MW_MAX_KS splits: the last one's sum reads
     * the others' partials two at a time (ks = 28 at 256 x 7168 cost ~45 us in run 4) */
    int ks = n_sm / tiles, max_ks = LK / 2 > 0 ? LK / 2 : 1;
    if (max_ks > MW_MAX_KS) max_ks = MW_MAX_KS;
    if (ks > max_ks) ks = max_ks;
    if (ks < (LK * nt + MW_XS - 1) / MW_XS) ks = (LK * nt + MW_XS - 1) / MW_XS;   /* an item's scales fit in shared memory */
    if (ks < 1) ks = 1;
    if (ks > 1 && tiles > CU_F8_WG_TICKETS) return 0;
    *kc = (LK + ks - 1) / ks;
    return (LK + *kc - 1) / *kc;   /* no empty split */
}

int cu_f8_wg_linear(ds_cuda_backend *cb, float *out, const float *x, const ds_weight *w, int M) {
    int N = w->rows, K = w->cols;
    if (M < 1 || M > cu_f8_wg_max_m || w->dtype != DS_DTYPE_F8_E4M3 || !w->scale || K % MW_BK ||
        ((uintptr_t)w->data & 15))
        return 0;
    if (!cb->f8_tickets) {   /* made once, zero; outside a capture (the first, eager step makes it) */
        if (cu_capturing()) return 0;
        CUDA_CHECK(cudaMalloc(&cb->f8_tickets, sizeof(int) * CU_F8_WG_TICKETS));
        CUDA_CHECK(cudaMemset(cb->f8_tickets, 0, sizeof(int) * CU_F8_WG_TICKETS));
    }
    int nt = M <= 32 ? 32 : 64, kc, ks = cu_f8_wg_splits(M, N, K, cb->n_sm, nt, &kc);
    if (!ks) return 0;
    size_t qb = ((size_t)M * K + 255) / 256 * 256, sb = (size_t)M * (K / MW_BK) * 4;
    unsigned char *q = (unsigned char *)cu_ws_get(&cb->ws_fp8, qb + sb);
    size_t tiles = (size_t)(M + nt - 1) / nt * ((N + MW_BN - 1) / MW_BN);   /* the partials: 256 threads x nt / 2 a tile */
    float *qs = (float *)(q + qb), *part = ks > 1 ? (float *)cu_ws_get(&cb->ws_f8part, (size_t)ks * tiles * 256 * (nt / 2) * 4) : NULL;
    CUtensorMap tx, tw;
    if (!cu_tma_map(&tx, q, M, K, nt) || !cu_tma_map(&tw, w->data, N, K, MW_BN)) return 0;
    cu_rows_fp8_f32(q, qs, x, M, K);
    mw_args a = {NULL, NULL, w->scale, qs, NULL, out, NULL, 0, part, cb->f8_tickets, M, 1, N, K, w->scale_cols, N, ks, kc,
                 0, 0, 0, 0, 0};
    mw_launch<false>(cb, nt, tx, tw, a);
    return 1;
}
