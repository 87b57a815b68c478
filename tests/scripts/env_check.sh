#!/usr/bin/env bash
# dsinfer warns at start-up about a DSINFER_* variable that nothing reads (a misspelt or removed switch), with the
# nearest known name, and stays quiet about the switches it reads and the harness's own (DSINFER_BIN, set by
# tests/run_tests.sh); the warning changes nothing else (the command's exit code and stdout).
set -euo pipefail
BIN=${DSINFER_BIN:-build/dsinfer}
err=$(DSINFER_CUDA_MOEO_TCC=1 "$BIN" --help 2>&1 >/dev/null) || true
case "$err" in *"warning: DSINFER_CUDA_MOEO_TCC is set"*"did you mean DSINFER_CUDA_MOEO_TC?"*) ;;
  *) echo "no warning for DSINFER_CUDA_MOEO_TCC; stderr: $err"; exit 1;; esac
err=$(DSINFER_CUDA_MOEO_TC=1 DSINFER_CACHE_DIR=/tmp DSINFER_BIN="$BIN" "$BIN" --help 2>&1 >/dev/null) || true
case "$err" in *warning:*) echo "a warning for known names: $err"; exit 1;; esac
a=$(printf 'Hello' | "$BIN" tokenize --model tests/fixtures/tiny-v3)
b=$(printf 'Hello' | DSINFER_NOT_A_SWITCH=1 "$BIN" tokenize --model tests/fixtures/tiny-v3 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$b" ] || { echo "tokenize with an unknown variable: '$b' against '$a'"; exit 1; }
echo "env_check: ok"
