/* The CUDA backend seen from C: how the engine creates it and the few extra entry points the GPU tests
 * use to drive single ops (uploading host data and weights, the router kernel, sampling). Everything
 * here exists only in builds with DS_HAVE_CUDA (nvcc found); callers guard with #ifdef DS_HAVE_CUDA. */
#ifndef DS_BACKEND_CUDA_API_H
#define DS_BACKEND_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 if a CUDA device of compute capability 9.x can be used; else 0 with the reason in `why`. */
int ds_cuda_available(char *why, size_t why_len);
/* Host-side check of the element conversions the kernels share with the CPU (cuda_selftest.cu); needs
 * no GPU. Returns the number of mismatches, the first described in msg. */
long ds_cuda_host_selftest(char *msg, size_t len);
/* the device-only conversions against their host-checked twins, on the GPU: mismatches (0: msg "ok") */
long ds_cuda_device_selftest(char *msg, size_t len);
/* Free and total memory of the current device in bytes (cudaMemGetInfo). */
ds_status ds_cuda_mem_info(size_t *free_bytes, size_t *total_bytes, char *err);
/* The stream every op of the CUDA backend runs on (a cudaStream_t), for NCCL (dist/comm_nccl.c). */
void *ds_cuda_stream(void);

/* Creates the CUDA backend on device 0 (cuBLAS handle, constants). NULL with a message in err. */
ds_backend *ds_backend_cuda_new(const ds_config *cfg, char *err);

/* Copies n floats from host memory into backend (device) memory. */
void ds_cuda_from_host(ds_backend *be, float *dst, const float *src, size_t n);
/* Copies n bytes host -> device / device -> host (any type). */
void ds_cuda_upload_bytes(ds_backend *be, void *dst, const void *src, size_t n);
void ds_cuda_download_bytes(ds_backend *be, void *dst, const void *src, size_t n);
/* How many MoE calls of this backend ran the shared experts inside the routed experts' launches
 * (DSINFER_CUDA_MOE_SHARED_IN): the op tests' evidence that the form they compare did run. */
long ds_cuda_moe_shared_in_runs(ds_backend *be);
/* How many expert GEMV launches of this backend took the shared experts as their second part (DSINFER_CUDA_MOE_DUO; two
 * a MoE call at one token): the op test's evidence that the duo form ran. */
long ds_cuda_moe_duo_launches(ds_backend *be);
/* How many attn_in / linear_add_rmsnorm calls of this backend ran the fused W8A8 chain (DSINFER_CUDA_CHAIN_FUSE) with
 * its split-K sums in the next kernel: the op test's evidence that the fused form ran. */
long ds_cuda_chain_fused_runs(ds_backend *be);
/* moe_wg_kernel launches of this backend with programmatic dependent launch (DSINFER_CUDA_MOE_WG_PDL; tests) */
long ds_cuda_moe_wg_pdl_launches(ds_backend *be);
/* grouped moe_wg_kernel launches with DSINFER_CUDA_MOE_WG_ORDER 1 or 2 (tests) */
long ds_cuda_moe_wg_order_launches(ds_backend *be);
/* grouped moe_wg_kernel launches whose token scales the producer warpgroup staged (DSINFER_CUDA_MOE_WG_SX; tests), and
 * whether an item of nt tokens and K columns can be staged so */
