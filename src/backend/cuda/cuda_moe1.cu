/* The MoE block of one token in one launch (issue 7, batch 1; DSINFER_CUDA_MOE1, opt-in).
 *
 * At batch 1 the MoE block is ~8 launches a layer (router GEMV, routing, grouping, the shared experts' gate / up and
 * down, the routed experts' gate / up and down, the combine), each a short read of a few MB whose start and end cost
 * more than its bytes (dev/cuda/KERNELS.md, twenty-sixth to thirtieth sessions: ~0.9 us a boundary in a graph, and GEMV
 * reads of a few MB reaching 1.4 TB/s of the 4.2 a copy reaches). Here the block is one cooperative launch of a block an
 * SM, in three phases separated by grid barriers (cuda_grid.h):
 *   A. the router's logits [E];
 *   B. every block routes the token itself (route_warp on the same logits: the same choices everywhere, no barrier
 *      for it) with one warp while its other warps make the shared experts' SiLU(g) * u [sI] (x only: the routing's
 *      latency hidden behind their stream), then the chosen experts' SiLU(g) * u [K][I];
 *   C. out[d] = the shared down row d . inter_sh + sum_k w_k (the expert's down row d . inter_k), as one dot product of
 *      the rows' concatenation with [inter_sh | w_1 inter_1 | ...] (every output row a warp: no combine launch).
 * Each phase's rows are spread over all warps of the grid (warp-major across blocks); a warp reads its rows' 16-byte
 * chunks with M1_U (phase C: M1_US) of them in flight a lane. The arithmetic is the grouped GEMV's (fp32 x, FP8 codes
 * times their 128 x 128 block scale or BF16, fp32 sums) in another order of additions, and phase C adds the weighted
 * experts inside one sum where the combine adds weight x output per expert: NMSE-level differences against the CPU (op
 * test moe1).
 * Its weight stream restarts at each phase, as separate launches' would; the lab of `bench --ceilings` (the streamed
 * phases) measures what a producer streaming across the barriers would add.
 *
 * The layer's tail (opt.moe1 2, backend layer_tail1; thirty-fourth session) adds a phase before and one after:
 *   O. the attention's output projection o . ao [D] over the grid's warps (into out, which phase C overwrites); after a
 *      barrier every block makes h + o . ao and its norm (post_norm) itself, phase A's x, with no barrier for it;
 *   D. after phase C's rows, every block makes h + out and the next layer's input norm, then the next layer's two
 *      projections of it (q, or q_a, and kv_a) over the grid's warps.
 * So the b1 MoE layer's tail is one launch where it is 2 .. 3 (o's GEMV, its split-K sum, the add and norm) plus the MoE
 * block plus 2 .. 3 more (the add and norm, the two projections); the attention's interior (qkv_finish, the absorb, the
 * MLA decode, its combine, W_UV) stays as it is. h and xn are written by block 0 only after every block has read h.
 *
 * Measured (bench/RESULTS.md, thirty-fourth session): correct in every form, and no faster than the launches they replace
 * (FP8 b1 the same at opt.moe1 1, +0.03 ms at 2, +0.24 at 3): the block streams its 69.5 MB at 1.41 TB/s, and `bench
 * --ceilings` shows a grid barrier under a weight stream costing ~2.9 us of it, more than a kernel boundary in a graph.
 * Kept opt-in as the measured form of that idea. */
#include "backend/cuda/cuda_grid.h"
#include "backend/cuda/cuda_route.h"

#define M1_WARPS 16
#define M1_THREADS (M1_WARPS * 32)
#define M1_U 4    /* 16-byte chunks a lane has in flight a row (m1_rows: 4 KB a warp for a pair of rows) */
#define M1_US 8   /* ... in phase C's one long row a warp (m1_segs: 4 KB a warp, 64 KB an SM, a loaded round trip) */
#define M1_SMEM_MAX (200 * 1024)   /* V3: ~106 KB */

typedef struct {
    const float *x;        /* [D] the token's normed hidden state */
    float *out;            /* [D] the block's output (shared + routed) */
    cu_wview router;       /* [E, D] BF16 or fp32 */
    cu_wview bias;         /* [E] noaux_tc's correction (data NULL: none) */
    const cu_wview *tab;   /* the layer's expert table (cuda_moe.cu moe_table): gate [E], up [E], down [E] */
    cu_wview sg, su, sd;   /* the shared experts as one MLP of sI rows (sI 0: none) */
    float *logits;         /* [E] */
    float *inter;          /* [sI + K I]: SiLU(g) * u of the shared experts, then of each choice in choice order */
    unsigned *bar;         /* [2]: cu_grid_sync's count and generation */
    int D, I, sI;
    route_cfg rc;
    /* the layer-tail form (x NULL): phase O from ao, phase D where nq.data */
    float *ao;             /* [HV] the attention's output, heads concatenated (made by phases I1 .. I3 where attn) */
    cu_wview o, post_norm; /* [D, HV], [D] */
    float *h, *xn;         /* [D] the residual stream (h += o . ao, then += out where phase D) and the last norm's output */
    float eps;             /* both norms' */
    int HV;
    cu_wview in_norm;      /* [D] the next layer's input norm (phase D) */
    cu_wview nq, nkv;      /* [Rq, D], [Rkv, D] its projections of that norm: q (or q_a) and kv_a */
    float *q, *kv;         /* [Rq], [Rkv] their outputs */
    int pf;                /* opt.moe1_pf: each warp asks L2 for its next phase's rows before a grid barrier */
    /* the attention form (opt.moe1 3, backend layer1): phases I1 .. I3 make ao from this layer's projections first */
    int attn;
    float *aq, *akv;                /* [H dqk], [C + dr]: the layer's q and kv_a projections (roped, normed in place) */
    unsigned short *cache;          /* the layer's latent cache, BF16 rows of C + dr */
    const int32_t *positions, *tok_seq, *page_table;   /* the batch's (one token) */
    int pt_stride, page_size;
    cu_wview kvb, kv_norm;          /* [H (dn + dv), C] (the experts' form), [C] */
    float kv_eps, amp, sm_scale;
    const float *inv_freq;          /* [dr / 2] */
    float *qlat, *part, *ml;        /* scratch: [H][C + dr] (q_lat | q_pe), [Smax][H][C], [Smax][H][2] */
    int H, dn, dv, dr, C, Smax;
} m1_args;

