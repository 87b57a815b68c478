#!/usr/bin/env bash
# test_nccl_ep one exchange form at a time (gathered with and without graphs, all-to-all), logs in one file
set -u
[ -f .deps.tar.xz ] && tar xJf .deps.tar.xz
OUT=${OUT:-/tmp/dsinfer-gpu}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
NCCL_DIR=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(os.path.dirname(nvidia.nccl.__file__), "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/.deps/lib${NCCL_DIR:+:$NCCL_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for cfg in "gathered 1" "a2a 1"; do set -- $cfg
  echo "######## forms=$1 graphs=$2"
  DSINFER_NCCL_FORMS=$1 DSINFER_EP_GRAPHS=$2 DSINFER_CUDA_GRAPHS=$2 timeout 200 .deps/bin/test_nccl_ep 2>&1 | tail -n 25
done 2>&1 | tee "$OUT/forms.log"
