#!/usr/bin/env bash
# KV capacity of DP2+EP2 and DP2 (each GPU its share / all of the experts): `dsinfer bench --batch fit` in a
# data-parallel group, V2-Lite BF16 at ctx 4K, then decode at that batch. Run after the .deps are unpacked.
set -u
OUT=${OUT:-/tmp/dsinfer-gpu}; mkdir -p "$OUT"
source dev/cuda/nccl_env.sh
for ep in "--enable-expert-parallel"; do
  echo "######## DP2 $ep --batch fit --ctx 4K"
  DSINFER_CUDA_TC=1 timeout 280 .deps/bin/dsinfer bench --dtype bf16 --batch fit --ctx 4K --prompt '' --steps 2 \
    --data-parallel-size 2 $ep --csv $OUT/bench_fit.csv --label "dp2${ep:+-ep2}-fit" 2>&1 | grep -E "^decode|capacity|rror|rank"
done 2>&1 | tee "$OUT/dp_fit.log"