#define M1_TS 16   /* cached tokens a split of phase I2 (one block each): 65 splits at 1K, their partials 2 MB (L2) */
#define M1_QP 10   /* q's column pairs a lane holds in phase I2: C + dr <= 64 M1_QP */

/* shared memory (floats unless named): x [D], hs [D] (the residual's sum; tail form only, else none), vec [max(sI + K I,
 * HV)] (phase C's vector; phase O's ao), lg [E], s [E], b [E], bias [E], g [MOE_MAX_GROUPS], red [M1_WARPS] (the norms'
 * sums; route_warp's red is its first), w [K], ids [K] int, cb [K + 2] int (phase C's chunk starts), taken [E] bytes,
 * then the segment views seg [K + 1] (16-byte aligned). HV 0: not the tail form. */
__host__ __device__ static size_t m1_vec(int I, int sI, int K, int HV) {
    size_t v = (size_t)sI + (size_t)K * I;
    return (size_t)HV > v ? (size_t)HV : v;
}
/* the attention form's floats of that region (0: not that form): I1's per-warp sums [M1_WARPS][C]; I2's q_lat | q_pe
 * [H][C + dr], the split's cache rows as BF16 [M1_TS][C + dr] (half as many floats) and the weights p [H][M1_TS]; I3's
 * o_lat [C], the splits' weights [Smax] and 1 / L */
__host__ __device__ static size_t m1_att(int H, int C, int dr, int Smax) {
    if (!H) return 0;
    size_t i1 = (size_t)M1_WARPS * C, i2 = (size_t)H * (C + dr) + (size_t)M1_TS * (C + dr) / 2 + (size_t)H * M1_TS;
    size_t i3 = (size_t)C + Smax + 1, m = i1 > i2 ? i1 : i2;
    return m > i3 ? m : i3;
}
static size_t m1_smem(int D, int I, int sI, int E, int K, int HV, size_t att) {
    size_t v = m1_vec(I, sI, K, HV);
    size_t f = (size_t)D * (HV ? 2 : 1) + (att > v ? att : v) + 4 * (size_t)E + MOE_MAX_GROUPS + M1_WARPS +
               2 * (size_t)K + K + 2;
    size_t b = f * 4 + (size_t)E;
    b = (b + 15) / 16 * 16;
    return b + sizeof(cu_wview) * (size_t)(K + 1);
}

__device__ __forceinline__ uint4 m1_ld16(const void *p) {   /* streamed once: not kept in L1 */
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}

/* a[i] += the 16-byte chunk q[i] of NR rows (EB bytes an element: 1 FP8 codes times their block scale s[i], 2 BF16, 4
 * fp32) dotted with the V = 16 / EB floats at v (shared memory), x read once for the NR rows. The chunk's P = V / 4
 * float4 pieces of x are taken in an order rotated by lane (rot) so that the 8 lanes of a shared-memory phase, whose
 * chunks lie 16 P bytes apart, read 8 different 16-byte bank groups: no conflicts (in piece order FP8's lanes would
 * meet 4 to a group). */
template <int EB, int NR>
__device__ __forceinline__ void m1_chunk_dots(const uint4 (&q)[NR], const float (&s)[NR], const float *v, int lane,
                                              float (&a)[NR]) {
    constexpr int P = 4 / EB;
    const int rot = EB == 1 ? lane >> 1 : EB == 2 ? lane >> 2 : 0;
#pragma unroll
    for (int i = 0; i < P; i++) {
        const int j = (i + rot) & (P - 1);
        const float4 xv = *(const float4 *)(v + 4 * j);
#pragma unroll
        for (int r = 0; r < NR; r++) {
            float w[4];
            if constexpr (EB == 1) {
                const uint32_t word = j == 0 ? q[r].x : j == 1 ? q[r].y : j == 2 ? q[r].z : q[r].w;
                cu_fp8x4(word, s[r], w);
            } else if constexpr (EB == 2) {
                const uint32_t lo = j == 0 ? q[r].x : q[r].z, hi = j == 0 ? q[r].y : q[r].w;
                w[0] = __uint_as_float(lo << 16);
                w[1] = __uint_as_float(lo & 0xffff0000u);
                w[2] = __uint_as_float(hi << 16);
                w[3] = __uint_as_float(hi & 0xffff0000u);
            } else {
                w[0] = __uint_as_float(q[r].x);
                w[1] = __uint_as_float(q[r].y);
                w[2] = __uint_as_float(q[r].z);
                w[3] = __uint_as_float(q[r].w);
            }
            a[r] += w[0] * xv.x + w[1] * xv.y + w[2] * xv.z + w[3] * xv.w;
        }
    }
}

/* chunk c (16 bytes, columns c V ..) of row r of w, and its block scale (FP8; else 1) */
template <int EB>
__device__ __forceinline__ void m1_chunk(const cu_wview &w, int r, int c, uint4 *q, float *s) {
    constexpr int V = 16 / EB;
    *q = m1_ld16((const char *)w.data + ((size_t)r * (size_t)w.cols + (size_t)c * V) * EB);
    *s = EB == 1 ? __ldg(w.scale + (size_t)(r >> 7) * (size_t)w.scale_cols + (size_t)((c * V) >> 7)) : 1.0f;
}

