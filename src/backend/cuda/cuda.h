/* CUDA backend internals shared by its .cu files: the backend struct, grow-only device workspaces,
 * error-checking macros and the element loads that read a weight in its stored dtype.
 *
 * Numerics: every op computes in fp32 like the CPU reference (weights are read in their stored dtype
 * and converted, FP8 multiplied by its 128x128 block scale), so results match the CPU op up to the
 * order of fp32 additions. GEMMs with more than a few rows run as cuBLAS SGEMM on fp32 tiles of the
 * weight dequantized into a workspace; tensor-core (BF16 / FP8 block-scaled) paths are speed work. */
#ifndef DS_BACKEND_CUDA_H
#define DS_BACKEND_CUDA_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <math.h>
#include <string.h>

extern "C" {
#include "backend/backend.h"
#include "backend/cuda/cuda_api.h"
#include "core/status.h"
}

/* A CUDA or cuBLAS failure inside an op is a broken invariant here (the op table returns void):
 * abort with file:line and what failed. Failures that a user can cause (out of memory at load) are
 * returned as ds_status by the functions that can meet them. */
void ds_cuda_die(const char *file, int line, const char *what, const char *msg) __attribute__((noreturn));
#define CUDA_CHECK(call) do { cudaError_t e_ = (call); \
    if (e_ != cudaSuccess) ds_cuda_die(__FILE__, __LINE__, #call, cudaGetErrorString(e_)); } while (0)
#define CUBLAS_CHECK(call) do { cublasStatus_t s_ = (call); \
    if (s_ != CUBLAS_STATUS_SUCCESS) ds_cuda_die(__FILE__, __LINE__, #call, cublasGetStatusString(s_)); } while (0)
/* After every kernel launch. */
#define CUDA_LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

/* Every op runs on this one stream (created blocking, so the synchronous cudaMemcpy calls of the legacy
 * stream still order with it); a decode step is captured from it into a CUDA graph (cuda_graph.cu). */
extern cudaStream_t cu_stream;
/* 1 while cu_stream is being captured into a graph (no cudaMalloc, synchronous copies or timing then) */
static inline int cu_capturing(void) {
    cudaStreamCaptureStatus cs;
    CUDA_CHECK(cudaStreamIsCapturing(cu_stream, &cs));
    return cs != cudaStreamCaptureStatusNone;
}

/* Programmatic dependent launch (Hopper; DSINFER_CUDA_PDL, read at backend creation): a kernel launched
 * with cu_launch may start while the kernel before it on the stream is still running, once every block of
 * that one has called cu_pdl_trigger() (or exited). Contract of every kernel launched this way: nothing it
 * reads that an earlier kernel wrote, and nothing it writes, is touched before cu_pdl_wait() (which returns
 * when the earlier kernels are complete and their writes visible); before it, only reads of data no kernel
 * writes (weights; cu_prefetch_l2). Both are no-ops for a kernel launched without the attribute, so every
 * kernel here that calls them is correct either way. Captured into CUDA graphs as programmatic edges. */
extern int cu_pdl;
/* With cu_pdl: the GEMV and absorb_q kernels prefetch their weights to L2 before cu_pdl_wait
 * (DSINFER_CUDA_PDL_PREFETCH, default 1; always 0 without PDL, where it only delays the real loads). */
extern int cu_pdl_prefetch;
/* Which weight streams carry an L2 evict_first policy (DSINFER_CUDA_L2EF, a set of the bits below, read at backend
 * creation; default CU_L2EF_GEMV | CU_L2EF_MOEO): bytes read once a step then do not push out of L2 what the step's
 * small kernels read again (code, parameters, activations, norm weights, the KV cache; cuda_wgmma.h's tma_load_stream).
 * A bit clear: that stream's loads carry no L2 hint. A cache hint only: no value changes with it. */
#define CU_L2EF_GEMV 1     /* gemv_v2_kernel's weight loads */
#define CU_L2EF_MOEO 2     /* moeo_kernel's gate / up rows and down strips (batch 1's experts) */
#define CU_L2EF_MOE_WG 4   /* moe_wg_kernel's weight tiles (the decode experts from batch 2) */
extern int cu_l2ef;
__device__ __forceinline__ void cu_pdl_wait(void) { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void cu_pdl_trigger(void) { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
/* Starts pulling [p, p + bytes) into L2 (weights a kernel will read after cu_pdl_wait); thread t of n
 * takes the 128-byte lines t, t + n, ... */
__device__ __forceinline__ void cu_prefetch_l2(const void *p, size_t bytes, int t, int n) {
    const char *c = (const char *)p;
    for (size_t o = (size_t)t * 128; o < bytes; o += (size_t)n * 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(c + o));
}
/* kernel<<<grid, block, smem, cu_stream>>>(args) with the n launch attributes at (n may be 0) */
template <typename... P, typename... A>
static inline void cu_launch_attrs(cudaLaunchAttribute *at, int n, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                                   A... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = cu_stream;
    cfg.attrs = at;
    cfg.numAttrs = (unsigned)n;
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, ((P)args)...));
}
/* ... with the programmatic-dependent-launch attribute when pdl */
template <typename... P, typename... A>
static inline void cu_launch_pdl(int pdl, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, A... args) {
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cu_launch_attrs(at, pdl ? 1 : 0, kernel, grid, block, smem, args...);
}
/* ... as a cooperative launch (every block co-resident, as a grid-wide barrier needs) */
template <typename... P, typename... A>
static inline void cu_launch_coop(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, A... args) {
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeCooperative;
    at[0].val.cooperative = 1;
    cu_launch_attrs(at, 1, kernel, grid, block, smem, args...);
}
template <typename... P, typename... A>
static inline void cu_launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, A... args) {
    cu_launch_pdl(cu_pdl, kernel, grid, block, smem, args...);
}
/* DSINFER_CUDA_F8_PDL=1 (with DSINFER_CUDA_PDL=1; opt-in, fourteenth session): the W8A8 chain's kernels (the rows'
 * quantizer rows_fp8_warp_kernel, f8_wgmma_kernel, f8_reduce(4)_kernel, silu_quant_kernel, f8_tma_kernel) launched
 * with the attribute too; f8_wgmma_kernel requests its first stages' weights before cu_pdl_wait. Default 0: those
 * launch plainly (each waits for the kernel before it to finish). */
extern int cu_f8_pdl;
#define CU_F8_PDL (cu_pdl && cu_f8_pdl)

/* A device buffer that only grows (reallocated when a larger size is asked for). A reallocation bumps
 * cu_ws_epoch: captured graphs hold the old addresses and are dropped when the epoch moved. */
typedef struct {
    void *p;
    size_t bytes;
} cu_ws;
extern unsigned long cu_ws_epoch;
void *cu_ws_get(cu_ws *w, size_t bytes);
void cu_ws_free(cu_ws *w);

/* The speed techniques, each switchable by an environment variable (read once at backend creation):
 *   DSINFER_CUDA_TC=1        BF16 tensor-core GEMMs (fp32 accumulate) for M > GEMV_MAX_M; default 0:
 *                            exact fp32 SGEMM, what the op tests compare strictly.
 *   DSINFER_CUDA_ATTN_TC=0   the naive (prefill) attention on fp32 CUDA cores, one block per (token, head);
 *                            default 1: FlashAttention-2 style on the tensor cores where the heads are 128 + 64
 *                            / 128 (cuda_fa_tc.cu: BF16 MMAs, fp32 sums).
 *   DSINFER_CUDA_MOE_TC=0    with TC on, the grouped routed experts stay on the GEMV kernels; default 1: on
 *                            the tensor cores above GEMV_MAX_M tokens (cuda_moe_tc.cu; BF16 activations),
 *                            then at any M (no per-expert host sync in prefill either).
 *   DSINFER_CUDA_SKINNY=1    with TC on, FP8 linears of 9..SKINNY_MAX_M rows read the weight in place with
 *                            cuda_moe_tc.cu's kernel; default 0: dequantised to BF16 for cuBLAS. Measured
 *                            slower on the H200 (V2-Lite FP8 batch 64: 33.2 vs 28.4 ms a step): the FP8 ->
 *                            BF16 conversion in registers bounds the kernel (bench/RESULTS.md).
 *   DSINFER_CUDA_FP8_FAST=1  FP8 weights decoded by integer moves and one multiply (cu_fp8_scaled, the same
 *                            values) instead of the cvt instructions, in the GEMV v2 and tensor-core expert
 *                            kernels; default 0 until timed on a GPU (the expert kernel was conversion-bound).
 *   DSINFER_CUDA_GRAPHS=0    no CUDA graphs for decode steps (default 1: one graph per batch size).
 *   DSINFER_CUDA_FUSED_ATTN=0  the per-(token, head) absorbed kernel, one launch per sequence (default 1:
 *                            one launch for all tokens, all heads of a token share one pass over the KV,
 *                            split-KV).
 *   DSINFER_CUDA_MLA_TC=0    the fused decode on fp32 CUDA cores (exact: what THR_ATTN compares); default 1:
 *                            on the tensor cores where kv_lora_rank is 512 and rope 64 (cuda_mla_tc.cu: BF16
 *                            MMAs, fp32 sums; op NMSE ~5e-6; H200 64 x 4K, 16 heads: 1.09 -> 0.28 ms).
 *   DSINFER_CUDA_MOE_GROUPED=0 the MoE with a host sync per layer and per-expert launches (default 1:
 *                            device-side expert offsets, grouped expert GEMV kernels, no host sync, for
 *                            M <= DSINFER_CUDA_MOE_GROUPED_MAX_M, default 256).
 *   DSINFER_CUDA_VEC_GEMV=0  the scalar GEMV (default 1: 16-byte weight loads, fused gate/up/SiLU).
 *   DSINFER_CUDA_GEMV2=0     the first vectorised GEMV (one warp per row, two loads in flight per lane);
 *                            default 1: GEMV v2 (up to 8 independent 16-byte loads per lane, split-K
 *                            across warps when rows are few). Only with VEC_GEMV on.
 *   DSINFER_CUDA_ROUTE2=0    the router as one thread per token with local arrays; default 1: one warp
 *                            per token (cuda_moe.cu route_v2_kernel; H200 V2-Lite batch 1: 139 -> 177 tok/s).
 *   DSINFER_CUDA_FP8_GEMM=1  W8A8 for FP8 weights (cuda_fp8gemm.cu; from DSINFER_CUDA_FP8_GEMM_MIN_M rows): activations
 *                            quantized per token x 128 columns (spec 12.2), then the block-scaled FP8 GEMM:
 *                            the own wgmma kernels (DSINFER_CUDA_FP8_OWN=2, default) or cuBLASLt's (spec
 *                            12.5, _FP8_OWN=0). Default: on with DSINFER_CUDA_TC=1 (eighth session: FP8 decode
 *                            b32 +8%, b64 +4%, prefill 512 +4%), else 0: activations stay fp32 (W8A16, exact).
 * Fourth session (H200 figures in bench/RESULTS.md, "GPU runs of the fourth session"):
 *   DSINFER_CUDA_MOE_LIVE=0  grouped expert GEMVs launch blocks for every expert; default 1: only for the
 *                            experts with rows (batch 1: 247 -> 280 tok/s).
 *   DSINFER_CUDA_RMS_VEC=0   rmsnorm_kernel only; default 1: register-cached rows (rmsnorm_vec_kernel).
 *   DSINFER_CUDA_GROUP2=0    group_kernel (a thread per expert); default 1: a warp per expert with ballots.
 *   DSINFER_CUDA_ABSORB_TC=0 with TC, W_UK / W_UV stay GEMV-style kernels; default 1: strided batched BF16
 *                            GEMMs above 8 tokens (batch 256: 6830 -> 8250 tok/s).
 *   DSINFER_CUDA_DEQUANT_VEC=0 the per-element FP8 -> BF16 dequant; default 1: 16 codes a thread.
 *   DSINFER_CUDA_MOE_TG=1|2|4 moe_tc_kernel's token groups a pass; default 0: from the mean rows per expert.
 * Sixth session:
 *   DSINFER_CUDA_MOE_TC2=0   BF16 routed experts through moe_tc_kernel; default 1: moe_tc2_kernel (cp.async
 *                            stages in shared memory, an expert's rows up to 32 or 64 in one pass over its
 *                            weights; decode batch 64 +8%, 256 +12%, prefill 512 +42%).
 *   DSINFER_CUDA_GROUP_WIDE_MIN pairs from which the grouped MoE path groups over many blocks (default 1024;
 *                            decode batch 256 +2%).
 *   DSINFER_CUDA_MOE_TC2_ST=3|4|6 its pipeline stages (default 4; 6 only with 32 tokens a pass).
 *   DSINFER_CUDA_MOE_TC2_TOK=32|64 its tokens a pass; default 0: 32 at a mean of <= 16 rows per expert, else 64.
 *   DSINFER_CUDA_PDL=1       programmatic dependent launch (cu_launch; with DSINFER_CUDA_PDL_PREFETCH=0 no
 *                            L2 prefetch); default 0: measured no gain.
 *   DSINFER_CUDA_FP8_FAST=1  FP8 decoded by integer moves (cu_fp8_scaled); default 0: measured slower.
 * Fifth session:
 *   DSINFER_CUDA_LT_TUNE=0   with TC, BF16-weight linears through cublasGemmEx's default algorithm; default 1:
 *                            through cuBLASLt with the algorithm timed per shape once and kept on disk
 *                            (cuda_lt_tune.cu; V2-Lite decode b128/b256 +2.6%/+4.1%, 8K prefill +1.5%; FP8
 *                            weights' BF16 tiles stay on cuBLAS: tuned they were 2.5-4.8% slower).
 *   DSINFER_CUDA_MOE_GEMM=0  with TC, prefill-sized MoE batches stay on the grouped tensor-core kernel; default 1:
 *                            from DSINFER_CUDA_MOE_GEMM_MIN_M tokens (default 1024) one cuBLAS GEMM per expert
 *                            and projection (cuda_moe_gemm.cu; one host sync a layer for the expert offsets).
 *   DSINFER_CUDA_FA2=0       the first tensor-core prefill attention (fp32 K/V staged per tile); default 1: BF16
 *                            K/V, cp.async double buffering, 128 queries a block (cuda_fa_tc.cu fa_prefill2).
 *   DSINFER_CUDA_OP_TIMES=1  a diagnostic: each backend op timed alone, a table on stderr at exit (cuda_optimes.cu).
 * Eleventh session (bench/RESULTS.md, "GPU runs of the eleventh session"):
 *   DSINFER_CUDA_SHARED_STREAM=1  the shared experts on a second stream from before the router to the combine
 *                            (cuda_side.cu), for batches of DSINFER_CUDA_SHARED_STREAM_MIN_M .. _MAX_M tokens (default
 *                            9 .. 128: batch 64 / 128 +2%, batch 1 and 256 1-2% slower); default 0: in line (a
 *                            process that used it at batch 64 ran batch 256 3% slower afterwards, not explained yet).
 *   DSINFER_CUDA_HFUSE=0     q (or q_a) and kv_a as two linears; =1: one launch over both weights (backend linear2:
 *                            the v2 GEMV up to 8 rows, the W8A8 cp.async kernel up to 64; batch 1 +2%, FP8 batch 64
 *                            +2%); default 2: also an MLP's gate and up above 8 rows (shared experts, dense layers;
 *                            FP8 batch 64 +1.5%, twelfth session run 2).
 *   DSINFER_CUDA_F8_TICKETS=1 the W8A8 cp.async kernel's split-K partials summed by each tile's last split (at most 4
 *                            splits); default 0: the reduce kernel (measured faster).
 *   DSINFER_CUDA_ABSORB2=1   the absorbed q (W_UK^T q_nope) of 1 or 2 tokens by absorb_q_v2_kernel; default 2
 *                            (fifteenth session): absorb_q_v3_kernel for 1 .. 8 tokens (DSINFER_CUDA_ABSORB3_MAX_T), 128
 *                            blocks a token pair at 16 heads instead of 32 (FP8 b1 3.43 -> 3.28 ms, b2 3.93 -> 3.63, b4
 *                            4.78 -> 4.49, b8 6.19 -> 6.00; BF16 b1 3.37 -> 3.23, b4 6.24 -> 5.94).
 *   DSINFER_CUDA_MLA_WG=0    the BF16 cache's MLA decode at H % 64 == 0 (V3's 128 heads) on the mma.sync kernels, 16
 *                            heads a block; =1: 64 heads a block on wgmma, both warpgroups on every tile (64 x 4K at
 *                            128 heads 0.471 -> 0.227 ms kernel time, fourteenth session); default 2 (fifteenth
 *                            session): v2, FlashMLA's schedule (a warpgroup's own tiles' S, softmax and P, O split by
 *                            columns; 0.215 -> 0.149 ms) where TMA can load the rows (page 8 .. 64 dividing 64, or a
 *                            multiple of 64), else v1.
 *   DSINFER_CUDA_F8_PRELOAD=1 the W8A8 cp.async kernel with all 4 ring stages in flight from its start;
 *                            DSINFER_CUDA_F8_REDUCE_VEC=1 the split-K reduce four values a thread (both the same bits;
 *                            opt-in, thirteenth session, not yet timed); DSINFER_CUDA_F8_SPLIT_KB=N (default 4): the
 *                            fewest 128-column stages of a K split of the W8A8 GEMMs.
 *   DSINFER_CUDA_KVB_BF16=0  with TC, each layer's FP8 kv_b converted to BF16 at every step for the absorbed
 *                            attention's batched GEMMs; default 1: once at weight upload (+4 MB a layer on V2-Lite,
 *                            +32 MB on V3; FP8 batch 64 -0.11 ms a step, twelfth session run 2).
 *   DSINFER_CUDA_QKV_FUSE=0  the kv_a RMSNorm, the RoPE of q and of kv and the KV cache store as four launches;
 *                            default 1: one launch a layer (qkv_finish_kernel, the same device code as the four
 *                            kernels; batch 1 +1.7%, FP8 batch 64 +1%, BF16 +0.4 .. 1.8%).
 *   DSINFER_CUDA_QKV_SPLIT=N  that launch with q's heads N a block beside one block for kv, per token (default 4; 0: one
 *                            block a token does both; the same bits), where q and kv are whole tensors (BF16 b64 -0.09 ms);
 *                            DSINFER_CUDA_QKV_SPLIT_PARTS=1 where it sums the W8A8 chain's split-K partials first too
 *                            (default 0: FP8 b64 the same, b256 +0.18 ms).
 *   DSINFER_CUDA_MLP_FUSE=0  the W8A8 MLP as ten launches; default 1: up to 64 rows in five (quantize x; gate and up
 *                            in one GEMM; one kernel for their split-K sums, SiLU * up and the down input's
 *                            quantization; down; its reduce; FP8 batch 64 +1.5%, the same bits).
 * Twelfth session:
 *   DSINFER_CUDA_ROUTER_FUSED=0  the router GEMM (fp32 sums) and the top-k as two launches (three with the
 *                            dequantize of SGEMM's weight tile); default 1: one kernel (router_fused_kernel: each block
 *                            a slice of experts' logits for 4 tokens, the group's last block routes them) for
 *                            DSINFER_CUDA_ROUTER_FUSED_MIN_M .. _MAX_M tokens (default 9 .. 256: at 1 and 8 tokens
 *                            the GEMV and the routing kernel measured faster).
 *   DSINFER_CUDA_MOE_TC_MIN_M=N  the grouped routed experts on the tensor cores (moe_wg_kernel) from N tokens, the
 *                            grouped GEMV below (default: FP8 experts from 2 tokens, BF16 from 4; before, the GEMV
 *                            took up to 8 and batch 8 ran at 18% of its roofline: FP8 batch 8 12.3 -> 9.0 ms).
 *   DSINFER_CUDA_FP8_GEMM_MIN_M=N  the dense FP8 linears (linear, linear2, the MLP) as W8A8 from N rows, the GEMVs
 *                            below (default 2: FP8 batch 8 8.96 -> 6.31 ms, batch 4 5.96 -> 4.86, batch 2 4.45 -> 4.00;
 *                            batch 1 on the GEMVs, 3.73 ms as W8A8 against 3.51; fourteenth session; was 9).
 *   DSINFER_CUDA_W8_SHARED_X=0  linear2 of two FP8 weights above 64 rows (q / kv_a; an MLP's gate / up with hfuse 2)
 *                            quantizing x once per linear; default 1: once for both W8A8 GEMMs (the same bits; FP8
 *                            b128 / b256 -0.1 ms, prefill 512 .. 8K -1 .. -2%, fourteenth session).
 *   DSINFER_CUDA_COMBINE_BF16=0  the MLA split combine writes o_lat in fp32 and a conversion kernel makes the W_UV
 *                            GEMM's BF16 input; default 1: the combine writes it in BF16 (the same bits, a launch
 *                            fewer a layer above 8 tokens).
 *   DSINFER_CUDA_COMBINE2=0  the MLA split combine as before the fourteenth session (mla_combine_kernel); default 1:
 *                            mla_combine_v2_kernel where the grid has at most two blocks an SM (batch 1 .. ~4), the
 *                            same bits with its loads issued at once (batch 1: 10.1 -> 5.1 us a layer in ncu, the step
 *                            -0.1 ms); =2 at every size (batch 64 / 256 +0.14 / +0.34 ms: its registers cost
 *                            occupancy).
 *   DSINFER_CUDA_MLA_WG_TMA=0  the wgmma MLA decode's rows by cp.async; default 1: by TMA (one copy a page-run and
 *                            64-column chunk) where the page size is 8 .. 64 dividing 64 or a multiple of 64 (128
 *                            heads, 64 x 4K: 0.225 -> 0.215 ms kernel time, fourteenth session).
 *   DSINFER_CUDA_GEMV_F8C=1  the v2 GEMV's FP8 weights scaled once a 16-code chunk and token (opt-in, written in the
 *                            fourteenth session without device time left: batch 1's FP8 GEMVs ran at 0.55 .. 1.6
 *                            TB/s, about as long as BF16's for half the bytes).
 *   DSINFER_CUDA_GEMV_T1=0   one-row GEMVs on the 8-row kernel; =1 (twenty-third session): gemv_v2_kernel's
 *                            one-row form (TMAX = 1: 4 blocks an SM, split K within one wave; where K splits
 *                            otherwise, another order of the partial sums).
 *                            DSINFER_CUDA_GEMV_T1_KS=1|2|4|8 forces its split of K (lab, process-wide). =2 (the
 *                            default): FP8 and BF16 one-row GEMVs with two weight rows a warp (each x chunk loaded
 *                            once for both; FP8 b1 2.84 -> 2.61 ms, BF16 2.86 -> 2.78).
 *   DSINFER_CUDA_F8_PDL=1    with DSINFER_CUDA_PDL=1: the W8A8 chain launched with PDL too, f8_wgmma_kernel's first
 *                            weights requested before its wait (opt-in, fourteenth session; see cu_f8_pdl below).
 *   DSINFER_CUDA_F8_TMA1=0   the W8A8 GEMM up to 64 rows with its stages by cp.async (f8_wgmma_kernel<1>); default 1
 *                            (sixteenth session): by TMA (f8_tma1_kernel, the same bits; FP8 b2 .. b64 -0.1 ms a step).
 *   (DSINFER_CUDA_F8_CLUSTER=1, the W8A8 GEMM's K splits summed in thread-block clusters: slower from 64 rows;
 *                            removed in the thirty-eighth session.) DSINFER_CUDA_F8_TM_PREF=0: the TMA kernel's
 *                            scales loaded after its MMAs; default 1 (sixteenth session): before its stage wait (the
 *                            same bits; `bench --ops` M 128 0.91 -> 0.94x cuBLASLt, decode b128 / b256 unchanged).
 *   DSINFER_CUDA_MOE_WG_QF=1 the FP8 decode experts' gate / up epilogue (moe_wg_kernel) writes the down projection's
 *                            input codes and scales itself (no BF16 copy, no quantizer launch; the same bits; opt-in:
 *                            measured slower, FP8 b8 +0.15 ms, b64 +0.2).
 *   DSINFER_CUDA_MOE_WG_PDL=0|1|2 the decode experts' moe_wg_kernel launches with programmatic dependent launch (1: down,
 *                            2: gate / up too; the same bits): default 2 for BF16 experts (b64 / b256 -0.17 ms), 0 for
 *                            FP8 (slower with it: b64 +0.07 .. +0.1 ms, b256 +0.15; twenty-fourth session run 3).
 *   DSINFER_CUDA_ROUTER_TOK=1|2 the fused router's tokens a block (default 4; the same bits): measured no faster.
 *   (DSINFER_CUDA_ROUTE_GROUP=1, the grouping done by the routing kernel: measured slower, b64 +0.55 ms; removed in the
 *                            thirty-eighth session.)
 *   DSINFER_CUDA_L2_PREFETCH=1 after each layer's MoE the next layer's dense weights (attention projections, router,
 *                            shared experts) are pulled into L2 by bulk prefetches on a stream of their own
 *                            (cuda_prefetch.cu; changes no value; opt-in: measured slower, b1 +4%, b2 +9%).
 * Seventeenth session:
 *   (DSINFER_CUDA_F8_TM_CLUSTER=1, the TMA W8A8 GEMM's K splits summed inside thread-block clusters: measured slower,
 *                            FP8 b128 +0.45 ms, `bench --ops` M 128 0.92 -> 0.85x; removed in the thirty-eighth session.)
 * Eighteenth session (measured in RESULTS "GPU runs of the eighteenth session"):
 *   DSINFER_CUDA_MLP_FUSE=2  (default) the W8A8 MLP above 64 rows too (the TMA GEMMs' partials summed by
 *                            silu_quant_kernel: five launches for eight, the same bits; with QUANT_WARP FP8 b128
 *                            -0.14 ms, b256 -0.17); =1: up to 64 rows only.
 *   DSINFER_CUDA_QUANT_WARP=1  (default) the decode experts' BF16 down input quantized a warp a 128 values
 *                            (rows_fp8_bf16_warp_kernel, the same codes) instead of a block of 128 threads (FP8 b128
 *                            -0.19 ms, b256 -0.36).
 *   DSINFER_CUDA_F8_TM_STORE=1  (default) the dense TMA W8A8 GEMM's sums (its result or K-split partials) written
 *                            through shared memory by TMA stores that run on while the warpgroup starts its next tile
 *                            (tm_store_tma; 5 stages instead of 6; the same bits), from DSINFER_CUDA_F8_TM_STORE_MIN_M
 *                            rows (default 512: `bench --ops` M 4096 0.82 -> 0.87x cuBLASLt, 32768x512 0.79 -> 1.02x;
 *                            decode rows unchanged within noise, so left out below 512).
 *   (DSINFER_CUDA_F8_BN192=1, the dense TMA W8A8 GEMM with 128 x 192 tiles, f8_tma192_kernel: measured slower, M 4096
 *                            0.87 -> 0.72x cuBLASLt; removed in the thirty-eighth session.)
 * Twenty-fifth session (written without device time), measured in the twenty-sixth (RESULTS "GPU runs of the
 * twenty-sixth session", dev/cuda/KERNELS.md "Twenty-sixth session"):
 *   DSINFER_CUDA_QUANT_WARP=2  as 1, with the quantizer's PDL trigger after its stores instead of at its start (with
 *                            DSINFER_CUDA_MOE_WG_PDL=1|2: where FP8's down launch may start; the same codes); opt-in:
 *                            no gain (a PDL boundary after a wide grid costs 0.2 .. 0.3 us, the trigger's place aside).
 *   (DSINFER_CUDA_F8_TM_MC=1, row-block pairs sharing each weight tile by TMA multicast: 6% slower than one block, L2
 *                            not being the kernel's limit; removed in the thirty-eighth session.)
 *   DSINFER_CUDA_GEMV_T1=4   the one-row GEMVs of FP8 and BF16 weights with four weight rows a warp (grp_rows4: each x
 *                            chunk loaded once for four rows; each row's sum the one-row pass's); the default since the
 *                            twenty-sixth session (FP8 b1 2.62 -> 2.56 ms, BF16 2.76 -> 2.68); =2, =1 as before.
 *   DSINFER_CUDA_MOE_WG_PIPE=1  the decode experts' FP8 down launch (moe_wg_kernel) with two k-blocks' MMAs in flight a
 *                            consumer warpgroup, issued before the previous one is promoted (the same bits); =2: and
 *                            gate / up at 32 tokens a chunk; opt-in: within the spread (down 63 -> 61 us a layer).
 *   DSINFER_CUDA_MOE_HALF=1  the prefill MoE's grouped W8A8 tiles of at most 64 of their expert's rows load those 64
 *                            rows only (24 KB a stage, one consumer warpgroup's MMAs; the same bits); opt-in: no gain
 *                            on the V3 MoE layer (592 -> 593 TFLOP/s).
 * Nineteenth session (RESULTS "GPU runs of the nineteenth session"):
 *   DSINFER_CUDA_FA3=2       (default) the naive-form prefill attention on wgmma with TMA copies, overlapped within a
 *                            warpgroup (fa_prefill3o_kernel, cuda_fa_wg.cu: S of tile k issued before P V of tile k - 1, K
 *                            and V released separately; 8K x 16 heads 0.532 ms, 83% of the BF16 rate); =1: without the
 *                            overlap (fa_prefill3_kernel: 128 queries x one head a block, a producer warpgroup, two
 *                            consumers; 8K x 16 heads 2.14 -> 0.586 ms, prefill 8K BF16 173 -> 134 ms, FP8 148 -> 107);
 *                            =0: v2 (mma.sync).
 *   DSINFER_CUDA_MOE_COMBINE2=1 (default) the routed experts' weighted sum a token a block with 16-byte loads
 *                            (moe_combine_sorted2_kernel, the same bits; 389 us a layer at 8K before; prefill 8K
 *                            -5 ms); =0: v1 (a block per 256 columns of a token); =2 every row a thread adds requested
 *                            before the first addition (FP8 b1 .. b128 -0.04 .. -0.1 ms, b256 +0.04 .. +0.07); -1 (the
 *                            default since the thirtieth session): 2 up to 128 tokens, 1 above.
 * Twentieth session:
 *   DSINFER_CUDA_GROUP3=1    (default) the grouped MoE's grouping a thread a pair (group_v3_kernel: warp matches and a
 *                            block scan, the same outputs as group_v2_kernel) up to 2048 pairs, where group_v2_kernel
 *                            or the three-launch wide form ran (FP8 b64 -0.14 ms, b1 / b8 -0.05); =0: those.
 *   (DSINFER_CUDA_ROUTER_FUSED=2, the fused router on a thread-block cluster: not faster at b64, b256 +0.45 ms, twentieth
 *                            session run 2; removed in the thirty-eighth session.)
 * Twenty-first session:
 *   DSINFER_CUDA_MOE_SHARED_IN=1  the shared experts run inside the routed experts' two moe_wg_kernel launches as
 *                            virtual experts (a slice of moe_intermediate_size rows each, over all M tokens), their
 *                            sum added by the combine: five launches fewer a layer (x's quantization, two W8A8 GEMMs,
 *                            their split-K sum and SiLU); up to DSINFER_CUDA_MOE_SHARED_IN_MAX_M tokens (256), FP8
 *                            experts only with the W8A8 linears on; =0: in line (or on the side stream when that is on).
 * Twenty-ninth session:
 *   DSINFER_CUDA_CHAIN_FUSE=2 (default) the W8A8 chain's fused forms (attn_in, linear_add_rmsnorm: the norm kernel makes
 *                            the GEMM's input codes, the next kernel sums its split-K partials) from 65 to
 *                            DSINFER_CUDA_CHAIN_TMA_MAX_M rows (256) too, on the TMA GEMM's partials (a launch a weight,
 *                            each with its own splits): four launches a layer fewer at b96 .. b256, the same bits (op
 *                            test attnin); FP8 b96 -0.19 ms, b128 / b192 -0.16, b256 -0.21; =1: 2 .. 64 rows only
 *                            (the twenty-second session's), =0: none.
 *   DSINFER_CUDA_MOE_WG_ORDER=0|1|2  the decode experts' items a persistent CTA takes (mw_span_of; the same bits): 0
 *                            round robin over the grid, 1 round robin over the fewest CTAs that keep the rounds, 2
 *                            contiguous runs; default 1 up to 128 tokens (FP8 b64 -0.045 ms), 0 above (b256 +0.01 ..
 *                            +0.04 with 1); 2 is slower (FP8 b256 +0.3 ms, BF16 b256 +1.1).
 *   DSINFER_CUDA_L2_PREFETCH=2  the next layer's dense weights pulled into L2 by a launch on the main stream after each
 *                            MoE (up to DSINFER_CUDA_L2_PREFETCH_MAX_M tokens, 8); opt-in: slower (FP8 b1 +0.22 ms,
 *                            BF16 b1 +0.5, FP8 b64 +0.28; twenty-ninth session run 4).
 *   DSINFER_CUDA_QB_FUSE=1   (default) qkv_finish_kernel also writes q_nope's BF16 rounding for the absorbed attention's
 *                            batched GEMMs (from 9 tokens with the tensor cores), which then skip their to_bf16 launch:
 *                            the same bits (op test attnin), FP8 b64 / b128 / b256 -0.04 / -0.09 / -0.04 ms; =0: the
 *                            conversion launch.
 *   DSINFER_CUDA_MOE_WG_LAB=BITS, DSINFER_CUDA_MOE_WG_GRID=N  lab switches of the decode experts (thirtieth session):
 *                            LAB timing-only forms with wrong results (1: the rows' codes at an item's first stage only,
 *                            2: no MMAs, 4: the weights as 16 KB runs, 8: gate / up's store without SiLU); GRID at most N
 *                            persistent CTAs (the same bits).
 *   DSINFER_CUDA_MOE_WG_NT48=N  the decode experts at 48 tokens a chunk from 13 to N rows an expert on average (default
 *                            20: V2-Lite b192 FP8 -0.19 ms; at 24 rows, b256, 64 is faster); 0: 64 above 12 rows.
 * Thirty-first session:
 *   DSINFER_CUDA_MOE_WG_SX=1 (default) the FP8 decode experts' items (their fields, weight scales and token scales)
 *                            staged by the producer warpgroup's three idle warps into two item buffers handed over by
 *                            mbarriers (mw_args.sx), not found and staged by the consumer warpgroups between two barriers
 *                            at every item's start; where an item fits half of MW_XS (V2-Lite always; V3's gate / up at
 *                            64 tokens a chunk not). The same bits (op test moesx); FP8 b64 -0.22 ms, b256 -0.67; =0 off.
 *   DSINFER_CUDA_MOE_WG_ST2=1 (default) the decode experts' gate / up store (BF16 SiLU(g) * u, FP8 and BF16 experts, not with
 *                            DSINFER_CUDA_MOE_WG_QF) as whole 32-byte sectors through 256 bytes of shared memory a warp,
 *                            not as 16-byte halves (mw_store_pair). The same bits (op test moest2); b256 FP8 -0.08 ms,
 *                            BF16 -0.1; =0 off.
 *   DSINFER_CUDA_ROUTER_XS=1 the fused router (router_fused_kernel) stages its token group's x rows in shared memory once
 *                            a block (where TOK x D x 4 bytes <= 48 KB: V2-Lite at 4 tokens a block, V3 at 1), instead
 *                            of every warp reading them from global memory. The same bits (op test router). Opt-in:
 *                            slower (RESULTS thirty-first session run 11: FP8 b256 +0.07 ms, BF16 +0.1; the kernel
 *                            alone 22.3 against 19.2 us a layer), though run 7 had measured it faster.
 * Thirty-fifth session (measured in RESULTS "GPU runs of the thirty-fifth session"; opt-in until then):
 *   DSINFER_CUDA_COMBINE_NORM_MIN_M=1  the MoE combine inside the next layer's norm at one token too: attn_in's
 *                            composition (batch 1's GEMV path) now hands the left combine to the norm kernel
 *                            (cu_norm_chain_comb, no codes) instead of launching it first. The same bits (op test combnorm).
 *   DSINFER_CUDA_MOE_DUO=1   batch 1's shared experts as the second part of the routed experts' two GEMV launches
 *                            (cu_gemv_group_duo: one more grid row of blocks with their own x, weights and output):
 *                            two launches a layer fewer; K unsplit in both parts (NMSE < 1e-10 against in line: op
 *                            test moeduo).
 *   (DSINFER_CUDA_QUANT_BPW=4, the activation quantizer's gather with four blocks a warp, and DSINFER_CUDA_GEMV_T1_SMEM,
 *   unused shared memory a one-row GEMV block asked for: measured slower everywhere, removed in the thirty-sixth session.)
 * Thirty-sixth session (no device lent then; measured in the thirty-eighth and removed: both slower at batch 1):
 *   (DSINFER_CUDA_GEMV_ASYNC=1, the four-row GEMVs' chunks staged through shared memory by cp.async: FP8 b1 +0.33 ms; and
 *                            DSINFER_CUDA_GEMV_PF=1, their chunks asked of L2 first: +0.2 .. 0.4 ms.)
 *   (DSINFER_CUDA_MOE_TILE_COLS=1, the prefill MoE's tiles column block first: measured slower in the thirty-eighth
 *                            session, more DRAM bytes, 20% longer grouped GEMMs; removed then.)
 * Fifty-second session (RESULTS "GPU runs of the fifty-second session"):
 *   DSINFER_CUDA_L2EF=BITS   the weight streams with L2 evict_first (cu_l2ef: 1 the GEMVs, 2 moeo_kernel, 4 moe_wg_kernel);
 *                            default 3 (H100 FP8 b1 2.29 -> 2.19 ms, 4K 2.43 -> 2.32; BF16 b1 and b8 .. b256 unchanged;
 *                            the moe_wg bit b64 +0.04 .. 0.12 ms, b256 +0.1 .. 0.2).
 * Thirty-seventh session (measured in the thirty-eighth and removed):
 *   (DSINFER_CUDA_ABSORB_OWN=1, the absorbed attention's two products by an own mma.sync kernel: slower than cuBLAS's batched
 *                            GEMM, FP8 b64 +0.29 ms.)
 * Engine-level (model/forward.c): DSINFER_FUSED_ADD_NORM=0 (residual add and norm as two ops),
 * DSINFER_EP_GATHER=0 (expert parallelism's all-to-all form), DSINFER_EP_GRAPHS=0 (gathered EP steps
 * not captured). */
typedef struct {
    int tc, moe_tc, skinny, graphs, fused_attn, mla_tc, attn_tc, moe_grouped, moe_grouped_max_m, vec_gemv, fp8_gemm;
    int gemv_t1;    /* one-row GEMVs on gemv_v2_kernel's one-row form (DSINFER_CUDA_GEMV_T1, default 2; cu_gemv_flags) */
    int moe_live;   /* grouped GEMV experts: blocks for the live experts only (DSINFER_CUDA_MOE_LIVE, default 1) */
    int absorb_tc;  /* with tc: W_UK / W_UV products as batched BF16 GEMMs above GEMV_MAX_M tokens (DSINFER_CUDA_ABSORB_TC, default 1) */
    int lt_tune;    /* with tc: BF16 linears through cuBLASLt with the algorithm searched per shape, cached on disk (DSINFER_CUDA_LT_TUNE) */
    int moe_gemm, moe_gemm_min_m;   /* with tc: routed experts of >= min_m tokens as cuBLAS GEMMs per expert (DSINFER_CUDA_MOE_GEMM[_MIN_M]) */
    int shared_stream;   /* the shared experts on a second stream (cuda_side.cu; DSINFER_CUDA_SHARED_STREAM, default 0) */
    int moe_wg_qf;   /* FP8 decode experts: gate / up's epilogue quantizes the down input (cuda_moe_wg.cu; DSINFER_CUDA_MOE_WG_QF:
                      * 1 a byte a thread, 2 whole rows through shared memory) */
    int moe_wg_nt48;    /* decode experts: 48 tokens a chunk from 13 to this many rows an expert on average (cu_moe_wg_chunk;
                         * DSINFER_CUDA_MOE_WG_NT48, default 20; 0: none) */
    int qkv_split;      /* qkv_finish: q's heads this many a block of their own beside kv's block (DSINFER_CUDA_QKV_SPLIT,
                         * default 4; 0: one block a token) where there are no split-K partials to sum first, and ... */
    int qkv_split_parts;  /* ... with them too (DSINFER_CUDA_QKV_SPLIT_PARTS=1; default 0: FP8 b256 +0.18 ms) */
    int comb_uv;        /* the absorbed attention's split combine and W_UV product in one launch (mla_comb_uv_kernel) at
                         * decode-sized batches (DSINFER_CUDA_COMB_UV, default 1) */
    int qkv_absorb;     /* qkv_finish given the layer's kv_b (backend.h) makes the absorbed attention's q product in its
                         * launch (qkv_absorb_kernel) where absorb_q_v3_kernel would make it (DSINFER_CUDA_QKV_ABSORB,
                         * default 1) */
    int norm_fold;      /* batch 1's attn_in with the input norm folded into the q / kv_a GEMV (cu_gemv_two_norm: the sums
                         * scaled by 1 / RMS at the end) and h += add, xn made by one more block of qkv_absorb_kernel: no
                         * norm kernel ahead of the projections (DSINFER_CUDA_NORM_FOLD, default 1 since the fifty-fourth
                         * session: H100 V2-Lite b1 FP8 -0.035 ms, BF16 -0.07; q and kv within NMSE ~2e-14 of the unfolded);
                         * also backend normed_linear at one token (V3's q_a norm before q_b, the final norm before the LM
                         * head: cu_linear_norm, the same GEMV form with one weight, nothing else written) */
    int moe_wg_order;   /* decode experts: which items a CTA takes (cuda_moe_wg.cu mw_args.order; DSINFER_CUDA_MOE_WG_ORDER;
                         * -1, the default: 1 up to 128 tokens, else 0) */
    int moe_wg_pdl;  /* decode experts (cuda_moe_wg.cu; DSINFER_CUDA_MOE_WG_PDL): 1 the down launch with programmatic dependent
                      * launch (its CTAs start their weight stream on the SMs the kernel before leaves: mw_args.pdl), 2 gate / up's
                      * launch too, 0 neither; -1 (default): 2 for BF16 experts (down right after gate / up: -0.17 ms at b64 and
                      * b256), 0 for FP8 (the quantizer between: 0.1 .. 0.2 ms slower with it) */
    int router_xs;     /* the fused router's x rows staged in shared memory (cuda_moe.cu XS; DSINFER_CUDA_ROUTER_XS) */
    int router_ks, router_ks_max_m;   /* the fused router's K slices, 1 .. 8, up to max_m tokens (cuda_moe.cu KSP;
                                       * DSINFER_CUDA_ROUTER_KS[_MAX_M]; 1: none) */
    int moe_wg_st2;    /* decode experts: gate / up's BF16 store as whole sectors (cuda_moe_wg.cu mw_args.st2; DSINFER_CUDA_MOE_WG_ST2) */
    int moe_wg_sx;     /* FP8 decode experts: token scales staged by the producer warpgroup's idle warps (cuda_moe_wg.cu
                        * mw_args.sx; DSINFER_CUDA_MOE_WG_SX) */
    int moe_wg_pipe;   /* FP8 decode experts: the down launch (1; 2: and gate / up at 32 tokens a chunk) with two k-blocks' MMAs in
                        * flight (cuda_moe_wg.cu; DSINFER_CUDA_MOE_WG_PIPE) */
    int moe_half;      /* prefill MoE: grouped tiles of <= 64 rows load 64 rows (cuda_fp8_wgmma.cu tm_groups.half; DSINFER_CUDA_MOE_HALF) */
    int moe_dyn;       /* prefill MoE: grouped tiles fetched by free blocks in table order, not dealt round-robin (0: dealt;
                        * 1: fetched, row blocks first; 2, the default: fetched, column blocks first; tm_groups.next;
                        * DSINFER_CUDA_MOE_DYN) */
    int moe_hist;      /* prefill MoE: a line of each call's rows an expert on stderr (DSINFER_CUDA_MOE_HIST; diagnostic) */
    int moe_y_bf16;    /* prefill MoE (W8A8 grouped form): down's output rows rounded to BF16 in its epilogue (half the bytes
                        * written and read by the combine): 1 direct stores, 2 (the default) through shared memory and a
                        * bulk copy a row (cuda_fp8_wgmma.cu f8_tma_kernel OB; DSINFER_CUDA_MOE_Y_BF16; 0: fp32 rows). Only
                        * the fetched-tile form (moe_dyn) makes them: with moe_dyn 0 the rows stay fp32 */
    int moe_gu_bf16;   /* prefill MoE (W8A8 grouped form): gate / up's sums rounded to BF16 in its epilogue (gu [R, 2I] BF16,
                        * half the bytes written and read by the SiLU kernel), as moe_y_bf16's forms: 1 direct stores, 2
                        * through shared memory and a bulk copy a row (f8_tma_kernel OB; DSINFER_CUDA_MOE_GU_BF16; 0, the
                        * default: fp32 sums). Another rounding point before the SiLU products' FP8 codes. With moe_dyn,
                        * not with moe_silu_epi; opt-in: not yet measured on the GPU */
    int moe_lab;       /* prefill MoE lab (timing only, wrong results): the grouped fetched-tile launches store nothing (2)
                        * or BF16 pairs in place of the fp32 sums (4) (f8_tma_kernel LAB; DSINFER_CUDA_MOE_LAB) */
    int moe_silu_epi;  /* prefill MoE: gate / up with SiLU * up and its FP8 codes in the epilogue (f8_gu_silu_kernel: 128-row
                        * tiles in two passes; with moe_dyn; DSINFER_CUDA_MOE_SILU_EPI; opt-in: not faster) */
    int route_fast;    /* the routing warps' top-k in registers, the same bits (cuda_moe.cu route_warp_fast;
                        * DSINFER_CUDA_ROUTE_FAST) */
    int moe1;          /* the MoE block of one token as one cooperative launch (cuda_moe1.cu; DSINFER_CUDA_MOE1): 1 the
                        * block, 2 and the layer's tail around it (backend layer_tail1), 3 and the attention before it
                        * (backend layer1) */
    int moe1_pf;       /* its warps ask L2 for their next phase's rows before each grid barrier (DSINFER_CUDA_MOE1_PF) */
    int moeo_strips;   /* moeo_kernel's down strips from a copy of each layer's down matrices in the strip layout (one bulk
                        * copy a stage, not a TMA gather of 16 bytes from 2048 rows; the same stage bytes, the sums up to the
                        * blocks' reduction order; extra memory: every MoE layer's down weights once more;
                        * DSINFER_CUDA_MOEO_STRIPS; H100 BF16 b1 -0.13 ms, FP8 -0.04: fifty-third session) */
    int moeo_tc;       /* moeo_kernel's sums on the tensor cores (mma.sync m16n8k16: FP8 codes converted exactly to f16,
                        * x and the SiLU products as f16 high and low halves scaled by a power of two; BF16 rows as stored,
                        * x and the products as three bf16 parts; fp32 sums; fewer instructions a byte than the fp32
                        * decode; plain and route forms; DSINFER_CUDA_MOEO_TC, on: H100 FP8 b1 -0.09 ms, session 59) */
    int moeo;          /* the MoE block of one token by intermediate ownership, one launch after the router (cuda_moeo.cu;
                        * DSINFER_CUDA_MOEO): 1; 5 with the router and routing inside the launch; 2 .. 4 timing labs
                        * with wrong sums (mo_args.lab) */
    int router_norm;   /* with moeo 1, batch 1's layer tail (backend layer_tail1) as o_proj, then one launch for the post-
                        * attention norm, the router, the routing and the MoE output's zeros (router_norm1_kernel,
                        * cuda_moe.cu; DSINFER_CUDA_ROUTER_NORM), then moeo_kernel (its tail form where opt.moeo_tail);
                        * (=2, the norm folded into the logits, measured slower and removed in the fifty-fifth session) */
    int route_zero;    /* with moeo 1 (and its tail form), the MoE output's zeros written by route_v2's launch in place of
                        * a memset node before moeo_kernel (DSINFER_CUDA_ROUTE_ZERO, default 1; 0 the memset) */
    int moeo_tail;     /* with moeo 1, batch 1's layer tail (backend layer_tail1) as the usual o_proj + norm and router
                        * launches, then moeo_kernel's tail form: the MoE block, then the next layer's residual add, input
                        * norm and q / kv_a projections in the same launch (cuda_moeo.cu; DSINFER_CUDA_MOEO_TAIL) */
    int rowo;          /* the dense linears of one token by row ownership (cuda_rowo.cu; DSINFER_CUDA_ROWO): 1 with their
                        * weights streamed before the previous kernel ends (programmatic dependent launch), 2 the same
                        * kernel without it (a lab); 3 / 4: 1 / 2 with a bulk copy a row (a lab); 5: 1 with a block's
                        * units one contiguous run; 6 / 7: 5 / 1 without the FP8 scales, 8 / 9: 1 without x's load /
                        * the arithmetic (labs, wrong sums); 10: 1 with x by a bulk copy */
    int combine_norm;  /* moe_to_attn_in's combine inside the next attn_in's norm (cuda_backend.cu; DSINFER_CUDA_COMBINE_NORM) */
    int combine_norm_min_m;   /* ... from this many tokens (DSINFER_CUDA_COMBINE_NORM_MIN_M) */
    int moe_duo;       /* batch 1's shared experts in the routed experts' GEMV launches (cuda_moe.cu; DSINFER_CUDA_MOE_DUO) */
    int mla_fold;      /* the MLA decode's split combine by each entry's last split block (cuda_mla_tc.cu; DSINFER_CUDA_MLA_FOLD) */
    int l2_prefetch;   /* the next layer's dense weights into L2 (cuda_prefetch.cu; DSINFER_CUDA_L2_PREFETCH): 1 on a side
                        * stream, 2 by a launch on the main stream; both opt-in, measured slower */
    int l2_prefetch_max_m;   /* ... up to this many tokens a step, either form (DSINFER_CUDA_L2_PREFETCH_MAX_M, default 8) */
    int shared_stream_min_m, shared_stream_max_m;   /* ... for batches of this many tokens (_MIN_M, _MAX_M; default 9 .. 128) */
    int hfuse;   /* the q (q_a) and kv_a projections in one launch (backend linear2; DSINFER_CUDA_HFUSE); 2 (default): and an MLP's gate / up */
    int mlp_fuse;   /* the W8A8 MLP's split-K sums, SiLU * up and the down input's quantization in one kernel (DSINFER_CUDA_MLP_FUSE; 1: up to 64 rows; 2 (default): above too) */
    int group3;       /* the grouping a thread a pair with warp matches and a block scan (group_v3_kernel) up to 2048 pairs
                       * (DSINFER_CUDA_GROUP3) */
    int combine2;     /* the routed experts' combine a token a block with 16-byte loads (moe_combine_sorted2_kernel, the same
                         bits; DSINFER_CUDA_MOE_COMBINE2, 1; 2: every row requested before the first addition; -1, the default:
                         * 2 up to 128 tokens, else 1) */
    int quant_warp;   /* the experts' BF16 down input quantized a warp a 128 values (rows_fp8_bf16_warp_kernel; DSINFER_CUDA_QUANT_WARP, default 1) */
    int kvb_bf16;   /* FP8 kv_b's BF16 copy made once per layer at weight upload (DSINFER_CUDA_KVB_BF16, default 1) */
    int qkv_fuse;   /* kv_a RMSNorm, both RoPEs and the cache store in one kernel (backend qkv_finish; DSINFER_CUDA_QKV_FUSE, default 1) */
    int w8_shared_x;   /* linear2 above 64 rows: x quantized once for both W8A8 GEMMs (DSINFER_CUDA_W8_SHARED_X, default 1) */
    int fp8_gemm_min_m;   /* FP8 linears as W8A8 (opt.fp8_gemm) from this many rows, GEMVs below (DSINFER_CUDA_FP8_GEMM_MIN_M, default 2) */
    int moe_tc_min_m;   /* grouped routed experts on the tensor cores from this many tokens (DSINFER_CUDA_MOE_TC_MIN_M; 0, the default: FP8 2, BF16 4) */
    int combine_bf16;   /* mla_combine writes o_lat in BF16 for the W_UV GEMM (DSINFER_CUDA_COMBINE_BF16, default 1) */
    int router_fused, router_fused_min_m, router_fused_max_m;   /* router GEMM + top-k in one kernel for min_m .. max_m tokens (DSINFER_CUDA_ROUTER_FUSED[_MIN_M|_MAX_M]) */
    int router_tok;   /* the fused router's tokens a block: 1, 2 or 4 (0: 4; cuda_moe.cu router_tok; DSINFER_CUDA_ROUTER_TOK) */
    int moe_shared_in, moe_shared_in_max_m;   /* the shared experts as virtual experts of the routed experts' moe_wg_kernel
                                               * launches, up to max_m tokens (DSINFER_CUDA_MOE_SHARED_IN[_MAX_M]) */
    int chain_fuse;   /* the W8A8 chain's quantizer and split-K sums inside their neighbours (backend attn_in and
                       * linear_add_rmsnorm; DSINFER_CUDA_CHAIN_FUSE): 1, 2 .. 64 rows (the one-warpgroup GEMM); 2, also
                       * 65 .. chain_tma_max_m rows (the TMA GEMM's partials) */
    int chain_tma_max_m;   /* the most rows chain_fuse 2 fuses on the TMA GEMM (DSINFER_CUDA_CHAIN_TMA_MAX_M, default 256) */
    int qb_fuse;   /* qkv_finish writes q_nope in BF16 for the absorbed attention's batched GEMMs (DSINFER_CUDA_QB_FUSE,
                    * default 1), from GEMV_MAX_M + 1 to CU_QB_MAX_M tokens */
} cu_opts;

/* a prepared FP8 kv_b (its device data: the key) and its BF16 copy (opt.kvb_bf16) */
typedef struct {
    const void *key;
    const __nv_bfloat16 *bf16;
} cu_kvb16;

/* The second stream of the shared experts (cuda_side.cu): its stream, cuBLAS handles and workspace, swapped
 * with the backend's own between cu_side_begin and cu_side_end */
typedef struct {
    cudaStream_t stream;
    cudaEvent_t fork, join;
    cublasHandle_t cublas, cublas_tc;
    void *lt_ws;                /* LT_WS_BYTES: the side's cuBLAS and cuBLASLt workspace */
    cu_ws ws[5];                /* the side's ws_deq, ws_tc, ws_fp8, ws_f8part, ws_f8xt */
    int active;                 /* between begin and end: cu_stream is the side stream */
    int pending;                /* ended, not yet joined into the main stream */
    long long delay_ns;         /* DSINFER_CUDA_SIDE_DELAY_NS: tests only (cuda_side.cu) */
} cu_side;

/* the L2 prefetch stream (cuda_prefetch.cu; opt.l2_prefetch) */
typedef struct {
    cudaStream_t stream;        /* NULL when off */
    cudaEvent_t fork, join;
    int pending;                /* forked, not yet joined into the main stream */
} cu_pf;

/* A MoE combine left to the next attn_in (opt.combine_norm; backend moe_to_attn_in): moe_combine's arguments (cuda_moe.cu),
 * out = moe_combine's output, which that attn_in takes as its add; active while no kernel has made out yet */
typedef struct {
    float *out;
    const float *y, *w;
    const int32_t *ids, *pos;
    int M, K, D, ns, active;
} cu_comb_pend;
#define CU_COMB_MAX_K 8    /* the choices a token the fused form takes (V2-Lite 6, V3 8) */
#define CU_COMB_MAX_NS 2   /* and the shared experts' rows (moe_combine_sorted2_kernel's CB2_NS) */
#ifdef __CUDACC__
/* The MoE combine's pieces, shared by moe_combine_sorted2_kernel<true> (cuda_moe.cu) and norm_chain_kernel's COMB form
 * (cuda_backend.cu), so that the two make the same additions in the same order (the same bits).
 * cu_comb_rank: threads k < K of the block put token m's slot k at its rank in ascending expert id (ids distinct; ties by
 * slot, as the insertion sort of the combine's plain form): s_pos / s_w [rank] = pos / w [m K + k]. The caller syncs. */
__device__ __forceinline__ void cu_comb_rank(const int32_t *ids, const int32_t *pos, const float *w, int m, int K,
                                             int *s_pos, float *s_w) {
    if (threadIdx.x < (unsigned)K) {
        int k = threadIdx.x, idk = ids[(size_t)m * K + k], r = 0;
        for (int j = 0; j < K; j++) {
            int idj = ids[(size_t)m * K + j];
            r += idj < idk || (idj == idk && j < k);
        }
        s_pos[r] = pos[(size_t)m * K + k];
        s_w[r] = w[(size_t)m * K + k];
    }
}
/* float4 column c of token m's combine: the ns (<= MAXNS) shared experts' rows of ys ([ns mt][D4] float4s) in s order
 * (ns == 0: o4[c], what the shared experts left in the output row o4), then + s_w[k] y[s_pos[k]] over the K (<= MAXK)
 * ranked slots (s_pos < 0: another rank's expert, left out); every row requested before the first addition */
template <int MAXNS, int MAXK>
__device__ __forceinline__ float4 cu_comb_col(const float4 *ys4, int ns, int mt, int m, const float *y, const int *s_pos,
                                              const float *s_w, int K, int D, int c, const float4 *o4) {
    const int D4 = D >> 2;
    float4 sh[MAXNS], v[MAXK];
    float4 a = ns ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : o4[c];
#pragma unroll
    for (int s = 0; s < MAXNS; s++)
        if (s < ns) sh[s] = __ldg(ys4 + ((size_t)s * mt + m) * D4 + c);
#pragma unroll
    for (int k = 0; k < MAXK; k++)
        if (k < K && s_pos[k] >= 0) v[k] = __ldg((const float4 *)(y + (size_t)s_pos[k] * D) + c);
    if (ns) a = sh[0];
#pragma unroll
    for (int s = 1; s < MAXNS; s++)
        if (s < ns) {
            a.x += sh[s].x;
            a.y += sh[s].y;
            a.z += sh[s].z;
            a.w += sh[s].w;
        }
#pragma unroll
    for (int k = 0; k < MAXK; k++) {
        if (k >= K || s_pos[k] < 0) continue;
        float wk = s_w[k];
        a.x += wk * v[k].x;
        a.y += wk * v[k].y;
        a.z += wk * v[k].z;
        a.w += wk * v[k].w;
    }
    return a;
}
#endif

#define CU_ROUTE_TICKETS 256   /* token groups of the fused router kernel (cuda_moe.cu: 256 tokens, down to 1 a group) */
typedef struct {
    ds_backend base;
    int device;
    cublasHandle_t cublas;
    float *inv_freq;            /* [dr/2] device, fp32 */
    /* current batch: host copies and device copies */
    ds_batch_meta b;            /* pointers to the host copies below */
    int32_t *h_tokens, *h_positions, *h_seq_start, *h_seq_ctx, *h_page_table;
    size_t h_cap_tok, h_cap_seq, h_cap_pt;
    int32_t *d_tokens, *d_positions, *d_tok_seq, *d_seq_start, *d_seq_ctx, *d_page_table;
    cu_ws ws_meta;              /* holds the d_* arrays */
    int max_ctx;
    /* workspaces */
    cu_ws ws_deq;               /* dequantized fp32 weight tile for SGEMM */
    cu_ws ws_rows;              /* gather_rows indices */
    cu_ws ws_attn;              /* naive attention: latents, k_pe, decompressed K/V */
    cu_ws ws_mlp;               /* MLP intermediates */
    cu_ws ws_moe;               /* MoE: router logits, routing, grouped rows, expert in/out */
    cu_ws ws_router_part;       /* the fused router's K-slice partials [ks][M][E] (cuda_moe.cu KSP) */
    cu_ws ws_sample;
    /* device memory handed out by alloc() or held for weights */
    void **owned;
    int n_owned, cap_owned;
    void *weight_pool;          /* one allocation holding every prepared weight */
    size_t weight_bytes;
    /* speed paths (cuda_backend.cu reads them from the environment at creation; see cu_opts_read) */
    cu_opts opt;
    cublasHandle_t cublas_tc;   /* default math: BF16 tensor-core GEMMs (opt.tc) */
    void *cublas_ws;            /* fixed cuBLAS workspaces, so GEMMs can be captured into graphs */
    cu_ws ws_tc;                /* BF16 activations and dequantized BF16 weight tiles */
    cu_ws ws_abs;               /* absorbed attention: q_lat, split partials, o_lat, token list */
    cu_ws ws_abs_tc;            /* absorbed attention's batched GEMMs: BF16 q_nope, o_lat and kv_b copy */
    cu_ws ws_qb;                /* q_nope in BF16 [T, H dqk] written by qkv_finish_kernel for those GEMMs (opt.qb_fuse) */
    const float *qb_of;         /* the q that ws_qb holds the BF16 copy of (set by the launch that wrote it, for qb_T
                                 * tokens; taken and cleared by the absorbed attention, cleared by a new batch) */
    int qb_T;
    long qb_fused_runs;         /* absorbed attentions that took ws_qb instead of converting q (tests) */
    cu_ws ws_qlat;              /* q_lat [T, H, C] made by qkv_absorb_kernel with qkv_finish (opt.qkv_absorb) */
    const float *qlat_of;       /* the q whose q_lat ws_qlat holds, by qlat_kvb, for qlat_T tokens (set by that launch;
                                 * taken and cleared by the absorbed attention, cleared by qkv_finish and a new batch) */
    const ds_weight *qlat_kvb;
    int qlat_T;
    long qkv_absorb_runs;       /* qkv_finish launches that made q_lat too (tests) */
    long norm_fold_runs;        /* ... of them that made attn_in's folded input norm too (opt.norm_fold; tests) */
    long normed_linear_folds;   /* normed_linear calls with the norm folded into the GEMV (opt.norm_fold; tests) */
    long qlat_taken_runs;       /* absorbed attentions that took that q_lat (tests) */
    cu_ws ws_moe2;              /* grouped MoE: intermediates and expert outputs */
    cu_ws ws_moe1;              /* the one-token MoE launch's SiLU products (cuda_moe1.cu) */
    unsigned *moe1_bar;         /* its grid barrier's count and generation, zero between launches */
    cu_ws ws_moe_tc;            /* grouped MoE on the tensor cores: BF16 gathered tokens and intermediates */
    cu_ws ws_moe_gemm;          /* MoE as GEMMs per expert: BF16 rows, gate/up, activations, dequantised experts */
    cublasLtHandle_t lt;        /* cuBLASLt (FP8 block-scaled GEMM), created at first use */
    cu_ws ws_fp8;               /* W8A8: quantized activations, their scales, the padded output */
    cu_ws ws_f8part;            /* W8A8 on wgmma: the split-K partials */
    cu_ws ws_f8xt;              /* W8A8 on wgmma, DSINFER_CUDA_F8_TM_SS 3: the activation scales transposed */
    int *f8_tickets;            /* W8A8 linear on moe_wg_kernel: a split-K ticket per tile [CU_F8_WG_TICKETS], zero between launches */
    void *lt_ws;                /* fixed cuBLASLt workspace (LT_WS_BYTES) */
    struct cu_lt_tune *lt_tune; /* tuned BF16 GEMM algorithms per shape (cuda_lt_tune.cu), made at first use */
    struct cu_optimes *optimes; /* DSINFER_CUDA_OP_TIMES=1: per-op timing wrappers (cuda_optimes.cu); else NULL */
    struct cu_moe_tab *moe_tabs;   /* per MoE layer: device table of expert weight views */
    int n_moe_tabs;
    struct cu_graphs *graphs;   /* captured decode steps (cuda_graph.cu) */
    int n_sm;
    cu_side side;               /* the shared experts' second stream; side.stream NULL when off */
    cu_pf pf;                   /* the next layer's weights into L2 (cuda_prefetch.cu); pf.stream NULL when off */
    cu_kvb16 *kvb16;            /* prepared FP8 kv_b -> its BF16 copy (cuda_weights.cu kvb_copies) */
    int n_kvb16;
    unsigned *route_tickets;    /* the fused router's ticket per token group [CU_ROUTE_TICKETS] (cuda_moe.cu), zero between launches */
    unsigned *mla_tickets;      /* the folded MLA combine's [CU_MLA_TICKETS] (cuda_mla_tc.cu), zero between launches */
    long mla_fold_runs;         /* MLA decodes whose split combine was folded (tests) */
    long comb_uv_runs;          /* absorbed attentions whose combine and W_UV ran as one launch (opt.comb_uv; tests) */
    long chain_fused_runs;      /* attn_in / linear_add_rmsnorm calls that summed the split-K partials in the next kernel (tests) */
    long moe_wg_pdl_launches;   /* moe_wg_kernel launches with the PDL attribute (opt.moe_wg_pdl; tests) */
    long moe_wg_nt48_launches;  /* moe_wg_kernel launches with 48 tokens a chunk (tests) */
    long qkv_split_launches;      /* qkv_finish launches with q's heads in blocks of their own (opt.qkv_split; tests) */
    long moe_wg_order_launches;   /* grouped moe_wg_kernel launches with opt.moe_wg_order 1 or 2 (tests) */
    long router_xs_launches;    /* router_fused_kernel launches with x staged in shared memory (tests) */
    long router_ks_launches;    /* router_fused_kernel launches with K slices (tests) */
    int comb_defer;             /* inside moe_to_attn_in: moe_combine may leave its sum to the next attn_in */
    cu_comb_pend comb;          /* that sum, while left (cuda_moe.cu cu_comb_flush) */
    long comb_norm_runs;        /* attn_in calls whose norm made the MoE combine's sum (tests) */
    long moe1_runs;             /* MoE calls made by the one-token launch (cuda_moe1.cu; tests) */
    long moeo_runs;             /* ... by the intermediate-ownership launch (cuda_moeo.cu; tests) */
    long moeo_tail_runs;        /* ... of them in the tail form (tests) */
    long moeo_strips_runs;      /* ... of them with the strip-layout copies of down (opt.moeo_strips; tests) */
    long moeo_tc_runs;          /* ... of them with the sums on the tensor cores (opt.moeo_tc; tests) */
    long router_norm_runs;      /* router_norm1_kernel launches (tests) */
    unsigned *moeo_cnt;         /* the tail form's count and epoch (cumulative; zero at the first launch) */
    long rowo_runs;             /* linears of one token by the row-ownership launch (cuda_rowo.cu; tests) */
    long tail1_runs;            /* ... of them in the layer-tail form (layer_tail1), and with the next layer's part */
    long tail1_next_runs;
    long attn1_runs;            /* ... of them with the attention first (layer1) */
    long moe_wg_st2_launches;   /* moe_wg_kernel launches with mw_args.st2 (tests) */
    long moe_wg_qfrow_launches; /* moe_wg_kernel launches with mw_args.qf == 2: the codes stored as rows (tests) */
    long moe_wg_sx_launches;    /* grouped moe_wg_kernel launches with mw_args.sx (tests) */
    long moe_wg_pipe_launches;  /* ... of its pipelined one-weight form (DSINFER_CUDA_MOE_WG_PIPE; tests) */
    long moe_shared_in_runs;    /* MoE calls whose shared experts ran as moe_wg_kernel's virtual experts (host count, for tests) */
    long moe_duo_launches;      /* batch 1's expert GEMV launches that ran the shared experts as their second part (tests) */
} ds_cuda_backend;

static inline ds_cuda_backend *cu_of(ds_backend *be) { return (ds_cuda_backend *)be; }

/* The shared experts' second stream (cuda_side.cu): init / free with the backend; between begin and end every
 * launch and cuBLAS call of the backend goes to the side stream (forked from the main stream's work so far);
 * join makes the main stream wait for the side's work (no-op when nothing is pending). */
void cu_side_init(ds_cuda_backend *cb);
void cu_side_free(ds_cuda_backend *cb);
void cu_prefetch_init(ds_cuda_backend *cb);
void cu_prefetch_free(ds_cuda_backend *cb);
void cu_prefetch_join(ds_cuda_backend *cb);
void cu_prefetch_layer(ds_backend *be, const ds_layer_weights *L);
int cu_side_ok(ds_cuda_backend *cb);
extern int cu_side_lab;   /* DSINFER_CUDA_SIDE_LAB (lab, 1 .. 3: cuda_side.cu) */
void cu_side_begin(ds_cuda_backend *cb);
void cu_side_end(ds_cuda_backend *cb);
void cu_side_join(ds_cuda_backend *cb);

/* The fused absorbed decode (cuda_attn.cu attn_fused): one block per (list entry, split, head group)
 * writes split partials that mla_combine_kernel merges. */
typedef struct {
    const float *qlat;       /* [T, H, C] */
    const float *q;          /* [M, H*dqk]: q_pe read from here */
    const unsigned char *cache;   /* [n_pages, page_size] entries of tb bytes (fp32 or the FP8 layout) */
    size_t tb;
    int kv_fp8, fp8_vec;   /* fp8_vec: entries, codes, scales and k_pe all 16-byte aligned (V3, V2-Lite) */
    int kv_layout;         /* CU_KV_* */
    const int32_t *tok;      /* [T] token of each list entry; NULL: entry i is token i */
    const int32_t *positions, *tok_seq, *page_table;
    float *part;             /* [T, S, H, C] unnormalised o_lat per split */
    float *ml;               /* [T, S, H, 2] running max and sum per split */
    int H, C, dr, dn, dqk, pt_stride, page_size, n_splits;
    float scale;
    int bf16_async;        /* BF16 cache rows staged by cp.async (DSINFER_CUDA_MLA_ASYNC, cuda_mla_tc.cu); set after
                              the positional initialisers */
    /* the split combine folded into the decode (opt.mla_fold; cuda_mla_tc.cu t2_fold_combine): tickets [T][head groups],
     * zero between launches, and the combine's outputs (mla_combine_v3_kernel's olat, or ob where not NULL); tickets
     * NULL: no fold. Set after the positional initialisers. */
    unsigned *tickets;
    float *olat;
    __nv_bfloat16 *ob;
} fa_params;

/* The tensor-core variant (cuda_mla_tc.cu, opt.mla_tc) for kv_lora_rank 512 and rope 64: fits, the split
 * count for T entries, and the launch (p->n_splits from cu_mla_tc_splits). */
int cu_mla_tc_fits(const ds_config *c);
/* The naive (prefill) attention on the tensor cores (cuda_fa_tc.cu, opt.attn_tc): fits for q/k 128 + 64 and
 * v 128; the launch for the T new tokens t0.. of one sequence over kvb [L, H * 256] and kpe [L, 64]. */
int cu_fa_tc_fits(const ds_config *c);
void cu_fa_prefill_tc(float *out, const float *q, const float *kvb, const float *kpe, const int32_t *positions, int t0,
                      int T, int H, float scale);
/* v2 (DSINFER_CUDA_FA2, default 1): kvb / kpe rounded to BF16 into kvb16 [L, H*256] / kpe16 [L, 64] first
 * (16-byte aligned), then BF16 tiles by cp.async, double-buffered, 128 queries a block (cuda_fa_tc.cu). */
extern int cu_fa2;
void cu_fa_prefill2_tc(float *out, const float *q, const float *kvb, const float *kpe, __nv_bfloat16 *kvb16,
                       __nv_bfloat16 *kpe16, const int32_t *positions, int t0, int T, int L, int H, float scale);
/* v3 (DSINFER_CUDA_FA3, cuda_fa_wg.cu): the same contract on wgmma with TMA copies, 128 queries a block; called by
 * cu_fa_prefill2_tc after the BF16 copies; 0 where the tensor maps cannot be made (v2 runs instead). */
extern int cu_fa3;
int cu_fa_prefill3_tc(float *out, const float *q, const __nv_bfloat16 *kvb16, const __nv_bfloat16 *kpe16,
                      const int32_t *positions, int t0, int T, int L, int H, float scale);
int cu_mla_tc_splits(int T, int H, int max_ctx, int n_sm, int kv_layout);
/* DSINFER_CUDA_MLA_SLOTS (default 2): the blocks an SM cu_mla_tc_splits aims the 16-head kernels' splits at (a lab switch:
 * fewer, longer splits with 1, more with 4) */
extern int cu_mla_slots;
/* DSINFER_CUDA_MLA_MAX_SPLITS (backend creation; 1 .. 64, default 64): the most context splits of the tensor-core MLA
 * decodes. At batch 1 they take 64 (two blocks an SM's worth), each split's partials H x C floats (2 MB at V2-Lite,
 * more than its 1K-token BF16 cache) written and read back by the combine; the split count below 8 blocks was never
 * measured (cu_mla_tc_splits) */
extern int cu_mla_max_splits;
/* returns 1 where the launched kernel folded the split combine (p->tickets set and the BF16 cache's mma.sync kernel ran:
 * olat / ob written, no mla_combine launch wanted), else 0 */
int cu_mla_decode_tc(const fa_params *p, int T);
#define CU_MLA_TICKETS 8192   /* the fold's tickets: T x head groups at most */

/* ---- element loads by stored dtype -------------------------------------------------------------- */
__device__ __forceinline__ float cu_ld(const void *p, int dtype, size_t i) {
    switch (dtype) {
    case DS_DTYPE_F32: return ((const float *)p)[i];
    case DS_DTYPE_BF16: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    case DS_DTYPE_F16: return __half2float(((const __half *)p)[i]);
    case DS_DTYPE_F8_E4M3: {
        __half_raw h = __nv_cvt_fp8_to_halfraw(((const __nv_fp8_storage_t *)p)[i], __NV_E4M3);
        return __half2float(__half(h));
    }
    default: return __int_as_float(0x7fc00000);
    }
}

/* ---- the KV cache entry of one token ----------------------------------------------------------------
 * fp32 layout: (C + dr) floats. FP8 layout (loader/config.h ds_kv_token_bytes, the CPU's
 * cpu_kv_pack_fp8): C bytes of e4m3, then one fp32 scale per 128 latent columns, then dr bf16 k_pe.
 * An entry starts at byte (page * page_size + slot) * tb; in the FP8 layout nothing is aligned beyond a
 * byte in general, so multi-byte fields are assembled from bytes. The conversions are the CPU's
 * (core/dtype.c), operation for operation, so both backends store the same bytes. These helpers are
 * __host__ __device__ so that cuda_selftest.cu can check them against the CPU's functions on the host
 * (tests/unit/test_cuda_host.c, runs without a GPU). */
#define CU_HD __host__ __device__ __forceinline__
CU_HD float cu_bits_f32(unsigned u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
CU_HD unsigned cu_f32_bits(float f) {
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}
CU_HD float cu_ld_f32_bytes(const unsigned char *p) {
    return cu_bits_f32((unsigned)p[0] | (unsigned)p[1] << 8 | (unsigned)p[2] << 16 | (unsigned)p[3] << 24);
}
CU_HD float cu_fp8_to_f32(unsigned char b) {
    __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)b, __NV_E4M3);
    return __half2float(__half(h));
}
/* The 8 BF16 values of a 16-byte chunk (little-endian pairs in each word) as fp32, in memory order: v[0 .. 7]. */
__device__ __forceinline__ void cu_bf16x8(uint4 raw, float *v) {
    const unsigned u[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        v[2 * i] = __uint_as_float(u[i] << 16);
        v[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
    }
}
/* The 4 E4M3 codes of a word (byte 0 first) through the conversion unit: v[0 .. 3], unscaled. */
__device__ __forceinline__ void cu_fp8x4_raw(uint32_t a, float *v) {
    __half2_raw h0 = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(a & 0xffff), __NV_E4M3);
    __half2_raw h1 = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(a >> 16), __NV_E4M3);
    float2 f0 = __half22float2(__half2(h0)), f1 = __half22float2(__half2(h1));
    v[0] = f0.x;
    v[1] = f0.y;
    v[2] = f1.x;
    v[3] = f1.y;
}
/* ... each times s */
__device__ __forceinline__ void cu_fp8x4(uint32_t a, float s, float *v) {
    cu_fp8x4_raw(a, v);
    v[0] *= s;
    v[1] *= s;
    v[2] *= s;
    v[3] *= s;
}
/* The cache layout of a config: fp32, FP8 (above) or BF16 ((C + dr) bf16, little-endian). */
#define CU_KV_F32 0
#define CU_KV_FP8 1
#define CU_KV_BF16 2
static inline int cu_kv_layout(const ds_config *c) { return c->kv_fp8 ? CU_KV_FP8 : c->kv_bf16 ? CU_KV_BF16 : CU_KV_F32; }
/* element k of the entry at e (layout CU_KV_*): k < C latent, C <= k < C + dr k_pe */
CU_HD float cu_kv_at(const unsigned char *e, int layout, int C, int k) {
    if (layout == CU_KV_F32) return ((const float *)(const void *)e)[k];
    if (layout == CU_KV_BF16) return cu_bits_f32(((unsigned)e[2 * k] | (unsigned)e[2 * k + 1] << 8) << 16);
    if (k < C) return cu_fp8_to_f32(e[k]) * cu_ld_f32_bytes(e + C + 4 * (k >> 7));
    const unsigned char *b = e + C + 4 * ((C + 127) >> 7) + 2 * (k - C);
    return cu_bits_f32(((unsigned)b[0] | (unsigned)b[1] << 8) << 16);
}
/* e4m3 code b times the scale s without the conversion unit (issue 7: the cvt instructions run at a
 * fraction of the FMA rate and bounded the FP8 weight kernels): the code's magnitude bits placed in an
 * fp32 (exponent field 0..15, three mantissa bits) are exactly e4m3(b) * 2^-120, subnormal codes included;
 * times s120 = s * 2^120 that is e4m3(b) * s rounded once, as the CPU computes it. s120 overflows only for
 * s >= 2^7, then the product is taken in two exact-then-rounded steps. NaN codes give NaN. s = 1 gives
 * e4m3(b) itself, whose 4 significant bits fit a BF16 exactly. cuda_selftest.cu checks every code. */
