# Sourced by tests/scripts/server_*.sh: makes sure tests/server/node_modules holds the npm packages of
# package-lock.json (npm ci on first use), or exits 77 (skip) with the reason on the last line.
SRVDIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
command -v node >/dev/null || { echo "SKIP: node not installed"; exit 77; }
if [ ! -f "$SRVDIR/node_modules/openai/package.json" ]; then
  command -v npm >/dev/null || { echo "SKIP: npm not installed"; exit 77; }
  echo "installing the npm packages of tests/server (npm ci)"
  ( cd "$SRVDIR" && timeout 300 npm ci --no-audit --no-fund --loglevel=error ) >&2 \
    || { echo "SKIP: npm ci failed in tests/server (no registry access?)"; exit 77; }
fi
export DSINFER_BIN="${DSINFER_BIN:-build/dsinfer}"
[ -x "$DSINFER_BIN" ] || { echo "SKIP: $DSINFER_BIN is not built"; exit 77; }
