#!/usr/bin/env bash
# The thirty-fourth session's layer-tail mutants (DSINFER_CUDA_MOE1=2, cuda_moe1.cu's phases O and D): each must fail op
# test tail1. `bash dev/cuda/pack_session.sh dev/cuda/mutants_s34.sh` packs them with every other pending mutant.
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# phase D's norm with the post-attention norm's weights (must fail tail1: xn, q and kv against the twin and the CPU)
bash $m t_norm src/backend/cuda/cuda_moe1.cu '    m1_add_norm(hs, a.out, a.in_norm, a.eps, D, xs, red);' '    m1_add_norm(hs, a.out, a.post_norm, a.eps, D, xs, red);'
# phase D's second row of a warp one row on (must fail tail1: a row of q or kv never written, its poison left, others
# written with another row's sum)
bash $m t_row src/backend/cuda/cuda_moe1.cu '        const int t2 = t + nw;' '        const int t2 = t + nw + 1;'
# h not written in phase D (must fail tail1: h against the twin's h + o + ff)
bash $m t_hw src/backend/cuda/cuda_moe1.cu '    m1_add_norm(hs, a.out, a.in_norm, a.eps, D, xs, red);
    if (blockIdx.x == 0)' '    m1_add_norm(hs, a.out, a.in_norm, a.eps, D, xs, red);
    if (blockIdx.x == 0 && D < 0)'
# no grid barrier before phase D (must fail tail1: a block's norm reads out rows other blocks have not written yet,
# phase O's values of o . ao there)
bash $m t_barD src/backend/cuda/cuda_moe1.cu '        for (int t = gw; t < R; t += nw) m1_pf_row(t < Rq ? a.nq : a.nkv, t < Rq ? t : t - Rq, EB, lane);
    cu_grid_sync(a.bar, a.bar + 1, 0, M1_THREADS, leader);' '        for (int t = gw; t < R; t += nw) m1_pf_row(t < Rq ? a.nq : a.nkv, t < Rq ? t : t - Rq, EB, lane);
    __syncthreads();'
# no grid barrier after phase O's rows (must fail tail1: the norms read o . ao rows other blocks have not written yet,
# the test's NaN poison there)
bash $m t_barO src/backend/cuda/cuda_moe1.cu '            if (lane == 0) a.out[d] = o[0];
        }
        cu_grid_sync(a.bar, a.bar + 1, 0, M1_THREADS, leader);' '            if (lane == 0) a.out[d] = o[0];
        }
        __syncthreads();'
