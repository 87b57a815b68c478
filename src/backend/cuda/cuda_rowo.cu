/* The dense linears of one token by row ownership, their weights streamed before the previous kernel ends (issue 7,
 * batch 1; DSINFER_CUDA_ROWO, opt-in; dev/cuda/KERNELS.md "Forty-fifth session").
 *
 * out_i [rows_i] = W_i . x for one or two weights of one x [K] (linear, and linear2's q + kv_a). The rows of the weights,
 * laid end to end, are cut into units of RO_U = 8 rows (a weight's last unit may hold fewer), and block b owns units b,
 * b + grid, .. A unit's rows are whole output values: no block needs another's sums, and nothing is reduced across blocks.
 *
 * Why a new kernel where gemv_v2_kernel exists: under ncu the one-row GEMVs of q + kv_a and o_proj read 5.8 MB in 6.7 us
 * (868 GB/s), and their stream starts only once the kernel before them (a norm of one block, W_UV's GEMV) has ended. A
 * weight is no kernel's output, so here the producer thread asks for the block's rows (1-D bulk copies into a ring of
 * stages, the FP8 block scales with them) before anything waits: launched with programmatic dependent launch (opt.rowo
 * 1), a block resident beside the previous kernel's blocks streams its share (V2-Lite FP8 q + kv_a: ~57 KB a block, all of
 * it in the ring at once) while that kernel still runs; the consumers alone wait (griddepcontrol.wait) before reading x
 * and writing out. opt.rowo 2 launches the same kernel without the attribute (the stream after the boundary: a lab for
 * the two effects apart); 3 and 4 are 1 and 2 with a bulk copy a row where a unit's rows would be one copy (a lab: how
 * many copies an SM's TMA unit keeps in flight); 5 is 1 with each block's units one contiguous run (one DRAM stream a
 * block); 6 and 7 are 5 and 1 without the FP8 scale copies (labs, wrong FP8 sums: the scales' cost); 8 and 9 are 1
 * without x's load and without the arithmetic (labs, wrong sums); 10 is 1 with x brought by the producer's bulk copy.
 *
 * Warp 0's lane 0 is the producer; warps 1 .. RO_CW consume, warp w row w of each unit, a lane the 16-byte chunks lane,
 * lane + 32, .. of a stage's piece of the row (RO_PB bytes: K EB <= RO_PB is one piece, the unit's rows then one
 * contiguous copy), x from shared memory. The arithmetic is the GEMV's (fp32 x, FP8 codes with their 128 x 128 block
 * scale, here applied once a 16-value chunk, or BF16; fp32 sums) in another order of additions: NMSE-level differences
 * against gemv_v2_kernel (op test rowo).
 * Measured slower (bench/RESULTS.md, forty-fifth session, H100): rowo_kernel 9.2 .. 9.4 us a launch under ncu against the
 * one-row GEMV's 6.7, FP8 b1 +0.05 .. +0.1 ms a step in every form; the burst lab (dev/cuda/lab/burst_rate.cu) reads the
 * same bytes a block in a fresh launch as fast by bulk copies as by loads, so the excess is this kernel's own (not yet
 * found: the labs 8 and 9 are the next bisection). Opt-in. */
#include "backend/cuda/cuda_own.h"
#include "backend/cuda/cuda_wgmma.h"

#define RO_U 8                              /* rows a unit: one a consumer warp */
#define RO_CW 8                             /* consumer warps */
#define RO_THREADS (32 + 32 * RO_CW)        /* the producer warp and the consumers */
#define RO_PB 4096                          /* a row's bytes in a stage (a piece): a stage at most RO_U RO_PB = 32 KB */
#define RO_SC (RO_PB / 128)                 /* a piece's FP8 block scales at most (FP8: RO_PB columns) */
#define RO_ST_MAX 16
#define RO_K_MAX 16384                      /* x [K] in shared memory (64 KB at the most) */
#define RO_SMEM_MAX (227 * 1024)
/* weights of more rows stay on gemv_v2_kernel: the lm_head (102400 rows, 3.15 TB/s there already: its stream is far
 * longer than any kernel boundary it could hide) */
