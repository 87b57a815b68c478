#!/usr/bin/env bash
# The twenty-third session's mutated builds (after dev/cuda/pack.sh; then strip them and `tar cJf .deps.tar.xz .deps`):
# each must fail `DSINFER_OPS_ONLY=gemv1 test_cuda_ops` (the one-row GEMV form).
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# the one-row form's warps all take the first K split's chunks (its sums wrong wherever K is split)
[ -n "${SKIP_KS0:-}" ] || bash $m t1_ks0 src/backend/cuda/cuda_linear.cu '                                                            valid, warp, ks, lane);' '                                                            valid, warp, 0, lane);'
# the one-row form reads one chunk too few a lane where U wraps (the chunk loop's step off by one)
bash $m t1_step src/backend/cuda/cuda_linear.cu '    if (valid) dots_v2<VT, TM, U, B2>(a0, a1, w0, w1, wn, ROW2 ? (valid1 ? wn + 1 : wn) : wn, xp, nt, ks * 32 + lane, 32 * KS);' '    if (valid) dots_v2<VT, TM, U, B2>(a0, a1, w0, w1, wn, ROW2 ? (valid1 ? wn + 1 : wn) : wn, xp, nt, ks * 32 + lane, 32 * KS + (U0 == 2 ? 1 : 0));'
# two rows a warp (DSINFER_CUDA_GEMV_T1=2): the second row's sum written over the first's
bash $m t2_row src/backend/cuda/cuda_linear.cu '        if (ROW2 && valid1) out[(size_t)(r + j) * ldo + (size_t)e * out_e + n + 1] = a1[j];' '        if (ROW2 && valid1) out[(size_t)(r + j) * ldo + (size_t)e * out_e + n] = a1[j];'