CU_HD float cu_fp8_scaled(unsigned b, float s, float s120) {
    unsigned mag = b & 0x7fu;
    float x = cu_bits_f32((mag << 20) | ((b & 0x80u) << 24));
    float v = s120 <= 3.0e38f ? x * s120 : (x * 0x1p120f) * s;
    return mag == 0x7fu ? cu_bits_f32(0x7fc00000u) : v;
}
/* ds_f32_to_fp8_e4m3 (core/dtype.c) on the device: round half to even, saturating at 448, values
 * below 2^-10 to signed zero, NaN to 0x7f. */
CU_HD unsigned char cu_f32_to_fp8(float x) {
    if (isnan(x)) return 0x7f;
    unsigned char sign = signbit(x) ? 0x80 : 0;
    float a = fabsf(x);
    if (a >= 448.0f) return sign | 0x7e;
    if (a < ldexpf(1.0f, -10)) return sign;
    int e;
    frexpf(a, &e);
    int ex = e - 1;
    if (ex < -6) ex = -6;
    float step = ldexpf(1.0f, ex - 3);
    float q = rintf(a / step) * step;
    if (q >= 448.0f) return sign | 0x7e;
    int qe;
    frexpf(q, &qe);
    qe -= 1;
    if (qe < -6 || q < ldexpf(1.0f, -6)) return sign | (unsigned char)(q / ldexpf(1.0f, -9));
    int mant = (int)(q / ldexpf(1.0f, qe) * 8.0f) - 8;
    return sign | (unsigned char)((qe + 7) << 3) | (unsigned char)mant;
}
#ifdef __CUDACC__
/* cu_f32_to_fp8 by the conversion unit (cvt.rn.satfinite.e4m3x2.f32, NaN to 0x7f as the CPU), a few
 * instructions instead of the software encoder's ~100: the same code for every float, which
 * ds_cuda_device_selftest checks over all 2^32 on the GPU (test_cuda_ops). Device only. */
