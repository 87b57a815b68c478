/* CUDA MoE block (spec 9): router GEMM (fp32), one fused routing kernel (scores, bias, group limit,
 * top-k, weights; the CPU's ds_route_token rule for rule, one thread per token), tokens grouped by
 * expert on the device (stable: token order within an expert), then per expert with tokens: gather its
 * rows, MLP (gate/up GEMMs, SiLU*mul, down GEMM), and add weight * output back into the token rows.
 * The shared experts run first over all tokens, then the routed experts are added in expert order, as
 * on the CPU, so each output row sums in the same order.
 *
 * Two ways to run the experts:
 *  - grouped (default for M <= opt.moe_grouped_max_m): no host sync, a fixed number of launches
 *    whatever the routing: one gate/up/SiLU kernel and one down kernel over all experts (grid y = expert,
 *    blocks of experts without tokens leave at once; each expert's weight rows are read once per 8 of its
 *    tokens), then one combine kernel adds, per token, weight * expert output in ascending expert order
 *    (the CPU's order). Expert weight views live in a device table per layer (built once).
 *  - per expert (prefill): the expert counts come back to the host (one small copy per MoE layer) to
 *    size one MLP (GEMMs) per expert with tokens. */
#include <math.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_route.h"

/* One thread per token m < M. */
__global__ void route_kernel(const float *logits, const float *bias, int32_t *ids, float *wout, int M, route_cfg rc) {
    int m = blockIdx.x * blockDim.x + threadIdx.x;
    if (m >= M) return;
    float s[MOE_MAX_EXPERTS], b[MOE_MAX_EXPERTS];
    const float *lg = logits + (size_t)m * rc.E;
    int E = rc.E, K = rc.K;
    if (rc.sigmoid) {
        for (int e = 0; e < E; e++) s[e] = 1.0f / (1.0f + expf(-lg[e]));
    } else {
        float mx = -INFINITY, sum = 0.0f;
        for (int e = 0; e < E; e++) mx = lg[e] > mx ? lg[e] : mx;
        for (int e = 0; e < E; e++) sum += (s[e] = expf(lg[e] - mx));
        for (int e = 0; e < E; e++) s[e] /= sum;
    }
    for (int e = 0; e < E; e++) b[e] = s[e] + (rc.method == DS_TOPK_NOAUX_TC && bias ? bias[e] : 0.0f);
    if (rc.method != DS_TOPK_GREEDY && rc.G > 1) {   /* keep the topk_group best groups */
        int per = E / rc.G, keep[MOE_MAX_GROUPS];
        float gscore[MOE_MAX_GROUPS];
        for (int g = 0; g < rc.G; g++) gscore[g] = group_score(rc, b + g * per, s + g * per, per);
        topk_idx(gscore, rc.G, rc.topk_group, keep);
        for (int g = 0; g < rc.G; g++) {
            int kept = 0;
            for (int t = 0; t < rc.topk_group && !kept; t++) kept = keep[t] == g;
            if (!kept)
                for (int j = 0; j < per; j++) b[g * per + j] = -INFINITY;
        }
    }
    int idx[MOE_MAX_K];
    topk_idx(b, E, K, idx);
    write_choices(rc, s, idx, ids, wout, m);
}

#define R2_WARPS 4   /* route_v2_kernel: tokens (warps) a block */
__global__ void __launch_bounds__(R2_WARPS * 32) route_v2_kernel(const float *logits, const float *bias, int32_t *ids,
                                                                 float *wout, int M, route_cfg rc, float *zero,
                                                                 int nzero) {
    __shared__ float s_sh[R2_WARPS][MOE_MAX_EXPERTS], b_sh[R2_WARPS][MOE_MAX_EXPERTS];
    __shared__ float g_sh[R2_WARPS][MOE_MAX_GROUPS];
    __shared__ unsigned char taken[R2_WARPS][MOE_MAX_EXPERTS];
    __shared__ float red[R2_WARPS];
    cu_pdl_trigger();
    cu_pdl_wait();
    if (zero && blockIdx.x == 0)   /* (after the wait: the kernels before may still read it) */
        for (int i = threadIdx.x; i < nzero; i += blockDim.x) zero[i] = 0.0f;
    int warp = threadIdx.x >> 5, m = blockIdx.x * R2_WARPS + warp;
    if (m >= M) return;   /* whole warp */
    route_warp(logits + (size_t)m * rc.E, bias, ids, wout, m, rc, s_sh[warp], b_sh[warp], g_sh[warp], taken[warp],
               &red[warp]);
}

int cu_route_v2 = 1;   /* DSINFER_CUDA_ROUTE2 (read at backend creation) */

/* the routing of M rows of logits into ids and w; zero (NULL: none): nzero floats set to 0 on the way (route_v2 does
 * it in its launch: one graph node fewer before a kernel that reduces onto them, opt.route_zero) */
static void launch_route(const float *logits, const float *bias, int32_t *ids, float *w, int M, route_cfg rc,
                         float *zero, int nzero) {
    if (cu_route_v2) {
        cu_launch(route_v2_kernel, (unsigned)cu_blocks((size_t)M, R2_WARPS), R2_WARPS * 32, 0, logits, bias, ids, w, M, rc,
                  zero, nzero);
    } else {
        route_kernel<<<cu_blocks((size_t)M, 64), 64, 0, cu_stream>>>(logits, bias, ids, w, M, rc);
        if (zero) CUDA_CHECK(cudaMemsetAsync(zero, 0, (size_t)nzero * sizeof(float), cu_stream));
    }
    CUDA_LAUNCH_CHECK();
}

void ds_cuda_route(ds_backend *be, const float *logits, const float *bias, int32_t *ids, float *weights, int M) {
    if (M > 0) launch_route(logits, bias, ids, weights, M, route_cfg_of(cu_of(be), be->cfg), NULL, 0);
}

/* ---- the router GEMM and the top-k in one kernel (opt.router_fused; decode-sized batches) -------------------------
 * grid (ceil(M / TOK), ceil(E / RF_WARPS)), block RF_WARPS warps (TOK: router_tok, RF_TOK unless asked). Warp w of block
 * (x, y) computes expert e = y * RF_WARPS + w's logits for the block's TOK tokens into logits [M, E]: fp32 sums of x (fp32 rows of D)
 * times the router row (BF16, or fp32 when F32), each lane over its 16-byte weight chunks in order, then the
 * warp's tree. The last block of a token group to finish (tickets[x], put back to 0 by that block, so the array
 * is zero between launches) routes the group's tokens, a warp each, with route_warp: the rule and arithmetic of
 * route_v2_kernel on these logits. Replaces the router GEMM (a dequantize and an SGEMM, or a GEMV) and the
 * routing launch: two or three launches a MoE layer become one. */
#define RF_TOK 4
/* a 16-byte chunk of a router row as floats: 8 BF16 values, or 4 fp32 (router_fused_kernel, router_norm1_kernel) */
template <bool BF16>
__device__ __forceinline__ void router_chunk(uint4 raw, float (&wv)[BF16 ? 8 : 4]) {
    if constexpr (BF16) {
        cu_bf16x8(raw, wv);
    } else {
        wv[0] = __uint_as_float(raw.x);
        wv[1] = __uint_as_float(raw.y);
        wv[2] = __uint_as_float(raw.z);
        wv[3] = __uint_as_float(raw.w);
    }
}

#define RF_WARPS 8
#define RF_MAX_M 256
#define RF_MAX_KS 8         /* K slices of the fused router (KSP) */
static_assert(RF_MAX_M <= CU_ROUTE_TICKETS, "the backend's router tickets (cuda.h) cover RF_MAX_M tokens a group of one");

/* XS (DSINFER_CUDA_ROUTER_XS): the group's TOK rows of x staged once in dynamic shared memory ([TOK][D] fp32, the rows past
 * the last token holding the last one's, as CLAMP reads them) by the whole block, then read from there by its 8 warps:
 * each warp read all of them from global memory (8 x TOK x D x 4 bytes a block through L1, mostly L2 round trips).
 * The same products in the same order: the same bits. */
/* CLAMP (DSINFER_CUDA_ROUTER_CLAMP, default 1): the group's tokens past the last one (nt < RF_TOK) read the last one's
 * row again instead of leaving the token loop, so that every load of a chunk can be issued before its FMAs (a
 * data-dependent exit inside the unrolled loop kept each token's loads behind the previous token's arithmetic; RESULTS
 * twenty-second session run 1: 32 cycles an instruction); their sums are not stored: the same bits. */
#ifdef RT_PROF
/* RT_PROF builds only (nvcc -DRT_PROF; dev/cuda/build_prof.sh): where the fused router's time goes. Thread 0 of each block
 * stamps clock64 at its phases: c[0] start, c[1] after cu_pdl_wait, c[2] after its sums' store, c[3] after the ticket
 * (the block's fence, atomic and barriers), and in a token group's last block c[4] after its logits are in shared memory
 * and c[5] after the routing (its first warp's), c[6] after the same routing once more (its code then warm in the SM's
 * instruction caches; outputs to rt_prof_ids / _w). Launches RT_PROF_FIRST .. + 3 sum each phase over the blocks (the
 * tail's over the last blocks) and the last block to exit keeps them; printed by the host at the backend's destruction. */
#define RT_PROF_FIRST 120
__device__ unsigned long long rt_prof_acc[8];
__device__ unsigned rt_prof_done, rt_prof_launch;
__device__ unsigned long long rt_prof_snap[4][14];
__device__ void rt_prof_exit(const long long (&c)[7], bool tail) {
    if (threadIdx.x != 0) return;
    atomicAdd(&rt_prof_acc[0], (unsigned long long)(c[1] - c[0]));
    atomicAdd(&rt_prof_acc[1], (unsigned long long)(c[2] - c[1]));
    atomicAdd(&rt_prof_acc[2], (unsigned long long)(c[3] - c[2]));
    if (tail) {
        atomicAdd(&rt_prof_acc[3], (unsigned long long)(c[4] - c[3]));
        atomicAdd(&rt_prof_acc[4], (unsigned long long)(c[5] - c[4]));
        atomicAdd(&rt_prof_acc[5], 1ull);
        atomicAdd(&rt_prof_acc[6], (unsigned long long)(c[5] - c[0]));
        atomicAdd(&rt_prof_acc[7], (unsigned long long)(c[6] - c[5]));
    }
    __threadfence();
    unsigned nb = gridDim.x * gridDim.y * gridDim.z;
    if (atomicAdd(&rt_prof_done, 1u) != nb - 1) return;
    __threadfence();
    unsigned L = atomicAdd(&rt_prof_launch, 1u);
    unsigned long long v[8];
    for (int k = 0; k < 8; k++) v[k] = atomicExch(&rt_prof_acc[k], 0ull);
    rt_prof_done = 0;
    if (L >= RT_PROF_FIRST && L < RT_PROF_FIRST + 4) {
        unsigned long long *o = rt_prof_snap[L - RT_PROF_FIRST];
        for (int k = 0; k < 3; k++) o[k] = v[k] / nb;
        unsigned long long nt = v[5] ? v[5] : 1;
        o[3] = v[3] / nt;
        o[4] = v[4] / nt;
        o[5] = v[6] / nt;
        o[6] = v[5];
        o[7] = nb;
        o[8] = gridDim.z;
        o[9] = v[7] / nt;
        for (int k = 0; k < 4; k++) o[10 + k] = rt_prof_sub[k] / nt;
    }
    for (int k = 0; k < 4; k++) rt_prof_sub[k] = 0;
}
void cu_router_prof_print(void) {
    unsigned long long h[4][14];
    if (cudaMemcpyFromSymbol(h, rt_prof_snap, sizeof h) != cudaSuccess) return;
    for (int i = 0; i < 4; i++)
        if (h[i][7])
            printf("rt_prof launch %d: %llu blocks (%llu K slices), %llu last; cycles a block: pdl wait %llu, sums %llu, fence + "
                   "ticket %llu; a last block: logits in %llu, routing %llu, start to routed %llu; fast routing: scores %llu, "
                   "bias and groups %llu, top-k %llu, weights %llu; the same routing again (its code warm) %llu\n", RT_PROF_FIRST + i,
                   h[i][7], h[i][8], h[i][6], h[i][0], h[i][1], h[i][2], h[i][3], h[i][4], h[i][5], h[i][10], h[i][11],
                   h[i][12], h[i][13], h[i][9]);
}
#define RT_T(...) __VA_ARGS__
#else
#define RT_T(...)
#endif

