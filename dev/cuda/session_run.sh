#!/usr/bin/env bash
# The GPU checks waiting since the session of 2026-11-30 (no device time was left then), in one call:
#  1. test_cuda_ops, full: every M in {1,4,128,4096} (sampled CPU references for the largest cases),
#     the FP8 KV cache (kv_store byte-exact, attention over FP8 pages) and NVFP4 weights (issue 4, 9);
#  2. test_cuda_golden: the fixtures incl. tiny-v3-nvfp4, and FP8 KV on the demo model (issue 9);
#  3. compute-sanitizer memcheck over the small shapes (the new kernels included);
#  4. the MLA decode op with an fp32 and an FP8 cache; decode throughput with both caches (issue 9);
#  5. W8A8 (DSINFER_CUDA_FP8_GEMM=1): the V3 GEMM shapes alone (`dsinfer bench --ops`), its accuracy on
#     the trained demo-fp8 model against the CPU (`dsinfer compare`), V2-Lite FP8 prefill (issue 8);
#  6. the router v2 (DSINFER_CUDA_ROUTE2=1, one warp per token): goldens and decode rows on/off (issue 7).
# Binaries carried in .deps/bin with .deps/lib (dev/cuda/README.md): dsinfer, test_cuda_{ops,golden,host}.
# Logs under $OUT, line-buffered; a summary prints last.
set -u
[ -f .deps.tar.xz ] && tar xJf .deps.tar.xz   # dev/cuda/pack.sh
OUT=${OUT:-/tmp/dsinfer-gpu}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/.deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=.deps/bin; CSV=$OUT/bench.csv; summary=""
step() { local name=$1 t=$2; shift 2; local t0=$(date +%s%N)
  stdbuf -oL -eL timeout "$t" "$@" >"$OUT/$name.log" 2>&1; local rc=$?
  local dt=$(( ($(date +%s%N) - t0) / 1000000 ))
  summary+=$(printf '%-12s rc=%-3s %6d ms' "$name" "$rc" "$dt")$'\n'
  echo "== $name rc=$rc ${dt} ms"; grep -E "^(decode|prefill|mla|ceil|model|geomean|KL|top|perplex)|M=4096|kv8|NVFP4|FP8 KV|FAIL|fail|rror|: ok" "$OUT/$name.log" | tail -n 45; }
# usage: session_run.sh [check|speed|model|all]   (check: tests and memcheck; speed: the benchmarks; about
# 5 min each, so one device call (600 s at most) per part; model: test_cuda_model, the dummy V2-Lite and
# 4-layer V3)
PART=${1:-all}
want() { [ "$PART" = all ] || [ "$PART" = "$1" ]; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
want check && step host 20 $B/test_cuda_host
want check && step ops 200 $B/test_cuda_ops
want check && step golden 120 $B/test_cuda_golden
want check && step sanitize 150 env DSINFER_OPS_SMALL=1 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 9 $B/test_cuda_ops
want speed && step mla32 30 $B/dsinfer bench --mla --bw 1 --tflops 1
want speed && step mla8 30 $B/dsinfer bench --mla --bw 1 --tflops 1 --kv-cache-dtype fp8
want speed && step dec32 60 env DSINFER_CUDA_TC=1 $B/dsinfer bench --dtype bf16 --batch 1,64,256 --ctx 1K,4K --prompt '' --steps 8 --csv $CSV --label kv-fp32
want speed && step dec8 60 env DSINFER_CUDA_TC=1 DSINFER_CUDA_FP8_KV=1 $B/dsinfer bench --dtype bf16 --batch 1,64,256 --ctx 1K,4K --prompt '' --steps 8 --csv $CSV --kv-cache-dtype fp8 --label kv-fp8
want check && step golden_r2 120 env DSINFER_CUDA_ROUTE2=1 $B/test_cuda_golden
want speed && step route1 40 env DSINFER_CUDA_TC=1 $B/dsinfer bench --dtype bf16 --batch 1,64,256 --ctx 1K --prompt '' --steps 8 --csv $CSV --label route-v1
want speed && step route2 40 env DSINFER_CUDA_TC=1 DSINFER_CUDA_ROUTE2=1 $B/dsinfer bench --dtype bf16 --batch 1,64,256 --ctx 1K --prompt '' --steps 8 --csv $CSV --label route-v2
want speed && step ops_bench 200 $B/dsinfer bench --ops --ops-m 1,64,128,4096 --csv $OUT/ops.csv --label w8a8-cublaslt
want speed && step cmp_w8a8 60 env DSINFER_CUDA_FP8_GEMM=1 $B/dsinfer compare --model models/demo-fp8 --backend cuda --file tests/data/demo-heldout.txt --ctx 256
want speed && step cmp_w8a16 60 $B/dsinfer compare --model models/demo-fp8 --backend cuda --file tests/data/demo-heldout.txt --ctx 256
want speed && step pre_w8a8 60 env DSINFER_CUDA_TC=1 DSINFER_CUDA_FP8_GEMM=1 $B/dsinfer bench --dtype fp8 --batch '' --ctx '' --prompt 512,2K,8K --steps 4 --csv $CSV --label w8a8
want model && step model 200 $B/test_cuda_model
want speed && step pre_w8a16 60 env DSINFER_CUDA_TC=1 $B/dsinfer bench --dtype fp8 --batch '' --ctx '' --prompt 512,2K,8K --steps 4 --csv $CSV --label w8a16-tc
echo "---- summary"; printf '%s' "$summary" | tee "$OUT/summary.txt"
