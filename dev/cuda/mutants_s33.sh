#!/usr/bin/env bash
# Every mutant the thirty-third session prepared, for one pack: `bash dev/cuda/pack_session.sh dev/cuda/mutants_s33.sh`
set -euo pipefail
cd "$(dirname "$0")/../.."
bash dev/cuda/mutants_s33a.sh
bash dev/cuda/mutants_s33c.sh