long ds_cuda_moe_wg_sx_launches(ds_backend *be);
/* moe_wg_kernel launches whose BF16 store went as whole sectors (DSINFER_CUDA_MOE_WG_ST2; tests) */
long ds_cuda_moe_wg_st2_launches(ds_backend *be);
long ds_cuda_moe_wg_qfrow_launches(ds_backend *be);   /* mw_args.qf == 2 launches (the codes as rows) */
long ds_cuda_moe_wg_qfhold_launches(void);   /* ... of them, those staged in the item's last stage (every backend) */
/* fused router launches with the token group's x rows in shared memory (DSINFER_CUDA_ROUTER_XS; tests) */
long ds_cuda_router_xs_launches(ds_backend *be);
/* fused router launches with the columns in K slices (DSINFER_CUDA_ROUTER_KS; tests) */
long ds_cuda_router_ks_launches(ds_backend *be);
/* attn_in calls whose norm kernel made the MoE combine moe_to_attn_in left (DSINFER_CUDA_COMBINE_NORM; tests) */
long ds_cuda_comb_norm_runs(ds_backend *be);
/* MoE calls of one token made by the one launch of cuda_moe1.cu (DSINFER_CUDA_MOE1; tests) */
long ds_cuda_moe1_runs(ds_backend *be);
/* MoE calls of one token made by the intermediate-ownership launch of cuda_moeo.cu (DSINFER_CUDA_MOEO; tests) */
long ds_cuda_moeo_runs(ds_backend *be);
long ds_cuda_moeo_strips_runs(ds_backend *be);   /* of them with the strip-layout down copies (DSINFER_CUDA_MOEO_STRIPS) */
long ds_cuda_moeo_tc_runs(ds_backend *be);       /* of them with the sums on the tensor cores (DSINFER_CUDA_MOEO_TC) */
/* linears of one token made by the row-ownership launch of cuda_rowo.cu (DSINFER_CUDA_ROWO; tests) */
long ds_cuda_rowo_runs(ds_backend *be);
/* ... MoE calls of one token made by cuda_moeo.cu's tail form (DSINFER_CUDA_MOEO_TAIL, backend layer_tail1; tests) */
long ds_cuda_moeo_tail_runs(ds_backend *be);
long ds_cuda_router_norm_runs(ds_backend *be);
/* ... of them as the layer's tail (DSINFER_CUDA_MOE1=2, backend layer_tail1), and with the next layer's projections */
long ds_cuda_tail1_runs(ds_backend *be);
long ds_cuda_tail1_next_runs(ds_backend *be);
/* ... and with the layer's attention first (DSINFER_CUDA_MOE1=3, backend layer1) */
long ds_cuda_attn1_runs(ds_backend *be);
/* MLA decodes whose split combine the decode kernel's last split blocks made (DSINFER_CUDA_MLA_FOLD; tests) */
long ds_cuda_mla_fold_runs(ds_backend *be);
int ds_cuda_moe_wg_sx_fits(int nt, int K);
/* absorbed attentions that read the BF16 q qkv_finish wrote (DSINFER_CUDA_QB_FUSE; tests) */
long ds_cuda_qb_fused_runs(ds_backend *be);
/* qkv_finish launches with q's heads in blocks of their own (DSINFER_CUDA_QKV_SPLIT; tests) */
long ds_cuda_qkv_split_launches(ds_backend *be);
/* qkv_finish launches that made the absorbed attention's q_lat too (opt.qkv_absorb), and absorbed attentions that took it */
long ds_cuda_qkv_absorb_runs(ds_backend *be);
long ds_cuda_norm_fold_runs(ds_backend *be);   /* attn_in calls with the input norm folded (opt.norm_fold) */
long ds_cuda_normed_linear_folds(ds_backend *be);   /* normed_linear calls with the norm folded (opt.norm_fold) */
long ds_cuda_qlat_taken_runs(ds_backend *be);
/* absorbed attentions whose split combine and W_UV product ran as one launch (opt.comb_uv) */
long ds_cuda_comb_uv_runs(ds_backend *be);
/* the decode experts' tokens a chunk for n_rows routed rows over E experts (cu_moe_wg_chunk at this backend's
 * DSINFER_CUDA_MOE_WG_NT48; tests) */
int ds_cuda_moe_wg_chunk(ds_backend *be, int n_rows, int E);
/* moe_wg_kernel launches with 48 tokens a chunk (DSINFER_CUDA_MOE_WG_NT48; tests) */
long ds_cuda_moe_wg_nt48_launches(ds_backend *be);
/* ... of moe_wg_kernel's pipelined one-weight form (DSINFER_CUDA_MOE_WG_PIPE; tests) */
long ds_cuda_moe_wg_pipe_launches(ds_backend *be);
/* launches of the one-row GEMV form (DSINFER_CUDA_GEMV_T1, process-wide count; tests) */
long ds_cuda_gemv_t1_launches(void);
/* ... and of those with two weight rows a warp (DSINFER_CUDA_GEMV_T1=2) */
long ds_cuda_gemv_t2_launches(void);
/* ... and of those with four (DSINFER_CUDA_GEMV_T1=4) */
long ds_cuda_gemv_t4_launches(void);
/* ... of those, the gate / up pairs' (two rows of each a warp) */
long ds_cuda_gemv_p4_launches(void);
/* launches of the W8A8 GEMM's form with transposed scales (DSINFER_CUDA_F8_TM_SS 3; process-wide count; tests) */
long ds_cuda_f8_tm_xt_launches(void);
long ds_cuda_f8_tm_ring_launches(void);   /* DSINFER_CUDA_F8_TM_SS 4's launches (process-wide) */
/* grouped launches of the prefill MoE with 64-row tiles where an expert's tile has at most 64 rows (DSINFER_CUDA_MOE_HALF;
 * process-wide count; tests) */
