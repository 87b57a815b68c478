#!/usr/bin/env bash
# Issue 7 in one device call: correctness with every speed path on (fixture goldens, op tests), then
# `dsinfer bench` (BF16 and FP8 V2-Lite, dummy weights), on/off ablations of each technique, the MLA op
# alone, and the PyTorch/transformers baseline. Binaries carried in .deps (dev/cuda/README.md).
# Logs and bench.csv under $OUT; a summary prints last.
set -u
OUT=${OUT:-/tmp/dsinfer-speed}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/.deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=.deps/bin; CSV=$OUT/bench.csv; summary=""
step() { local name=$1 t=$2; shift 2; local t0=$(date +%s%N)
  timeout "$t" "$@" >"$OUT/$name.log" 2>&1; local rc=$?
  local dt=$(( ($(date +%s%N) - t0) / 1000000 ))
  summary+=$(printf '%-14s rc=%-3s %6d ms' "$name" "$rc" "$dt")$'\n'
  echo "== $name rc=$rc ${dt} ms"; grep -E "^(decode|prefill|mla|ceil|torch|model)|FAIL|fail|error|Error|ok" "$OUT/$name.log" | tail -n 40; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
step golden 60 $B/test_cuda_golden
step bf16 110 env DSINFER_CUDA_TC=1 $B/dsinfer bench --dtype bf16 --batch 1,8,32,64,128,256 --ctx 1K --prompt 512,2K,8K --steps 8 --csv $CSV --label dsinfer-all-on
step bf16_4k 40 env DSINFER_CUDA_TC=1 $B/dsinfer bench --dtype bf16 --batch 1,8,32,64 --ctx 4K --prompt '' --steps 8 --csv $CSV --label dsinfer-all-on
step ops 80 $B/test_cuda_ops
step fp8 45 env DSINFER_CUDA_TC=1 $B/dsinfer bench --dtype fp8 --batch 1,64,256 --ctx 1K --prompt 2K --steps 8 --csv $CSV --label dsinfer-all-on
for ab in "all-off:DSINFER_CUDA_GRAPHS=0 DSINFER_CUDA_FUSED_ATTN=0 DSINFER_CUDA_MOE_GROUPED=0 DSINFER_CUDA_VEC_GEMV=0" \
          "no-graphs:DSINFER_CUDA_GRAPHS=0" "no-fused-attn:DSINFER_CUDA_FUSED_ATTN=0" "no-moe-grouped:DSINFER_CUDA_MOE_GROUPED=0" \
          "no-vec-gemv:DSINFER_CUDA_VEC_GEMV=0"; do
  name=${ab%%:*}; vars=${ab#*:}
  step "ab_$name" 25 env DSINFER_CUDA_TC=1 $vars $B/dsinfer bench --dtype bf16 --batch 1,64 --ctx 1K --prompt '' --steps 6 --csv $CSV --label "$name"
done
step mla 40 $B/dsinfer bench --mla --bw 1 --tflops 1
step torch 80 env PYTHONUNBUFFERED=1 python3 bench/torch_baseline.py --batch 1,64 --ctx 1024 --prompt 512,2048 --steps 6 --csv $CSV
echo "---- summary"; printf '%s' "$summary" | tee "$OUT/summary.txt"
