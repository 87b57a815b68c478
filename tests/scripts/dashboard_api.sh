#!/usr/bin/env bash
# Dashboard test (api, no browser): tests/dashboard/api.test.mjs checks /dashboard, /dashboard/data,
# the alert and adaptive-limit gauges of /metrics and `dsinfer top --once` against `dsinfer serve`
# (DSINFER_BIN) on the tiny-v3 fixture under load. Needs node only.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v node >/dev/null || { echo "SKIP: node not installed"; exit 77; }
export DSINFER_BIN="${DSINFER_BIN:-build/dsinfer}"
[ -x "$DSINFER_BIN" ] || { echo "SKIP: $DSINFER_BIN is not built"; exit 77; }
exec timeout 180 node tests/dashboard/api.test.mjs
