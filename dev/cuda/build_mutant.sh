#!/usr/bin/env bash
# Builds test_cuda_ops from a copy of the tree with one exact text replacement (a mutation that the GPU op tests
# must catch) into .deps/bin/test_cuda_ops_mut_NAME (after dev/cuda/pack.sh; re-pack .deps with
# `tar cJf .deps.tar.xz .deps`). The replacement must match exactly once.
# usage: bash dev/cuda/build_mutant.sh NAME FILE OLD NEW
set -euo pipefail
cd "$(dirname "$0")/../.."
name=$1 file=$2 old=$3 new=$4
dir=/tmp/mut/$name
rm -rf "$dir" && mkdir -p "$dir/build"
cp -r Makefile src include tests configs "$dir/"
cp -r build/src "$dir/build/"
OLD="$old" NEW="$new" python3 - "$dir/$file" <<'PY'
import os, sys
p = sys.argv[1]; s = open(p).read(); old = os.environ["OLD"]; new = os.environ["NEW"]
n = s.count(old)
if n != 1: sys.exit(f"{p}: the text to replace occurs {n} times, not once")
open(p, "w").write(s.replace(old, new))
PY
touch -d '+1 min' "$dir/$file"
make -C "$dir" -j2 build/tests/test_cuda_ops >/dev/null
mkdir -p .deps/bin
cp "$dir/build/tests/test_cuda_ops" ".deps/bin/test_cuda_ops_mut_$name"
echo "built test_cuda_ops_mut_$name ($file)"
