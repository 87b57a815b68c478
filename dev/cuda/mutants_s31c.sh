#!/usr/bin/env bash
# The thirty-first session's router mutants (`bash dev/cuda/pack_session.sh dev/cuda/mutants_s31c.sh`): each must fail op
# test router (DSINFER_CUDA_ROUTER_XS: the fused router's x rows in shared memory; the softmax denominator's loads issued
# eight at a time).
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# the staged rows one token late (must fail router: each token's logits from the next one's x)
bash $m rx_row src/backend/cuda/cuda_moe.cu '            rf_xs[i] = ((const float4 *)(x + (size_t)(m0 + (j < nt ? j : nt - 1)) * D))[i - j * D4];' '            rf_xs[i] = ((const float4 *)(x + (size_t)(m0 + (j + 1 < nt ? j + 1 : nt - 1)) * D))[i - j * D4];'
# the denominator's last expert left out when E % 8 != 0 (must fail router at 60 experts)
bash $m rt_rem src/backend/cuda/cuda_moe.cu '    for (; e < E; e++) sum += s[e];' '    for (; e < E - 1; e++) sum += s[e];'
