/* W8A8 linear on Hopper's warpgroup MMAs (issues 8, 7; DSINFER_CUDA_FP8_OWN=2 with DSINFER_CUDA_FP8_GEMM=1).
 *
 * Y[m, n] = sum_b s_x[m, b] s_w[n / 128, b] sum_{k in block b} q_x[m, k] q_w[n, k]: the same block-scaled
 * product as cuBLASLt's path and the mma.sync kernel (cu_f8_linear), here with
 * wgmma.mma_async m64n128k32 e4m3 x e4m3 -> f32, which sm_90 runs natively (mma.sync's FP8 form is an sm_89
 * instruction that ptxas emulates with FP16 MMAs on sm_90; bench/RESULTS.md seventh session run 11).
 *
 * A block: WG warpgroups (128 threads each) x 64 activation rows, 128 weight rows (one scale block), a
 * K range of kc columns (split K below 2 waves of blocks; partials summed in z order by f8_reduce_kernel, or
 * by the tile's last split to finish: a ticket per tile, DSINFER_CUDA_F8_TICKETS, opt-in).
 * Stages of 128 columns (one scale block) go global -> shared by cp.async into a WG_ST-deep ring, in the
 * 128-byte swizzled K-major layout the MMA descriptors name; each stage is 4 MMAs of k32 into a fresh
 * accumulator (scale-d = 0 on the first), which is then promoted into the fp32 total with s_x * s_w (the
 * per-128 promotion of DeepSeek-V3's recipe: the tensor cores' FP8 accumulation is not full fp32).
 * Shared-memory layout of a stage (base 1024-byte aligned): A [64 WG rows][128 B], then B [128 rows][128 B];
 * 16-byte chunk c of row r sits at chunk c ^ (r % 8) (SWIZZLE_128B). Rows past M or N are zero-filled.
 *
 * Two kernels share the MMA and the promotion:
 *  - f8_wgmma_kernel (up to 64 rows, or DSINFER_CUDA_FP8_TMA=0): every thread loads by cp.async, one
 *    __syncthreads a stage;
 *  - f8_tma_kernel (more than 64 rows): warp-specialized as on Hopper's fast GEMMs: one thread of a producer
 *    warpgroup loads the stages by TMA (tensor maps with the same 128-byte swizzle; rows past M or N are
 *    filled with zeros by the copy engine) into a TM_ST-deep ring guarded by mbarriers (full: the bytes
 *    landed; empty: the 8 consumer warps are done with it); two consumer warpgroups take 64 rows each of a
 *    128 x 128 output tile. Tiles are ordered in groups of TM_GROUP_M row blocks so that the blocks running
 *    at once share weight tiles in L2 (a plain row-major order re-reads the whole weight per row block). */
#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_mma.h"
#include "backend/cuda/cuda_wgmma.h"
#include <cudaTypedefs.h>
#include <pthread.h>

#define WG_BN 128   /* weight rows a block (one row block of the weight's scales) */
#define WG_BK 128   /* columns a stage (one column block of both operands' scales) */
#define WG_ST 4     /* stages in the ring */

static size_t wg_smem_bytes(int wg) { return (size_t)WG_ST * (64 * wg + WG_BN) * WG_BK + 1024; }

/* d[64 x 128] (+)= a[64 x 32] b[128 x 32]^T, both e4m3 from shared memory; acc = 0 starts from zero.
 * d's layout (per warp w of the warpgroup, lane l): d[4j + h] is row 16w + l/4 + 8 (h / 2), column
 * 8j + 2 (l % 4) + h % 2. */
__device__ __forceinline__ void wg_mma_n128(float (&d)[64], uint64_t da, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(acc));
}

/* d [64 x 192] (+)= A [64 x 32] B [192 x 32]^T, e4m3 both from shared memory (descriptors da, db); acc = 0: d = A B^T.
 * d's layout as wg_mma_n128's with 24 column groups: d[4j + h] is row 16w + l/4 + 8 (h / 2), column 8j + 2 (l % 4) + h % 2 */
__device__ __forceinline__ void wg_mma_n192(float (&d)[96], uint64_t da, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, %96, %97, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
                 : "l"(da), "l"(db), "r"(acc));
}

/* tot += acc times the row scales: s0 for row r0 (acc[4j], acc[4j + 1]), s1 for r1 = r0 + 8 ([4j + 2], [4j + 3]) */
__device__ __forceinline__ void wg_promote(float (&tot)[64], const float (&acc)[64], float s0, float s1) {
#pragma unroll
    for (int q = 0; q < 64; q += 4) {
        tot[q] += acc[q] * s0;
        tot[q + 1] += acc[q + 1] * s0;
        tot[q + 2] += acc[q + 2] * s1;
        tot[q + 3] += acc[q + 3] * s1;
    }
}

/* one output value, and a pair of adjacent ones as one store, in the output's element type (fp32, or BF16 rounded to
 * nearest even) */
__device__ __forceinline__ void wg_put(float *o, float v) { *o = v; }
__device__ __forceinline__ void wg_put(__nv_bfloat16 *o, float v) { *o = __float2bfloat16(v); }
__device__ __forceinline__ void wg_put2(float *o, float a, float b) { *(float2 *)o = make_float2(a, b); }
__device__ __forceinline__ void wg_put2(__nv_bfloat16 *o, float a, float b) { *(__nv_bfloat162 *)o = __floats2bfloat162_rn(a, b); }

/* this thread's sums of a 64 x 8J tile (J column groups: 16 for the 128-wide tiles): rows
 * r0, r1 (stored below mend), weight rows n = n0 + 8j + 2 (lane % 4) and n + 1 (stored below nvalid) at
 * out[r ldo + n - n0] (out: the tile's first output column; T float, or __nv_bfloat16 for OB 1's BF16 rows), a pair as
 * one store where both are valid and the place is aligned for it */
template <int J = 16, typename T = float>
__device__ __forceinline__ void wg_store(const float (&tot)[4 * J], T *out, size_t ldo, int r0, int r1, int mend, int n0,
                                         int nvalid, int lane) {
#pragma unroll
    for (int j = 0; j < J; j++) {
        int n = n0 + 8 * j + 2 * (lane & 3);
        for (int h = 0; h < 2; h++) {
            int r = h ? r1 : r0;
            if (r >= mend) continue;
            T *o = out + (size_t)r * ldo + (n - n0);
            if (n + 1 < nvalid && ((uintptr_t)o & (2 * sizeof(T) - 1)) == 0) wg_put2(o, tot[4 * j + 2 * h], tot[4 * j + 2 * h + 1]);
            else {
                if (n < nvalid) wg_put(o, tot[4 * j + 2 * h]);
                if (n + 1 < nvalid) wg_put(o + 1, tot[4 * j + 2 * h + 1]);
            }
        }
    }
}

/* OB 2's epilogue: a consumer warp's 16 rows x 128 columns of the tile's sums (rows row0 .. row0 + 15; this thread's
 * rl0 = lane / 4 and rl0 + 8, wg_store's columns) rounded to BF16 into the warp's own staging rows stg (16 x OB_ROW bytes:
 * the 16-byte pad puts a quad row's 4-byte writes on 4 banks apart from the other rows', all 32 banks a store), then one
 * 256-byte bulk copy a row to out (lane l < 16 copies row row0 + l, if below mend: rows past an expert's end are not
 * written). The copies run on while the warp goes on to its next tile; before the warp writes stg again each copying lane
 * waits until its copies have read it. Where N % 128 == 0 (the whole tile's columns valid). Why: the direct stores
 * (wg_store's BF16 form) make every warp store 8 rows x 16 bytes, 8 L2 requests for 256 bytes, and the consumers spend the
 * store phase issuing them while the tensor cores idle (RESULTS fortieth session). */
#define OB_ROW (WG_BN * 2 + 16)
#define OB_EPI (8 * 16 * OB_ROW)   /* the two consumer warpgroups' 8 warps' staging rows */
__device__ __forceinline__ void tm_store_bf16_bulk(const float (&tot)[64], unsigned char *stg, __nv_bfloat16 *out, size_t ldo,
                                                   int row0, int mend, int lane) {
    if (lane < 16) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
    __syncwarp();
    const int rl0 = lane >> 2, c2 = 2 * (lane & 3);
#pragma unroll
    for (int j = 0; j < 16; j++)
#pragma unroll
        for (int h = 0; h < 2; h++)
            *(__nv_bfloat162 *)(stg + (rl0 + 8 * h) * OB_ROW + (8 * j + c2) * 2) =
                __floats2bfloat162_rn(tot[4 * j + 2 * h], tot[4 * j + 2 * h + 1]);
    wg_fence_smem();   /* the writes made visible to the bulk copies (the async proxy) */
    __syncwarp();
    if (lane < 16 && row0 + lane < mend) {
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(out + (size_t)(row0 + lane) * ldo),
                     "r"(cu_smem_addr(stg + lane * OB_ROW)), "n"(WG_BN * 2)
                     : "memory");
        asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
    }
}

/* the ring's barriers (thread 0): full[s] completes on `producers` arrivals (1; 2 with f8_tma_kernel's SS: the expect_tx
 * and the scales' slot) plus the stage's bytes, empty[s] on `consumers` arrivals; made visible before the block's barrier */
