#!/usr/bin/env bash
# The thirty-second session's routing mutants (`bash dev/cuda/pack_session.sh dev/cuda/mutants_s32b.sh`): each must fail op
# test router (DSINFER_CUDA_ROUTE_FAST: the routing warps' top-k in registers).
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# the routing warps' top-k in registers (DSINFER_CUDA_ROUTE_FAST): a chosen expert not marked taken (must fail router: the
# same expert K times), the group limit ignored (must fail router at V3), the weights not normalised (must fail at V3)
bash $m rf_taken src/backend/cuda/cuda_moe.cu '    if ((unsigned)bi == win) taken |= 1u << (win >> 5);' '    if ((unsigned)bi == win) taken |= 0u;'
bash $m rf_kept src/backend/cuda/cuda_moe.cu '            if (e < E && !((kept >> (e / per)) & 1ull)) bv[i] = -INFINITY;' '            if (e < E && kept == 0ull) bv[i] = -INFINITY;'
bash $m rf_norm src/backend/cuda/cuda_moe.cu '        if (rc.normalise) my_w /= sum + 1e-20f;' '        if (rc.normalise) my_w /= 1.0f + 1e-20f;'
