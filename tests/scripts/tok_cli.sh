#!/usr/bin/env bash
# dsinfer tokenize / detokenize on the fixtures' tokenizer: ids as the golden file, --bos, round trip,
# --skip-special-tokens, and clear failures (invalid UTF-8, missing flags).
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${DSINFER_BIN:-build/dsinfer}
M=tests/fixtures/tiny-v3
[ -x "$BIN" ] || { echo "SKIP: $BIN not built"; exit 77; }
"$BIN" tokenize --help >/dev/null 2>&1; [ $? = 2 ] || { echo "SKIP: $BIN has no tokenize command yet"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

got=$(printf 'Hello, world!' | "$BIN" tokenize --model $M) || fail "tokenize exited $?"
[ "$got" = "55,430,333,27,340,279,91,83,16" ] || fail "tokenize gave $got"
got=$(printf 'Hello, world!' | "$BIN" tokenize --model $M --bos)
[ "$got" = "0,55,430,333,27,340,279,91,83,16" ] || fail "tokenize --bos gave $got"
got=$(printf '<｜User｜>hi<think>' | "$BIN" tokenize --model $M)
case "$got" in 3,*,5) ;; *) fail "special-token text not matched as added tokens: $got" ;; esac
got=$(printf '' | "$BIN" tokenize --model $M); [ -z "$got" ] || fail "empty input gave '$got'"
text=$("$BIN" detokenize --model $M --ids 0,55,430,333,27,340,279,91,83,16,1) || fail "detokenize exited $?"
[ "$text" = "<｜begin▁of▁sentence｜>Hello, world!<｜end▁of▁sentence｜>" ] || fail "detokenize gave $text"
text=$("$BIN" detokenize --model $M --ids 0,55,430,333,5,1 --skip-special-tokens)
[ "$text" = "Hello<think>" ] || fail "--skip-special-tokens gave $text"
printf 'bad \xff byte' | "$BIN" tokenize --model $M >/dev/null 2>"${TMPDIR:-/tmp}/tok_cli_err.$$"; rc=$?
grep -q "UTF-8" "${TMPDIR:-/tmp}/tok_cli_err.$$" && [ $rc != 0 ] || fail "invalid UTF-8: exit $rc"
rm -f "${TMPDIR:-/tmp}/tok_cli_err.$$"
"$BIN" detokenize --model $M >/dev/null 2>&1; [ $? = 2 ] || fail "missing --ids is not a usage error"
"$BIN" tokenize --model /nonexistent </dev/null >/dev/null 2>&1; [ $? != 0 ] || fail "missing model folder accepted"
echo "tok_cli: ok"
