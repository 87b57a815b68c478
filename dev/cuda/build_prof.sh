#!/usr/bin/env bash
# Builds build-prof/dsinfer, the decode experts' MW_PROF, the fused router's RT_PROF and the MLA decode's MLA_PROF and moeo_kernel's MOEO_PROF binary
# (cuda_moe_wg.cu's and cuda_moe.cu's clock64 phase sums, cuda_mla_tc.cu's globaltimer stamps), by build_variant.sh;
# dev/cuda/pack.sh then carries it as .deps/bin/dsinfer_prof (session_run.sh s30n, s31b .. s31e).
set -euo pipefail
exec bash "$(dirname "$0")/build_variant.sh" build-prof "-DMW_PROF -DRT_PROF -DMLA_PROF -DMOEO_PROF" \
  cuda_moe_wg cuda_moe cuda_backend cuda_mla_tc cuda_bench cuda_moeo