__device__ __forceinline__ unsigned char cu_f32_to_fp8_hw(float x) {
    return isnan(x) ? (unsigned char)0x7f : (unsigned char)__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}
#endif
/* ds_f32_to_bf16 (core/dtype.h): round half to even, NaN kept quiet */
CU_HD unsigned short cu_f32_to_bf16_bits(float f) {
    unsigned u = cu_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}

/* Flat view of a ds_weight for kernels (passed by value). */
typedef struct {
    const void *data;
    const float *scale;    /* FP8 only, else NULL */
    int dtype, rows, cols, scale_cols;
    const unsigned char *bscale;   /* NVFP4 only: F8_E4M3 [rows, cols/16] block scales; else NULL */
    float gscale;                  /* NVFP4 only: the global scale */
} cu_wview;
/* The input norm a launch makes beside its own work (cu_qkv_finish_parts' nj): h += add (add NULL: none), xn = RMSNorm(h)
 * by nw over n columns, eps */
typedef struct {
    float *xn, *h;
    const float *add;
    cu_wview nw;
    int n;
    float eps;
} cu_norm_job;

/* Bytes of one row of a weight stored row after row (BF16, FP8, fp32); 0 for other dtypes. */
__device__ __forceinline__ size_t cu_row_bytes(const cu_wview &w) {
    int eb = w.dtype == DS_DTYPE_BF16 ? 2 : w.dtype == DS_DTYPE_F8_E4M3 ? 1 : w.dtype == DS_DTYPE_F32 ? 4 : 0;
    return (size_t)eb * (size_t)w.cols;
}
/* Rows [r0, r0 + n) of w towards L2 (see cu_pdl_wait), shared by the block's threads. */
__device__ __forceinline__ void cu_prefetch_rows(const cu_wview &w, int r0, int n) {
    size_t rb = cu_row_bytes(w);
    if (rb && n > 0) cu_prefetch_l2((const char *)w.data + (size_t)r0 * rb, (size_t)n * rb, threadIdx.x, blockDim.x);
}

