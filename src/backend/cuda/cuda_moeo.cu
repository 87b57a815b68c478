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
 * Warp 0's lane 0 is the producer: 1-D bulk copies of a unit's rows (pieces of MO_PC columns: one stage of U rows) and
 * the down strip's boxes (MO_PC rows a stage) into a ring of nst 32 KB stages. Warps 1 .. MO_CW consume: for gate / up
 * stages warp w takes rows w RW .. (RW = U / MO_CW), a lane the 16-byte chunks lane, lane + 32, .. of each, x from
 * shared memory; for down stages thread t takes rows t, t + 256, .. of the strip (16 bytes each, one U-value dot) into
 * its accumulators acc[d / 256]. The arithmetic is the grouped GEMV's (fp32 x, FP8 codes times their 128 x 128 block
 * scale or BF16, fp32 sums) in another order of additions, and the weighted experts' outputs are added inside one sum:
 * NMSE-level differences against the usual launches (op test moeo). */
#include <pthread.h>

#include "backend/cuda/cuda_route.h"
#include "backend/cuda/cuda_wgmma.h"

#define MO_STAGE (32 * 1024)
#define MO_ST_MAX 6
#define MO_CW 8                         /* consumer warps */
#define MO_THREADS (32 + 32 * MO_CW)
#define MO_CT (32 * MO_CW)              /* consumer threads */
#define MO_PC 2048                      /* a stage: MO_PC columns of U gate / up rows, or MO_PC rows of the down strip */
#define MO_BOX 256                      /* the down strip's TMA box rows (16 bytes each) */
#define MO_NA 32                        /* a consumer thread's accumulators: D <= MO_NA MO_CT = 8192 */
#define MO_SMEM_MAX (227 * 1024)

typedef struct {
    const float *x;           /* [D] the token's normed hidden state */
    float *out;               /* [D] zero at the launch; every block's partial sums are added to it */
    const int32_t *ids;       /* [K] the chosen experts (router_fused's) */
    const float *w;           /* [K] their weights (scaled as the combine takes them) */
    const cu_wview *tab;      /* the layer's expert table (cuda_moe.cu moe_table): gate [E], up [E], down [E] */
    cu_wview sg, su, sd;      /* the shared experts as one MLP of sI rows (sI 0: none) */
    const CUtensorMap *maps;  /* [E + 1] the down matrices as strips (cu_tma_map_strip): expert e at e, the shared at E */
    int D, I, sI, K, E, nst;
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

/* the dot of a 16-byte chunk (EB 1: 16 FP8 codes times their block scale s; 2: 8 BF16) with the 16 / EB floats at v
 * (shared memory); the chunk's float4 pieces of v taken in an order rotated by lane so that the 8 lanes of a shared-
 * memory phase, whose chunks lie 64 (FP8) or 32 (BF16) bytes of x apart, read different bank groups */
template <int EB>
__device__ __forceinline__ float mo_dot(uint4 q, float s, const float *v, int lane) {
    constexpr int P = 4 / EB;
    const int rot = EB == 1 ? (lane >> 1) : (lane >> 2);
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < P; i++) {
        const int jj = (i + rot) & (P - 1);
        const float4 xv = *(const float4 *)(v + 4 * jj);
        float w[4];
        if constexpr (EB == 1) {
            const uint32_t word = jj == 0 ? q.x : jj == 1 ? q.y : jj == 2 ? q.z : q.w;
            cu_fp8x4(word, s, w);
        } else {
            const uint32_t lo = jj == 0 ? q.x : q.z, hi = jj == 0 ? q.y : q.w;
            w[0] = __uint_as_float(lo << 16);
            w[1] = __uint_as_float(lo & 0xffff0000u);
            w[2] = __uint_as_float(hi << 16);
            w[3] = __uint_as_float(hi & 0xffff0000u);
        }
        acc += w[0] * xv.x + w[1] * xv.y + w[2] * xv.z + w[3] * xv.w;
    }
    return acc;
}

/* the dot of a 16-byte chunk's U = 16 / EB values (times s) with iv [U] (shared memory, the same for every thread) */
template <int EB>
__device__ __forceinline__ float mo_dot_iv(uint4 q, float s, const float *iv) {
    const uint32_t wd[4] = {q.x, q.y, q.z, q.w};
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if constexpr (EB == 1) {
            float w[4];
            cu_fp8x4(wd[i], s, w);
            acc += w[0] * iv[4 * i] + w[1] * iv[4 * i + 1] + w[2] * iv[4 * i + 2] + w[3] * iv[4 * i + 3];
        } else {
            acc += __uint_as_float(wd[i] << 16) * iv[2 * i] + __uint_as_float(wd[i] & 0xffff0000u) * iv[2 * i + 1];
        }
    }
    return acc;
}

