#!/usr/bin/env bash
# Tokenizer encode throughput, dsinfer vs HF tokenizers (npm @anush008/tokenizers) on the same few MB
# of mixed text and the same machine. Usage: bash bench/tok_bench.sh [MB]   (default 4)
set -euo pipefail
cd "$(dirname "$0")/.."
source tests/tokenizer/ensure_npm.sh
# the tokenizer sources only (same flags as the Makefile), so the engine's state does not matter here
CFLAGS="-std=c11 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE -march=x86-64-v2 -Iinclude -Isrc $(pkg-config --cflags libcjson libpcre2-8)"
mkdir -p build
cc $CFLAGS -o build/tok_bench bench/tok_bench.c src/tokenizer/*.c src/core/status.c -lcjson -lpcre2-8 -lm
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
node bench/tok_bench_corpus.js "$tmp/text.txt" "${1:-4}"
build/tok_bench "$V3_MODEL" "$tmp/text.txt"
node bench/tok_bench.js "$V3_MODEL/tokenizer.json" "$tmp/text.txt"
