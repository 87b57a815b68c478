#!/usr/bin/env bash
# The thirty-second session's combine-in-the-norm mutants (`bash dev/cuda/pack_session.sh dev/cuda/mutants_s32c.sh`): each must
# fail op test combnorm (DSINFER_CUDA_COMBINE_NORM: the MoE combine's sums made by the next attn_in's norm kernel).
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# the first shared expert's row left out (must fail combnorm with the shared experts in the experts' launch)
bash $m cn_sh0 src/backend/cuda/cuda_backend.cu '            if (cmb.ns) s = sh[0];' '            if (cmb.ns) s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);'
# the combine's sum not written to ff (must fail combnorm: ff left poisoned)
bash $m cn_ff src/backend/cuda/cuda_backend.cu '            if (PARTS || COMB) ((float4 *)(ff + row))[j] = a[k];' '            if (PARTS) ((float4 *)(ff + row))[j] = a[k];'
# the choices added in descending expert id (must fail combnorm: another order of additions, not the same bits)
bash $m cn_rank src/backend/cuda/cuda_backend.cu '                r += idj < idk || (idj == idk && j < k);
            }
            c_pos[r]' '                r += idj > idk || (idj == idk && j < k);
            }
            c_pos[r]'