/* the block scale of element (r, c) of w (FP8), else 1 */
template <int EB>
__device__ __forceinline__ float mo_scale(const cu_wview &w, int r, int c) {
    return EB == 1 ? __ldg(w.scale + (size_t)(r >> 7) * (size_t)w.scale_cols + (size_t)(c >> 7)) : 1.0f;
}

/* shared memory: the ring [nst][MO_STAGE] (1024-byte aligned), full [nst], empty [nst] mbarriers, x [D], iv [2][16]
 * (a unit's SiLU products, alternate units alternating), ids [K] */
static size_t mo_smem(int D, int K, int nst) {
    return 1024 + (size_t)nst * MO_STAGE + 2 * (size_t)nst * 8 + (size_t)D * 4 + 2 * 16 * 4 + (size_t)K * 4;
}

/* EB: the experts' bytes an element (1 FP8, 2 BF16). Grid: a block an SM (no block waits for another); MO_THREADS
 * threads; mo_smem() bytes of dynamic shared memory. */
template <int EB>
__global__ void __launch_bounds__(MO_THREADS, 1) moeo_kernel(const mo_args a) {
    constexpr int U = 16 / EB, RW = U / MO_CW, V = 16 / EB;
    extern __shared__ unsigned char mo_raw[];
    unsigned char *ring = (unsigned char *)(((uintptr_t)mo_raw + 1023) & ~(uintptr_t)1023);
    const int nst = a.nst, D = a.D;
    uint64_t *full = (uint64_t *)(ring + (size_t)nst * MO_STAGE), *empty = full + nst;
    float *xs = (float *)(empty + nst), *ivs = xs + D;
    int *ids = (int *)(ivs + 32);
    const int NU = (a.sI + a.K * a.I) / U;
    for (int i = threadIdx.x; i < D / 4; i += MO_THREADS) ((float4 *)xs)[i] = __ldg((const float4 *)a.x + i);
    for (int i = threadIdx.x; i < a.K; i += MO_THREADS) ids[i] = __ldg(a.ids + i);
    if (threadIdx.x == 0) {
        for (int s = 0; s < nst; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], MO_CW);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if ((int)blockIdx.x >= NU) return;

    if (threadIdx.x < 32) {   /* the producer: one thread */
        if (threadIdx.x) return;
        int it = 0;
        for (int u = blockIdx.x; u < NU; u += gridDim.x) {
            const cu_wview *g, *up, *dn;
            int j, k, m;
            mo_unit(a, ids, u, U, &g, &up, &dn, &j, &k, &m);
            for (int mat = 0; mat < 2; mat++) {
                const unsigned char *base = (const unsigned char *)(mat ? up : g)->data + (size_t)j * D * EB;
                for (int c0 = 0; c0 < D; c0 += MO_PC, it++) {
                    const int s = it % nst, len = (D - c0 < MO_PC ? D - c0 : MO_PC) * EB;
                    if (it >= nst) mbar_wait(&empty[s], (it / nst - 1) & 1);
                    mbar_expect_tx(&full[s], U * len);
                    for (int r = 0; r < U; r++)
                        bulk_load(ring + (size_t)s * MO_STAGE + (size_t)r * MO_PC * EB, base + ((size_t)r * D + c0) * EB, len,
                                  &full[s]);
                }
            }
            for (int d0 = 0; d0 < D; d0 += MO_PC, it++) {
                const int s = it % nst, rows = D - d0 < MO_PC ? D - d0 : MO_PC;
                if (it >= nst) mbar_wait(&empty[s], (it / nst - 1) & 1);
                mbar_expect_tx(&full[s], rows * 16);
                for (int b = 0; b < rows; b += MO_BOX)
                    tma_load(ring + (size_t)s * MO_STAGE + (size_t)b * 16, &a.maps[m], j * EB, d0 + b, &full[s]);
            }
        }
        return;
    }

    const int ct = threadIdx.x - 32, cw = ct >> 5, lane = threadIdx.x & 31;
    float acc[MO_NA];
#pragma unroll
    for (int i = 0; i < MO_NA; i++) acc[i] = 0.0f;
    int it = 0, n = 0;
    for (int u = blockIdx.x; u < NU; u += gridDim.x, n++) {
        const cu_wview *g, *up, *dn;
        int j, k, m;
        mo_unit(a, ids, u, U, &g, &up, &dn, &j, &k, &m);
        float *iv = ivs + (n & 1) * 16;
        float sums[2][RW];
#pragma unroll
        for (int mat = 0; mat < 2; mat++) {
            const cu_wview &W = mat ? *up : *g;
            float p[RW];
#pragma unroll
            for (int i = 0; i < RW; i++) p[i] = 0.0f;
            for (int c0 = 0; c0 < D; c0 += MO_PC, it++) {
                const int s = it % nst, nc = (D - c0 < MO_PC ? D - c0 : MO_PC) / V;   /* 16-byte chunks a row */
                const unsigned char *st = ring + (size_t)s * MO_STAGE;
                mbar_wait(&full[s], (it / nst) & 1);
#pragma unroll
                for (int i = 0; i < RW; i++) {
                    const int r = cw * RW + i;
                    for (int c = lane; c < nc; c += 32) {
                        const uint4 q = *(const uint4 *)(st + (size_t)r * MO_PC * EB + (size_t)c * 16);
                        p[i] += mo_dot<EB>(q, mo_scale<EB>(W, j + r, c0 + c * V), xs + c0 + c * V, lane);
                    }
                }
                __syncwarp();
                if (lane == 0) mbar_arrive(&empty[s]);
            }
#pragma unroll
            for (int i = 0; i < RW; i++) sums[mat][i] = cu_warp_sum(p[i]);
        }
        const float alpha = k < 0 ? 1.0f : __ldg(a.w + k);
        if (lane == 0)
#pragma unroll
            for (int i = 0; i < RW; i++) iv[cw * RW + i] = cu_silu_mul(sums[0][i], sums[1][i]) * alpha;
        asm volatile("bar.sync 1, %0;\n" ::"n"(MO_CT) : "memory");   /* the unit's U products in iv */
#pragma unroll
        for (int pc = 0; pc < MO_NA * MO_CT / MO_PC; pc++) {
            const int d0 = pc * MO_PC;
            if (d0 >= D) break;
            const int s = it % nst;
            const unsigned char *st = ring + (size_t)s * MO_STAGE;
            mbar_wait(&full[s], (it / nst) & 1);
#pragma unroll
            for (int i = 0; i < MO_PC / MO_CT; i++) {
                const int d = d0 + ct + i * MO_CT;
                if (d < D) {
                    const uint4 q = *(const uint4 *)(st + (size_t)(ct + i * MO_CT) * 16);
                    acc[pc * (MO_PC / MO_CT) + i] += mo_dot_iv<EB>(q, mo_scale<EB>(*dn, d, j), iv);
                }
            }
            __syncwarp();
            if (lane == 0) mbar_arrive(&empty[s]);
            it++;
        }
    }
    /* the partial sums [D] into the ring's first stage (every stage consumed: nothing lands there any more), seen by the
     * async proxy, then added onto out by one bulk reduction, complete before the block ends */
    asm volatile("bar.sync 1, %0;\n" ::"n"(MO_CT) : "memory");
    float *part = (float *)ring;
#pragma unroll
    for (int i = 0; i < MO_NA; i++)
        if (ct + i * MO_CT < D) part[ct + i * MO_CT] = acc[i];
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    asm volatile("bar.sync 1, %0;\n" ::"n"(MO_CT) : "memory");
    if (ct == 0)
        asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n"
                     "cp.async.bulk.commit_group;\n"
                     "cp.async.bulk.wait_group 0;\n" ::"l"(a.out), "r"(cu_smem_addr(part)), "r"(D * 4)
                     : "memory");
}

