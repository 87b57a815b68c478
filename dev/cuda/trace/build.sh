#!/usr/bin/env bash
# Builds build/libcu_trace.so (dev/cuda/trace/cu_trace.c: a decode step's graph nodes on a timeline by CUPTI).
# pack.sh carries it with libcupti.so.13 in .deps/lib; on the device:
#   LD_PRELOAD=$PWD/.deps/lib/libcu_trace.so DSINFER_TRACE_FILE=$OUT/trace.txt .deps/bin/dsinfer bench ...
set -euo pipefail
cd "$(dirname "$0")/../../.."
CUDA=${CUDA:-/usr/local/cuda}
CUPTI_LIB=$(dirname "$(ls "$CUDA"/lib*/libcupti.so.13 "$CUDA"/extras/CUPTI/lib64/libcupti.so.13 2>/dev/null | head -1)")
mkdir -p build
gcc -std=c11 -O2 -Wall -Wextra -Werror -fPIC -shared -I"$CUDA/include" -o build/libcu_trace.so dev/cuda/trace/cu_trace.c \
    -L"$CUPTI_LIB" -lcupti -Wl,-rpath,'$ORIGIN'
echo "built build/libcu_trace.so (libcupti from $CUPTI_LIB)"