__device__ __forceinline__ void tm_ring_init(uint64_t *full, uint64_t *empty, int nst, int consumers, int producers = 1) {
    if (threadIdx.x == 0) {
        for (int s = 0; s < nst; s++) {
            mbar_init(&full[s], producers);
            mbar_init(&empty[s], consumers);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
}

/* tot = the sum in z order of the ks partials at this thread's positions of the tile (wg_store's, in the partial
 * buffers part + z M N, ldo N): the same additions in the same order as f8_reduce_kernel. All 64 values of a split
 * are loaded before any is added (a thread's loads in flight at once; rows past mend and columns past nvalid read
 * row 0 / column n0 of the tile instead, and are not stored): a sum that added as it loaded ran one L2 round trip
 * per value (256 x 7168 at 64 rows, 14 splits: 113 us against 12 us, RESULTS eleventh session run 3). */
__device__ __forceinline__ void wg_sum_partials(float (&tot)[64], const float *part, size_t MN, int ks, size_t ldo, int r0,
                                                int r1, int mend, int n0, int nvalid, int lane) {
    size_t off[32];
    unsigned pair = 0;   /* bit i: position i's second column exists (else its first is read twice) */
#pragma unroll
    for (int j = 0; j < 16; j++) {
        int n = n0 + 8 * j + 2 * (lane & 3);
        if (n + 1 < nvalid) pair |= 3u << (2 * j);
        n = n < nvalid ? n : n0;
#pragma unroll
        for (int h = 0; h < 2; h++) off[2 * j + h] = (size_t)((h ? r1 : r0) < mend ? (h ? r1 : r0) : 0) * ldo + n;
    }
    for (int z = 0; z < ks; z++) {
        const float *pz = part + (size_t)z * MN;
        float2 v[32];
#pragma unroll
        for (int i = 0; i < 32; i++) v[i] = make_float2(__ldcg(pz + off[i]), __ldcg(pz + off[i] + ((pair >> i) & 1)));
#pragma unroll
        for (int i = 0; i < 32; i++) {
            int q = 4 * (i >> 1) + 2 * (i & 1);
            tot[q] = z ? tot[q] + v[i].x : v[i].x;
            tot[q + 1] = z ? tot[q + 1] + v[i].y : v[i].y;
        }
    }
}

/* one stage: columns [128 kb, 128 kb + 128) of activation rows m0 .. m0 + 64 WG - 1 and weight rows
 * n0 .. n0 + 127, 16 bytes a cp.async; PART 0: both, 1: the activations' rows only, 2: the weights' only */
template <int WG, int PART = 0>
__device__ __forceinline__ void wg_load_stage(unsigned char *st, const unsigned char *xq, const unsigned char *w, int m0,
                                              int n0, int M, int N, int K, int kb) {
    const int BM = 64 * WG;
    size_t col = (size_t)kb * WG_BK;
    for (int x = threadIdx.x + (PART == 2 ? BM * 8 : 0); x < (PART == 1 ? BM : BM + WG_BN) * 8; x += WG * 128) {
        int row = x >> 3, ch = x & 7, a = row < BM, r = a ? row : row - BM, g = a ? m0 + r : n0 + r;
        int ok = g < (a ? M : N);
        const unsigned char *src = (a ? xq : w) + (ok ? (size_t)g * K + col + 16 * ch : 0);
        unsigned char *dst = st + (a ? 0 : BM * WG_BK) + r * WG_BK + ((ch ^ (r & 7)) << 4);
        cu_cp_async16(dst, src, ok ? 16 : 0);
    }
}

/* One weight of f8_wgmma_kernel: w [N, K] e4m3 with scales ws [ceil(N/128)][ws_cols]; out: the result [M, N], or
 * with split K its partials (out + z M N); fin: the result when the kernel sums the partials (tickets) */
typedef struct {
    const unsigned char *w;
    const float *ws;
    int ws_cols, N;
    float *out, *fin;
} f8_wt;

/* t.out (+ blockIdx.z * M * N when split) [M, N] fp32 = the block-scaled product over columns
 * [blockIdx.z * kc, + kc) (kc a multiple of 128), for t = wa in the first nb_a column blocks and t = wb in the
 * rest (two weights of one input in one launch: horizontal fusion; one weight: wb = wa, nb_a = gridDim.x).
 * xq [M, K] e4m3, xs [M][K/128]. Grid (column blocks of both, ceil(M/(64 WG)), splits), WG * 128 threads.
 * tickets (split K only; NULL: f8_reduce_kernel sums): t.out is then the partials' buffer and t.fin [M, N] the
 * result: a split stores its partial, takes the tile's ticket (tickets[y gridDim.x + x], zero before the
 * launch); the last of the tile's splits puts it back to zero and writes the sum in z order to t.fin. */
template <int WG>
__global__ void __launch_bounds__(WG * 128) f8_wgmma_kernel(f8_wt wa, f8_wt wb, int nb_a, const unsigned char *xq,
                                                          const float *xs, int M, int K, int kc, int *tickets,
                                                          int preload) {
    extern __shared__ unsigned char wg_raw[];
    unsigned char *sm = (unsigned char *)(((uintptr_t)wg_raw + 1023) & ~(uintptr_t)1023);
    const int BM = 64 * WG, STAGE = (BM + WG_BN) * WG_BK, LK = K / WG_BK;
    const bool second = (int)blockIdx.x >= nb_a;
    const unsigned char *w = second ? wb.w : wa.w;   /* field by field: no copy of a parameter to local memory */
    const float *ws = second ? wb.ws : wa.ws;
    const int ws_cols = second ? wb.ws_cols : wa.ws_cols, N = second ? wb.N : wa.N;
    float *out = second ? wb.out : wa.out, *fin = second ? wb.fin : wa.fin;
    int n0 = ((int)blockIdx.x - (second ? nb_a : 0)) * WG_BN, m0 = blockIdx.y * BM, kb0 = blockIdx.z * (kc / WG_BK);
    int nkb = (K - blockIdx.z * kc < kc ? K - blockIdx.z * kc : kc) / WG_BK;
    int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    int r0 = m0 + 64 * wg + 16 * warp + (lane >> 2), r1 = r0 + 8;   /* this thread's two output rows */
    const float *sw = ws + (size_t)(n0 / WG_BN) * ws_cols;
    float acc[64], tot[64];
    for (int i = 0; i < 64; i++) acc[i] = tot[i] = 0.0f;
    /* preload: all WG_ST stages in flight before the first MMA (a split of at most WG_ST stages waits one memory
     * round trip instead of two); else WG_ST - 1, the ring's last slot filled after the first stage's MMAs. Either
     * way stage j is cp.async group j: with preload iteration 0 (whose stage WG_ST - 1 is already loading) commits
     * no group, so it alone may leave WG_ST - 1 groups pending, every other iteration WG_ST - 2.
     * PDL (CU_F8_PDL): the weights are no kernel's output, so the first stages' weight rows are requested before
     * cu_pdl_wait, while the kernel before (the activations' quantizer) still runs; the activations after it.
     * They join group 0, so stage j's group j still holds (or follows) everything stage j reads. */
    const int npre = preload ? WG_ST : WG_ST - 1;
    cu_pdl_trigger();
    for (int s = 0; s < npre; s++)
        if (s < nkb) wg_load_stage<WG, 2>(sm + s * STAGE, xq, w, m0, n0, M, N, K, kb0 + s);
    cu_pdl_wait();
    for (int s = 0; s < npre; s++) {
        if (s < nkb) wg_load_stage<WG, 1>(sm + s * STAGE, xq, w, m0, n0, M, N, K, kb0 + s);
        cu_cp_async_commit();
    }
    for (int i = 0; i < nkb; i++) {
        int kb = kb0 + i;
        float s0 = r0 < M ? xs[(size_t)r0 * LK + kb] : 0.0f, s1 = r1 < M ? xs[(size_t)r1 * LK + kb] : 0.0f;
        float swb = sw[kb];
        const bool first_pre = preload && i == 0;
        if (first_pre) cu_cp_async_wait<WG_ST - 1>();   /* stage i has landed (this thread's part) */
        else cu_cp_async_wait<WG_ST - 2>();
        wg_fence_smem();
        __syncthreads();                 /* ... and every thread's; stage i - 1 is read by nobody now */
        const unsigned char *a = sm + (i % WG_ST) * STAGE + wg * 64 * WG_BK, *b = sm + (i % WG_ST) * STAGE + BM * WG_BK;
        wg_fence();
#pragma unroll
        for (int j = 0; j < 4; j++) wg_mma_n128(acc, wg_desc(a + 32 * j), wg_desc(b + 32 * j), j);
        wg_commit();
        int nx = i + WG_ST - 1;   /* into the stage the previous MMAs read */
        if (!first_pre) {
            if (nx < nkb) wg_load_stage<WG>(sm + (nx % WG_ST) * STAGE, xq, w, m0, n0, M, N, K, kb0 + nx);
            cu_cp_async_commit();
        }
        wg_wait0();
        wg_promote(tot, acc, s0 * swb, s1 * swb);
    }
    cu_cp_async_wait<0>();
    wg_store(tot, out + (size_t)blockIdx.z * M * N + n0, (size_t)N, r0, r1, M, n0, N, lane);
    if (!tickets) return;
    __shared__ int last;
    __threadfence();   /* this split's partial is visible device-wide before its ticket */
    __syncthreads();
    if (threadIdx.x == 0) {
        int *t = tickets + blockIdx.y * gridDim.x + blockIdx.x;
        last = atomicAdd(t, 1) == (int)gridDim.z - 1;
        if (last) *t = 0;   /* every split has taken its ticket: ready for the next launch */
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    wg_sum_partials(tot, out, (size_t)M * N, gridDim.z, (size_t)N, r0, r1, M, n0, N, lane);
    wg_store(tot, fin + n0, (size_t)N, r0, r1, M, n0, N, lane);
}

/* ---- f8_wgmma_kernel's one-warpgroup form with the stages loaded by TMA (DSINFER_CUDA_F8_TMA1) ----
 * ncu of f8_wgmma_kernel<1> at 64 rows (RESULTS sixteenth session): ~2,900 instructions a warp, issued at 4.7 cycles
 * each with 1.8 warps a scheduler: the time goes to instructions, not to waiting on memory, and ~60% of them are the
 * stages' cp.async (12 a thread a stage, each with its swizzled address). Here thread 0 issues a stage as two TMA
 * boxes (64 activation rows, 128 weight rows, 128 columns each, the 128-byte swizzle the descriptors name: the
 * shared-memory bytes of the cp.async form) completing on the stage's mbarrier (full); a warp arrives on empty once
 * its MMAs on the stage are done, and warp 0 refills the slot when all four have. The MMAs, the promotion, the
 * split and the partials' store are f8_wgmma_kernel's: the same bits. Rows past M and N are zero-filled by the copy
 * engine. Grid as f8_wgmma_kernel<1>'s; ta: the codes' map (boxes of 64 rows), tb1 / tb2: the two weights' maps. */
#define T1_ST 4
#define T1_STAGE ((64 + WG_BN) * WG_BK)
static size_t t1_smem_bytes(void) { return (size_t)T1_ST * T1_STAGE + 2 * T1_ST * 8 + 1024; }

__global__ void __launch_bounds__(128) f8_tma1_kernel(const __grid_constant__ CUtensorMap ta,
                                                      const __grid_constant__ CUtensorMap tb1,
                                                      const __grid_constant__ CUtensorMap tb2, f8_wt wa, f8_wt wb, int nb_a,
                                                      const float *xs, int M, int K, int kc) {
    extern __shared__ unsigned char wg_raw[];
    unsigned char *sm = (unsigned char *)(((uintptr_t)wg_raw + 1023) & ~(uintptr_t)1023);
    uint64_t *full = (uint64_t *)(sm + T1_ST * T1_STAGE), *empty = full + T1_ST;
    const bool second = (int)blockIdx.x >= nb_a;
    const CUtensorMap *tb = second ? &tb2 : &tb1;
    const float *ws = second ? wb.ws : wa.ws;
    const int ws_cols = second ? wb.ws_cols : wa.ws_cols, N = second ? wb.N : wa.N;
    float *out = second ? wb.out : wa.out;
    const int LK = K / WG_BK;
    int n0 = ((int)blockIdx.x - (second ? nb_a : 0)) * WG_BN, m0 = blockIdx.y * 64, kb0 = blockIdx.z * (kc / WG_BK);
    int nkb = (K - blockIdx.z * kc < kc ? K - blockIdx.z * kc : kc) / WG_BK;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int r0 = m0 + 16 * warp + (lane >> 2), r1 = r0 + 8;   /* this thread's two output rows */
    const float *sw = ws + (size_t)(n0 / WG_BN) * ws_cols;
    tm_ring_init(full, empty, T1_ST, 4);
    if (threadIdx.x == 0)
        for (int s = 0; s < T1_ST && s < nkb; s++) {
            mbar_expect_tx(&full[s], T1_STAGE);
            tma_load(sm + s * T1_STAGE, &ta, (kb0 + s) * WG_BK, m0, &full[s]);
            tma_load(sm + s * T1_STAGE + 64 * WG_BK, tb, (kb0 + s) * WG_BK, n0, &full[s]);
        }
    float acc[64], tot[64];
    for (int i = 0; i < 64; i++) acc[i] = tot[i] = 0.0f;
    for (int i = 0; i < nkb; i++) {
        int kb = kb0 + i, slot = i % T1_ST, ph = (i / T1_ST) & 1;
        float s0 = r0 < M ? xs[(size_t)r0 * LK + kb] : 0.0f, s1 = r1 < M ? xs[(size_t)r1 * LK + kb] : 0.0f;
        float swb = sw[kb];
        mbar_wait(&full[slot], ph);
        const unsigned char *a = sm + slot * T1_STAGE, *b = a + 64 * WG_BK;
        wg_fence();
#pragma unroll
        for (int j = 0; j < 4; j++) wg_mma_n128(acc, wg_desc(a + 32 * j), wg_desc(b + 32 * j), j);
        wg_commit();
        wg_wait0();
        if (lane == 0) mbar_arrive(&empty[slot]);
        if (warp == 0 && i + T1_ST < nkb) {   /* the whole warp waits (a one-thread wait here serializes the MMAs) */
            mbar_wait(&empty[slot], ph);
            if (lane == 0) {
                mbar_expect_tx(&full[slot], T1_STAGE);
                tma_load(sm + slot * T1_STAGE, &ta, (kb + T1_ST) * WG_BK, m0, &full[slot]);
                tma_load(sm + slot * T1_STAGE + 64 * WG_BK, tb, (kb + T1_ST) * WG_BK, n0, &full[slot]);
            }
        }
        wg_promote(tot, acc, s0 * swb, s1 * swb);
    }
    wg_store(tot, out + (size_t)blockIdx.z * M * N + n0, (size_t)N, r0, r1, M, n0, N, lane);
}

/* ---- the TMA kernel ---- */
#define TM_BM 128     /* activation rows a block: two consumer warpgroups of 64 */
#define TM_ST 6       /* stages of 32 KB */
#define TM_ST_S 5     /* stages with the TMA-store epilogue (its 64 KB of shared memory take the sixth's place) */
#define TM_EPI (2 * 64 * WG_BN * 4)   /* that epilogue's buffer: each consumer warpgroup's 64 x 128 fp32 sums */
#define TM_GROUP_M 8  /* row blocks a group in the tile order */
#define TM_RING 3     /* SS 4: k-blocks in a consumer warp's scale ring */
#define TM_RSLOT 17   /* SS 4: a warp's floats a k-block: its 16 rows' activation scales, then the weight block's */
#define TM_RING_BYTES (8 * TM_RING * TM_RSLOT * 4)   /* SS 4: the 8 consumer warps' rings (1632 bytes) */
#define TM_STAGE ((TM_BM + WG_BN) * WG_BK)

#define TM_SLOT 528   /* SS: a stage's scale slot: its 128 rows' activation scales, then the weight block's (129 floats;
                       * SS 3: then the 16-byte window of weight scales that holds it, 132) */

/* the ring's stages: 6, 5 with the TMA-store epilogue; with it and SS 1, 4 (the slots take the room of the fifth: 5
 * would pass the 227 KB an SM gives a block by ~0.7 KB, with the 1 KB kept to align the start); with it and SS 2,
 * 5 again, the epilogue written in two 64-column halves through half the buffer (tm_epi_bytes); SS 3: 5 and the whole
 * epilogue, without the 1 KB (the dynamic shared memory's start found 1024-byte aligned: tm_base_aligned) */
__host__ __device__ constexpr int tm_stages(bool tst, int ss) { return tst ? (ss == 1 ? TM_ST_S - 1 : TM_ST_S) : TM_ST; }
__host__ __device__ constexpr int tm_epi_bytes(bool tst, int ss) { return tst ? (ss == 2 ? TM_EPI / 2 : TM_EPI) : 0; }

static size_t tm_smem_bytes(int tst = 0, int ss = 0) {
    size_t nst = (size_t)tm_stages(tst, ss);
    return nst * TM_STAGE + tm_epi_bytes(tst, ss) + (ss == 4 ? TM_RING_BYTES : ss ? nst * TM_SLOT : 0) + 2 * nst * 8 +
           (tst && ss == 3 ? 0 : 1024);
}

/* the grouped fetched-tile form (DYN): the plain form's, then each stage's tile number after the barriers */
static size_t tm_dyn_smem_bytes(void) { return tm_smem_bytes() + TM_ST * sizeof(int); }
/* ... OB 2's: 5 stages, the staging rows, the barriers and tile slots, 1 KB to align */
static size_t tm_ob2_smem_bytes(void) { return (size_t)TM_ST_S * (TM_STAGE + 2 * 8 + sizeof(int)) + OB_EPI + 1024; }

/* tile t of mb x nb output tiles x ks splits -> its first row and column and its stages [kb0, kb0 + nkb):
 * splits outermost, then groups of TM_GROUP_M row blocks, column blocks within a group, row blocks fastest */
template <int BN = WG_BN>
__host__ __device__ __forceinline__ void tm_tile(int t, int mb, int nb, int K, int kc, int *m0, int *n0, int *kb0, int *nkb) {
    int z = t / (mb * nb), r = t % (mb * nb), per = TM_GROUP_M * nb, g = r / per;
    int gm = mb - g * TM_GROUP_M < TM_GROUP_M ? mb - g * TM_GROUP_M : TM_GROUP_M;
    *m0 = (g * TM_GROUP_M + (r % per) % gm) * TM_BM;
    *n0 = (r % per) / gm * BN;
    *kb0 = z * (kc / WG_BK);
    *nkb = (K - z * kc < kc ? K - z * kc : kc) / WG_BK;
}

/* One output tile's work: activation rows m0 .. m0 + 127 loaded, rows below mend valid; weight rows
 * n0 .. n0 + 127 of the map mapb (valid below nvalid, scale row sw), written at column ocol + (n - n0) of out
 * (row stride ldo; out already offset for a split); stages [kb0, kb0 + nkb). */
typedef struct {
    int m0, mend, n0, nvalid, ocol, kb0, nkb, z;   /* z: the K split (the TMA store's third coordinate) */
    const CUtensorMap *mapb;
    const float *sw;
    float *out;
} tm_job;

/* the grouped form (the MoE's experts in one launch): a tile table and the experts' weight maps */
typedef struct {
    const int4 *tiles;           /* (expert, first row, first output column, the expert's row end) */
    int n_tiles;
    const CUtensorMap *maps;     /* [E * n_maps]: per expert, gate then up (n_maps 2) or the one weight */
    const float *const *scales;  /* [E * n_maps]: their 128 x 128 scales */
    int n_maps, n_split;         /* output columns >= n_split come from the second map at column - n_split */
    int half;                    /* DSINFER_CUDA_MOE_HALF: a tile of at most 64 of its expert's rows loads only those 64
                                  * rows (the kernel's tc: the codes' map with 64-row boxes), 24 KB a stage, not 32 */
    int *next;                   /* DYN (DSINFER_CUDA_MOE_DYN): the tiles fetched so far past the first wave (0 at the
                                  * launch), so a block takes the next tile in table order when it is free */
} tm_groups;

template <bool GROUPED>
__device__ __forceinline__ void tm_job_of(tm_job *j, int t, const CUtensorMap *tb, const tm_groups &g, float *out,
                                          const float *ws, int ws_cols, int M, int N, int K, int kc) {
    if (GROUPED) {
        int4 e = g.tiles[t];
        int sel = g.n_maps == 2 && e.z >= g.n_split;
        j->m0 = e.y;
        j->mend = e.w;
        j->n0 = e.z - (sel ? g.n_split : 0);
        j->nvalid = g.n_split;
        j->ocol = e.z;
        j->kb0 = 0;
        j->nkb = K / WG_BK;
        j->z = 0;
        j->mapb = &g.maps[e.x * g.n_maps + sel];
        j->sw = g.scales[e.x * g.n_maps + sel] + (size_t)(j->n0 / WG_BN) * ws_cols;
        j->out = out;
        return;
    }
    int mb = (M + TM_BM - 1) / TM_BM, nb = (N + WG_BN - 1) / WG_BN;
    tm_tile(t, mb, nb, K, kc, &j->m0, &j->n0, &j->kb0, &j->nkb);
    j->z = t / (mb * nb);
    j->mend = M;
    j->nvalid = N;
    j->ocol = j->n0;
    j->mapb = tb;
    j->sw = ws + (size_t)(j->n0 / WG_BN) * ws_cols;
    j->out = out + (size_t)j->z * M * N;   /* split z's partial */
}

/* a k-block's scales: the weight block's and this thread's two rows' (0 past the tile's valid rows) */
typedef struct {
    float sw, x0, x1;
} tm_sc;

/* a consumer warpgroup's view of one tile */
typedef struct {
    unsigned char *sm;
    uint64_t *full, *empty;
    const float *xs, *sw;   /* the codes' scales [rows][LK]; the tile's row of weight scales */
    int mend, LK, kb0, nkb, it0, cw, r0, r1;
    const unsigned char *slots;   /* SS: the ring's scale slots (tm_put_scales) */
    int tr0;                      /* SS: r0's row within the tile */
    float *ring;                  /* SS 4: this warp's scale ring, [TM_RING][TM_RSLOT] */
} tm_ctx;

/* SS: a k-block's scales as the producer warp holds them: lane l has rows m0 + l + 32 q (0 at or past mend), every lane
 * the weight block's */
typedef struct {
    float v[4], sw;
} tm_stage_sc;

/* SS: k-block kb's scales requested by the producer warp, one k-block before they are stored (tm_put_scales): their
 * global-load latency runs while the producer waits for the next stage (a first build loaded and stored them in one step
 * before each stage's TMA: the ring was fed at one load latency a k-block, 0.87 -> 0.61x cuBLASLt, RESULTS
 * twenty-seventh session run 7). One k-block ahead is still too close (0.73x, run 8): the producer turns a stage every
 * ~0.4 us, less than a loaded L2 round trip; the next form looks ahead several k-blocks (KERNELS.md). */
__device__ __forceinline__ tm_stage_sc tm_load_scales(const float *xs, const float *sw, int LK, int kb, int m0, int mend, int lane) {
    tm_stage_sc r;
#pragma unroll
    for (int q = 0; q < 4; q++) {
        int row = m0 + lane + 32 * q;
        r.v[q] = row < mend ? xs[(size_t)row * LK + kb] : 0.0f;
    }
    r.sw = sw[kb];
    return r;
}

/* SS: the scales into stage s's slot ([128 rows], then the weight's), then the full barrier's second arrival (lane 0;
 * the first is the stage's expect_tx): the consumers read them from shared memory after that barrier (tm_slot_scales),
 * not from global memory among their MMAs (a load there slows the tensor pipe: DSINFER_CUDA_F8_TM_LAB 1 / 8, RESULTS
 * twenty-seventh session runs 3 and 5) */
__device__ __forceinline__ void tm_put_scales(unsigned char *slot, uint64_t *full, const tm_stage_sc &sc, int lane) {
    float *f = (float *)slot;
#pragma unroll
    for (int q = 0; q < 4; q++) f[lane + 32 * q] = sc.v[q];
    if (lane == 0) f[128] = sc.sw;
    __syncwarp();   /* every lane's stores ordered before lane 0's arrive (release) */
    if (lane == 0) mbar_arrive(full);
}

/* SS 3 (XT): stage s's scale slot filled by two bulk copies completing on its full barrier (their 528 bytes counted
 * in the stage's expect_tx: no second arrival, no load the producer waits for): k-block kb's activation scales of rows
 * m0 .. m0 + 127 from the transposed scales xst [K/128][Mp] (Mp: M rounded up to 128; one contiguous 512 bytes), then the
 * 16-byte aligned window of weight scales holding sw[kb] (tm_slot_scales picks it out) */
__device__ __forceinline__ void tm_load_xt(unsigned char *slot, const float *xst, const float *sw, int m0, int kb, int Mp,
                                           uint64_t *bar) {
    bulk_load(slot, xst + (size_t)kb * Mp + m0, 512, bar);
    bulk_load(slot + 512, (const void *)((uintptr_t)(sw + kb) & ~(uintptr_t)15), 16, bar);
}

/* SS: this thread's scales of the tile's k-block i in stage s (its full barrier waited for): tm_scales' values; XT: the
 * weight's at its place in tm_load_xt's window */
template <bool XT = false>
__device__ __forceinline__ tm_sc tm_slot_scales(const tm_ctx *c, int s, int i) {
    const float *f = (const float *)(c->slots + s * TM_SLOT);
    tm_sc r;
    r.sw = XT ? f[128 + (((uintptr_t)(c->sw + c->kb0 + i) >> 2) & 3)] : f[128];
    r.x0 = f[c->tr0];
    r.x1 = f[c->tr0 + 8];
    return r;
}

/* k-block i of the tile: wait for its stage, then its 4 MMAs into acc from zero, committed as one group (NST: the
 * ring's stages). SS: the k-block's scales read from the stage's slot into *sc between the wait and the MMAs (XT: as
 * tm_load_xt put them). */
template <int NST, bool SS = false, bool XT = false>
__device__ __forceinline__ void tm_issue(float (&acc)[64], const tm_ctx *c, int i, tm_sc *sc = NULL) {
    int it = c->it0 + i, s = it % NST;
    mbar_wait(&c->full[s], (it / NST) & 1);
    if (SS) *sc = tm_slot_scales<XT>(c, s, i);
    const unsigned char *a = c->sm + s * TM_STAGE + c->cw * 64 * WG_BK, *b = c->sm + s * TM_STAGE + TM_BM * WG_BK;
    wg_fence();
#pragma unroll
    for (int j = 0; j < 4; j++) wg_mma_n128(acc, wg_desc(a + 32 * j), wg_desc(b + 32 * j), j);
    wg_commit();
}

/* k-block i's scales (tm_sc) from global memory */
__device__ __forceinline__ tm_sc tm_scales(const tm_ctx *c, int i) {
    int kb = c->kb0 + i;
    tm_sc r;
    r.sw = c->sw[kb];
    r.x0 = c->r0 < c->mend ? c->xs[(size_t)c->r0 * c->LK + kb] : 0.0f;
    r.x1 = c->r1 < c->mend ? c->xs[(size_t)c->r1 * c->LK + kb] : 0.0f;
    return r;
}

/* LAB 8: k-block i's scales read from shared memory (the epilogue's buffer, arbitrary values) at the places a producer
 * staging them [128 rows][4 k-blocks] would put them: what the global loads cost against shared-memory ones */
__device__ __forceinline__ tm_sc tm_scales_lab_smem(const unsigned char *epi, const tm_ctx *c, int i) {
    const float *f = (const float *)epi;
    tm_sc r;
    r.sw = f[512 + (i & 3)];
    r.x0 = f[(c->r0 & 127) * 4 + (i & 3)];
    r.x1 = f[(c->r1 & 127) * 4 + (i & 3)];
    return r;
}

/* A stage given back by this consumer warp (its lane 0), on this block's empty barrier */
__device__ __forceinline__ void tm_release(uint64_t *empty, int lane) {
    if (lane) return;
    mbar_arrive(empty);
}

/* A tile's n stages from use *it on waited for and given back without MMAs (none of the warpgroup's rows is valid), so
 * that the empty barriers count each use once */
template <int NST>
__device__ __forceinline__ void tm_skip_stages(uint64_t *full, uint64_t *empty, int *it, int n, int lane) {
    for (int i = 0; i < n; i++, (*it)++) {
        mbar_wait(&full[*it % NST], (*it / NST) & 1);
        tm_release(&empty[*it % NST], lane);
    }
}

/* Fetched tiles (tm_groups.next): the producer's last stage, use `it`: -1 in its tile slot and its phase completed by a
 * plain arrival, no bytes */
template <int NST>
__device__ __forceinline__ void tm_stop_stage(uint64_t *full, uint64_t *empty, int *tslot, int it) {
    int s = it % NST;
    if (it >= NST) mbar_wait(&empty[s], (it / NST - 1) & 1);
    tslot[s] = -1;
    mbar_arrive(&full[s]);
}

/* Fetched tiles: the tile whose first stage is use `it`, as the producer wrote it into that stage's slot (-1: none left) */
template <int NST>
__device__ __forceinline__ int tm_fetched_tile(uint64_t *full, const int *tslot, int it) {
    mbar_wait(&full[it % NST], (it / NST) & 1);
    return tslot[it % NST];
}

/* k-block i's stage given back after its MMAs completed, then the promotion of acc into tot with its scales sc */
template <int NST>
__device__ __forceinline__ void tm_promote(const float (&acc)[64], float (&tot)[64], const tm_ctx *c, int i, int lane,
                                           tm_sc sc) {
    float s0 = c->r0 < c->mend ? sc.x0 * sc.sw : 0.0f;
    float s1 = c->r1 < c->mend ? sc.x1 * sc.sw : 0.0f;
    tm_release(&c->empty[(c->it0 + i) % NST], lane);
    wg_promote(tot, acc, s0, s1);
}

/* TST's epilogue: a consumer warpgroup's 64 x 128 sums (wg_store's positions; rl0 = 16 warp + lane / 4, the
 * thread's first row within them) -> its shared buffer eb as 4 boxes of 64 rows x 32 columns (128-byte rows,
 * 16-byte chunk c of row r at c ^ (r % 8): the map's 128-byte swizzle, which also spreads a warp's float2 stores over
 * all banks) -> out by 4 TMA stores at (col, row, z) of map tc ([ks][M][N] fp32: rows past M and columns past N are
 * not written). The stores run on while the warpgroup starts its next tile; its leader thread (the one that issued
 * them) waits until they have read eb before anyone writes it again. Named barrier 2 + cw among the warpgroup. */
template <bool HALF = false>
__device__ __forceinline__ void tm_store_tma(const float (&tot)[64], unsigned char *eb, const CUtensorMap *tc, int col,
                                             int row, int z, int rl0, int lane, int leader, int cw) {
    /* HALF: boxes 0, 1 then 2, 3 through a 16 KB buffer, the second pair written once the first pair's stores have read
     * it (each pass waits for the buffer's previous reads, as the whole epilogue does for the last tile's) */
#pragma unroll
    for (int h = 0; h < (HALF ? 2 : 1); h++) {
        if (leader) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
        asm volatile("bar.sync %0, 128;\n" ::"r"(2 + cw) : "memory");
#pragma unroll
        for (int j = (HALF ? 8 * h : 0); j < (HALF ? 8 * h + 8 : 16); j++)
#pragma unroll
            for (int hh = 0; hh < 2; hh++) {
                int r = rl0 + 8 * hh, chunk = 2 * (j & 3) + ((lane & 3) >> 1);
                *(float2 *)(eb + ((j >> 2) - (HALF ? 2 * h : 0)) * 8192 + r * 128 + ((chunk ^ (r & 7)) << 4) + (lane & 1) * 8) =
                    make_float2(tot[4 * j + 2 * hh], tot[4 * j + 2 * hh + 1]);
            }
        wg_fence_smem();   /* the writes made visible to the TMA unit (the async proxy) */
        asm volatile("bar.sync %0, 128;\n" ::"r"(2 + cw) : "memory");
        if (leader) {
#pragma unroll
            for (int b = (HALF ? 2 * h : 0); b < (HALF ? 2 * h + 2 : 4); b++)
                asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];\n"
                             ::"l"((uint64_t)tc), "r"(col + 32 * b), "r"(row), "r"(z),
                             "r"(cu_smem_addr(eb + (b - (HALF ? 2 * h : 0)) * 8192))
                             : "memory");
            asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
        }
    }
}

