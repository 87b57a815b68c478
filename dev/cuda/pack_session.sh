#!/usr/bin/env bash
# Everything a session's device calls carry, in one step: dev/cuda/pack.sh (the GPU programs and their libraries), then
# the mutated op-test builds of the given mutants script (each stripped), without the NCCL tests (the multi-GPU parts
# build those with pack.sh alone), packed into .deps.tar.xz. About 5 minutes here on 2 cores.
# usage: bash dev/cuda/pack_session.sh [dev/cuda/mutants_sNN.sh]
set -euo pipefail
cd "$(dirname "$0")/../.."
bash dev/cuda/pack.sh
[ -n "${1:-}" ] && bash "$1"
rm -f .deps/bin/test_nccl_*
for f in .deps/bin/test_cuda_ops_mut_*; do [ -e "$f" ] && strip "$f"; done
# -9: a 64 MB dictionary folds the binaries' shared code (-6 kept 19 MB of 6 mutants, -9 4.4 MB). Written beside and
# renamed: a device call started while xz runs carried a 0-byte .deps.tar.xz in the forty-first session (~6 min of device
# time for nothing); the rename leaves the previous pack whole until the new one is
tar cf - .deps | xz -9e -T2 > .deps.tar.xz.tmp && mv .deps.tar.xz.tmp .deps.tar.xz
echo "carry .deps.tar.xz: $(du -b .deps.tar.xz | cut -f1) bytes; binaries: $(ls .deps/bin | tr '\n' ' ')"
