#!/usr/bin/env bash
# Builds the GPU programs here (nvcc 13, sm_90a) and packs them with the shared libraries the GPU image
# lacks into .deps.tar.xz (about 3 MB: the five binaries share their CUDA code, which xz folds), to carry
# to the device (`run` with carry [".deps.tar.xz"]); the run scripts unpack it into .deps/ first.
# The uncompressed .deps (about 22 MB) plus the tracked tree (about 45 MB) would pass the 64 MB a device
# call takes. Both paths are in .git/info/exclude.
set -euo pipefail
cd "$(dirname "$0")/../.."
make -j2 tests-build >/dev/null
rm -rf .deps && mkdir -p .deps/bin .deps/lib
for f in build/dsinfer build/tests/test_cuda_ops build/tests/test_cuda_golden build/tests/test_cuda_host \
         build/tests/test_cuda_model build/tests/test_nccl_ep build/tests/test_nccl_tp; do
  cp "$f" .deps/bin/ && strip ".deps/bin/$(basename "$f")"
done
# optional: the same dsinfer built with -DCU_NO_PDL (make BUILD=build-nopdl NVFLAGS="... -DCU_NO_PDL"), to time
# the PDL instructions' cost when PDL is off
[ -x build-nopdl/dsinfer ] && cp build-nopdl/dsinfer .deps/bin/dsinfer_nopdl && strip .deps/bin/dsinfer_nopdl
# optional: dsinfer built with -DMW_PROF (the decode experts' phase sums, cuda_moe_wg.cu; dev/cuda/build_prof.sh), for
# session_run.sh s30n, s31b .. s31e
[ -x build-prof/dsinfer ] && cp build-prof/dsinfer .deps/bin/dsinfer_prof && strip .deps/bin/dsinfer_prof
# the CUPTI timeline of a decode step's graph nodes (dev/cuda/trace/cu_trace.c; LD_PRELOAD, a diagnostic)
bash dev/cuda/trace/build.sh >/dev/null && cp build/libcu_trace.so .deps/lib/ && cp -L /usr/local/cuda/lib/libcupti.so.13 .deps/lib/
cp -L /usr/lib/x86_64-linux-gnu/{libcjson.so.1,libpcre2-8.so.0,libmicrohttpd.so.12} .deps/lib/
for l in libgnutls.so.30 libp11-kit.so.0 libidn2.so.0 libunistring.so.2 libtasn1.so.6 libnettle.so.8 \
         libhogweed.so.6 libgmp.so.10 libffi.so.8 libgomp.so.1; do cp -L "/lib/x86_64-linux-gnu/$l" .deps/lib/; done
# (both ignored by git before the tar: an untracked partial pack would travel with the tree)
grep -qx '/.deps.tar.xz' .git/info/exclude || echo '/.deps.tar.xz' >> .git/info/exclude
grep -qx '/.deps.tar.xz.tmp' .git/info/exclude || echo '/.deps.tar.xz.tmp' >> .git/info/exclude
# -9: a 64 MB dictionary folds the binaries' shared code (-6 kept 19 MB of 6 mutants, -9 4.4 MB). Written beside and
# renamed: a device call started while xz runs carried a 0-byte .deps.tar.xz in the forty-first session (~6 min of device
# time for nothing); the rename leaves the previous pack whole until the new one is
tar cf - .deps | xz -9e -T2 > .deps.tar.xz.tmp && mv .deps.tar.xz.tmp .deps.tar.xz
echo "packed: $(du -b .deps.tar.xz | cut -f1) bytes (.deps: $(du -sb .deps | cut -f1)); tracked tree: $(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1)"
