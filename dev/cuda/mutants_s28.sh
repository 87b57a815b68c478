#!/usr/bin/env bash
# The twenty-eighth session's mutated builds (`bash dev/cuda/pack_session.sh dev/cuda/mutants_s28.sh`): each must fail
# the op test named beside it (f8ss at =3: the TMA GEMM's scales bulk-copied from their transposed form; run 3's xg_row mutant of the
# consumer-loaded form =5 went with that form).
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# the first row block's activation scales for every row block (must fail f8ss at =3: values differ from 129 rows)
bash $m xt_row src/backend/cuda/cuda_fp8_wgmma.cu '    bulk_load(slot, xst + (size_t)kb * Mp + m0, 512, bar);' '    bulk_load(slot, xst + (size_t)kb * Mp, 512, bar);'
# the weight scale taken from the window's first place (must fail f8ss at =3: K/128 = 22, 3, 5 put it elsewhere)
bash $m xt_win src/backend/cuda/cuda_fp8_wgmma.cu '    r.sw = XT ? f[128 + (((uintptr_t)(c->sw + c->kb0 + i) >> 2) & 3)] : f[128];' '    r.sw = XT ? f[128] : f[128];'
# the transposed scales all of k-block 0 (must fail f8ss at =3: values differ)
bash $m xt_kb src/backend/cuda/cuda_fp8_wgmma.cu '        xst[i] = m < M ? xs[(size_t)m * LK + kb] : 0.0f;' '        xst[i] = m < M ? xs[(size_t)m * LK] : 0.0f;'