/* ---- host: the down strips' maps, made once a layer ---- */

typedef struct {
    const void *key;          /* the layer's first gate weight's data */
    CUtensorMap *maps;        /* device: [E + 1] */
} mo_maps;
#define MO_N_MAPS 1024
static mo_maps mo_cache[MO_N_MAPS];
static pthread_mutex_t mo_cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* whether w is stored as g0 is (dtype, scales), 16-byte aligned, [rows, cols] */
static int mo_same(const ds_weight *w, const ds_weight *g0, int rows, int cols) {
    return w->data && w->dtype == g0->dtype && !w->scale == !g0->scale && !((uintptr_t)w->data & 15) && w->rows == rows &&
           w->cols == cols;
}

/* layer L's down maps (device), made on first use where create (not inside a capture); NULL where they cannot be */
static const CUtensorMap *mo_layer_maps(ds_cuda_backend *cb, const ds_layer_weights *L, int E, int D, int I, int sI, int eb,
                                        int create) {
    const CUtensorMap *res = NULL;
    pthread_mutex_lock(&mo_cache_lock);
    size_t h = ((uintptr_t)L->exp_gate[0].data >> 8) % MO_N_MAPS;
    for (size_t n = 0; n < MO_N_MAPS; n++, h = (h + 1) % MO_N_MAPS) {
        mo_maps *m = &mo_cache[h];
        if (m->key == L->exp_gate[0].data) {
            res = m->maps;
            break;
        }
        if (m->key) continue;
        if (!create) break;
        CUtensorMap *hm = (CUtensorMap *)calloc((size_t)E + 1, sizeof(CUtensorMap));
        int ok = hm != NULL;
        for (int e = 0; e < E && ok; e++) ok = cu_tma_map_strip(&hm[e], L->exp_down[e].data, D, I * eb, 16, MO_BOX);
        if (ok && sI) ok = cu_tma_map_strip(&hm[E], L->sh_down.data, D, sI * eb, 16, MO_BOX);
        if (ok) {
            void *d = NULL;
            CUDA_CHECK(cudaMalloc(&d, sizeof(CUtensorMap) * ((size_t)E + 1)));
            cu_own(cb, d);
            CUDA_CHECK(cudaMemcpy(d, hm, sizeof(CUtensorMap) * ((size_t)E + 1), cudaMemcpyHostToDevice));
            m->key = L->exp_gate[0].data;
            m->maps = (CUtensorMap *)d;
            res = m->maps;
        }
        free(hm);
        break;
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
    if (!cb->opt.moeo || (!f8 && !bf) || ((uintptr_t)x & 15) || ((uintptr_t)out & 15) || D % MO_BOX || D > MO_NA * MO_CT || I % U || sI % U || K > 16) return 0;
    for (int e = 0; e < E; e++)
        if (!mo_same(&L->exp_gate[e], g0, I, D) || !mo_same(&L->exp_up[e], g0, I, D) || !mo_same(&L->exp_down[e], g0, D, I))
            return 0;
    if (sI && (!mo_same(&L->sh_gate, g0, sI, D) || !mo_same(&L->sh_up, g0, sI, D) || !mo_same(&L->sh_down, g0, D, sI)))
        return 0;
    if (f8 && (I % 128 || sI % 128)) return 0;   /* (a unit's rows inside one scale block: U divides 128 anyway) */
    return mo_layer_maps(cb, L, E, D, I, sI, eb, !cu_capturing()) != NULL;
}

int cu_moeo(ds_cuda_backend *cb, float *out, const float *x, const ds_layer_weights *L, const cu_wview *tab,
            const int32_t *ids, const float *w, route_cfg rc) {
    if (!cu_moeo_fits(cb, out, x, L, rc)) return 0;
    const ds_config *c = cb->base.cfg;
    const ds_weight *g0 = &L->exp_gate[0];
    const int D = c->hidden_size, I = g0->rows, E = rc.E, K = rc.K, sI = c->n_shared_experts ? L->sh_gate.rows : 0;
    const int eb = g0->dtype == DS_DTYPE_F8_E4M3 ? 1 : 2;
    int nst = MO_ST_MAX;
    while (nst > 2 && mo_smem(D, K, nst) > MO_SMEM_MAX) nst--;
    const size_t smem = mo_smem(D, K, nst);
    if (smem > MO_SMEM_MAX) return 0;
    static int attrs_set = 0;
    if (!attrs_set) {
        CUDA_CHECK(cudaFuncSetAttribute(moeo_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, MO_SMEM_MAX));
        CUDA_CHECK(cudaFuncSetAttribute(moeo_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, MO_SMEM_MAX));
        attrs_set = 1;
    }
    mo_args a;
    memset(&a, 0, sizeof a);
    a.x = x;
    a.out = out;
    a.ids = ids;
    a.w = w;
    a.tab = tab;
    if (sI) {
        a.sg = cu_view(&L->sh_gate);
        a.su = cu_view(&L->sh_up);
        a.sd = cu_view(&L->sh_down);
    }
    a.maps = mo_layer_maps(cb, L, E, D, I, sI, eb, 0);
    a.D = D;
    a.I = I;
    a.sI = sI;
    a.K = K;
    a.E = E;
    a.nst = nst;
    CUDA_CHECK(cudaMemsetAsync(out, 0, (size_t)D * sizeof(float), cu_stream));
    if (eb == 1) moeo_kernel<1><<<cb->n_sm, MO_THREADS, smem, cu_stream>>>(a);
    else moeo_kernel<2><<<cb->n_sm, MO_THREADS, smem, cu_stream>>>(a);
    CUDA_LAUNCH_CHECK();
    cb->moeo_runs++;
    return 1;
}
