#!/usr/bin/env bash
# The twenty-fifth session's mutated builds (after dev/cuda/pack.sh; then strip them and `tar cJf .deps.tar.xz .deps`):
# each must fail the op test named beside it (f8mc: the W8A8 GEMM's multicast pairs, DSINFER_CUDA_F8_TM_MC).
# History: the multicast pairs (f8mc) were removed in the thirty-eighth session; mc_* no longer build.
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# each block's half of the weight tile written into the other half's place (must fail f8mc: values differ)
bash $m mc_half src/backend/cuda/cuda_fp8_wgmma.cu '                        tma_load_mc2(st + TM_BM * WG_BK + rank * 64 * WG_BK, j.mapb,' '                        tma_load_mc2(st + TM_BM * WG_BK + (1 - rank) * 64 * WG_BK, j.mapb,'
# a pair's K split index dropped (every split's partial stored as split 0: f8mc's 4-split cases differ)
bash $m mc_z src/backend/cuda/cuda_fp8_wgmma.cu '    *z = t / (mb2 * nb);' '    *z = 0;'
# a half tile's 64 rows loaded from one row further (must fail moehalf: values differ from the twin)
bash $m half_row src/backend/cuda/cuda_fp8_wgmma.cu '                        tma_load(st, &tc, (j.kb0 + i) * WG_BK, j.m0, &full[s]);' '                        tma_load(st, &tc, (j.kb0 + i) * WG_BK, j.m0 + 1, &full[s]);'
# the pipelined down's k-block i + 2 promoted with k-block i + 1's weight scale (must fail moepipe: values differ)
bash $m pipe_scale src/backend/cuda/cuda_moe_wg.cu '                ga = sw0[m.kb0 + i + 2];' '                ga = sw0[m.kb0 + i + 1];'
# the four-rows-a-warp GEMV's fourth row read from the third row's weights (must fail gemv1: NMSE against the 8-row kernel)
bash $m t4_row src/backend/cuda/cuda_linear.cu '                    q[u][3] = ld_stream16(p2 + o3);' '                    q[u][3] = ld_stream16(p2 + o2);'
# the four-rows-a-warp pairs' output: SiLU of the up row times the gate (gate and up swapped; must fail gemv1's MoE twin)
bash $m p4_swap src/backend/cuda/cuda_linear.cu '            if (i < nv) o[i] = a[i] / (1.0f + expf(-a[i])) * a[2 + i];' '            if (i < nv) o[i] = a[2 + i] / (1.0f + expf(-a[2 + i])) * a[i];'
# the pipelined gate / up's up tile of k-block i + 2 promoted with k-block i + 1's scale (must fail moepipe at =2 only)
bash $m pipe_upscale src/backend/cuda/cuda_moe_wg.cu '                if (PAIR) gua = sw1[m.kb0 + i + 2];' '                if (PAIR) gua = sw1[m.kb0 + i + 1];'
