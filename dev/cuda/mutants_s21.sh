#!/usr/bin/env bash
# The twenty-first session's mutated builds (after dev/cuda/pack.sh; then strip them and `tar cJf .deps.tar.xz .deps`):
# each must fail `DSINFER_OPS_ONLY=shin test_cuda_ops` (the shared experts as moe_wg_kernel's virtual experts).
set -euo pipefail
cd "$(dirname "$0")/../.."
# ONLY=a,b (name prefixes): build just those
m=dev/cuda/build_mutant.sh
mut() { local n=$1; if [ -n "${ONLY:-}" ]; then local ok=0 p; for p in ${ONLY//,/ }; do [[ $n == $p* ]] && ok=1; done
  [ $ok = 1 ] || return 0; fi; bash $m "$@"; }
# the combine (v2) leaves out the second shared expert's rows (V2-Lite has two; V3's one is unaffected)
mut sh_half src/backend/cuda/cuda_moe.cu '        for (int s = 1; s < ns; s++) {' '        for (int s = 2; s < ns; s++) {'
# the virtual experts' scales read with the routed experts' row length (down: 11 blocks a row instead of 22)
mut sh_scale src/backend/cuda/cuda_moe_wg.cu '(m.e < a.E ? a.ws_cols : a.sws_cols)' '(a.ws_cols)'
# the virtual rows gathered from the wrong tokens (token (i - nr) / 2 instead of i - nr)
mut sh_rows src/backend/cuda/cuda_moe_tc.cu '(i - (size_t)nr) % (size_t)mt' '(i - (size_t)nr) / 2 % (size_t)mt'
# a virtual expert's down map over its own I columns as if they were contiguous rows (the stride of a routed expert)
mut sh_stride src/backend/cuda/cuda_fp8_wgmma.cu '                             (size_t)ns * I * es, 128))' '                             (size_t)I * es, 128))'
# f8_reduce2_kernel (DSINFER_OPS_ONLY=f8r2): the second output's partials read with the first one's split stride
mut r2_stride src/backend/cuda/cuda_moe_tc.cu '        size_t j = two ? i - n1 : i, n = two ? n2 : n1;' '        size_t j = two ? i - n1 : i, n = n1;'
# the routed experts' down maps taken at 2 (E + ns) with ns the virtual experts that run, not those the table holds (the
# bug run 1 found: with the shared experts in line, or above 256 tokens, down read the virtual experts' gate maps)
mut sh_layout src/backend/cuda/cuda_moe_wg.cu '    const int E2 = r.E + r.tns, R = r.R;   /* E2: the table'"'"'s layout */' '    const int E2 = r.E + r.ns, R = r.R;'
