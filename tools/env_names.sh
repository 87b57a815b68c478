#!/bin/sh
# Prints every DSINFER_* name that stands alone as a string literal in the given files (the names the sources read
# through getenv or env_int), as C string literals one a line, in strcmp order, each once: the Makefile's
# $(BUILD)/gen/env_names.inc, the list src/core/env_check.c checks the environment against.
grep -hoE '"DSINFER_[A-Z0-9_]+"' "$@" | LC_ALL=C sort -u | sed 's/$/,/'
