#!/usr/bin/env bash
# The thirty-ninth session's mutants (the prefill MoE's fetched tiles and gate / up with SiLU in the epilogue).
# Packed by `bash dev/cuda/pack_session.sh dev/cuda/mutants_s39.sh`; run by session_run.sh s39m.
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# f8_tma_kernel's DYN: every fetched tile's successor skipped (tiles left unwritten); must fail op test moedyn
bash $m dyn_skip src/backend/cuda/cuda_fp8_wgmma.cu 't = DYN ? step + atomicAdd(g.next, 1) : t + step' 't = DYN ? step + 2 * atomicAdd(g.next, 1) : t + step'
# f8_gu_silu_kernel: a row's amax over half its quad (two lanes' columns); must fail op test moesilu
bash $m gs_quad src/backend/cuda/cuda_fp8_wgmma.cu '    for (int o = 1; o <= 2; o <<= 1) {   /* the quad' '    for (int o = 1; o <= 1; o <<= 1) {   /* the quad'
# f8_gu_silu_kernel: the up sums promoted with the gate's weight scales; must fail op test moesilu
bash $m gs_sw src/backend/cuda/cuda_fp8_wgmma.cu 'const float *sw = g.scales[2 * e.x + cw] +' 'const float *sw = g.scales[2 * e.x] +'
