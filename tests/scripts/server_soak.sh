#!/usr/bin/env bash
# Server test (soak): tests/server/soak.test.mjs drives `dsinfer serve` (DSINFER_BIN) on the tiny-v3 fixture
# through the official openai npm client and raw HTTP; the server listens on a free loopback port.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/server/ensure_npm.sh
# SOAK_SECONDS (default 30) bounds the load; SOAK_SEED replays a run.
export SOAK_SECONDS=${SOAK_SECONDS:-30}
exec timeout $((SOAK_SECONDS + 240)) node tests/server/soak.test.mjs