/* The grouped routed experts on the tensor cores (cuda_moe_tc.cu, opt.tc with M > GEMV_MAX_M): whether
 * the expert weights suit it (BF16, or FP8 with 128-blocks; K multiple of 32 / 128), and the two
 * launches plus the BF16 gather for n_rows sorted rows (tab: the layer's gate/up/down views [3E]). */
int cu_moe_tc_fits(const cu_wview *gate, const cu_wview *down);
/* The same kernel for one weight read in place: FP8 at 8 < M <= SKINNY_MAX_M rows (opt.tc and opt.skinny)
 * instead of a BF16 copy for cuBLAS every call; NVFP4 at every M > 8 with opt.tc (decoded in registers).
 * xs_ws: M * K BF16. */
#define SKINNY_MAX_M 256
int cu_skinny_tc_fits(const cu_wview *w);
void cu_skinny_tc(float *out, const float *x, int M, const cu_wview *w, void *xs_ws);
void cu_moe_tc(float *y, const float *x, const int32_t *rows, const int32_t *off, int n_rows, int E, int D, int I,
               const cu_wview *tab, const cu_wview *gate, void *xs_ws);

static inline cu_wview cu_view(const ds_weight *w) {
    cu_wview v = {w->data, w->scale, (int)w->dtype, w->rows, w->cols, w->scale_cols, w->block_scale, w->global_scale};
    return v;
}

