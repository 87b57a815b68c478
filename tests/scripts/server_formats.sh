#!/usr/bin/env bash
# `dsinfer serve --kv-cache-dtype fp8 --quantization fp4` serves the demo model: greedy completions
# through the server equal `dsinfer generate` with the same flags, /metrics names the cache's dtype; a bad
# --kv-cache-dtype is refused at start with exit code 2.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${DSINFER_BIN:-build/dsinfer}
command -v curl >/dev/null || { echo "SKIP: curl not found"; exit 77; }
log=$(mktemp); trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -f "$log"' EXIT
"$BIN" serve --model models/demo --port 0 --threads 1 --kv-cache-dtype fp8 --quantization fp4 >"$log" 2>&1 & pid=$!
for _ in $(seq 1 100); do grep -q "^listening on" "$log" && break; sleep 0.2; done
url=$(sed -n 's/^listening on \(http[^ ]*\).*/\1/p' "$log")
[ -n "$url" ] || { echo "server did not start:"; cat "$log"; exit 1; }
got=$(curl -s "$url/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model":"models/demo","prompt":"And God said","max_tokens":12,"temperature":0}' |
  node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>process.stdout.write(JSON.parse(s).choices[0].text))')
want=$("$BIN" generate --model models/demo --prompt "And God said" -n 12 --temperature 0 --threads 1 \
  --kv-cache-dtype fp8 --quantization fp4 --ignore-eos)
[ "And God said$got" = "$want" ] || { echo "server: [$got] generate: [$want]"; exit 1; }
# The page is read whole first: `curl | grep -q` under pipefail fails when grep exits at the match and curl,
# still writing, gets SIGPIPE (CI saw this once under ASan).
metrics=$(curl -s "$url/metrics")
grep -q '^dsinfer:cache_config_info{model_name="models/demo",cache_dtype="fp8"} 1$' <<<"$metrics" ||
  { echo "/metrics lacks cache_config_info with cache_dtype fp8:"; grep cache_config <<<"$metrics"; exit 1; }
set +e
"$BIN" serve --model models/demo --port 0 --kv-cache-dtype fp16 >/dev/null 2>"$log.err"; rc=$?
set -e
grep -q 'unknown KV cache dtype "fp16"' "$log.err" && [ $rc = 2 ] || { echo "bad --kv-cache-dtype: rc $rc"; cat "$log.err"; rm -f "$log.err"; exit 1; }
rm -f "$log.err"
echo "server_formats: ok ($got)"
