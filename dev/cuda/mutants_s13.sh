#!/usr/bin/env bash
# The mutated builds of the thirteenth session's parts (after dev/cuda/pack.sh; then `tar cJf .deps.tar.xz .deps`):
# the twelfth's w8_min, w8_shx for w8s13, then the f8_* ones, each of which must fail
# `DSINFER_OPS_ONLY=f8lab test_cuda_ops` (session_run.sh f8lab13).
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# (w8s13) the twelfth session's w8_* mutants (mutants_s12b.sh; its router ones ran in the twelfth session)
bash $m w8_min src/backend/cuda/cuda_linear.cu 'return cb->opt.fp8_gemm && M >= cb->opt.fp8_gemm_min_m;' 'return cb->opt.fp8_gemm && M > cb->opt.fp8_gemm_min_m;'
bash $m w8_shx src/backend/cuda/cuda_fp8_wgmma.cu '    cu_f8_wgmma_gemm(cb, out2, q, qs, w2, M);
}' '    cu_f8_wgmma_gemm(cb, out2, q, qs + 1, w2, M);
}'
F=src/backend/cuda/cuda_fp8_wgmma.cu
# preload: every iteration may leave WG_ST - 1 groups pending (a stage read before it has landed: a race)
bash $m f8_prew $F 'if (first_pre) cu_cp_async_wait<WG_ST - 1>();' 'if (preload) cu_cp_async_wait<WG_ST - 1>();'
# preload: the first stage after the ring (WG_ST) never loaded (its slot still holds stage 0)
bash $m f8_pres $F '            if (nx < nkb) wg_load_stage<WG>' '            if (nx < nkb && (nx != WG_ST || !preload)) wg_load_stage<WG>'
# the vector reduce leaves out the last split
bash $m f8_rv src/backend/cuda/cuda_moe_tc.cu '        for (int z = 1; z < KS; z++) {
            float4 p' '        for (int z = 1; z < KS - 1; z++) {
            float4 p'
# (session_run.sh mlawg13; each must fail `DSINFER_OPS_ONLY=mla`) the values read with the K-major descriptor (the
# tile's 64-column chunks taken as 8-row groups)
W=src/backend/cuda/cuda_mla_wg.cu
bash $m wg_desc $W 'wm_desc_mn(Kt + kk * 16 * 128 + wg * 4 * WM_CHUNK_B)' 'wg_desc(Kt + kk * 16 * 128 + wg * 4 * WM_CHUNK_B)'
# the rows past the context not masked (zero rows score 0 and enter the softmax's sum)
bash $m wg_mask $W 'sc[4 * j + e] = row < nc ?' 'sc[4 * j + e] = row < WM_TILE ?'
# the running output not rescaled when the max moves
bash $m wg_resc $W '            o[4 * j] *= cA; o[4 * j + 1] *= cA;' '            o[4 * j] *= 1.0f; o[4 * j + 1] *= cA;'
# the other warpgroup's tile max ignored
bash $m wg_max $W 'float nA = fmaxf(mA, fmaxf(red_max[hA], red_max[WM_HEADS + hA]));' 'float nA = fmaxf(mA, red_max[wg * WM_HEADS + hA]);'
