/* The MoE block under expert parallelism (issue 10): each rank holds the routed experts of its placement
 * slots (dist/placement.h), runs routing for its own tokens, and exchanges token rows with the ranks
 * holding their experts through a communicator (dist/comm.h). Built from backend ops only, so the CPU
 * backend with ranks as threads checks the algorithm in CI and the CUDA backend runs it over NCCL. */
#ifndef DS_DIST_EP_MOE_H
#define DS_DIST_EP_MOE_H

#include "backend/backend.h"
#include "dist/comm.h"
#include "dist/placement.h"

/* Backend buffers kept from one MoE call to the next (grow only), so a step allocates nothing once warm
 * (cudaMalloc would synchronise the device every layer). */
#define DS_EP_WS_SLOTS 12
typedef struct ds_ep_ws {
    ds_backend *be;
    float *p[DS_EP_WS_SLOTS];
    size_t cap[DS_EP_WS_SLOTS];   /* floats */
} ds_ep_ws;
void ds_ep_ws_free(ds_ep_ws *ws);   /* releases the buffers (before the backend goes) and ws */

typedef struct ds_ep_s {
    ds_comm *comm;               /* rank = comm->rank, n_ranks = comm->size = pl->n_ranks */
    const ds_ep_placement *pl;
    int fp8_dispatch;            /* 1: token rows travel to the experts as FP8 records (backend.h
                                    quant_rows_fp8: 1 byte per value + a scale per 128, about a quarter of
                                    fp32) when the width is a multiple of 128; results come back in fp32 */
    ds_ep_ws *ws;                /* NULL: buffers allocated and released per call */
} ds_ep;

/* out[M, D] = the MoE block of layer L for this rank's tokens x[M, D] (backend memory); M may be 0: the
 * rank still serves its experts. Steps: router logits (backend) and routing (host, ds_route_token);
 * the (token, choice) rows sent to the rank of the chosen expert's replica (all-to-all); each local
 * slot's expert over the rows it received (backend mlp); the outputs sent back (all-to-all) and combined
 * with the routing weights in ascending expert order per token, after the shared experts. The same sums
 * as be->moe: rows meet their experts in another order, so results agree to fp32 rounding of the
 * expert GEMMs. Every rank must call it together for the same layer. */
ds_status ds_ep_moe(const ds_ep *ep, ds_backend *be, float *out, const float *x, const ds_layer_weights *L, int M,
                    char *err);

struct ds_engine;
/* Joins engine e (opened with only this rank's experts) to expert parallelism over comm (a rank a process,
 * e.g. NCCL between the server's replica processes), experts placed by pl (pl->n_ranks == comm->size; it
 * must outlive the engine). On success the engine owns comm (destroyed with it); on failure the caller does. */
ds_status ds_engine_join_expert_parallel_comm(struct ds_engine *e, ds_comm *comm, const ds_ep_placement *pl,
                                             int fp8_dispatch, char *err);

/* The gathered form (graph-capturable, for few ranks over fast links): every rank's token rows are
 * all-gathered (M_max rows a rank, zero-padded), each rank runs the routing for all of them and its own
 * contiguous range of experts (be->moe_routed), a reduce-scatter sums the ranks' partial outputs back to
 * the rows' owners, and the shared experts run on the owner's rows. No host step: the exchanges are NCCL
 * collectives on the backend's stream. M_max: the largest M of the group this step (every rank passes
 * the same). Returns DS_ERR_UNSUPPORTED (before any exchange) when the backend or communicator lacks
 * the ops or the placement is not one contiguous range per rank (replicas): use ds_ep_moe then. */
ds_status ds_ep_moe_gathered(const ds_ep *ep, ds_backend *be, float *out, const float *x, const ds_layer_weights *L,
                             int M, int M_max, char *err);
/* 1 when ds_ep_moe_gathered can serve this rank: the ops exist and its experts are [*e0, *e1). */
int ds_ep_gather_ok(const ds_ep *ep, const ds_backend *be, int *e0, int *e1);

#endif
