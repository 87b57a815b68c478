#!/usr/bin/env bash
# build_variant.sh DIR FLAGS OBJECT...: DIR/dsinfer, build/dsinfer's program with FLAGS added to NVFLAGS for the named
# objects (paths under src/backend/cuda, without .o). From a copy of build/ whose dependency files are rewritten to
# DIR's, so that a header changed since (cuda.h's structs) rebuilds every object that includes it (the thirty-first
# session's run 4 launched a stale binary for want of this), and only the named objects are compiled again with FLAGS.
# Used by build_prof.sh (the MW_PROF / RT_PROF / MLA_PROF / MOEO_PROF stamps; the fifty-first session's CU_L2_EF lab too).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=$1 flags=$2; shift 2
make -j2 build/dsinfer >/dev/null
rm -rf "$dir" && cp -a build "$dir"
find "$dir" -name '*.d' -exec sed -i "s#^build/#$dir/#" {} +
for o in "$@"; do rm -f "$dir/src/backend/cuda/$o.o"; done
rm -f "$dir/dsinfer" "$dir/libdsinfer.a"
nv=$(make -s -p -n 2>/dev/null | sed -n 's/^NVFLAGS *:= *//p' | head -n 1)
make -j2 BUILD="$dir" NVFLAGS="$nv $flags" "$dir/dsinfer" >/dev/null
echo "built $dir/dsinfer (NVFLAGS: $nv $flags)"
