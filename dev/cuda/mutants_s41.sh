#!/usr/bin/env bash
# The forty-first session's mutants (the prefill MoE's gate / up sums in BF16, DSINFER_CUDA_MOE_GU_BF16: f8_tma_kernel OB for
# gate / up, moe_silu_fp8_kernel<__nv_bfloat16>). Packed by `bash dev/cuda/pack_session.sh dev/cuda/mutants_s41.sh`; run
# by session_run.sh s41g. Each must fail op test moegub.
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# GU_BF16: the BF16 SiLU kernel reads up from the gate half (column c, not I + c; the fp32 instance untouched)
bash $m gub_silu src/backend/cuda/cuda_fp8_wgmma.cu 'u = silu_ld4(gu + i * 2 * I + I + c);' 'u = silu_ld4(gu + i * 2 * I + (sizeof(T) == 2 ? 0 : I) + c);'
# GU_BF16: gate / up launched without its OB (fp32 sums) while gu is sized and read as BF16. On V2-Lite the fp32 rows run
# past gu's BF16 room through aq, as, y and the tile table (~0.5 MB past the workspace at 1100 tokens). Not built: a
# write past the workspace may hang the op test (the device time of a 300 s timeout) rather than fail it; gub_ldo checks
# the layout in bounds
# bash $m gub_ob src/backend/cuda/cuda_fp8_wgmma.cu 'gu, 2 * I, L->exp_gate[0].scale_cols, gob);' 'gu, 2 * I, L->exp_gate[0].scale_cols, 0);'
# GU_BF16: gate / up's BF16 rows written I columns apart, not 2I (the OB stores' row stride; in bounds: up's tiles land on
# the next row's gate half)
bash $m gub_ldo src/backend/cuda/cuda_fp8_wgmma.cu 'gu, 2 * I, L->exp_gate[0].scale_cols, gob);' 'gu, gob ? I : 2 * I, L->exp_gate[0].scale_cols, gob);'