/* k-block i's scales as the kernel's LAB asks: 1 all ones (no loads), 8 from shared memory (tm_scales_lab_smem), else
 * from global memory (tm_scales) */
template <int LAB>
__device__ __forceinline__ tm_sc tm_scales_of(const unsigned char *epi, const tm_ctx *c, int i) {
    return (LAB & 1) ? tm_sc{1.0f, 1.0f, 1.0f} : (LAB & 8) ? tm_scales_lab_smem(epi, c, i) : tm_scales(c, i);
}

/* SS 4 (DSINFER_CUDA_F8_TM_SS=4, dense forms): each consumer warp copies its own scales into a ring in shared memory by
 * cp.async, two k-blocks ahead of their use: no load writes a register while the MMAs run, and no producer step waits
 * for them (the producer-warp forms 1 / 2 were slower, RESULTS twenty-seventh session). A slot holds k-block i's
 * activation scales of the warp's 16 rows (r0's 8 then r1's 8: rows 16 w .. 16 w + 15 of the warpgroup's 64) and the
 * weight block's, at ring place (it0 + i) % TM_RING. */

/* SS 4: this warp's copies of k-block i's scales into its slot (lanes 0 .. 15 a row's, below mend; lane 16 the weight
 * block's), then one commit group a thread, empty past the tile's k-blocks, so that a thread has one group a k-block */