long ds_cuda_moe_half_launches(void);
/* grouped launches of the prefill MoE with fetched tiles (DSINFER_CUDA_MOE_DYN; process-wide count; tests) */
long ds_cuda_moe_dyn_launches(void);
/* launches of the prefill MoE's gate / up with SiLU * up in the epilogue (DSINFER_CUDA_MOE_SILU_EPI; process-wide; tests) */
long ds_cuda_moe_silu_launches(void);
/* down launches of the prefill MoE's grouped form with BF16 rows (DSINFER_CUDA_MOE_Y_BF16; process-wide; tests) */
long ds_cuda_moe_y_bf16_launches(void);
/* gate / up launches of the prefill MoE's grouped form with BF16 sums (DSINFER_CUDA_MOE_GU_BF16; process-wide; tests) */
long ds_cuda_moe_gu_bf16_launches(void);
/* Device memory of n bytes owned by the backend (freed with release()). */
void *ds_cuda_alloc_bytes(ds_backend *be, size_t n);

/* A device copy of one host weight view (data and scale), owned by the backend until destroy. */
ds_status ds_cuda_weight_upload(ds_backend *be, const ds_weight *host, ds_weight *dev, char *err);
/* Makes the BF16 copy of a device FP8 kv_b that the absorbed attention's batched GEMMs then read instead of
 * converting it at every call (what DSINFER_CUDA_KVB_BF16 does for each layer at weight upload; the op tests call
 * it on their own weight). Its memory is the backend's. DS_ERR_ARG for a weight that is not FP8 with scales,
 * DS_ERR_NOMEM when it does not fit. */
ds_status ds_cuda_kvb_copy(ds_backend *be, const ds_weight *kv_b, char *err);

/* The fused router kernel alone: logits [M, E] (device), bias [E] (device fp32, may be NULL) ->
 * ids [M, K] and weights [M, K] (device), same rules as ds_route_token. */
void ds_cuda_route(ds_backend *be, const float *logits, const float *bias, int32_t *ids, float *weights, int M);
/* The MoE block's routing as the backend runs it (the fused router kernel where it applies, else the router GEMM
 * then the routing kernel): x [M, hidden] (device), router [E, hidden] and router_bias (NULL or no data: none)
 * device weights -> logits [M, E], ids [M, K] and weights [M, K] (device). */
void ds_cuda_router(ds_backend *be, const float *x, const ds_weight *router, const ds_weight *router_bias, int M,
                    float *logits, int32_t *ids, float *weights);

/* Sampling on the GPU from rows of logits in device memory (logits [n_rows, vocab], not modified):
 * temperature 0 = greedy (first index of the maximum); else softmax(logits / temperature) restricted to
 * the top_k largest (0 = all), then to the smallest prefix (sorted by logit, ties by index) whose mass
 * reaches top_p, drawn with u = the next splitmix64 draw of *rng as in ds_sampler_sample (no penalties,
 * no min_p). One draw per row, in row order; *rng advances. out[n_rows] on the host. */
void ds_cuda_sample(ds_backend *be, const float *logits, int n_rows, int vocab, float temperature, int top_k,
                    float top_p, uint64_t *rng, int32_t *out);

/* The ceilings of `dsinfer bench`: device-to-device copy bandwidth (GB/s, bytes read + written) and the
 * cuBLAS BF16 GEMM rate (TFLOP/s, 8192^3, fp32 accumulation, random data). */
ds_status ds_cuda_ceilings(double *copy_gbs, double *bf16_tflops, char *err);
/* What a kernel boundary costs in a CUDA graph, microseconds a pair (bench --ceilings; cuda_bench.cu): two empty kernels
 * launched plainly and the second with programmatic dependent launch; a wide short kernel (the experts' down input's
 * quantizer grid) then a persistent one (a block an SM, moe_wg_kernel's shared memory), plainly, with PDL, and with PDL
 * and the first one's trigger after its stores. */