/* NVFP4 element (spec 13): E2M1 code (bit 3 sign) times fp8(block scale) * global scale, the factors
 * multiplied in the CPU's order (model/weights.c nvfp4_row_f32) so both give the same fp32 value. */
CU_HD float cu_e2m1(unsigned code) {
    unsigned m = code & 7;   /* magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6 */
    float v = m < 4 ? 0.5f * (float)m : (float)(1u << ((m >> 1) - 1)) * (1.0f + 0.5f * (float)(m & 1));
    return code & 8 ? -v : v;
}
CU_HD float cu_w_nvfp4(const cu_wview &w, int r, int c) {
    unsigned char byte = ((const unsigned char *)w.data)[((size_t)r * (size_t)w.cols + (size_t)c) >> 1];
    float s = cu_fp8_to_f32(w.bscale[(size_t)r * (size_t)(w.cols >> 4) + (size_t)(c >> 4)]) * w.gscale;
    return cu_e2m1(c & 1 ? byte >> 4 : byte & 15) * s;
}

/* Values 4 i .. 4 i + 3 of a vector weight (a norm's), BF16 where BF else fp32 (8- / 16-byte aligned): cu_w's values by
 * one load, with no dtype switch (the folded norms' loops: cuda_linear.cu, cuda_moe.cu) */