__device__ __forceinline__ void tm_ring_put(const tm_ctx *c, int i, int lane) {
    if (i < c->nkb) {
        float *slot = c->ring + ((c->it0 + i) % TM_RING) * TM_RSLOT;
        const int kb = c->kb0 + i, row = c->r0 - (lane >> 2) + lane;   /* (r0 - lane / 4: the warp's first row) */
        const float *src = lane < 16 ? (row < c->mend ? c->xs + (size_t)row * c->LK + kb : NULL) : lane == 16 ? c->sw + kb : NULL;
        if (src) asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(cu_smem_addr(slot + lane)), "l"(src) : "memory");
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* SS 4: k-block i's scales (tm_sc) from the ring, after this thread's copies of it completed (every group but its newest,
 * i + 1's) and the warp's (__syncwarp); the second __syncwarp orders every lane's reads before the next tm_ring_put into
 * the ring. Rows at or past mend hold stale values: tm_promote never uses them (s0 / s1 are 0 there). */
__device__ __forceinline__ tm_sc tm_ring_get(const tm_ctx *c, int i, int lane) {
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    __syncwarp();
    const float *slot = c->ring + ((c->it0 + i) % TM_RING) * TM_RSLOT;
    tm_sc r = {slot[16], slot[lane >> 2], slot[8 + (lane >> 2)]};
    __syncwarp();
    return r;
}

/* k-block i's scales where PREF loads them ahead: from global memory (tm_scales_of), or with RING from the ring, then
 * k-block i + 2's copies issued */
template <int LAB, bool RING>
__device__ __forceinline__ tm_sc tm_pref_scales(const unsigned char *epi, const tm_ctx *c, int i, int lane) {
    if (!RING) return tm_scales_of<LAB>(epi, c, i);
    tm_sc r = tm_ring_get(c, i, lane);
    tm_ring_put(c, i + 2, lane);
    return r;
}

/* A tile's k-blocks from the first, whose MMAs are in flight in acc_a (issued with scales sa: PREF's, loaded before its
 * stage), to the last promotion into tot: two accumulators in turn, k-block i + 1's MMAs run while i is promoted
 * (wait_group 1 retires i). PREF: a k-block's scales are loaded before its stage is waited for (sa / sb), else after its
 * MMAs (an L2 round trip in series with each promotion). SLOT (SS): tm_issue reads each k-block's scales from its slot.
 * Tried and removed (RESULTS twenty-seventh session runs 4 and 6, same bits, both slower): the scales two k-blocks ahead
 * (0.84 -> 0.81x cuBLASLt at M = 4096), one load a lane and shuffles (0.86 -> 0.80). */
template <int NST, bool PREF, bool SLOT, bool XT, int LAB, bool RING = false>
__device__ __forceinline__ void tm_tile_rest(float (&acc_a)[64], float (&acc_b)[64], float (&tot)[64], const tm_ctx *c,
                                             int nkb, int lane, const unsigned char *epi, tm_sc sa) {
    tm_sc sb = sa;
    int i = 0;
    for (; i + 2 < nkb; i += 2) {   /* i in flight in acc_a */
        if (PREF && !SLOT) sb = tm_pref_scales<LAB, RING>(epi, c, i + 1, lane);
        tm_issue<NST, SLOT, XT>(acc_b, c, i + 1, &sb);
        wg_wait1();
        tm_promote<NST>(acc_a, tot, c, i, lane, PREF ? sa : tm_scales(c, i));
        if (PREF && !SLOT) sa = tm_pref_scales<LAB, RING>(epi, c, i + 2, lane);
        tm_issue<NST, SLOT, XT>(acc_a, c, i + 2, &sa);
        wg_wait1();
        tm_promote<NST>(acc_b, tot, c, i + 1, lane, PREF ? sb : tm_scales(c, i + 1));
    }
    if (i + 1 < nkb) {   /* i in acc_a and one more */
        if (PREF && !SLOT) sb = tm_pref_scales<LAB, RING>(epi, c, i + 1, lane);
        tm_issue<NST, SLOT, XT>(acc_b, c, i + 1, &sb);
        wg_wait1();
        tm_promote<NST>(acc_a, tot, c, i, lane, PREF ? sa : tm_scales(c, i));
        wg_wait0();
        tm_promote<NST>(acc_b, tot, c, i + 1, lane, PREF ? sb : tm_scales(c, i + 1));
    } else {
        wg_wait0();
        tm_promote<NST>(acc_a, tot, c, i, lane, PREF ? sa : tm_scales(c, i));
    }
}

/* a consumer warpgroup's view of job j from ring use it (its rows r0, r1: 16 warp + lane / 4 and 8 more) */
__device__ __forceinline__ tm_ctx tm_ctx_of(const tm_job &j, unsigned char *sm, uint64_t *full, uint64_t *empty, const float *xs,
                                            int K, int it, int cw, int warp, int lane, const unsigned char *slots) {
    tm_ctx c = {sm, full, empty, xs, j.sw, j.mend, K / WG_BK, j.kb0, j.nkb, it, cw, 0, 0, slots, 0, NULL};
    c.tr0 = 64 * cw + 16 * warp + (lane >> 2);
    c.r0 = j.m0 + c.tr0;
    c.r1 = c.r0 + 8;
    return c;
}

/* As f8_wgmma_kernel with 128-row tiles, persistent: block b takes tiles b, b + gridDim.x, ... (dense: the
 * mb x nb x ks tiles of out [M, N], split z's partial at out + z M N; GROUPED: the tile table of g, each
 * expert's rows against its own weight map, out's row stride ldo). 384 threads: warpgroup 0 produces (one
 * thread, the stages of every tile in order, so it runs ahead into the next tile while the consumers store
 * the last), 1 and 2 consume. ta: the codes [rows, K], tb: the weight [N, K] (dense), boxes of 128 x 128
 * bytes. The ring's use count `it` runs on across tiles: stage it % TM_ST, phase (it / TM_ST) & 1.
 * LAB (DSINFER_CUDA_F8_TM_LAB, dense TST + PREF only; wrong results, for timing what each part costs): bit 1 the scales
 * taken as 1 (no scale loads), bit 2 no epilogue stores, bit 4 every stage loaded from the first k-block of row 0 and
 * weight row 0 (the same two L2-resident boxes: no DRAM or L2-miss latency in the feed), bit 8 the scales read from
 * shared memory instead (tm_scales_lab_smem), bit 16 (the grouped fetched-tile form) OB 1's BF16 stores where fp32 sums
 * are read. OB (DSINFER_CUDA_MOE_Y_BF16 for down, DSINFER_CUDA_MOE_GU_BF16 for gate / up; the grouped fetched-tile form):
 * the sums rounded to BF16, out taken as BF16 [rows][ldo] (a tile at column ocol: gate / up's at w I + n, w the weight),
 * 1 by direct stores (wg_store's BF16 form), 2 through each consumer warp's staging rows and a bulk copy a row
 * (tm_store_bf16_bulk; 5 stages: the staging rows take the sixth's room).
 * SS (DSINFER_CUDA_F8_TM_SS; with PREF): the scales staged into a slot beside each stage by the producer
 * warp (tm_load_scales, tm_put_scales) and read by the consumers from there (tm_slot_scales); with TST the ring has 4 stages (SS 1) or
 * 5 with the epilogue in halves (SS 2; tm_stages). The same values, the same promotion: the same bits. SS 3 (XT;
 * dense only): the slot filled by the producer thread's bulk copies (tm_load_xt) from the activation scales transposed,
 * xs [K/128][Mp] (not [M][K/128]), 5 stages and the whole epilogue (tm_stages). Tried and removed (RESULTS
 * twenty-eighth session runs 1 and 3, same bits, both slower): SS 3's slots with 5 stages and the epilogue in halves,
 * the consumers' own loads from the transposed form (a warp's rows in one sector, but a new L1 line every k-block). */
template <bool GROUPED, bool PREF = false, bool TST = false, int LAB = 0, int SS = 0, bool DYN = false, int OB = 0>
__global__ void __launch_bounds__(384, 1) f8_tma_kernel(const __grid_constant__ CUtensorMap ta,
                                                        const __grid_constant__ CUtensorMap tb,
                                                        const __grid_constant__ CUtensorMap tc, const tm_groups g,
                                                        float *out, int ldo, const float *xs, const float *ws, int ws_cols,
                                                        int M, int N, int K, int kc, int ks) {
    extern __shared__ unsigned char wg_raw[];
    unsigned char *sm = (unsigned char *)(((uintptr_t)wg_raw + 1023) & ~(uintptr_t)1023);
    if (TST && SS == 3 && sm != wg_raw) __trap();   /* no room to align (launched only where tm_base_aligned) */
    constexpr int NST = OB == 2 ? TM_ST_S : tm_stages(TST, SS);   /* OB 2: its staging rows take the sixth stage's room */
    static_assert(!TST || !GROUPED, "the TMA-store epilogue is the dense form's");
    static_assert(!SS || (PREF && !LAB), "the staged scales: the PREF forms");
    constexpr bool XT = SS == 3;   /* the scales by bulk copies from their transposed form (xs is [K/128][Mp]) */
    constexpr bool RING = SS == 4;   /* the consumer warps' own scale rings (tm_ring_put) */
    constexpr bool SLOT = SS != 0 && !RING;   /* the scales read from a slot beside each stage */
    constexpr bool STG = SS == 1 || SS == 2;   /* ... the producer warp staged */
    static_assert(!XT || !GROUPED, "the transposed scales: the dense form's");
    static_assert(!RING || !GROUPED, "the consumers' scale rings: the dense forms'");
    unsigned char *epi = sm + NST * TM_STAGE;   /* TST: the epilogue's buffer */
    unsigned char *slots = epi + (OB == 2 ? OB_EPI : tm_epi_bytes(TST, SS));   /* SS: NST scale slots */
    uint64_t *full = (uint64_t *)(slots + (RING ? TM_RING_BYTES : SS ? NST * TM_SLOT : 0)), *empty = full + NST;
    int *tslot = (int *)(empty + NST);   /* DYN: the tile each stage belongs to (-1: no more tiles), [NST] */
    static_assert(!DYN || (GROUPED && !STG), "the fetched tiles: the grouped form, one producer thread");
    static_assert(!OB || (DYN && !TST), "BF16 sums: the fetched tiles' plain-store form");
    const int tiles = GROUPED ? g.n_tiles : (M + TM_BM - 1) / TM_BM * ((N + WG_BN - 1) / WG_BN) * ks;
    const int first = (int)blockIdx.x, step = (int)gridDim.x;
    tm_job j;
    cu_pdl_trigger();   /* (the dense form is launched with PDL under CU_F8_PDL) */
    cu_pdl_wait();
    tm_ring_init(full, empty, NST, 8, STG ? 2 : 1);
    int wg = threadIdx.x >> 7;
    if (wg == 0) {   /* producer: one thread (SS: one warp) */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        if (threadIdx.x < (STG ? 32 : 1)) {   /* SS 1, 2: the warp stages the scales, its lane 0 the rest */
            int it = 0;
            /* DYN: after its first tile (blockIdx.x) a block fetches the next from g.next (tiles gridDim.x on, in fetch
             * order); the tile's number goes into the slot of its first stage, and after the last tile a stage with -1
             * and no bytes tells the consumers to stop */
            for (int t = first; t < tiles; t = DYN ? step + atomicAdd(g.next, 1) : t + step) {
                tm_job_of<GROUPED>(&j, t, &tb, g, out, ws, ws_cols, M, N, K, kc);
                tm_stage_sc sv;   /* SS: the next k-block's scales, in flight */
                if (STG) sv = tm_load_scales(xs, j.sw, K / WG_BK, j.kb0, j.m0, j.mend, threadIdx.x);
                for (int i = 0; i < j.nkb; i++, it++) {
                    int s = it % NST;
                    if (it >= NST) mbar_wait(&empty[s], (it / NST - 1) & 1);
                    if (DYN && i == 0) tslot[s] = t;   /* (released to the consumers by the expect_tx below) */
                    if (!STG || threadIdx.x == 0) {   /* SS 1, 2: lane 0 issues the stage's loads, then the warp its scales */
                        unsigned char *st = sm + s * TM_STAGE;
                        if (GROUPED && g.half && j.mend - j.m0 <= 64) {
                            /* the second consumer warpgroup has no valid row here (its stages waited for, no MMAs): only
                             * the first 64 rows, by the 64-row map, into the stage's first half of rows (the swizzle's
                             * layout of those rows is the 128-row box's) */
                            mbar_expect_tx(&full[s], TM_STAGE - 64 * WG_BK);
                            tma_load(st, &tc, (j.kb0 + i) * WG_BK, j.m0, &full[s]);
                        } else {
                            mbar_expect_tx(&full[s], TM_STAGE + (XT ? TM_SLOT : 0));
                            if (LAB & 4) tma_load(st, &ta, 0, 0, &full[s]);
                            else tma_load(st, &ta, (j.kb0 + i) * WG_BK, j.m0, &full[s]);
                        }
                        if (LAB & 4)
                            tma_load(st + TM_BM * WG_BK, j.mapb, 0, 0, &full[s]);
                        else
                            tma_load(st + TM_BM * WG_BK, j.mapb, (j.kb0 + i) * WG_BK, j.n0, &full[s]);
                        if (XT) tm_load_xt(slots + s * TM_SLOT, xs, j.sw, j.m0, j.kb0 + i, (M + TM_BM - 1) / TM_BM * TM_BM, &full[s]);
                    }
                    if (STG) {
                        tm_stage_sc cur = sv;
                        if (i + 1 < j.nkb) sv = tm_load_scales(xs, j.sw, K / WG_BK, j.kb0 + i + 1, j.m0, j.mend, threadIdx.x);
                        tm_put_scales(slots + s * TM_SLOT, &full[s], cur, threadIdx.x);
                    }
                }
            }
            if (DYN) tm_stop_stage<NST>(full, empty, tslot, it);
        }
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");   /* the producer gave its registers up */
    int cw = wg - 1, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, it = 0;
    float acc_a[64], acc_b[64], tot[64];
    for (int i = 0; i < 64; i++) acc_a[i] = acc_b[i] = 0.0f;
    for (int t = first; DYN || t < tiles; t += step) {
        if (DYN && (t = tm_fetched_tile<NST>(full, tslot, it)) < 0) break;
        tm_job_of<GROUPED>(&j, t, &tb, g, out, ws, ws_cols, M, N, K, kc);
        int nkb = j.nkb;
        if (j.m0 + 64 * cw >= j.mend) {   /* none of this warpgroup's 64 rows is valid (an expert's last, partial
                                           * tile; M's last): no MMAs, the stages still waited for and released in
                                           * step so the empty barriers count each use once */
            tm_skip_stages<NST>(full, empty, &it, nkb, lane);
            continue;
        }
        tm_ctx c = tm_ctx_of(j, sm, full, empty, xs, K, it, cw, warp, lane, slots);
        for (int i = 0; i < 64; i++) tot[i] = 0.0f;
        /* LAB: lab forms (wrong results, DSINFER_CUDA_F8_TM_LAB); SS: tm_issue reads each k-block's scales from its slot;
         * RING: the first two k-blocks' copies, then each read issues the copies two k-blocks on (tm_pref_scales) */
        tm_sc sa = tm_sc{};
        if (RING) {
            c.ring = (float *)slots + (4 * cw + warp) * TM_RING * TM_RSLOT;
            tm_ring_put(&c, 0, lane);
            tm_ring_put(&c, 1, lane);
        }
        if (PREF && !SLOT) sa = tm_pref_scales<LAB, RING>(epi, &c, 0, lane);
        tm_issue<NST, SLOT, XT>(acc_a, &c, 0, &sa);
        tm_tile_rest<NST, PREF, SLOT, XT, LAB, RING>(acc_a, acc_b, tot, &c, nkb, lane, epi, sa);
        it += nkb;
        if (TST && !(LAB & 2))
            tm_store_tma<SS == 2>(tot, epi + cw * (tm_epi_bytes(TST, SS) / 2), &tc, j.n0, j.m0 + 64 * cw, j.z, c.r0 - j.m0 - 64 * cw, lane,
                         threadIdx.x % 128 == 0, cw);
        else if (OB == 2)
            tm_store_bf16_bulk(tot, epi + (4 * cw + warp) * 16 * OB_ROW, (__nv_bfloat16 *)j.out + j.ocol, (size_t)ldo,
                               j.m0 + 64 * cw + 16 * warp, j.mend, lane);
        else if (OB || (LAB & 16))   /* LAB 16 (timing only): OB's stores where fp32 sums are read */
            wg_store(tot, (__nv_bfloat16 *)j.out + j.ocol, (size_t)ldo, c.r0, c.r1, j.mend, j.n0, j.nvalid, lane);
        else if (!(LAB & 2))
            wg_store(tot, j.out + j.ocol, (size_t)ldo, c.r0, c.r1, j.mend, j.n0, j.nvalid, lane);
    }
    if (TST && threadIdx.x % 128 == 0) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");   /* all written */
    if (OB == 2 && (threadIdx.x & 31) < 16) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}


static PFN_cuTensorMapEncodeTiled_v12000 encode_tiled;
int cu_fp8_tma = 1;   /* DSINFER_CUDA_FP8_TMA (backend creation) */
int cu_f8_tm_pref = 1;   /* DSINFER_CUDA_F8_TM_PREF (backend creation): f8_tma_kernel<*, true> */
/* the in-kernel sum up to this many splits: its last split reads them all (32 KB each) while the reduce kernel
 * spreads the sum over the GPU */
#define F8_TICKET_MAX_KS 4
int cu_f8_preload = 0;   /* DSINFER_CUDA_F8_PRELOAD (backend creation): f8_wgmma_kernel's ring all in flight at the start */
int cu_f8_split_kb = 4;  /* DSINFER_CUDA_F8_SPLIT_KB (backend creation): the fewest 128-column stages a K split takes */
int cu_f8_tickets = 0;   /* DSINFER_CUDA_F8_TICKETS (backend creation): the cp.async kernel's split-K sum in the kernel;
                          * opt-in: the last split's extra pass cost more than the reduce kernel's launch (`bench --ops`
                          * at 64 rows 149.6 vs 166.8 TFLOP/s geomean, FP8 decode b64 -6.5%, RESULTS eleventh session) */

/* cu_tma_map over rows `stride` bytes apart (>= K, a multiple of 16): a column slice of a wider matrix */
static int tma_map_strided(CUtensorMap *map, const void *p, int rows, int K, size_t stride, int box_rows) {
    if (!encode_tiled || rows < 1 || K < WG_BK || K % 16 || stride < (size_t)K || stride % 16 || ((uintptr_t)p & 15) ||
        box_rows < 1 || box_rows > 256)
        return 0;
    cuuint64_t dim[2] = {(cuuint64_t)K, (cuuint64_t)rows}, st[1] = {(cuuint64_t)stride};
    cuuint32_t box[2] = {WG_BK, (cuuint32_t)box_rows}, es[2] = {1, 1};
    CUresult r = encode_tiled(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)p, dim, st, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS;
}

int cu_tma_map(CUtensorMap *map, const void *p, int rows, int K, int box_rows) {
    return tma_map_strided(map, p, rows, K, (size_t)K, box_rows);
}

int cu_tma_map_strip(CUtensorMap *map, const void *p, int rows, int row_bytes, int box_bytes, int box_rows) {
    if (!encode_tiled || rows < 1 || row_bytes < box_bytes || row_bytes % 16 || box_bytes < 16 || box_bytes % 16 ||
        box_bytes > 256 || ((uintptr_t)p & 15) || box_rows < 1 || box_rows > 256)
        return 0;
    cuuint64_t dim[2] = {(cuuint64_t)row_bytes, (cuuint64_t)rows}, st[1] = {(cuuint64_t)row_bytes};
    cuuint32_t box[2] = {(cuuint32_t)box_bytes, (cuuint32_t)box_rows}, es[2] = {1, 1};
    CUresult r = encode_tiled(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)p, dim, st, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS;
}

/* a 2-D map of a row-major [rows, K] byte matrix, boxes of 128 x 128; 0 on failure */
static int tma_map(CUtensorMap *map, const void *p, int rows, int K) { return cu_tma_map(map, p, rows, K, 128); }

/* DSINFER_CUDA_MOE_WG_LAB bit 2 (timing only): an expert's [rows, K] bytes seen as rows K / 128 runs of 128 bytes, so
 * that a 128 x 128 box is 16 KB in a row (what a tiled weight layout would stream); moe_wg_kernel asks for box
 * nb LK + kb of it */
static int tma_map_lab(CUtensorMap *map, const void *p, int rows, int K) {
    if (!(cu_moe_wg_lab & 4)) return tma_map(map, p, rows, K);
    return tma_map_strided(map, p, (int)((size_t)rows * K / 128), 128, 128, 128);
}

int cu_f8_tm_store = 1;   /* DSINFER_CUDA_F8_TM_STORE (backend creation): f8_tma_kernel<false, *, true> */
int cu_f8_tm_lab = 0;     /* DSINFER_CUDA_F8_TM_LAB (lab, backend creation): f8_tma_kernel's LAB in the dense TST + PREF form */
int cu_f8_tm_ss = 0;      /* DSINFER_CUDA_F8_TM_SS (backend creation): f8_tma_kernel's SS in the one-block PREF forms */
int cu_f8_tm_store_min_m = 512;   /* DSINFER_CUDA_F8_TM_STORE_MIN_M: ... from this many rows */

/* the TMA-store epilogue's map of out: ks fp32 [M, N] partials one after another (3-D: N, M, ks), boxes of 32 columns
 * (128 bytes, 128-byte swizzle) x 64 rows; 0 where out or N does not suit (16-byte alignment) */
static int out_map(CUtensorMap *map, float *out, int M, int N, int ks) {
    if (!encode_tiled || M < 1 || N < 32 || N % 4 || ((uintptr_t)out & 15)) return 0;
    cuuint64_t dim[3] = {(cuuint64_t)N, (cuuint64_t)M, (cuuint64_t)ks};
    cuuint64_t stride[2] = {(cuuint64_t)N * 4, (cuuint64_t)M * N * 4};
    cuuint32_t box[3] = {32, 64, 1}, es[3] = {1, 1, 1};
    return encode_tiled(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, (void *)out, dim, stride, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                        CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* DSINFER_CUDA_F8_TM_SS's producer-warp forms (1, 2), else 0 (none, or the transposed scales' 3: tm_xt_rows) */
static int tm_ss_staged(void) { return cu_f8_tm_ss == 1 || cu_f8_tm_ss == 2 ? cu_f8_tm_ss : 0; }
/* the SS of the dense PREF forms (without a lab): the producer-warp forms, or 4 (the consumers' scale rings), else 0 */
static int tm_ss_dense(void) { return tm_ss_staged() ? tm_ss_staged() : cu_f8_tm_ss == 4 ? 4 : 0; }

typedef void (*tm_kernel_fn)(const CUtensorMap, const CUtensorMap, const CUtensorMap, const tm_groups, float *, int, const float *,
                             const float *, int, int, int, int, int, int);
/* the dense TST + PREF form with lab bits `lab` (DSINFER_CUDA_F8_TM_LAB: 1, 2, 3, 4, 7, 8, 10 built; others: the plain form;
 * 0: SS where DSINFER_CUDA_F8_TM_SS) */
/* the grouped gate / up with SiLU in the epilogue (defined with the MoE below) */
static size_t g2_smem_bytes(void);
__global__ void __launch_bounds__(384, 1) f8_gu_silu_kernel(const __grid_constant__ CUtensorMap ta, const tm_groups g,
                                                            const CUtensorMap *maps64, const float *xs, unsigned char *q,
                                                            float *s, int I, int K, int ws_cols);

static tm_kernel_fn tm_lab_kernel(int lab) {
    switch (lab) {
    case 1: return f8_tma_kernel<false, true, true, 1>;
    case 2: return f8_tma_kernel<false, true, true, 2>;
    case 3: return f8_tma_kernel<false, true, true, 3>;
    case 4: return f8_tma_kernel<false, true, true, 4>;
    case 7: return f8_tma_kernel<false, true, true, 7>;
    case 8: return f8_tma_kernel<false, true, true, 8>;
    case 10: return f8_tma_kernel<false, true, true, 10>;
    default:   /* (a lab value not built: the plain form, never SS, as tma_gemm_launch sizes it) */
        return lab || !tm_ss_dense() ? f8_tma_kernel<false, true, true>
             : cu_f8_tm_ss == 4      ? f8_tma_kernel<false, true, true, 0, 4>
             : cu_f8_tm_ss == 2      ? f8_tma_kernel<false, true, true, 0, 2>
                                     : f8_tma_kernel<false, true, true, 0, 1>;
    }
}

static int tm_base_aligned(void);

void cu_f8_wgmma_init(void) {
    CUDA_CHECK(cudaFuncSetAttribute(f8_tma_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tm_smem_bytes()));
    CUDA_CHECK(cudaFuncSetAttribute(f8_tma_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tm_smem_bytes()));
    CUDA_CHECK(cudaFuncSetAttribute(f8_tma_kernel<false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tm_smem_bytes()));
    CUDA_CHECK(cudaFuncSetAttribute(f8_tma_kernel<true, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tm_smem_bytes()));
    CUDA_CHECK(cudaFuncSetAttribute(f8_tma_kernel<true, true, false, 0, 0, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)tm_dyn_smem_bytes()));
    CUDA_CHECK(cudaFuncSetAttribute(f8_tma_kernel<true, true, false, 2, 0, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)tm_dyn_smem_bytes()));
    CUDA_CHECK(cudaFuncSetAttribute(f8_tma_kernel<true, true, false, 16, 0, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)tm_dyn_smem_bytes()));
    CUDA_CHECK(cudaFuncSetAttribute(f8_tma_kernel<true, true, false, 0, 0, true, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)tm_dyn_smem_bytes()));
    CUDA_CHECK(cudaFuncSetAttribute(f8_tma_kernel<true, true, false, 0, 0, true, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)tm_ob2_smem_bytes()));
    CUDA_CHECK(cudaFuncSetAttribute(f8_gu_silu_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)g2_smem_bytes()));
    CUDA_CHECK(cudaFuncSetAttribute(f8_tma_kernel<false, false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tm_smem_bytes(1)));
    CUDA_CHECK(cudaFuncSetAttribute(f8_tma_kernel<false, true, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tm_smem_bytes(1)));
    if (cu_f8_tm_lab)
        CUDA_CHECK(cudaFuncSetAttribute(tm_lab_kernel(cu_f8_tm_lab), cudaFuncAttributeMaxDynamicSharedMemorySize, (int)tm_smem_bytes(1)));
    CUDA_CHECK(cudaFuncSetAttribute(f8_tma_kernel<false, true, true, 0, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)tm_smem_bytes(1, 1)));
    CUDA_CHECK(cudaFuncSetAttribute(f8_tma_kernel<false, true, true, 0, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)tm_smem_bytes(1, 2)));
    CUDA_CHECK(cudaFuncSetAttribute(f8_tma_kernel<false, true, true, 0, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)tm_smem_bytes(1, 4)));
    CUDA_CHECK(cudaFuncSetAttribute(f8_tma_kernel<false, true, false, 0, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)tm_smem_bytes(0, 4)));
    CUDA_CHECK(cudaFuncSetAttribute(f8_tma_kernel<false, true, true, 0, 3>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)tm_smem_bytes(1, 3)));
    CUDA_CHECK(cudaFuncSetAttribute(f8_tma_kernel<false, true, false, 0, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)tm_smem_bytes(0, 1)));
    CUDA_CHECK(cudaFuncSetAttribute(f8_tma_kernel<true, true, false, 0, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)tm_smem_bytes(0, 1)));
    if (!encode_tiled) {
        cudaDriverEntryPointQueryResult q;
        void *fn = NULL;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            encode_tiled = (PFN_cuTensorMapEncodeTiled_v12000)fn;
        else
            cudaGetLastError();   /* no TMA maps: the cp.async kernel at every M */
    }

    CUDA_CHECK(cudaFuncSetAttribute(f8_wgmma_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)wg_smem_bytes(1)));
    CUDA_CHECK(cudaFuncSetAttribute(f8_wgmma_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)wg_smem_bytes(2)));
    CUDA_CHECK(cudaFuncSetAttribute(f8_tma1_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)t1_smem_bytes()));
    tm_base_aligned();
}

