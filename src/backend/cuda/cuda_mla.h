/* Pieces shared by the MLA decode kernels (cuda_mla_tc.cu: mma.sync, 16 heads a block; cuda_mla_wg.cu: wgmma, 64
 * heads a block): the DeepSeek widths, a context row's cache entry, the empty split, Q's loads. */
#ifndef DS_CUDA_MLA_H
#define DS_CUDA_MLA_H

#include "backend/cuda/cuda.h"

#define TC_HEADS 16   /* heads a block of the mma.sync kernels, and a call of mla_fetch_q */
#define TC_C 512      /* kv_lora_rank */
#define TC_DR 64      /* qk_rope_head_dim */
#define TC_W (TC_C + TC_DR)

/* the cache entry of context position pos of a sequence with page-table row pt */
__device__ __forceinline__ const unsigned char *entry_of(const fa_params &p, const int32_t *pt, int pos) {
    return p.cache + ((size_t)pt[pos / p.page_size] * p.page_size + (size_t)(pos % p.page_size)) * p.tb;
}

/* What block blockIdx.x of a decode kernel with `heads` heads a block and `tile`-row tiles works on: head group h0
 * (head groups fastest: the groups of one entry and split read the same rows close in time, all but the first from
 * L2), split, list entry i and its token m, the sequence's page-table row pt, the split's context rows [c_begin,
 * c_end) (the context's tiles shared out in equal counts; empty when c_begin >= c_end) and the index of its first
 * partial (part / ml rows base_o ..). */
typedef struct {
    int h0, split, i, m, c_begin, c_end;
    const int32_t *pt;
    size_t base_o;
} mla_work;

__device__ __forceinline__ mla_work mla_block_work(const fa_params &p, int heads, int tile) {
    mla_work w;
    int HGn = (p.H + heads - 1) / heads, bx = blockIdx.x;
    w.h0 = (bx % HGn) * heads;
    w.split = (bx / HGn) % p.n_splits;
    w.i = bx / HGn / p.n_splits;
    w.m = p.tok ? p.tok[w.i] : w.i;
    int s = p.tok_seq[w.m], ctx = p.positions[w.m] + 1;
    w.pt = p.page_table + (size_t)s * p.pt_stride;
    int n_tiles = (ctx + tile - 1) / tile, per = (n_tiles + p.n_splits - 1) / p.n_splits;
    w.c_begin = w.split * per * tile;
    w.c_end = min(ctx, (w.split + 1) * per * tile);
    w.base_o = ((size_t)w.i * p.n_splits + w.split) * p.H + w.h0;
    return w;
}

/* a split with no rows: (max, sum) = (-inf, 0) for its heads, which mla_combine skips with its partial */
__device__ __forceinline__ void mla_empty_split(const fa_params &p, size_t base_o, int nh) {
    if (threadIdx.x < nh) {
        p.ml[(base_o + threadIdx.x) * 2] = -INFINITY;
        p.ml[(base_o + threadIdx.x) * 2 + 1] = 0.0f;
    }
}

/* Q of 16 heads h0 .. h0 + 15 of list entry i (token m), NT threads: thread x's float4s qv[u] are element 4 (x' %
 * MLA_QV) of head x' / MLA_QV (x' = x + u NT; q_lat then q_pe per head; heads past nh zero). All of a thread's
 * loads are issued before any use: one load, convert, store per iteration put ~36 L2 round trips in a row (about
 * 15 us, most of the kernel at batch 1). q_lat rows are 16-byte aligned (C = 512); q_pe is read as float4 when
 * its offset allows. */
#define MLA_QV (TC_W / 4)   /* 144 float4 a head */
template <int NT>
__device__ __forceinline__ void mla_fetch_q(const fa_params &p, float4 qv[(TC_HEADS * MLA_QV + NT - 1) / NT], int i, int m,
                                            int h0, int nh) {
    constexpr int QV = MLA_QV, QN = (TC_HEADS * QV + NT - 1) / NT;
    bool pe_vec = ((p.dqk | p.dn) & 3) == 0 && ((uintptr_t)p.q & 15) == 0;
#pragma unroll
    for (int u = 0; u < QN; u++) {
        int x = threadIdx.x + u * NT, hh = x / QV, k = 4 * (x % QV);
        qv[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (x >= TC_HEADS * QV || hh >= nh) continue;
        if (k < TC_C) {
            qv[u] = __ldg((const float4 *)(p.qlat + ((size_t)i * p.H + h0 + hh) * TC_C + k));
        } else {
            const float *src = p.q + (size_t)m * p.H * p.dqk + (size_t)(h0 + hh) * p.dqk + p.dn + (k - TC_C);
            if (pe_vec) qv[u] = __ldg((const float4 *)src);
            else qv[u] = make_float4(src[0], src[1], src[2], src[3]);
        }
    }
}

#endif
