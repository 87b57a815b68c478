#!/usr/bin/env bash
# Runs every test program in $BUILD/tests and every tests/scripts/*.sh; prints one line per test and
# exits non-zero if any failed. A test that needs what this machine lacks prints SKIP and exits 77.
set -u
BUILD=${BUILD:-build}
export DSINFER_BIN="$BUILD/dsinfer"
pass=0; fail=0; skip=0; failed=""
run_one() {
  local name=$1; shift
  local log; log=$(mktemp)
  "$@" >"$log" 2>&1; local rc=$?
  if [ $rc = 0 ]; then pass=$((pass+1)); echo "PASS  $name";
  elif [ $rc = 77 ]; then skip=$((skip+1)); echo "SKIP  $name: $(tail -n 1 "$log")";
  else fail=$((fail+1)); failed="$failed $name"; echo "FAIL  $name (exit $rc)"; sed 's/^/    /' "$log" | tail -n 40; fi
  rm -f "$log"
}
for t in "$BUILD"/tests/test_*; do [ -x "$t" ] && run_one "$(basename "$t")" "$t"; done
for s in tests/scripts/*.sh; do [ -f "$s" ] && run_one "$(basename "$s")" bash "$s"; done
echo "passed $pass, failed $fail, skipped $skip"
[ $fail = 0 ] || { echo "failed:$failed"; exit 1; }
