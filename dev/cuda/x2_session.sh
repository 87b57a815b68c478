#!/usr/bin/env bash
# One nvidia-h200-x2 call for the single-GPU parts of session_run.sh side by side: `check` on GPU 0 pinned
# to cores 0-15, `speed` on GPU 1 pinned to cores 16-31 (the GPUs share nothing; pinning keeps the op
# tests' CPU references off the benchmark's launch thread). Each part's logs are packed into one tarball
# under $OUT (a call returns at most 8 files). usage: x2_session.sh [PART_GPU0] [PART_GPU1]
set -u
[ -f .deps.tar.xz ] && tar xJf .deps.tar.xz; export DSINFER_DEPS_UNPACKED=1
R=${OUT:-/tmp/dsinfer-gpu}; mkdir -p "$R"
P0=${1:-check}; P1=${2:-speed}
( CUDA_VISIBLE_DEVICES=0 OMP_NUM_THREADS=16 OUT=/tmp/g0 taskset -c 0-15 timeout 560 bash dev/cuda/session_run.sh "$P0" > /tmp/g0.txt 2>&1 ) &
( CUDA_VISIBLE_DEVICES=1 OMP_NUM_THREADS=16 OUT=/tmp/g1 taskset -c 16-31 timeout 560 bash dev/cuda/session_run.sh "$P1" > /tmp/g1.txt 2>&1 ) &
wait
cp /tmp/g0.txt "$R/gpu0_$P0.txt"; cp /tmp/g1.txt "$R/gpu1_$P1.txt"
tar czf "$R/logs.tgz" -C /tmp g0 g1 2>/dev/null
echo "######## GPU0 $P0"; tail -c 5500 /tmp/g0.txt
echo "######## GPU1 $P1"; tail -c 5500 /tmp/g1.txt