/* KSP (DSINFER_CUDA_ROUTER_KS = gridDim.z > 1, with CLAMP and without XS): block (x, y, z) sums only the columns of K slice z
 * (D / gridDim.z of them, whole 32 V-column chunk rows) into part [gridDim.z][M][E], and the token group's last block (of
 * gridDim.y x gridDim.z) adds the slices' partials in z order into logits before it routes. Why: one block an SM of 8
 * warps, each a chain of D / (32 V) chunks x TOK tokens of loads and FMAs, left the GEMV latency-bound (0.07 eligible
 * warps a scheduler, ~18k cycles at b64 for 64 KB a block); slices give gridDim.z times the warps with chains as much
 * shorter. Another summation order than the one-slice form (not the same bits; the CPU check is THR_GEMM). */
template <bool BF16, bool CLAMP = false, int TOK = RF_TOK, bool XS = false, bool KSP = false>
__global__ void __launch_bounds__(RF_WARPS * 32) router_fused_kernel(const float *x, cu_wview w, float *logits,
                                                                     const float *bias, int32_t *ids, float *wout,
                                                                     int M, unsigned *tickets, route_cfg rc, float *part) {
    __shared__ float s_sh[TOK][MOE_MAX_EXPERTS], b_sh[TOK][MOE_MAX_EXPERTS];
    __shared__ float g_sh[TOK][MOE_MAX_GROUPS];
    __shared__ unsigned char taken[TOK][MOE_MAX_EXPERTS];
    __shared__ float red[TOK];
    __shared__ int last;
    constexpr int V = BF16 ? 8 : 4;   /* weight values a 16-byte chunk */
    RT_T(long long pc[7] = {clock64(), 0, 0, 0, 0, 0, 0};)
    cu_pdl_trigger();
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, E = rc.E, D = w.cols;
    int m0 = blockIdx.x * TOK, nt = M - m0 < TOK ? M - m0 : TOK, e = blockIdx.y * RF_WARPS + warp;
    cu_pdl_wait();
    RT_T(pc[1] = clock64();)
    extern __shared__ float4 rf_xs[];   /* XS: [TOK][D / 4] */
    if (XS) {
        const int D4 = D / 4;
        for (int i = threadIdx.x; i < TOK * D4; i += blockDim.x) {
            int j = i / D4;
            rf_xs[i] = ((const float4 *)(x + (size_t)(m0 + (j < nt ? j : nt - 1)) * D))[i - j * D4];
        }
        __syncthreads();
    }
    if (e < E) {
        float acc[TOK];
#pragma unroll
        for (int j = 0; j < TOK; j++) acc[j] = 0.0f;
        const uint4 *wr = (const uint4 *)((const char *)w.data + (size_t)e * D * (BF16 ? 2 : 4));
        const int cs = KSP ? D / (int)gridDim.z : D, c0 = KSP ? (int)blockIdx.z * cs : 0;   /* this block's K slice */
#pragma unroll 4
        for (int c = c0 + lane * V; c < c0 + cs; c += 32 * V) {   /* unrolled: 4 chunks' loads in flight (batch 1 waited on each) */
            float wv[V];
            router_chunk<BF16>(wr[c / V], wv);
#pragma unroll
            for (int j = 0; j < TOK; j++) {
                if (!CLAMP && j >= nt) break;
                const float4 *xp = XS ? rf_xs + ((size_t)j * D + c) / 4   /* (rows past nt: copies of the last) */
                                      : (const float4 *)(x + (size_t)(m0 + (CLAMP && j >= nt ? nt - 1 : j)) * D + c);
#pragma unroll
                for (int q = 0; q < V / 4; q++) {
                    float4 a = xp[q];
                    acc[j] = fmaf(wv[4 * q], a.x, acc[j]);
                    acc[j] = fmaf(wv[4 * q + 1], a.y, acc[j]);
                    acc[j] = fmaf(wv[4 * q + 2], a.z, acc[j]);
                    acc[j] = fmaf(wv[4 * q + 3], a.w, acc[j]);
                }
            }
        }
#pragma unroll
        for (int j = 0; j < TOK; j++) acc[j] = cu_warp_sum(acc[j]);
        float *dst = KSP ? part + (size_t)blockIdx.z * M * E : logits;
        if (lane == 0)
            for (int j = 0; j < nt; j++) dst[(size_t)(m0 + j) * E + e] = acc[j];
    }
    RT_T(__syncthreads(); pc[2] = clock64();)
    __threadfence();   /* this block's logits visible before its ticket */
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned t = atomicAdd(&tickets[blockIdx.x], 1u);
        last = t == gridDim.y * gridDim.z - 1;
        if (last) tickets[blockIdx.x] = 0;   /* every block of the group has taken its ticket */
    }
    __syncthreads();
    RT_T(pc[3] = clock64();)
    if (!last) {   /* whole block */
        RT_T(rt_prof_exit(pc, false);)
        return;
    }
    __threadfence();
    if (warp < nt) {
        int m = m0 + warp;
        float *s = s_sh[warp];
        if (KSP) {   /* the slices' partials, all requested before the sum in z order (gridDim.z <= RF_MAX_KS) */
            const int kz = (int)gridDim.z;
            for (int i = lane; i < E; i += 32) {
                float pv[RF_MAX_KS];
#pragma unroll
                for (int z = 0; z < RF_MAX_KS; z++)
                    if (z < kz) pv[z] = __ldcg(part + ((size_t)z * M + m) * E + i);
                float a = pv[0];
#pragma unroll
                for (int z = 1; z < RF_MAX_KS; z++)
                    if (z < kz) a += pv[z];
                s[i] = a;
                logits[(size_t)m * E + i] = a;
            }
        } else {
            for (int i = lane; i < E; i += 32) s[i] = __ldcg(logits + (size_t)m * E + i);   /* from L2: other blocks wrote them */
        }
        __syncwarp();
        RT_T(if (warp == 0) pc[4] = clock64();)
#ifdef RT_PROF
        __shared__ float rt_lg[TOK][MOE_MAX_EXPERTS];   /* the logits again, for the second (warm) routing below */
        for (int i = lane; i < E; i += 32) rt_lg[warp][i] = s[i];
        __syncwarp();
        if (warp == 0) pc[4] = clock64();
#endif
        route_warp(s, bias, ids, wout, m, rc, s, b_sh[warp], g_sh[warp], taken[warp], &red[warp]);
        RT_T(__syncwarp(); if (warp == 0) pc[5] = clock64();)
#ifdef RT_PROF
        /* the same routing once more, its code now in the SM's instruction caches (outputs to rt_prof_ids / _w): the
         * difference to the first is what fetching the tail's code cost */
        route_warp(rt_lg[warp], bias, rt_prof_ids, rt_prof_w, 0, rc, rt_lg[warp], b_sh[warp], g_sh[warp], taken[warp],
                   &red[warp]);
        __syncwarp();
        if (warp == 0) pc[6] = clock64();
#endif
    }
    RT_T(rt_prof_exit(pc, true);)
}

int cu_router_clamp = 1;   /* DSINFER_CUDA_ROUTER_CLAMP (backend creation) */

/* router_fused_kernel's tokens a block (opt.router_tok, DSINFER_CUDA_ROUTER_TOK: 1, 2 or 4; 0: RF_TOK). Each token's sums
 * are the same bits whatever the group (a lane's chunks in the same order, the same tree): fewer tokens a warp give
 * more warps and shorter chains of loads a warp, the router rows read from L2 once more a group. */
static int router_tok(const ds_cuda_backend *cb) {
    int t = cb->opt.router_tok;
    return t == 1 || t == 2 ? t : RF_TOK;
}

/* XS's dynamic shared memory allowed beside the kernel's static arrays (~18 KB at 4 tokens, so the default 48 KB in all
 * would not hold V2-Lite's 32 KB of rows): set once by cu_router_init; the caller stages at most RF_XS_MAX bytes */
#define RF_XS_MAX (48 * 1024)
template <int TOK>
static void rf_xs_attrs(void) {
    CUDA_CHECK(cudaFuncSetAttribute(router_fused_kernel<true, true, TOK, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, RF_XS_MAX));
    CUDA_CHECK(cudaFuncSetAttribute(router_fused_kernel<false, true, TOK, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, RF_XS_MAX));
}
void cu_router_init(void) {
    rf_xs_attrs<1>();
    rf_xs_attrs<2>();
    rf_xs_attrs<RF_TOK>();
}

/* router_fused_kernel<BF16, CLAMP (cu_router_clamp), TOK, XS, KSP> over the grid; XS (with CLAMP only) takes TOK x D x 4
 * bytes of dynamic shared memory, at most RF_XS_MAX (the caller's check); KSP (part != NULL: grid.z K slices, with CLAMP and
 * without XS) writes the slices' partials to part */
template <int TOK>
static void router_fused_launch(int bf, int xs, dim3 grid, const float *x, const ds_weight *r, float *logits,
                                const float *bias, int32_t *ids, float *w, int M, unsigned *t, route_cfg rc, float *part) {
    const size_t sm = xs ? (size_t)TOK * r->cols * 4 : 0;
#define RF_GO(BF, CL, XSF, KS)                                                                                         \
    cu_launch(router_fused_kernel<BF, CL, TOK, XSF, KS>, grid, RF_WARPS * 32, sm, x, cu_view(r), logits, bias, ids, w, M, t, \
              rc, part)
#define RF_GO2(CL, XSF, KS)                     \
    do {                                        \
        if (bf) RF_GO(true, CL, XSF, KS);       \
        else RF_GO(false, CL, XSF, KS);         \
    } while (0)
    if (part) RF_GO2(true, false, true);
    else if (cu_router_clamp && xs) RF_GO2(true, true, false);
    else if (cu_router_clamp) RF_GO2(true, false, false);
    else RF_GO2(false, false, false);
#undef RF_GO2
#undef RF_GO
}

/* The fused router for M tokens where it applies (opt.router_fused for router_fused_min_m .. _max_m rows, a BF16 or fp32
 * router of E rows, D % 8 (BF16) or % 4 (fp32), 16-byte aligned x and weight); 0 (nothing launched) otherwise. */