/* The K splits of an M x N x K product (K % 128 == 0): split when the blocks (64-row blocks up to 64 rows,
 * else 128) are fewer than the GPU holds at once (2 an SM with one warpgroup, 1 with two: shared memory),
 * into as many splits as still fit in that one wave (a second, partial wave would double the time), each
 * split at least 4 stages of 128 columns. Returns the count; *kc: the columns a split (a multiple of 128; the
 * last split may be shorter, none is empty). */
int cu_f8_splits(int M, int N, int K, int n_sm, int *kc) {
    int nkb = K / WG_BK, wgs = M <= 64 ? 1 : 2;
    int blocks = ((M + 64 * wgs - 1) / (64 * wgs)) * ((N + WG_BN - 1) / WG_BN);
    int skb = cu_f8_split_kb >= 1 ? cu_f8_split_kb : 1;
    int ks = (wgs == 1 ? 2 : 1) * n_sm / blocks, max_ks = nkb / skb > 0 ? nkb / skb : 1;
    if (ks > max_ks) ks = max_ks;
    if (ks < 1) ks = 1;
    *kc = (nkb + ks - 1) / ks * WG_BK;
    return (K + *kc - 1) / *kc;
}

/* The split-K tickets of the cp.async kernel for `tiles` tiles (zero between launches: each launch's last splits
 * put theirs back), made at first use outside a stream capture; NULL (the reduce kernel sums) when off, too
 * many tiles, or first asked for inside a capture. The moe_wg_kernel's dense form (cuda_moe_wg.cu) uses the
 * same array: the two never run at once (one W8A8 linear at a time, on one stream). */
static int *f8_tickets(ds_cuda_backend *cb, int tiles) {
    if (!cu_f8_tickets || tiles > CU_F8_WG_TICKETS) return NULL;
    if (!cb->f8_tickets) {
        if (cu_capturing()) return NULL;
        CUDA_CHECK(cudaMalloc(&cb->f8_tickets, sizeof(int) * CU_F8_WG_TICKETS));
        CUDA_CHECK(cudaMemset(cb->f8_tickets, 0, sizeof(int) * CU_F8_WG_TICKETS));
    }
    return cb->f8_tickets;
}

/* The cp.async kernel (WG warpgroups) over the column blocks of w1, and of w2 when not NULL (two weights of one
 * input in one launch), for codes q [M, K] with scales qs [M][K/128]: out1 [M, N1] (and out2 [M, N2]). Split in K
 * by cu_f8_splits over both weights' blocks; the splits' partials (ws_f8part: w1's, then w2's) summed in the
 * kernel (tickets, at most F8_TICKET_MAX_KS splits) or by f8_reduce_kernel. */
int cu_f8_tma1 = 0;   /* DSINFER_CUDA_F8_TMA1 (backend creation) */

/* f8_tma1_kernel in f8_wgmma_kernel<1>'s place (grid, a, b, nb_a, codes q with scales qs, M, K, kc as there; w1, w2: the
 * weights a and b are of, w2 == w1 for one): 1 if launched, 0 (nothing done) when off or a map cannot be made */
static int tma1_launch(dim3 grid, const f8_wt &a, const f8_wt &b, int nb_a, const unsigned char *q, const float *qs, int M,
                       int K, int kc, const ds_weight *w1, const ds_weight *w2) {
    CUtensorMap ta, tb1, tb2;
    if (!cu_f8_tma1 || !encode_tiled || !cu_tma_map(&ta, q, M, K, 64) || !tma_map(&tb1, w1->data, w1->rows, K) ||
        !tma_map(&tb2, w2->data, w2->rows, K))
        return 0;
    cu_launch_pdl(CU_F8_PDL, f8_tma1_kernel, grid, dim3(128), t1_smem_bytes(), ta, tb1, tb2, a, b, nb_a, qs, M, K, kc);
    CUDA_LAUNCH_CHECK();
    return 1;
}

/* keep (not NULL): the split-K sum is left to the caller, *keep says where the partials are (ks > 1: p1 [ks][M][N1], p2
 * [ks][M][N2]) or that out1 / out2 hold the results (ks 1: one split, or the opt-in forms that sum in the kernel) */
template <int WG>
static void cpasync_gemm(ds_cuda_backend *cb, const unsigned char *q, const float *qs, int M, int K, const ds_weight *w1,
                         float *out1, const ds_weight *w2, float *out2, cu_f8_parts *keep = NULL) {
    int N1 = w1->rows, N2 = w2 ? w2->rows : 0, kc;
    int nb1 = (N1 + WG_BN - 1) / WG_BN, nb2 = (N2 + WG_BN - 1) / WG_BN, mb = (M + 64 * WG - 1) / (64 * WG);
    int ks = cu_f8_splits(M, (nb1 + nb2) * WG_BN, K, cb->n_sm, &kc);
    if (keep) *keep = cu_f8_parts{NULL, NULL, 1};
    float *p1 = ks > 1 ? (float *)cu_ws_get(&cb->ws_f8part, (size_t)ks * M * (N1 + N2) * 4) : out1;
    float *p2 = ks > 1 ? p1 + (size_t)ks * M * N1 : out2;
    int *tk = ks > 1 && ks <= F8_TICKET_MAX_KS ? f8_tickets(cb, (nb1 + nb2) * mb) : NULL;
    f8_wt a = {(const unsigned char *)w1->data, w1->scale, w1->scale_cols, N1, p1, out1};
    f8_wt b = w2 ? f8_wt{(const unsigned char *)w2->data, w2->scale, w2->scale_cols, N2, p2, out2} : a;
    dim3 grid((unsigned)(nb1 + nb2), (unsigned)mb, (unsigned)ks);
    if (WG != 1 || tk || !tma1_launch(grid, a, b, nb1, q, qs, M, K, kc, w1, w2 ? w2 : w1)) {
        cu_launch_pdl(CU_F8_PDL, f8_wgmma_kernel<WG>, grid, dim3(WG * 128), wg_smem_bytes(WG), a, b, nb1, q, qs, M, K, kc, tk,
                      cu_f8_preload);
        CUDA_LAUNCH_CHECK();
    }
    if (ks > 1 && !tk && keep) {
        *keep = cu_f8_parts{p1, w2 ? p2 : NULL, ks};
        return;
    }
    if (ks > 1 && !tk) {
        if (w2) cu_f8_reduce_two(out1, p1, (size_t)M * N1, out2, p2, (size_t)M * N2, ks);
        else cu_f8_reduce(out1, p1, (size_t)M * N1, ks);
    }
}

/* the shared-memory address at which a kernel's dynamic shared memory starts (a kernel with no static shared memory, as
 * f8_tma_kernel) */
__global__ void smem_base_kernel(unsigned *out) {
    extern __shared__ unsigned char wg_raw[];
    if (threadIdx.x == 0) *out = cu_smem_addr(wg_raw);
}

/* whether that start is 1024-byte aligned (asked once, by cu_f8_wgmma_init: outside any capture): SS 3's layout has no
 * room to align it */
static int tm_base_aligned(void) {
    static int known = -1;
    if (known < 0) {
        unsigned *d, h = 1;
        CUDA_CHECK(cudaMalloc(&d, sizeof *d));
        smem_base_kernel<<<1, 32, 1024, cu_stream>>>(d);
        CUDA_LAUNCH_CHECK();
        CUDA_CHECK(cudaMemcpyAsync(&h, d, sizeof h, cudaMemcpyDeviceToHost, cu_stream));
        CUDA_CHECK(cudaStreamSynchronize(cu_stream));
        CUDA_CHECK(cudaFree(d));
        known = (h & 1023) == 0;
    }
    return known;
}

/* xst [LK][Mp] = xs [M][LK] transposed (Mp: M rounded up to TM_BM), rows M .. Mp - 1 zero: the scales as
 * f8_tma_kernel's SS 3 copies them (one k-block's 128 rows contiguous). Writes in order, reads strided (M LK floats:
 * 0.9 MB at V3's 4096 x 7168, next to its 235 MB of codes and weights) */
__global__ void xs_transpose_kernel(float *xst, const float *xs, int M, int Mp, int LK) {
    size_t n = (size_t)LK * Mp;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int m = (int)(i % Mp), kb = (int)(i / Mp);
        xst[i] = m < M ? xs[(size_t)m * LK + kb] : 0.0f;
    }
}

/* DSINFER_CUDA_F8_TM_SS 3 where the shared memory's start allows it (else the plain form): 3, the form tma_gemm_launch
 * takes with the transposed scales at M rows (its TMA-store form), else 0 */
static int tm_xt_rows(int M) {
    if (cu_f8_tm_ss != 3 || !cu_f8_tm_pref || cu_f8_tm_lab || !cu_f8_tm_store || M < cu_f8_tm_store_min_m) return 0;
    return cu_f8_tm_ss == 3 && tm_base_aligned() ? 3 : 0;
}

long cu_f8_tm_xt_launches;
long cu_f8_tm_ring_launches;

/* the scales qs [M][K/128] transposed for tm_xt_rows' form, into ws_f8xt */
static const float *tm_xt_scales(ds_cuda_backend *cb, const float *qs, int M, int K) {
    int LK = K / WG_BK, Mp = (M + TM_BM - 1) / TM_BM * TM_BM;
    float *xst = (float *)cu_ws_get(&cb->ws_f8xt, (size_t)LK * Mp * 4);
    size_t n = (size_t)LK * Mp;
    unsigned blocks = (unsigned)((n + 255) / 256 < 1024 ? (n + 255) / 256 : 1024);
    xs_transpose_kernel<<<blocks, 256, 0, cu_stream>>>(xst, qs, M, Mp, LK);
    CUDA_LAUNCH_CHECK();
    return xst;
}

/* f8_tma_kernel (dense, persistent over at most n_sm blocks) for w [N, K] against the codes of map ta ([M, K], scales
 * qs), tb: w's map: ks K splits of kc columns, split z's partial at dst + z M N (with ks == 1 dst is the result).
 * xst: qs transposed (tm_xt_scales) where xt = tm_xt_rows(M) (the SS form), else NULL */
static void tma_gemm_launch(const CUtensorMap &ta, const CUtensorMap &tb, float *dst, const float *qs, const ds_weight *w,
                            int M, int kc, int ks, int n_sm, const float *xst = NULL, int xt = 0) {
    int N = w->rows, K = w->cols, tiles = ((M + TM_BM - 1) / TM_BM) * ((N + WG_BN - 1) / WG_BN) * ks;
    int grid_p = tiles < n_sm ? tiles : n_sm;
    tm_groups none;
    memset(&none, 0, sizeof none);
    CUtensorMap tc;
    if (cu_f8_tm_store && M >= cu_f8_tm_store_min_m && out_map(&tc, dst, M, N, ks)) {
        if (xst) {   /* the transposed scales' form (tm_xt_rows) */
            cu_launch_pdl(CU_F8_PDL, f8_tma_kernel<false, true, true, 0, 3>,
                          dim3((unsigned)grid_p), dim3(384), tm_smem_bytes(1, xt), ta, tb, tc, none, dst, N,
                          xst, (const float *)w->scale, w->scale_cols, M, N, K, kc, ks);
            CUDA_LAUNCH_CHECK();
            cu_f8_tm_xt_launches++;
            return;
        }
        cu_launch_pdl(CU_F8_PDL, cu_f8_tm_pref ? tm_lab_kernel(cu_f8_tm_lab) : f8_tma_kernel<false, false, true>,
                      dim3((unsigned)grid_p), dim3(384), tm_smem_bytes(1, cu_f8_tm_pref && !cu_f8_tm_lab ? tm_ss_dense() : 0), ta, tb, tc, none, dst, N, qs, (const float *)w->scale,
                      w->scale_cols, M, N, K, kc, ks);
        CUDA_LAUNCH_CHECK();
        cu_f8_tm_ring_launches += cu_f8_tm_pref && !cu_f8_tm_lab && tm_ss_dense() == 4;
        return;
    }
    /* (the plain form's SS 1 and 2 are one: no epilogue buffer) */
    int ss = cu_f8_tm_pref && tm_ss_staged() ? 1 : cu_f8_tm_pref && cu_f8_tm_ss == 4 ? 4 : 0;
    cu_launch_pdl(CU_F8_PDL, ss == 1 ? f8_tma_kernel<false, true, false, 0, 1> : ss == 4 ? f8_tma_kernel<false, true, false, 0, 4>
                             : cu_f8_tm_pref ? f8_tma_kernel<false, true> : f8_tma_kernel<false>, dim3((unsigned)grid_p),
                  dim3(384), tm_smem_bytes(0, ss), ta, tb, ta, none, dst, N, qs, (const float *)w->scale, w->scale_cols, M, N, K, kc, ks);
    CUDA_LAUNCH_CHECK();
    cu_f8_tm_ring_launches += ss == 4;
}

/* 1 where cu_f8_wgmma_gemm takes the TMA kernel for w at M rows (more than 64, the tensor-map encoder there), with its
 * K splits *ks of *kc columns */
static int tma_path(const ds_cuda_backend *cb, const ds_weight *w, int M, int *ks, int *kc) {
    int N = w->rows, K = w->cols;
    if (M <= 64 || !cu_fp8_tma || !encode_tiled) return 0;
    *ks = cu_f8_splits(M, N, K, cb->n_sm, kc);
    return 1;
}

/* the TMA path's GEMM launch(es) into dst (ks > 1: the partials [ks][M][N]; 1: the product): the transposed scales'
 * form where tm_xt_rows takes it */
static void tma_parts_launch(ds_cuda_backend *cb, const CUtensorMap &ta, const CUtensorMap &tb, float *dst, const float *qs,
                             const ds_weight *w, int M, int kc, int ks) {
    int xt = tm_xt_rows(M);
    tma_gemm_launch(ta, tb, dst, qs, w, M, kc, ks, cb->n_sm, xt ? tm_xt_scales(cb, qs, M, w->cols) : NULL, xt);
}

/* out [M, N] = the block-scaled product of codes q [M, K] (scales qs [M][K/128]) with w (FP8, 128 x 128
 * scales), split in K by cu_f8_splits: the TMA kernel above 64 rows (DSINFER_CUDA_FP8_TMA), else cp.async. */
void cu_f8_wgmma_gemm(ds_cuda_backend *cb, float *out, const unsigned char *q, const float *qs, const ds_weight *w, int M) {
    int N = w->rows, K = w->cols, ks, kc;
    CUtensorMap ta, tb;
    if (tma_path(cb, w, M, &ks, &kc) && tma_map(&ta, q, M, K) && tma_map(&tb, w->data, N, K)) {
        float *part = ks > 1 ? (float *)cu_ws_get(&cb->ws_f8part, (size_t)ks * M * N * 4) : out;
        tma_parts_launch(cb, ta, tb, part, qs, w, M, kc, ks);
        if (ks > 1) cu_f8_reduce(out, part, (size_t)M * N, ks);
    } else if (M <= 64)
        cpasync_gemm<1>(cb, q, qs, M, K, w, out, NULL, NULL);
    else
        cpasync_gemm<2>(cb, q, qs, M, K, w, out, NULL, NULL);
}

