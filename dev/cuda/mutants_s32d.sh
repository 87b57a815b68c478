#!/usr/bin/env bash
# The thirty-second session's folded MLA combine mutants (`bash dev/cuda/pack_session.sh dev/cuda/mutants_s32d.sh`): each must
# fail op test mlafold (DSINFER_CUDA_MLA_FOLD: the split combine made by each entry's last split block).
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# the first block to finish combines, before the other splits' partials are in (must fail mlafold)
bash $m mf_last src/backend/cuda/cuda_mla_tc.cu '        last = t == (unsigned)S - 1;' '        last = t == 0u;'
# the tickets not put back (must fail mlafold: the checked launch after the warm-up one folds at the wrong block or never)
bash $m mf_reset src/backend/cuda/cuda_mla_tc.cu '        if (last) *tk = 0;   /* every split of the group has taken its ticket */' '        (void)tk;'
# the denominator without the split weights (must fail mlafold)
bash $m mf_den src/backend/cuda/cuda_mla_tc.cu '        for (int s = 0; s < nl; s++) den += expf(mh[s] - mx) * sh[s];' '        for (int s = 0; s < nl; s++) den += sh[s];'