#define RO_ROWS_MAX 32768

typedef struct {
    cu_wview w[2];            /* the weights [rows_i, K] (the second's rows 0: none) */
    float *out[2];            /* [rows_i] */
    const float *x;           /* [K] */
    int K, nu0, nu;           /* x's length; units of w[0], of both */
    int nst, pr;              /* stages; a row's bytes in a stage (min(K EB, RO_PB)) */
    int rows_each;            /* (lab, opt.rowo 3 / 4) a copy a row even where the unit's rows are one contiguous block */
    int per;                  /* units a block as one contiguous run (opt.rowo 5 .. 6: block b units b per ..); 0: b, b + grid, .. */
    int no_scales;            /* (lab, opt.rowo 6 / 7: wrong FP8 sums) no scale copies, every block scale 1 */
    int lab;                  /* (lab, wrong sums) opt.rowo 8: x not loaded (shared memory as it is); 9: no arithmetic */
    int x_bulk;               /* opt.rowo 10: x [K] by the producer's bulk copy (after the first ring of weights and the
                               * wait for the previous kernel) in place of the consumers' loads */
} ro_args;

/* shared memory: the ring [nst][RO_U pr] (1024-byte aligned), full [nst], empty [nst], xbar [1] mbarriers (and 8 bytes
 * of padding), the stages' FP8 block scales [nst][RO_SC], x [K] */
static size_t ro_smem(int K, int nst, int pr) {
    return 1024 + (size_t)nst * RO_U * pr + (2 * (size_t)nst + 2) * 8 + (size_t)nst * RO_SC * 4 + (size_t)K * 4;
}

/* unit u's weight i, first row r0 and rows nr */
__device__ __forceinline__ void ro_unit(const ro_args &a, int u, int *i, int *r0, int *nr) {
    const int second = u >= a.nu0;
    *i = second;
    *r0 = (u - (second ? a.nu0 : 0)) * RO_U;
    const int left = (second ? a.w[1].rows : a.w[0].rows) - *r0;
    *nr = left < RO_U ? left : RO_U;
}

/* block b's units: u0, u0 + step, .. below end (interleaved: b, b + grid, ..; contiguous runs: b per .. b per + per - 1) */
__device__ __forceinline__ void ro_span(const ro_args &a, int *u0, int *step, int *end) {
    if (a.per) {
        *u0 = blockIdx.x * a.per;
        *step = 1;
        *end = *u0 + a.per < a.nu ? *u0 + a.per : a.nu;
    } else {
        *u0 = blockIdx.x;
        *step = gridDim.x;
        *end = a.nu;
    }
}

/* the producer's copy of x [K] into xs, completing on xbar, once the previous kernel has ended (x is its output) */
__device__ __forceinline__ void ro_copy_x(const ro_args &a, float *xs, uint64_t *xbar) {
    cu_pdl_wait();
    mbar_expect_tx(xbar, a.K * 4);
    bulk_load(xs, a.x, a.K * 4, xbar);
}

/* EB: the weights' bytes an element (1 FP8, 2 BF16). Grid: at most a block an SM, none without a unit; RO_THREADS
 * threads; ro_smem() bytes of dynamic shared memory. */
