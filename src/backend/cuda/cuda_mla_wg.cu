/* MLA decode attention on Hopper's warpgroup MMAs, 64 heads a block (issue 7: the V3 shape's 128 heads;
 * DSINFER_CUDA_MLA_WG, default 2 (=1 v1 only, =0 the mma.sync kernels); the BF16 cache, H a multiple of 64.
 * 128 heads, 64 x 4K: 0.471 ms (mma.sync) -> v1 0.227 (fourteenth session), 0.215 with TMA -> v2 0.149 ms
 * (fifteenth session), bench/RESULTS.md. Two kernels here: v1 (mla_decode_wg_kernel, both warpgroups on every
 * tile) and v2 (mla_decode_wg2_kernel, FlashMLA's schedule, below; TMA page sizes only, else v1).
 *
 * The contract is mla_decode_tc2_kernel's (cuda_mla_tc.cu): for list entry i, split s and head h, the unnormalised
 * partial part[i, s, h, 0:C] = sum_j exp(l_j - max) v_j and ml[i, s, h] = (max, sum exp(l_j - max)) over the
 * split's context rows j, l_j = scale (q_lat . c_j + q_pe . k_pe_j); mla_combine_kernel merges the splits. The
 * arithmetic is that kernel's: q, the cache rows and P in BF16, sums in fp32.
 *
 * Why: at 128 heads the mma.sync kernels run 8 blocks of 16 heads over the same rows, each staging them and
 * bound by its MMAs (0.470 ms for 64 x 4K, 20% of the BF16 matrix rate, RESULTS seventh session). Here one block
 * takes 64 heads (FlashMLA's shape): a 64-row tile is staged once for 64 heads, and wgmma runs m64 with the heads
 * as M.
 *
 * One block = (entry i, split s, 64 heads), two warpgroups. Shared memory: Q [64 heads][576], a two-tile ring of
 * context rows [64][576], P [64 heads][64 rows], all BF16 in 128-byte-swizzled chunks of 64 columns (8 KB a chunk
 * of 64 rows: row r at r * 128 bytes, 16-byte piece k at k ^ (r % 8)). Per tile:
 *   scores:  warpgroup w: S[64 heads][rows 32w .. 32w + 31] = Q K^T over k = 576 (36 x m64n32k16; Q is A, the
 *            rows are B, both K-major);
 *   softmax: the tile's max per head across both warpgroups (shared), the running max and the rescale as in
 *            FlashAttention-2; P = exp(S - max) in BF16 to shared memory;
 *   values:  warpgroup w: O[64 heads][columns 256w .. 256w + 255] += P V (4 x m64n256k16; P is A; V is the same
 *            tile read as an MN-major B: 64 columns a 128-byte row, 8-row groups 1024 bytes apart, 64-column
 *            chunks 8 KB apart).
 * The next tile's rows load while this one is computed: by cp.async (every thread, 16 bytes a copy), or with TMA
 * (DSINFER_CUDA_MLA_WG_TMA, default on: page sizes 8, 16, 32, 64 or a multiple of 64; 0.225 -> 0.215 ms at 64 x 4K): thread 0 copies each page-run of the tile
 * and 64-column chunk as one box of a 2-D tensor map over the cache rows, whose 128-byte swizzle lands it in exactly
 * the tile's layout, completing on the slot's mbarrier. Rows past the context are zeros (unused pages may hold NaN:
 * cp.async zero-fills them, after a TMA copy they are overwritten) and their scores masked. */
#include "backend/cuda/cuda.h"

#include <cuda_bf16.h>
#include <string.h>

#include "backend/cuda/cuda_mla.h"
#include "backend/cuda/cuda_mma.h"
#include "backend/cuda/cuda_wgmma.h"

#define WM_HEADS 64
#define WM_TILE 64
#define WM_THREADS 256
#define WM_CHUNKS (TC_W / 64)                      /* 9 chunks of 64 columns */
#define WM_CHUNK_B (64 * 128)                      /* a chunk of 64 rows (or heads): 8 KB */
#define WM_TILE_B (WM_CHUNKS * WM_CHUNK_B)         /* 72 KB */
#define WM_SMEM (WM_TILE_B + 2 * WM_TILE_B + WM_CHUNK_B + 4 * WM_HEADS * sizeof(float) + 2 * sizeof(uint64_t) + 1024)
static_assert(WM_SMEM <= 227 * 1024, "mla_decode_wg_kernel: Q, two tiles and P must fit the shared memory of an SM");

int cu_mla_wg = 2;   /* DSINFER_CUDA_MLA_WG (backend creation): 2 v2 where TMA can load the rows, else v1 (the default since the
                      * fifteenth session); 1 v1 (the fourteenth session's); 0 off (the mma.sync kernels) */
int cu_mla_wg_tma = 1;   /* DSINFER_CUDA_MLA_WG_TMA (backend creation): the rows by TMA where the page size allows */

/* byte offset of 16-byte piece k (0 .. 71: column 8k) of row r in a swizzled [64][576] tile */
__device__ __forceinline__ unsigned wm_off(int r, int k) { return (k >> 3) * WM_CHUNK_B + r * 128 + (((k & 7) ^ (r & 7)) << 4); }

/* the MN-major descriptor of the values: leading byte offset 8 KB (the next 64 columns), stride byte offset 1024
 * (the next 8 rows), 128-byte swizzle */
__device__ __forceinline__ uint64_t wm_desc_mn(const void *p) {
    uint64_t a = cu_smem_addr(p);
    return ((a & 0x3FFFF) >> 4) | ((uint64_t)(WM_CHUNK_B >> 4) << 16) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

/* d[64 x 32] (+)= a[64 x 16] b[32 x 16]^T, BF16, both K-major from shared memory (d's layout as wg_mma_n128's) */
__device__ __forceinline__ void wm_mma_scores(float (&d)[16], uint64_t da, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "l"(da), "l"(db), "r"(acc));
}

