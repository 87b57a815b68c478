#!/usr/bin/env bash
# `dsinfer serve --data-parallel-size 2 --data-parallel-backend mp` (issue 10: a process per replica, the
# form that puts replicas on GPUs of their own), on the CPU backend and the tiny-v3 fixture: 12 concurrent
# greedy completions, each equal to `dsinfer generate` for its prompt; a streamed one with the same text;
# both replica processes served requests; the pools are intact; a replica process killed with SIGKILL
# takes no more requests and the rest are still served; SIGTERM stops the server with exit 0 and no
# replica process is left.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${DSINFER_BIN:-build/dsinfer}
command -v curl >/dev/null || { echo "SKIP: curl not found"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 not found (JSON checks)"; exit 77; }   # the GPU machine has no node
M=tests/fixtures/tiny-v3
BE=${DSINFER_SERVE_BACKEND:-cpu}   # cuda on a GPU machine with two GPUs (dev/cuda/serve_dp_run.sh)
tmp=$(mktemp -d); trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
"$BIN" serve --model $M --backend $BE --port 0 --threads 2 --data-parallel-size 2 --data-parallel-backend mp --kv-cache-memory 4MiB \
  >"$tmp/log" 2>&1 & pid=$!
for _ in $(seq 1 150); do grep -q "^listening on" "$tmp/log" && break; sleep 0.2; done
url=$(sed -n 's/^listening on \(http[^ ]*\).*/\1/p' "$tmp/log")
[ -n "$url" ] || { echo "server did not start:"; cat "$tmp/log"; exit 1; }
kids=$(pgrep -P $pid || true)
[ "$(echo $kids | wc -w)" = 2 ] || { echo "expected 2 replica processes, got [$kids]"; exit 1; }
words=(alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu)
complete() {   # prompt -> the completion's text
  curl -s "$url/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"model\":\"$M\",\"prompt\":\"$1\",\"max_tokens\":10,\"temperature\":0,\"ignore_eos\":true}"
}
. tests/scripts/lib/serve.bash
text_of() { py_text "$1"; }
for i in "${!words[@]}"; do complete "The ${words[$i]} of the day" >"$tmp/r$i.json" & done
wait $(jobs -p | grep -v "^$pid$") 2>/dev/null || true
for i in "${!words[@]}"; do
  got=$(text_of "$tmp/r$i.json")
  want=$("$BIN" generate --model $M --backend $BE --prompt "The ${words[$i]} of the day" -n 10 --temperature 0 --threads 1 --ignore-eos | tr -d '\000')
  [ "The ${words[$i]} of the day$got" = "$want" ] || { echo "prompt $i: server [$got] generate [$want]"; exit 1; }
done
# streamed: the deltas add up to the same text
curl -sN "$url/v1/completions" -H 'Content-Type: application/json' \
  -d "{\"model\":\"$M\",\"prompt\":\"The alpha of the day\",\"max_tokens\":10,\"temperature\":0,\"ignore_eos\":true,\"stream\":true}" >"$tmp/stream"
streamed=$(python3 -c '
import json, sys
lines = [l for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: ") and l != "data: [DONE]"]
sys.stdout.write("".join(c["text"] for l in lines for c in json.loads(l[6:])["choices"]))' "$tmp/stream" | tr -d '\000')
[ "$streamed" = "$(text_of "$tmp/r0.json")" ] || { echo "streamed [$streamed] vs [$(text_of "$tmp/r0.json")]"; exit 1; }
grep -q "data: \[DONE\]" "$tmp/stream" || { echo "stream not terminated"; exit 1; }
pool=$(curl -s "$url/debug/pool")
echo "$pool"
py_pool_check "$pool" 2 13
# one replica process dies: the other serves everything after, the server stays up
kill -9 $(echo $kids | cut -d' ' -f1)
sleep 0.5
for i in 0 1 2 3; do
  complete "The ${words[$i]} of the day" >"$tmp/k$i.json"
  [ "$(text_of "$tmp/k$i.json")" = "$(text_of "$tmp/r$i.json")" ] || { echo "after the kill, request $i:"; cat "$tmp/k$i.json"; exit 1; }
done
curl -sf "$url/health" >/dev/null || { echo "health failed after a replica died"; exit 1; }
kill -TERM $pid
rc=0; wait $pid || rc=$?
[ $rc = 0 ] || { echo "server exited $rc"; tail -5 "$tmp/log"; exit 1; }
for k in $kids; do kill -0 $k 2>/dev/null && { echo "replica process $k left behind"; exit 1; }; done
echo "ok"
