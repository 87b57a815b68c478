#!/usr/bin/env bash
# The mutated builds for session_run.sh f8cl16 (after dev/cuda/pack.sh; then `tar cJf .deps.tar.xz .deps`): each must
# fail `DSINFER_OPS_ONLY=f8cl test_cuda_ops` (the W8A8 split-K sum inside a cluster, cuda_fp8_wgmma.cu cl_sum_store).
# History: f8cl, f8tc, f8bn and rgroup were removed in the thirty-eighth session; their mutants no longer build.
set -euo pipefail
cd "$(dirname "$0")/../.."
# ONLY=a,b (name prefixes): build just those (e.g. ONLY=tp_,qf_)
m=dev/cuda/build_mutant.sh
mut() { local n=$1; if [ -n "${ONLY:-}" ]; then local ok=0 p; for p in ${ONLY//,/ }; do [[ $n == $p* ]] && ok=1; done
  [ $ok = 1 ] || return 0; fi; bash $m "$@"; }
F=src/backend/cuda/cuda_fp8_wgmma.cu
# the last split left out of the sum
mut cl_last $F '    for (int z = 0; z < ks; z++) {
        uint32_t pz = cl_map(base, z);' '    for (int z = 0; z < ks - 1; z++) {
        uint32_t pz = cl_map(base, z);'
# the splits summed in reverse order (the same sum in exact arithmetic, other bits in fp32)
mut cl_order $F 'uint32_t pz = cl_map(base, z);' 'uint32_t pz = cl_map(base, ks - 1 - z);'
# the rows of one block read for another's share (rank 0's rows everywhere)
mut cl_rows $F 'float4 v = cl_ld4(pz + 4u * (uint32_t)(row * CL_LD + 4 * (f & 31)));' 'float4 v = cl_ld4(pz + 4u * (uint32_t)(ks * (f >> 5) * CL_LD + 4 * (f & 31)));'
# f8_tma1_kernel (DSINFER_OPS_ONLY=f8t1): a slot refilled with the stage before the one it is due (the "wide" case's
# splits of 5 stages refill one slot)
mut t1_refill $F 'tma_load(sm + slot * T1_STAGE + 64 * WG_BK, tb, (kb + T1_ST) * WG_BK, n0, &full[slot]);' 'tma_load(sm + slot * T1_STAGE + 64 * WG_BK, tb, (kb + T1_ST - 1) * WG_BK, n0, &full[slot]);'
# linear2's second weight read through the first one's map
mut t1_map2 $F 'const CUtensorMap *tb = second ? &tb2 : &tb1;' 'const CUtensorMap *tb = &tb1;'
# f8_tma_kernel<*, true> (DSINFER_OPS_ONLY=f8tp): the prefetched scales of k-block i + 1 taken for i + 2 too (acc_a's
# next k-block promoted with its predecessor's scales)
mut tp_next $F '            if (PREF) sa = tm_scales(&c, i + 2);' '            if (PREF) sa = sb;'
# mw_store_qf (DSINFER_OPS_ONLY=moeqf): each warp's own row maximum instead of the item's 128 columns'
mut qf_max src/backend/cuda/cuda_moe_wg.cu 'for (int w = 1; w < 8; w++) v = fmaxf(v, red[w * NT + c]);' 'for (int w = 1; w < 1; w++) v = fmaxf(v, red[w * NT + c]);'
# SiLU(g) * u quantized without its BF16 rounding
mut qf_round src/backend/cuda/cuda_moe_wg.cu 'h[i] = __bfloat162float(__float2bfloat16_rn(g[i] / (1.0f + expf(-g[i])) * u[i]));' 'h[i] = g[i] / (1.0f + expf(-g[i])) * u[i];'
# (rg_*: history; DSINFER_CUDA_ROUTE_GROUP and op test rgroup were removed in the thirty-eighth session)
# the routing kernels' grouping (DSINFER_OPS_ONLY=rgroup): the fused router's second ticket not put back (the next
# launch does not group: its experts get the launch before's rows)
mut rg_reset src/backend/cuda/cuda_moe.cu '        if (last_all) tickets[CU_ROUTE_TICKETS - 1] = 0;   /* every token group has taken its ticket */' ''
# route_group_kernel grouping one token too few
mut rg_small src/backend/cuda/cuda_moe.cu 'group_block(ids, wout, M, rc.K, rc.E, go.offsets,' 'group_block(ids, wout, M - 1, rc.K, rc.E, go.offsets,'
# seventeenth session: f8_tma_kernel<*, *, true> (DSINFER_OPS_ONLY=f8tc, the TMA kernel's splits summed in clusters):
# the splits' K ranges taken in reverse (split z reads split ks - 1 - z's stages: another sum order, and the short last
# split's length at the wrong place)
mut tc_split $F '        j->kb0 = z * (kc / WG_BK);' '        j->kb0 = (ks - 1 - z) * (kc / WG_BK);'
# every block of a cluster sums rank 0's share of the rows (the other shares never stored)
mut tc_rank $F '        if (CL) cl_sum_store<2, true>(tot, sm, out, N, M, j.m0, j.n0, c.r0 - j.m0, lane, ks, t % ks, threadIdx.x - 128);' '        if (CL) cl_sum_store<2, true>(tot, sm, out, N, M, j.m0, j.n0, c.r0 - j.m0, lane, ks, 0, threadIdx.x - 128);'
# f8_mlp_tma (DSINFER_OPS_ONLY=linear2, the W8A8 MLP above 64 rows with DSINFER_CUDA_MLP_FUSE=2): up's GEMM through
# gate's tensor map
mut mlp_map $F '    tma_gemm_launch(ta, tu, b.pu, b.qs, up, M, kc, ks, cb->n_sm);' '    tma_gemm_launch(ta, tg, b.pu, b.qs, up, M, kc, ks, cb->n_sm);'
# rows_fp8_bf16_warp_kernel (DSINFER_OPS_ONLY=quantw): a lane's first two values swapped
mut qw_lane src/backend/cuda/cuda_moe_tc.cu '    float v[4] = {__uint_as_float(raw.x << 16), __uint_as_float(raw.x & 0xffff0000u), __uint_as_float(raw.y << 16),' '    float v[4] = {__uint_as_float(raw.x & 0xffff0000u), __uint_as_float(raw.x << 16), __uint_as_float(raw.y << 16),'
# tm_store_tma (DSINFER_OPS_ONLY=f8ts, DSINFER_CUDA_F8_TM_STORE=1): the sums written unswizzled (the TMA store reads
# them swizzled: columns scrambled within each 8-row group)
mut ts_swz $F '            *(float2 *)(eb + (j >> 2) * 8192 + r * 128 + ((chunk ^ (r & 7)) << 4) + (lane & 1) * 8) =' '            *(float2 *)(eb + (j >> 2) * 8192 + r * 128 + (chunk << 4) + (lane & 1) * 8) ='
# every K split's partial stored as split 0's (the others never written)
mut ts_z $F '            tm_store_tma(tot, epi + cw * (TM_EPI / 2), &tc, j.n0, j.m0 + 64 * cw, t / (mb * nb), c.r0 - j.m0 - 64 * cw,' '            tm_store_tma(tot, epi + cw * (TM_EPI / 2), &tc, j.n0, j.m0 + 64 * cw, 0, c.r0 - j.m0 - 64 * cw,'
# f8_tma192_kernel (DSINFER_OPS_ONLY=f8bn): every column of a tile promoted with its first scale block's scale
mut bn_bnd $F '                bool first = 8 * j < bnd;' '                bool first = true;'
# the second row of a thread promoted with the first row's activation scale
mut bn_row $F '            float x0 = r0 < M ? xs[(size_t)r0 * LK + kb] : 0.0f, x1 = r1 < M ? xs[(size_t)r1 * LK + kb] : 0.0f;' '            float x0 = r0 < M ? xs[(size_t)r0 * LK + kb] : 0.0f, x1 = r1 < M ? xs[(size_t)r0 * LK + kb] : 0.0f;'
