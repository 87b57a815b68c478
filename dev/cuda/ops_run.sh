#!/usr/bin/env bash
# The full op test (tests/unit/test_cuda_ops.c, every M in {1,4,128,4096} at the V3 and V2-Lite shapes,
# sampled CPU references for the largest cases) on the GPU machine, in one short call. Carry .deps with
# only .deps/bin/test_cuda_ops and .deps/lib (dev/cuda/README.md). Output is line-buffered into
# $OUT/ops.log so a run cut short still leaves what it checked.
set -u
OUT=${OUT:-/tmp/dsinfer-gpu}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/.deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
nproc
t0=$(date +%s%N)
stdbuf -oL -eL timeout "${OPS_TIMEOUT:-150}" .deps/bin/test_cuda_ops >"$OUT/ops.log" 2>&1
rc=$?
echo "test_cuda_ops rc=$rc $(( ($(date +%s%N) - t0) / 1000000 )) ms" | tee -a "$OUT/ops.log"
grep -E "M=4096|M=128 |lm_head|FAIL|rc=" "$OUT/ops.log" | tail -n 80
