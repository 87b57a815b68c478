#!/usr/bin/env bash
# Every prepared mutant not yet run, for one pack (`bash dev/cuda/build_prof.sh && bash dev/cuda/pack_session.sh
# dev/cuda/mutants_s34.sh`): the thirty-second and thirty-third sessions' (mutants_s33.sh) and the thirty-fourth's
# (mutants_s34a.sh: the layer's tail for one token; mutants_s34b.sh: the whole layer).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash dev/cuda/mutants_s33.sh
bash dev/cuda/mutants_s34a.sh
bash dev/cuda/mutants_s34b.sh