/* d[64 x 256] += a[64 x 16] b[16 x 256], b MN-major (transposed) from shared memory */
__device__ __forceinline__ void wm_mma_values(float (&d)[128], uint64_t da, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "l"(da), "l"(db), "r"(acc));
}

/* d[64 x 64] (+)= a[64 x 16] b[64 x 16]^T, BF16, both K-major from shared memory */
__device__ __forceinline__ void w2_mma_s(float (&d)[32], uint64_t da, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db), "r"(acc));
}

/* the same with a from registers (wgmma's A fragment: mma.sync m16n8k16's A layout, warp i of the warpgroup rows 16i .. 16i + 15) */
__device__ __forceinline__ void w2_mma_s_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));
}

/* d[64 x 256] += a[64 x 16] b[16 x 256], a from registers, b MN-major (transposed) from shared memory */
__device__ __forceinline__ void w2_mma_o_rs(float (&d)[128], const uint32_t (&a)[4], uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc));
}

/* rows base .. base + 63 of the context into the tile Kt (warp w: rows 8w .. 8w + 7; lanes 0-7 look up the eight
 * entries, passed by shuffle; rows at or past nc zero-filled) */
__device__ __forceinline__ void wm_issue(const fa_params &p, const int32_t *pt, int base, int nc, unsigned char *Kt, int warp,
                                         int lane) {
    int r = 8 * warp + (lane & 7);
    const unsigned char *mine = entry_of(p, pt, base + (r < nc ? r : 0));
#pragma unroll
    for (int rr = 0; rr < 8; rr++) {
        int row = 8 * warp + rr, bytes = row < nc ? 16 : 0;
        const unsigned char *src = (const unsigned char *)__shfl_sync(0xffffffffu, (unsigned long long)mine, rr);
#pragma unroll
        for (int k = lane; k < TC_W / 8; k += 32) cu_cp_async16(Kt + wm_off(row, k), src + 16 * k, bytes);
    }
}

/* TMA form of wm_issue (one thread): context rows base .. base + nc - 1 (base a multiple of 64 and of the box's
 * br rows, page size ps: a box never crosses a page) into the tile Kt, box by box (br rows x 64 columns, at row
 * offset r0 of the tile and chunk c), all completing on bar; boxes wholly past nc are not copied (those rows, and
 * a last box's rows past nc, are zeroed by wm_zero_tail once the copies have landed) */
__device__ __forceinline__ void wm_issue_tma(const CUtensorMap *km, const int32_t *pt, int ps, int br, int base, int nc,
                                             unsigned char *Kt, uint64_t *bar) {
    int nbox = (nc + br - 1) / br;
    mbar_expect_tx(bar, nbox * br * 128 * WM_CHUNKS);
    for (int b = 0; b < nbox; b++) {
        int pos = base + b * br, row = pt[pos / ps] * ps + pos % ps;
#pragma unroll
        for (int c = 0; c < WM_CHUNKS; c++) tma_load(Kt + c * WM_CHUNK_B + b * br * 128, km, c * 128, row, bar);
    }
}

/* rows nc .. 63 of the tile Kt set to zero (all threads; generic-proxy stores, fenced for the MMAs by the caller) */
__device__ __forceinline__ void wm_zero_tail(unsigned char *Kt, int nc) {
    for (int x = threadIdx.x + nc * 8 * WM_CHUNKS; x < WM_TILE * 8 * WM_CHUNKS; x += WM_THREADS) {
        int row = x / (8 * WM_CHUNKS), piece = x % (8 * WM_CHUNKS);
        *(uint4 *)(Kt + wm_off(row, piece)) = make_uint4(0, 0, 0, 0);
    }
}

/* Q of heads h0 .. h0 + 63 into Qs (BF16, swizzled as a tile), 32 heads' loads in flight at a time */
__device__ __forceinline__ void wm_load_q(const fa_params &p, unsigned char *Qs, int i, int m, int h0) {
    constexpr int QN = (TC_HEADS * MLA_QV + WM_THREADS - 1) / WM_THREADS;
#pragma unroll 1
    for (int q = 0; q < WM_HEADS / TC_HEADS; q += 2) {
        float4 qv[2][QN];
        mla_fetch_q<WM_THREADS>(p, qv[0], i, m, h0 + TC_HEADS * q, TC_HEADS);
        mla_fetch_q<WM_THREADS>(p, qv[1], i, m, h0 + TC_HEADS * (q + 1), TC_HEADS);
#pragma unroll
        for (int v = 0; v < 2; v++)
#pragma unroll
            for (int u = 0; u < QN; u++) {
                int x = threadIdx.x + u * WM_THREADS, head = TC_HEADS * (q + v) + x / MLA_QV, k = 4 * (x % MLA_QV);
                if (x < TC_HEADS * MLA_QV)
                    *(uint2 *)(Qs + wm_off(head, k >> 3) + 2 * (k & 7)) =
                        make_uint2(cu_pack_bf16(qv[v][u].x, qv[v][u].y), cu_pack_bf16(qv[v][u].z, qv[v][u].w));
            }
    }
}

/* The block's results: warpgroup wg's O half (o[4j + e]: head hA (e < 2) or hA + 8, column 256 wg + 8j + 2t + (e & 1))
 * to the split's partials, and (all threads, a block barrier) the heads' (max, sum) with the two warpgroups' row sums
 * (lA, lB: this thread's part) added through red_sum [2][64]; mA, mB: the running max, the same in both warpgroups */