/* cuda.h: the TMA path of cu_f8_wgmma_gemm for each weight with the reduce left out */
int cu_f8_tma_parts_plan(const ds_cuda_backend *cb, const unsigned char *q, int M, const ds_weight *w1, const ds_weight *w2,
                         cu_f8_tma_parts *pp) {
    CUtensorMap ta, tb;
    memset(pp, 0, sizeof *pp);
    if (!tma_path(cb, w1, M, &pp->ks1, &pp->kc1) || !tma_map(&ta, q, M, w1->cols) || !tma_map(&tb, w1->data, w1->rows, w1->cols))
        return 0;
    if (w2 && (w2->cols != w1->cols || !tma_path(cb, w2, M, &pp->ks2, &pp->kc2) || !tma_map(&tb, w2->data, w2->rows, w2->cols)))
        return 0;
    return 1;
}

void cu_f8_tma_parts_run(ds_cuda_backend *cb, const unsigned char *q, const float *qs, int M, const ds_weight *w1, float *out1,
                         const ds_weight *w2, float *out2, cu_f8_tma_parts *pp) {
    size_t n1 = (size_t)M * w1->rows, n2 = w2 ? (size_t)M * w2->rows : 0;
    size_t r1 = pp->ks1 > 1 ? (size_t)pp->ks1 * n1 : 0, r2 = w2 && pp->ks2 > 1 ? (size_t)pp->ks2 * n2 : 0;
    float *room = r1 + r2 ? (float *)cu_ws_get(&cb->ws_f8part, (r1 + r2) * 4) : NULL;   /* once, before any launch */
    const ds_weight *w[2] = {w1, w2};
    float *dst[2] = {r1 ? room : out1, r2 ? room + r1 : out2};
    int ks[2] = {pp->ks1, pp->ks2}, kc[2] = {pp->kc1, pp->kc2};
    for (int i = 0; i < (w2 ? 2 : 1); i++) {
        CUtensorMap ta, tb;
        if (!tma_map(&ta, q, M, w[i]->cols) || !tma_map(&tb, w[i]->data, w[i]->rows, w[i]->cols)) {
            /* not after a plan that passed (the same encodes); kept whole anyway: the product itself, summed here */
            cu_f8_wgmma_gemm(cb, i ? out2 : out1, q, qs, w[i], M);
            dst[i] = i ? out2 : out1;
            ks[i] = 1;
            continue;
        }
        tma_parts_launch(cb, ta, tb, dst[i], qs, w[i], M, kc[i], ks[i]);
    }
    pp->p1 = dst[0];
    pp->p2 = w2 ? dst[1] : NULL;
    pp->ks1 = ks[0];
    pp->ks2 = ks[1];
}

/* room for the codes [M, K] and scales [M][K/128] of M rows in ws_fp8 (the scales at *qs) */
unsigned char *cu_f8_codes_buf(ds_cuda_backend *cb, int M, int K, float **qs) {
    size_t qb = ((size_t)M * K + 255) / 256 * 256, sb = (size_t)M * (K / WG_BK) * 4;
    unsigned char *q = (unsigned char *)cu_ws_get(&cb->ws_fp8, qb + sb);
    *qs = (float *)(q + qb);
    return q;
}

/* codes and scales of x [M, K] fp32 per token x 128 columns (as the experts' activations are), in ws_fp8 */
static unsigned char *quantize_rows(ds_cuda_backend *cb, const float *x, int M, int K, float **qs) {
    unsigned char *q = cu_f8_codes_buf(cb, M, K, qs);
    cu_rows_fp8_f32(q, *qs, x, M, K);
    return q;
}

void cu_f8_gemm1_parts(ds_cuda_backend *cb, const unsigned char *q, const float *qs, int M, const ds_weight *w1, float *out1,
                       const ds_weight *w2, float *out2, cu_f8_parts *pp) {
    cpasync_gemm<1>(cb, q, qs, M, w1->cols, w1, out1, w2, out2, pp);
}

/* out [M, N] = the W8A8 product of x [M, K] fp32, quantized here, with w */
void cu_f8_wgmma_linear(ds_cuda_backend *cb, float *out, const float *x, const ds_weight *w, int M) {
    float *qs;
    const unsigned char *q = quantize_rows(cb, x, M, w->cols, &qs);
    cu_f8_wgmma_gemm(cb, out, q, qs, w, M);
}

/* out1 [M, N1] and out2 [M, N2]: the W8A8 products of one x [M, K] with w1 and w2 in one launch of the cp.async
 * kernel (x quantized once): the q / kv_a projections of an MLA block at decode sizes. Returns 0 (nothing done)
 * above 64 rows (the TMA kernel's sizes), or when the weights differ in K. */
int cu_f8_wgmma_linear2(ds_cuda_backend *cb, float *out1, float *out2, const float *x, const ds_weight *w1,
                        const ds_weight *w2, int M) {
    int K = w1->cols;
    if (M < 1 || M > 64 || w2->cols != K || K % WG_BK) return 0;
    float *qs;
    const unsigned char *q = quantize_rows(cb, x, M, K, &qs);
    cpasync_gemm<1>(cb, q, qs, M, K, w1, out1, w2, out2);
    return 1;
}

/* out1 [M, N1] and out2 [M, N2] from one x [M, K]: x quantized once, then cu_f8_wgmma_gemm for each weight (at more
 * than 64 rows, where cu_f8_wgmma_linear2's one launch does not go): what two cu_f8_wgmma_linear calls compute, one
 * quantizer launch fewer. The caller checked cu_f8_wgmma_pair_ok. */
void cu_f8_wgmma_shared_x(ds_cuda_backend *cb, float *out1, float *out2, const float *x, const ds_weight *w1,
                          const ds_weight *w2, int M) {
    float *qs;
    const unsigned char *q = quantize_rows(cb, x, M, w1->cols, &qs);
    cu_f8_wgmma_gemm(cb, out1, q, qs, w1, M);
    cu_f8_wgmma_gemm(cb, out2, q, qs, w2, M);
}

/* The epilogue of the fused W8A8 MLP: for token i and column block b (a warp; lane l: columns 128 b + 4 l ..
 * + 3), g and u = the sums in z order of the ks split-K partials pg / pu [ks][M][I] (f8_reduce_kernel's order),
 * h = SiLU(g) * u (silu_mul_kernel's cu_silu_mul), then h's codes qh [M, I] and scale sh [M][I/128] as
 * rows_fp8_warp_kernel makes them (the amax of the 128 values, floored at 1e-4, over 448): the same bits as those
 * four launches. Grid ceil(M (I/128) / 8), 256 threads. */
__global__ void silu_quant_kernel(unsigned char *qh, float *sh, const float *pg, const float *pu, int M, int I, int ks) {
    cu_pdl_trigger();
    cu_pdl_wait();
    int LK = I / 128;
    size_t blk = (size_t)blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (blk >= (size_t)M * LK) return;
    size_t i = blk / LK, b = blk % LK, off = i * I + b * 128 + 4 * lane, MI = (size_t)M * I;
    float4 g = *(const float4 *)(pg + off), u = *(const float4 *)(pu + off);
    for (int z = 1; z < ks; z++) {
        float4 gz = *(const float4 *)(pg + z * MI + off), uz = *(const float4 *)(pu + z * MI + off);
        g.x += gz.x; g.y += gz.y; g.z += gz.z; g.w += gz.w;
        u.x += uz.x; u.y += uz.y; u.z += uz.z; u.w += uz.w;
    }
    float4 h = make_float4(cu_silu_mul(g.x, u.x), cu_silu_mul(g.y, u.y), cu_silu_mul(g.z, u.z), cu_silu_mul(g.w, u.w));
    float a = cu_warp_max(fmaxf(fmaxf(fabsf(h.x), fabsf(h.y)), fmaxf(fabsf(h.z), fabsf(h.w))));
    float scale = fmaxf(a, 1e-4f) / 448.0f;
    *(uchar4 *)(qh + off) = make_uchar4(cu_f32_to_fp8_hw(h.x / scale), cu_f32_to_fp8_hw(h.y / scale),
                                        cu_f32_to_fp8_hw(h.z / scale), cu_f32_to_fp8_hw(h.w / scale));
    if (lane == 0) sh[i * LK + b] = scale;
}

/* The fused W8A8 MLP's buffers: x's codes q and scales qs, the down input's codes qh and scales hs (ws_fp8); gate's and
 * up's ks split partials pg, pu, with room for down's ksd partials after them (ws_f8part). Every buffer is asked for
 * once, at its largest, before any launch: a workspace that grew between two launches would move under a queued
 * kernel's pointers inside a capture. */
typedef struct {
    unsigned char *q, *qh;
    float *qs, *hs, *pg, *pu;
} mlp_bufs;
static mlp_bufs mlp_bufs_get(ds_cuda_backend *cb, int M, int D, int I, int ks, int ksd) {
    size_t xq = ((size_t)M * D + 255) / 256 * 256, xsb = ((size_t)M * (D / 128) * 4 + 255) / 256 * 256;
    size_t hq = ((size_t)M * I + 255) / 256 * 256, hsb = (size_t)M * (I / 128) * 4;
    size_t part = (size_t)ks * M * 2 * I > (size_t)ksd * M * D ? (size_t)ks * M * 2 * I : (size_t)ksd * M * D;
    mlp_bufs b;
    b.q = (unsigned char *)cu_ws_get(&cb->ws_fp8, xq + xsb + hq + hsb);
    b.qs = (float *)(b.q + xq);
    b.qh = b.q + xq + xsb;
    b.hs = (float *)(b.q + xq + xsb + hq);
    b.pg = (float *)cu_ws_get(&cb->ws_f8part, part * 4);
    b.pu = b.pg + (size_t)ks * M * I;
    return b;
}

/* silu_quant_kernel over b's partials: the down input's codes and scales */
static void silu_quant_launch(const mlp_bufs *b, int M, int I, int ks) {
    cu_launch_pdl(CU_F8_PDL, silu_quant_kernel, dim3((unsigned)(((size_t)M * (I / 128) + 7) / 8)), dim3(256), 0, b->qh, b->hs,
                  (const float *)b->pg, (const float *)b->pu, M, I, ks);
    CUDA_LAUNCH_CHECK();
}

/* Above 64 rows (opt.mlp_fuse 2, the TMA kernel's sizes): x quantized once, gate and up by the TMA kernel into their
 * split-K partials (no reduce launches), silu_quant_kernel (the sums, SiLU * up and the down input's codes), down by
 * cu_f8_wgmma_gemm: five launches where the unfused path takes eight (the quantizer, two GEMMs and their reduces,
 * silu_mul_kernel, the quantizer, down and its reduce); the same bits as that path (its W8A8 pair with x quantized once,
 * opt.w8_shared_x). 0 (nothing done) where the TMA kernel does not take both GEMMs. */
static int f8_mlp_tma(ds_cuda_backend *cb, float *out, const float *x, const ds_weight *gate, const ds_weight *up,
                      const ds_weight *down, int M) {
    int D = gate->cols, I = gate->rows, kc;
    CUtensorMap ta, tg, tu;
    if (cb->opt.mlp_fuse < 2 || !cb->opt.w8_shared_x || !cu_fp8_tma || !encode_tiled || !cu_f8_wgmma_pair_ok(gate, up, M) || !cu_f8_wgmma_pair_ok(down, down, M))
        return 0;
    int ks = cu_f8_splits(M, I, D, cb->n_sm, &kc), kcd, ksd = cu_f8_splits(M, D, I, cb->n_sm, &kcd);
    mlp_bufs b = mlp_bufs_get(cb, M, D, I, ks, ksd);
    if (!tma_map(&ta, b.q, M, D) || !tma_map(&tg, gate->data, I, D) || !tma_map(&tu, up->data, I, D)) return 0;
    cu_rows_fp8_f32(b.q, b.qs, x, M, D);
    tma_gemm_launch(ta, tg, b.pg, b.qs, gate, M, kc, ks, cb->n_sm);
    tma_gemm_launch(ta, tu, b.pu, b.qs, up, M, kc, ks, cb->n_sm);
    silu_quant_launch(&b, M, I, ks);
    cu_f8_wgmma_gemm(cb, out, b.qh, b.hs, down, M);
    return 1;
}

int cu_f8_mlp(ds_cuda_backend *cb, float *out, const float *x, const ds_weight *gate, const ds_weight *up,
              const ds_weight *down, int M) {
    int D = gate->cols, I = gate->rows;
    if (up->rows != I || up->cols != D || down->cols != I || down->rows != D || I % 128 || D % 128 || ((uintptr_t)x & 15))
        return 0;
    if (M > 64) return f8_mlp_tma(cb, out, x, gate, up, down, M);
    if (!cu_f8_wgmma_two_ok(gate, up, M) || !cu_f8_wgmma_two_ok(down, down, M)) return 0;
    int nb = (I + WG_BN - 1) / WG_BN, nbd = (D + WG_BN - 1) / WG_BN, kc, kcd;
    int ks = cu_f8_splits(M, 2 * nb * WG_BN, D, cb->n_sm, &kc), ksd = cu_f8_splits(M, nbd * WG_BN, I, cb->n_sm, &kcd);
    mlp_bufs mb = mlp_bufs_get(cb, M, D, I, ks, ksd);
    unsigned char *q = mb.q;
    float *qs = mb.qs, *pg = mb.pg, *pu = mb.pu;
    cu_rows_fp8_f32(q, qs, x, M, D);
    f8_wt a = {(const unsigned char *)gate->data, gate->scale, gate->scale_cols, I, pg, NULL};
    f8_wt b = {(const unsigned char *)up->data, up->scale, up->scale_cols, I, pu, NULL};
    dim3 grid((unsigned)(2 * nb), 1, (unsigned)ks);
    if (!tma1_launch(grid, a, b, nb, q, qs, M, D, kc, gate, up)) {
        cu_launch_pdl(CU_F8_PDL, f8_wgmma_kernel<1>, grid, dim3(128), wg_smem_bytes(1), a, b, nb, q, (const float *)qs, M, D, kc,
                      (int *)NULL, cu_f8_preload);
        CUDA_LAUNCH_CHECK();
    }
    silu_quant_launch(&mb, M, I, ks);
    cu_f8_wgmma_gemm(cb, out, mb.qh, mb.hs, down, M);
    return 1;
}

/* ---- the grouped form: the routed experts of a prefill-sized batch ---- */
int cu_moe_wgmma = 1;   /* DSINFER_CUDA_MOE_WGMMA (backend creation) */

/* One layer's expert weight maps, made once per layer (keyed by its first gate weight's data; the table is
 * emptied with the backend, which owns the device copies). */
typedef struct {
    const void *key;
    CUtensorMap *maps;   /* device: [2 (E + ns)] gate, up per expert, then [E + ns] down */
    CUtensorMap *maps64; /* device: [2 E] the routed experts' gate, up with 64-row boxes (f8_gu_silu_kernel) */
    const float **sc;    /* device: their scale pointers, same order */
    int ns;              /* the shared experts as virtual experts E .. E + ns - 1 (0: none made) */
} moe_maps;
#define N_MOE_MAPS 1024
static moe_maps moe_cache[N_MOE_MAPS];
/* the table is shared by the backends of one process (tensor parallelism runs a backend per GPU in threads) */
static pthread_mutex_t moe_cache_lock = PTHREAD_MUTEX_INITIALIZER;

void cu_f8_wgmma_free(void) {
    pthread_mutex_lock(&moe_cache_lock);
    memset(moe_cache, 0, sizeof moe_cache);
    pthread_mutex_unlock(&moe_cache_lock);
}

/* FP8 with block scales, or BF16 (the decode kernel of cuda_moe_wg.cu), of the given shape, 16-byte aligned */
static int expert_fits(const ds_weight *w, int rows, int cols) {
    int kind = (w->dtype == DS_DTYPE_F8_E4M3 && w->scale) || (w->dtype == DS_DTYPE_BF16 && !w->scale);
    return kind && w->rows == rows && w->cols == cols && ((uintptr_t)w->data & 15) == 0;
}

/* The shared experts of layer L (ns of them, I rows each: gate / up [ns I, D], down [D, ns I]) as virtual experts
 * E .. E + ns - 1 in the tables (hm, hs: [2 (E + ns)] gate / up, then [E + ns] down): expert E + s has gate / up rows
 * s I .. and down columns s I .. (a strided map), the scale pointers moved to the slice's first block. 0 (nothing
 * to add) unless they have the routed experts' dtype and block-scale layout, 16-byte aligned. */
