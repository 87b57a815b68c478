#!/usr/bin/env bash
# The thirty-fourth session's whole-layer mutants (DSINFER_CUDA_MOE1=3, cuda_moe1.cu's phases I1 .. I3): each must fail op
# test attn1. Packed with every other pending mutant by dev/cuda/mutants_s34.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# q's RoPE part left unrotated (must fail attn1: q, the scores, ao and all after)
bash $m a_rope src/backend/cuda/cuda_moe1.cu '    for (int i = threadIdx.x; i < a.dr / 2; i += M1_THREADS) rope_pair(qh + a.dn, i, pos, a.inv_freq, a.amp);' '    (void)pos;'
# no grid barrier after I1 (must fail attn1: the splits read q_lat and the new cache row before they are written)
bash $m a_bar1 src/backend/cuda/cuda_moe1.cu '        else if ((int)blockIdx.x == a.H) m1_kv_row(a, red, (float)p, p);
        cu_grid_sync(a.bar, a.bar + 1, 0, M1_THREADS, leader);' '        else if ((int)blockIdx.x == a.H) m1_kv_row(a, red, (float)p, p);
        __syncthreads();'
# the last split's tokens past the context taken (must fail attn1 at 37 and 4100 tokens: NaN-poisoned slots)
bash $m a_mask src/backend/cuda/cuda_moe1.cu '        const int j0 = sp * M1_TS, nt = n - j0 < M1_TS ? n - j0 : M1_TS;' '        const int j0 = sp * M1_TS, nt = M1_TS;'
# the merge without 1 / L (must fail attn1: ao scaled by the softmax sum)
bash $m a_L src/backend/cuda/cuda_moe1.cu '            ol[c] = v * ws[S];' '            ol[c] = v;'
# the new cache row one slot on (must fail attn1: the cache's NaN places, and the new token's own score)
bash $m a_slot src/backend/cuda/cuda_moe1.cu '* a.page_size + (size_t)(p % a.page_size);' '* a.page_size + (size_t)((p + 1) % a.page_size);'