/* one warp: out[i] = row r[i] of w[i] . x (shared memory) for NR rows of n columns, loaded together; every lane gets
 * the sums (r[i] < 0: no row, out[i] 0) */
template <int EB, int NR>
__device__ __forceinline__ void m1_rows(const cu_wview (&w)[NR], const int (&r)[NR], const float *x, int n, int lane,
                                        float (&out)[NR]) {
    constexpr int V = 16 / EB;
    const int nc = n / V;
    float a[NR];
#pragma unroll
    for (int i = 0; i < NR; i++) a[i] = 0.0f;
    for (int c0 = lane; c0 < nc; c0 += 32 * M1_U) {
        uint4 q[M1_U][NR];
        float s[M1_U][NR];
#pragma unroll
        for (int u = 0; u < M1_U; u++)
#pragma unroll
            for (int i = 0; i < NR; i++) {
                q[u][i] = make_uint4(0, 0, 0, 0);
                s[u][i] = 0.0f;
                if (c0 + 32 * u < nc && r[i] >= 0) m1_chunk<EB>(w[i], r[i], c0 + 32 * u, &q[u][i], &s[u][i]);
            }
#pragma unroll
        for (int u = 0; u < M1_U; u++)
            if (c0 + 32 * u < nc) m1_chunk_dots<EB, NR>(q[u], s[u], x + (size_t)(c0 + 32 * u) * V, lane, a);
    }
#pragma unroll
    for (int i = 0; i < NR; i++) out[i] = cu_warp_sum(a[i]);
}

/* one warp: the sum over segments j < ns of row d of seg[j] . its part of vec, the segments' chunks numbered one after
 * another (cb[j] the first of segment j, cb[ns] their count) as vec's values are laid out; every lane gets the sum */
template <int EB>
__device__ __forceinline__ float m1_segs(const cu_wview *seg, const int *cb, int ns, int d, const float *vec, int lane) {
    constexpr int V = 16 / EB;
    const int nc = cb[ns];
    float a[1] = {0.0f};
    for (int c0 = lane; c0 < nc; c0 += 32 * M1_US) {
        uint4 q[M1_US][1];
        float s[M1_US][1];
#pragma unroll
        for (int u = 0; u < M1_US; u++) {
            int c = c0 + 32 * u, j = 0;
            q[u][0] = make_uint4(0, 0, 0, 0);
            s[u][0] = 0.0f;
            if (c >= nc) continue;
            while (c >= cb[j + 1]) j++;
            m1_chunk<EB>(seg[j], d, c - cb[j], &q[u][0], &s[u][0]);
        }
#pragma unroll
        for (int u = 0; u < M1_US; u++)
            if (c0 + 32 * u < nc) m1_chunk_dots<EB, 1>(q[u], s[u], vec + (size_t)(c0 + 32 * u) * V, lane, a);
    }
    return cu_warp_sum(a[0]);
}

/* one warp (lane 0): row r of w towards L2 with one bulk prefetch (no registers held, nothing to wait for); the rows
 * are whole 16-byte chunks (cu_moe1's checks). The FP8 block scales are left to the loads: a 4-byte read for 128 rows. */
__device__ __forceinline__ void m1_pf_row(const cu_wview &w, int r, int eb, int lane) {
    if (lane) return;
    const unsigned bytes = (unsigned)w.cols * (unsigned)eb;
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"((const char *)w.data + (size_t)r * bytes), "r"(bytes)
                 : "memory");
}

/* acc[j] += alpha * the chunk's V values (FP8 codes times their block scale, or BF16) */
template <int EB>
__device__ __forceinline__ void m1_chunk_axpy(uint4 q, float s, float alpha, float (&acc)[16 / EB]) {
    const uint32_t wd[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
        if constexpr (EB == 1) {
            float w[4];
            cu_fp8x4(wd[j], s, w);
#pragma unroll
            for (int e = 0; e < 4; e++) acc[4 * j + e] += alpha * w[e];
        } else {
            acc[2 * j] += alpha * __uint_as_float(wd[j] << 16);
            acc[2 * j + 1] += alpha * __uint_as_float(wd[j] & 0xffff0000u);
        }
    }
}

/* I1 (blocks h < H, one head each): q's RoPE part of head h rotated in place, and q_lat[h] = q_nope[h] . W_UK[h] (kv_b's
 * dn key rows of the head, C columns) into a.qlat with q_pe after it. Warp w takes rows d = w, w + M1_WARPS, ..; lane l
 * the chunks l, l + 32, .. of a row (V columns each), M1_AR rows' chunks loaded before any is used (one round trip for
 * them), summed over the warp's rows in registers, then over the warps in red [M1_WARPS][C] in warp order. C % (32 V)
 * == 0 (cu_moe1's checks). */
