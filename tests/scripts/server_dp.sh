#!/usr/bin/env bash
# `dsinfer serve --data-parallel-size 2` (issue 10's scheduler per replica behind one server), on the
# CPU backend and the tiny-v3 fixture: 12 concurrent greedy completions, each equal to `dsinfer generate`
# for its prompt; both replicas served requests; the pools (two of them) are intact afterwards; SIGTERM
# stops it with exit 0 (no leak in the sanitizer build).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${DSINFER_BIN:-build/dsinfer}
command -v curl >/dev/null || { echo "SKIP: curl not found"; exit 77; }
M=tests/fixtures/tiny-v3
tmp=$(mktemp -d); trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
"$BIN" serve --model $M --port 0 --threads 2 --data-parallel-size 2 --kv-cache-memory 4MiB >"$tmp/log" 2>&1 & pid=$!
for _ in $(seq 1 100); do grep -q "^listening on" "$tmp/log" && break; sleep 0.2; done
url=$(sed -n 's/^listening on \(http[^ ]*\).*/\1/p' "$tmp/log")
[ -n "$url" ] || { echo "server did not start:"; cat "$tmp/log"; exit 1; }
one=$(curl -s "$url/debug/pool")
words=(alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu)
for i in "${!words[@]}"; do
  curl -s "$url/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"model\":\"$M\",\"prompt\":\"The ${words[$i]} of the day\",\"max_tokens\":10,\"temperature\":0,\"ignore_eos\":true}" \
    >"$tmp/r$i.json" &
done
wait $(jobs -p | grep -v "^$pid$") 2>/dev/null || true
for i in "${!words[@]}"; do
  got=$(node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1]));process.stdout.write(r.choices[0].text)' "$tmp/r$i.json" | tr -d '\000')
  want=$("$BIN" generate --model $M --prompt "The ${words[$i]} of the day" -n 10 --temperature 0 --threads 1 --ignore-eos | tr -d '\000')
  [ "The ${words[$i]} of the day$got" = "$want" ] || { echo "prompt $i: server [$got] generate [$want]"; exit 1; }
done
pool=$(curl -s "$url/debug/pool")
echo "$pool"
node -e '
const a = JSON.parse(process.argv[1]), b = JSON.parse(process.argv[2]);
const fail = m => { console.log(m); process.exit(1); };
if (!b.ok) fail("pool check failed");
if (b.replica_requests.length !== 2) fail("expected 2 replicas");
if (!(b.replica_requests[0] > 0 && b.replica_requests[1] > 0)) fail("a replica got no request");
if (b.replica_requests[0] + b.replica_requests[1] !== 12) fail("requests lost");
if (b.pages_free + b.pages_used + b.pages_cached !== b.pages_total) fail("pool accounting");
if (a.pages_total !== b.pages_total || a.pages_total % 2) fail("two equal pools expected");
' "$one" "$pool"
kill -TERM $pid; set +e; wait $pid; rc=$?; set -e
[ $rc = 0 ] || { echo "server exited $rc after SIGTERM (LeakSanitizer in the ASan build?)"; tail -n 20 "$tmp/log"; exit 1; }
echo "server_dp: ok"