__device__ __forceinline__ void wm_store_out(const fa_params &p, const float (&o)[128], size_t base_o, int wg, int t, int hA,
                                             float mA, float mB, float lA, float lB, float *red_sum) {
    int hB = hA + 8;
#pragma unroll
    for (int j = 0; j < 32; j++) {
        int col = 256 * wg + 8 * j + 2 * t;
        *(float2 *)(p.part + (base_o + hA) * TC_C + col) = make_float2(o[4 * j], o[4 * j + 1]);
        *(float2 *)(p.part + (base_o + hB) * TC_C + col) = make_float2(o[4 * j + 2], o[4 * j + 3]);
    }
    lA += __shfl_xor_sync(0xffffffffu, lA, 1);
    lA += __shfl_xor_sync(0xffffffffu, lA, 2);
    lB += __shfl_xor_sync(0xffffffffu, lB, 1);
    lB += __shfl_xor_sync(0xffffffffu, lB, 2);
    if (t == 0) {
        red_sum[wg * WM_HEADS + hA] = lA;
        red_sum[wg * WM_HEADS + hB] = lB;
    }
    __syncthreads();
    if (wg == 0 && t == 0) {
        p.ml[(base_o + hA) * 2] = mA;
        p.ml[(base_o + hA) * 2 + 1] = red_sum[hA] + red_sum[WM_HEADS + hA];
        p.ml[(base_o + hB) * 2] = mB;
        p.ml[(base_o + hB) * 2 + 1] = red_sum[hB] + red_sum[WM_HEADS + hB];
    }
}

/* TMA: the rows by tensor-map copies (km: the cache as [rows, 1152] bytes, boxes of 128 bytes x br rows; br = the
 * page size up to 64, else 64); else by cp.async (km unused) */
template <bool TMA>
__global__ void __launch_bounds__(WM_THREADS, 1) mla_decode_wg_kernel(const __grid_constant__ CUtensorMap km, int br,
                                                                       fa_params p) {
    extern __shared__ unsigned char wm_raw[];
    unsigned char *Qs = (unsigned char *)(((uintptr_t)wm_raw + 1023) & ~(uintptr_t)1023);
    unsigned char *Ks = Qs + WM_TILE_B, *Ps = Ks + 2 * WM_TILE_B;
    float *red_max = (float *)(Ps + WM_CHUNK_B), *red_sum = red_max + 2 * WM_HEADS;   /* [2 warpgroups][64 heads] */
    uint64_t *bars = (uint64_t *)(red_sum + 2 * WM_HEADS);                             /* TMA: one a ring slot */
    cu_pdl_trigger();
    cu_pdl_wait();
    if (TMA) {
        if (threadIdx.x == 0) {
            mbar_init(&bars[0], 1);
            mbar_init(&bars[1], 1);
            asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        }
        __syncthreads();
    }
    const mla_work wk = mla_block_work(p, WM_HEADS, WM_TILE);   /* H % 64 == 0: every group has 64 heads */
    const int h0 = wk.h0, i = wk.i, m = wk.m, c_begin = wk.c_begin, c_end = wk.c_end;
    const int32_t *pt = wk.pt;
    const size_t base_o = wk.base_o;
    int warp = threadIdx.x >> 5, wg = warp >> 2, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int hA = 16 * (warp & 3) + g, hB = hA + 8;   /* this thread's two heads (rows of every accumulator) */
    if (c_begin >= c_end) {
        mla_empty_split(p, base_o, WM_HEADS);
        return;
    }
    int nt = (c_end - c_begin + WM_TILE - 1) / WM_TILE;
    if (!TMA) wm_issue(p, pt, c_begin, min(WM_TILE, c_end - c_begin), Ks, warp, lane);   /* in flight while Q loads */
    else if (threadIdx.x == 0) wm_issue_tma(&km, pt, p.page_size, br, c_begin, min(WM_TILE, c_end - c_begin), Ks, &bars[0]);
    cu_cp_async_commit();
    wm_load_q(p, Qs, i, m, h0);
    float mA = -INFINITY, mB = -INFINITY, lA = 0.0f, lB = 0.0f;
    float o[128];
#pragma unroll
    for (int j = 0; j < 128; j++) o[j] = 0.0f;

    for (int k = 0; k < nt; k++) {
        int base = c_begin + k * WM_TILE, nc = min(WM_TILE, c_end - base);
        unsigned char *Kt = Ks + (k & 1) * WM_TILE_B;
        cu_cp_async_wait<0>();   /* (TMA: only Q's stores, none pending) */
        if (TMA) {
            mbar_wait(&bars[k & 1], (k >> 1) & 1);   /* tile k's copies have landed */
            if (nc < WM_TILE) wm_zero_tail(Kt, nc);
        }
        wg_fence_smem();   /* the tile's (and Q's) shared-memory writes visible to the MMAs */
        __syncthreads();   /* ... all threads' parts; every MMA of tile k - 1 is done (its slot and P are free) */
        if (k + 1 < nt) {
            int nn = min(WM_TILE, c_end - base - WM_TILE);
            unsigned char *Kn = Ks + ((k + 1) & 1) * WM_TILE_B;
            if (!TMA) wm_issue(p, pt, base + WM_TILE, nn, Kn, warp, lane);
            else if (threadIdx.x == 0) wm_issue_tma(&km, pt, p.page_size, br, base + WM_TILE, nn, Kn, &bars[(k + 1) & 1]);
        }
        cu_cp_async_commit();

        float sacc[16];
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < TC_W / 16; kk++) {
            unsigned off = (kk >> 2) * WM_CHUNK_B + (kk & 3) * 32;
            wm_mma_scores(sacc, wg_desc(Qs + off), wg_desc(Kt + off + wg * 32 * 128), kk);
        }
        wg_commit();
        wg_wait0();

        /* sacc[4j + e]: head hA (e < 2) or hB, tile row 32 wg + 8j + 2t + (e & 1) */
        float sc[16], xA = -INFINITY, xB = -INFINITY;
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int row = 32 * wg + 8 * j + 2 * t + (e & 1);
                sc[4 * j + e] = row < nc ? sacc[4 * j + e] * p.scale : -INFINITY;
                if (e < 2) xA = fmaxf(xA, sc[4 * j + e]);
                else xB = fmaxf(xB, sc[4 * j + e]);
            }
        xA = fmaxf(xA, __shfl_xor_sync(0xffffffffu, xA, 1));
        xA = fmaxf(xA, __shfl_xor_sync(0xffffffffu, xA, 2));
        xB = fmaxf(xB, __shfl_xor_sync(0xffffffffu, xB, 1));
        xB = fmaxf(xB, __shfl_xor_sync(0xffffffffu, xB, 2));
        if (t == 0) {
            red_max[wg * WM_HEADS + hA] = xA;
            red_max[wg * WM_HEADS + hB] = xB;
        }
        __syncthreads();   /* both warpgroups' tile maxima */
        float nA = fmaxf(mA, fmaxf(red_max[hA], red_max[WM_HEADS + hA]));
        float nB = fmaxf(mB, fmaxf(red_max[hB], red_max[WM_HEADS + hB]));
        /* a head with no finite score yet keeps factor 1 and probabilities 0; __expf as mla_decode_tc2_kernel */
        float cA = nA == -INFINITY ? 1.0f : __expf(mA - nA), cB = nB == -INFINITY ? 1.0f : __expf(mB - nB);
        float sA = 0.0f, sB = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int col = 32 * wg + 8 * j + 2 * t;
            __nv_bfloat162 pa = __floats2bfloat162_rn(nA == -INFINITY ? 0.0f : __expf(sc[4 * j] - nA),
                                                      nA == -INFINITY ? 0.0f : __expf(sc[4 * j + 1] - nA));
            __nv_bfloat162 pb = __floats2bfloat162_rn(nB == -INFINITY ? 0.0f : __expf(sc[4 * j + 2] - nB),
                                                      nB == -INFINITY ? 0.0f : __expf(sc[4 * j + 3] - nB));
            sA += __low2float(pa) + __high2float(pa);   /* the sums add the BF16 values the MMAs use */
            sB += __low2float(pb) + __high2float(pb);
            *(__nv_bfloat162 *)(Ps + wm_off(hA, col >> 3) + 2 * (col & 7)) = pa;
            *(__nv_bfloat162 *)(Ps + wm_off(hB, col >> 3) + 2 * (col & 7)) = pb;
        }
        lA = lA * cA + sA;
        lB = lB * cB + sB;
        mA = nA;
        mB = nB;
