#!/usr/bin/env bash
# Builds build-l2ef/dsinfer: the lab build CU_L2_EF (-DCU_L2_EF), in which the decode step's weight streams (the GEMVs'
# ld_stream16, cuda_linear.cu; moeo_kernel's gate / up rows and down strips and moe_wg_kernel's weight tiles, cuda_wgmma.h's
# bulk_load_stream / tma_load_stream) carry an L2 evict_first policy; dev/cuda/pack.sh carries it as .deps/bin/dsinfer_l2ef
# (session_run.sh s51a: the two binaries side by side). By build_variant.sh: only the objects that use those loads are
# compiled again.
set -euo pipefail
exec bash "$(dirname "$0")/build_variant.sh" build-l2ef "-DCU_L2_EF" cuda_linear cuda_moeo cuda_moe_wg