static int shared_virtual(const ds_layer_weights *L, int E, int ns, int D, int I, ds_dtype dt, CUtensorMap *hm, const float **hs) {
    const ds_weight *g = &L->sh_gate, *u = &L->sh_up, *dn = &L->sh_down;
    int es = dt == DS_DTYPE_BF16 ? 2 : 1, f8 = dt == DS_DTYPE_F8_E4M3, E2 = E + ns;
    if (ns < 1 || !g->data || !u->data || !dn->data || g->dtype != dt || u->dtype != dt || dn->dtype != dt || I % 128 ||
        !expert_fits(g, ns * I, D) || !expert_fits(u, ns * I, D) || !expert_fits(dn, D, ns * I) ||
        (f8 && (g->scale_cols != u->scale_cols || g->scale_cols < D / 128 || dn->scale_cols < ns * I / 128)))
        return 0;
    for (int s = 0; s < ns; s++) {
        size_t rows = (size_t)s * I * D * es;   /* byte offset of the slice's first gate / up row */
        if (!tma_map_lab(&hm[2 * (E + s)], (const char *)g->data + rows, I, es * D) ||
            !tma_map_lab(&hm[2 * (E + s) + 1], (const char *)u->data + rows, I, es * D) ||
            ((cu_moe_wg_lab & 4) ? !tma_map_lab(&hm[2 * E2 + E + s], (const char *)dn->data + rows, D, es * I)
                                 : !tma_map_strided(&hm[2 * E2 + E + s], (const char *)dn->data + (size_t)s * I * es, D, es * I,
                                                    (size_t)ns * I * es, 128)))
            return 0;
        if (f8) {
            hs[2 * (E + s)] = g->scale + (size_t)s * (I / 128) * g->scale_cols;
            hs[2 * (E + s) + 1] = u->scale + (size_t)s * (I / 128) * u->scale_cols;
            hs[2 * E2 + E + s] = dn->scale + (size_t)s * (I / 128);
        }
    }
    return 1;
}

static const moe_maps *layer_maps_locked(ds_cuda_backend *cb, const ds_layer_weights *L, int E, int D, int I, int create) {
    size_t h = ((uintptr_t)L->exp_gate[0].data >> 8) % N_MOE_MAPS;
    for (size_t n = 0; n < N_MOE_MAPS; n++, h = (h + 1) % N_MOE_MAPS) {
        moe_maps *m = &moe_cache[h];
        if (m->key == L->exp_gate[0].data) return m;
        if (m->key) continue;
        if (!create) return NULL;
        int ns = cb->base.cfg ? cb->base.cfg->n_shared_experts : 0, E2;   /* room for them; dropped if they do not fit */
        ns = ns > 0 && ns <= 16 ? ns : 0;
        E2 = E + ns;
        CUtensorMap *hm = (CUtensorMap *)calloc((size_t)3 * E2, sizeof(CUtensorMap));
        CUtensorMap *h64 = (CUtensorMap *)calloc((size_t)2 * E, sizeof(CUtensorMap));
        const float **hs = (const float **)calloc((size_t)3 * E2, sizeof(float *));
        int ok = hm && hs && h64, has64 = 1;   /* has64: the 64-row maps made (else maps64 stays NULL) */
        ds_dtype dt = L->exp_gate[0].dtype;
        int es = dt == DS_DTYPE_BF16 ? 2 : 1;   /* the maps are over bytes: a BF16 row is 2K of them */
        for (int e = 0; e < E && ok; e++) {
            ok = expert_fits(&L->exp_gate[e], I, D) && expert_fits(&L->exp_up[e], I, D) && expert_fits(&L->exp_down[e], D, I) &&
                 L->exp_gate[e].dtype == dt && L->exp_up[e].dtype == dt && L->exp_down[e].dtype == dt &&
                 tma_map_lab(&hm[2 * e], L->exp_gate[e].data, I, es * D) && tma_map_lab(&hm[2 * e + 1], L->exp_up[e].data, I, es * D) &&
                 tma_map_lab(&hm[2 * E2 + e], L->exp_down[e].data, D, es * I);
            if (!ok) break;
            has64 = has64 && cu_tma_map(&h64[2 * e], L->exp_gate[e].data, I, es * D, 64) &&
                    cu_tma_map(&h64[2 * e + 1], L->exp_up[e].data, I, es * D, 64);
            hs[2 * e] = L->exp_gate[e].scale;
            hs[2 * e + 1] = L->exp_up[e].scale;
            hs[2 * E2 + e] = L->exp_down[e].scale;
        }
        if (ok && ns && !shared_virtual(L, E, ns, D, I, dt, hm, hs)) {   /* without them: the routed layout [2E][E] */
            for (int e = 0; e < E; e++) {
                hm[2 * E + e] = hm[2 * E2 + e];
                hs[2 * E + e] = hs[2 * E2 + e];
            }
            ns = 0;
            E2 = E;
        }
        void *d = NULL;
        size_t mb = sizeof(CUtensorMap) * 3 * (size_t)E2, mb64 = sizeof(CUtensorMap) * 2 * (size_t)E;
        if (ok) {   /* [maps][maps64][scale pointers] */
            CUDA_CHECK(cudaMalloc(&d, mb + mb64 + sizeof(float *) * 3 * (size_t)E2));
            cu_own(cb, d);
            CUDA_CHECK(cudaMemcpy(d, hm, mb, cudaMemcpyHostToDevice));
            CUDA_CHECK(cudaMemcpy((char *)d + mb, h64, mb64, cudaMemcpyHostToDevice));
            CUDA_CHECK(cudaMemcpy((char *)d + mb + mb64, hs, sizeof(float *) * 3 * (size_t)E2, cudaMemcpyHostToDevice));
        }
        free(hm);
        free(h64);
        free(hs);
        if (!ok) return NULL;   /* not cached: checked again next time (cheap next to the bf16 path it leaves) */
        m->key = L->exp_gate[0].data;
        m->maps = (CUtensorMap *)d;
        m->maps64 = has64 ? (CUtensorMap *)((char *)d + mb) : NULL;
        m->sc = (const float **)((char *)d + mb + mb64);
        m->ns = ns;
        return m;
    }
    return NULL;
}

/* the layer's maps, made on first use; the entry's device pointers are the caller's backend's (its weights) */
static int layer_maps(ds_cuda_backend *cb, const ds_layer_weights *L, int E, int D, int I, int create, moe_maps *out) {
    pthread_mutex_lock(&moe_cache_lock);
    const moe_maps *m = layer_maps_locked(cb, L, E, D, I, create);
    if (m) *out = *m;
    pthread_mutex_unlock(&moe_cache_lock);
    return m != NULL;
}

int cu_expert_maps(ds_cuda_backend *cb, const ds_layer_weights *L, int E, int D, int I, int create,
                   const CUtensorMap **maps, const float *const **scales, int *ns) {
    moe_maps m;
    if (!encode_tiled || E < 1 || !L->exp_gate || !L->exp_gate[0].data || !layer_maps(cb, L, E, D, I, create, &m)) return 0;
    *maps = m.maps;
    *scales = m.sc;
    *ns = m.ns;
    return 1;
}

/* 4 consecutive sums of gu as floats: one 16-byte load (fp32), or one 8-byte load widened (BF16; p 8-byte aligned) */
__device__ __forceinline__ float4 silu_ld4(const float *p) { return *(const float4 *)p; }
__device__ __forceinline__ float4 silu_ld4(const __nv_bfloat16 *p) {
    uint2 v = *(const uint2 *)p;
    float2 lo = __bfloat1622float2(*(const __nv_bfloat162 *)&v.x), hi = __bfloat1622float2(*(const __nv_bfloat162 *)&v.y);
    return make_float4(lo.x, lo.y, hi.x, hi.y);
}

/* act codes q [R, I] and scales s [R][I/128] of SiLU(g) * u rounded to BF16, from gu [R, 2I] (gate then up; T float, or
 * __nv_bfloat16 where gate / up's epilogue rounded its sums, opt.moe_gu_bf16: the same arithmetic on the widened
 * values): as moe_f8_kernel's epilogue and the down pass's quantizer do at decode, and the CPU under DSINFER_MOE_W8A8
 * (cpu_mlp_act). A warp per 128-column block, 8 a CTA; a lane's 4 columns of the gate half and the same 4 of the up
 * half (I % 128 == 0: 16- / 8-byte aligned). */
template <typename T>
__global__ void moe_silu_fp8_kernel(unsigned char *q, float *s, const T *gu, int R, int I) {
    int LK = I / 128;
    size_t blk = (size_t)blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (blk >= (size_t)R * LK) return;
    size_t i = blk / LK, b = blk % LK, c = b * 128 + 4 * lane;
    float4 g = silu_ld4(gu + i * 2 * I + c), u = silu_ld4(gu + i * 2 * I + I + c);
    float a[4] = {g.x / (1.0f + expf(-g.x)) * u.x, g.y / (1.0f + expf(-g.y)) * u.y, g.z / (1.0f + expf(-g.z)) * u.z,
                  g.w / (1.0f + expf(-g.w)) * u.w};
    float amax = 0.0f;
    for (int k = 0; k < 4; k++) {
        a[k] = __bfloat162float(__float2bfloat16(a[k]));
        amax = fmaxf(amax, fabsf(a[k]));
    }
    float scale = fmaxf(cu_warp_max(amax), 1e-4f) / 448.0f;
    *(uchar4 *)(q + i * I + c) = make_uchar4(cu_f32_to_fp8_hw(a[0] / scale), cu_f32_to_fp8_hw(a[1] / scale),
                                             cu_f32_to_fp8_hw(a[2] / scale), cu_f32_to_fp8_hw(a[3] / scale));
    if (lane == 0) s[i * LK + b] = scale;
}

/* ---- gate / up with SiLU * up and its FP8 codes in the epilogue (DSINFER_CUDA_MOE_SILU_EPI=1) ----
 * A tile: 128 of an expert's rows x intermediate columns c0 .. c0 + 127, in two passes p of 64 columns: a stage is the
 * rows' codes (128 x 128 B, the 128-row map) and the 64 gate rows c0 + 64p .. then the 64 up rows of the same columns
 * (the experts' 64-row maps), 32 KB as f8_tma_kernel's, 6 of them. Each consumer warpgroup (64 rows, as there) gets g in
 * its accumulator's columns 0 .. 63 and u in 64 .. 127 at the same row and column: a thread holds both (d[4j + h] and
 * d[4(j + 8) + h]), so SiLU needs no hand-over. Pass 0's 32 products a thread wait in shared memory as BF16 pairs (their
 * exact values: they are rounded to BF16 anyway) until pass 1's; then each row's amax over the quad's lanes (the row's
 * 128 columns), the scale and the codes, as moe_silu_fp8_kernel does from the fp32 gu: the same bits, without gu's fp32
 * round trip (R x 2I x 4 bytes written and read) or that kernel's launch. Promotion with the gate's weight scale on
 * columns 0 .. 63 and the up's on 64 .. 127 (x s_w as there). Tiles fetched in table order (as f8_tma_kernel's DYN:
 * tslot, the stop stage). Measured (thirty-ninth session): on the H100 as fast as gate / up + the SiLU kernel (-1.4 ..
 * +1%), on the H200 6% slower: opt-in. A form with 64-row tiles of 128 gate + 128 up rows (40 KB stages) was no faster and
 * was removed. */
#define G2_HOLD (2 * 128 * 18 * 4)   /* pass 0's products and amax: [2 warpgroups][16 pairs, 2 amax][128 threads] */

static size_t g2_smem_bytes(void) { return (size_t)TM_ST * TM_STAGE + G2_HOLD + 2 * TM_ST * 8 + TM_ST * sizeof(int) + 1024; }

/* a k-block's scales for f8_gu_silu_kernel: the two rows' and the gate's and up's weight blocks' */
typedef struct {
    float x0, x1, sg, su;
} g2_sc;

__device__ __forceinline__ g2_sc g2_scales(const float *xs, const float *swg, const float *swu, int LK, int kb, int r0, int r1,
                                           int mend) {
    g2_sc r;
    r.sg = swg[kb];
    r.su = swu[kb];
    r.x0 = r0 < mend ? xs[(size_t)r0 * LK + kb] : 0.0f;
    r.x1 = r1 < mend ? xs[(size_t)r1 * LK + kb] : 0.0f;
    return r;
}

/* the stage given back, then tot += acc x (x_row s_w): the gate's s_w on columns 0 .. 63 (j < 8), the up's on 64 .. 127 */
__device__ __forceinline__ void g2_promote(const float (&acc)[64], float (&tot)[64], uint64_t *empty, int it, int lane, g2_sc sc,
                                           int r0, int r1, int mend) {
    float s0g = r0 < mend ? sc.x0 * sc.sg : 0.0f, s1g = r1 < mend ? sc.x1 * sc.sg : 0.0f;
    float s0u = r0 < mend ? sc.x0 * sc.su : 0.0f, s1u = r1 < mend ? sc.x1 * sc.su : 0.0f;
    tm_release(&empty[it % TM_ST], lane);
#pragma unroll
    for (int q = 0; q < 64; q += 4) {
        float s0 = q < 32 ? s0g : s0u, s1 = q < 32 ? s1g : s1u;
        tot[q] += acc[q] * s0;
        tot[q + 1] += acc[q + 1] * s0;
        tot[q + 2] += acc[q + 2] * s1;
        tot[q + 3] += acc[q + 3] * s1;
    }
}