#define M1_AR 8
template <int EB>
__device__ void m1_absorb(const m1_args &a, int h, float *red, float pos) {
    constexpr int V = 16 / EB;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, C = a.C, dqk = a.dn + a.dr, nu = C / (32 * V);
    float *qh = a.aq + (size_t)h * dqk;
    for (int i = threadIdx.x; i < a.dr / 2; i += M1_THREADS) rope_pair(qh + a.dn, i, pos, a.inv_freq, a.amp);
    for (int u = 0; u < nu; u++) {   /* (nu: 1 for FP8 at C = 512, 2 for BF16) */
        float acc[V];
#pragma unroll
        for (int j = 0; j < V; j++) acc[j] = 0.0f;
        for (int d0 = warp; d0 < a.dn; d0 += M1_AR * M1_WARPS) {
            uint4 q[M1_AR];
            float sc[M1_AR], al[M1_AR];
#pragma unroll
            for (int k = 0; k < M1_AR; k++) {
                const int d = d0 + k * M1_WARPS;
                q[k] = make_uint4(0, 0, 0, 0);
                sc[k] = al[k] = 0.0f;
                if (d < a.dn) {
                    m1_chunk<EB>(a.kvb, h * (a.dn + a.dv) + d, lane + 32 * u, &q[k], &sc[k]);
                    al[k] = __ldcg(qh + d);
                }
            }
#pragma unroll
            for (int k = 0; k < M1_AR; k++) m1_chunk_axpy<EB>(q[k], sc[k], al[k], acc);
        }
#pragma unroll
        for (int j = 0; j < V; j++) red[(size_t)warp * C + (lane + 32 * u) * V + j] = acc[j];
    }
    __syncthreads();   /* (every thread's q_pe pairs rotated too) */
    float *ql = a.qlat + (size_t)h * (C + a.dr);
    for (int c = threadIdx.x; c < C; c += M1_THREADS) {
        float v = 0.0f;
        for (int w = 0; w < M1_WARPS; w++) v += red[(size_t)w * C + c];
        ql[c] = v;
    }
    for (int i = threadIdx.x; i < a.dr; i += M1_THREADS) ql[C + i] = qh[a.dn + i];
}

/* I1 (block H): kv's latent part RMS-normed (kv_norm, kv_eps), its RoPE part rotated, both in place (qkv_finish's values),
 * and the row into its cache slot in BF16; red: M1_WARPS floats */
__device__ void m1_kv_row(const m1_args &a, float *red, float pos, int p) {
    const int C = a.C, w = C + a.dr;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < C; i += M1_THREADS) {
        const float v = a.akv[i];
        ss += v * v;
    }
    ss = cu_warp_sum(ss);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
    __syncthreads();
    float t = 0.0f;
    for (int k = 0; k < M1_WARPS; k++) t += red[k];
    const float r = 1.0f / sqrtf(t / (float)C + a.kv_eps);
    for (int i = threadIdx.x; i < C; i += M1_THREADS) a.akv[i] = a.akv[i] * r * cu_w(a.kv_norm, 0, i);
    for (int i = threadIdx.x; i < a.dr / 2; i += M1_THREADS) rope_pair(a.akv + C, i, pos, a.inv_freq, a.amp);
    __syncthreads();
    const int s = a.tok_seq[0];
    const size_t slot = (size_t)a.page_table[(size_t)s * a.pt_stride + p / a.page_size] * a.page_size + (size_t)(p % a.page_size);
    for (int i = threadIdx.x; i < w; i += M1_THREADS) a.cache[slot * w + i] = cu_f32_to_bf16_bits(a.akv[i]);
}

/* I2 (block b, splits sp = b, b + grid, ..): split sp's cached tokens j in [sp M1_TS, min(n, (sp + 1) M1_TS)) against
 * every head: scores (q_lat . c_j + q_pe . k_pe_j) sm_scale, their max m and sum l of exp(s - m) into a.ml, and the
 * weighted latent sum o[h][c] = sum_j exp(s_j - m) c_j[c] into a.part. Warp w takes heads w, w + M1_WARPS, ..: its q in
 * registers (lane l: the column pairs l, l + 32, ..; C + dr <= 64 M1_QP), the rows read as BF16 pairs, a score a warp
 * sum. sm: [H][C + dr] q, then [M1_TS][C + dr] BF16 rows, then p [H][M1_TS]. */
__device__ void m1_decode_splits(const m1_args &a, float *sm, int n) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, C = a.C, w = C + a.dr, H = a.H, w2 = w / 2;
    const int S = (n + M1_TS - 1) / M1_TS, s = a.tok_seq[0];
    float *qs = sm, *pp = qs + (size_t)H * w + (size_t)M1_TS * w / 2;
    unsigned short *rows = (unsigned short *)(qs + (size_t)H * w);
    if ((int)blockIdx.x >= S) return;
#pragma unroll 4
    for (int i = threadIdx.x; i < H * w / 4; i += M1_THREADS) ((float4 *)qs)[i] = __ldcg((const float4 *)a.qlat + i);
    for (int sp = blockIdx.x; sp < S; sp += gridDim.x) {
        const int j0 = sp * M1_TS, nt = n - j0 < M1_TS ? n - j0 : M1_TS;
        __syncthreads();   /* (q in place; the previous split's rows and weights read) */
        const int cw = w / 8;   /* 16-byte chunks a row: a thread's up to 4 loaded before they are stored */
        for (int i0 = threadIdx.x; i0 < nt * cw; i0 += 4 * M1_THREADS) {
            uint4 v[4];
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const int i = i0 + k * M1_THREADS, t = i / cw, c = i - t * cw, j = j0 + t;
                if (i >= nt * cw) break;
                const size_t slot = (size_t)a.page_table[(size_t)s * a.pt_stride + j / a.page_size] * a.page_size +
                                    (size_t)(j % a.page_size);
                v[k] = __ldcg((const uint4 *)(a.cache + slot * w) + c);
            }
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const int i = i0 + k * M1_THREADS, t = i / cw, c = i - t * cw;
                if (i >= nt * cw) break;
                ((uint4 *)(rows + (size_t)t * w))[c] = v[k];
            }
        }
        __syncthreads();
        for (int h = warp; h < H; h += M1_WARPS) {
            float2 qr[M1_QP];
#pragma unroll
            for (int k = 0; k < M1_QP; k++) {
                const int c2 = lane + 32 * k;
                qr[k] = c2 < w2 ? ((const float2 *)(qs + (size_t)h * w))[c2] : make_float2(0.0f, 0.0f);
            }
            float m = -INFINITY, l = 0.0f;
            for (int t = 0; t < nt; t++) {
                const uint32_t *rw = (const uint32_t *)(rows + (size_t)t * w);
                float v = 0.0f;
#pragma unroll
                for (int k = 0; k < M1_QP; k++) {
                    const int c2 = lane + 32 * k;
                    if (c2 < w2) {
                        const uint32_t u = rw[c2];
                        v += qr[k].x * __uint_as_float(u << 16) + qr[k].y * __uint_as_float(u & 0xffff0000u);
                    }
                }
                v = cu_warp_sum(v) * a.sm_scale;
                if (lane == 0) pp[h * M1_TS + t] = v;
                m = fmaxf(m, v);
            }
            __syncwarp();
            for (int t = lane; t < nt; t += 32) pp[h * M1_TS + t] = expf(pp[h * M1_TS + t] - m);
            __syncwarp();
            for (int t = 0; t < nt; t++) l += pp[h * M1_TS + t];
            float2 *op = (float2 *)(a.part + ((size_t)sp * H + h) * C);
            for (int c2 = lane; c2 < C / 2; c2 += 32) {
                float2 v = make_float2(0.0f, 0.0f);
                for (int t = 0; t < nt; t++) {
                    const uint32_t u = ((const uint32_t *)(rows + (size_t)t * w))[c2];
                    const float p = pp[h * M1_TS + t];
                    v.x += p * __uint_as_float(u << 16);
                    v.y += p * __uint_as_float(u & 0xffff0000u);
                }
                op[c2] = v;
            }
            if (lane == 0) {
                a.ml[((size_t)sp * H + h) * 2] = m;
                a.ml[((size_t)sp * H + h) * 2 + 1] = l;
            }
        }
    }
}

