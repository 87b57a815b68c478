#!/usr/bin/env bash
# The thirty-second session's combine-in-the-norm mutants (`bash dev/cuda/pack_session.sh dev/cuda/mutants_s32c.sh`): each must
# fail op test combnorm (DSINFER_CUDA_COMBINE_NORM: the MoE combine's sums made by the next attn_in's norm kernel).
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# the shared experts' rows of another token (must fail combnorm with the shared experts in the experts' launch; since the
# thirty-third session's mend the sum itself is cu_comb_col, shared with the combine kernel, so the mutants change only
# what the COMB form hands it)
bash $m cn_sh0 src/backend/cuda/cuda_backend.cu 'cu_comb_col<CU_COMB_MAX_NS, CU_COMB_MAX_K>((const float4 *)cmb.ys, cmb.ns, cmb.mt, blockIdx.x, cmb.y, c_pos,' 'cu_comb_col<CU_COMB_MAX_NS, CU_COMB_MAX_K>((const float4 *)cmb.ys, cmb.ns, cmb.mt, (blockIdx.x + 1) % gridDim.x, cmb.y, c_pos,'
# the combine's sum not written to ff (must fail combnorm: ff left poisoned)
bash $m cn_ff src/backend/cuda/cuda_backend.cu '            if (PARTS || COMB) ((float4 *)(ff + row))[j] = a[k];' '            if (PARTS) ((float4 *)(ff + row))[j] = a[k];'
# the choices ranked from another token's (must fail combnorm: other rows and weights)
bash $m cn_rank src/backend/cuda/cuda_backend.cu '        cu_comb_rank(cmb.ids, cmb.pos, cmb.w, blockIdx.x, cmb.K, c_pos, c_w);' '        cu_comb_rank(cmb.ids, cmb.pos, cmb.w, (blockIdx.x + 1) % gridDim.x, cmb.K, c_pos, c_w);'
