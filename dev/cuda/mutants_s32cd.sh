#!/usr/bin/env bash
# Both of the thirty-second session's prepared mutant sets in one pack (`bash dev/cuda/build_prof.sh && bash
# dev/cuda/pack_session.sh dev/cuda/mutants_s32cd.sh`), so that one device call can run parts s32e, s32f and s32d:
# mutants_s32c.sh (the combine in the norm) and mutants_s32d.sh (the folded MLA combine).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash dev/cuda/mutants_s32c.sh
bash dev/cuda/mutants_s32d.sh