template <int EB>
__global__ void __launch_bounds__(RO_THREADS, 1) rowo_kernel(const ro_args a) {
    constexpr int V = 16 / EB;   /* values a 16-byte chunk */
    extern __shared__ unsigned char ro_raw[];
    unsigned char *ring = (unsigned char *)(((uintptr_t)ro_raw + 1023) & ~(uintptr_t)1023);
    const int nst = a.nst, pr = a.pr, K = a.K, np = (K * EB + RO_PB - 1) / RO_PB;   /* pieces a row */
    uint64_t *full = (uint64_t *)(ring + (size_t)nst * RO_U * pr), *empty = full + nst, *xbar = empty + nst;
    float *scs = (float *)(xbar + 2), *xs = scs + nst * RO_SC;   /* (16-byte aligned) */
    cu_pdl_trigger();   /* the next kernel may be placed now; it waits for this one's end itself */
    if (threadIdx.x == 0) {
        for (int s = 0; s < nst; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], RO_CW);
        }
        mbar_init(xbar, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (threadIdx.x < 32) {   /* the producer: weights, which need no wait for the previous kernel (x at 10: after one) */
        if (threadIdx.x) return;
        int it = 0, u0, step, end, x_left = a.x_bulk;
        ro_span(a, &u0, &step, &end);
        for (int u = u0; u < end; u += step) {
            int i, r0, nr;
            ro_unit(a, u, &i, &r0, &nr);
            const cu_wview &W = i ? a.w[1] : a.w[0];   /* (selects: no dynamic index into the parameters) */
            const unsigned char *base = (const unsigned char *)W.data + (size_t)r0 * K * EB;
            for (int p = 0; p < np; p++, it++) {
                const int s = it % nst, c0 = p * (RO_PB / EB), len = (K - c0) * EB < RO_PB ? (K - c0) * EB : RO_PB;
                const int scb = EB == 1 && !a.no_scales ? len / 128 * 4 : 0;   /* the unit's rows lie in one 128-row block: one scale row */
                if (x_left && it >= nst) {   /* the ring's first round asked for: x now, before any wait for a stage
                                              * (the consumers need x to give one back); it waits for the previous kernel */
                    ro_copy_x(a, xs, xbar);
                    x_left = 0;
                }
                if (it >= nst) mbar_wait(&empty[s], (it / nst - 1) & 1);
                mbar_expect_tx(&full[s], nr * len + scb);
                if (scb) bulk_load(scs + s * RO_SC, W.scale + (size_t)(r0 >> 7) * W.scale_cols + (size_t)(c0 >> 7), scb, &full[s]);
                unsigned char *st = ring + (size_t)s * RO_U * pr;
                if (np == 1 && !a.rows_each)   /* whole rows: the unit's rows are one contiguous block */
                    bulk_load(st, base, nr * len, &full[s]);
                else
                    for (int r = 0; r < nr; r++) bulk_load(st + (size_t)r * pr, base + ((size_t)r * K + c0) * EB, len, &full[s]);
            }
        }
        if (x_left) ro_copy_x(a, xs, xbar);
        return;
    }

    const int ct = threadIdx.x - 32, cw = ct >> 5, lane = threadIdx.x & 31;
    cu_pdl_wait();   /* x is the previous kernel's output; out may still be read by it */
    if (a.x_bulk) {
        mbar_wait(xbar, 0);   /* x in shared memory (the producer's copy) */
    } else {
        if (a.lab != 8)
            for (int j = ct; j < K / 4; j += 32 * RO_CW) ((float4 *)xs)[j] = __ldg((const float4 *)a.x + j);
        asm volatile("bar.sync 1, %0;\n" ::"n"(32 * RO_CW) : "memory");   /* x in shared memory */
    }
    int it = 0, u0, step, end;
    ro_span(a, &u0, &step, &end);
    for (int u = u0; u < end; u += step) {
        int i, r0, nr;
        ro_unit(a, u, &i, &r0, &nr);
        float acc[1] = {0.0f};
        for (int p = 0; p < np; p++, it++) {
            const int s = it % nst, c0 = p * (RO_PB / EB), nc = ((K - c0) * EB < RO_PB ? (K - c0) * EB : RO_PB) / 16;
            const unsigned char *row = ring + (size_t)s * RO_U * pr + (size_t)cw * pr;
            mbar_wait(&full[s], (it / nst) & 1);
            if (cw < nr && a.lab != 9) {
#pragma unroll
                for (int m = 0; m < RO_PB / 16 / 32; m++) {
                    const int c = lane + 32 * m;
                    if (c < nc) {
                        const uint4 q[1] = {*(const uint4 *)(row + (size_t)c * 16)};
                        mo_dot<EB, 1>(q, EB == 1 && !a.no_scales ? scs[s * RO_SC + ((c * V) >> 7)] : 1.0f, xs + c0 + c * V, lane, acc);
                    }
                }
            }
            __syncwarp();
            if (lane == 0) mbar_arrive(&empty[s]);
        }
        const float sum = cu_warp_sum(acc[0]);
        if (lane == 0 && cw < nr) (i ? a.out[1] : a.out[0])[r0 + cw] = sum;
    }
}