/* I3 (row groups g = b, b + grid, .. of 16 rows, within one head: dv % 16 == 0): the head's splits merged into o_lat [C]
 * (sum_s e^(m_s - M) o_s / sum_s e^(m_s - M) l_s), then W_UV's rows (kv_b's value rows of the head) . o_lat into ao,
 * a row a warp. sm: o_lat [C], the splits' weights [S], 1 / L. */
template <int EB>
__device__ void m1_values(const m1_args &a, float *sm, int n) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, C = a.C, H = a.H, S = (n + M1_TS - 1) / M1_TS;
    float *ol = sm, *ws = sm + C;
    for (int g = blockIdx.x; g < H * a.dv / 16; g += gridDim.x) {
        const int h = g * 16 / a.dv, v0 = g * 16 - h * a.dv;
        __syncthreads();   /* (the previous group's o_lat read) */
        if (warp == 0) {   /* the splits' weights e^(m_s - M) / L, L = sum_s e^(m_s - M) l_s (in split order) */
            float M = -INFINITY;
            for (int sp = lane; sp < S; sp += 32) M = fmaxf(M, __ldcg(a.ml + ((size_t)sp * H + h) * 2));
            for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
            for (int sp = lane; sp < S; sp += 32) ws[sp] = expf(__ldcg(a.ml + ((size_t)sp * H + h) * 2) - M);
            __syncwarp();
            if (lane == 0) {
                float L = 0.0f;
                for (int sp = 0; sp < S; sp++) L += ws[sp] * __ldcg(a.ml + ((size_t)sp * H + h) * 2 + 1);
                ws[S] = 1.0f / L;
            }
        }
        __syncthreads();
        for (int c = threadIdx.x; c < C; c += M1_THREADS) {
            float v = 0.0f;
#pragma unroll 8
            for (int sp = 0; sp < S; sp++) v += ws[sp] * __ldcg(a.part + ((size_t)sp * H + h) * C + c);
            ol[c] = v * ws[S];
        }
        __syncthreads();
        for (int r = warp; r < 16; r += M1_WARPS) {
            const cu_wview wv[1] = {a.kvb};
            const int rr[1] = {h * (a.dn + a.dv) + a.dn + v0 + r};
            float o[1];
            m1_rows<EB, 1>(wv, rr, ol, C, lane, o);
            if (lane == 0) a.ao[(size_t)h * a.dv + v0 + r] = o[0];
        }
    }
}

/* every block (all M1_THREADS threads): hs [D] += add (global, other blocks' writes: read from L2), then x = RMSNorm(hs) *
 * norm, as rmsnorm_kernel makes it (1 / sqrt(mean square + eps), times the weight); red [M1_WARPS] of scratch, free
 * again on return */
__device__ __forceinline__ void m1_add_norm(float *hs, const float *add, const cu_wview &norm, float eps, int D, float *x,
                                            float *red) {
    float ss = 0.0f;
    for (int i = threadIdx.x; i < D; i += M1_THREADS) {
        const float v = hs[i] + __ldcg(add + i);
        hs[i] = v;
        ss += v * v;
    }
    ss = cu_warp_sum(ss);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
    __syncthreads();
    float t = 0.0f;
    for (int w = 0; w < M1_WARPS; w++) t += red[w];   /* (every thread the same sum in the same order) */
    const float r = 1.0f / sqrtf(t / (float)D + eps);
    for (int i = threadIdx.x; i < D; i += M1_THREADS) x[i] = hs[i] * r * cu_w(norm, 0, i);
    __syncthreads();
}

/* EB: the experts' bytes an element (1 FP8, 2 BF16), EBR the router's (2 BF16, 4 fp32). Grid: a block an SM, all
 * resident (cooperative launch); M1_THREADS threads; m1_smem() bytes of dynamic shared memory. The tail form where
 * a.x is NULL (phases O and, where a.nq.data, D). */