template <bool BF>
__device__ __forceinline__ float4 cu_vec4(const void *p, int i) {
    if constexpr (BF) {
        const uint2 b = __ldg((const uint2 *)p + i);
        return make_float4(__uint_as_float(b.x << 16), __uint_as_float(b.x & 0xffff0000u), __uint_as_float(b.y << 16),
                           __uint_as_float(b.y & 0xffff0000u));
    } else {
        return __ldg((const float4 *)p + i);
    }
}

/* W[r, c] as fp32, FP8 times its block scale, NVFP4 decoded. */
__device__ __forceinline__ float cu_w(const cu_wview &w, int r, int c) {
    if (w.dtype == DS_DTYPE_NVFP4) return cu_w_nvfp4(w, r, c);
    float x = cu_ld(w.data, w.dtype, (size_t)r * (size_t)w.cols + (size_t)c);
    if (w.scale) x *= w.scale[(size_t)(r >> 7) * (size_t)w.scale_cols + (size_t)(c >> 7)];
    return x;
}

/* RoPE on pair i of v (interleaved pairs, spec 7) at position pos: angles in fp32 as on the CPU (inv_freq times the
 * position), accurate cosf / sinf, times the amplitude (rope_kernel, qkv_finish_kernel, moe1_kernel) */
__device__ __forceinline__ void rope_pair(float *v, int i, float pos, const float *inv_freq, float amp) {
    float ang = inv_freq[i] * pos;
    float cs = cosf(ang) * amp, sn = sinf(ang) * amp;
    float a = v[2 * i], b = v[2 * i + 1];
    v[2 * i] = a * cs - b * sn;
    v[2 * i + 1] = a * sn + b * cs;
}

__device__ __forceinline__ float cu_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
/* 1 / RMS of a row of n values from each of a block's WARPS * 32 threads' sum of squares ss (red: WARPS floats of shared
 * memory): the warps' sums added in warp order, the one reduction of every norm kernel (rmsnorm_vec's rms_inv,
 * router_norm1_kernel), so that they round alike */
template <int WARPS>
__device__ __forceinline__ float cu_rms_inv(float ss, float *red, int n, float eps) {
    ss = cu_warp_sum(ss);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
    __syncthreads();
    float tot = 0.0f;
#pragma unroll
    for (int i = 0; i < WARPS; i++) tot += red[i];
    return 1.0f / sqrtf(tot / (float)n + eps);
}

/* SiLU(g) * u = g / (1 + exp(-g)) * u, the CPU's formula, each step rounded on its own (no contraction): the
 * unfused MLP (silu_mul_kernel) and the fused W8A8 epilogue (cuda_fp8_wgmma.cu) give the same bits */
__device__ __forceinline__ float cu_silu_mul(float g, float u) { return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u); }

__device__ __forceinline__ float cu_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

static inline unsigned cu_blocks(size_t n, unsigned threads) { return (unsigned)((n + threads - 1) / threads); }

/* ---- ops implemented across the .cu files ------------------------------------------------------- */
void cu_linear(ds_backend *be, float *out, const float *x, const ds_weight *w, int M);
/* backend.h linear2: two weights of one input, one launch where the path allows (opt.hfuse; cuda_linear.cu) */
void cu_linear2(ds_backend *be, float *out1, float *out2, const float *x, const ds_weight *w1, const ds_weight *w2, int M);
/* cu_linear2 for one token whose input is RMSNorm(h + add) by nw (add NULL: h), the norm folded into the GEMV
 * (cu_gemv_two_norm) where cu_linear2 would take gemv_v2_kernel's four-row form; h and xn not written. 0: nothing done. */
int cu_linear2_norm(ds_backend *be, float *out1, float *out2, const float *h, const float *add, const ds_weight *nw, float eps,
                    const ds_weight *w1, const ds_weight *w2);
/* cu_linear for one token whose input is RMSNorm(x) by nw, the norm folded into the GEMV (cu_gemv_two_norm with one
 * weight) where cu_linear would take gemv_v2_kernel's four-row form; x is only read, no normed vector is made. 0: nothing
 * done (backend.h normed_linear then runs the norm and cu_linear). */
int cu_linear_norm(ds_backend *be, float *out, const float *x, const ds_weight *nw, float eps, const ds_weight *w);
/* dst[nr, cols] = rows r0 .. r0 + nr - 1 of v in BF16 (cu_w's values rounded to nearest even; FP8 16 codes
 * a thread unless DSINFER_CUDA_DEQUANT_VEC=0), and dst[0:n] = src[0:n] rounded to BF16 (cuda_linear.cu). */
void cu_weight_bf16(__nv_bfloat16 *dst, const cu_wview &v, int r0, int nr);
void cu_to_bf16(__nv_bfloat16 *dst, const float *src, size_t n);
extern int cu_dequant_vec;
/* DSINFER_CUDA_NVFP4_SIMT=1: the exact NVFP4 GEMM above 8 rows decodes the weight in the kernel
 * (nvfp4_sgemm_kernel, cuda_linear.cu) instead of into a global fp32 tile for SGEMM; opt-in until run. */
extern int cu_nvfp4_simt;
/* moe_tc_kernel's token groups a pass (DSINFER_CUDA_MOE_TG: 0 = from the mean rows per expert). */
extern int cu_moe_tg;
/* DSINFER_CUDA_MOE_TC2 (default 1): BF16 routed experts by moe_tc2_kernel (weights staged in shared memory
 * by cp.async, 32 or 64 tokens a pass); 0: by moe_tc_kernel.
 * DSINFER_CUDA_MOE_TC2_ST: its stages (3, 4 or 6); DSINFER_CUDA_MOE_TC2_TOK: tokens a pass (32, 64; 0 auto). cu_moe_tc2_init sets the kernels' shared-memory limits
 * (backend creation). */
extern int cu_moe_tc2, cu_moe_tc2_st, cu_moe_tc2_tok;
/* DSINFER_CUDA_MOE_F8_CVT (default 1): moe_f8_kernel's e4m3 products as FP16 MMAs with each fragment converted
 * once (cuda_moe_tc.cu f8_frag_a16); 0: the e4m3 mma.sync, which ptxas emulates converting at every MMA. */
extern int cu_moe_f8_cvt;
/* DSINFER_MOE_W8A8 (default 1): FP8 routed experts on the tensor cores (DSINFER_CUDA_TC=1, more than 8 rows)
 * quantize their activations to e4m3 per token x 128 columns and multiply by FP8 MMAs (moe_f8_kernel,
 * cuda_moe_tc.cu), as DeepSeek's, vLLM's and SGLang's FP8 inference do; 0: the codes are converted to BF16 per
 * weight (moe_tc_kernel). The CPU backend, the exact reference, emulates the quantization only when the
 * variable is 1 (cpu_moe.c). */
extern int cu_moe_w8a8;
/* The W8A8 linear's GEMM (DSINFER_CUDA_FP8_GEMM=1), DSINFER_CUDA_FP8_OWN: 2 (default) the wgmma kernels
 * (cuda_fp8_wgmma.cu); 1 the mma.sync kernel (moe_f8_kernel with one weight, split K; slower than cuBLASLt:
 * sm_90 emulates FP8 mma.sync); 0 cuBLASLt's block-scaled GEMM. Up to DSINFER_CUDA_FP8_OWN_MAX_M rows
 * (default 256 with 1, 65535 with 2), cuBLASLt above. cu_f8_linear returns 0 (nothing done) where it does
 * not apply. */
extern int cu_fp8_own, cu_fp8_own_max_m;
int cu_f8_linear(ds_cuda_backend *cb, float *out, const float *x, const ds_weight *w, int M);
/* DSINFER_CUDA_FP8_OWN=2: the same product on wgmma (cuda_fp8_wgmma.cu; _FP8_OWN_MAX_M default 65535):
 * x quantized per token x 128 columns, then the block-scaled GEMM with split K and a reduce. */
void cu_f8_wgmma_linear(ds_cuda_backend *cb, float *out, const float *x, const ds_weight *w, int M);
/* both weights (of equal K) would go to cu_f8_wgmma_linear's cp.async kernel at M rows (cuda_moe_tc.cu); then the
 * two in one launch (cuda_fp8_wgmma.cu; 0: nothing done) */
int cu_f8_wgmma_two_ok(const ds_weight *w1, const ds_weight *w2, int M);
int cu_f8_wgmma_linear2(ds_cuda_backend *cb, float *out1, float *out2, const float *x, const ds_weight *w1,
                        const ds_weight *w2, int M);
/* both weights would go to cu_f8_wgmma_linear at M rows (any of its kernels; cuda_moe_tc.cu); then x quantized once
 * and the two GEMMs (cuda_fp8_wgmma.cu; opt.w8_shared_x above the one-launch form's 64 rows) */
int cu_f8_wgmma_pair_ok(const ds_weight *w1, const ds_weight *w2, int M);
void cu_f8_wgmma_shared_x(ds_cuda_backend *cb, float *out1, float *out2, const float *x, const ds_weight *w1,
                          const ds_weight *w2, int M);
/* The W8A8 MLP at decode sizes in five launches (opt.mlp_fuse; cuda_fp8_wgmma.cu): 0 (nothing done) where it does
 * not apply */
int cu_f8_mlp(ds_cuda_backend *cb, float *out, const float *x, const ds_weight *gate, const ds_weight *up,
              const ds_weight *down, int M);
/* The W8A8 chain fused with its neighbours (opt.chain_fuse; backend attn_in / linear_add_rmsnorm): the split-K
 * partials of cu_f8_wgmma_linear(2)'s one-warpgroup GEMM (at most 64 rows, the caller checked cu_f8_wgmma_two_ok) on
 * codes made elsewhere, left for the next kernel to sum (ks > 1: p1 [ks][M][N1], p2 [ks][M][N2]; ks 1: out1 / out2
 * hold the results); cu_f8_codes_buf: room for M rows' codes and scales (the quantizer's buffer) */
typedef struct {
    const float *p1, *p2;
    int ks;
} cu_f8_parts;
void cu_f8_gemm1_parts(ds_cuda_backend *cb, const unsigned char *q, const float *qs, int M, const ds_weight *w1, float *out1,
                       const ds_weight *w2, float *out2, cu_f8_parts *pp);
unsigned char *cu_f8_codes_buf(ds_cuda_backend *cb, int M, int K, float **qs);
/* norm_chain_kernel (cuda_backend.cu): h [M, n] += add (one tensor), or += the sum of parts' ks split-K partials
 * ([ks][M][n], that sum also written to ff), neither where both are NULL (h only read); xn = RMSNorm(h) * w; with q
 * (not NULL) xn's FP8 codes q [M, n] and scales qs [M][n/128] as cu_rows_fp8_f32 makes them. The same bits as
 * f8_reduce, add_rmsnorm (or rmsnorm) and the quantizer. 0 (nothing launched) where the shape does not suit it. */
int cu_norm_chain(float *xn, float *h, const float *add, const float *parts, int ks, float *ff, const ds_weight *w, int M,
                  int n, float eps, unsigned char *q, float *qs);
/* cu_norm_chain with add the left MoE combine pc's sum (pc->out [M, n], written too, then h += it): the same bits as
 * moe_combine then cu_norm_chain(add = pc->out). 0 (nothing launched) where it does not suit (pc->K > CU_COMB_MAX_K,
 * pc->ns > CU_COMB_MAX_NS, the shape) */