/* whether w can be one of the kernel's weights: FP8 with 128 x 128 block scales whose pieces are bulk-copyable (K a
 * multiple of 512, scale rows 16-byte aligned), or BF16; 16-byte aligned rows */
static int ro_weight_ok(const ds_weight *w, int K) {
    if (!w->data || w->cols != K || w->rows <= 0 || w->rows > RO_ROWS_MAX || ((uintptr_t)w->data & 15)) return 0;
    if (w->dtype == DS_DTYPE_BF16) return !w->scale && K % 8 == 0;
    return w->dtype == DS_DTYPE_F8_E4M3 && w->scale && K % 512 == 0 && w->scale_cols == K / 128 && w->scale_cols % 4 == 0 &&
           !((uintptr_t)w->scale & 15);
}

int cu_rowo(ds_cuda_backend *cb, float *out1, float *out2, const float *x, const ds_weight *w1, const ds_weight *w2) {
    const int K = w1->cols;
    if (!cb->opt.rowo || ((uintptr_t)x & 15) || K > RO_K_MAX || !ro_weight_ok(w1, K) || (w2 && !ro_weight_ok(w2, K)) ||
        (w2 && w2->dtype != w1->dtype))
        return 0;
    const int eb = w1->dtype == DS_DTYPE_F8_E4M3 ? 1 : 2;
    ro_args a;
    memset(&a, 0, sizeof a);
    a.w[0] = cu_view(w1);
    a.out[0] = out1;
    if (w2) {
        a.w[1] = cu_view(w2);
        a.out[1] = out2;
    }
    a.x = x;
    a.K = K;
    a.nu0 = (w1->rows + RO_U - 1) / RO_U;
    a.nu = a.nu0 + (w2 ? (w2->rows + RO_U - 1) / RO_U : 0);
    a.pr = K * eb < RO_PB ? K * eb : RO_PB;
    int grid = a.nu < cb->n_sm ? a.nu : cb->n_sm;
    const int np = (K * eb + RO_PB - 1) / RO_PB;
    if (cb->opt.rowo == 5 || cb->opt.rowo == 6) {   /* contiguous runs of per units: as few blocks as that needs */
        a.per = (a.nu + grid - 1) / grid;
        grid = (a.nu + a.per - 1) / a.per;
    }
    a.no_scales = cb->opt.rowo == 6 || cb->opt.rowo == 7;
    a.lab = cb->opt.rowo == 8 || cb->opt.rowo == 9 ? cb->opt.rowo : 0;
    a.x_bulk = cb->opt.rowo == 10;
    const int want = (a.nu + grid - 1) / grid * np;   /* a block's stages in all: the ring holds them all where it can */
    int nst = want < RO_ST_MAX ? want : RO_ST_MAX;
    while (nst > 2 && ro_smem(K, nst, a.pr) > RO_SMEM_MAX) nst--;
    const size_t smem = ro_smem(K, nst, a.pr);
    if (smem > RO_SMEM_MAX) return 0;
    a.nst = nst;
    static int attrs_set = 0;
    if (!attrs_set) {
        CUDA_CHECK(cudaFuncSetAttribute(rowo_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, RO_SMEM_MAX));
        CUDA_CHECK(cudaFuncSetAttribute(rowo_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, RO_SMEM_MAX));
        attrs_set = 1;
    }
    const int pdl = cb->opt.rowo != 2 && cb->opt.rowo != 4;
    a.rows_each = cb->opt.rowo == 3 || cb->opt.rowo == 4;
    if (eb == 1) cu_launch_pdl(pdl, rowo_kernel<1>, dim3((unsigned)grid), dim3(RO_THREADS), smem, a);
    else cu_launch_pdl(pdl, rowo_kernel<2>, dim3((unsigned)grid), dim3(RO_THREADS), smem, a);
    CUDA_LAUNCH_CHECK();
    cb->rowo_runs++;
    return 1;
}
