#!/usr/bin/env bash
# The twenty-ninth session's mutated builds (`bash dev/cuda/pack_session.sh dev/cuda/mutants_s29.sh`): each must fail
# the op test named beside it (attnin: DSINFER_CUDA_CHAIN_FUSE=2, the W8A8 chain fused above 64 rows on the TMA GEMM's
# partials, and q's BF16 copy from qkv_finish (DSINFER_CUDA_QB_FUSE); moeorder: DSINFER_CUDA_MOE_WG_ORDER=1|2, the decode
# experts' items in another order a CTA).
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# kv's partials summed with q's count of splits (must fail attnin: from 129 rows q splits in 2, kv_a in 4)
bash $m ch_ks src/backend/cuda/cuda_backend.cu '                ks[s] = i < nq4 ? ksq : ksk;' '                ks[s] = ksq;'
# the second weight's partials written over the first's (must fail attnin: q differs from 65 rows)
bash $m ch_room src/backend/cuda/cuda_fp8_wgmma.cu '    float *dst[2] = {r1 ? room : out1, r2 ? room + r1 : out2};' '    float *dst[2] = {r1 ? room : out1, r2 ? room : out2};'
# order 1 stepping one CTA too far (items skipped: must fail moeorder)
bash $m ord_step src/backend/cuda/cuda_moe_wg.cu '        return mw_span{b < A ? b : items, items, A};' '        return mw_span{b < A ? b : items, items, A + 1};'
# order 2's runs one item short (must fail moeorder)
bash $m ord_run src/backend/cuda/cuda_moe_wg.cu '        int t0 = b * rounds < items ? b * rounds : items, t1 = t0 + rounds < items ? t0 + rounds : items;' '        int t0 = b * rounds < items ? b * rounds : items, t1 = t0 + rounds - 1 < items ? t0 + rounds - 1 : items;'
# q's BF16 copy from qkv_finish one column off (must fail attnin: the absorbed attention's output differs from 9 tokens)
bash $m qb_col src/backend/cuda/cuda_backend.cu '            br[o] = __float2bfloat16(qr[o]);' '            br[o] = __float2bfloat16(qr[o + 1]);'
