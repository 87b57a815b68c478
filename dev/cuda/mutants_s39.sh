#!/usr/bin/env bash
# The thirty-ninth session's mutants (the prefill MoE's fetched tiles and gate / up with SiLU in the epilogue). gs_quad and
# gs_sw were run (caught) against the first, 64-row form of f8_gu_silu_kernel (91a577e); the texts here are the two-pass
# form's (cbd4363 on).
# Packed by `bash dev/cuda/pack_session.sh dev/cuda/mutants_s39.sh`; run by session_run.sh s39m.
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# f8_tma_kernel's DYN: every fetched tile's successor skipped (tiles left unwritten); must fail op test moedyn
bash $m dyn_skip src/backend/cuda/cuda_fp8_wgmma.cu 't = DYN ? step + atomicAdd(g.next, 1) : t + step' 't = DYN ? step + 2 * atomicAdd(g.next, 1) : t + step'
# f8_gu_silu_kernel: a row's amax over half its quad (two lanes' columns); must fail op test moesilu
bash $m gs_quad src/backend/cuda/cuda_fp8_wgmma.cu '    for (int o = 1; o <= 2; o <<= 1) {   /* the quad' '    for (int o = 1; o <= 1; o <<= 1) {   /* the quad'
# f8_gu_silu_kernel: the up sums promoted with the gate's weight scales; must fail op test moesilu
bash $m gs_sw src/backend/cuda/cuda_fp8_wgmma.cu 'const float *swu = g.scales[2 * e.x + 1] +' 'const float *swu = g.scales[2 * e.x] +'
# f8_gu_silu_kernel: pass 0's held products read back from pass 1's place (the other warpgroup's); must fail op test moesilu
bash $m gs_hold src/backend/cuda/cuda_fp8_wgmma.cu 'unsigned *mine = hold + cw * 18 * 128 + tid;' 'unsigned *mine = hold + tid;'
