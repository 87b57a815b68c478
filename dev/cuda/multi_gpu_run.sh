#!/usr/bin/env bash
# Issue 10 on nvidia-h200-x2 in one call: DP2+EP2 over NCCL (tests/unit/test_nccl_ep.c: tiny-v3 and
# V2-Lite with dummy weights against one GPU). NCCL comes from the image's PyTorch wheel (nvidia-nccl),
# loaded at run time; NVLink multicast stays off (the machines' rule). Carry .deps/bin/test_nccl_ep and
# .deps/lib as in dev/cuda/README.md. Logs in $OUT.
set -u
[ -f .deps.tar.xz ] && tar xJf .deps.tar.xz   # dev/cuda/pack.sh
OUT=${OUT:-/tmp/dsinfer-gpu}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
NCCL_DIR=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(os.path.dirname(nvidia.nccl.__file__), "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/.deps/lib${NCCL_DIR:+:$NCCL_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi -L | tee "$OUT/gpus.txt"
echo "NCCL from: ${NCCL_DIR:-not found}"
stdbuf -oL -eL timeout 400 .deps/bin/test_nccl_ep 2>&1 | tee "$OUT/nccl_ep.log"
echo "test_nccl_ep rc=${PIPESTATUS[0]}"
