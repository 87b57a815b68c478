#!/usr/bin/env bash
# Differential test against the reference Rust tokenizer (npm @anush008/tokenizers): random strings
# (scripts, digits, whitespace runs, CR/LF, emoji, combining marks, special-token text) must give the
# same ids and decode the same, for the real DeepSeek-V3 tokenizer and the fixtures' small one.
# The seed is printed; replay a failure with TOK_SEED=<seed>. TOK_DIFF_N sets the count (default 10000).
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/tokenizer/ensure_npm.sh
SEED=${TOK_SEED:-$(( $(date +%s) % 1000000 ))}
N=${TOK_DIFF_N:-10000}
echo "tok_diff: seed $SEED, $N strings (replay: TOK_SEED=$SEED bash tests/scripts/tok_diff.sh)"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
node tests/tokenizer/gen_diff.js "$V3_MODEL/tokenizer.json" "$tmp/v3.jsonl" "$N" "$SEED"
"$BIN_DIR/tests/test_tok_golden" --model "$V3_MODEL" --golden "$tmp/v3.jsonl" --allow-new-unicode
node tests/tokenizer/gen_diff.js tests/fixtures/tiny-v3/tokenizer.json "$tmp/mini.jsonl" 2000 "$SEED"
"$BIN_DIR/tests/test_tok_golden" --model tests/fixtures/tiny-v3 --golden "$tmp/mini.jsonl" --allow-new-unicode
# 1 MB inputs (mixed text, a whitespace run, one long word, a digit run) against the reference too
TOK_DIFF_BIG=1 node tests/tokenizer/gen_diff.js "$V3_MODEL/tokenizer.json" "$tmp/big.jsonl" 5 "$SEED"
"$BIN_DIR/tests/test_tok_golden" --model "$V3_MODEL" --golden "$tmp/big.jsonl"
# the loader's generic parts: variants of the small tokenizer (Split behaviors, invert, String patterns,
# ByteLevel regex + prefix space, lstrip/rstrip added tokens, ignore_merges, "a b" merges)
node tests/tokenizer/gen_variants.js tests/fixtures/tiny-v3/tokenizer.json "$tmp/var" > "$tmp/variants"
while read -r v; do
  node tests/tokenizer/gen_diff.js "$tmp/var/$v/tokenizer.json" "$tmp/$v.jsonl" 1000 "$SEED"
  "$BIN_DIR/tests/test_tok_golden" --model "$tmp/var/$v" --golden "$tmp/$v.jsonl" --allow-new-unicode
done < "$tmp/variants"
