#!/usr/bin/env bash
# The thirty-seventh session's mutants (absorb_own_kernel). (It also built the thirty-sixth's, mutants_s36.sh, until the
# thirty-eighth session removed the forms those mutate.)
# Packed by `bash dev/cuda/pack_session.sh dev/cuda/mutants_s37.sh`; run by session_run.sh s37m.
# History: ABSORB_OWN was measured slower and removed in the thirty-eighth session; these mutants no longer build.
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# (thirty-seventh session) absorb_own_kernel (DSINFER_CUDA_ABSORB_OWN=1, cuda_attn.cu); each must fail op test absown:
# the last warp's quarter of K left out of the sum
bash $m ao_red src/backend/cuda/cuda_attn.cu '        for (int ww = 1; ww < ABO_WARPS; ww++) v += red[ww][r][c];' '        for (int ww = 1; ww < ABO_WARPS - 1; ww++) v += red[ww][r][c];'
# the A fragment's upper k half taken from k + 4 instead of k + 8 (a wrong fragment layout)
bash $m ao_frag src/backend/cuda/cuda_attn.cu '            a[2] = r0 < T ? x0[4] : 0u;' '            a[2] = r0 < T ? x0[2] : 0u;'
