#!/usr/bin/env bash
# The mutated builds for session_run.sh hf12 (after dev/cuda/pack.sh; then `tar cJf .deps.tar.xz .deps`): each
# must fail `DSINFER_OPS_ONLY=linear2 test_cuda_ops` (the fused W8A8 MLP and linear2).
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
W=src/backend/cuda/cuda_fp8_wgmma.cu
# the fused epilogue's split-K sum leaves the last split out
bash $m f12_ks $W '    for (int z = 1; z < ks; z++) {
        float4 gz' '    for (int z = 1; z < ks - 1; z++) {
        float4 gz'
# SiLU(g) * g: the up projection's partials never read
bash $m f12_up $W 'float4 g = *(const float4 *)(pg + off), u = *(const float4 *)(pu + off);' 'float4 g = *(const float4 *)(pg + off), u = *(const float4 *)(pg + off);'
# the down projection reads x's codes instead of h's
bash $m f12_qh $W '    cu_f8_wgmma_gemm(cb, out, qh, hs, down, M);' '    cu_f8_wgmma_gemm(cb, out, q, hs, down, M);'
# linear2: the second weight's first column block computed with the first weight
bash $m l2_second $W 'const bool second = (int)blockIdx.x >= nb_a;' 'const bool second = (int)blockIdx.x > nb_a;'
# qkv_finish: kv's RoPE part one pair early (must fail DSINFER_OPS_ONLY=qkv)
bash $m q12_rope src/backend/cuda/cuda_backend.cu '(size_t)h * dqk + dn : kr + C, i, pos' '(size_t)h * dqk + dn : kr + C - 2, i, pos'
# kv_b's BF16 copy made from the wrong rows (must fail DSINFER_OPS_ONLY=kvb)
bash $m k12_rows src/backend/cuda/cuda_weights.cu '    cu_weight_bf16((__nv_bfloat16 *)p, cu_view(kv), 0, kv->rows);' '    cu_weight_bf16((__nv_bfloat16 *)p, cu_view(kv), 1, kv->rows - 1);'
