#!/usr/bin/env bash
# Issue 7, second pass, call 2: op tests (<= 128 tokens) and goldens with GEMV v2 and absorb_q v2 on,
# decode rows with absorb_q v2 on/off, the MLA op alone, and one decode step profiled with ncu (kernel
# durations, CUDA graphs off) at batch 1 and 64 when NCU=1. Binaries carried in .deps. Logs under $OUT.
set -u
OUT=${OUT:-/tmp/dsinfer-abs2}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/.deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
B=.deps/bin; CSV=$OUT/bench.csv
step() { local name=$1 t=$2; shift 2; local t0=$(date +%s%N)
  timeout "$t" "$@" >"$OUT/$name.log" 2>&1; local rc=$?
  echo "== $name rc=$rc $(( ($(date +%s%N) - t0) / 1000000 )) ms"; grep -E "^(decode|mla)|FAIL|fail|rror|ok$" "$OUT/$name.log" | tail -n 8; }
R=(--ctx 1K --prompt "" --steps 8 --bw 4221 --tflops 780 --csv "$CSV")
step ops 50 env DSINFER_OPS_MAX_M=128 $B/test_cuda_ops
step golden 20 $B/test_cuda_golden
step bf16_a2 15 env DSINFER_CUDA_TC=1 $B/dsinfer bench --dtype bf16 --batch 1,8,64 "${R[@]}" --label gemv2-absorb2
step bf16_a1 15 env DSINFER_CUDA_TC=1 DSINFER_CUDA_ABSORB2=0 $B/dsinfer bench --dtype bf16 --batch 1,8,64 "${R[@]}" --label gemv2-absorb1
step mla 15 $B/dsinfer bench --mla --bw 1 --tflops 1
step fp8_a2 15 env DSINFER_CUDA_TC=1 $B/dsinfer bench --dtype fp8 --batch 1,64 "${R[@]}" --label gemv2-absorb2
[ -n "${NCU:-}" ] && for b in 1 64; do
  timeout 45 env DSINFER_CUDA_TC=1 DSINFER_CUDA_GRAPHS=0 DSINFER_CUDA_PROFILE_STEPS=4 ncu --clock-control none \
    --profile-from-start off --metrics gpu__time_duration.sum --csv --page raw \
    $B/dsinfer bench --dtype bf16 --batch $b --ctx 1K --prompt "" --steps 2 --bw 4221 --tflops 780 > $OUT/ncu_b$b.csv 2>$OUT/ncu_b$b.err
  echo "== ncu batch $b rc=$?"; python3 dev/cuda/ncu_sum.py $OUT/ncu_b$b.csv 2>&1 | head -22 | tee $OUT/ncu_b$b.txt
done
