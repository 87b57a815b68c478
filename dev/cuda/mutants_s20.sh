#!/usr/bin/env bash
# The twentieth session's mutated builds (after dev/cuda/pack.sh; then strip them and `tar cJf .deps.tar.xz .deps`):
# each must fail `DSINFER_OPS_ONLY=router test_cuda_ops` (the cluster router, router_cl_kernel in cuda_moe.cu).
# History: router_cl_kernel was removed in the thirty-eighth session (measured no faster), so these no longer build.
set -euo pipefail
cd "$(dirname "$0")/../.."
# ONLY=a,b (name prefixes): build just those
m=dev/cuda/build_mutant.sh
mut() { local n=$1; if [ -n "${ONLY:-}" ]; then local ok=0 p; for p in ${ONLY//,/ }; do [[ $n == $p* ]] && ok=1; done
  [ $ok = 1 ] || return 0; fi; bash $m "$@"; }
F=src/backend/cuda/cuda_moe.cu
# every expert slice's logits read from the cluster's first block
mut rc_rank $F 's_sh[i] = rc_ld_remote(&lg_sh[rank][i % epb], i / epb);' 's_sh[i] = rc_ld_remote(&lg_sh[rank][i % epb], 0);'
# every block routes the group's first token's logits (under its own token's index)
mut rc_tok $F 's_sh[i] = rc_ld_remote(&lg_sh[rank][i % epb], i / epb);' 's_sh[i] = rc_ld_remote(&lg_sh[0][i % epb], i / epb);'
# group_v3_kernel (DSINFER_OPS_ONLY=group3): a pair's rank among its warp's equal lanes counting itself (slots one late)
mut g3_rank $F 'int p = g3_wc[(warp + 32 * h) * E + e_of[h]] + __popc(same[h] & ((1u << lane) - 1u));' 'int p = g3_wc[(warp + 32 * h) * E + e_of[h]] + __popc(same[h] & ((2u << lane) - 1u));'
# the live experts' count one short where the last expert has rows (weak: run 3 of the twentieth session showed it passes
# where expert E - 1 is not chosen; g3_list replaces it)
# mut g3_live $F '            offsets[E + 1] = live + (c > 0);' '            offsets[E + 1] = live;'
# the live list names the expert before each live one (the grouped GEMVs below 11 tokens launch the wrong experts)
mut g3_list $F '        if (c) offsets[E + 2 + live] = t;' '        if (c) offsets[E + 2 + live] = t > 0 ? t - 1 : t;'
# mla_combine_v3_kernel (DSINFER_OPS_ONLY=combine, against v1 bit for bit): a thread's first column summed from its second
mut cb3_col src/backend/cuda/cuda_attn.cu '        a0 += w * pv[s].x;' '        a0 += w * pv[s].y;'