typedef struct {
    double empty_plain_us, empty_pdl_us, pair_plain_us, pair_pdl_us, pair_pdl_late_us;
    double grid_barrier_us;   /* one grid-wide barrier inside a cooperative persistent launch (a block an SM); -1: none */
    double grid_barrier_ar_us;   /* the same with acquire / release operations instead of fences */
    /* a 6 MB then a 4 MB read (batch 1's q and o weights' sizes) as two kernels, as two phases of one cooperative launch
     * around a grid barrier, and so with the second read's lines asked of L2 before the barrier: us a pair; -1: none */
    double reads_two_us, reads_phases_us, reads_phases_pf_us;
    /* the same bytes as 2 x 64 phases of ONE cooperative launch, streamed into shared memory by a producer thread a block
     * (cuda_bench.cu sp_stream_kernel): no barriers; a grid barrier between phases with the producer running ahead
     * across them; and with the producer waiting for each barrier; running ahead across counters in place of the
     * barriers (a release add a block, an acquire poll); and so with each phase dealt to free blocks in 16 KB chunks: us a
     * pair (10 MB); -1: none. stream_bad: 0, or which form (1 .. 8; 6, 7 the stamped launches below) summed the bytes
     * wrongly (a byte not read, or read twice) */
    double stream_free_us, stream_ahead_us, stream_wait_us, stream_counter_us, stream_dealt_us;
    /* one launch of each counters' form (static shares; dealt chunks) with each block's add and pass stamped
     * (%globaltimer): quantiles 10 / 50 / 90% over the blocks and counters of the skew (the last block's add less this
     * block's) and the propagation (this block's pass less the last add), us; -1: none */
    double counter_skew_us[3], counter_prop_us[3], dealt_skew_us[3], dealt_prop_us[3];
    /* the ring's depth (2, 3, 4 of the 6 stages of 32 KB): the free stream and the counters' form, us a pair, and the
     * counters' propagation p50 (us; stream_bad 8: a word sum wrong there); -1: none */
    double ring_free_us[3], ring_counter_us[3], ring_prop_us[3];
    /* the counters' form with the polls relaxed and one acquire fence after the pass (sp_stream_kernel mode 6): us a pair,
     * and its stamped launch's skew and propagation quantiles as above (stream_bad 12, 13: a word sum wrong); -1: none */
    double relaxed_counter_us, relaxed_skew_us[3], relaxed_prop_us[3];
    /* the counters' form with each add a bulk reduction from shared memory (the async proxy; mode 8): the same figures
     * (stream_bad 16, 17) */
    double bulk_counter_us, bulk_skew_us[3], bulk_prop_us[3];
    /* the same with each block's 8 KB of partial sums bulk-reduced (add.f32) into one row first, waited for complete
     * (mode 9; stream_bad 18 .. 20: a word sum or the row's sums wrong) */
    double bulk_part_us, bulk_part_skew_us[3], bulk_part_prop_us[3];
    /* the dependencies kept inside thread-block clusters of 1, 2, 4, 8, 16 blocks (sp_stream_kernel mode 5: remote
     * mbarrier arrives, no grid-wide word): the blocks launched (as many whole clusters as fit at once, at most a block an
     * SM; 0: that size does not fit), us a pair without dependencies on that grid and with them, and the skew and
     * propagation p50 of a stamped launch against the cluster's last arrive (us; stream_bad 9, 10, 11: a word sum wrong);
     * -1: none */
#define DS_GAP_CLUSTERS 5
    int cl_blocks[DS_GAP_CLUSTERS];
    double cl_free_us[DS_GAP_CLUSTERS], cl_dep_us[DS_GAP_CLUSTERS], cl_skew_us[DS_GAP_CLUSTERS], cl_prop_us[DS_GAP_CLUSTERS];
    /* the same dependencies as messages (mode 7: st.async into every peer's shared memory, completing on its mbarrier; no
     * release fence): us a pair and the propagation p50 (stream_bad 14, 15: a word sum wrong or a message lost) */
    double cl_tx_us[DS_GAP_CLUSTERS], cl_tx_prop_us[DS_GAP_CLUSTERS];
    /* a gpu-scope dependency with 8 KB of partial sums a block, reduced inside the cluster by messages first, then
     * bulk-reduced onto one row and counted (mode 10): us a pair and the propagation p50 against the grid's last count
     * (stream_bad 21 .. 23: a word sum or the row wrong) */
    double cl_red_us[DS_GAP_CLUSTERS], cl_red_prop_us[DS_GAP_CLUSTERS];
    /* the free stream (mode 0) by a grid of few blocks, a block an SM (8, 16, 24, 33, 66 and every SM; fifty-third
     * session): us a pair of 10 MB, what a part of the GPU streams alone (stream_bad 24: a word sum wrong); -1: none */
#define DS_GAP_FEW 6
    int few_blocks[DS_GAP_FEW];
    double few_free_us[DS_GAP_FEW];
    /* ONE cluster of 8 and of 16 blocks alone (a GPC's share: a cluster's blocks are placed in one GPC): the free stream
     * and the messages' form (modes 0 and 7 on that grid), us a pair (stream_bad 25, 26: a word sum wrong); -1: none */
    double one_cl_free_us[2], one_cl_tx_us[2];
    /* batch 1's q + kv_a GEMV (V2-Lite: 3648 x 2048 FP8, 7.5 MB from DRAM) by a producer's bulk copies and moeo_kernel's
     * consumers (cuda_bench.cu cg_gemv_kernel): us a GEMV with a block an SM, 16 blocks spread, 16 blocks as one cluster,
     * and each form's NMSE against an fp32 reference; -1: none */
    double cg_us[3], cg_nmse[3];
    int stream_bad;
} ds_launch_gaps;
ds_status ds_cuda_launch_gaps(ds_launch_gaps *out, char *err);
/* The absorbed MLA decode op alone (cfg's heads and widths; fp32 latent cache of n_seqs x ctx tokens in
 * shuffled pages; kv_b BF16): median ms and GB/s (cache + kv_b + q/out bytes over time) of the whole op, and
 * of its attention kernel alone (kern_ms, kern_gbs: the cache bytes over the kernel's time). */