#pragma unroll
        for (int j = 0; j < 32; j++) {
            o[4 * j] *= cA; o[4 * j + 1] *= cA;
            o[4 * j + 2] *= cB; o[4 * j + 3] *= cB;
        }
        wg_fence_smem();   /* P's stores visible to the MMAs */
        __syncthreads();   /* all of P written */
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < WM_TILE / 16; kk++)
            wm_mma_values(o, wg_desc(Ps + 32 * kk), wm_desc_mn(Kt + kk * 16 * 128 + wg * 4 * WM_CHUNK_B), 1);
        wg_commit();
        wg_wait0();
    }

    wm_store_out(p, o, base_o, wg, t, hA, mA, mB, lA, lB, red_sum);   /* both warpgroups hold the same running max */
}

/* ---- v2: FlashMLA's schedule (DSINFER_CUDA_MLA_WG=2; the TMA form only) ------------------------------------------
 * Why: v1's tile runs its phases in series and is bound by shared memory (KERNELS.md, fourteenth session): both
 * warpgroups read all of Q for the scores of their 32 rows (m64n32k16: 3 KB a 65 KFLOP step), and the softmax of a
 * tile waits for both halves of S.
 * Here warpgroup w owns the tiles k with k % 2 == w (ring slot w) and computes their whole S (m64n64k16: 4 KB a 131
 * KFLOP step, Q read once a tile), its softmax and P. O's columns stay split: warpgroup w holds O[64 heads][256 w ..
 * 256 w + 255] and adds every tile in order, its own tiles' P from registers (the S accumulator's layout is wgmma's
 * A fragment), the other's P from shared memory. Shared memory: Q (72 KB), one P buffer (8 KB: each P is read once, by
 * the other warpgroup, which waits for that read before its own softmax writes the next), two tiles (144 KB).
 * Per own tile k, warpgroup w: add the other's tile k - 1 first (wait ready[1 - w], rescale O by its factor, O +=
 * P_{k-1} V_{k-1}), so its slot is released early; wait for tile k (full[w]) and issue S_k; once the other's P V is
 * done, arrive on empty[1 - w]; once S_k is done: the running max from tile k - 1, P_k (registers and the buffer),
 * its row sums, publish (m_k, c_k) and arrive on ready[w]; O *= c_k, O += P_k V_k; arrive on empty[w], and once
 * empty[w] completes (the other warpgroup's arrival after its use of tile k) the warpgroup's first thread copies tile
 * k + 2 into slot w. The softmax runs in one warp a sub-partition while the other warpgroup waits for it, so it is
 * written for instruction-level parallelism (KERNELS.md, fifteenth session: 2,100 -> 690 cycles a tile). The
 * arithmetic is v1's up to roundings: P = exp2(s * scale * log2 e - m * log2 e), the row sums over the fp32 P (v1:
 * __expf and the BF16 P); O in the same tile order. */
#define W2_Q_B WM_TILE_B   /* Q, all 576 columns */
#define W2_SMEM (W2_Q_B + WM_CHUNK_B + 2 * WM_TILE_B + 6 * WM_HEADS * sizeof(float) + 6 * sizeof(uint64_t) + 1024)
static_assert(W2_SMEM <= 227 * 1024, "mla_decode_wg2_kernel: Q, one P buffer and two tiles must fit");

