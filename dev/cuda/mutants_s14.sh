#!/usr/bin/env bash
# The mutated builds for session_run.sh wgtma14 and f8c15 (after dev/cuda/pack.sh; then `tar cJf .deps.tar.xz .deps`): each must
# fail `DSINFER_OPS_ONLY=mla test_cuda_ops` with the wgmma MLA decode's rows by TMA (DSINFER_CUDA_MLA_WG_TMA=1).
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
W=src/backend/cuda/cuda_mla_wg.cu
# the rows past the context not zeroed after the copies (a last page's NaN rows reach the values MMA)
bash $m wgt_tail $W 'if (nc < WM_TILE) wm_zero_tail(Kt, nc);' 'if (nc < 0) wm_zero_tail(Kt, nc);'
# every box of a tile at the tile's first row (the boxes overwrite each other)
bash $m wgt_box $W 'tma_load(Kt + c * WM_CHUNK_B + b * br * 128, km, c * 128, row, bar);' 'tma_load(Kt + c * WM_CHUNK_B, km, c * 128, row, bar);'
# (session_run.sh f8c15) the chunk's dot not scaled: must fail `DSINFER_OPS_ONLY=f8c`
bash $m f8c_scale src/backend/cuda/cuda_linear.cu 'a0[j] = fmaf(d0[j], s0[u], a0[j]);' 'a0[j] = fmaf(d0[j], 1.0f, a0[j]);'
# (f8c15) the pair's second weight scaled by the first's scale
bash $m f8c_pair src/backend/cuda/cuda_linear.cu 'if (PAIR) a1[j] = fmaf(d1[j], s1[u], a1[j]);' 'if (PAIR) a1[j] = fmaf(d1[j], s0[u], a1[j]);'
