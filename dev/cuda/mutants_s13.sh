#!/usr/bin/env bash
# The mutated builds of the thirteenth session's parts (after dev/cuda/pack.sh; then `tar cJf .deps.tar.xz .deps`):
# the twelfth's (mutants_s12b.sh: rt_*, cb_den, w8_min, w8_shx for w8s13), then the f8_* ones, each of which must fail
# `DSINFER_OPS_ONLY=f8lab test_cuda_ops` (session_run.sh f8lab13).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash dev/cuda/mutants_s12b.sh
m=dev/cuda/build_mutant.sh
F=src/backend/cuda/cuda_fp8_wgmma.cu
# preload: every iteration may leave WG_ST - 1 groups pending (a stage read before it has landed: a race)
bash $m f8_prew $F 'if (first_pre) cu_cp_async_wait<WG_ST - 1>();' 'if (preload) cu_cp_async_wait<WG_ST - 1>();'
# preload: the first stage after the ring (WG_ST) never loaded (its slot still holds stage 0)
bash $m f8_pres $F '            if (nx < nkb) wg_load_stage<WG>' '            if (nx < nkb && (nx != WG_ST || !preload)) wg_load_stage<WG>'
# the vector reduce leaves out the last split
bash $m f8_rv src/backend/cuda/cuda_moe_tc.cu '        for (int z = 1; z < KS; z++) {
            float4 p' '        for (int z = 1; z < KS - 1; z++) {
            float4 p'
