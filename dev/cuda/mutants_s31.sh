#!/usr/bin/env bash
# The thirty-first session's mutated builds (`bash dev/cuda/pack_session.sh dev/cuda/mutants_s31.sh`): each must fail the
# op test named beside it (moesx: DSINFER_CUDA_MOE_WG_SX, the staged items; moest2: DSINFER_CUDA_MOE_WG_ST2, gate / up's
# store as whole sectors).
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# the consumers read the other item buffer from the third item on (must fail moesx: another item's scales)
bash $m sx_par src/backend/cuda/cuda_moe_wg.cu '        float *buf = xsm + (j & 1) * (MW_XS / 2);   /* sx: item j'"'"'s buffer (mw_scale_warps) */' '        float *buf = xsm + ((j >> 1) & 1) * (MW_XS / 2);   /* sx: item j'"'"'s buffer (mw_scale_warps) */'
# the up tile promoted with the gate tile's staged weight scales (must fail moesx)
bash $m sx_up src/backend/cuda/cuda_moe_wg.cu '            sw1 = sw0 + (m.kb1 - m.kb0);' '            sw1 = sw0;'
# the sectors' 8-byte pieces in reverse column order (must fail moest2)
bash $m st2_col src/backend/cuda/cuda_moe_wg.cu '        uint2 v = *(const uint2 *)(stg + tr * 16 + 4 * tq);' '        uint2 v = *(const uint2 *)(stg + tr * 16 + 4 * (3 - tq));'
