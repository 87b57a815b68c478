#!/usr/bin/env bash
# One device call's run: session_run.sh's parts for the card it finds, in order, within the call's limit, with the
# step lines on stdout (also $OUT/call.txt) and every log packed into $OUT/logs.tgz (a call brings back at most 8 files;
# session_run.sh writes one log a step). A call cut short by LIMIT still packs what ran.
# usage: dev/cuda/call.sh H100_PARTS [H200_PARTS]   (comma lists of session_run.sh parts; H200_PARTS defaults to
#        H100_PARTS); LIMIT (seconds, default 560) bounds session_run.sh, leaving the pack a few seconds of a 600 s call
# e.g. `bash dev/cuda/call.sh s57a s57a,h200r` (carry [".deps.tar.xz"])
set -u
OUT=${OUT:-/tmp/dsinfer-gpu}; mkdir -p "$OUT"; export OUT
name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
parts=${1:?usage: call.sh H100_PARTS [H200_PARTS]}
case "$name" in *H200*) parts=${2:-$1};; esac
echo "card: ${name:-none found}; parts: $parts; limit ${LIMIT:-560} s" | tee "$OUT/call.txt"
timeout "${LIMIT:-560}" bash dev/cuda/session_run.sh "$parts" 2>&1 | tee -a "$OUT/call.txt"
echo "session_run.sh: rc ${PIPESTATUS[0]} (124: cut at the limit)" | tee -a "$OUT/call.txt"
tar czf /tmp/logs.tgz -C "$OUT" --exclude=call.txt . && mv /tmp/logs.tgz "$OUT/logs.tgz" &&
  find "$OUT" -mindepth 1 -maxdepth 1 ! -name call.txt ! -name logs.tgz -exec rm -rf {} +
ls -la "$OUT"
