#!/usr/bin/env bash
# Issue 10 on nvidia-h200-x2 (written 2026-11-30 after the device time ran out; run next session):
# `dsinfer serve --backend cuda --data-parallel-size 2` with a replica process per GPU, the same checks as
# tests/scripts/server_dp_mp.sh on the CPU (greedy completions equal `dsinfer generate --backend cuda`,
# streaming, both replicas used, a killed replica process, clean shutdown); then test_nccl_tp (TP2 with the
# routed experts whole per rank, and PP2 with a stage per process: new) and TP2 + EP and PP2 decode beside
# TP2. Logs in $OUT. `serve_dp_run.sh epmp`: tests/scripts/server_ep_mp.sh on the GPUs only (seventh session). (test_cuda_golden's new DSINFER_CUDA_TC=1 pass runs in session_run.sh's `check`.)
set -u
[ -f .deps.tar.xz ] && tar xJf .deps.tar.xz
OUT=${OUT:-/tmp/dsinfer-gpu}; mkdir -p "$OUT"
source dev/cuda/nccl_env.sh
B=.deps/bin
if [ "${1:-}" = multinode ]; then   # two serve processes as two nodes, a GPU each, one expert-parallel group
  DSINFER_SERVE_BACKEND=cuda DSINFER_BIN=$B/dsinfer timeout 300 bash tests/scripts/server_multinode.sh 2>&1 | tail -n 20 | tee "$OUT/serve_multinode.log"
  exit 0
fi
if [ "${1:-}" = epmp ]; then   # seventh session: serving with expert parallelism across the replica processes
  DSINFER_SERVE_BACKEND=cuda DSINFER_BIN=$B/dsinfer timeout 300 bash tests/scripts/server_ep_mp.sh 2>&1 | tail -n 20 | tee "$OUT/serve_ep_mp.log"
  exit 0
fi
{
echo "######## serve dp2 (mp)"; DSINFER_SERVE_BACKEND=cuda DSINFER_BIN=$B/dsinfer timeout 200 bash tests/scripts/server_dp_mp.sh 2>&1 | tail -n 8
echo "######## test_nccl_tp"; timeout 300 $B/test_nccl_tp 2>&1 | tail -n 12
ARGS=(--dtype bf16 --batch 1,32,64,128 --ctx 1K --prompt '' --steps 8)
echo "######## TP2"; DSINFER_CUDA_TC=1 timeout 200 $B/dsinfer bench "${ARGS[@]}" --tensor-parallel-size 2 2>&1 | grep -E "^decode|rror"
echo "######## TP2 + EP (experts whole per rank)"; DSINFER_CUDA_TC=1 timeout 200 $B/dsinfer bench "${ARGS[@]}" --tensor-parallel-size 2 --enable-expert-parallel 2>&1 | grep -E "^decode|rror"
echo "######## PP2 (a stage per GPU)"; DSINFER_CUDA_TC=1 timeout 200 $B/dsinfer bench "${ARGS[@]}" --pipeline-parallel-size 2 2>&1 | grep -E "^decode|rror"
} 2>&1 | tee "$OUT/serve_dp.log"
