#!/usr/bin/env bash
# Every prepared mutant not yet run, for one pack (`bash dev/cuda/build_prof.sh && bash dev/cuda/pack_session.sh
# dev/cuda/mutants_s33.sh`) that serves parts s32e, s32f, s32d, s33a, s33b and s33c: the thirty-second session's
# (mutants_s32c.sh: the combine in the norm; mutants_s32d.sh: the folded MLA combine) and the thirty-third's
# (mutants_s33a.sh: QF's whole rows; mutants_s33c.sh: the one-token MoE launch).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash dev/cuda/mutants_s32c.sh
bash dev/cuda/mutants_s32d.sh
bash dev/cuda/mutants_s33a.sh
bash dev/cuda/mutants_s33c.sh
