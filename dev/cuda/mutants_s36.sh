#!/usr/bin/env bash
# The thirty-sixth session's mutants: the staged four-row GEMV (DSINFER_CUDA_GEMV_ASYNC=1, cuda_linear.cu grp_rows4's ST;
# each must fail op test gemvst) and the MoE's column-first tile order (DSINFER_CUDA_MOE_TILE_COLS=1; must fail moecols).
# Packed by `bash dev/cuda/pack_session.sh dev/cuda/mutants_s36.sh`; run by session_run.sh s36m.
# History: GEMV_ASYNC (ST) and MOE_TILE_COLS were measured slower and removed in the thirty-eighth session; these
# mutants no longer build.
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# the stage after the one that landed read (must fail gemvst: chunks of other steps, or not yet landed)
bash $m st_stage src/backend/cuda/cuda_linear.cu 'q[i] = st_read(mine + (4 * j + i) * ST_SLOT);' 'q[i] = st_read(mine + (4 * ((j + 1) % ST) + i) * ST_SLOT);'
# the chunk ST - 1 steps on asked for instead of ST (must fail gemvst: a chunk twice, another never, where a lane has
# more than ST chunks)
bash $m st_next src/backend/cuda/cuda_linear.cu '                const int cn = c + ST * c_step;' '                const int cn = c + (ST - 1) * c_step;'
# no wait for the stage (must fail gemvst where the stage has not landed: a race, so it may pass by luck on a run)
bash $m st_wait src/backend/cuda/cuda_linear.cu '                cu_cp_async_wait<ST - 1>();   /* this thread'"'"'s stage j has landed (its group is the oldest of ST) */' '                /* (no wait) */'
# column-first order that takes an expert's first row block for every row tile (must fail moecols: rows past 128 of an
# expert never computed, its first 128 twice)
bash $m tc_row src/backend/cuda/cuda_fp8_wgmma.cu '            int rb = cols_first ? i % nr : i / nc, cb = cols_first ? i / nr : i % nc;' '            int rb = cols_first ? 0 : i / nc, cb = cols_first ? i / nr : i % nc;'
