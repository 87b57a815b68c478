#!/usr/bin/env bash
# `dsinfer bench` refuses bad flags with exit 2 and a message naming the flag and its value (before it
# touches a GPU), and without a usable GPU exits 1 with a message instead of crashing.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${DSINFER_BIN:-build/dsinfer}
tmp=$(mktemp); trap 'rm -f "$tmp"' EXIT
expect() {   # expect RC PATTERN ARGS...
  local want=$1 pat=$2; shift 2
  set +e; "$BIN" bench "$@" >"$tmp" 2>&1; local rc=$?; set -e
  [ "$rc" = "$want" ] && grep -q -- "$pat" "$tmp" || { echo "bench $*: rc $rc (want $want), output:"; cat "$tmp"; exit 1; }
}
expect 2 'bad --batch list "0"' --batch 0
expect 2 'bad --batch list "1,x"' --batch 1,x
expect 2 'bad --ctx list "4Q"' --ctx 4Q
expect 2 'bad --ctx list "1X"' --mla --ctx 1X
expect 2 '--mla times the op at each --ctx; the list is empty' --mla --ctx ''
expect 2 'bad --prompt list "2K,-1"' --prompt 2K,-1
expect 2 'bad --steps "0"' --steps 0
expect 2 'unknown --dtype "fp16"' --dtype fp16
expect 2 'unknown --kv-cache-dtype "fp16"' --kv-cache-dtype fp16
expect 2 '--batch fit needs exactly one --ctx' --batch fit --ctx 1K,4K
expect 2 '--ops-m needs at least one M' --ops --ops-m ''
expect 2 'bad --ops-shapes "7168x100"' --ops --ops-shapes 7168x100
expect 2 'bad --ops-shapes "7168"' --ops --ops-shapes 7168
expect 2 'bad --ops-shapes ""' --ops --ops-shapes ''
expect 2 'bad --ops-shapes "2112x7168,"' --ops --ops-shapes 2112x7168,
expect 2 'bad --ops-shapes "0x7168"' --ops --ops-shapes 0x7168
expect 2 'bad --ops-shapes "2112x7168;256x7168"' --ops --ops-shapes '2112x7168;256x7168'
# a good list passes the flags and stops only at the GPU (exit 1 without one; CI has none)
if ! nvidia-smi >/dev/null 2>&1; then expect 1 'no usable CUDA device' --ops --ops-m 64 --ops-shapes 2112x7168,7168x16384; fi
expect 2 '--nnodes 3: between 1 and the data parallel size 2' --data-parallel-size 2 --nnodes 3
expect 2 'need --data-parallel-size (or --tensor-parallel-size) of 2 or more' --enable-expert-parallel
expect 2 'decode rows only' --data-parallel-size 2 --prompt 512
expect 2 'bad --data-parallel-size "x"' --data-parallel-size x
expect 2 'data parallel size 0 (1 to 64)' --data-parallel-size 0
expect 2 'several nodes need --master-addr and --master-port' --data-parallel-size 4 --nnodes 2 --node-rank 1
expect 2 '--node-rank 2: 0 to 1' --data-parallel-size 4 --nnodes 2 --node-rank 2 --master-addr 10.0.0.1 --master-port 29500
expect 2 '--tensor-parallel-size with --data-parallel-size' --tensor-parallel-size 2 --data-parallel-size 2
expect 2 'bad --tensor-parallel-size "two"' --tensor-parallel-size two
expect 2 '--pipeline-parallel-size with --tensor-parallel-size' --pipeline-parallel-size 2 --tensor-parallel-size 2
expect 2 '--pipeline-parallel-size with' --pipeline-parallel-size 2 --batch fit --ctx 4K
expect 2 'bad --pipeline-parallel-size "x"' --pipeline-parallel-size x
expect 0 'usage: dsinfer bench' --help
# the plot of a bench CSV (core/bench_plot.c; no GPU needed): flag errors, a file error, then a drawing
expect 2 '--plot-from needs --plot FILE.svg' --plot-from x.csv
expect 2 '--plot needs --csv FILE' --plot x.svg
expect 2 '--plot draws decode and prefill rows, not --ops' --ops --csv x.csv --plot x.svg
pdir=$(mktemp -d); trap 'rm -f "$tmp"; rm -rf "$pdir"' EXIT
expect 1 "plot: cannot open $pdir/none.csv" --plot-from "$pdir/none.csv" --plot "$pdir/p.svg"
printf 'label,kind,dtype,batch,len,tok_s,roof_frac\nrun,decode,bf16,1,1024,280.5,0.32\nrun,decode,bf16,64,1024,5500,0.67\n' > "$pdir/r.csv"
expect 0 "plot: $pdir/p.svg (from $pdir/r.csv)" --plot-from "$pdir/r.csv" --plot "$pdir/p.svg"
grep -q '<svg ' "$pdir/p.svg" && grep -q 'run bf16 ctx 1024, batch 64: 5500.0 tok/s, 67.0% of the roofline' "$pdir/p.svg" || { echo "bench --plot-from: unexpected SVG"; exit 1; }
printf 'label,kind\nrun,decode,bf16\n' > "$pdir/bad.csv"
expect 1 'no column "dtype"' --plot-from "$pdir/bad.csv" --plot "$pdir/p2.svg"
# a valid request on a machine without a usable GPU (CI): a clear error, exit 1
if ! nvidia-smi -L >/dev/null 2>&1; then
  expect 1 'dsinfer bench: ' --batch 1 --ctx 1K --prompt '' --steps 1 --bw 1 --tflops 1
  # one process per GPU: the ranks fail to start and the launcher reports it (no hang: timeout 120)
  set +e; timeout 120 "$BIN" bench --data-parallel-size 2 --enable-expert-parallel --batch 1 --ctx 16 --steps 1 \
    --bw 1 --tflops 1 >"$tmp" 2>&1; rc=$?; set -e
  [ "$rc" = 1 ] && grep -q 'dsinfer bench: rank [01] ' "$tmp" || { echo "bench dp2 without GPUs: rc $rc, output:"; cat "$tmp"; exit 1; }
fi
echo "bench_args: ok"