int cu_norm_chain_comb(float *xn, float *h, const cu_comb_pend *pc, const ds_weight *w, int n, float eps, unsigned char *q,
                       float *qs);
/* launches a left MoE combine (cb->comb) if there is one: out gets its sum as moe_combine would have made it */
void cu_comb_flush(ds_cuda_backend *cb);
/* backend moe_to_attn_in (cuda_moe.cu) */
void cu_moe_to_attn_in(ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int M);
int cu_layer_tail1(ds_backend *be, float *xn, float *h, float *ff, const float *x, const ds_layer_weights *L, float eps,
                   const ds_next_in *nx, int M);
int cu_layer1(ds_backend *be, float *xn, float *h, float *ff, float *ao, float *q, float *kv, void *cache,
              const ds_layer_weights *L, float eps, float kv_eps, const ds_next_in *nx, int M);
/* backend qkv_finish over the batch's tokens with q and kv first summed from split-K partials pq ([ksq][M][H dqk]) and
 * pkv ([ksk][M][C + dr]) where either count is above 1 (a count of 1: that tensor's partial is its product; the W8A8
 * linear2's; pq NULL, both 1: as they are); 0 (nothing launched) where the fused kernel does not fit */
/* nj (NULL: none; opt.norm_fold): the input norm the GEMV before folded in, made by one more block of qkv_absorb_kernel
 * (h += add, xn = RMSNorm(h): rmsnorm_vec's bits); only with that kernel (0, nothing launched, where it does not run) */
int cu_qkv_finish_parts(ds_backend *be, float *q, float *kv, void *cache, const ds_weight *kv_norm, float eps,
                        const float *pq, const float *pkv, int ksq, int ksk, const ds_weight *kv_b, const cu_norm_job *nj);
/* The W8A8 chain fused above 64 rows (opt.chain_fuse 2): cu_f8_wgmma_gemm's TMA path for one or two weights with their
 * split-K partials kept for the next kernel to sum. plan: 1 where cu_f8_wgmma_gemm takes that path at M rows for w1
 * and w2 (NULL: one weight) on the codes q and sums the splits with the reduce launch (no cluster sum), with each
 * weight's splits ks1 / ks2 of kc1 / kc2 columns in pp; 0 otherwise. run: the launches, split z of wi's product at
 * pi + z M Ni (ksi > 1; the room asked for once for both in ws_f8part), or outi itself (ksi == 1): what
 * cu_f8_wgmma_gemm launches before its reduce, so the same bits once the partials are summed in z order. */
typedef struct {
    const float *p1, *p2;
    int ks1, ks2, kc1, kc2;
} cu_f8_tma_parts;
int cu_f8_tma_parts_plan(const ds_cuda_backend *cb, const unsigned char *q, int M, const ds_weight *w1, const ds_weight *w2,
                         cu_f8_tma_parts *pp);
void cu_f8_tma_parts_run(ds_cuda_backend *cb, const unsigned char *q, const float *qs, int M, const ds_weight *w1, float *out1,
                         const ds_weight *w2, float *out2, cu_f8_tma_parts *pp);
/* its GEMM alone: out [M, N] from codes q [M, K] and scales qs [M][K/128] (cu_rows_fp8_f32's) */
void cu_f8_wgmma_gemm(ds_cuda_backend *cb, float *out, const unsigned char *q, const float *qs, const ds_weight *w, int M);
void cu_f8_wgmma_init(void);
/* host-side pieces (checked by ds_cuda_host_selftest): the K splits of the GEMM, the MoE's tile table */
int cu_f8_splits(int M, int N, int K, int n_sm, int *kc);
int cu_f8_expert_tiles(int4 *t, const int32_t *off, int E, int n_cols, int cols_first);
/* DSINFER_CUDA_FP8_TMA (default 1): above 64 rows the warp-specialized TMA kernel; 0: the cp.async one */
extern int cu_fp8_tma;
/* DSINFER_CUDA_F8_TICKETS (default 0, opt-in: slower, RESULTS eleventh session run 4): the cp.async kernel's split-K
 * partials summed by the tile's last split (0: a reduce kernel) */
extern int cu_f8_tickets;
/* DSINFER_CUDA_F8_PRELOAD (default 0, opt-in until timed): the cp.async kernel starts with all WG_ST stages in flight
 * (one memory round trip for a split of at most WG_ST stages, not two; the same bits);
 * DSINFER_CUDA_F8_SPLIT_KB (default 4): the fewest 128-column stages cu_f8_splits gives a split;
 * DSINFER_CUDA_F8_REDUCE_VEC (default 0, opt-in until timed): the split-K sum four values a thread (the same bits) */
extern int cu_f8_preload, cu_f8_split_kb, cu_f8_reduce_vec;
/* DSINFER_CUDA_F8_REDUCE2 (default 1): a linear2's two split-K sums in one launch (f8_reduce2_kernel, the same bits;
 * cu_f8_reduce_two); 0: a launch each */
extern int cu_f8_reduce2;
void cu_f8_reduce_two(float *out1, const float *p1, size_t n1, float *out2, const float *p2, size_t n2, int ks);
/* DSINFER_CUDA_F8_TMA1 (default 0 until timed): the W8A8 GEMM's one-warpgroup kernel (up to 64 rows: linear, linear2,
 * the MLP's gate / up) with its stages loaded by TMA (f8_tma1_kernel) instead of cp.async: the same bits */
extern int cu_f8_tma1;
/* DSINFER_CUDA_F8_TM_PREF (default 1): the TMA kernel (above 64 rows; and the prefill MoE's grouped form) loads a
 * k-block's scales before waiting for its stage, not after its MMAs: the same bits */
extern int cu_f8_tm_pref;
extern int cu_f8_tm_store, cu_f8_tm_store_min_m;
/* DSINFER_CUDA_F8_TM_LAB (lab, default 0; wrong results): the dense TMA-store GEMM without parts of its work, to time
 * what each costs: 1 no scale loads, 2 no epilogue stores, 4 every stage from the same L2-resident boxes (sums: 3, 7) */
extern int cu_f8_tm_lab;
/* DSINFER_CUDA_F8_TM_SS (default 0: slower, own / cuBLASLt at M = 4096 0.87 -> 0.73, RESULTS twenty-seventh session
 * run 8): the TMA kernel's one-block PREF forms (dense, TMA-store, grouped) with each k-block's scales staged into shared
 * memory by the producer warp: the same bits. 1: the TMA-store form with a 4-stage ring; 2: with 5 stages and its
 * epilogue in two halves; 3 (dense, from 512 rows: the TMA-store form; slower too, 0.87 -> 0.85, RESULTS twenty-eighth
 * session run 2): the scales by two bulk copies a stage, issued by the producer thread with the stage's TMA (no load it
 * waits for) from the activation scales transposed ([K/128][M rounded up to 128], one launch of xs_transpose_kernel a
 * GEMM), 5 stages and the whole epilogue (no room left to align the shared memory's start: the plain form where it is
 * not 1024-byte aligned); 4 (dense forms, fifty-sixth session, not yet timed): no producer step, each consumer warp
 * copies its own rows' scales and the weight block's by cp.async into a 3-k-block ring in shared memory (1.6 KB), two
 * k-blocks ahead, and reads them there (tm_ring_put / tm_ring_get) */
extern int cu_f8_tm_ss;
extern long cu_f8_tm_xt_launches;   /* launches of DSINFER_CUDA_F8_TM_SS 3's form (the op test's evidence) */
extern long cu_f8_tm_ring_launches;   /* ... of SS 4's forms (the consumers' scale rings; likewise) */
/* launches of the prefill MoE's grouped W8A8 form with opt.moe_half (process-wide; tests) */
extern long cu_moe_half_launches;
/* launches of the prefill MoE's grouped W8A8 form with opt.moe_dyn (process-wide; tests) */
extern long cu_moe_dyn_launches;
/* launches of the prefill MoE's gate / up with SiLU in the epilogue (opt.moe_silu_epi; process-wide; tests) */
extern long cu_moe_silu_launches;
extern long cu_moe_y_bf16_launches;
/* gate / up launches of the prefill MoE's grouped W8A8 form with BF16 sums (opt.moe_gu_bf16; process-wide; tests) */
extern long cu_moe_gu_bf16_launches;
/* shared pieces of the own W8A8 linears: x [M, K] fp32 -> codes q [M, K] and scales s [M][K/128]
 * (moe_rows_fp8_kernel); out[i] = sum over z < ks of part[z n + i], in z order */
void cu_rows_fp8_f32(unsigned char *q, float *s, const float *x, int M, int K);
/* the same of rows x[rows[i]] (rows NULL: i) */
void cu_rows_fp8_gather(unsigned char *q, float *s, const float *x, const int32_t *rows, int M, int K);
/* The routed experts of a prefill-sized batch as W8A8 on wgmma (cuda_fp8_wgmma.cu; DSINFER_CUDA_MOE_WGMMA,
 * default 1, with DSINFER_MOE_W8A8 and FP8 experts): the rows (sorted by expert, off[] on the host) quantized
 * per token x 128, gate and up of every expert as one grouped launch (fp32 [R, 2I]; BF16 with opt.moe_gu_bf16),
 * SiLU(g) * u rounded to BF16 and quantized, the down projections as a second grouped launch; returns y [R, D] in slot
 * order, fp32, or BF16 where *y_bf16 is set to 1 (opt.moe_y_bf16, where *y_bf16 was nonzero on entry: the caller takes
 * BF16 rows), or NULL where it does not apply (nothing done). */
extern int cu_moe_wgmma;
const void *cu_moe_gemm_f8(ds_cuda_backend *cb, const float *x, const int32_t *rows, const int32_t *off, int E, int D,
                           int I, const ds_layer_weights *L, int *y_bf16);
void cu_f8_wgmma_free(void);
void cu_moeo_free(void);   /* cuda_moeo.cu's map cache emptied (with the backend, as cu_f8_wgmma_free) */
/* cuda_rowo.cu: out1 [w1.rows] = w1 . x (and out2 [w2.rows] = w2 . x where w2 is given) for one token x [K] by one
 * launch of rowo_kernel (opt.rowo); 0 (nothing done) where it does not apply: the option off, x not 16-byte aligned,
 * weights not FP8 with 128 x 128 block scales and K % 512 == 0, or BF16 with K % 8 == 0, of one dtype, K > 16384 or
 * more than 32768 rows */
int cu_rowo(ds_cuda_backend *cb, float *out1, float *out2, const float *x, const ds_weight *w1, const ds_weight *w2);
/* The routed experts of a decode batch as W8A8 on wgmma with the weights as the MMA's M (cuda_moe_wg.cu;
 * DSINFER_CUDA_MOE_WG, default 1; DSINFER_CUDA_MOE_WG_NT: tokens a chunk, 32, 48 or 64, 0 = cu_moe_wg_chunk's
 * choice): cu_moe_tc's W8A8 form (the same xs_ws layout, y fp32 [n_rows, D]) with off[] on the device, graph-safe.
 * Returns 0 (nothing done) where it does not apply: not FP8 experts with scales, more than 256 experts, shapes
 * not multiples of 128, the layer's weight maps not made (first met inside a stream capture). */
extern int cu_moe_wg, cu_moe_wg_nt;
/* DSINFER_CUDA_MOE_WG_BF16 (default 1): the BF16 experts of a decode batch on the same kernel (BF16 wgmma, no
 * scales); 0: moe_tc2_kernel */
extern int cu_moe_wg_bf16;
extern long cu_moe_wg_qfhold_count;   /* launches of moe_wg_kernel's rows form staged in a held stage (tests) */
/* BF16 rows dst[i, :] = src[rows ? rows[i] : i, :] (moe_rows_bf16_kernel) */
void cu_rows_bf16_gather(void *dst, const float *src, const int32_t *rows, int M, int D);
/* The gathers above with the shared experts' virtual rows after the routed ones: row i < nr is x[rows[i]], row i >= nr
 * is x[(i - nr) % mt] (mt tokens, once per shared expert); M rows of K in all. fp8: codes into dst and scales s
 * (cu_rows_fp8_gather's), else BF16 rows into dst. 0 (nothing launched) where the form does not apply (fp8 with x not
 * 16-byte aligned or K % 128). */
int cu_rows_gather_sh(void *dst, float *s, const float *x, const int32_t *rows, int nr, int mt, int M, int K, int fp8);
void cu_moe_wg_init(void);
void cu_router_init(void);   /* the fused router's shared-memory attributes (cuda_moe.cu) */
int cu_moe_wg_chunk(int n_rows, int E, int nt48_max);
int cu_moe_wg_sx_fits(int nt, int K);
/* moe_wg_kernel's work item t on the host (ds_cuda_host_selftest): pre [E + 1] (each expert's first chunk, chunks of
 * nt rows), offs [E + 1] (the experts' row offsets); out: expert, first row, rows, weight block, split, first and
 * end stage, tile */
void cu_moe_wg_item(int t, int NB, const int *pre, const int *offs, int E, int ks, int kc, int LK, int nt, int out[8]);
/* moe_wg_kernel's tables past the routed experts on the host (ds_cuda_host_selftest): ns virtual experts of ms rows
 * from row rr (>= offs[E]) into pre / offs [E + ns + 1], nt rows a chunk */
void cu_moe_wg_virtual(int *pre, int *offs, int E, int ns, int ms, int rr, int nt);
/* sh_m > 0: the layer's shared experts too, as virtual experts over the sh_m tokens of x (y rows n_rows + s sh_m + m for
 * shared expert s, token m; the caller sizes y and xs_ws for n_rows + ns sh_m rows), where the layer's maps have them
 * (cu_expert_maps' ns): *sh_done 1 then, else 0 and the caller runs them. Returns 0 with nothing done where the kernel
 * does not apply. */
int cu_moe_wg_run(ds_cuda_backend *cb, float *y, const float *x, const int32_t *rows, const int32_t *off, int n_rows, int E,
                  int D, int I, const ds_layer_weights *L, void *xs_ws, int sh_m, int *sh_done);
/* The W8A8 linear of 9 .. DSINFER_CUDA_FP8_WG_MAX_M rows (default 0 = off: slower than cu_f8_wgmma_gemm at decode,
 * bench/RESULTS.md tenth session) on the same kernel with one weight
 * (cuda_moe_wg.cu): x quantized per token x 128 columns, the weight as the MMA's M by TMA, split K where its tiles
 * are fewer than the SMs, the splits summed in order by the tile's last one (no second launch). Returns 0 where it
 * does not apply (nothing done). cu_f8_wg_splits: the K splits (host-checked in ds_cuda_host_selftest). */
#define CU_F8_WG_TICKETS 16384
#define CU_MOE_WG_XS 4096   /* token scales an item of moe_wg_kernel holds in shared memory: tokens x stages */
extern int cu_f8_wg_max_m;
int cu_f8_wg_linear(ds_cuda_backend *cb, float *out, const float *x, const ds_weight *w, int M);
int cu_f8_wg_splits(int M, int N, int K, int n_sm, int nt, int *kc);
/* codes q [M, K] and scales s [M][K/128] of BF16 rows x [M, K] (the down projection's input): moe_rows_fp8_kernel, or with
 * warp (opt.quant_warp) rows_fp8_bf16_warp_kernel, the same codes */
void cu_rows_fp8_bf16(unsigned char *q, float *s, const void *x, int M, int K, int warp);
void cu_f8_reduce(float *out, const float *part, size_t n, int ks);
void cu_moe_tc2_init(void);
/* W8A8 (cuda_fp8gemm.cu): 1 if w can take the block-scaled FP8 path (FP8 with 128x128 scales, K a
 * multiple of 128, N a multiple of 4, scale rows a multiple of 4 floats); then cu_linear_fp8 computes
 * out[M, N] = q(x) . W^T with x quantized per token x 128 columns, or returns 0 having done nothing
 * (no cuBLASLt algorithm for the shape: the caller takes another path). */
int cu_fp8_gemm_ok(const ds_weight *w);
int cu_linear_fp8(ds_cuda_backend *cb, float *out, const float *x, const ds_weight *w, int M);
/* Its two halves (also timed apart by `dsinfer bench --ops`): x [M, K] to q [Mp, K] e4m3 with scales
 * s [K/128][Mp] (rows M..Mp-1 zero); d [Mp, N] = the block-scaled GEMM (0: no algorithm). */
