#!/usr/bin/env bash
# The mutated builds for session_run.sh absq15 (after dev/cuda/pack.sh; then `tar cJf .deps.tar.xz .deps`): each must
# fail `DSINFER_OPS_ONLY=mla test_cuda_ops` through absorb_q_v3_kernel (the test's DSINFER_CUDA_ABSORB2=2 cases).
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
A=src/backend/cuda/cuda_attn.cu
# the second token's q read from the first token's row
bash $m abs3_q1 $A 'qb[u] = __ldg(q1 + d);' 'qb[u] = __ldg(q0 + d);'
# FP8 block scales of 256-column blocks (the right one for half the columns)
bash $m abs3_sc $A '(size_t)kvb.scale_cols + (size_t)(col >> 7)) : 1.0f;' '(size_t)kvb.scale_cols + (size_t)(col >> 8)) : 1.0f;'
