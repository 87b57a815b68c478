#!/usr/bin/env bash
# Whether a .cu file's kernels compile to the same PTX as at another commit: each .entry of REV's PTX against this tree's
# entry of the same name (or, where a template parameter was appended with a default, the name with it: pass its
# mangled form as EXTRA, e.g. Lb0 for a trailing `bool X = false`, Li2 for `int NR = 2`), with labels, register numbers
# and the local arrays' mangled names renamed. A change that only adds instantiations leaves the old ones "same": they
# cannot move a timing (the twenty-fourth session measured 0.2 .. 0.3 ms from code that sat, switched off, in a kernel).
# usage: bash dev/cuda/ptx_same.sh REV FILE.cu [EXTRA]
set -euo pipefail
cd "$(dirname "$0")/../.."
rev=$1 file=$2 extra=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" "$(dirname "$file")/_ptx_same_old.cu"' EXIT
F="-O3 -std=c++17 -gencode=arch=compute_90a,code=compute_90a -Iinclude -Isrc -ptx"
git show "$rev:$file" > "$(dirname "$file")/_ptx_same_old.cu"
/usr/local/cuda/bin/nvcc $F -o "$tmp/old.ptx" "$(dirname "$file")/_ptx_same_old.cu"
/usr/local/cuda/bin/nvcc $F -o "$tmp/new.ptx" "$file"
python3 - "$tmp/old.ptx" "$tmp/new.ptx" "$extra" <<'PY'
import re, sys
def entries(p):
    s = open(p).read()
    out = {}
    for m in re.finditer(r'\.entry (\S+)\(', s):
        end = s.find('\n}\n', m.start())
        out[m.group(1)] = s[m.start():end]
    return out
def norm(name, body):
    t = body.replace(name, 'X')
    t = re.sub(r'(__local_depot|\$L__BB)\d+(_\d+)?', r'\1N', t)
    t = re.sub(r'%(r|rd|p|f|rs|fd)\d+', r'%\1', t)
    return re.sub(r'_ZZ\S*?E\d+\w+', 'LOCAL', t)
old, new, extra = entries(sys.argv[1]), entries(sys.argv[2]), sys.argv[3]
same = diff = missing = 0
for k, body in old.items():
    k2 = k if k in new or not extra else k.replace('EEv', 'E' + extra + 'EEv', 1)
    if k2 not in new:
        missing += 1
        print('missing', k)
    elif norm(k, body) == norm(k2, new[k2]):
        same += 1
    else:
        diff += 1
        print('differs', k)
print(f'{same} same, {diff} differ, {missing} missing, {len(new) - same - diff} new')
sys.exit(1 if diff or missing else 0)
PY
