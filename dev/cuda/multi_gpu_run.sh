#!/usr/bin/env bash
# Issue 10 on nvidia-h200-x2 in one call: DP2+EP2 over NCCL (tests/unit/test_nccl_ep.c: tiny-v3 and
# V2-Lite with dummy weights against one GPU). NCCL comes from the image's PyTorch wheel (nvidia-nccl),
# loaded at run time; NVLink multicast stays off (the machines' rule). Carry .deps/bin/test_nccl_ep and
# .deps/lib as in dev/cuda/README.md. Logs in $OUT.
set -u
[ -f .deps.tar.xz ] && tar xJf .deps.tar.xz   # dev/cuda/pack.sh
OUT=${OUT:-/tmp/dsinfer-gpu}; mkdir -p "$OUT"
source dev/cuda/nccl_env.sh
nvidia-smi -L | tee "$OUT/gpus.txt"
echo "NCCL from: ${NCCL_DIR:-not found}"
stdbuf -oL -eL timeout 400 .deps/bin/test_nccl_ep 2>&1 | tee "$OUT/nccl_ep.log"
echo "test_nccl_ep rc=${PIPESTATUS[0]}"
