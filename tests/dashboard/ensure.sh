# Sourced by tests/scripts/dashboard_ui.sh: makes sure tests/dashboard/node_modules holds playwright-core
# (npm ci on first use) and that Debian's chromium is installed, or exits 77 (skip) with the reason on
# the last line. CHROMIUM overrides the browser's path.
DASHDIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
command -v node >/dev/null || { echo "SKIP: node not installed"; exit 77; }
export CHROMIUM="${CHROMIUM:-$(command -v chromium || command -v chromium-browser || echo /usr/bin/chromium)}"
[ -x "$CHROMIUM" ] || { echo "SKIP: chromium not installed (make deps installs Debian's chromium)"; exit 77; }
if [ ! -f "$DASHDIR/node_modules/playwright-core/package.json" ]; then
  command -v npm >/dev/null || { echo "SKIP: npm not installed"; exit 77; }
  echo "installing the npm packages of tests/dashboard (npm ci)"
  ( cd "$DASHDIR" && timeout 300 npm ci --no-audit --no-fund --loglevel=error ) >&2 \
    || { echo "SKIP: npm ci failed in tests/dashboard (no registry access?)"; exit 77; }
fi
export DSINFER_BIN="${DSINFER_BIN:-build/dsinfer}"
[ -x "$DSINFER_BIN" ] || { echo "SKIP: $DSINFER_BIN is not built"; exit 77; }
