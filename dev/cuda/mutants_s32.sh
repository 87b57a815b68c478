#!/usr/bin/env bash
# The thirty-second session's router mutants (`bash dev/cuda/pack_session.sh dev/cuda/mutants_s32.sh`): each must fail op
# test router (DSINFER_CUDA_ROUTER_KS: the fused router's columns in K slices).
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# the last slice's partials left out of the sum (must fail router at ks 2 and 4)
bash $m ks_last src/backend/cuda/cuda_moe.cu '                    if (z < kz) a += pv[z];' '                    if (z < kz - 1) a += pv[z];'
# every slice over the first slice's columns (must fail router: the sums of columns 0 .. D / ks, ks times)
bash $m ks_c0 src/backend/cuda/cuda_moe.cu 'c0 = KSP ? (int)blockIdx.z * cs : 0;' 'c0 = 0;'
