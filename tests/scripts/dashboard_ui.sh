#!/usr/bin/env bash
# Dashboard test (browser): tests/dashboard/ui.test.mjs opens /dashboard of `dsinfer serve` (tiny-v3,
# CPU, under load, a tiny --slo-tpot-ms) in headless Chromium (Debian's chromium, driven by
# playwright-core), checks that the plots update and the latency alert appears, and saves a screenshot
# (its path is printed). Skips (77) without node, npm or chromium.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/dashboard/ensure.sh
exec timeout 180 node tests/dashboard/ui.test.mjs
