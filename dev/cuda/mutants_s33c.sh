#!/usr/bin/env bash
# The thirty-third session's one-token MoE launch mutants (DSINFER_CUDA_MOE1, cuda_moe1.cu): each must fail op test moe1.
# `bash dev/cuda/pack_session.sh dev/cuda/mutants_s33c.sh` (or with mutants_s33a.sh: both scripts in one pack,
# dev/cuda/mutants_s33.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# no grid barrier before phase C (must fail moe1: the blocks read SiLU products other blocks have not written yet; the
# test's warm-up call on another x leaves stale ones there)
bash $m m1_bar src/backend/cuda/cuda_moe1.cu '            for (int k = 0; k < K; k++) m1_pf_row(a.tab[2 * E + ids[k]], d, EB, lane);
        }
    cu_grid_sync(a.bar, a.bar + 1, 0, M1_THREADS, leader);' '            for (int k = 0; k < K; k++) m1_pf_row(a.tab[2 * E + ids[k]], d, EB, lane);
        }
    __syncthreads();'
# the routing weights left out of phase C's vector (must fail moe1)
bash $m m1_w src/backend/cuda/cuda_moe1.cu 'vec[sI + i] = wk[i / I] * __ldcg(a.inter + sI + i);' 'vec[sI + i] = __ldcg(a.inter + sI + i);'
# the shared experts' down left out of phase C (must fail moe1: every case has shared experts)
bash $m m1_sh src/backend/cuda/cuda_moe1.cu '    const int s0 = sI ? 1 : 0, ns = s0 + K;' '    const int s0 = sI ? 1 : 0, ns = K;'
