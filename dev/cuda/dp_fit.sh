#!/usr/bin/env bash
# KV capacity of DP2+EP2 and DP2 (each GPU its share / all of the experts): `dsinfer bench --batch fit` in a
# data-parallel group, V2-Lite BF16 at ctx 4K, then decode at that batch. Run after the .deps are unpacked.
set -u
OUT=${OUT:-/tmp/dsinfer-gpu}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
NCCL_DIR=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(os.path.dirname(nvidia.nccl.__file__), "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/.deps/lib${NCCL_DIR:+:$NCCL_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for ep in "--enable-expert-parallel"; do
  echo "######## DP2 $ep --batch fit --ctx 4K"
  DSINFER_CUDA_TC=1 timeout 280 .deps/bin/dsinfer bench --dtype bf16 --batch fit --ctx 4K --prompt '' --steps 2 \
    --data-parallel-size 2 $ep --csv $OUT/bench_fit.csv --label "dp2${ep:+-ep2}-fit" 2>&1 | grep -E "^decode|capacity|rror|rank"
done 2>&1 | tee "$OUT/dp_fit.log"
