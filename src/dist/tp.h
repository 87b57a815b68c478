/* Tensor parallelism (issue 10): each of R ranks holds 1/R of the attention heads (q_b / q and kv_b rows,
 * o_proj columns) and of every MLP's intermediate width (gate / up rows, down columns; the routed and
 * shared experts too), runs the same batch as the other ranks, and sums the partial outputs of o_proj
 * and of each MLP / MoE block with an all-reduce. The latent KV cache is whole on every rank (MLA's
 * latent is shared by all heads: TP does not split it, which is why attention data parallelism exists).
 * Embedding, norms, router and lm_head stay whole. Weight slices are views (no copies); the CUDA backend
 * copies a column slice to contiguous device memory when it uploads it (one rank per process). */
#ifndef DS_DIST_TP_H
#define DS_DIST_TP_H

#include "dist/comm.h"
#include "model/weights.h"

/* Views of rows [r0, r1) and columns [c0, c1) of w. FP8: starts on 128-blocks; NVFP4: columns on
 * 16-blocks. DS_ERR_UNSUPPORTED with a message naming the tensor otherwise. */
ds_status ds_weight_slice_rows(const ds_weight *w, int r0, int r1, ds_weight *out, char *err);
ds_status ds_weight_slice_cols(const ds_weight *w, int c0, int c1, ds_weight *out, char *err);

/* Rank r of R keeps its share of the weights and the config its share of heads and widths (the engine's
 * tensor-parallel cut, without joining a communicator: ds_engine_set_tensor_parallel does both, or joins
 * an engine opened as one rank). Dummy weights (made later on the device) are cut by shape. */
struct ds_engine;
ds_status ds_tp_slice(struct ds_engine *e, int R, int r, int whole_experts, char *err);

#endif
