#!/usr/bin/env bash
# `dsinfer serve --data-parallel-size 2 --enable-expert-parallel --data-parallel-backend mp` (issue 10): the
# replicas are processes and the ranks of one expert-parallel group (each holds half the routed experts; they
# step in rounds; an idle one joins a round every 2 ms), over TCP on the CPU backend (dist/comm_tcp.c, in CI)
# and over NCCL with a GPU each (DSINFER_SERVE_BACKEND=cuda on two GPUs, dev/cuda/serve_dp_run.sh epmp). 12
# concurrent greedy completions, each equal to `dsinfer generate` for its prompt; a streamed one with the same
# text; both replica processes served requests; the pools are intact; a replica process killed with SIGKILL
# takes the group down (the other is stopped, it would wait in a collective forever): requests then fail with
# an error, none hangs, the server stays up; SIGTERM stops it with exit 0 and no replica process is left.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${DSINFER_BIN:-build/dsinfer}
M=tests/fixtures/tiny-v3
BE=${DSINFER_SERVE_BACKEND:-cpu}
tmp=$(mktemp -d); pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
command -v curl >/dev/null || { echo "SKIP: curl not found"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 not found (JSON checks)"; exit 77; }
"$BIN" serve --model $M --backend $BE --threads 1 --port 0 --data-parallel-size 2 --data-parallel-backend mp \
  --enable-expert-parallel --kv-cache-memory 64MiB >"$tmp/log" 2>&1 & pid=$!
for _ in $(seq 1 300); do grep -q "^listening on" "$tmp/log" && break; sleep 0.2; done
url=$(sed -n 's/^listening on \(http[^ ]*\).*/\1/p' "$tmp/log")
[ -n "$url" ] || { echo "server did not start:"; cat "$tmp/log"; exit 1; }
kids=$(pgrep -P $pid || true)
[ "$(echo $kids | wc -w)" = 2 ] || { echo "expected 2 replica processes, got [$kids]"; exit 1; }
words=(alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu)
complete() {   # prompt -> the completion's answer (30 s at most: a hang is a failure)
  curl -s --max-time 30 "$url/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"model\":\"$M\",\"prompt\":\"$1\",\"max_tokens\":10,\"temperature\":0,\"ignore_eos\":true}"
}
. tests/scripts/lib/serve.bash
text_of() { py_text "$1"; }
for i in "${!words[@]}"; do complete "The ${words[$i]} of the day" >"$tmp/r$i.json" & done
wait $(jobs -p | grep -v "^$pid$") 2>/dev/null || true
for i in "${!words[@]}"; do
  got=$(text_of "$tmp/r$i.json")
  want=$("$BIN" generate --model $M --backend $BE --threads 1 --prompt "The ${words[$i]} of the day" -n 10 --temperature 0 --ignore-eos | tr -d '\000')
  [ "The ${words[$i]} of the day$got" = "$want" ] || { echo "prompt $i: server [$got] generate [$want]"; exit 1; }
done
curl -sN --max-time 30 "$url/v1/completions" -H 'Content-Type: application/json' \
  -d "{\"model\":\"$M\",\"prompt\":\"The alpha of the day\",\"max_tokens\":10,\"temperature\":0,\"ignore_eos\":true,\"stream\":true}" >"$tmp/stream"
streamed=$(python3 -c '
import json, sys
lines = [l for l in open(sys.argv[1]).read().split("\n") if l.startswith("data: ") and l != "data: [DONE]"]
sys.stdout.write("".join(c["text"] for l in lines for c in json.loads(l[6:])["choices"]))' "$tmp/stream" | tr -d '\000')
[ "$streamed" = "$(text_of "$tmp/r0.json")" ] || { echo "streamed [$streamed] vs [$(text_of "$tmp/r0.json")]"; exit 1; }
pool=$(curl -s --max-time 30 "$url/debug/pool")
echo "$pool"
py_pool_check "$pool" 2 13
# one rank dies: the group cannot step; every request after it ends with an error, none hangs
kill -9 $(echo $kids | cut -d' ' -f1)
sleep 1
for i in 0 1; do
  code=$(curl -s --max-time 30 -o "$tmp/k$i.json" -w '%{http_code}' "$url/v1/completions" -H 'Content-Type: application/json' \
    -d "{\"model\":\"$M\",\"prompt\":\"The ${words[$i]} of the day\",\"max_tokens\":10,\"temperature\":0,\"ignore_eos\":true}") || true
  case $code in 5??) ;; *) echo "after the kill, request $i: HTTP $code"; cat "$tmp/k$i.json"; exit 1;; esac
done
curl -sf --max-time 10 "$url/health" >/dev/null || curl -s --max-time 10 -o /dev/null -w '%{http_code}' "$url/health" | grep -q '^5' \
  || { echo "health did not answer after a rank died"; exit 1; }
kill -TERM $pid
rc=0; wait $pid || rc=$?; pid=
[ $rc = 0 ] || { echo "server exited $rc"; tail -5 "$tmp/log"; exit 1; }
for k in $kids; do kill -0 $k 2>/dev/null && { echo "replica process $k left behind"; exit 1; }; done
echo "server_ep_mp: ok"