__global__ void __launch_bounds__(384, 1) f8_gu_silu_kernel(const __grid_constant__ CUtensorMap ta, const tm_groups g,
                                                             const CUtensorMap *maps64, const float *xs, unsigned char *q,
                                                             float *s, int I, int K, int ws_cols) {
    extern __shared__ unsigned char wg_raw[];
    unsigned char *sm = (unsigned char *)(((uintptr_t)wg_raw + 1023) & ~(uintptr_t)1023);
    unsigned *hold = (unsigned *)(sm + TM_ST * TM_STAGE);
    uint64_t *full = (uint64_t *)(sm + TM_ST * TM_STAGE + G2_HOLD), *empty = full + TM_ST;
    int *tslot = (int *)(empty + TM_ST);
    const int LK = K / WG_BK;
    tm_ring_init(full, empty, TM_ST, 8);
    int wg = threadIdx.x >> 7;
    if (wg == 0) {   /* producer: one thread */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        if (threadIdx.x == 0) {
            int it = 0;
            for (int t = (int)blockIdx.x; t < g.n_tiles; t = (int)gridDim.x + atomicAdd(g.next, 1)) {
                int4 e = g.tiles[t];
                const CUtensorMap *mg = &maps64[2 * e.x];
                for (int i = 0; i < 2 * LK; i++, it++) {   /* pass i / LK, k-block i % LK */
                    int st = it % TM_ST, kb = i % LK, c = e.z + 64 * (i / LK);
                    if (it >= TM_ST) mbar_wait(&empty[st], (it / TM_ST - 1) & 1);
                    if (i == 0) tslot[st] = t;   /* (released by the expect_tx) */
                    unsigned char *d = sm + st * TM_STAGE;
                    mbar_expect_tx(&full[st], TM_STAGE);
                    tma_load(d, &ta, kb * WG_BK, e.y, &full[st]);
                    tma_load(d + TM_BM * WG_BK, mg, kb * WG_BK, c, &full[st]);
                    tma_load(d + (TM_BM + 64) * WG_BK, mg + 1, kb * WG_BK, c, &full[st]);
                }
            }
            tm_stop_stage<TM_ST>(full, empty, tslot, it);
        }
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    int cw = wg - 1, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, tid = threadIdx.x & 127, it = 0;
    unsigned *mine = hold + cw * 18 * 128 + tid;   /* this thread's 16 pairs and 2 amax, [k][128 threads] */
    float acc_a[64], acc_b[64], tot[64];
    for (int i = 0; i < 64; i++) acc_a[i] = acc_b[i] = 0.0f;
    for (;;) {
        int t = tm_fetched_tile<TM_ST>(full, tslot, it);
        if (t < 0) break;
        int4 e = g.tiles[t];
        int mend = e.w;
        if (e.y + 64 * cw >= mend) {   /* none of this warpgroup's rows */
            tm_skip_stages<TM_ST>(full, empty, &it, 2 * LK, lane);
            continue;
        }
        int r0 = e.y + 64 * cw + 16 * warp + (lane >> 2), r1 = r0 + 8;
        const float *swg = g.scales[2 * e.x] + (size_t)(e.z / WG_BN) * ws_cols;
        const float *swu = g.scales[2 * e.x + 1] + (size_t)(e.z / WG_BN) * ws_cols;
        for (int p = 0; p < 2; p++) {
            float m0 = 0.0f, m1 = 0.0f;   /* the rows' amax over this thread's products of the pass (pass 0's held) */
            for (int i = 0; i < 64; i++) tot[i] = 0.0f;
            g2_sc sa = g2_scales(xs, swg, swu, LK, 0, r0, r1, mend), sb = sa;
            tm_ctx c = {sm, full, empty, xs, NULL, mend, LK, 0, LK, it, cw, r0, r1, NULL, 0, NULL};   /* (tm_issue's view of the pass) */
            tm_issue<TM_ST>(acc_a, &c, 0);
            int i = 0;
            for (; i + 2 < LK; i += 2) {
                sb = g2_scales(xs, swg, swu, LK, i + 1, r0, r1, mend);
                tm_issue<TM_ST>(acc_b, &c, i + 1);
                wg_wait1();
                g2_promote(acc_a, tot, empty, it + i, lane, sa, r0, r1, mend);
                sa = g2_scales(xs, swg, swu, LK, i + 2, r0, r1, mend);
                tm_issue<TM_ST>(acc_a, &c, i + 2);
                wg_wait1();
                g2_promote(acc_b, tot, empty, it + i + 1, lane, sb, r0, r1, mend);
            }
            if (i + 1 < LK) {
                sb = g2_scales(xs, swg, swu, LK, i + 1, r0, r1, mend);
                tm_issue<TM_ST>(acc_b, &c, i + 1);
                wg_wait1();
                g2_promote(acc_a, tot, empty, it + i, lane, sa, r0, r1, mend);
                wg_wait0();
                g2_promote(acc_b, tot, empty, it + i + 1, lane, sb, r0, r1, mend);
            } else {
                wg_wait0();
                g2_promote(acc_a, tot, empty, it + i, lane, sa, r0, r1, mend);
            }
            it += LK;
            /* the products into tot's gate half (tot[4j + h], j < 8), rounded to BF16 as moe_silu_fp8_kernel does */
#pragma unroll
            for (int k = 0; k < 32; k++) {
                tot[k] = __bfloat162float(__float2bfloat16(tot[k] / (1.0f + expf(-tot[k])) * tot[k + 32]));
                if (k & 2) m1 = fmaxf(m1, fabsf(tot[k]));
                else m0 = fmaxf(m0, fabsf(tot[k]));
            }
            if (p == 0) {   /* held: pairs (tot[2k], tot[2k + 1]), exact in BF16, and the amax (registers: spills) */
#pragma unroll
                for (int k = 0; k < 16; k++) {
                    __nv_bfloat162 b = __floats2bfloat162_rn(tot[2 * k], tot[2 * k + 1]);
                    mine[k * 128] = *(unsigned *)&b;
                }
                mine[16 * 128] = __float_as_uint(m0);
                mine[17 * 128] = __float_as_uint(m1);
            } else {
                m0 = fmaxf(m0, __uint_as_float(mine[16 * 128]));
                m1 = fmaxf(m1, __uint_as_float(mine[17 * 128]));
#pragma unroll
                for (int o = 1; o <= 2; o <<= 1) {   /* the quad's lanes hold the row's other columns */
                    m0 = fmaxf(m0, __shfl_xor_sync(0xffffffffu, m0, o));
                    m1 = fmaxf(m1, __shfl_xor_sync(0xffffffffu, m1, o));
                }
                tot[32] = m0;   /* (the up half is done with: the scales wait there) */
                tot[33] = m1;
            }
        }
        float sc0 = fmaxf(tot[32], 1e-4f) / 448.0f, sc1 = fmaxf(tot[33], 1e-4f) / 448.0f;
        /* pass 0's products back into tot[32 ..] (the up half, done with) */
#pragma unroll
        for (int k = 0; k < 16; k++) {
            unsigned v = mine[k * 128];
            float2 f = __bfloat1622float2(*(__nv_bfloat162 *)&v);
            tot[32 + 2 * k] = f.x;
            tot[32 + 2 * k + 1] = f.y;
        }
#pragma unroll
        for (int h = 0; h < 2; h++) {
            int r = h ? r1 : r0;
            float sc = h ? sc1 : sc0;
            if (r >= mend) continue;
            unsigned char *row = q + (size_t)r * I + e.z + 2 * (lane & 3);
#pragma unroll
            for (int j = 0; j < 8; j++) {   /* pass 0's columns 8j .., then pass 1's 64 + 8j .. */
                unsigned lo = cu_f32_to_fp8_hw(tot[32 + 4 * j + 2 * h] / sc), hi = cu_f32_to_fp8_hw(tot[32 + 4 * j + 2 * h + 1] / sc);
                *(unsigned short *)(row + 8 * j) = (unsigned short)(lo | (hi << 8));
                lo = cu_f32_to_fp8_hw(tot[4 * j + 2 * h] / sc);
                hi = cu_f32_to_fp8_hw(tot[4 * j + 2 * h + 1] / sc);
                *(unsigned short *)(row + 64 + 8 * j) = (unsigned short)(lo | (hi << 8));
            }
            if ((lane & 3) == 0) s[(size_t)r * (I / 128) + e.z / 128] = sc;
        }
    }
}

/* the tiles of each expert's rows [off[e], off[e+1]) against n_cols output columns, 128 x 128 each:
 * (expert, first row, first column, the expert's row end); returns their count, sum over e of
 * ceil(rows_e / 128) x ceil(n_cols / 128). Order within an expert: row block, then column block (a row block's column
 * tiles side by side, sharing its activation rows in L2); cols_first: column block, then row block (an expert's row
 * tiles of one weight tile side by side). Column block first with the tiles dealt round-robin was measured (thirty-eighth
 * session): more DRAM bytes (30.6 -> 36.7 GB on the V3 MoE layer at 4096 tokens), 20% slower; with the tiles fetched in
 * table order (DSINFER_CUDA_MOE_DYN=2, the default), where neighbours start together, it reads the weights once (1.03x,
 * thirty-ninth session). */
int cu_f8_expert_tiles(int4 *t, const int32_t *off, int E, int n_cols, int cols_first) {
    int n = 0;
    for (int e = 0; e < E; e++) {
        int nr = (off[e + 1] - off[e] + TM_BM - 1) / TM_BM, nc = (n_cols + WG_BN - 1) / WG_BN;
        for (int i = 0; i < nr * nc; i++, n++) {
            int rb = cols_first ? i % nr : i / nc, cb = cols_first ? i / nr : i % nc;
            if (t) t[n] = make_int4(e, off[e] + rb * TM_BM, cb * WG_BN, off[e + 1]);   /* t NULL: count only */
        }
    }
    return n;
}

long cu_moe_half_launches;   /* grouped launches with opt.moe_half (process-wide; the op test's evidence that it ran) */
long cu_moe_dyn_launches;    /* grouped launches with fetched tiles (opt.moe_dyn; likewise) */
long cu_moe_silu_launches;   /* f8_gu_silu_kernel launches (opt.moe_silu_epi; likewise) */
long cu_moe_y_bf16_launches; /* down launches with BF16 rows (opt.moe_y_bf16; likewise) */
long cu_moe_gu_bf16_launches; /* gate / up launches with BF16 sums (opt.moe_gu_bf16; likewise) */

/* the grouped fetched-tile form of grouped_launch (f8_tma_kernel DYN, PREF, no producer-warp scales): the only one with
 * the BF16 epilogue (OB) */
static int grouped_fetched(const ds_cuda_backend *cb) { return cb->opt.moe_dyn && cu_f8_tm_pref && !tm_ss_staged(); }

/* the OB form a grouped launch takes for the asked one, want (opt.moe_y_bf16 or opt.moe_gu_bf16): 1 direct BF16 stores,
 * 2 staged rows and a bulk copy a row (above 2: 2), 0 fp32 sums (asked, or no fetched-tile form). The caller's out rows
 * must suit OB 2's copies: ldo and each tile's first column multiples of 8 (16-byte aligned BF16 rows), out 16-byte
 * aligned, the weight's columns (tm_groups.n_split) a multiple of 128 (whole 128-column tiles) */
static int grouped_ob(const ds_cuda_backend *cb, int want) {
    if (want <= 0 || !grouped_fetched(cb)) return 0;
    return want > 2 ? 2 : want;
}

/* ta: the map of the activation codes [R, K]; ta64: the same codes with 64-row boxes (g->half). g->next not NULL: the
 * fetched-tile form (its counter zeroed here first). ob (grouped_ob; the fetched-tile form only): out is BF16 [R][ldo] */
static void grouped_launch(ds_cuda_backend *cb, const CUtensorMap &ta, const CUtensorMap &ta64, int R, int K, const float *qs,
                           const tm_groups *g, float *out, int ldo, int ws_cols, int ob = 0) {
    int grid = g->n_tiles < cb->n_sm ? g->n_tiles : cb->n_sm;
    DS_CHECK(!ob || (g->next && grouped_fetched(cb)));   /* else fp32 sums where the caller reads BF16 */
    if (g->next && cu_f8_tm_pref && !tm_ss_staged()) {
        CUDA_CHECK(cudaMemsetAsync(g->next, 0, sizeof(int), cu_stream));
        /* LAB (opt.moe_lab, timing only): 2 no stores, 16 BF16 stores (half the bytes) where fp32 sums are read */
        int lab = cb->opt.moe_lab;
        tm_kernel_fn k = ob == 2 ? f8_tma_kernel<true, true, false, 0, 0, true, 2>   /* (out: BF16 [R][ldo]) */
                       : ob ? f8_tma_kernel<true, true, false, 0, 0, true, 1>
                       : lab == 16 ? f8_tma_kernel<true, true, false, 16, 0, true>
                       : lab == 2 ? f8_tma_kernel<true, true, false, 2, 0, true>
                                  : f8_tma_kernel<true, true, false, 0, 0, true>;
        k<<<(unsigned)grid, 384, ob == 2 ? tm_ob2_smem_bytes() : tm_dyn_smem_bytes(), cu_stream>>>(ta, ta, ta64, *g, out, ldo, qs, NULL, ws_cols, R, 0, K, K, 1);
        CUDA_LAUNCH_CHECK();
        cu_moe_half_launches += g->half;
        cu_moe_dyn_launches++;
        return;
    }
    if (cu_f8_tm_pref && tm_ss_staged())
        f8_tma_kernel<true, true, false, 0, 1><<<(unsigned)grid, 384, tm_smem_bytes(0, 1), cu_stream>>>(
            ta, ta, ta64, *g, out, ldo, qs, NULL, ws_cols, R, 0, K, K, 1);
    else if (cu_f8_tm_pref)
        f8_tma_kernel<true, true><<<(unsigned)grid, 384, tm_smem_bytes(), cu_stream>>>(ta, ta, ta64, *g, out, ldo, qs, NULL, ws_cols, R,
                                                                                       0, K, K, 1);
    else
        f8_tma_kernel<true><<<(unsigned)grid, 384, tm_smem_bytes(), cu_stream>>>(ta, ta, ta64, *g, out, ldo, qs, NULL, ws_cols, R, 0,
                                                                                 K, K, 1);
    CUDA_LAUNCH_CHECK();
    cu_moe_half_launches += g->half;
}

static size_t al256(size_t n) { return (n + 255) & ~(size_t)255; }

/* DSINFER_CUDA_MOE_HIST=1 (diagnostic): one line a grouped MoE call on stderr, how many experts have 0, 1, 2, 3 and more
 * 128-row tiles, the most rows an expert has, and the tile counts of gate / up and down: what the tile order has to
 * share (an expert with two row tiles reads each weight tile twice unless they run together) */
static void moe_rows_hist(const int32_t *off, int E, int R, int T1, int T2) {
    int h[5] = {0, 0, 0, 0, 0}, most = 0;
    for (int e = 0; e < E; e++) {
        int n = off[e + 1] - off[e], nr = (n + TM_BM - 1) / TM_BM;
        h[nr < 4 ? nr : 4]++;
        if (n > most) most = n;
    }
    fprintf(stderr, "moe rows: %d experts, %d rows; experts with 0 / 1 / 2 / 3 / 4+ row tiles: %d / %d / %d / %d / %d; "
                    "most rows %d; tiles %d + %d\n", E, R, h[0], h[1], h[2], h[3], h[4], most, T1, T2);
}

const void *cu_moe_gemm_f8(ds_cuda_backend *cb, const float *x, const int32_t *rows, const int32_t *off, int E, int D,
                           int I, const ds_layer_weights *L, int *y_bf16) {
    int R = off[E];
    if (!cu_moe_wgmma || !cu_moe_w8a8 || !encode_tiled || R <= 0 || D % 128 || I % 128 ||
        L->exp_gate[0].dtype != DS_DTYPE_F8_E4M3)
        return NULL;
    moe_maps mmv;
    if (!layer_maps(cb, L, E, D, I, 1, &mmv)) return NULL;
    const moe_maps *mm = &mmv;
    int cols_first = cb->opt.moe_dyn == 2;
    /* gate / up with SiLU * up in the epilogue: tiles of 128 rows x 128 intermediate columns, fetched (opt.moe_dyn) */
    int silu = cb->opt.moe_silu_epi && cb->opt.moe_dyn && cu_f8_tm_pref && mm->maps64;   /* f8_gu_silu_kernel */
    int T1 = cu_f8_expert_tiles(NULL, off, E, silu ? I : 2 * I, 0);
    int T2 = cu_f8_expert_tiles(NULL, off, E, D, 0);   /* counts */
    if (cb->opt.moe_hist) moe_rows_hist(off, E, R, T1, T2);
    size_t q_b = al256((size_t)R * D), qs_b = al256((size_t)R * (D / 128) * 4);
    /* gate / up's sums in BF16 (opt.moe_gu_bf16; OB 2 suits: 2I columns a row, tiles at multiples of 128 columns within
     * gate's and up's I % 128 == 0) */
    int gob = silu ? 0 : grouped_ob(cb, cb->opt.moe_gu_bf16);
    size_t gu_b = silu ? 0 : al256((size_t)R * 2 * I * (gob ? 2 : 4));   /* the gate / up sums (none with SiLU in the epilogue) */
    /* down's rows in BF16 (opt.moe_y_bf16): with the fetched tiles, where the caller takes them (*y_bf16 on entry) */
    int ob = *y_bf16 ? grouped_ob(cb, cb->opt.moe_y_bf16) : 0;   /* 1 direct stores, 2 bulk */
    *y_bf16 = 0;
    size_t aq_b = al256((size_t)R * I), as_b = al256((size_t)R * (I / 128) * 4), y_b = al256((size_t)R * D * (ob ? 2 : 4));
    size_t t_b = sizeof(int4) * (size_t)(T1 + T2);
    char *ws = (char *)cu_ws_get(&cb->ws_moe_gemm, q_b + qs_b + gu_b + aq_b + as_b + y_b + t_b + 256);
    int *next = cb->opt.moe_dyn ? (int *)(ws + q_b + qs_b + gu_b + aq_b + as_b + y_b + al256(t_b)) : NULL;   /* DYN's counter */
    unsigned char *q = (unsigned char *)ws, *aq = (unsigned char *)(ws + q_b + qs_b + gu_b);
    float *qs = (float *)(ws + q_b), *gu = (float *)(ws + q_b + qs_b), *as = (float *)(ws + q_b + qs_b + gu_b + aq_b);
    float *y = (float *)(ws + q_b + qs_b + gu_b + aq_b + as_b);
    int4 *dt = (int4 *)(ws + q_b + qs_b + gu_b + aq_b + as_b + y_b);
    CUtensorMap ta1, ta2, h1, h2;   /* the codes of the rows and of the SiLU products (workspace: 256-byte aligned); h: 64-row boxes */
    if (!tma_map(&ta1, q, R, D) || !tma_map(&ta2, aq, R, I)) return NULL;
    int half = cb->opt.moe_half && cu_tma_map(&h1, q, R, D, 64) && cu_tma_map(&h2, aq, R, I, 64);
    if (!half) {
        h1 = ta1;
        h2 = ta2;
    }
    int4 *ht = (int4 *)malloc(t_b);
    if (!ht) return NULL;
    cu_f8_expert_tiles(ht, off, E, silu ? I : 2 * I, cols_first);
    cu_f8_expert_tiles(ht + T1, off, E, D, cols_first);
    CUDA_CHECK(cudaMemcpyAsync(dt, ht, t_b, cudaMemcpyHostToDevice, cu_stream));   /* pageable: staged before return */
    free(ht);
    cu_rows_fp8_gather(q, qs, x, rows, R, D);
    cu_optimes_phase(cb, "  moe: gather rows (fp8)");
    tm_groups g1 = {dt, T1, mm->maps, mm->sc, 2, I, half, next};
    if (silu) {
        g1.half = 0;
        CUDA_CHECK(cudaMemsetAsync(next, 0, sizeof(int), cu_stream));
        int grid = T1 < cb->n_sm ? T1 : cb->n_sm;
        f8_gu_silu_kernel<<<(unsigned)grid, 384, g2_smem_bytes(), cu_stream>>>(ta1, g1, mm->maps64, qs, aq, as, I, D,
                                                                                L->exp_gate[0].scale_cols);
        CUDA_LAUNCH_CHECK();
        cu_moe_silu_launches++;
        cu_optimes_phase(cb, "  moe: gate/up with SiLU * up (wgmma, grouped)");
    } else {
        /* gu [R, 2I]: fp32, or BF16 (gob) */
        grouped_launch(cb, ta1, h1, R, D, qs, &g1, gu, 2 * I, L->exp_gate[0].scale_cols, gob);
        cu_optimes_phase(cb, "  moe: gate/up (wgmma, grouped)");
        cu_moe_gu_bf16_launches += gob > 0;
        size_t blocks = ((size_t)R * (I / 128) + 7) / 8;
        if (gob)
            moe_silu_fp8_kernel<<<(unsigned)blocks, 256, 0, cu_stream>>>(aq, as, (const __nv_bfloat16 *)gu, R, I);
        else
            moe_silu_fp8_kernel<<<(unsigned)blocks, 256, 0, cu_stream>>>(aq, as, (const float *)gu, R, I);
        CUDA_LAUNCH_CHECK();
        cu_optimes_phase(cb, "  moe: SiLU * up (fp8)");
    }
    tm_groups g2 = {dt + T1, T2, mm->maps + 2 * (E + mm->ns), mm->sc + 2 * (E + mm->ns), 1, D, half, next};
    grouped_launch(cb, ta2, h2, R, I, as, &g2, y, D, L->exp_down[0].scale_cols, ob);
    cu_optimes_phase(cb, "  moe: down (wgmma, grouped)");
    cu_moe_y_bf16_launches += ob > 0;
    *y_bf16 = ob > 0;
    return y;
}
