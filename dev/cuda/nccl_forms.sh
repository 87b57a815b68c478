#!/usr/bin/env bash
# test_nccl_ep one exchange form at a time (gathered with and without graphs, all-to-all), logs in one file
set -u
[ -f .deps.tar.xz ] && tar xJf .deps.tar.xz
OUT=${OUT:-/tmp/dsinfer-gpu}; mkdir -p "$OUT"
source dev/cuda/nccl_env.sh
for cfg in "gathered 1" "a2a 1"; do set -- $cfg
  echo "######## forms=$1 graphs=$2"
  DSINFER_NCCL_FORMS=$1 DSINFER_EP_GRAPHS=$2 DSINFER_CUDA_GRAPHS=$2 timeout 200 .deps/bin/test_nccl_ep 2>&1 | tail -n 25
done 2>&1 | tee "$OUT/forms.log"
# decode at ctx 4K, one GPU against DP2+EP2 (gathered), V2-Lite BF16
ARGS=(--dtype bf16 --batch 32,64,128 --ctx 4K --prompt '' --steps 8 --csv $OUT/bench.csv)
echo "######## one GPU ctx 4K"; CUDA_VISIBLE_DEVICES=0 DSINFER_CUDA_TC=1 timeout 120 .deps/bin/dsinfer bench "${ARGS[@]}" --label one-gpu-4k 2>&1 | grep -E "^decode|rror" | tee -a "$OUT/forms.log"
echo "######## DP2+EP2 ctx 4K"; DSINFER_CUDA_TC=1 timeout 200 .deps/bin/dsinfer bench "${ARGS[@]}" --label dp2-ep2-4k --data-parallel-size 2 --enable-expert-parallel 2>&1 | grep -E "^decode|rror|rank" | tee -a "$OUT/forms.log"
