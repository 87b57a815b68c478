#!/usr/bin/env bash
# `dsinfer serve --nnodes 2` (issue 10: the same replicas over several nodes): two serve processes on this
# machine stand for two nodes (127.0.0.1 as the master address), CPU backend, tiny-v3, 2 replicas, one per
# node. Node 1 starts first (its replica waits for the front); node 0 serves HTTP with its own replica and
# node 1's. 8 concurrent greedy completions, each equal to `dsinfer generate`; both replicas served requests;
# the pools are intact; SIGTERM on node 0 stops it with exit 0, and node 1 exits 0 on its own (its replica was
# told to stop). Then the same with --enable-expert-parallel: the two replicas one group over the nodes (TCP on
# the CPU, meeting at the master port + 1). Bad combinations of the node flags are refused with exit 2 and a
# message naming the flag. With DSINFER_SERVE_BACKEND=cuda on a machine with two GPUs (dev/cuda/serve_dp_run.sh
# multinode): the expert-parallel form only, node 0 on GPU 0 and node 1 on GPU 1, over NCCL (the id from node 0
# at the master port + 1), compared with generate on one GPU.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${DSINFER_BIN:-build/dsinfer}
command -v curl >/dev/null || { echo "SKIP: curl not found"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 not found (JSON checks)"; exit 77; }
M=tests/fixtures/tiny-v3
tmp=$(mktemp -d); pid=; pid1=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; [ -n "$pid1" ] && kill $pid1 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
. tests/scripts/lib/serve.bash
refuse() {   # message args...: exit 2 and the message
  local msg=$1; shift
  set +e; "$BIN" serve --model $M --port 0 "$@" >"$tmp/bad" 2>&1; local rc=$?; set -e
  [ $rc = 2 ] && grep -q -- "$msg" "$tmp/bad" || { echo "not refused ($*): rc $rc"; cat "$tmp/bad"; exit 1; }
}
refuse "go with --nnodes 2 or more" --node-rank 1
refuse "node-rank must be below --nnodes" --nnodes 2 --node-rank 2 --master-addr 127.0.0.1 --master-port 29000 \
  --data-parallel-size 2 --data-parallel-backend mp
refuse "needs --master-addr and --master-port" --nnodes 2 --data-parallel-size 2 --data-parallel-backend mp
refuse "data-parallel-backend mp" --nnodes 2 --master-addr 127.0.0.1 --master-port 29000 --data-parallel-size 2 \
  --data-parallel-backend threads
refuse "must be a multiple of --nnodes" --nnodes 2 --master-addr 127.0.0.1 --master-port 29000 --data-parallel-size 3 \
  --data-parallel-backend mp
BE=${DSINFER_SERVE_BACKEND:-cpu}
# free_port_pair: a port P with P and P + 1 both free on 127.0.0.1 (the nodes meet at the master port and
# at the master port + 1). Drawn below the kernel's ephemeral range (32768 .. 60999 on Linux): a port from
# bind(0) is ephemeral, and its neighbour can be the local end of any outgoing connection of this machine
# (a CI run once failed so: "cannot listen on 127.0.0.1:45538: Address already in use").
free_port_pair() {
  if command -v node >/dev/null; then
    node -e '
      const net = require("net");
      const tryBind = (p) => new Promise((ok) => { const s = net.createServer();
        s.once("error", () => ok(null)); s.listen(p, "127.0.0.1", () => ok(s)); });
      (async () => { for (let i = 0; i < 200; i++) {
        const p = 20000 + Math.floor(Math.random() * 12000);
        const a = await tryBind(p); if (!a) continue;
        const b = await tryBind(p + 1); a.close(); if (!b) continue;
        b.close(); console.log(p); return; }
        console.error("no free port pair in 20000 .. 32000"); process.exit(1); })();'
  else   # the GPU machine has python3, not node
    python3 -c '
import random, socket, sys
for _ in range(200):
    p = random.randrange(20000, 32000)
    try:
        a = socket.socket(); a.bind(("127.0.0.1", p)); b = socket.socket(); b.bind(("127.0.0.1", p + 1))
    except OSError:
        continue
    print(p); sys.exit(0)
sys.exit("no free port pair in 20000 .. 32000")'
  fi
}
words=(alpha beta gamma delta epsilon zeta eta theta)
prompts=()
for w in "${words[@]}"; do prompts+=("The $w of the day"); done
# plain replicas (cpu only), then one expert-parallel group over the two nodes (TCP on cpu, NCCL on cuda)
modes=(ep); [ "$BE" = cuda ] || modes=(plain ep)
for mode in "${modes[@]}"; do
  port=$(free_port_pair)
  NODE=(--model $M --backend $BE --threads 1 --data-parallel-size 2 --data-parallel-backend mp --nnodes 2
        --master-addr 127.0.0.1 --master-port $port --kv-cache-memory 4MiB)
  [ $mode = ep ] && NODE+=(--enable-expert-parallel)
  CUDA_VISIBLE_DEVICES=1 "$BIN" serve "${NODE[@]}" --node-rank 1 >"$tmp/log1" 2>&1 & pid1=$!
  CUDA_VISIBLE_DEVICES=0 serve_start "$tmp/log0" "${NODE[@]}" --node-rank 0 --port 0
  complete_all "$tmp/r" 10 "${prompts[@]}"
  for i in "${!prompts[@]}"; do
    got=$(py_text "$tmp/r$i.json")
    want=$("$BIN" generate --model $M --backend $BE --prompt "${prompts[$i]}" -n 10 --temperature 0 --threads 1 --ignore-eos | tr -d '\000')
    [ "${prompts[$i]}$got" = "$want" ] || { echo "$mode: prompt $i: server [$got] generate [$want]"; exit 1; }
  done
  pool=$(curl -s "$url/debug/pool")
  echo "$mode: $pool"
  py_pool_check "$pool" 2 8
  serve_stop "$tmp/log0" "$mode: node 0"
  for _ in $(seq 1 75); do kill -0 $pid1 2>/dev/null || break; sleep 0.2; done
  kill -0 $pid1 2>/dev/null && { echo "$mode: node 1 still running 15 s after node 0 stopped"; cat "$tmp/log1"; exit 1; }
  rc=0; wait $pid1 || rc=$?; pid1=
  [ $rc = 0 ] || { echo "$mode: node 1 exited $rc"; cat "$tmp/log1"; exit 1; }
done
echo "server_multinode: ok"
