#!/usr/bin/env bash
# The thirty-third session's mutants of gate / up's quantizing epilogue as whole rows (DSINFER_CUDA_MOE_WG_QF=2,
# mw_store_qf_rows): each must fail op test moeqf. `bash dev/cuda/pack_session.sh dev/cuda/mutants_s33a.sh`
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# each 16-byte piece read from the next piece's place in the staging (must fail moeqf =2: codes in the wrong columns)
bash $m qr_seg src/backend/cuda/cuda_moe_wg.cu '= *(const uint4 *)(cst + c * QR + 16 * (i & 7));' '= *(const uint4 *)(cst + c * QR + 16 * ((i + 1) & 7));'
# the item's last stage given back before its rows are stored, though it is their staging (must fail moeqf =2 at 64
# tokens a chunk: the next stage's TMA writes over the codes; a race, so it fails where the producer waits for that slot,
# which MW_PROF puts at 50 .. 60% of its loop)
bash $m qr_race src/backend/cuda/cuda_moe_wg.cu '    const bool qhold = PAIR && !BF && !PIPE && !S::QF_SPARE && a.qf == 2;' '    const bool qhold = false;'
