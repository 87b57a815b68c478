#!/usr/bin/env bash
# Issue 10 on nvidia-h200-x2 in one call: DP2+EP2 correctness (test_nccl_ep) and decode throughput of one
# GPU against `dsinfer bench --data-parallel-size 2` (one process per GPU, dist/launch.c) without and with
# the routed experts split (--enable-expert-parallel, NCCL exchanges), V2-Lite BF16 with dummy weights;
# plus the fixture goldens with the tensor-core paths on (issue 7's "every technique on"). NCCL from the
# image's PyTorch wheel; NVLink multicast off. Carry .deps.tar.xz (dev/cuda/pack.sh). Logs in $OUT.
set -u
[ -f .deps.tar.xz ] && tar xJf .deps.tar.xz
OUT=${OUT:-/tmp/dsinfer-gpu}; mkdir -p "$OUT"
source dev/cuda/nccl_env.sh
B=.deps/bin; CSV=$OUT/bench.csv
nvidia-smi -L | tee "$OUT/gpus.txt"
run() { local name=$1 t=$2; shift 2; local t0=$(date +%s)
  stdbuf -oL -eL timeout "$t" "$@" >"$OUT/$name.log" 2>&1; local rc=$?
  echo "== $name rc=$rc $(( $(date +%s) - t0 )) s"; grep -E "^decode|rror|FAIL|: ok|rank|routed" "$OUT/$name.log" | grep -v "nmse" | tail -n 12
  grep -E "moe routed" "$OUT/$name.log" | tail -n 6; }
run golden_tc 120 env CUDA_VISIBLE_DEVICES=0 DSINFER_CUDA_TC=1 $B/test_cuda_golden
run ops 240 env CUDA_VISIBLE_DEVICES=0 $B/test_cuda_ops
run nccl_ep 300 $B/test_nccl_ep
ARGS=(--dtype bf16 --batch 32,64,128 --ctx 1K --prompt '' --steps 8 --csv $CSV)
run one_gpu 120 env CUDA_VISIBLE_DEVICES=0 DSINFER_CUDA_TC=1 $B/dsinfer bench "${ARGS[@]}" --label one-gpu
run dp2 150 env DSINFER_CUDA_TC=1 $B/dsinfer bench "${ARGS[@]}" --label dp2 --data-parallel-size 2
run dp2ep2 240 env DSINFER_CUDA_TC=1 $B/dsinfer bench "${ARGS[@]}" --label dp2-ep2 --data-parallel-size 2 --enable-expert-parallel
run dp2ep2_nograph 240 env DSINFER_CUDA_TC=1 DSINFER_EP_GRAPHS=0 $B/dsinfer bench "${ARGS[@]}" --label dp2-ep2-nograph --data-parallel-size 2 --enable-expert-parallel
run dp2ep2_a2a 240 env DSINFER_CUDA_TC=1 DSINFER_EP_GATHER=0 $B/dsinfer bench "${ARGS[@]}" --label dp2-ep2-a2a --data-parallel-size 2 --enable-expert-parallel
