#!/usr/bin/env bash
# Builds build-prof/dsinfer, the decode experts' MW_PROF, the fused router's RT_PROF and the MLA decode's MLA_PROF and moeo_kernel's MOEO_PROF binary
# (cuda_moe_wg.cu's and cuda_moe.cu's clock64 phase sums, cuda_mla_tc.cu's globaltimer stamps), from a copy of
# build/ so that only what MW_PROF changes is compiled again; dev/cuda/pack.sh then carries it as .deps/bin/dsinfer_prof
# (session_run.sh s30n, s31b .. s31e). The copied dependency files name build/'s objects: they are rewritten to
# build-prof/'s, so that a header changed since (cuda.h's structs) rebuilds every object that includes it (the
# thirty-first session's run 4 launched a stale binary for want of this).
set -euo pipefail
cd "$(dirname "$0")/../.."
make -j2 build/dsinfer >/dev/null
rm -rf build-prof && cp -a build build-prof
find build-prof -name '*.d' -exec sed -i 's#^build/#build-prof/#' {} +
rm -f build-prof/src/backend/cuda/cuda_moe_wg.o build-prof/src/backend/cuda/cuda_moe.o build-prof/src/backend/cuda/cuda_backend.o \
      build-prof/src/backend/cuda/cuda_mla_tc.o build-prof/src/backend/cuda/cuda_bench.o build-prof/src/backend/cuda/cuda_moeo.o build-prof/dsinfer build-prof/libdsinfer.a
nv=$(make -s -p -n 2>/dev/null | sed -n 's/^NVFLAGS *:= *//p' | head -n 1)
make -j2 BUILD=build-prof NVFLAGS="$nv -DMW_PROF -DRT_PROF -DMLA_PROF -DMOEO_PROF" build-prof/dsinfer >/dev/null
echo "built build-prof/dsinfer (NVFLAGS: $nv -DMW_PROF -DRT_PROF -DMLA_PROF -DMOEO_PROF)"
