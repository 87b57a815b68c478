#!/usr/bin/env bash
# Issue 10, tensor parallelism on nvidia-h200-x2 (written 2026-11-30 after the session's device time ran out;
# the first thing to run next session): TP2 correctness against one GPU (test_nccl_tp: fixtures with real
# weights, column slices packed at upload), then decode of V2-Lite BF16 on one GPU, TP2 and DP2+EP2 side by
# side, and TP2's capacity. NCCL from the image's PyTorch wheel; NVLink multicast off. Logs in $OUT.
set -u
[ -f .deps.tar.xz ] && tar xJf .deps.tar.xz
OUT=${OUT:-/tmp/dsinfer-gpu}; mkdir -p "$OUT"
source dev/cuda/nccl_env.sh
B=.deps/bin; CSV=$OUT/bench.csv
ARGS=(--dtype bf16 --batch 1,32,64,128 --ctx 1K --prompt '' --steps 8 --csv $CSV)
{
echo "######## test_nccl_tp"; timeout 200 $B/test_nccl_tp 2>&1 | tail -n 20
echo "######## one GPU"; CUDA_VISIBLE_DEVICES=0 DSINFER_CUDA_TC=1 timeout 120 $B/dsinfer bench "${ARGS[@]}" --label one-gpu 2>&1 | grep -E "^decode|rror"
echo "######## TP2"; DSINFER_CUDA_TC=1 timeout 200 $B/dsinfer bench "${ARGS[@]}" --label tp2 --tensor-parallel-size 2 2>&1 | grep -E "^decode|rror|rank"
echo "######## TP2 graphs off"; DSINFER_CUDA_TC=1 DSINFER_TP_GRAPHS=0 timeout 200 $B/dsinfer bench "${ARGS[@]}" --label tp2-eager --tensor-parallel-size 2 2>&1 | grep -E "^decode|rror|rank"
echo "######## DP2+EP2"; DSINFER_CUDA_TC=1 timeout 200 $B/dsinfer bench "${ARGS[@]}" --label dp2-ep2 --data-parallel-size 2 --enable-expert-parallel 2>&1 | grep -E "^decode|rror|rank"
} 2>&1 | tee "$OUT/tp.log"
