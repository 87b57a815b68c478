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
# decode at ctx 4K, one GPU against DP2+EP2 (gathered), V2-Lite BF16
ARGS=(--dtype bf16 --batch 32,64,128 --ctx 4K --prompt '' --steps 8 --csv $OUT/bench.csv)
echo "######## one GPU ctx 4K"; CUDA_VISIBLE_DEVICES=0 DSINFER_CUDA_TC=1 timeout 120 .deps/bin/dsinfer bench "${ARGS[@]}" --label one-gpu-4k 2>&1 | grep -E "^decode|rror" | tee -a "$OUT/forms.log"
echo "######## DP2+EP2 ctx 4K"; DSINFER_CUDA_TC=1 timeout 200 .deps/bin/dsinfer bench "${ARGS[@]}" --label dp2-ep2-4k --data-parallel-size 2 --enable-expert-parallel 2>&1 | grep -E "^decode|rror|rank" | tee -a "$OUT/forms.log"
