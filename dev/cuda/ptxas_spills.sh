#!/usr/bin/env bash
# Registers and spill bytes (stores, loads) a thread of each kernel of a .cu file whose mangled name matches REGEX, as
# ptxas reports them (-Xptxas -v) for sm_90a. A lab switch inside a default kernel can push it past its register bound
# (the thirty-sixth session found 104 .. 204 bytes of spills a thread in the default FP8 GEMVs from a runtime flag): run
# this on the kernels a change touches, beside ptx_same.sh.
# usage: bash dev/cuda/ptxas_spills.sh FILE.cu [REGEX]   e.g. src/backend/cuda/cuda_linear.cu 'gemv_v2_kernelILi3E'
set -euo pipefail
cd "$(dirname "$0")/../.."
file=$1 re=${2:-.}
log=$(mktemp)
trap 'rm -f "$log" "$log.o"' EXIT
/usr/local/cuda/bin/nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Isrc -Xptxas -v -c -o "$log.o" "$file" > "$log" 2>&1
python3 - "$log" "$re" <<'PY'
import re, sys
props, ent, fn = {}, None, None
for line in open(sys.argv[1]):
    m = re.search(r"Compiling entry function '(\S+)'", line)
    if m: ent = m.group(1)
    m = re.search(r"Function properties for (\S+)", line)
    if m: fn = m.group(1)
    m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
    if m and fn: props.setdefault(fn, {})['spill'] = (int(m.group(1)), int(m.group(2)))
    m = re.search(r"Used (\d+) registers", line)
    if m and ent: props.setdefault(ent, {})['regs'] = int(m.group(1))
rx = re.compile(sys.argv[2])
for k in sorted(props):
    if rx.search(k) and 'regs' in props[k]:
        st, ld = props[k].get('spill', (0, 0))
        print(f"{props[k]['regs']:4d} regs  spills {st:4d} / {ld:4d}  {k}")
PY