template <int EB, int EBR>
__global__ void __launch_bounds__(M1_THREADS, 1) moe1_kernel(const m1_args a) {
    extern __shared__ float m1_sm[];
    const route_cfg &rc = a.rc;
    const int D = a.D, I = a.I, sI = a.sI, E = rc.E, K = rc.K;
    const bool tail = a.x == NULL, next = tail && a.nq.data != NULL;
    const int nv = (int)m1_vec(I, sI, K, tail ? a.HV : 0), na = (int)m1_att(a.attn ? a.H : 0, a.C, a.dr, a.Smax);
    const int nvec = na > nv ? na : nv;
    float *xs = m1_sm, *hs = xs + D, *vec = hs + (tail ? D : 0), *lg = vec + nvec, *s = lg + E, *b = s + E, *bs = b + E;
    float *g = bs + E, *red = g + MOE_MAX_GROUPS, *wk = red + M1_WARPS;
    int *ids = (int *)(wk + K), *cb = ids + K;
    unsigned char *taken = (unsigned char *)(cb + K + 2);
    cu_wview *seg = (cu_wview *)(((uintptr_t)(taken + E) + 15) & ~(uintptr_t)15);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int gw = warp * (int)gridDim.x + (int)blockIdx.x, nw = M1_WARPS * (int)gridDim.x;   /* warps across blocks */
    const bool leader = threadIdx.x == 0;

    if (a.attn) {
        /* I1: heads' absorbs (blocks < H), kv's row and its cache slot (block H); I2: the splits; I3: merge and W_UV */
        const int p = a.positions[0], n = p + 1;
        if ((int)blockIdx.x < a.H) m1_absorb<EB>(a, blockIdx.x, vec, (float)p);
        else if ((int)blockIdx.x == a.H) m1_kv_row(a, red, (float)p, p);
        cu_grid_sync(a.bar, a.bar + 1, 0, M1_THREADS, leader);
        m1_decode_splits(a, vec, n);
        cu_grid_sync(a.bar, a.bar + 1, 0, M1_THREADS, leader);
        m1_values<EB>(a, vec, n);
        cu_grid_sync(a.bar, a.bar + 1, 0, M1_THREADS, leader);
    }
    if (tail) {
        /* O: out = o . ao (phase C overwrites it); after the barrier, x = the post-attention norm of h + out (ao from L2:
         * phase I3's writes where attn) */
        for (int i = threadIdx.x; i < a.HV / 4; i += M1_THREADS) ((float4 *)vec)[i] = __ldcg((const float4 *)a.ao + i);
        for (int i = threadIdx.x; i < D; i += M1_THREADS) hs[i] = __ldcg(a.h + i);
        __syncthreads();
        for (int d = gw; d < D; d += nw) {
            const cu_wview w[1] = {a.o};
            const int r[1] = {d};
            float o[1];
            m1_rows<EB, 1>(w, r, vec, a.HV, lane, o);
            if (lane == 0) a.out[d] = o[0];
        }
        cu_grid_sync(a.bar, a.bar + 1, 0, M1_THREADS, leader);
        m1_add_norm(hs, a.out, a.post_norm, a.eps, D, xs, red);
    } else {
        for (int i = threadIdx.x; i < D / 4; i += M1_THREADS) ((float4 *)xs)[i] = __ldg((const float4 *)a.x + i);
        __syncthreads();
    }

    /* A: the router's logits, E rows over the grid's warps */
    for (int t = gw; t < E; t += nw) {
        const cu_wview w[1] = {a.router};
        const int r[1] = {t};
        float o[1];
        m1_rows<EBR, 1>(w, r, xs, D, lane, o);
        if (lane == 0) a.logits[t] = o[0];
    }
    if (a.pf && warp > 0)   /* (pf) phase B's shared rows of this warp: known before the routing */
        for (int t = (warp - 1) * (int)gridDim.x + (int)blockIdx.x; t < sI; t += (M1_WARPS - 1) * (int)gridDim.x) {
            m1_pf_row(a.sg, t, EB, lane);
            m1_pf_row(a.su, t, EB, lane);
        }
    cu_grid_sync(a.bar, a.bar + 1, 0, M1_THREADS, leader);

    /* the tail form without phase D: h and xn as linear_add_rmsnorm leaves them, now that every block has read h */
    if (tail && !next && blockIdx.x == 0)
        for (int i = threadIdx.x; i < D; i += M1_THREADS) {
            a.h[i] = hs[i];
            a.xn[i] = xs[i];
        }
    /* B: warp 0 of every block routes the token (the same logits everywhere: the same choices, no barrier for them) while
     * warps 1 .. 15 take the shared experts' sI row pairs; then the chosen experts' K I row pairs over all warps */
    for (int e = threadIdx.x; e < E; e += M1_THREADS) {
        lg[e] = __ldcg(a.logits + e);   /* (another block's writes: from L2) */
        if (a.bias.data) bs[e] = cu_w(a.bias, 0, e);
    }
    __syncthreads();
    if (warp == 0) {
        route_warp(lg, a.bias.data ? bs : NULL, ids, wk, 0, rc, s, b, g, taken, red);
    } else {
        const int gw1 = (warp - 1) * (int)gridDim.x + (int)blockIdx.x, nw1 = (M1_WARPS - 1) * (int)gridDim.x;
        for (int t = gw1; t < sI; t += nw1) {
            const cu_wview w[2] = {a.sg, a.su};
            const int r[2] = {t, t};
            float o[2];
            m1_rows<EB, 2>(w, r, xs, D, lane, o);
            if (lane == 0) a.inter[t] = cu_silu_mul(o[0], o[1]);
        }
    }
    __syncthreads();
    for (int t = gw; t < K * I; t += nw) {
        const int k = t / I, r = t - k * I, e = ids[k];
        const cu_wview w[2] = {a.tab[e], a.tab[E + e]};
        const int rr[2] = {r, r};
        float o[2];
        m1_rows<EB, 2>(w, rr, xs, D, lane, o);
        if (lane == 0) a.inter[sI + (size_t)k * I + r] = cu_silu_mul(o[0], o[1]);
    }
    /* phase C's segments: the shared down (if any), then each choice's down, in choice order */
    const int s0 = sI ? 1 : 0, ns = s0 + K;
    if (threadIdx.x == 0) {
        if (sI) seg[0] = a.sd;
        cb[0] = 0;
        if (sI) cb[1] = sI / (16 / EB);
        for (int k = 0; k < K; k++) cb[s0 + k + 1] = cb[s0 + k] + I / (16 / EB);
    }
    for (int k = threadIdx.x; k < K; k += M1_THREADS) seg[s0 + k] = a.tab[2 * E + ids[k]];
    if (a.pf)   /* (pf) this warp's rows of phase C: row d of the shared down and of each choice's down */
        for (int d = gw; d < D; d += nw) {
            if (sI) m1_pf_row(a.sd, d, EB, lane);
            for (int k = 0; k < K; k++) m1_pf_row(a.tab[2 * E + ids[k]], d, EB, lane);
        }
    cu_grid_sync(a.bar, a.bar + 1, 0, M1_THREADS, leader);

    /* C: vec = [inter_sh | w_k inter_k ...], then out[d] a warp each */
    for (int i = threadIdx.x; i < sI; i += M1_THREADS) vec[i] = __ldcg(a.inter + i);
    for (int i = threadIdx.x; i < K * I; i += M1_THREADS) vec[sI + i] = wk[i / I] * __ldcg(a.inter + sI + i);
    __syncthreads();
    for (int d = gw; d < D; d += nw) {
        float o = m1_segs<EB>(seg, cb, ns, d, vec, lane);
        if (lane == 0) a.out[d] = o;
    }
    if (!next) return;

    /* D: x = the next layer's input norm of h + out (h, xn written by block 0: no block reads them again), then its two
     * projections of x, rows t and t + nw of [q rows | kv rows] a warp */
    const int Rq = a.nq.rows, R = Rq + a.nkv.rows;
    if (a.pf)   /* (pf) this warp's rows of phase D */
        for (int t = gw; t < R; t += nw) m1_pf_row(t < Rq ? a.nq : a.nkv, t < Rq ? t : t - Rq, EB, lane);
    cu_grid_sync(a.bar, a.bar + 1, 0, M1_THREADS, leader);
    m1_add_norm(hs, a.out, a.in_norm, a.eps, D, xs, red);
    if (blockIdx.x == 0)
        for (int i = threadIdx.x; i < D; i += M1_THREADS) {
            a.h[i] = hs[i];
            a.xn[i] = xs[i];
        }
    for (int t = gw; t < R; t += 2 * nw) {
        const int t2 = t + nw;
        const cu_wview w[2] = {t < Rq ? a.nq : a.nkv, t2 < Rq ? a.nq : a.nkv};
        const int r[2] = {t < Rq ? t : t - Rq, t2 >= R ? -1 : t2 < Rq ? t2 : t2 - Rq};
        float o[2];
        m1_rows<EB, 2>(w, r, xs, D, lane, o);
        if (lane == 0) {
            *(t < Rq ? a.q + t : a.kv + (t - Rq)) = o[0];
            if (r[1] >= 0) *(t2 < Rq ? a.q + t2 : a.kv + (t2 - Rq)) = o[1];
        }
    }
}