/* rows nc .. 63 of the tile Kt set to zero by the 128 threads of one warpgroup (x: the thread's index in it) */
__device__ __forceinline__ void w2_zero_tail(unsigned char *Kt, int nc, int x) {
    for (x += nc * 8 * WM_CHUNKS; x < WM_TILE * 8 * WM_CHUNKS; x += 128) {
        int row = x / (8 * WM_CHUNKS), piece = x % (8 * WM_CHUNKS);
        *(uint4 *)(Kt + wm_off(row, piece)) = make_uint4(0, 0, 0, 0);
    }
}

__device__ __forceinline__ void w2_bar_wg(int w) { asm volatile("bar.sync %0, 128;\n" ::"r"(1 + w) : "memory"); }

__device__ __forceinline__ uint32_t w2_pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}

/* one block's state in v2: shared-memory pointers, this thread's place and the running softmax of its two heads */
/* W2_PROF (a diagnostic build, -DW2_PROF): block 0's first thread of each warpgroup stamps clock64() at the phases of
 * its first W2_PROF_STEPS steps and prints them at the end (bench --mla; dev/cuda/KERNELS.md, fifteenth session) */
#ifdef W2_PROF
#define W2_PROF_STEPS 40
__device__ long long w2_prof_g[2][W2_PROF_STEPS * 10 + 1];   /* [warpgroup][step * 10 + stamp]; [.][last]: the start */
#define W2_T(i) do { if (blockIdx.x == 0 && (threadIdx.x & 127) == 0 && s.prof_n < W2_PROF_STEPS) w2_prof_g[s.w][s.prof_n * 10 + (i)] = clock64(); } while (0)
#define W2_NEXT() do { s.prof_n++; } while (0)
#else
#define W2_T(i) do { } while (0)
#define W2_NEXT() do { } while (0)
#endif

struct w2_state {
    unsigned char *Qs;   /* the shared-memory base: Q, then P (2 x 8 KB), the ring's two tiles, m_t, c_t, barriers */
    int w, t, hA, c_begin, c_end, nt, br;   /* hA: the first of this thread's two heads (hA, hA + 8); br: TMA box rows */
    int lane, wq;                           /* lane, and the warp's index in its warpgroup */
    float mA, mB, lA, lB;                   /* running max after the last tile added; this warpgroup's row sums */
#ifdef W2_PROF
    int prof_n;
#endif
};
/* the layout of w2_state's shared memory (constant offsets from Qs, so one register holds them all) */
__device__ __forceinline__ unsigned char *w2_P(const w2_state &s) { return s.Qs + W2_Q_B; }
__device__ __forceinline__ unsigned char *w2_K(const w2_state &s) { return s.Qs + W2_Q_B + WM_CHUNK_B; }
/* [2 tile parities][64 heads]: m_k, then c_k = exp(m_{k-1} - m_k) */
__device__ __forceinline__ float *w2_m(const w2_state &s) { return (float *)(w2_K(s) + 2 * WM_TILE_B); }
__device__ __forceinline__ float *w2_c(const w2_state &s) { return w2_m(s) + 2 * WM_HEADS; }
__device__ __forceinline__ float *w2_red(const w2_state &s) { return w2_c(s) + 2 * WM_HEADS; }   /* [2][64] */
/* barriers [2] each, by ring slot (= owning warpgroup): full (the tile landed), ready (its P published), empty */
__device__ __forceinline__ uint64_t *w2_full(const w2_state &s) { return (uint64_t *)(w2_red(s) + 2 * WM_HEADS); }
__device__ __forceinline__ uint64_t *w2_ready(const w2_state &s) { return w2_full(s) + 2; }
__device__ __forceinline__ uint64_t *w2_empty(const w2_state &s) { return w2_full(s) + 4; }

/* O *= (cA, cB), skipped when every thread of the warp has factor 1 (the running max did not move: the same bits) */
__device__ __forceinline__ void w2_rescale(float (&o)[128], float cA, float cB) {
    if (__all_sync(0xffffffffu, cA == 1.0f && cB == 1.0f)) return;
#pragma unroll
    for (int j = 0; j < 32; j++) {
        o[4 * j] *= cA; o[4 * j + 1] *= cA;
        o[4 * j + 2] *= cB; o[4 * j + 3] *= cB;
    }
}

/* O *= the factor of tile k (published by its owner), and the running max and sums follow it */
__device__ __forceinline__ void w2_take_factor(w2_state &s, float (&o)[128], int k) {
    int par = k & 1;
    float cA = w2_c(s)[par * WM_HEADS + s.hA], cB = w2_c(s)[par * WM_HEADS + (s.hA + 8)];
    s.mA = w2_m(s)[par * WM_HEADS + s.hA];
    s.mB = w2_m(s)[par * WM_HEADS + (s.hA + 8)];
    s.lA *= cA;
    s.lB *= cB;
    w2_rescale(o, cA, cB);
}

/* One step of warpgroup s.w: OWN, its tile k (k % 2 == w); OTH, the other warpgroup's tile k - 1. Straight-line
 * code for each form (a template, not branches), so that ptxas sees where each wgmma group starts and ends and does
 * not serialize them. Every form ends with no MMA of this warpgroup in flight. */
/* the cache rows of the boxes of context rows base .. base + nc - 1 (box b: rows[b]; br rows a box, br >= 8) */
__device__ __forceinline__ void w2_rows(int (&rows)[WM_TILE / 8], const int32_t *pt, int ps, int br, int base, int nc) {
    int nbox = (nc + br - 1) / br;
#pragma unroll
    for (int b = 0; b < WM_TILE / 8; b++) {
        int pos = base + b * br;
        rows[b] = b < nbox ? __ldg(pt + pos / ps) * ps + pos % ps : 0;
    }
}
/* wm_issue_tma with the rows looked up (one thread) */
__device__ __forceinline__ void w2_issue_rows(const CUtensorMap *km, const int (&rows)[WM_TILE / 8], int br, int nc,
                                              unsigned char *Kt, uint64_t *bar) {
    int nbox = (nc + br - 1) / br;
    mbar_expect_tx(bar, nbox * br * 128 * WM_CHUNKS);
#pragma unroll
    for (int b = 0; b < WM_TILE / 8; b++)
        if (b < nbox)
#pragma unroll
            for (int c = 0; c < WM_CHUNKS; c++) tma_load(Kt + c * WM_CHUNK_B + b * br * 128, km, c * 128, rows[b], bar);
}

