#!/usr/bin/env bash
# The nineteenth session's mutated builds (after dev/cuda/pack.sh; then strip them and `tar cJf .deps.tar.xz .deps`):
# each must fail `DSINFER_OPS_ONLY=fa3 test_cuda_ops` (the naive-form prefill attention on wgmma, cuda_fa_wg.cu).
set -euo pipefail
cd "$(dirname "$0")/../.."
# ONLY=a,b (name prefixes): build just those
m=dev/cuda/build_mutant.sh
mut() { local n=$1; if [ -n "${ONLY:-}" ]; then local ok=0 p; for p in ${ONLY//,/ }; do [[ $n == $p* ]] && ok=1; done
  [ $ok = 1 ] || return 0; fi; bash $m "$@"; }
F=src/backend/cuda/cuda_fa_wg.cu
# the causal mask one key short (each row's own position masked)
mut f3_mask $F 'if (kb + 8 * j + 2 * t + (e & 1) > (e < 2 ? posA : posB)) sacc[4 * j + e] = -INFINITY;' 'if (kb + 8 * j + 2 * t + (e & 1) >= (e < 2 ? posA : posB)) sacc[4 * j + e] = -INFINITY;'
# the same in the overlapped form (fa_prefill3o_kernel, DSINFER_CUDA_FA3=2)
mut f3o_mask $F 'if (kb + 8 * j + 2 * r.t + (e & 1) > (e < 2 ? r.posA : r.posB)) sacc[4 * j + e] = -INFINITY;' 'if (kb + 8 * j + 2 * r.t + (e & 1) >= (e < 2 ? r.posA : r.posB)) sacc[4 * j + e] = -INFINITY;'
# V's second 64 columns read from the first chunk (the descriptor's leading byte offset 0)
mut f3_vdesc $F '    return ((a & 0x3FFFF) >> 4) | ((uint64_t)(F3_CH >> 4) << 16) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);' '    return ((a & 0x3FFFF) >> 4) | ((uint64_t)(0 >> 4) << 16) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);'
# the second row of each thread's pair rescaled with the first row's factor
mut f3_resc $F '            o[4 * j + 2] *= cB; o[4 * j + 3] *= cB;' '            o[4 * j + 2] *= cA; o[4 * j + 3] *= cA;'
# the overlapped form (DSINFER_CUDA_FA3=2): tile k's softmax masked as if it were tile k - 1
mut f3_ovlk $F '    f3_softmax(sacc, pout, r, k * F3N, cA, cB);' '    f3_softmax(sacc, pout, r, (k - 1) * F3N, cA, cB);'
# the last tile of a warpgroup left out (a row's newest keys, its own among them, never seen)
mut f3_last $F 'nt_w = __shfl_sync(0xffffffffu, (pmax_w + F3N) / F3N, 0);' 'nt_w = __shfl_sync(0xffffffffu, (pmax_w + F3N) / F3N - (pmax_w >= F3N), 0);'
# moe_combine_sorted2_kernel (DSINFER_OPS_ONLY=moecomb, against v1 bit for bit): the slots summed in routing order, not
# by expert id (the same sum in exact arithmetic, other bits)
mut cb_sort src/backend/cuda/cuda_moe.cu '            s_pos[k] = pos[(size_t)m * K + ord[k]];
            s_w[k] = w[(size_t)m * K + ord[k]];' '            s_pos[k] = pos[(size_t)m * K + k];
            s_w[k] = w[(size_t)m * K + k];'
# a column group's blocks stepping as if there were one (columns added twice where the columns are split: decode sizes)
mut cb_step src/backend/cuda/cuda_moe.cu 'for (int c = blockIdx.y * CB2_THREADS + threadIdx.x; c < D4; c += gridDim.y * CB2_THREADS) {' 'for (int c = blockIdx.y * CB2_THREADS + threadIdx.x; c < D4; c += CB2_THREADS) {'
