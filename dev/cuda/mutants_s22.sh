#!/usr/bin/env bash
# The twenty-second session's mutated builds (after dev/cuda/pack.sh; then strip them and `tar cJf .deps.tar.xz .deps`):
# each must fail `DSINFER_OPS_ONLY=attnin test_cuda_ops` (the W8A8 chain's quantizer and split-K sums in its neighbours).
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
mut() { local n=$1; if [ -n "${ONLY:-}" ]; then local ok=0 p; for p in ${ONLY//,/ }; do [[ $n == $p* ]] && ok=1; done
  [ $ok = 1 ] || return 0; fi; bash $m "$@"; }
# sum_parts (qkv_finish_kernel's and norm_chain_kernel's split-K sums, ks <= 4) leaves out the last partial
mut ch_last src/backend/cuda/cuda_backend.cu '                if (z < ks) {
                    v.x += p[s][z].x;' '                if (z < ks - 1) {
                    v.x += p[s][z].x;'
# norm_chain_kernel reads the o projection's partials half a split apart
mut ch_zs src/backend/cuda/cuda_backend.cu '        zstep[k] = zs / 4;' '        zstep[k] = zs / 8;'
# norm_chain_kernel stores the scale of every 128-column block of xn's second half over the first half's
mut ch_qs src/backend/cuda/cuda_backend.cu '            if (lane == 0) qs[(size_t)blockIdx.x * LK + j / 32] = scale;' '            if (lane == 0) qs[(size_t)blockIdx.x * LK + (j / 32) % 8] = scale;'
# moe_combine_sorted2_kernel<true> (DSINFER_OPS_ONLY=moecomb): a slot's rank counts itself (every slot one place late)
mut cb3_rank src/backend/cuda/cuda_moe.cu '                r += idj < idk || (idj == idk && j < k);' '                r += idj < idk || (idj == idk && j <= k);'
