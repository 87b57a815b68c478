#!/usr/bin/env bash
# The thirtieth session's mutated builds (`bash dev/cuda/pack_session.sh dev/cuda/mutants_s30.sh`): each must fail the op
# test named beside it (qkv: DSINFER_CUDA_QKV_SPLIT, qkv_finish with q's heads in blocks of their own).
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# the last head group one head short (must fail qkv: q's last head without its RoPE / partials)
bash $m qs_h1 src/backend/cuda/cuda_backend.cu '    const int h0 = !hpg ? 0 : g == 0 ? 0 : (g - 1) * hpg, h1 = !hpg ? H : g == 0 ? 0 : h0 + hpg < H ? h0 + hpg : H;' '    const int h0 = !hpg ? 0 : g == 0 ? 0 : (g - 1) * hpg, h1 = !hpg ? H : g == 0 ? 0 : h0 + hpg < H ? h0 + hpg : H - 1;'
# kv's RoPE pairs in every block (k_pe turned again by each q block: must fail qkv)
bash $m qs_rope src/backend/cuda/cuda_backend.cu '    for (int t = threadIdx.x; t < nqp + (do_kv ? half : 0); t += blockDim.x) {' '    for (int t = threadIdx.x; t < nqp + half; t += blockDim.x) {'
