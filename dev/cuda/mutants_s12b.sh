#!/usr/bin/env bash
# The mutated builds for session_run.sh rt12 (after dev/cuda/pack.sh; then `tar cJf .deps.tar.xz .deps`): each
# must fail `DSINFER_OPS_ONLY=router test_cuda_ops` (rt_*), `DSINFER_OPS_ONLY=kvb` (cb_*) or `=w8small` (w8_*).
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
R=src/backend/cuda/cuda_moe.cu
# the first block of a token group to finish routes it (before the other slices' logits are written)
bash $m rt_last $R 'last = t == gridDim.y - 1;' 'last = t == 0;'
# the ticket not put back: the next launch never routes
bash $m rt_reset $R 'if (last) tickets[blockIdx.x] = 0;' 'if (last) tickets[blockIdx.x] += 0;'
# a lane's chunks overlap (each chunk summed twice, half of the row never)
bash $m rt_stride $R 'for (int c = lane * V; c < D; c += 32 * V)' 'for (int c = lane * V; c < D; c += 16 * V)'
# the odd BF16 value of a pair decoded as the even one
bash $m rt_half $R 'wv[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);' 'wv[2 * i + 1] = __uint_as_float(u[i] << 16);'
# the combine's BF16 output without the softmax denominator
bash $m cb_den src/backend/cuda/cuda_attn.cu '__float2bfloat16(a / den)' '__float2bfloat16(a)'
# (for session_run.sh w8s13) the W8A8 threshold one row late: a 1-row linear goes to the GEMV while the test expects
# W8A8 (must fail `DSINFER_OPS_ONLY=w8small`)
bash $m w8_min src/backend/cuda/cuda_linear.cu 'return cb->opt.fp8_gemm && M >= cb->opt.fp8_gemm_min_m;' 'return cb->opt.fp8_gemm && M > cb->opt.fp8_gemm_min_m;'
# (w8s13) linear2 with x quantized once: the second GEMM reads the scales one place off
bash $m w8_shx src/backend/cuda/cuda_fp8_wgmma.cu '    cu_f8_wgmma_gemm(cb, out2, q, qs, w2, M);
}' '    cu_f8_wgmma_gemm(cb, out2, q, qs + 1, w2, M);
}'
