/* Tensor parallelism (issue 10): each of R ranks holds 1/R of the attention heads (q_b / q and kv_b rows,
 * o_proj columns) and of every MLP's intermediate width (gate / up rows, down columns; the routed and
 * shared experts too), runs the same batch as the other ranks, and sums the partial outputs of o_proj
 * and of each MLP / MoE block with an all-reduce. The latent KV cache is whole on every rank (MLA's
 * latent is shared by all heads: TP does not split it, which is why attention data parallelism exists).
 * Embedding, norms, router and lm_head stay whole. Weight slices are views (no copies; CPU backend). */
#ifndef DS_DIST_TP_H
#define DS_DIST_TP_H

#include "dist/comm.h"
#include "model/weights.h"

/* Views of rows [r0, r1) and columns [c0, c1) of w. FP8: starts on 128-blocks; NVFP4: columns on
 * 16-blocks. DS_ERR_UNSUPPORTED with a message naming the tensor otherwise. */
ds_status ds_weight_slice_rows(const ds_weight *w, int r0, int r1, ds_weight *out, char *err);
ds_status ds_weight_slice_cols(const ds_weight *w, int c0, int c1, ds_weight *out, char *err);

#endif
