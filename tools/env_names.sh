#!/bin/sh
# Prints every DSINFER_* name that stands alone as a string literal in the given files (the names the sources read
# through getenv or env_int), as C string literals one a line, in strcmp order, each once: the Makefile's
# $(BUILD)/gen/env_names.inc, the list src/core/env_check.c checks the environment against.
# The harness's names come too: no C source reads them, but tests/run_tests.sh, tests/scripts, tests/server and dev/cuda
# put them into dsinfer's environment.
{ grep -hoE '"DSINFER_[A-Z0-9_]+"' "$@"
  printf '"%s"\n' DSINFER_BIN DSINFER_SERVE_BACKEND DSINFER_DEPS_UNPACKED DSINFER_MODEL; } | LC_ALL=C sort -u | sed 's/$/,/'
