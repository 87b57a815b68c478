#!/usr/bin/env bash
# The twenty-seventh session's mutated builds (`bash dev/cuda/pack_session.sh dev/cuda/mutants_s27.sh`): each must fail
# the op test named beside it (f8ss: the TMA GEMM's scales staged by its producer warp, DSINFER_CUDA_F8_TM_SS).
set -euo pipefail
cd "$(dirname "$0")/../.."
m=dev/cuda/build_mutant.sh
# a thread's second row's scale read from its first row's place (must fail f8ss: values differ)
bash $m ss_row src/backend/cuda/cuda_fp8_wgmma.cu '    r.x1 = f[c->tr0 + 8];' '    r.x1 = f[c->tr0];'
# the staged scales of k-block kb + 1 instead of kb (must fail f8ss: values differ; the last k-block's reads past a row)
bash $m ss_kb src/backend/cuda/cuda_fp8_wgmma.cu '        r.v[q] = row < mend ? xs[(size_t)row * LK + kb] : 0.0f;' '        r.v[q] = row < mend ? xs[(size_t)row * LK + (kb + 1) % LK] : 0.0f;'
# SS 2's epilogue: the second half's boxes stored over the first half's columns (must fail f8ss at =2: values differ)
bash $m ss_half src/backend/cuda/cuda_fp8_wgmma.cu '                             ::"l"((uint64_t)tc), "r"(col + 32 * b), "r"(row), "r"(z),' '                             ::"l"((uint64_t)tc), "r"(col + 32 * (b & 1)), "r"(row), "r"(z),'
