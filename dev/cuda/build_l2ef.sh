#!/usr/bin/env bash
# Builds build-l2ef/dsinfer: the lab build CU_L2_EF (-DCU_L2_EF), in which the decode step's weight streams (the GEMVs'
# ld_stream16, cuda_linear.cu; moeo_kernel's gate / up rows and down strips and moe_wg_kernel's weight tiles, cuda_wgmma.h's
# bulk_load_stream / tma_load_stream) carry an L2 evict_first policy; dev/cuda/pack.sh carries it as .deps/bin/dsinfer_l2ef (session_run.sh
# s51a: the two binaries side by side). From a copy of build/ with its dependency files rewritten (as build_prof.sh), so
# that only the objects that use those loads are compiled again.
set -euo pipefail
cd "$(dirname "$0")/../.."
make -j2 build/dsinfer >/dev/null
rm -rf build-l2ef && cp -a build build-l2ef
find build-l2ef -name '*.d' -exec sed -i 's#^build/#build-l2ef/#' {} +
rm -f build-l2ef/src/backend/cuda/cuda_linear.o build-l2ef/src/backend/cuda/cuda_moeo.o build-l2ef/src/backend/cuda/cuda_moe_wg.o \
      build-l2ef/dsinfer build-l2ef/libdsinfer.a
nv=$(make -s -p -n 2>/dev/null | sed -n 's/^NVFLAGS *:= *//p' | head -n 1)
make -j2 BUILD=build-l2ef NVFLAGS="$nv -DCU_L2_EF" build-l2ef/dsinfer >/dev/null
echo "built build-l2ef/dsinfer (NVFLAGS: $nv -DCU_L2_EF)"
