#!/usr/bin/env bash
# Issue 10 on nvidia-h200-x2: TP2 correctness against one GPU (test_nccl_tp: tiny-v3, tiny-v2, V2-Lite dummy)
# and the KV capacity at 4K of one GPU, TP2 and DP2+EP2 (V2-Lite BF16, KV auto), with decode at that batch.
# NCCL from the image's PyTorch wheel; NVLink multicast off. Logs in $OUT.
set -u
[ -f .deps.tar.xz ] && tar xJf .deps.tar.xz
OUT=${OUT:-/tmp/dsinfer-gpu}; mkdir -p "$OUT"
source dev/cuda/nccl_env.sh
B=.deps/bin; CSV=$OUT/fit.csv
ARGS=(--dtype bf16 --batch fit --ctx 4K --prompt '' --steps 4 --csv $CSV)
{
echo "######## test_nccl_tp"; timeout 240 $B/test_nccl_tp 2>&1 | tail -n 20
echo "######## TP2 fit"; DSINFER_CUDA_TC=1 timeout 200 $B/dsinfer bench "${ARGS[@]}" --label tp2-fit --tensor-parallel-size 2 2>&1 | grep -E "^decode|^capacity|rror|rank"
} 2>&1 | tee "$OUT/tp_fit.log"