/* whether w is stored as g0 is (dtype, scales) with 16-byte aligned rows (m1_ld16's chunks) */
static int m1_same_form(const ds_weight *w, const ds_weight *g0) {
    return w->data && w->dtype == g0->dtype && !w->scale == !g0->scale && !((uintptr_t)w->data & 15);
}

/* whether w is in g0's form with n columns (16-byte chunks of whole rows) */
static int m1_fits(const ds_weight *w, const ds_weight *g0, int n) {
    return w && m1_same_form(w, g0) && w->cols == n && n % (g0->scale ? 16 : 8) == 0;
}

/* The launch for one token where it applies: 1 (out written; with t, h and xn too, and t's next layer's projections
 * where t->in_norm: then 2), else 0 and nothing launched. t NULL: the MoE block of x; else x NULL and the tail form
 * (phase O from t->ao, phase D where t->in_norm and its weights suit the form). */
int cu_moe1(ds_cuda_backend *cb, float *out, const float *x, const ds_layer_weights *L, const cu_wview *tab,
            float *logits, route_cfg rc, const cu_m1_tail *t) {
    const ds_config *c = cb->base.cfg;
    const ds_weight *g0 = &L->exp_gate[0], *r = &L->router;
    const int D = c->hidden_size, I = g0->rows, E = rc.E, K = rc.K, sI = c->n_shared_experts ? L->sh_gate.rows : 0;
    const int f8 = g0->dtype == DS_DTYPE_F8_E4M3 && g0->scale, bf = g0->dtype == DS_DTYPE_BF16 && !g0->scale;
    const int V = f8 ? 16 : 8;
    if (!cb->opt.moe1 || (!f8 && !bf) || (r->dtype != DS_DTYPE_BF16 && r->dtype != DS_DTYPE_F32) || r->scale)
        return 0;
    if (D % 16 || I % V || sI % V || E > MOE_MAX_EXPERTS || K > MOE_MAX_K) return 0;
    /* every expert weight and the shared experts' in the same form (the kernel is compiled for one) */
    for (int e = 0; e < E; e++) {
        const ds_weight *w3[3] = {&L->exp_gate[e], &L->exp_up[e], &L->exp_down[e]};
        for (int i = 0; i < 3; i++)
            if (!m1_same_form(w3[i], g0)) return 0;
    }
    if (sI) {
        const ds_weight *w3[3] = {&L->sh_gate, &L->sh_up, &L->sh_down};
        for (int i = 0; i < 3; i++)
            if (!m1_same_form(w3[i], g0)) return 0;
    }
    if ((uintptr_t)r->data & 15) return 0;
    int HV = 0, next = 0;
    if (t) {   /* the tail form: o in the experts' form, its input whole float4s; the next layer's part where it fits */
        HV = t->o->cols;
        if (!m1_fits(t->o, g0, HV) || t->o->rows != D || (uintptr_t)t->ao & 15 || !t->post_norm->data) return 0;
        next = t->in_norm && t->in_norm->data && m1_fits(t->wq, g0, D) && m1_fits(t->wkv, g0, D);
    } else if ((uintptr_t)x & 15) {
        return 0;
    }
    const cu_m1_attn *at = t ? t->at : NULL;
    const int H = c->num_heads, C = c->kv_lora_rank, dr = c->qk_rope_head_dim, dn = c->qk_nope_head_dim, dv = c->v_head_dim;
    const int ctx_max = cb->b.pt_stride * cb->b.page_size, Smax = at ? (ctx_max + M1_TS - 1) / M1_TS : 0;
    if (at) {   /* the attention form: V2-Lite's (no q_lora), the BF16 cache, kv_b in the experts' form, the phases' shapes */
        const ds_weight *kb = at->kv_b;
        if (c->q_lora_rank || cu_kv_layout(c) != CU_KV_BF16 || (uintptr_t)at->cache & 15 || !m1_fits(kb, g0, C) ||
            kb->rows != H * (dn + dv) || C % (32 * V) || dv % 16 || dr % 2 || (C + dr) % 8 || C + dr > 64 * M1_QP ||
            H * dv != HV ||
            cb->n_sm < H + 1 || cb->b.n_tokens != 1 || ctx_max < 1 || !at->kv_norm->data)
            return 0;
    }
    size_t smem = m1_smem(D, I, sI, E, K, HV, m1_att(at ? H : 0, C, dr, Smax));
    if (smem > M1_SMEM_MAX) return 0;
    static int attrs_set = 0;
    if (!attrs_set) {
        CUDA_CHECK(cudaFuncSetAttribute(moe1_kernel<1, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, M1_SMEM_MAX));
        CUDA_CHECK(cudaFuncSetAttribute(moe1_kernel<1, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, M1_SMEM_MAX));
        CUDA_CHECK(cudaFuncSetAttribute(moe1_kernel<2, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, M1_SMEM_MAX));
        CUDA_CHECK(cudaFuncSetAttribute(moe1_kernel<2, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, M1_SMEM_MAX));
        attrs_set = 1;
    }
    if (!cu_moe1_bar_ready(cb)) return 0;
    m1_args a;
    memset(&a, 0, sizeof a);
    a.x = t ? NULL : x;
    a.out = out;
    a.router = cu_view(r);
    if (L->router_bias.data && rc.method == DS_TOPK_NOAUX_TC) a.bias = cu_view(&L->router_bias);
    a.tab = tab;
    if (sI) {
        a.sg = cu_view(&L->sh_gate);
        a.su = cu_view(&L->sh_up);
        a.sd = cu_view(&L->sh_down);
    }
    a.logits = logits;
    const size_t n_inter = (size_t)sI + (size_t)K * I, n_ql = at ? (size_t)H * (C + dr) : 0;
    const size_t n_part = at ? (size_t)Smax * H * C : 0, n_ml = at ? (size_t)Smax * H * 2 : 0;
    a.inter = (float *)cu_ws_get(&cb->ws_moe1, sizeof(float) * (n_inter + n_ql + n_part + n_ml));
    a.bar = cb->moe1_bar;
    a.D = D;
    a.I = I;
    a.sI = sI;
    a.rc = rc;
    a.pf = cb->opt.moe1_pf;
    if (t) {
        a.ao = t->ao;
        a.o = cu_view(t->o);
        a.post_norm = cu_view(t->post_norm);
        a.h = t->h;
        a.xn = t->xn;
        a.eps = t->eps;
        a.HV = HV;
        if (at) {
            a.attn = 1;
            a.aq = at->q;
            a.akv = at->kv;
            a.cache = (unsigned short *)at->cache;
            a.positions = cb->d_positions;
            a.tok_seq = cb->d_tok_seq;
            a.page_table = cb->d_page_table;
            a.pt_stride = cb->b.pt_stride;
            a.page_size = cb->b.page_size;
            a.kvb = cu_view(at->kv_b);
            a.kv_norm = cu_view(at->kv_norm);
            a.kv_eps = at->kv_eps;
            a.amp = c->rope_amplitude;
            a.sm_scale = c->softmax_scale;
            a.inv_freq = cb->inv_freq;
            a.qlat = a.inter + n_inter;
            a.part = a.qlat + n_ql;
            a.ml = a.part + n_part;
            a.H = H;
            a.dn = dn;
            a.dv = dv;
            a.dr = dr;
            a.C = C;
            a.Smax = Smax;
        }
        if (next) {
            a.in_norm = cu_view(t->in_norm);
            a.nq = cu_view(t->wq);
            a.nkv = cu_view(t->wkv);
            a.q = t->q;
            a.kv = t->kv;
        }
    }
    void (*k)(const m1_args) = f8 ? (r->dtype == DS_DTYPE_BF16 ? moe1_kernel<1, 2> : moe1_kernel<1, 4>)
                                  : (r->dtype == DS_DTYPE_BF16 ? moe1_kernel<2, 2> : moe1_kernel<2, 4>);
    cu_launch_coop(k, dim3((unsigned)cb->n_sm), dim3(M1_THREADS), smem, a);
    CUDA_LAUNCH_CHECK();
    cb->moe1_runs++;
    if (t) cb->tail1_runs++;
    if (at) cb->attn1_runs++;
    if (next) cb->tail1_next_runs++;
    return next ? 2 : 1;
}
