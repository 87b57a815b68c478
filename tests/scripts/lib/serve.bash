# Shared by the server_*.sh tests (sourced, not a test itself; run_tests.sh runs tests/scripts/*.sh only).
# Needs BIN, M (the model folder) and tmp (a scratch folder); keeps the server's pid in `pid` and its
# address in `url`, so the caller's EXIT trap can kill a server left running.

# serve_start LOG ARGS...: `dsinfer serve ARGS` in the background, up to 20 s for it to listen.
serve_start() {
  local log=$1; shift
  "$BIN" serve "$@" >"$log" 2>&1 & pid=$!
  for _ in $(seq 1 100); do grep -q "^listening on" "$log" && break; sleep 0.2; done
  url=$(sed -n 's/^listening on \(http[^ ]*\).*/\1/p' "$log")
  [ -n "$url" ] || { echo "server did not start ($*):"; cat "$log"; exit 1; }
}

# complete_all OUT MAX_TOKENS PROMPT...: one greedy /v1/completions per prompt, all at once; prompt i's
# answer in OUT$i.json.
complete_all() {
  local out=$1 n=$2; shift 2
  local i=0 cpids=() p
  for p in "$@"; do
    curl -s "$url/v1/completions" -H 'Content-Type: application/json' \
      -d "{\"model\":\"$M\",\"prompt\":\"$p\",\"max_tokens\":$n,\"temperature\":0,\"ignore_eos\":true}" \
      >"$out$i.json" & cpids+=($!)
    i=$((i + 1))
  done
  wait "${cpids[@]}"
}

# completion_text FILE: the text of a completion answer.
completion_text() {
  node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1]));process.stdout.write(r.choices[0].text)' "$1" \
    | tr -d '\000'
}

# serve_stop LOG WHAT: SIGTERM; the server must exit 0.
serve_stop() {
  kill -TERM $pid; set +e; wait $pid; local rc=$?; set -e; pid=
  [ $rc = 0 ] || { echo "$2: server exited $rc after SIGTERM"; tail -n 20 "$1"; exit 1; }
}

# Where node is missing (the GPU machine), the same checks in python3:
# py_text FILE: the text of a completion answer.
py_text() {
  python3 -c 'import json,sys; sys.stdout.write(json.load(open(sys.argv[1]))["choices"][0]["text"])' "$1" | tr -d '\000'
}

# py_pool_check POOL_JSON N TOTAL: /debug/pool says ok, N replicas, each served a request, TOTAL in all, and the
# pages add up.
py_pool_check() {
  python3 -c '
import json, sys
b, n, total = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def fail(m): print(m); sys.exit(1)
if not b["ok"]: fail("pool check failed")
r = b["replica_requests"]
if len(r) != n: fail("expected %d replicas" % n)
if not all(x > 0 for x in r): fail("a replica got no request")
if sum(r) != total: fail("requests lost")
if b["pages_free"] + b["pages_used"] + b["pages_cached"] != b["pages_total"]: fail("pool accounting")
' "$1" "$2" "$3"
}
