#!/usr/bin/env bash
# The mutated builds for session_run.sh wg2_15 (after dev/cuda/pack.sh; then `tar cJf .deps.tar.xz .deps`): each must
# fail `DSINFER_OPS_ONLY=mla test_cuda_ops` through mla_decode_wg2_kernel (the test's DSINFER_CUDA_MLA_WG=2 cases).
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
W=src/backend/cuda/cuda_mla_wg.cu
# the other warpgroup's factor not applied (its tile added on the old scale)
bash $m wg2_fac $W 'float cA = w2_c(s)[par * WM_HEADS + s.hA], cB' 'float cA = 1.0f, cB'
# the scores without Q's RoPE columns (the last four k-steps)
bash $m wg2_rope $W 'w2_mma_s(sacc, wg_desc(s.Qs + off), wg_desc(Kw + off), kk);' 'if (kk < 32) w2_mma_s(sacc, wg_desc(s.Qs + off), wg_desc(Kw + off), kk);'
# the own P's register fragment with head hA's values where hB's belong (rows 8 .. 15 of each warp)
bash $m wg2_pr $W 'pr[j >> 1][(j & 1) * 2 + 1] = w2_pack(sacc[4 * j + 2], sacc[4 * j + 3]);' 'pr[j >> 1][(j & 1) * 2 + 1] = w2_pack(sacc[4 * j], sacc[4 * j + 1]);'
# P stored for the other warpgroup with the second column block of each k-step over the first (stmatrix addresses)
bash $m wg2_stm $W 'w2_stmatrix4(Pw + wm_off(head, 2 * kk + (mat >> 1)), pr[kk]);' 'w2_stmatrix4(Pw + wm_off(head, 2 * kk), pr[kk]);'
# the last tile's first row past the context left in the softmax
bash $m wg2_mask $W 'if (8 * j + 2 * s.t + (e & 1) >= nc) sacc[4 * j + e] = -INFINITY;' 'if (8 * j + 2 * s.t + (e & 1) >= nc + 1) sacc[4 * j + e] = -INFINITY;'
# the last tile's rows past the context not zeroed (NaN-poisoned page rows reach the values MMA)
bash $m wg2_tail $W 'if (nc < WM_TILE) {   /* the last tile: rows past the context to zero' 'if (nc < 0) {   /* the last tile: rows past the context to zero'
