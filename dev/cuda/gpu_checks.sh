#!/usr/bin/env bash
# The CUDA backend's checks on the GPU machine, in one call (nothing persists between calls).
# Binaries are built on the dev machine and carried in .deps/bin with the shared libraries the GPU
# image lacks in .deps/lib (see dev/cuda/README.md). Usage there:
#   bash dev/cuda/gpu_checks.sh [ops|golden|model|cli|sanitize]...   (default: all but sanitize)
# Logs go to $OUT (or /tmp/dsinfer-gpu) one file per step; a summary table is printed last.
set -u
OUT=${OUT:-/tmp/dsinfer-gpu}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/.deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=.deps/bin
steps=${*:-golden ops model cli}
summary=""
step() {   # name timeout command...
  local name=$1 t=$2; shift 2
  local t0=$(date +%s%N)
  timeout "$t" "$@" >"$OUT/$name.log" 2>&1; local rc=$?
  local dt=$(( ($(date +%s%N) - t0) / 1000000 ))
  summary+=$(printf '%-10s rc=%-3s %6d ms' "$name" "$rc" "$dt")$'\n'
  echo "== $name rc=$rc ${dt} ms"; tail -n 60 "$OUT/$name.log"
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
missing=$(ldd $B/test_cuda_ops | grep 'not found'); [ -n "$missing" ] && echo "MISSING LIBS: $missing"
for s in $steps; do
  case $s in
    ops) step ops 300 $B/test_cuda_ops ;;
    golden) step golden 150 $B/test_cuda_golden ;;
    model) step model 200 $B/test_cuda_model ;;
    cli) step cli 60 bash -c "for b in cpu cuda; do echo \$b: \$($B/dsinfer generate --backend \$b --model tests/fixtures/tiny-v3-fp8 --ids 0,17,99,5,300 -n 24 --temperature 0 --ignore-eos --print-ids); done; \
         $B/dsinfer generate --backend cuda --model configs/deepseek-v2-lite.json --ids 0,17,99 -n 8 --temperature 0 --print-ids --dummy-weights 2>&1 | tail -3" ;;
    sanitize) step sanitize 240 env DSINFER_OPS_SMALL=1 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 $B/test_cuda_ops ;;
  esac
done
echo "---- summary"; printf '%s' "$summary" | tee "$OUT/summary.txt"
