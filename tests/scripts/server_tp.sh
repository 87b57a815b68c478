#!/usr/bin/env bash
# `dsinfer serve --tensor-parallel-size N` and `--pipeline-parallel-size N` (issue 10) on the CPU backend and the tiny-v3 fixture: one
# scheduler whose engine drives N ranks (threads), each with 1/N of the heads and MLP widths, partial sums
# all-reduced. 8 concurrent greedy completions, each equal to `dsinfer generate` for its prompt (the sums
# differ from one engine's only in fp32 order, 1e-6 relative: no greedy pick moves here); prefix caching
# is off (logged); the pool is intact; SIGTERM stops it with exit 0. N = 2 and 4, TP2 beside DP2, and
# pipeline parallelism over 3 stages (--pipeline-parallel-size; bitwise one engine's sums), and TP2 with the
# experts split whole across the ranks (--enable-expert-parallel without --data-parallel-size).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${DSINFER_BIN:-build/dsinfer}
command -v curl >/dev/null || { echo "SKIP: curl not found"; exit 77; }
M=tests/fixtures/tiny-v3
tmp=$(mktemp -d); pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
. tests/scripts/lib/serve.bash
# the CLI flag: the same greedy ids as one engine; a split that does not divide is refused (exit 2)
a=$("$BIN" generate --model $M --ids 0,17,99,5 -n 16 --temperature 0 --print-ids --tensor-parallel-size 2)
b=$("$BIN" generate --model $M --ids 0,17,99,5 -n 16 --temperature 0 --print-ids)
[ "$a" = "$b" ] || { echo "generate TP2 [$a] vs one engine [$b]"; exit 1; }
set +e; "$BIN" generate --model $M --ids 0,17 -n 2 --tensor-parallel-size 3 >"$tmp/bad" 2>&1; rc=$?; set -e
[ $rc = 2 ] && grep -q "do not split evenly" "$tmp/bad" || { echo "TP3 of 4 heads not refused (rc $rc)"; cat "$tmp/bad"; exit 1; }
words=(alpha beta gamma delta epsilon zeta eta theta)
prompts=()
for i in "${!words[@]}"; do
  prompts+=("A ${words[$i]} said")
  "$BIN" generate --model $M --prompt "${prompts[$i]}" -n 12 --temperature 0 --threads 1 --ignore-eos \
    | tr -d '\000' >"$tmp/want$i"
done
c=$("$BIN" generate --model $M --ids 0,17,99,5 -n 16 --temperature 0 --print-ids --pipeline-parallel-size 3)
[ "$c" = "$b" ] || { echo "generate PP3 [$c] vs one engine [$b]"; exit 1; }
for args in "--tensor-parallel-size 2" "--tensor-parallel-size 4" "--tensor-parallel-size 2 --data-parallel-size 2" \
            "--pipeline-parallel-size 3" "--tensor-parallel-size 2 --enable-expert-parallel"; do
  serve_start "$tmp/log" --model $M --port 0 --threads 2 $args --kv-cache-memory 4MiB
  grep -q "prefix caching off" "$tmp/log" || { echo "$args: prefix caching not turned off"; cat "$tmp/log"; exit 1; }
  complete_all "$tmp/r" 12 "${prompts[@]}"
  for i in "${!prompts[@]}"; do
    got=$(completion_text "$tmp/r$i.json")
    [ "${prompts[$i]}$got" = "$(cat "$tmp/want$i")" ] || { echo "$args prompt $i: server [$got] generate [$(cat "$tmp/want$i")]"; exit 1; }
  done
  pool=$(curl -s "$url/debug/pool")
  echo "$args: $pool"
  node -e 'const b=JSON.parse(process.argv[1]);if(!b.ok||b.pages_free+b.pages_used+b.pages_cached!==b.pages_total){console.log("pool");process.exit(1)}' "$pool"
  serve_stop "$tmp/log" "$args"
done
set +e; "$BIN" serve --model $M --port 0 --tensor-parallel-size 0 >"$tmp/bad" 2>&1; rc=$?; set -e
[ $rc = 2 ] || { echo "--tensor-parallel-size 0 not refused (rc $rc)"; cat "$tmp/bad"; exit 1; }
echo "server_tp: ok"