static int router_fused(ds_cuda_backend *cb, const ds_weight *r, const float *x, int M, float *logits,
                        const float *bias, int32_t *ids, float *w, route_cfg rc) {
    if (!cb->opt.router_fused || M < cb->opt.router_fused_min_m || M > cb->opt.router_fused_max_m || M > RF_MAX_M) return 0;
    int bf = r->dtype == DS_DTYPE_BF16 && !r->scale, f32 = r->dtype == DS_DTYPE_F32 && !r->scale;
    if ((!bf && !f32) || r->rows != rc.E || r->cols % (bf ? 8 : 4) || ((uintptr_t)x & 15) || ((uintptr_t)r->data & 15))
        return 0;
    const int tok = router_tok(cb);
    dim3 grid((unsigned)((M + tok - 1) / tok), (unsigned)((rc.E + RF_WARPS - 1) / RF_WARPS));
    unsigned *t = cb->route_tickets;
    const int xs = cb->opt.router_xs && (size_t)tok * r->cols * 4 <= RF_XS_MAX;   /* x's rows in shared memory (XS) */
    cb->router_xs_launches += xs && cu_router_clamp;
    /* K slices (KSP): whole chunk rows of 32 lanes x (8 BF16 | 4 fp32) columns each, with CLAMP, without XS */
    const int ks = M <= cb->opt.router_ks_max_m ? cb->opt.router_ks : 1, crow = 32 * (bf ? 8 : 4);
    float *part = NULL;
    if (ks > 1 && ks <= RF_MAX_KS && !xs && cu_router_clamp && r->cols % (crow * ks) == 0) {
        part = (float *)cu_ws_get(&cb->ws_router_part, sizeof(float) * (size_t)ks * M * rc.E);
        grid.z = (unsigned)ks;
        cb->router_ks_launches++;
    }
    if (tok == 1) router_fused_launch<1>(bf, xs, grid, x, r, logits, bias, ids, w, M, t, rc, part);
    else if (tok == 2) router_fused_launch<2>(bf, xs, grid, x, r, logits, bias, ids, w, M, t, rc, part);
    else router_fused_launch<RF_TOK>(bf, xs, grid, x, r, logits, bias, ids, w, M, t, rc, part);
    CUDA_LAUNCH_CHECK();
    return 1;
}

/* ---- batch 1's post-attention norm, router and routing in one launch (opt.router_norm; backend layer_tail1) ------
 * grid ceil(E / RF_WARPS) blocks of RF_WARPS warps (256 threads: rmsnorm_vec_kernel's RMS_THREADS, so the norm's sums
 * are rms_row_vec's in its order: the same bits). Every block makes v = h + ff and xn = v / RMS(v) * nw itself (2 D
 * floats from L2; xn into shared memory), then warp w the logit of expert e = blockIdx.x RF_WARPS + w in
 * router_fused_kernel's lane order (its XS form's bits at one token). The last block to take its ticket (each block has
 * read h and ff before its own) writes h = v and xn back, zeroes ff (the MoE launch after it reduces onto ff) and routes
 * the logits with route_warp (warp 0). Replaces rmsnorm_vec's launch, the router's GEMV, route_v2 and the memset. */
/* (The norm folded into the logits, every warp summing v g and v's squares with its router row and the last block making
 * h and xn, ROUTER_NORM=2 of the fifty-fourth session, measured slower at b1 in both its forms and removed: RESULTS
 * "fifty-fifth session" run 2.) */
#define RN_NV 8   /* float4 slots a thread: D <= RN_NV * 4 * RF_WARPS * 32 (V3's 7168 takes 7) */
template <bool BF16>
__global__ void __launch_bounds__(RF_WARPS * 32) router_norm1_kernel(float *h, float *ff, cu_wview nw, float eps,
                                                                     cu_wview w, float *xn, float *logits,
                                                                     const float *bias, int32_t *ids, float *wout,
                                                                     unsigned *ticket, route_cfg rc) {
    __shared__ float s_sh[MOE_MAX_EXPERTS], b_sh[MOE_MAX_EXPERTS], g_sh[MOE_MAX_GROUPS], red[RF_WARPS], rred;
    __shared__ unsigned char taken[MOE_MAX_EXPERTS];
    __shared__ int last;
    extern __shared__ float4 rn_xs[];   /* [D / 4]: xn */
    constexpr int V = BF16 ? 8 : 4;     /* weight values a 16-byte chunk */
    cu_pdl_trigger();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, D = w.cols, n4 = D >> 2, E = rc.E;
    float4 *h4 = (float4 *)h, *f4 = (float4 *)ff;
    cu_pdl_wait();
    float4 v[RN_NV], g[RN_NV];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < RN_NV; k++) {   /* rms_row_vec's body with ADD */
        const int j = threadIdx.x + k * RF_WARPS * 32;
        v[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (j < n4) {
            v[k] = h4[j];
            const float4 a = f4[j];
            v[k].x += a.x; v[k].y += a.y; v[k].z += a.z; v[k].w += a.w;
            g[k] = make_float4(cu_w(nw, 0, 4 * j), cu_w(nw, 0, 4 * j + 1), cu_w(nw, 0, 4 * j + 2), cu_w(nw, 0, 4 * j + 3));
        }
        ss += __fmaf_rn(v[k].w, v[k].w, __fmaf_rn(v[k].z, v[k].z, __fmaf_rn(v[k].y, v[k].y, __fmul_rn(v[k].x, v[k].x))));
    }
    const float r = cu_rms_inv<RF_WARPS>(ss, red, D, eps);   /* rms_inv's reduction: the warps' sums in warp order */
#pragma unroll
    for (int k = 0; k < RN_NV; k++) {
        const int j = threadIdx.x + k * RF_WARPS * 32;
        if (j < n4) rn_xs[j] = make_float4(v[k].x * r * g[k].x, v[k].y * r * g[k].y, v[k].z * r * g[k].z, v[k].w * r * g[k].w);
    }
    __syncthreads();
    const int e = blockIdx.x * RF_WARPS + warp;
    if (e < E) {   /* router_fused_kernel's sums at one token */
        float acc = 0.0f;
        const uint4 *wr = (const uint4 *)((const char *)w.data + (size_t)e * D * (BF16 ? 2 : 4));
#pragma unroll 4
        for (int c = lane * V; c < D; c += 32 * V) {
            float wv[V];
            router_chunk<BF16>(wr[c / V], wv);
#pragma unroll
            for (int q = 0; q < V / 4; q++) {
                const float4 a = rn_xs[c / 4 + q];
                acc = fmaf(wv[4 * q], a.x, acc);
                acc = fmaf(wv[4 * q + 1], a.y, acc);
                acc = fmaf(wv[4 * q + 2], a.z, acc);
                acc = fmaf(wv[4 * q + 3], a.w, acc);
            }
        }
        acc = cu_warp_sum(acc);
        if (lane == 0) logits[e] = acc;
    }
    __threadfence();   /* this block's logit visible before its ticket */
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned t = atomicAdd(ticket, 1u);
        last = t == gridDim.x - 1;
        if (last) *ticket = 0;   /* every block has taken its ticket: zero again for the next launch */
    }
    __syncthreads();
    if (!last) return;   /* whole block */
    __threadfence();
    float4 *x4 = (float4 *)xn;
#pragma unroll
    for (int k = 0; k < RN_NV; k++) {   /* every block has read h and ff */
        const int j = threadIdx.x + k * RF_WARPS * 32;
        if (j < n4) {
            h4[j] = v[k];
            x4[j] = rn_xs[j];
            f4[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    }
    if (warp == 0) {
        for (int i = lane; i < E; i += 32) s_sh[i] = __ldcg(logits + i);   /* from L2: other blocks wrote them */
        __syncwarp();
        route_warp(s_sh, bias, ids, wout, 0, rc, s_sh, b_sh, g_sh, taken, &rred);
    }
}

__global__ void weight_row_kernel(float *dst, cu_wview w);   /* (below) */

/* ff = x . o^T (cu_linear), then router_norm1_kernel: h += ff, xn = RMSNorm(h) * post_norm (eps), the router's logits of
 * xn routed into ids / w, ff zeroed (opt.router_norm, one token; logits [E] scratch, bias [E] scratch for noaux_tc's
 * correction). 1 where it ran; 0 where the weights do not suit it (nothing launched): a BF16 or fp32 router of E rows
 * and D columns, D % 8 == 0 and at most RN_NV x 1024, 16-byte aligned rows. */
static int router_norm1(ds_cuda_backend *cb, float *xn, float *h, float *ff, const float *x, const ds_layer_weights *L,
                        float eps, float *logits, float *bias, int32_t *ids, float *w, route_cfg rc) {
    const ds_weight *rw = &L->router;
    const int D = cb->base.cfg->hidden_size;
    const int bf = rw->dtype == DS_DTYPE_BF16 && !rw->scale, f32 = rw->dtype == DS_DTYPE_F32 && !rw->scale;
    if (!cb->opt.router_norm || (!bf && !f32) || rw->rows != rc.E || rw->cols != D || D % 8 ||
        D / 4 > RN_NV * RF_WARPS * 32 || rc.E > MOE_MAX_EXPERTS || L->post_norm.cols != D ||
        (((uintptr_t)xn | (uintptr_t)h | (uintptr_t)ff | (uintptr_t)rw->data) & 15))
        return 0;
    cu_linear(&cb->base, ff, x, &L->o, 1);
    const float *biasp = NULL;
    if (L->router_bias.data) {
        weight_row_kernel<<<1, 256, 0, cu_stream>>>(bias, cu_view(&L->router_bias));
        CUDA_LAUNCH_CHECK();
        biasp = bias;
    }
    const dim3 grid((unsigned)((rc.E + RF_WARPS - 1) / RF_WARPS));
    const size_t sm = (size_t)D * sizeof(float);
    if (bf)
        cu_launch(router_norm1_kernel<true>, grid, RF_WARPS * 32, sm, h, ff, cu_view(&L->post_norm), eps, cu_view(rw), xn,
                  logits, biasp, ids, w, cb->route_tickets, rc);
    else
        cu_launch(router_norm1_kernel<false>, grid, RF_WARPS * 32, sm, h, ff, cu_view(&L->post_norm), eps, cu_view(rw),
                  xn, logits, biasp, ids, w, cb->route_tickets, rc);
    CUDA_LAUNCH_CHECK();
    cb->router_norm_runs++;
    return 1;
}

/* Thread 0 of a grouping kernel: cnt[e] (rows of expert e) becomes its first row, and offsets gets the
 * row offsets [0, E], the number of experts with rows [E + 1] and those experts [E + 2 ...]. */
__device__ void write_offsets(int *cnt, int32_t *offsets, int E) {
    int acc = 0, n_live = 0;
    for (int e = 0; e < E; e++) {
        int c = cnt[e];
        cnt[e] = acc;
        offsets[e] = acc;
        acc += c;
        if (c) offsets[E + 2 + n_live++] = e;
    }
    offsets[E] = acc;
    offsets[E + 1] = n_live;
}

/* One block; thread e lists expert e's (token, weight) pairs in token order at offsets[e]. offsets holds
 * 2E + 2 ints: [0, E] the row offsets, [E + 1] the number of experts with rows, [E + 2 ...] those experts
 * in increasing order (the live slots of cu_gemv_group). */
__global__ void group_kernel(const int32_t *ids, const float *w, int M, int K, int E, int32_t *offsets, int32_t *rows,
                             float *rw, int32_t *pos_of) {
    __shared__ int cnt[MOE_MAX_EXPERTS + 1];
    int n = M * K;
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
        int c = 0;
        for (int i = 0; i < n; i++) c += ids[i] == e;
        cnt[e] = c;
    }
    __syncthreads();
    if (threadIdx.x == 0) write_offsets(cnt, offsets, E);
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
        int pos = cnt[e];
        for (int i = 0; i < n; i++)
            if (ids[i] == e) {
                if (pos_of) pos_of[i] = pos;
                rows[pos] = i / K;
                rw[pos] = w[i];
                pos++;
            }
    }
}

/* group_kernel's contract, one warp per expert (a thread per expert scanned every id twice: 47 us a
 * layer at 64 tokens x top-6): the warp counts its expert's ids 32 at a time with a ballot, and places
 * them in token order by the ballot's prefix. The ids are first copied to shared memory when they fit
 * (GROUP_SMEM_IDS); block 1024 threads. */
#define GROUP_SMEM_IDS 8192
/* e0 <= e < e1: only those experts' rows are listed (the others get none; pos_of -1 for their pairs, and
 * the rows past the listed ones are 0, a valid row for the gather); 0, E for all. */