__device__ __forceinline__ float w2_ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
/* max / sum of v[4j + e0], v[4j + e0 + 1] over j < 8 (16 values) as trees */
__device__ __forceinline__ float w2_max8(const float (&v)[32], int e0) {
    float a[8];
#pragma unroll
    for (int j = 0; j < 8; j++) a[j] = fmaxf(v[4 * j + e0], v[4 * j + e0 + 1]);
    return fmaxf(fmaxf(fmaxf(a[0], a[1]), fmaxf(a[2], a[3])), fmaxf(fmaxf(a[4], a[5]), fmaxf(a[6], a[7])));
}
__device__ __forceinline__ float w2_sum8(const float (&v)[32], int e0) {
    float a[8];
#pragma unroll
    for (int j = 0; j < 8; j++) a[j] = v[4 * j + e0] + v[4 * j + e0 + 1];
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}
/* four 8 x 8 BF16 matrices to shared memory (this lane's row address; r[i]: its element pair of matrix i) */
__device__ __forceinline__ void w2_stmatrix4(void *row, const uint32_t (&r)[4]) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(cu_smem_addr(row)), "r"(r[0]),
                 "r"(r[1]), "r"(r[2]), "r"(r[3])
                 : "memory");
}

template <bool OWN, bool OTH>
__device__ __forceinline__ void w2_step(w2_state &s, float (&o)[128], const CUtensorMap *km,
                                        const int32_t *pt, const fa_params &p, int k) {
    const int w = s.w, ph = (k >> 1) & 1;   /* own tile k is the (k >> 1)-th use of slot w */
    unsigned char *Kw = w2_K(s) + w * WM_TILE_B, *Ko = w2_K(s) + (w ^ 1) * WM_TILE_B;
    const int base = s.c_begin + k * WM_TILE, nc = OWN ? min(WM_TILE, s.c_end - base) : 0;
    W2_T(0);
    if (OTH) {   /* the other's tile k - 1 first, so that its slot is released early (the other refills it) */
        mbar_wait(&w2_ready(s)[w ^ 1], ((k - 1) >> 1) & 1);   /* tile k - 1 is the other's ((k - 1) >> 1)-th */
    W2_T(1);
        w2_take_factor(s, o, k - 1);   /* no MMA in flight touches O now */
        wg_fence();
        /* O[:, 256 w ..] += P_{k-1} V_{k-1}, P from the other's shared-memory buffer */
        uint64_t da = wg_desc(w2_P(s)), db = wm_desc_mn(Ko + w * 4 * WM_CHUNK_B);
#pragma unroll
        for (int kk = 0; kk < WM_TILE / 16; kk++) wm_mma_values(o, da + ((32 * kk) >> 4), db + ((kk * 16 * 128) >> 4), 1);
        wg_commit();
        W2_T(2);
    }
    float sacc[32];
    if (OWN) {
        mbar_wait(&w2_full(s)[w], ph);
    W2_T(3);
        if (nc < WM_TILE) {   /* the last tile: rows past the context to zero (their pages may hold NaN) */
            w2_zero_tail(Kw, nc, threadIdx.x & 127);
            wg_fence_smem();
            w2_bar_wg(w);
        }
        wg_fence();
        /* S_k = Q K_k^T over 576 columns, both from shared memory (descriptors advanced below by their start-address
         * field: offset / 16, no carry out of its 14 bits, shared memory being < 256 KB) */
#pragma unroll
        for (int kk = 0; kk < TC_W / 16; kk++) {
            unsigned off = (kk >> 2) * WM_CHUNK_B + (kk & 3) * 32;
            w2_mma_s(sacc, wg_desc(s.Qs + off), wg_desc(Kw + off), kk);
        }
        wg_commit();
        W2_T(4);
    }
    if (OTH) {
        if (OWN) wg_wait1(); else wg_wait0();   /* the other's P V done (S_k may still run) */
    W2_T(5);
        mbar_arrive(&w2_empty(s)[w ^ 1]);   /* this warpgroup no longer reads tile k - 1 */
    }
    if (!OWN) {
        W2_NEXT();
        return;
    }
    wg_wait0();   /* S_k done */
    W2_T(6);
    /* The softmax runs in one warp an SM sub-partition (the other warpgroup waits for its result), so it is written
     * for instruction-level parallelism: maxima and sums as trees, exp2 with the scale folded into one FFMA, P to
     * shared memory by stmatrix. sacc[4j + e]: head hA (e < 2) or hB, tile row 8j + 2t + (e & 1). Every own tile
     * has a context row (nc >= 1), so every head's new max is finite. */
    if (nc < WM_TILE) {   /* the last tile: rows past the context masked */
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                if (8 * j + 2 * s.t + (e & 1) >= nc) sacc[4 * j + e] = -INFINITY;
    }
    float xA = w2_max8(sacc, 0), xB = w2_max8(sacc, 2);   /* the raw scores' row maxima */
    xA = fmaxf(xA, __shfl_xor_sync(0xffffffffu, xA, 1));
    xA = fmaxf(xA, __shfl_xor_sync(0xffffffffu, xA, 2));
    xB = fmaxf(xB, __shfl_xor_sync(0xffffffffu, xB, 1));
    xB = fmaxf(xB, __shfl_xor_sync(0xffffffffu, xB, 2));
    /* the running max in scaled units (scale > 0: max(s) * scale is the max of the scaled scores, rounded alike) */
    float nA = fmaxf(s.mA, xA * p.scale), nB = fmaxf(s.mB, xB * p.scale);
    const float L2E = 1.4426950408889634f, sl = p.scale * L2E, oA = -nA * L2E, oB = -nB * L2E;
    float cA = w2_ex2((s.mA - nA) * L2E), cB = w2_ex2((s.mB - nB) * L2E);   /* 0 while the old max is -inf */
#pragma unroll
    for (int j = 0; j < 8; j++) {   /* P = exp(s * scale - n) in place */
        sacc[4 * j] = w2_ex2(fmaf(sacc[4 * j], sl, oA));
        sacc[4 * j + 1] = w2_ex2(fmaf(sacc[4 * j + 1], sl, oA));
        sacc[4 * j + 2] = w2_ex2(fmaf(sacc[4 * j + 2], sl, oB));
        sacc[4 * j + 3] = w2_ex2(fmaf(sacc[4 * j + 3], sl, oB));
    }
    float sA = w2_sum8(sacc, 0), sB = w2_sum8(sacc, 2);   /* this thread's part of the row sums (fp32 P) */
    uint32_t pr[4][4];   /* P_k as A fragments: k-step kk (tile rows 16 kk ..): rows hA, hB at 2t, then at 8 + 2t */
#pragma unroll
    for (int j = 0; j < 8; j++) {
        pr[j >> 1][(j & 1) * 2] = w2_pack(sacc[4 * j], sacc[4 * j + 1]);
        pr[j >> 1][(j & 1) * 2 + 1] = w2_pack(sacc[4 * j + 2], sacc[4 * j + 3]);
    }
    /* P to shared memory for the other warpgroup: stmatrix x4 a k-step, the four 8 x 8 matrices being exactly the A
     * fragment's registers; lane l gives the address of row l % 8 of matrix l / 8 (heads + 8 for odd matrices,
     * columns + 8 for the last two) */
    {
        int mat = s.lane >> 3, head = 16 * s.wq + (s.lane & 7) + 8 * (mat & 1);
        unsigned char *Pw = w2_P(s);
#pragma unroll
        for (int kk = 0; kk < 4; kk++) w2_stmatrix4(Pw + wm_off(head, 2 * kk + (mat >> 1)), pr[kk]);
    }
    if (s.t == 0) {
        w2_m(s)[(k & 1) * WM_HEADS + s.hA] = nA;
        w2_m(s)[(k & 1) * WM_HEADS + (s.hA + 8)] = nB;
        w2_c(s)[(k & 1) * WM_HEADS + s.hA] = cA;
        w2_c(s)[(k & 1) * WM_HEADS + (s.hA + 8)] = cB;
    }
    s.lA = s.lA * cA + sA;
    s.lB = s.lB * cB + sB;
    s.mA = nA;
    s.mB = nB;
    wg_fence_smem();   /* P's stores visible to the other warpgroup's MMAs */
    mbar_arrive(&w2_ready(s)[w]);
    W2_T(7);
    w2_rescale(o, cA, cB);
    wg_fence();
    uint64_t dv = wm_desc_mn(Kw + w * 4 * WM_CHUNK_B);
#pragma unroll
    for (int kk = 0; kk < WM_TILE / 16; kk++) w2_mma_o_rs(o, pr[kk], dv + ((kk * 16 * 128) >> 4), 1);
    wg_commit();
    wg_wait0();
    W2_T(8);
    mbar_arrive(&w2_empty(s)[w]);
    if (k + 2 < s.nt) {   /* slot w is free once both warpgroups are done with tile k: tile k + 2 into it */
        int nb = base + 2 * WM_TILE, nn = min(WM_TILE, s.c_end - nb), rows[WM_TILE / 8];
        w2_rows(rows, pt, p.page_size, s.br, nb, nn);   /* the page lookups in flight during the wait */
        mbar_wait(&w2_empty(s)[w], ph);   /* the whole warp waits (a one-thread wait here made ptxas serialize the MMAs) */
        W2_T(9);
        if ((threadIdx.x & 127) == 0) w2_issue_rows(km, rows, s.br, nn, Kw, &w2_full(s)[w]);
    }
    W2_NEXT();
}