void cu_act_quant_fp8(unsigned char *q, float *s, const float *x, int M, int Mp, int K);
int cu_fp8_gemm_quantized(ds_cuda_backend *cb, float *d, const unsigned char *q, const float *s, const ds_weight *w,
                          int Mp);
void cu_fp8_free(ds_cuda_backend *cb);
/* cuBLASLt handle and its fixed workspace (LT_WS_BYTES), made once (cuda_fp8gemm.cu). */
#define LT_WS_BYTES ((size_t)32 << 20)
void cu_lt_init(ds_cuda_backend *cb);
/* cuBLASLt's first `want` algorithms for D = op(A) op(B) in desc's layouts (C = D), workspace at most
 * LT_WS_BYTES; how many it gave (0: none, or a cuBLASLt error). */
int cu_lt_heuristics(ds_cuda_backend *cb, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                     cublasLtMatrixLayout_t ld, int want, cublasLtMatmulHeuristicResult_t *res);
/* out[m, 0:N] (row stride ldo) = x[M, K] . A[N, K]^T, BF16 inputs, fp32 accumulate and output, through
 * cuBLASLt with a plan kept per shape: tune 1, the algorithm searched for the shape once and kept on disk;
 * 0, the heuristic's first (cuda_lt_tune.cu). 0 returned: nothing done (no algorithm for the shape, or the
 * plan table full): the caller takes cuBLAS's default. */
extern "C" int cu_lt_gemm_bf16(ds_cuda_backend *cb, float *out, int ldo, const __nv_bfloat16 *A,
                               const __nv_bfloat16 *x, int N, int M, int K, int tune);
void cu_lt_tune_free(ds_cuda_backend *cb);
/* The routed experts as cuBLAS GEMMs per expert (cuda_moe_gemm.cu): whether a batch of M tokens takes that
 * path, and the path: returns y ([off[E], D] in a workspace, valid until the next call; NULL when no row) for the
 * rows grouped by expert (rows[slot] = the token, off[E + 1] on the host): fp32, or BF16 where *y_bf16 is set to 1 (the
 * W8A8 form with opt.moe_y_bf16, where *y_bf16 was nonzero on entry). */
int cu_moe_gemm_on(const ds_cuda_backend *cb, int M);
const void *cu_moe_gemm(ds_cuda_backend *cb, const float *x, const int32_t *rows, const int32_t *off, int E, int D,
                        int I, const ds_layer_weights *L, int *y_bf16);
/* DSINFER_CUDA_OP_TIMES=1 (cuda_optimes.cu): wraps the backend's ops with per-op timing; the table prints
 * to stderr (and the wrappers go) when the backend is destroyed. */
void cu_optimes_install(ds_cuda_backend *cb);
/* Within an op: the time since its start or its previous phase, as a row of its own (no-op when the
 * diagnostic is off, or inside a graph capture). Names start with spaces. */
void cu_optimes_phase(ds_cuda_backend *cb, const char *name);
void cu_optimes_report_free(ds_cuda_backend *cb);
extern int cu_route_v2;   /* DSINFER_CUDA_ROUTE2 */
/* DSINFER_CUDA_MOE_WG_PREF (default 1): moe_wg_kernel's next maps prefetched, first scales early, up to
 * DSINFER_CUDA_MOE_WG_PREF_MAX_M tokens (default 128) */
extern int cu_moe_wg_pref, cu_moe_wg_pref_max_m, cu_moe_wg_lab, cu_moe_wg_grid;
extern int cu_router_clamp;   /* DSINFER_CUDA_ROUTER_CLAMP (default 1): router_fused_kernel's token loop without an exit (cuda_moe.cu) */
void cu_mlp(ds_backend *be, float *out, const float *x, const ds_weight *gate, const ds_weight *up,
            const ds_weight *down, int M);
void cu_attn_naive(ds_backend *be, float *out, const float *q, const void *cache_v, const ds_weight *kv_b,
                   const int *seqs, int n_seqs);
void cu_attn_absorbed(ds_backend *be, float *out, const float *q, const void *cache_v, const ds_weight *kv_b,
                      const int *seqs, int n_seqs);
void cu_moe(ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int M);
void cu_moe_routed(ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int M, int e0, int e1);
/* out[M, N] = x . W^T in fp32 for M <= GEMV_MAX_M (16-byte loads of the weight in its stored dtype). */
#define GEMV_MAX_M 8
#define CU_QB_MAX_M 1024   /* the most tokens a batch qkv_finish writes q's BF16 copy for (opt.qb_fuse): decode sizes */
/* cu_gemv_group's vec: 0 the scalar kernel; else 1 | CU_GEMV_T1 where the one-row form may run (cu_gemv_flags) */
#define CU_GEMV_T1 2
#define CU_GEMV_T2 4   /* ... with two rows a warp (opt.gemv_t1 == 2; FP8 and BF16 weights) */
#define CU_GEMV_T4 8   /* ... with four rows a warp (opt.gemv_t1 == 4; FP8 and BF16 weights) */
static inline int cu_gemv_flags(const ds_cuda_backend *cb) {
    return cb->opt.vec_gemv ? 1 | (cb->opt.gemv_t1 >= 1 ? CU_GEMV_T1 : 0) | (cb->opt.gemv_t1 >= 2 ? CU_GEMV_T2 : 0) |
                                  (cb->opt.gemv_t1 >= 4 ? CU_GEMV_T4 : 0)
                            : 0;
}
/* Grouped row-dot GEMV (cuda_linear.cu): for each group e < E (blockIdx.y) with rows r in
 * [off[e], off[e+1]) (off NULL: one group of rows [0, M); with off, M is a bound on any group's rows where the caller
 * knows one, else 0), out[r, e*out_e + n] = W_e[n, :] . x[xr[r] (or r), e*x_e + :]
 * for n < max_rows, W_e row row0 + e*row_e + n (row_e for groups that are row blocks of one view v0); pair: out = SiLU(W_e x) * (W1_e x) (gate/up). W_e is tab0[e] (device array) or v0
 * when tab0 is NULL. No host sync; any M. slots > 0 (with off): at most that many groups have rows, and
 * off[E + 1] = their number, off[E + 2 ...] their indices (group_kernel writes them): only those groups'
 * blocks are launched (decode: M * top-k of E experts live; 0 = launch all E). */
void cu_gemv_group(float *out, int ldo, int out_e, const float *x, int ldx, int x_e, const int32_t *xr,
                   const int32_t *off, int M, int E, const cu_wview *tab0, const cu_wview *tab1, cu_wview v0,
                   cu_wview v1, int pair, int max_rows, int vec, int row0, int row_e, int slots);
/* The second part of a duo launch (cu_gemv_group_duo): one weight (or gate / up pair) of its own one row of x,
 * out[n] = W[n, :] . x (pair: SiLU(W x) * (W1 x)) for n < n_rows, by the blocks of grid rows y >= y0 (the first part's
 * rows y < y0); y0 >= the grid's rows: none (every other launch) */
typedef struct {
    const float *x;
    float *out;
    cu_wview v0, v1;
    int n_rows, y0;
} cu_gemv_b;
/* The input norm a GEMV folds in (cu_gemv_two_norm): its x is RMSNorm(h + add) g (add NULL: h) over n columns, eps */
typedef struct {
    const float *h, *add;
    cu_wview g;   /* the norm's weight [n] (a vector: rows 1, cols n, as the loader binds one) */
    int n;
    float eps;
} cu_gemv_norm;
/* cu_gemv_group for one row of x (M = 1, the one-row form with four weight rows a warp, K unsplit) with a second,
 * independent GEMV of one row (b; its y0 set here) in the same launch: batch 1's routed experts beside the shared
 * ones, one launch where there were two (DSINFER_CUDA_MOE_DUO). Each part's rows are summed as a launch of its own with
 * K unsplit sums them (the same bits as that launch). 0 (nothing launched) where the form does not apply (the caller
 * then launches the two parts apart). */
int cu_gemv_group_duo(float *out, int ldo, const float *x, int ldx, const int32_t *xr, const int32_t *off, int E, const cu_wview *tab0,
                      const cu_wview *tab1, cu_wview v0, cu_wview v1, int pair, int max_rows, int vec, int slots,
                      cu_gemv_b *b);
/* out1 [M, w1.rows] and out2 [M, w2.rows] = x [M, K] by w1 and w2 in one launch of the v2 GEMV (M <= GEMV_MAX_M);
 * 0 (nothing done) when the v2 kernel cannot read both the same way */
int cu_gemv_two(float *out1, float *out2, const float *x, int M, cu_wview w1, cu_wview w2, int vec);
/* out1 [w1.rows] and out2 [w2.rows] of one token whose GEMV input is RMSNorm(h + add) by the norm's weight nw [K] (add
 * NULL: h; eps), without the normed vector made first: the GEMV reads h, add and nw and scales each row's sum by 1 / RMS
 * (opt.norm_fold; cuda_linear.cu). Neither h nor xn is written. out2 NULL: w1 alone (w2 not read). 0 (nothing launched)
 * where gemv_v2_kernel's four-row form does not take the weights. */
int cu_gemv_two_norm(float *out1, float *out2, const float *h, const float *add, cu_wview nw, float eps, cu_wview w1,
                     cu_wview w2, int vec);
/* GEMV v2 switch and the SM count it sizes its split-K by (cuda_linear.cu; set at backend creation). */
extern int cu_gemv_v2, cu_gemv_sms, cu_fp8_fast;
/* opt.gemv_t1 (DSINFER_CUDA_GEMV_T1=1; =2, the default, two rows a warp; twenty-third session; =4 four rows a warp, opt-in
 * until measured, twenty-fifth session): one-row GEMVs (M == 1, or with off every group at
 * most one row: M passed as that bound) on gemv_v2_kernel's one-row form (4 blocks an SM), split K by its occupancy (the
 * same bits where the split is the 8-row kernel's, else another order of the partial sums). cu_gemv_t1_launches counts them in the process (tests). */
extern long cu_gemv_t1_launches, cu_gemv_t2_launches, cu_gemv_t4_launches, cu_gemv_p4_launches;
extern int cu_gemv_t1_ks;
/* DSINFER_CUDA_GEMV_F8C=1 (opt-in, fourteenth session, not yet run on a GPU): the v2 GEMV's FP8 weights scaled once a
 * 16-code chunk and token instead of once a code (cuda_linear.cu VT_FP8C) */
extern int cu_gemv_f8c;
/* DSINFER_CUDA_RMS_VEC=0: rmsnorm_kernel only (cuda_backend.cu); default 1: the register-cached kernel. */
extern int cu_rms_vec;
/* DSINFER_CUDA_GROUP2=0: group_kernel (a thread per expert); default 1: group_v2_kernel (cuda_moe.cu). */
extern int cu_group_v2;
/* DSINFER_CUDA_GROUP_WIDE=0: the MoE-as-GEMMs path groups its pairs with group_v2_kernel (one block); default
 * 1: over many blocks (cuda_moe.cu launch_group_wide, the same rows in the same order). */
extern int cu_group_wide;
/* DSINFER_CUDA_PROFILE_STEPS (cuda_graph.cu): starts / stops the profiler range; called once per forward. */
void cu_profile_hook(int n_tokens);
/* DSINFER_CUDA_GROUP_WIDE_MIN (sixth session): (token, expert) pairs from which the grouped decode-sized MoE
 * path also groups over several blocks (default 1024: batch 171+ at top-6). */
extern int cu_group_wide_min;
/* DSINFER_CUDA_ABSORB2=0: the first-pass q_lat = W_UK^T q_nope kernel (one thread per column, dn
 * dependent loads); 1: absorb_q_v2_kernel (cuda_attn.cu); default 2 (fifteenth session): absorb_q_v3_kernel for 1 or 2
 * tokens (64 columns of a head a block, every load issued first; FP8 b1 -0.15 ms, b2 -0.29), v2 above; to 8 tokens by
 * DSINFER_CUDA_ABSORB3_MAX_T (default 8). */
extern int cu_absorb_v2;
/* DSINFER_CUDA_ABSORB3_MAX_T (default 8, fifteenth session run 12): the most tokens absorb_q_v3_kernel takes */
extern int cu_absorb3_max_t;
/* absorb_q_v3_kernel's bytes an element of kv_b at T tokens (2 BF16, 1 FP8), 0 where it does not take them; the same
 * where the absorbed attention (attn_fused) makes the batch's T-token q product with it, else 0 (cuda_attn.cu) */
int cu_absorb_v3_eb(const ds_weight *kv_b, int T, int dn, int C);
int cu_absorb_v3_takes(const ds_cuda_backend *cb, const ds_weight *kv_b, int T);
/* DSINFER_CUDA_COMBINE2=0: mla_combine_kernel; default 1: mla_combine_v2_kernel for small grids, mla_combine_v3_kernel
 * (a block per token and head, every split's float4 loaded at once; twentieth session) above; 2: v2 always; 3: v3
 * always (cuda_attn.cu, all the same bits) */
extern int cu_combine_v2;
/* DSINFER_CUDA_MLA_ASYNC=1: the tensor-core MLA decode stages BF16 cache tiles by cp.async (cuda_mla_tc.cu);
 * default 0 until it has run on a GPU. */
extern int cu_mla_async;
/* DSINFER_CUDA_MLA_TC2=0: the BF16 cache through the first tensor-core MLA decode kernel (one tile buffer);
 * default 1: mla_decode_tc2_kernel, the rows by cp.async into a two-tile ring (cuda_mla_tc.cu). */
extern int cu_mla_tc2;
/* DSINFER_CUDA_MLA_TC2_FP8: how the FP8 cache is read. 2 (default): mla_decode_f8h_kernel, the MMAs take the
 * raw rows (codes to FP16 in registers, without their scales; the scales on the blocks' partial scores and on
 * P; a four-stage ring of raw tiles); 1: mla_decode_tc2_kernel (raw entries by cp.async, decoded per warp into
 * a BF16 tile, times the scales); 0: the first kernel (decoded while staging) */
extern int cu_mla_tc2_fp8;
/* DSINFER_CUDA_MLA_QREG: the k-steps of 16 whose Q fragments v2 keeps in registers: 36 (default, all), 18 or
 * 0 (the rest read from shared memory every tile). */
extern int cu_mla_qreg;
/* DSINFER_CUDA_MLA_WG (default 2: v2 where TMA can load the rows, else v1; =1 v1; =0 the mma.sync kernels): the BF16
 * cache's decode with 64 heads a block on wgmma (cuda_mla_wg.cu) where H is a multiple of 64 (V3's 128 heads); its
 * splits (one block an SM) and launch; cu_mla_decode_tc and cu_mla_tc_splits hand over to it */
extern int cu_mla_wg;
/* DSINFER_CUDA_MLA_WG_TMA (default 1, fourteenth session; =0 cp.async): its rows by TMA copies (a tensor map over the
 * cache rows) where the page size is 8, 16, 32, 64 or a multiple of 64 */
extern int cu_mla_wg_tma;
int cu_mla_wg_on(int kv_layout, int H);
int cu_mla_wg_splits(int T, int H, int max_ctx, int n_sm);
void cu_mla_decode_wg(const fa_params *p, int T);
/* `dsinfer bench --mla` / `--fa`: with cu_mla_ev_on, attn_fused (decode) and cu_fa_prefill2_tc (the naive prefill
 * form) record cu_mla_ev[0] / [1] on the stream around the attention kernel (its time alone); off in the engine. */
extern int cu_mla_ev_on;
extern cudaEvent_t cu_mla_ev[2];
void cu_moe_tabs_free(ds_cuda_backend *cb);
ds_status cu_graph_run(ds_backend *be, uint64_t key, void (*fn)(void *), void *ctx, char *err);
void cu_graphs_free(ds_cuda_backend *cb);
ds_status cu_prepare_weights(ds_backend *be, ds_model_weights *w, char *err);
/* Remembers a device allocation so destroy frees it. */
void cu_own(ds_cuda_backend *cb, void *p);

#endif