/* group_v2_kernel's work for a block of any size (warp w takes experts w, w + warps, ...). cnt [MOE_MAX_EXPERTS + 1]
 * and ids_s [cap]: the block's shared memory (the ids are copied there when they fit). cg: ids and w were written by
 * other blocks of this launch (read from L2, after the writer's fence and the reader's ticket). */
__device__ static void group_block(const int32_t *ids_g, const float *w, int M, int K, int E, int32_t *offsets,
                                   int32_t *rows, float *rw, int32_t *pos_of, int e0, int e1, int *cnt, int32_t *ids_s,
                                   int cap, bool cg) {
    int n = M * K, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    const int32_t *ids = ids_g;
    const bool in_smem = n <= cap;
    if (in_smem) {
        for (int i = threadIdx.x; i < n; i += blockDim.x) ids_s[i] = cg ? __ldcg(ids_g + i) : ids_g[i];
        ids = ids_s;
    }
    __syncthreads();
    for (int e = warp; e < E; e += nw) {
        int c = 0;
        if (e < e0 || e >= e1) {
            if (lane == 0) cnt[e] = 0;
            continue;
        }
        for (int i0 = 0; i0 < n; i0 += 32) {
            int i = i0 + lane;
            c += __popc(__ballot_sync(0xffffffffu, i < n && (cg && !in_smem ? __ldcg(ids + i) : ids[i]) == e));
        }
        if (lane == 0) cnt[e] = c;
    }
    __syncthreads();
    if (threadIdx.x == 0) write_offsets(cnt, offsets, E);
    if (e0 > 0 || e1 < E)
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            if (pos_of) pos_of[i] = -1;   /* overwritten below for the range's pairs */
            rows[i] = 0;
        }
    __syncthreads();
    for (int e = e0 + warp; e < e1; e += nw) {
        int pos = cnt[e];
        for (int i0 = 0; i0 < n; i0 += 32) {
            int i = i0 + lane;
            bool hit = i < n && (cg && !in_smem ? __ldcg(ids + i) : ids[i]) == e;
            unsigned mask = __ballot_sync(0xffffffffu, hit);
            if (hit) {
                int p = pos + __popc(mask & ((1u << lane) - 1u));
                if (pos_of) pos_of[i] = p;
                rows[p] = i / K;
                rw[p] = cg ? __ldcg(w + i) : w[i];
            }
            pos += __popc(mask);
        }
    }
}

__global__ void group_v2_kernel(const int32_t *ids_g, const float *w, int M, int K, int E, int32_t *offsets,
                                int32_t *rows, float *rw, int32_t *pos_of, int e0, int e1) {
    __shared__ int cnt[MOE_MAX_EXPERTS + 1];
    __shared__ int32_t ids_s[GROUP_SMEM_IDS];
    cu_pdl_trigger();
    cu_pdl_wait();
    group_block(ids_g, w, M, K, E, offsets, rows, rw, pos_of, e0, e1, cnt, ids_s, GROUP_SMEM_IDS, false);
}

int cu_group_v2 = 1;   /* DSINFER_CUDA_GROUP2 (read at backend creation) */
int cu_group_wide = 1; /* DSINFER_CUDA_GROUP_WIDE (read at backend creation) */
int cu_group_wide_min = 1024;   /* DSINFER_CUDA_GROUP_WIDE_MIN: pairs from which the grouped MoE path uses it */

/* ---- grouping over many blocks (prefill-sized batches) ----------------------------------------------
 * group_v2_kernel is one block; at 8K tokens x top-6 it walked 49152 pairs from global memory for 3.4 ms a
 * layer (RESULTS fifth session, run 12). The same output (rows of each expert in pair order, pos_of,
 * offsets with the live list) from three kernels over GROUP_CHUNK-pair chunks: per-chunk histograms, one
 * block turning them into each chunk's first row per expert, then each chunk placing its pairs: a pair's
 * row is its chunk's first row for the expert plus the pairs of that expert before it in the chunk (warps
 * in turn, ranks within a warp by __match_any_sync), so the order is the pairs' order, as in v2. All
 * experts (no e0/e1 range). ws: chunks x E ints. */
#define GROUP_CHUNK 1024

__global__ void __launch_bounds__(GROUP_CHUNK) group_hist_kernel(const int32_t *ids, int n, int E, int32_t *hist) {
    __shared__ int h[MOE_MAX_EXPERTS];
    for (int e = threadIdx.x; e < E; e += blockDim.x) h[e] = 0;
    __syncthreads();
    int i = blockIdx.x * GROUP_CHUNK + threadIdx.x;
    if (i < n) atomicAdd(&h[ids[i]], 1);
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += blockDim.x) hist[(size_t)blockIdx.x * E + e] = h[e];
}

/* one block: hist[c][e] becomes chunk c's first row for expert e; offsets as write_offsets */
__global__ void group_scan_kernel(int32_t *hist, int n_chunks, int E, int32_t *offsets) {
    __shared__ int cnt[MOE_MAX_EXPERTS + 1];
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
        int acc = 0;
        for (int c = 0; c < n_chunks; c++) {
            int v = hist[(size_t)c * E + e];
            hist[(size_t)c * E + e] = acc;
            acc += v;
        }
        cnt[e] = acc;
    }
    __syncthreads();
    if (threadIdx.x == 0) write_offsets(cnt, offsets, E);
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += blockDim.x)
        for (int c = 0; c < n_chunks; c++) hist[(size_t)c * E + e] += cnt[e];
}

__global__ void __launch_bounds__(GROUP_CHUNK) group_place_kernel(const int32_t *ids, const float *w, int n, int K, int E,
                                                                  const int32_t *first, int32_t *rows, float *rw,
                                                                  int32_t *pos_of) {
    __shared__ int cur[MOE_MAX_EXPERTS];
    for (int e = threadIdx.x; e < E; e += blockDim.x) cur[e] = first[(size_t)blockIdx.x * E + e];
    __syncthreads();
    int i = blockIdx.x * GROUP_CHUNK + threadIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int e = i < n ? ids[i] : -1 - lane;   /* past the end: a key no other lane has */
    unsigned mask = __match_any_sync(0xffffffffu, e);
    int rank = __popc(mask & ((1u << lane) - 1u)), leader = __ffs(mask) - 1, p = 0;
    for (int wv = 0; wv < GROUP_CHUNK / 32; wv++) {   /* warps in turn: the chunk's pairs in order */
        if (warp == wv) {
            if (e >= 0) p = cur[e] + rank;
            __syncwarp();
            if (e >= 0 && lane == leader) cur[e] += __popc(mask);
        }
        __syncthreads();
    }
    if (e >= 0) {
        if (pos_of) pos_of[i] = p;
        rows[p] = i / K;
        rw[p] = w[i];
    }
}

/* group_v2_kernel's result for all experts, over many blocks (hist: ceil(M K / GROUP_CHUNK) x E ints) */
static void launch_group_wide(const int32_t *ids, const float *w, int M, int K, int E, int32_t *d_off, int32_t *rows,
                              float *rw, int32_t *pos, int32_t *hist) {
    int n = M * K, chunks = (n + GROUP_CHUNK - 1) / GROUP_CHUNK;
    group_hist_kernel<<<chunks, GROUP_CHUNK, 0, cu_stream>>>(ids, n, E, hist);
    CUDA_LAUNCH_CHECK();
    group_scan_kernel<<<1, 512, 0, cu_stream>>>(hist, chunks, E, d_off);
    CUDA_LAUNCH_CHECK();
    group_place_kernel<<<chunks, GROUP_CHUNK, 0, cu_stream>>>(ids, w, n, K, E, hist, rows, rw, pos);
    CUDA_LAUNCH_CHECK();
}

/* ---- grouping v3 (opt.group3; DSINFER_CUDA_GROUP3): one block, a thread a pair (two from 1024 pairs) -------------
 * group_v2_kernel's outputs, the same values (an expert's pairs in pair order, the offsets, the live experts in
 * increasing order, pos_of), without its serial parts: group_v2 scans all pairs once per expert (a warp an expert, n / 32
 * ballots each, twice) and thread 0 walks the E experts for the offsets (ncu at FP8 b64: 10.2 us a layer). Here pair
 * i = t + 1024 h of thread t sits in virtual warp v = warp + 32 h; __match_any_sync gives each pair the lanes of its
 * warp with the same expert, whose leader writes that count to wc[v][e]; thread e sums its column, a block
 * scan over the experts of (count | live << 16) gives the row offsets and the live list, thread e turns its column
 * into each virtual warp's first slot, and a pair's slot is that plus its rank among its warp's equal lanes. Pair order
 * within an expert is (virtual warp, lane) order = i order. Dynamic shared memory: ceil(n / 32) x E ints. */
#define G3_THREADS 1024
#define G3_MAX_N (2 * G3_THREADS)
#define G3_MAX_E G3_THREADS

static size_t g3_smem(int n, int E) { return (size_t)((n + 31) / 32) * (size_t)E * 4; }

__global__ void __launch_bounds__(G3_THREADS) group_v3_kernel(const int32_t *ids, const float *w, int M, int K, int E,
                                                              int32_t *offsets, int32_t *rows, float *rw, int32_t *pos_of) {
    extern __shared__ int g3_wc[];   /* [ceil(n / 32)][E]: pairs of expert e in virtual warp v, then v's first slot */
    __shared__ int wsum[G3_THREADS / 32];
    cu_pdl_trigger();
    int n = M * K, nvw = (n + 31) / 32, t = threadIdx.x, lane = t & 31, warp = t >> 5;
    for (int i = t; i < nvw * E; i += G3_THREADS) g3_wc[i] = 0;
    cu_pdl_wait();
    int e_of[2];
    unsigned same[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int i = t + h * G3_THREADS;
        e_of[h] = i < n ? ids[i] : -1;
        same[h] = __match_any_sync(0xffffffffu, e_of[h]);
    }
    __syncthreads();   /* wc zeroed */
#pragma unroll
    for (int h = 0; h < 2; h++)
        if (e_of[h] >= 0 && lane == __ffs(same[h]) - 1) g3_wc[(warp + 32 * h) * E + e_of[h]] = __popc(same[h]);
    __syncthreads();
    int c = 0;
    if (t < E) {
        for (int v = 0; v < nvw; v++) c += g3_wc[v * E + t];   /* expert t's pairs */
    }
    /* inclusive scan of (count | live << 16) over threads 0 .. E - 1 (counts <= 2048, live <= E: no carry) */
    int val = t < E ? c | (c > 0) << 16 : 0, inc = val;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        int y = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o) inc += y;
    }
    if (lane == 31) wsum[warp] = inc;
    __syncthreads();
    if (warp == 0) {
        int x = wsum[lane], xi = x;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            int y = __shfl_up_sync(0xffffffffu, xi, o);
            if (lane >= o) xi += y;
        }
        wsum[lane] = xi - x;   /* exclusive: the warps before */
    }
    __syncthreads();
    if (t < E) {
        int ex = inc - val + wsum[warp], off = ex & 0xffff, live = ex >> 16;
        offsets[t] = off;
        if (c) offsets[E + 2 + live] = t;
        if (t == E - 1) {
            offsets[E] = off + c;
            offsets[E + 1] = live + (c > 0);
        }
        for (int v = 0, acc = off; v < nvw; v++) {
            int k = g3_wc[v * E + t];
            g3_wc[v * E + t] = acc;
            acc += k;
        }
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int i = t + h * G3_THREADS;
        if (e_of[h] < 0) continue;
        int p = g3_wc[(warp + 32 * h) * E + e_of[h]] + __popc(same[h] & ((1u << lane) - 1u));
        if (pos_of) pos_of[i] = p;
        rows[p] = i / K;
        rw[p] = w[i];
    }
}

/* group_v3_kernel applies: the backend's switch, n <= G3_MAX_N pairs, E <= G3_MAX_E, its shared memory within 160 KB
 * (ceil(n / 32) x E ints: 128 KB at 2048 pairs and 512 experts) */
