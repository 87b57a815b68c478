#!/usr/bin/env bash
# The fortieth session's mutants (the prefill MoE's grouped tiles with the overlapped epilogue, f8_tma_kernel OVL).
# Packed by `bash dev/cuda/pack_session.sh dev/cuda/mutants_s40.sh`; run by session_run.sh s40m. The ovl_* mutants (run in
# RESULTS run 2, all caught) mutate the overlapped epilogue, removed after its measurements: kept as comments (history).
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# OVL: the finished tile's sums stored at the next tile's rows and columns; must fail op test moeovl
# bash $m ovl_st src/backend/cuda/cuda_fp8_wgmma.cu '            if (!(LAB & 2)) wg_store(tot, so, (size_t)ldo, sr0, sr1, smend, sn0, snv, lane);
            for' '            if (!(LAB & 2)) wg_store(tot, so, (size_t)ldo, c.r0, c.r1, j.mend, j.n0, j.nvalid, lane);
            for'
# OVL: the sums not cleared between a block's tiles; must fail op test moeovl
# bash $m ovl_z src/backend/cuda/cuda_fp8_wgmma.cu '            if (!(LAB & 2)) wg_store(tot, so, (size_t)ldo, sr0, sr1, smend, sn0, snv, lane);
            for (int i = 0; i < 64; i++) tot[i] = 0.0f;' '            if (!(LAB & 2)) wg_store(tot, so, (size_t)ldo, sr0, sr1, smend, sn0, snv, lane);'
# OVL: a block's last tile never stored; must fail op test moeovl
# bash $m ovl_last src/backend/cuda/cuda_fp8_wgmma.cu '        if (!(LAB & 2)) wg_store(tot, so, (size_t)ldo, sr0, sr1, smend, sn0, snv, lane);   /* the last tile' '        if (false) wg_store(tot, so, (size_t)ldo, sr0, sr1, smend, sn0, snv, lane);   /* the last tile'
# Y_BF16: the combine adds each row's upper pair of columns from its lower pair's values; must fail op test moeyb
bash $m yb_hi src/backend/cuda/cuda_moe.cu 'hi = __bfloat1622float2(*(const __nv_bfloat162 *)&v[k].y);' 'hi = __bfloat1622float2(*(const __nv_bfloat162 *)&v[k].x);'
# Y_BF16: down's BF16 rows stored one column to the right; must fail op test moeyb (run 7, caught; it mutates wg_store_bf16,
# since folded into wg_store's BF16 form: history)
# bash $m yb_col src/backend/cuda/cuda_fp8_wgmma.cu '            __nv_bfloat16 *o = out + (size_t)r * ldo + (n - n0);' '            __nv_bfloat16 *o = out + (size_t)r * ldo + (n - n0) + 1;'
# Y_BF16 2: each row's bulk copy from the next row's staging place; must fail op test moeyb
bash $m ob2_row src/backend/cuda/cuda_fp8_wgmma.cu '"r"(cu_smem_addr(stg + lane * OB_ROW))' '"r"(cu_smem_addr(stg + ((lane + 1) & 15) * OB_ROW))'
