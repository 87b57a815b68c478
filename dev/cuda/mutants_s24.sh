#!/usr/bin/env bash
# The twenty-fourth session's mutated builds (after dev/cuda/pack.sh; then strip them and `tar cJf .deps.tar.xz .deps`):
# each must fail the op test named beside it (moepdl: moe_wg_kernel launched with PDL; router: the fused router).
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# the first ring's codes, requested after the wait, from the next row (the pending stages' rows off by one)
bash $m pdl_row src/backend/cuda/cuda_moe_wg.cu '    for (int s = 0; s < n; s++) tma_load(sm + s * stage_bytes + codes_at, tx, pkb[s] * MW_BK, prow[s], &full[s]);' '    for (int s = 0; s < n; s++) tma_load(sm + s * stage_bytes + codes_at, tx, pkb[s] * MW_BK, prow[s] + 1, &full[s]);'
# the fused router's token groups placed as if 4 tokens a block whatever TOK (must fail DSINFER_OPS_ONLY=router)
bash $m rtok_m0 src/backend/cuda/cuda_moe.cu '    int m0 = blockIdx.x * TOK, nt = M - m0 < TOK ? M - m0 : TOK, e = blockIdx.y * RF_WARPS + warp;' '    int m0 = blockIdx.x * RF_TOK, nt = M - m0 < TOK ? M - m0 : TOK, e = blockIdx.y * RF_WARPS + warp;'