static int g3_fits(const ds_cuda_backend *cb, int n, int E) {
    return cb->opt.group3 && n <= G3_MAX_N && E <= G3_MAX_E && g3_smem(n, E) <= 160 * 1024;
}

static void launch_group3(const int32_t *ids, const float *w, int M, int K, int E, int32_t *d_off, int32_t *rows, float *rw,
                          int32_t *pos) {
    size_t smem = g3_smem(M * K, E);
    static size_t smem_set;   /* the largest dynamic size allowed so far (racing backends set it twice: harmless) */
    if (smem > 48 * 1024 && smem > smem_set) {
        CUDA_CHECK(cudaFuncSetAttribute(group_v3_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        smem_set = smem;
    }
    cu_launch(group_v3_kernel, 1, G3_THREADS, smem, ids, w, M, K, E, d_off, rows, rw, pos);
}

static void launch_group(const ds_cuda_backend *cb, const int32_t *ids, const float *w, int M, int K, int E, int32_t *d_off,
                         int32_t *rows, float *rw, int32_t *pos) {
    if (g3_fits(cb, M * K, E)) launch_group3(ids, w, M, K, E, d_off, rows, rw, pos);
    else if (cu_group_v2) cu_launch(group_v2_kernel, 1, 1024, 0, ids, w, M, K, E, d_off, rows, rw, pos, 0, E);
    else group_kernel<<<1, E < 1024 ? E : 1024, 0, cu_stream>>>(ids, w, M, K, E, d_off, rows, rw, pos);
    CUDA_LAUNCH_CHECK();
}

/* grid (n): xin[i, :] = x[rows[i], :]. */
__global__ void moe_gather_kernel(float *xin, const float *x, const int32_t *rows, int D) {
    const float *src = x + (size_t)rows[blockIdx.x] * D;
    for (int c = threadIdx.x; c < D; c += blockDim.x) xin[(size_t)blockIdx.x * D + c] = src[c];
}

/* grid (n): out[rows[i], :] += rw[i] * y[i, :]; the rows of one expert are distinct. */
__global__ void moe_combine_kernel(float *out, const float *y, const int32_t *rows, const float *rw, int D) {
    float *dst = out + (size_t)rows[blockIdx.x] * D;
    float wt = rw[blockIdx.x];
    for (int c = threadIdx.x; c < D; c += blockDim.x) dst[c] += wt * y[(size_t)blockIdx.x * D + c];
}

__global__ void weight_row_kernel(float *dst, cu_wview w) {
    for (int c = threadIdx.x; c < w.cols; c += blockDim.x) dst[c] = cu_w(w, 0, c);
}

/* ---- grouped experts ------------------------------------------------------------------------------ */
/* A layer's expert views on the device: gate [E], up [E], down [E]. `key` holds the host data pointers
 * the table was built from, so a table is rebuilt when the weights behind L change (op tests). */
struct cu_moe_tab {
    const ds_layer_weights *L;
    const void **key;   /* [3E] */
    cu_wview *d;        /* [3E] device */
    int E;
};

static const cu_wview *moe_table(ds_cuda_backend *cb, const ds_layer_weights *L, int E) {
    struct cu_moe_tab *t = NULL;
    for (int i = 0; i < cb->n_moe_tabs && !t; i++)
        if (cb->moe_tabs[i].L == L && cb->moe_tabs[i].E == E) t = &cb->moe_tabs[i];
    int fresh = 0;
    if (!t) {
        cb->moe_tabs = (struct cu_moe_tab *)ds_xrealloc(cb->moe_tabs, sizeof(*t) * (size_t)(cb->n_moe_tabs + 1));
        t = &cb->moe_tabs[cb->n_moe_tabs++];
        t->L = L;
        t->E = E;
        t->key = (const void **)ds_xcalloc((size_t)3 * E, sizeof(void *));
        CUDA_CHECK(cudaMalloc(&t->d, sizeof(cu_wview) * 3 * (size_t)E));
        fresh = 1;
    }
    for (int e = 0; e < E && !fresh; e++)
        fresh = t->key[e] != L->exp_gate[e].data || t->key[E + e] != L->exp_up[e].data ||
                t->key[2 * E + e] != L->exp_down[e].data;
    if (fresh) {
        cu_wview *h = (cu_wview *)ds_xmalloc(sizeof(cu_wview) * 3 * (size_t)E);
        for (int e = 0; e < E; e++) {
            h[e] = cu_view(&L->exp_gate[e]);
            h[E + e] = cu_view(&L->exp_up[e]);
            h[2 * E + e] = cu_view(&L->exp_down[e]);
            t->key[e] = L->exp_gate[e].data;
            t->key[E + e] = L->exp_up[e].data;
            t->key[2 * E + e] = L->exp_down[e].data;
        }
        CUDA_CHECK(cudaMemcpy(t->d, h, sizeof(cu_wview) * 3 * (size_t)E, cudaMemcpyHostToDevice));
        free(h);
    }
    return t->d;
}

void cu_moe_tabs_free(ds_cuda_backend *cb) {
    for (int i = 0; i < cb->n_moe_tabs; i++) {
        cudaFree(cb->moe_tabs[i].d);
        free(cb->moe_tabs[i].key);
    }
    free(cb->moe_tabs);
    cb->moe_tabs = NULL;
    cb->n_moe_tabs = 0;
}

/* grid (M, ceil(D / 256)), block 256: out[m, :] += w_k * y[pos_k, :] over the token's K experts in
 * ascending expert id (columns split across blocks: at batch 1 one block was latency-bound, 11 us).
 * ns > 0 (the shared experts ran as virtual experts, cu_moe_wg_run): out[m, :] = sum over s < ns of ys[s mt + m, :],
 * then the same routed sum, instead of out's old value (ys [ns mt, D], mt = M). */
__global__ void moe_combine_sorted_kernel(float *out, const float *y, const int32_t *ids, const int32_t *pos,
                                          const float *w, int K, int D, const float *ys, int ns, int mt) {
    cu_pdl_trigger();
    cu_pdl_wait();
    int m = blockIdx.x;
    int ord[MOE_MAX_K];
    for (int k = 0; k < K; k++) {   /* insertion sort of the K slots by expert id */
        int j = k;
        while (j > 0 && ids[(size_t)m * K + ord[j - 1]] > ids[(size_t)m * K + k]) {
            ord[j] = ord[j - 1];
            j--;
        }
        ord[j] = k;
    }
    for (int c = blockIdx.y * blockDim.x + threadIdx.x; c < D; c += gridDim.y * blockDim.x) {
        float a = ns ? ys[(size_t)m * D + c] : out[(size_t)m * D + c];
        for (int s = 1; s < ns; s++) a += ys[((size_t)s * mt + m) * D + c];
        for (int k = 0; k < K; k++) {
            int i = m * K + ord[k];
            if (pos[i] >= 0) a += w[i] * y[(size_t)pos[i] * D + c];   /* < 0: another rank's expert */
        }
        out[(size_t)m * D + c] = a;
    }
}

/* v2 (opt.combine2): the same sums in the same order (the same bits), D % 4 == 0 and out, y 16-byte aligned; grid
 * (M, ny), block CB2_THREADS: block (m, by) takes float4 columns by * CB2_THREADS + tid, stepping ny * CB2_THREADS.
 * Why: v1 gave each 256 columns of a token a block (65536 blocks at 8K tokens of V2-Lite), each re-reading and sorting
 * the token's K slots before six 4-byte loads a thread: 389 us a layer at 8K (1.2 TB/s; ncu, RESULTS nineteenth
 * session). Here a token's slots are read and sorted once a block into shared memory, and every thread keeps K
 * 16-byte loads a column group in flight; ny splits the columns only where M alone leaves the SMs idle (decode). */
#define CB2_THREADS 128
/* FIRST (DSINFER_CUDA_MOE_COMBINE2=2): every row a thread adds is requested before the first addition (one memory round
 * trip, not ns + K: the loop added each row right after loading it; ncu, RESULTS twenty-second session run 1: 7.2 us a
 * layer at b64 for 4 MB), and the K slots ranked by K threads at once (thread 0's insertion sort read them one after
 * another); the same additions in the same order: the same bits. ns <= CB2_NS, K <= MOE_MAX_K there. */
#define CB2_NS 2
template <bool FIRST = false>
__global__ void __launch_bounds__(CB2_THREADS) moe_combine_sorted2_kernel(float *out, const float *y, const int32_t *ids,
                                                                          const int32_t *pos, const float *w, int K, int D,
                                                                          const float *ys, int ns, int mt) {
    __shared__ int s_pos[MOE_MAX_K];
    __shared__ float s_w[MOE_MAX_K];
    cu_pdl_trigger();
    cu_pdl_wait();
    int m = blockIdx.x;
    if (FIRST) {
        cu_comb_rank(ids, pos, w, m, K, s_pos, s_w);
        __syncthreads();
        const int D4 = D >> 2;
        float4 *o4 = (float4 *)(out + (size_t)m * D);
        for (int c = blockIdx.y * CB2_THREADS + threadIdx.x; c < D4; c += gridDim.y * CB2_THREADS)
            o4[c] = cu_comb_col<CB2_NS, MOE_MAX_K>((const float4 *)ys, ns, mt, m, y, s_pos, s_w, K, D, c, o4);
        return;
    }
    if (threadIdx.x == 0) {   /* the K slots in ascending expert id (insertion sort), as v1 takes them */
        int ord[MOE_MAX_K];
        for (int k = 0; k < K; k++) {
            int j = k;
            while (j > 0 && ids[(size_t)m * K + ord[j - 1]] > ids[(size_t)m * K + k]) {
                ord[j] = ord[j - 1];
                j--;
            }
            ord[j] = k;
        }
        for (int k = 0; k < K; k++) {
            s_pos[k] = pos[(size_t)m * K + ord[k]];
            s_w[k] = w[(size_t)m * K + ord[k]];
        }
    }
    __syncthreads();
    const int D4 = D >> 2;
    float4 *o4 = (float4 *)(out + (size_t)m * D);
    const float4 *s4 = (const float4 *)ys;   /* ns > 0: the shared experts' rows (v1's sum, in s order) */
    for (int c = blockIdx.y * CB2_THREADS + threadIdx.x; c < D4; c += gridDim.y * CB2_THREADS) {
        float4 a = ns ? __ldg(s4 + (size_t)m * D4 + c) : o4[c];
        for (int s = 1; s < ns; s++) {
            float4 v = __ldg(s4 + ((size_t)s * mt + m) * D4 + c);
            a.x += v.x;
            a.y += v.y;
            a.z += v.z;
            a.w += v.w;
        }
        for (int k = 0; k < K; k++) {
            int p = s_pos[k];
            if (p < 0) continue;   /* another rank's expert */
            float4 v = __ldg((const float4 *)(y + (size_t)p * D) + c);
            float wk = s_w[k];
            a.x += wk * v.x;
            a.y += wk * v.y;
            a.z += wk * v.z;
            a.w += wk * v.w;
        }
        o4[c] = a;
    }
}

/* the combine's blocks a token (grid.y) for M tokens of D columns, CB2_THREADS float4 columns a block: enough for two
 * blocks an SM where M alone leaves SMs idle (decode), at most one column group each */
static int comb_ny(const ds_cuda_backend *cb, int M, int D) {
    int groups = (D / 4 + CB2_THREADS - 1) / CB2_THREADS, ny = (2 * cb->n_sm + M - 1) / M;
    return ny < 1 ? 1 : ny > groups ? groups : ny;
}

/* out[m, :] += the token's routed rows of y, weighted (moe_combine_sorted_kernel's contract; v2 where it applies);
 * ns > 0: out = the ns shared experts' rows of y (from row M K) plus those, the old out unread */
static void moe_combine_launch(ds_cuda_backend *cb, float *out, const float *y, const int32_t *ids, const int32_t *pos,
                               const float *w, int M, int K, int D, int ns) {
    const float *ys = y + (size_t)M * K * D;
    /* -1 (the default): the all-loads-first form up to 128 tokens (FP8 b1 .. b128 -0.04 .. -0.1 ms a step, b256 +0.04 ..
     * +0.07: RESULTS twenty-third session run 1, thirtieth session runs 8 and 9) */
    const int form = cb->opt.combine2 < 0 ? (M <= 128 ? 2 : 1) : cb->opt.combine2;
    if (form && D % 4 == 0 && ((uintptr_t)out & 15) == 0 && ((uintptr_t)y & 15) == 0) {   /* ys aligned then too */
        int ny = comb_ny(cb, M, D);
        if (form == 2 && ns <= CB2_NS && K <= MOE_MAX_K && K <= CB2_THREADS)
            cu_launch(moe_combine_sorted2_kernel<true>, dim3(M, ny), CB2_THREADS, 0, out, y, ids, pos, w, K, D, ys, ns, M);
        else
            cu_launch(moe_combine_sorted2_kernel<false>, dim3(M, ny), CB2_THREADS, 0, out, y, ids, pos, w, K, D, ys, ns, M);
    } else {
        cu_launch(moe_combine_sorted_kernel, dim3(M, (D + 255) / 256), 256, 0, out, y, ids, pos, w, K, D, ys, ns, M);
    }
    CUDA_LAUNCH_CHECK();
}

/* moe_combine_sorted2_kernel<true>'s sums with ns 0 (out's row, what the shared experts left there, then + w_k y[pos_k] over
 * the token's K slots in ascending expert id, pos < 0 left out) with y in BF16 (the grouped W8A8 prefill's down output,
 * opt.moe_y_bf16): grid (M, ny), block CB2_THREADS, 4 columns a thread, every row's 8 bytes requested before the first
 * addition. D % 4 == 0, out 16-byte and y 8-byte aligned. */
__global__ void __launch_bounds__(CB2_THREADS) moe_combine_bf16_kernel(float *out, const __nv_bfloat16 *y, const int32_t *ids,
                                                                       const int32_t *pos, const float *w, int K, int D) {
    __shared__ int s_pos[MOE_MAX_K];
    __shared__ float s_w[MOE_MAX_K];
    cu_pdl_trigger();
    cu_pdl_wait();
    int m = blockIdx.x;
    cu_comb_rank(ids, pos, w, m, K, s_pos, s_w);
    __syncthreads();
    const int D4 = D >> 2;
    float4 *o4 = (float4 *)(out + (size_t)m * D);
    for (int c = blockIdx.y * CB2_THREADS + threadIdx.x; c < D4; c += gridDim.y * CB2_THREADS) {
        uint2 v[CU_COMB_MAX_K];
#pragma unroll
        for (int k = 0; k < CU_COMB_MAX_K; k++)
            if (k < K && s_pos[k] >= 0) v[k] = __ldg((const uint2 *)(y + (size_t)s_pos[k] * D) + c);
        float4 a = o4[c];
#pragma unroll
        for (int k = 0; k < CU_COMB_MAX_K; k++) {
            if (k >= K || s_pos[k] < 0) continue;
            float wk = s_w[k];
            float2 lo = __bfloat1622float2(*(const __nv_bfloat162 *)&v[k].x), hi = __bfloat1622float2(*(const __nv_bfloat162 *)&v[k].y);
            a.x += wk * lo.x;
            a.y += wk * lo.y;
            a.z += wk * hi.x;
            a.w += wk * hi.y;
        }
        o4[c] = a;
    }
}

/* out[m, :] += the token's K experts' rows of y (BF16) weighted, in ascending expert id (moe_combine_bf16_kernel); K <=
 * CU_COMB_MAX_K (the caller's check: cu_moe_gemm_f8 gives BF16 rows only then) */
static void moe_combine_bf16(ds_cuda_backend *cb, float *out, const __nv_bfloat16 *y, const int32_t *ids, const int32_t *pos,
                             const float *w, int M, int K, int D) {
    cu_comb_flush(cb);   /* (a combine left by an earlier call: made first, as moe_combine would have) */
    DS_CHECK(K <= CU_COMB_MAX_K && D % 4 == 0 && ((uintptr_t)out & 15) == 0 && ((uintptr_t)y & 7) == 0);
    cu_launch(moe_combine_bf16_kernel, dim3(M, comb_ny(cb, M, D)), CB2_THREADS, 0, out, y, ids, pos, w, K, D);
    CUDA_LAUNCH_CHECK();
}

/* moe_combine_launch, or (inside moe_to_attn_in, opt.combine_norm) its arguments left in cb->comb for the next attn_in's
 * norm kernel to make the same sums (cu_norm_chain_comb; cu_comb_flush launches them where that does not run) */
static void moe_combine(ds_cuda_backend *cb, float *out, const float *y, const int32_t *ids, const int32_t *pos, const float *w,
                        int M, int K, int D, int ns) {
    if (cb->comb_defer && cb->opt.combine_norm && M >= cb->opt.combine_norm_min_m && K <= CU_COMB_MAX_K &&
        ns <= CU_COMB_MAX_NS) {
        cu_comb_pend p = {out, y, w, ids, pos, M, K, D, ns, 1};
        cb->comb = p;
        cb->comb_defer = 0;   /* one combine a call */
        return;
    }
    moe_combine_launch(cb, out, y, ids, pos, w, M, K, D, ns);
}

void cu_comb_flush(ds_cuda_backend *cb) {
    if (!cb->comb.active) return;
    cu_comb_pend p = cb->comb;
    cb->comb.active = 0;
    moe_combine_launch(cb, p.out, p.y, p.ids, p.pos, p.w, p.M, p.K, p.D, p.ns);
}

/* backend.h moe_to_attn_in: moe, its combine possibly left to the next attn_in (opt.combine_norm) */
void cu_moe_to_attn_in(ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int M) {
    ds_cuda_backend *cb = cu_of(be);
    cu_comb_flush(cb);   /* (a combine left by an earlier call and never taken: made now, before this one's) */
    cb->comb_defer = 1;
    cu_moe(be, out, x, L, M);
    cb->comb_defer = 0;
}

static void shared_in_line(ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int M);

typedef struct {
    float *logits, *bias, *w, *rw, *xtra;
    int32_t *ids, *rows, *d_off;
} route_ws;
static route_ws route_ws_get(ds_cuda_backend *cb, int M, int E, int K, size_t extra);

/* The tail of a MoE layer for one token (and, with at, its attention first) through cu_moe1: its return (0: nothing
 * done). x: the attention's output (written first where at). */
static int moe1_layer(ds_cuda_backend *cb, float *xn, float *h, float *ff, float *x, const ds_layer_weights *L, float eps,
                      const ds_next_in *nx, const cu_m1_attn *at) {
    cu_comb_flush(cb);   /* (a combine left by an earlier call and never taken: made before this one) */
    route_cfg rc = route_cfg_of(cb, cb->base.cfg);
    route_ws r = route_ws_get(cb, 1, rc.E, rc.K, 0);
    cu_m1_tail t = {x, &L->o, &L->post_norm, h, xn, eps, NULL, NULL, NULL, NULL, NULL, at};
    if (nx) {
        t.in_norm = nx->in_norm;
        t.wq = nx->wq;
        t.wkv = nx->wkv;
        t.q = nx->q;
        t.kv = nx->kv;
    }
    int ran = cu_moe1(cb, ff, NULL, L, moe_table(cb, L, rc.E), r.logits, rc, &t);
    if (ran) cu_optimes_phase(cb, at ? "  layer: one launch (moe1_kernel with the attention)"
                                     : ran == 2 ? "  layer tail: one launch (moe1_kernel, the next layer's projections)"
                                                : "  layer tail: one launch (moe1_kernel)");
    return ran;
}

static void route_rows(ds_backend *be, const ds_weight *router, const ds_weight *router_bias, const float *x, int M,
                       float *logits, float *bias, int32_t *ids, float *w, float *zero, int nzero);

/* layer_tail1 with the next layer's part by moeo_kernel's tail form (opt.moeo 1 with opt.moeo_tail): o_proj with the
 * residual add and the post-attention norm (linear_add_rmsnorm's launches), the router, then one cooperative launch for
 * the MoE block and the next layer's add, norm and projections. 1 where it ran, 0 where the weights do not suit it
 * (nothing launched). */
static int moeo_layer_tail(ds_cuda_backend *cb, float *xn, float *h, float *ff, const float *x, const ds_layer_weights *L,
                           float eps, const ds_next_in *nx) {
    ds_backend *be = &cb->base;
    const ds_config *c = be->cfg;
    route_cfg rc = route_cfg_of(cb, c);
    if (!cb->opt.moeo_tail || !L->is_moe || !be->linear_add_rmsnorm || !cu_moeo_tail_fits(cb, ff, xn, L, rc, nx)) return 0;
    cu_comb_flush(cb);
    route_ws r = route_ws_get(cb, 1, rc.E, rc.K, 2 * (size_t)c->hidden_size);
    float *z = ff;   /* (router_norm1 zeroes ff) */
    if (!router_norm1(cb, xn, h, ff, x, L, eps, r.logits, r.bias, r.ids, r.w, rc)) {
        be->linear_add_rmsnorm(be, xn, h, ff, x, &L->o, &L->post_norm, 1, eps);   /* ff = o(ao), h += ff, xn = norm(h) */
        z = cb->opt.route_zero ? ff : NULL;   /* (ff: o_proj's output, read by the norm before the router) */
        route_rows(be, &L->router, &L->router_bias, xn, 1, r.logits, r.bias, r.ids, r.w, z, c->hidden_size);
    }
    if (!cu_moeo_tail(cb, ff, xn, L, moe_table(cb, L, rc.E), r.ids, r.w, rc, h, xn, nx, eps, z != NULL))
        DS_CHECK(!"cu_moeo_tail refused what cu_moeo_tail_fits took");
    cu_optimes_phase(cb, "  layer tail: moeo_kernel's tail form (the next layer's projections)");
    return 1;
}

/* layer_tail1 without the next layer's part (opt.router_norm with moeo 1 and the tail form off): o_proj and
 * router_norm1_kernel (the norm, the router, the routing, ff's zeros), then moeo_kernel. 1 where it ran, else 0 (nothing
 * launched). */
static int moeo_layer_rn(ds_cuda_backend *cb, float *xn, float *h, float *ff, const float *x, const ds_layer_weights *L,
                         float eps) {
    const ds_config *c = cb->base.cfg;
    route_cfg rc = route_cfg_of(cb, c);
    if (!cb->opt.router_norm || cb->opt.moeo != 1 || cb->opt.moeo_tail || !L->is_moe || !cu_moeo_fits(cb, ff, xn, L, rc))
        return 0;
    cu_comb_flush(cb);
    route_ws r = route_ws_get(cb, 1, rc.E, rc.K, 2 * (size_t)c->hidden_size);
    if (!router_norm1(cb, xn, h, ff, x, L, eps, r.logits, r.bias, r.ids, r.w, rc)) return 0;
    if (!cu_moeo(cb, ff, xn, L, moe_table(cb, L, rc.E), r.ids, r.w, r.logits, rc, 1))
        DS_CHECK(!"cu_moeo refused what cu_moeo_fits took");
    cu_optimes_phase(cb, "  layer tail: o_proj, router_norm1_kernel, moeo_kernel");
    return 1;
}

/* backend.h layer_tail1: the MoE layer's tail for one token as moe1_kernel's tail form (opt.moe1 2; cuda_moe1.cu), where
 * the weights suit it */
int cu_layer_tail1(ds_backend *be, float *xn, float *h, float *ff, const float *x, const ds_layer_weights *L, float eps,
                   const ds_next_in *nx, int M) {
    ds_cuda_backend *cb = cu_of(be);
    if (M == 1 && cb->b.n_tokens == 1 && cb->opt.moe1 < 2 && nx && moeo_layer_tail(cb, xn, h, ff, x, L, eps, nx)) return 2;
    if (M == 1 && cb->b.n_tokens == 1 && cb->opt.moe1 < 2 && moeo_layer_rn(cb, xn, h, ff, x, L, eps)) return 1;
    if (M != 1 || cb->opt.moe1 < 2 || cb->b.n_tokens != 1) return 0;
    return moe1_layer(cb, xn, h, ff, (float *)x, L, eps, nx, NULL);   /* (x only read in the tail form) */
}

/* backend.h layer1: the MoE layer for one token as moe1_kernel's attention form (opt.moe1 3; cuda_moe1.cu), where the
 * weights, the cache and the batch suit it */
int cu_layer1(ds_backend *be, float *xn, float *h, float *ff, float *ao, float *q, float *kv, void *cache,
              const ds_layer_weights *L, float eps, float kv_eps, const ds_next_in *nx, int M) {
    ds_cuda_backend *cb = cu_of(be);
    if (M != 1 || cb->opt.moe1 < 3 || cb->b.n_tokens != 1 || cb->b.n_seqs != 1) return 0;
    cb->qb_of = NULL;   /* (no BF16 copy of this q: qkv_finish's is not made) */
    cu_m1_attn at = {q, kv, cache, &L->kv_b, &L->kv_a_norm, kv_eps};
    return moe1_layer(cb, xn, h, ff, ao, L, eps, nx, &at);
}

/* Whether batch 1's grouped GEMV experts take the shared experts into their two launches (opt.moe_duo): one token, shared
 * experts whose gate / up / down have the routed experts' dtype, gate and up one shape (the duo's own checks follow in
 * cu_gemv_group_duo, each launch falling back to two where they fail) */
static int moe_duo_fits(const ds_cuda_backend *cb, const ds_layer_weights *L, int M) {
    const ds_config *c = cb->base.cfg;
    return cb->opt.moe_duo && M == 1 && cb->b.n_tokens == 1 && c->n_shared_experts > 0 && L->sh_gate.data &&
           L->sh_up.data && L->sh_down.data && L->sh_gate.dtype == L->exp_gate[0].dtype &&
           L->sh_up.dtype == L->sh_gate.dtype && L->sh_down.dtype == L->exp_down[0].dtype &&
           L->sh_up.rows == L->sh_gate.rows && L->sh_up.cols == L->sh_gate.cols &&
           L->sh_down.cols == L->sh_gate.rows && L->sh_down.rows == c->hidden_size;
}

/* The routed experts of the grouped path: gate/up/SiLU over every expert's rows, down, combine. tc: on
 * the tensor cores (cuda_moe_tc.cu; the caller checked that the weights suit it). shared: the shared experts are this
 * function's too (out = shared + routed): as virtual experts of moe_wg_kernel where it runs them (y has room for
 * M K + n_shared M rows), else in line; 0: out already holds them (or they run on the side stream). duo (the GEMV path,
 * one token, moe_duo_fits): the shared experts (shared 1) as the second part of the routed experts' two launches. */
static void moe_grouped(ds_cuda_backend *cb, float *out, const float *x, const ds_layer_weights *L, int M,
                        const int32_t *ids, const float *w, const int32_t *rows, const int32_t *d_off,
                        const int32_t *pos, float *inter, float *y, int E, int K, int tc, int e_rep, int shared,
                        int duo) {
    /* e_rep: an expert this backend holds (all have the same shape and dtype) */
    int D = cb->base.cfg->hidden_size, I = L->exp_gate[e_rep].rows, ns = cb->base.cfg->n_shared_experts;
    const cu_wview *tab = moe_table(cb, L, E);
    if (tc) {
        cu_wview gv = cu_view(&L->exp_gate[e_rep]);
        int n_rows = M * K, sh_done = 0;
        void *xs = cu_ws_get(&cb->ws_moe_tc, (size_t)(n_rows + (shared ? ns * M : 0)) * (size_t)(D + I) * 2);
        if (!cu_moe_wg_run(cb, y, x, rows, d_off, n_rows, E, D, I, L, xs, shared ? M : 0, &sh_done))
            cu_moe_tc(y, x, rows, d_off, n_rows, E, D, I, tab, &gv, xs);
        if (shared && !sh_done) shared_in_line(&cb->base, out, x, L, M);
        if (sh_done) {
            cb->moe_shared_in_runs++;
            cu_optimes_phase(cb, "  moe: routed + shared experts (moe_wg_kernel)");
        }
        cu_side_join(cb);   /* the shared experts' out (second stream) before the routed outputs are added */
        moe_combine(cb, out, y, ids, pos, w, M, K, D, sh_done ? ns : 0);
        return;
    }
    if (shared && !duo) shared_in_line(&cb->base, out, x, L, M);
    int vec = cu_gemv_flags(cb);
    /* at most M * K experts have rows: launch blocks for those only (at batch 1, 6 of V2-Lite's 64; the
     * other experts' blocks were 91% of the launched blocks, each started only to exit) */
    int slots = cb->opt.moe_live ? (M * K < E ? M * K : E) : 0;
    cu_wview gv = cu_view(&L->exp_gate[e_rep]), uv = cu_view(&L->exp_up[e_rep]), dv = cu_view(&L->exp_down[e_rep]);
    if (duo) {   /* one token: the shared experts as the second part of each launch (else their own, as in line) */
        int sI = L->sh_gate.rows;
        float *sg = (float *)cu_ws_get(&cb->ws_mlp, 2 * (size_t)sI * sizeof(float));   /* (cu_mlp's workspace, its size) */
        cu_gemv_b bg = {x, sg, cu_view(&L->sh_gate), cu_view(&L->sh_up), sI, 0};
        if (cu_gemv_group_duo(inter, I, x, D, rows, d_off, E, tab, tab + E, gv, uv, 1, I, vec, slots, &bg)) {
            cb->moe_duo_launches++;
        } else {
            cu_gemv_group(sg, sI, 0, x, D, 0, NULL, NULL, 1, 1, NULL, NULL, bg.v0, bg.v1, 1, sI, vec, 0, 0, 0);
            cu_gemv_group(inter, I, 0, x, D, 0, rows, d_off, M, E, tab, tab + E, gv, uv, 1, I, vec, 0, 0, slots);
        }
        cu_gemv_b bd = {sg, out, cu_view(&L->sh_down), cu_view(&L->sh_down), D, 0};
        if (cu_gemv_group_duo(y, D, inter, I, NULL, d_off, E, tab + 2 * E, NULL, dv, dv, 0, D, vec, slots, &bd)) {
            cb->moe_duo_launches++;
        } else {
            cu_linear(&cb->base, out, sg, &L->sh_down, 1);
            cu_gemv_group(y, D, 0, inter, I, 0, NULL, d_off, M, E, tab + 2 * E, NULL, dv, dv, 0, D, vec, 0, 0, slots);
        }
        cu_optimes_phase(cb, "  moe: routed + shared experts (two duo GEMV launches)");
        cu_side_join(cb);   /* (a fork of the side lab's, events only, is joined here as on the in-line path) */
        moe_combine(cb, out, y, ids, pos, w, M, K, D, 0);
        return;
    }
    /* M: no expert has more rows than there are tokens (the one-row GEMV form at batch 1) */
    cu_gemv_group(inter, I, 0, x, D, 0, rows, d_off, M, E, tab, tab + E, gv, uv, 1, I, vec, 0, 0, slots);
    cu_gemv_group(y, D, 0, inter, I, 0, NULL, d_off, M, E, tab + 2 * E, NULL, dv, dv, 0, D, vec, 0, 0, slots);
    cu_side_join(cb);
    moe_combine(cb, out, y, ids, pos, w, M, K, D, 0);
}

/* Router logits [M, E] (bias [E] staged from router_bias when it has data) and the choices ids / weights [M, K]:
 * one fused kernel at decode sizes (router_fused), else the router GEMM then the routing kernel. The router GEMM
 * stays fp32 when the tensor-core options are on: expert choices are discrete and BF16 logits would flip
 * near-ties (the op test compares the choices with the CPU's). */
static void route_rows(ds_backend *be, const ds_weight *router, const ds_weight *router_bias, const float *x, int M,
                       float *logits, float *bias, int32_t *ids, float *w, float *zero, int nzero) {
    ds_cuda_backend *cb = cu_of(be);
    route_cfg rc = route_cfg_of(cu_of(be), be->cfg);
    const float *biasp = NULL;
    if (router_bias && router_bias->data) {
        weight_row_kernel<<<1, 256, 0, cu_stream>>>(bias, cu_view(router_bias));
        CUDA_LAUNCH_CHECK();
        biasp = bias;
    }
    if (router_fused(cb, router, x, M, logits, biasp, ids, w, rc)) {
        if (zero) CUDA_CHECK(cudaMemsetAsync(zero, 0, (size_t)nzero * sizeof(float), cu_stream));
        cu_optimes_phase(cb, "  moe: router GEMM + top-k (one kernel)");
        return;
    }
    cu_opts keep = cb->opt;
    cb->opt.tc = 0;
    cb->opt.fp8_gemm = 0;
    cu_linear(be, logits, x, router, M);
    cb->opt = keep;
    cu_optimes_phase(cb, "  moe: router GEMM (fp32)");
    launch_route(logits, biasp, ids, w, M, rc, zero, nzero);
    cu_optimes_phase(cb, "  moe: top-k");
}

void ds_cuda_router(ds_backend *be, const float *x, const ds_weight *router, const ds_weight *router_bias, int M,
                    float *logits, int32_t *ids, float *weights) {
    ds_cuda_backend *cb = cu_of(be);
    if (M <= 0) return;
    float *bias = (float *)cu_ws_get(&cb->ws_moe, sizeof(float) * (size_t)be->cfg->n_routed_experts);
    route_rows(be, router, router_bias, x, M, logits, bias, ids, weights, NULL, 0);
}

/* The grouped path's buffers in ws_moe2 for MK (token, choice) rows: inter [MK, I], y [MK, D] floats, then
 * pos [MK] int32, then the chunk histograms of launch_group_wide (ceil(MK / GROUP_CHUNK) x E int32). */
static void grouped_ws(ds_cuda_backend *cb, size_t MK, int I, int D, float **inter, float **y, int32_t **pos) {
    size_t chunks = (MK + GROUP_CHUNK - 1) / GROUP_CHUNK;   /* + room for group_wide's chunk histograms */
    *inter = (float *)cu_ws_get(&cb->ws_moe2, (MK * (size_t)I + MK * (size_t)D) * sizeof(float) +
                                                  (MK + chunks * MOE_MAX_EXPERTS) * 4);
    *y = *inter + MK * (size_t)I;
    *pos = (int32_t *)(*y + MK * (size_t)D);
}

/* Routing's buffers in ws_moe for M tokens, E experts, top-K: logits [M, E], bias [E], weights w [M, K], rw
 * [M, K], then `extra` floats for the caller (*xtra; NULL when 0), then ids and rows [M, K] and offsets
 * [2E + 2] (int32; the grouping kernels). (route_ws: above cu_layer_tail1.) */
static route_ws route_ws_get(ds_cuda_backend *cb, int M, int E, int K, size_t extra) {
    size_t MK = (size_t)M * K, nf = (size_t)M * E + E + 2 * MK + extra, ni = 2 * MK + 2 * (size_t)E + 2;
    route_ws r;
    r.logits = (float *)cu_ws_get(&cb->ws_moe, (nf + ni) * 4);
    r.bias = r.logits + (size_t)M * E;
    r.w = r.bias + E;
    r.rw = r.w + MK;
    r.xtra = extra ? r.rw + MK : NULL;
    r.ids = (int32_t *)(r.rw + MK + extra);
    r.rows = r.ids + MK;
    r.d_off = r.rows + MK;
    return r;
}

/* out [M, D] = the shared experts' output for x, or zero without shared experts: what the routed outputs are then
 * added to (on the main stream; cuda_side.cu runs the shared experts on a second one instead) */
static void shared_in_line(ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int M) {
    if (be->cfg->n_shared_experts) cu_mlp(be, out, x, &L->sh_gate, &L->sh_up, &L->sh_down, M);
    else CUDA_CHECK(cudaMemsetAsync(out, 0, (size_t)M * be->cfg->hidden_size * sizeof(float), cu_stream));
}

/* The fewest tokens for which the grouped routed experts run on the tensor cores (moe_wg_kernel) instead of the
 * grouped GEMV: opt.moe_tc_min_m when set, else by the experts' dtype as measured (twelfth session run 6: FP8 from
 * 2 tokens, batch 2 / 4 / 8 -8% / -18% / -27% a step, batch 1 +3%; BF16 from 4, batch 4 / 8 -4% / -12%, batch 2
 * +1%, batch 1 +8%). */
static int moe_tc_min_m(const ds_cuda_backend *cb, const cu_wview *gate) {
    if (cb->opt.moe_tc_min_m > 0) return cb->opt.moe_tc_min_m;
    return gate->dtype == DS_DTYPE_F8_E4M3 ? 2 : gate->dtype == DS_DTYPE_BF16 ? 4 : GEMV_MAX_M + 1;
}

void cu_moe(ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int M) {
    ds_cuda_backend *cb = cu_of(be);
    const ds_config *c = be->cfg;
    if (!cb->comb_defer) cu_comb_flush(cb);
    if (M <= 0) return;
    route_cfg rc = route_cfg_of(cb, c);
    int E = rc.E, K = rc.K, D = c->hidden_size;
    size_t MK = (size_t)M * K, MD = (size_t)M * D;
    route_ws r = route_ws_get(cb, M, E, K, 2 * MD);   /* extra: xin / yout [M, D] of the per-expert path */
    if (M == 1 && cb->opt.moe1 && cu_moe1(cb, out, x, L, moe_table(cb, L, E), r.logits, rc, NULL)) {
        cu_optimes_phase(cb, "  moe: one launch (moe1_kernel)");
        return;
    }
    if (M == 1 && cb->opt.moeo && cu_moeo_fits(cb, out, x, L, rc)) {   /* the router, then the experts by ownership */
        const int inner = cb->opt.moeo == 5;   /* (the route form: the router inside the launch) */
        float *z = cb->opt.route_zero && !inner ? out : NULL;   /* (out zeroed by the routing's launch) */
        if (!inner) route_rows(be, &L->router, &L->router_bias, x, M, r.logits, r.bias, r.ids, r.w, z, D);
        if (cu_moeo(cb, out, x, L, moe_table(cb, L, E), inner ? NULL : r.ids, inner ? NULL : r.w, r.logits, rc, z != NULL)) {
            cu_optimes_phase(cb, "  moe: experts by ownership (moeo_kernel)");
            return;
        }
        DS_CHECK(!"cu_moeo refused what cu_moeo_fits took");
    }
    float *logits = r.logits, *bias = r.bias, *w = r.w, *rw = r.rw, *xin = r.xtra, *yout = xin + MD;
    int32_t *ids = r.ids, *rows = r.rows, *d_off = r.d_off;
    cu_wview gv0 = cu_view(&L->exp_gate[0]), dv0 = cu_view(&L->exp_down[0]);
    /* the grouped path up to moe_grouped_max_m rows, and at any M when its experts run on the tensor
     * cores (V2-Lite prefill, H200: 512 tokens 4736 -> 11637 tok/s, 8K 10236 -> 10866 against the
     * per-expert path with its host sync) */
    int grouped_tc = cb->opt.tc && cb->opt.moe_tc && M >= moe_tc_min_m(cb, &gv0) && cu_moe_tc_fits(&gv0, &dv0);
    int gemm_path = cu_moe_gemm_on(cb, M) && E <= MOE_MAX_EXPERTS;
    int grouped_path = !gemm_path && cb->opt.moe_grouped && (M <= cb->opt.moe_grouped_max_m || grouped_tc);
    /* the shared experts on the second stream, from before the router to the combine (cuda_side.cu); the
     * per-expert path below keeps them in line */
    int fork = c->n_shared_experts && (gemm_path || grouped_path) && cu_side_ok(cb) && !cb->side.active &&
               M >= cb->opt.shared_stream_min_m && M <= cb->opt.shared_stream_max_m;
    int side = fork && !cu_side_lab;   /* lab (DSINFER_CUDA_SIDE_LAB): the fork and join alone, the shared experts in line */
    /* the shared experts inside the routed experts' launches (moe_wg_kernel's virtual experts; opt.moe_shared_in): on
     * the grouped tensor-core path, FP8 ones only where the linears are W8A8 too, so that they stay W8A8 as in line
     * (codes of x per 128 columns); their SiLU products are then rounded to BF16 before their codes, as the routed
     * experts' are, where the in-line MLP quantizes them unrounded (1e-4 NMSE apart: op test shin) */
    int sh_in = c->n_shared_experts && !side && grouped_path && grouped_tc && cb->opt.moe_shared_in &&
                M <= cb->opt.moe_shared_in_max_m && (gv0.dtype != DS_DTYPE_F8_E4M3 || cb->opt.fp8_gemm);
    if (fork) {
        cu_side_begin(cb);
        if (side) cu_mlp(be, out, x, &L->sh_gate, &L->sh_up, &L->sh_down, M);
        cu_side_end(cb);
    }
    int wide = cu_group_wide && MK >= (size_t)cu_group_wide_min;
    float *g_inter = NULL, *g_y = NULL;
    int32_t *g_pos = NULL;
    if (grouped_path) grouped_ws(cb, MK + (sh_in ? (size_t)c->n_shared_experts * M : 0), L->exp_gate[0].rows, D, &g_inter, &g_y, &g_pos);
    route_rows(be, &L->router, &L->router_bias, x, M, logits, bias, ids, w, NULL, 0);
    if (gemm_path) {   /* prefill-sized: a GEMM per expert (cuda_moe_gemm.cu) */
        int I = L->exp_gate[0].rows;
        float *inter, *y0;
        int32_t *pos;
        grouped_ws(cb, MK, 0, 0, &inter, &y0, &pos);   /* pos [MK], then room for the chunk histograms */
        if (cu_group_wide && !g3_fits(cb, (int)MK, E)) launch_group_wide(ids, w, M, K, E, d_off, rows, rw, pos, pos + MK);
        else launch_group(cb, ids, w, M, K, E, d_off, rows, rw, pos);
        cu_optimes_phase(cb, "  moe: grouping");
        int32_t off[MOE_MAX_EXPERTS + 1];
        CUDA_CHECK(cudaMemcpy(off, d_off, sizeof(int32_t) * (size_t)(E + 1), cudaMemcpyDeviceToHost));
        cu_optimes_phase(cb, "  moe: offsets to host");
        if (!side) shared_in_line(be, out, x, L, M);
        cu_optimes_phase(cb, "  moe: shared experts");
        int y16 = K <= CU_COMB_MAX_K;   /* BF16 rows taken (moe_combine_bf16); out: whether y is BF16 */
        const void *y = cu_moe_gemm(cb, x, rows, off, E, D, I, L, &y16);
        cu_side_join(cb);
        if (!y) return;
        if (y16) moe_combine_bf16(cb, (float *)out, (const __nv_bfloat16 *)y, ids, pos, w, M, K, D);
        else moe_combine(cb, (float *)out, (const float *)y, ids, pos, w, M, K, D, 0);
        cu_optimes_phase(cb, "  moe: combine");
        return;
    }
    if (grouped_path) {
        float *inter = g_inter, *y = g_y;
        int32_t *pos = g_pos;
        /* two or more chunks of pairs (decode batch 256 x top-6): the grouping over several blocks, 27 -> ~10 us
         * a layer expected against the one-block group_v2_kernel (ncu, sixth session run 4); the same rows,
         * offsets and pos_of */
        if (wide && !g3_fits(cb, (int)MK, E)) launch_group_wide(ids, w, M, K, E, d_off, rows, rw, pos, pos + MK);
        else launch_group(cb, ids, w, M, K, E, d_off, rows, rw, pos);
        int duo = !side && !sh_in && !grouped_tc && moe_duo_fits(cb, L, M);
        if (!side && !sh_in && !duo) shared_in_line(be, out, x, L, M);
        moe_grouped(cb, out, x, L, M, ids, w, rows, d_off, pos, inter, y, E, K, grouped_tc, 0, sh_in || duo, duo);
        return;
    }
    launch_group(cb, ids, w, M, K, E, d_off, rows, rw, NULL);
    int32_t off[MOE_MAX_EXPERTS + 1];
    CUDA_CHECK(cudaMemcpy(off, d_off, sizeof(int32_t) * (size_t)(E + 1), cudaMemcpyDeviceToHost));
    shared_in_line(be, out, x, L, M);
    for (int e = 0; e < E; e++) {
        int n = off[e + 1] - off[e];
        if (!n) continue;
        moe_gather_kernel<<<n, 256, 0, cu_stream>>>(xin, x, rows + off[e], D);
        CUDA_LAUNCH_CHECK();
        cu_mlp(be, yout, xin, &L->exp_gate[e], &L->exp_up[e], &L->exp_down[e], n);
        moe_combine_kernel<<<n, 256, 0, cu_stream>>>(out, yout, rows + off[e], rw + off[e], D);
        CUDA_LAUNCH_CHECK();
    }
}

/* The routed experts e0 <= e < e1 only (backend.h moe_routed): routing over all experts as cu_moe, the
 * grouped path always (no host sync: it runs inside the expert-parallel step's graph), out = 0 plus the
 * range's weighted outputs; pairs that chose another rank's expert have no row (group_v2_kernel's range). */
void cu_moe_routed(ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int M, int e0, int e1) {
    ds_cuda_backend *cb = cu_of(be);
    const ds_config *c = be->cfg;
    if (M <= 0) return;
    route_cfg rc = route_cfg_of(cb, c);
    int E = rc.E, K = rc.K, D = c->hidden_size;
    size_t MK = (size_t)M * K, MD = (size_t)M * D;
    route_ws r = route_ws_get(cb, M, E, K, 0);
    float *logits = r.logits, *bias = r.bias, *w = r.w, *rw = r.rw;
    int32_t *ids = r.ids, *rows = r.rows, *d_off = r.d_off;
    route_rows(be, &L->router, &L->router_bias, x, M, logits, bias, ids, w, NULL, 0);
    cu_wview gv = cu_view(&L->exp_gate[e0]), dv = cu_view(&L->exp_down[e0]);
    int tc = cb->opt.tc && cb->opt.moe_tc && M >= moe_tc_min_m(cb, &gv) && cu_moe_tc_fits(&gv, &dv);
    int I = L->exp_gate[e0].rows;
    float *inter, *y;
    int32_t *pos;
    grouped_ws(cb, MK, I, D, &inter, &y, &pos);
    cu_launch(group_v2_kernel, 1, 1024, 0, (const int32_t *)ids, (const float *)w, M, K, E, d_off, rows, rw, pos, e0, e1);
    CUDA_CHECK(cudaMemsetAsync(out, 0, MD * sizeof(float), cu_stream));
    moe_grouped(cb, out, x, L, M, ids, w, rows, d_off, pos, inter, y, E, K, tc, e0, 0, 0);
}
