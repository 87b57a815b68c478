#!/usr/bin/env bash
# Issue 7, second pass, in one short device call (about 3 minutes): op tests up to 128 tokens (GEMV v2
# on, the default; includes the TC-path checks), fixture goldens, then decode rows with GEMV v2 on and
# off (DSINFER_CUDA_GEMV2=0: the first-pass kernel), BF16 and FP8, and the MLA op alone. Binaries carried
# in .deps (dev/cuda/README.md). Logs and bench.csv under $OUT.
set -u
OUT=${OUT:-/tmp/dsinfer-gemv2}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/.deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=.deps/bin; CSV=$OUT/bench.csv; summary=""
step() { local name=$1 t=$2; shift 2; local t0=$(date +%s%N)
  timeout "$t" "$@" >"$OUT/$name.log" 2>&1; local rc=$?
  local dt=$(( ($(date +%s%N) - t0) / 1000000 ))
  summary+=$(printf '%-14s rc=%-3s %6d ms' "$name" "$rc" "$dt")$'\n'
  echo "== $name rc=$rc ${dt} ms"; grep -E "^(decode|mla|ceil)|FAIL|fail|rror|TC|passed|ok$" "$OUT/$name.log" | tail -n 14; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
step ops 55 env DSINFER_OPS_MAX_M=128 $B/test_cuda_ops
step golden 25 $B/test_cuda_golden
step bf16_v2 22 env DSINFER_CUDA_TC=1 $B/dsinfer bench --dtype bf16 --batch 1,8,64 --ctx 1K --prompt "" --steps 8 --bw 4221 --tflops 780 --csv $CSV --label gemv2
step bf16_v1 22 env DSINFER_CUDA_TC=1 DSINFER_CUDA_GEMV2=0 $B/dsinfer bench --dtype bf16 --batch 1,8,64 --ctx 1K --prompt "" --steps 8 --bw 4221 --tflops 780 --csv $CSV --label gemv1
step mla 20 $B/dsinfer bench --mla --bw 1 --tflops 1
step fp8_v2 18 env DSINFER_CUDA_TC=1 $B/dsinfer bench --dtype fp8 --batch 1,64 --ctx 1K --prompt "" --steps 8 --bw 4221 --tflops 780 --csv $CSV --label gemv2
step fp8_v1 18 env DSINFER_CUDA_TC=1 DSINFER_CUDA_GEMV2=0 $B/dsinfer bench --dtype fp8 --batch 1,64 --ctx 1K --prompt "" --steps 8 --bw 4221 --tflops 780 --csv $CSV --label gemv1
echo "---- summary"; printf '%s' "$summary" | tee "$OUT/summary.txt"