ds_status ds_cuda_bench_mla(const ds_config *cfg, int n_seqs, int ctx, double *ms, double *gbs, double *kern_ms,
                             double *kern_gbs, char *err);
/* `dsinfer bench --fa` (issue 8): the naive-form prefill attention op alone over one sequence of P new tokens (no
 * cached prefix; cfg's heads and widths, the cache in cfg's layout in shuffled pages, kv_b BF16): median ms of the
 * whole op (the latent rows gathered, kv_b's product, the BF16 copies, the attention kernel) and of the attention
 * kernel alone (events around its launch). */
ds_status ds_cuda_bench_fa(const ds_config *cfg, int P, double *ms, double *kern_ms, char *err);
/* `dsinfer bench --ops` (issue 8): one FP8 weight [N, K] (K % 128 == 0, N % 4 == 0, random codes, scales
 * 1/256) and, per M of Ms, the median GPU microseconds (cold L2, the host's issue time excluded) of: the W8A8
 * linear as the engine runs it (activation quantization + the GEMM the switches pick, DSINFER_CUDA_FP8_GEMM=1),
 * the own wgmma GEMM alone on quantized activations (cu_f8_wgmma_gemm), cuBLASLt's block-scaled GEMM alone
 * on quantized activations (lt_ok 0: no algorithm), and cuBLAS's BF16 GEMM of the same shape. */
typedef struct {
    int N, K, M, lt_ok;
    double w8a8_us, own_us, lt_us, bf16_us;
} ds_ops_row;
ds_status ds_cuda_bench_ops(const ds_config *cfg, int N, int K, const int *Ms, int nM, ds_ops_row *rows, char *err);
/* The tuned cuBLASLt GEMMs (DSINFER_CUDA_LT_TUNE, cuda_lt_tune.cu): the file this device's choices are
 * kept in, and what a backend did so far: shapes searched (timed), taken from the file, and chosen
 * without timing (first met inside a CUDA graph capture). */
ds_status ds_cuda_lt_tune_path(char *out, size_t n, char *err);
void ds_cuda_lt_tune_stats(ds_backend *be, int *searched, int *from_disk, int *untimed);
/* The resident-phases lab (`dsinfer bench --ceilings`; cuda_lab_resident.cu): `phases` dependent GEMVs of rows x cols
 * E4M3 (mb MB in all), each on the last's output, from a cold L2, in us: a kernel a phase in a CUDA graph (chain), the
 * same as programmatic dependent launches that copy their rows before their wait (chain_pdl), one cooperative launch
 * with every phase's rows copied into shared memory at its start and a grid counter between phases (resident), and its
 * phases alone once every row has landed (phases_alone, the launch's own clock); each form's NMSE against the host's
 * chain after one run with the intermediate vectors poisoned. */
typedef struct {
    int phases, rows, cols;
    double mb, chain_us, chain_pdl_us, resident_us, phases_alone_us;
    double nmse_chain, nmse_chain_pdl, nmse_resident, nmse_clocked;
} ds_resident_lab;
ds_status ds_cuda_resident_lab(ds_resident_lab *out, char *err);
/* The FP8 matrix rate (TFLOP/s): cuBLASLt E4M3 GEMM 8192^3, per-tensor scales, BF16 output. */
ds_status ds_cuda_fp8_peak(double *tflops, char *err);

#ifdef __cplusplus
}
#endif
#endif
