#!/usr/bin/env bash
# `dsinfer serve --data-parallel-size N --enable-expert-parallel` (issue 10) on the CPU backend and the
# tiny-v3 fixture (16 routed experts): N replicas, each with its own requests and KV pool, sharing the
# routed experts (each holds 16/N of them; token rows exchanged in every MoE layer) and stepping
# together (a replica without requests takes idle steps). 12 concurrent greedy completions, each equal
# to `dsinfer generate` for its prompt; every replica served requests; the pools are intact; SIGTERM
# stops it with exit 0. N = 2 and 3. Also: --enable-expert-parallel without --data-parallel-size is
# refused with a clear message; --ep-dispatch fp8 serves every request to its length.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${DSINFER_BIN:-build/dsinfer}
command -v curl >/dev/null || { echo "SKIP: curl not found"; exit 77; }
M=tests/fixtures/tiny-v3
tmp=$(mktemp -d); pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
. tests/scripts/lib/serve.bash
set +e; "$BIN" serve --model $M --port 0 --enable-expert-parallel >"$tmp/bad" 2>&1; rc=$?; set -e
[ $rc != 0 ] && grep -q "enable-expert-parallel needs --data-parallel-size" "$tmp/bad" || { echo "no clear refusal:"; cat "$tmp/bad"; exit 1; }
words=(alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu)
prompts=()
for i in "${!words[@]}"; do
  prompts+=("The ${words[$i]} of the day")
  "$BIN" generate --model $M --prompt "${prompts[$i]}" -n 10 --temperature 0 --threads 1 --ignore-eos \
    | tr -d '\000' >"$tmp/want$i"
done
for N in 2 3; do
  serve_start "$tmp/log" --model $M --port 0 --threads 3 --data-parallel-size $N --enable-expert-parallel --kv-cache-memory 4MiB
  complete_all "$tmp/r" 10 "${prompts[@]}"
  for i in "${!prompts[@]}"; do
    got=$(completion_text "$tmp/r$i.json")
    [ "${prompts[$i]}$got" = "$(cat "$tmp/want$i")" ] || { echo "N=$N prompt $i: server [$got] generate [$(cat "$tmp/want$i")]"; exit 1; }
  done
  pool=$(curl -s "$url/debug/pool")
  echo "N=$N: $pool"
  node -e '
  const b = JSON.parse(process.argv[1]), n = +process.argv[2];
  const fail = m => { console.log(m); process.exit(1); };
  if (!b.ok) fail("pool check failed");
  if (b.replica_requests.length !== n) fail("expected " + n + " replicas");
  if (b.replica_requests.some(x => !(x > 0))) fail("a replica got no request");
  if (b.replica_requests.reduce((a, x) => a + x, 0) !== 12) fail("requests lost");
  if (b.pages_free + b.pages_used + b.pages_cached !== b.pages_total) fail("pool accounting");
  ' "$pool" $N
  serve_stop "$tmp/log" "N=$N"
done
# FP8 dispatch: rows travel in e4m3, so the text may differ from generate; every request must still
# complete with its 10 tokens, and a bad --ep-dispatch is refused
set +e; "$BIN" serve --model $M --port 0 --data-parallel-size 2 --enable-expert-parallel --ep-dispatch fp16 >"$tmp/bad" 2>&1; rc=$?; set -e
[ $rc = 2 ] && grep -q "ep-dispatch must be fp32 or fp8" "$tmp/bad" || { echo "bad --ep-dispatch not refused:"; cat "$tmp/bad"; exit 1; }
serve_start "$tmp/log" --model $M --port 0 --threads 2 --data-parallel-size 2 --enable-expert-parallel --ep-dispatch fp8 \
  --kv-cache-memory 4MiB
complete_all "$tmp/f" 10 "${prompts[@]:0:4}"
for i in 0 1 2 3; do
  node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1]));if(r.usage.completion_tokens!==10){console.log(JSON.stringify(r));process.exit(1)}' "$tmp/f$i.json"
done
[ "$(curl -s "$url/debug/pool" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).ok))')" = true ] || { echo "fp8: pool check failed"; exit 1; }
serve_stop "$tmp/log" "fp8 dispatch"
echo "server_ep: ok"