__global__ void __launch_bounds__(WM_THREADS, 1) mla_decode_wg2_kernel(const __grid_constant__ CUtensorMap km, int br,
                                                                        fa_params p) {
    extern __shared__ unsigned char wm_raw[];
    unsigned char *Qs = (unsigned char *)(((uintptr_t)wm_raw + 1023) & ~(uintptr_t)1023);
    w2_state s;
    s.Qs = Qs;
    unsigned char *Ks = w2_K(s);
    float *red_sum = w2_red(s);
    uint64_t *full = w2_full(s), *ready = w2_ready(s), *empty = w2_empty(s);
    cu_pdl_trigger();
    cu_pdl_wait();
    if (threadIdx.x == 0) {
        for (int s = 0; s < 2; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&ready[s], 128);
            mbar_init(&empty[s], WM_THREADS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    const mla_work wk = mla_block_work(p, WM_HEADS, WM_TILE);
    const int h0 = wk.h0, i = wk.i, m = wk.m, c_begin = wk.c_begin, c_end = wk.c_end;
    const int32_t *pt = wk.pt;
    const size_t base_o = wk.base_o;
    /* w through a shuffle: the compiler then knows it is the same in a warp, so the MMAs under `own` / `oth` below
     * are not in a divergent path (which would make ptxas serialize every wgmma) */
    int warp = threadIdx.x >> 5, w = __shfl_sync(0xffffffffu, warp >> 2, 0), lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int hA = 16 * (warp & 3) + g;   /* this thread's two heads (rows of every accumulator): hA, hA + 8 */
    if (c_begin >= c_end) {
        mla_empty_split(p, base_o, WM_HEADS);
        return;
    }
    const int nt = (c_end - c_begin + WM_TILE - 1) / WM_TILE;
    if (threadIdx.x == 0)
        for (int s = 0; s < 2 && s < nt; s++) {
            int b0 = c_begin + s * WM_TILE;
            wm_issue_tma(&km, pt, p.page_size, br, b0, min(WM_TILE, c_end - b0), Ks + s * WM_TILE_B, &full[s]);
        }
    wm_load_q(p, Qs, i, m, h0);
    wg_fence_smem();   /* Q's stores visible to the MMAs */
    __syncthreads();

    s.lane = lane; s.wq = warp & 3;
    s.w = w; s.t = t; s.hA = hA; s.c_begin = c_begin; s.c_end = c_end; s.nt = nt; s.br = br;
    s.mA = s.mB = -INFINITY;
    s.lA = s.lB = 0.0f;
#ifdef W2_PROF
    s.prof_n = 0;
    if (blockIdx.x == 0 && (threadIdx.x & 127) == 0) {
        for (int q = 0; q < W2_PROF_STEPS * 10; q++) w2_prof_g[w][q] = 0;
        w2_prof_g[w][W2_PROF_STEPS * 10] = clock64();
    }
#endif
    float o[128];
#pragma unroll
    for (int j = 0; j < 128; j++) o[j] = 0.0f;
    /* warpgroup 0: tiles 0, 2, ...; 1: tiles 1, 3, ...; each step also adds the other's tile before its own */
    int k = w;
    if (w == 0) {
        w2_step<true, false>(s, o, &km, pt, p, 0);
        k = 2;
    }
    for (; k < nt; k += 2) w2_step<true, true>(s, o, &km, pt, p, k);
    if (k == nt) w2_step<false, true>(s, o, &km, pt, p, k);   /* the other's last tile */
    float mA = s.mA, mB = s.mB, lA = s.lA, lB = s.lB;

    wm_store_out(p, o, base_o, w, t, hA, mA, mB, lA, lB, red_sum);   /* both warpgroups end with the last tile's running max */
}

int cu_mla_wg_on(int kv_layout, int H) { return cu_mla_wg && kv_layout == CU_KV_BF16 && H >= WM_HEADS && H % WM_HEADS == 0; }

/* splits for T entries: one block an SM (the shared memory), one wave */
int cu_mla_wg_splits(int T, int H, int max_ctx, int n_sm) {
    int blocks = T * (H / WM_HEADS), S = blocks >= n_sm ? 1 : n_sm / blocks, max_tiles = (max_ctx + WM_TILE - 1) / WM_TILE;
    if (S > max_tiles) S = max_tiles;
    if (S > cu_mla_max_splits) S = cu_mla_max_splits;
    return S < 1 ? 1 : S;
}

/* the TMA form's box rows for page size ps (a box within a page, 8-row aligned in the tile: the swizzle's atom), 0
 * where the page size does not allow it */
static int wm_box_rows(int ps) {
    if (ps >= 8 && ps <= WM_TILE && ps % 8 == 0 && WM_TILE % ps == 0) return ps;
    if (ps > WM_TILE && ps % WM_TILE == 0) return WM_TILE;
    return 0;
}

void cu_mla_decode_wg(const fa_params *p, int T) {
    static int smem_set = 0;
    if (!smem_set) {
        CUDA_CHECK(cudaFuncSetAttribute(mla_decode_wg_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)WM_SMEM));
        CUDA_CHECK(cudaFuncSetAttribute(mla_decode_wg_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)WM_SMEM));
        CUDA_CHECK(cudaFuncSetAttribute(mla_decode_wg2_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)W2_SMEM));
        smem_set = 1;
    }
    unsigned grid = (unsigned)((size_t)T * p->n_splits * (p->H / WM_HEADS));
    CUtensorMap km;
    memset(&km, 0, sizeof km);
    int br = cu_mla_wg_tma && p->tb == 2 * TC_W ? wm_box_rows(p->page_size) : 0;
    /* rows: the map's extent is a bound, not the allocation (only the page table's rows are read) */
    if (br && cu_tma_map(&km, p->cache, 0x7fffffff, (int)p->tb, br)) {
        if (cu_mla_wg == 2) {
            cu_launch(mla_decode_wg2_kernel, grid, WM_THREADS, W2_SMEM, km, br, *p);
#ifdef W2_PROF
            static int calls = 0;
            if (++calls == 3) {   /* after the warm-up: block 0's stamps, cycles from each step's start */
                static long long t[2][W2_PROF_STEPS * 10 + 1];
                CUDA_CHECK(cudaMemcpyFromSymbol(t, w2_prof_g, sizeof t));
                const char *nm[10] = {"start", "ready", "oth", "full", "S", "oth_done", "S_done", "pub", "own_done", "empty"};
                for (int w = 0; w < 2; w++)
                    for (int q = 0; q < W2_PROF_STEPS && t[w][q * 10]; q++) {
                        fprintf(stderr, "w2prof wg %d step %2d %s %lld", w, q, nm[0], t[w][q * 10] - t[w][W2_PROF_STEPS * 10]);
                        for (int i = 1; i < 10; i++) fprintf(stderr, " %s %lld", nm[i], t[w][q * 10 + i] ? t[w][q * 10 + i] - t[w][q * 10] : -1);
                        fprintf(stderr, "\n");
                    }
            }
#endif
        }
        else cu_launch(mla_decode_wg_kernel<true>, grid, WM_THREADS, WM_SMEM, km, br, *p);
    } else
        cu_launch(mla_decode_wg_kernel<false>, grid, WM_THREADS, WM_SMEM, km, 0, *p);
    CUDA_LAUNCH_CHECK();
}
