#!/usr/bin/env bash
# Server test (api): tests/server/api.test.mjs drives `dsinfer serve` (DSINFER_BIN) on the tiny-v3 fixture
# through the official openai npm client and raw HTTP; the server listens on a free loopback port.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/server/ensure_npm.sh
exec timeout 300 node tests/server/api.test.mjs
