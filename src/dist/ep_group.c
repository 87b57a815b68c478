/* The public expert-parallel group (dsinfer.h): a placement shared by the ranks and their transport
 * (ranks as threads, dist/comm_local.c, today). Each engine that joins gets its own communicator and
 * ds_ep (dist/ep_moe.h), owned by the engine. */
#include <stdlib.h>

#include "core/status.h"
#include "dist/ep_moe.h"
#include "model/engine.h"

struct ds_ep_group {
    int n_ranks, fp8_dispatch;
    ds_comm_local_group *local;
    ds_ep_placement pl;
};

ds_status ds_ep_group_new(int n_ranks, int n_experts, int redundant_slots, ds_ep_group **out, char *err) {
    *out = NULL;
    if (n_ranks < 1 || n_ranks > 64) return ds_seterr(err, DS_ERR_ARG, "expert parallel: %d ranks (1 to 64)", n_ranks);
    if (n_experts < n_ranks)
        return ds_seterr(err, DS_ERR_ARG, "expert parallel: %d routed experts cannot be split over %d ranks", n_experts,
                         n_ranks);
    ds_ep_group *g = ds_xcalloc(1, sizeof *g);
    ds_status st = ds_ep_place(n_experts, n_ranks, redundant_slots, NULL, &g->pl, err);
    if (st) {
        free(g);
        return st;
    }
    g->n_ranks = n_ranks;
    g->local = ds_comm_local_group_new(n_ranks);
    *out = g;
    return DS_OK;
}

void ds_ep_group_set_fp8_dispatch(ds_ep_group *g, int on) { g->fp8_dispatch = on != 0; }

void ds_ep_group_free(ds_ep_group *g) {
    if (!g) return;
    ds_comm_local_group_free(g->local);
    ds_ep_placement_free(&g->pl);
    free(g);
}

ds_status ds_engine_join_expert_parallel(ds_engine *e, ds_ep_group *g, int rank, char *err) {
    if (!g || rank < 0 || rank >= g->n_ranks)
        return ds_seterr(err, DS_ERR_ARG, "expert parallel: rank %d of a group of %d", rank, g ? g->n_ranks : 0);
    if (e->ep) return ds_seterr(err, DS_ERR_ARG, "expert parallel: the engine is already in a group");
    ds_ep *ep = ds_xcalloc(1, sizeof *ep);
    ep->comm = ds_comm_local_new(g->local, rank);
    ep->pl = &g->pl;
    ep->fp8_dispatch = g->fp8_dispatch;
    ep->ws = ds_xcalloc(1, sizeof(ds_ep_ws));
    ep->ws->be = e->be;
    ds_status st = ds_engine_set_expert_parallel(e, ep, err);
    if (st) {
        ds_ep_ws_free(ep->ws);
        ep->comm->destroy(ep->comm);
        free(ep);
        return st;
    }
    e->ep_owned = ep;
    return DS_OK;
}

ds_status ds_engine_join_expert_parallel_comm(ds_engine *e, ds_comm *comm, const ds_ep_placement *pl, int fp8_dispatch,
                                             char *err) {
    if (!comm || !pl || pl->n_ranks != comm->size)
        return ds_seterr(err, DS_ERR_ARG, "expert parallel: a placement over %d ranks for a group of %d", pl ? pl->n_ranks : 0,
                         comm ? comm->size : 0);
    if (e->ep) return ds_seterr(err, DS_ERR_ARG, "expert parallel: the engine is already in a group");
    ds_ep *ep = ds_xcalloc(1, sizeof *ep);
    ep->comm = comm;
    ep->pl = pl;
    ep->fp8_dispatch = fp8_dispatch != 0;
    ep->ws = ds_xcalloc(1, sizeof(ds_ep_ws));
    ep->ws->be = e->be;
    ds_status st = ds_engine_set_expert_parallel(e, ep, err);
    if (st) {   /* the comm stays the caller's */
        ds_ep_ws_free(ep->ws);
        free(ep);
        return st;
    }
    e->ep_owned = ep;   /* the engine destroys the comm with it */
    return DS_OK;
}

/* One exchange: mark in the high bits, flags in the low 8 (marks beyond 2^55 are not expected). */
ds_status ds_ep_agree(ds_engine *e, int flags, uint64_t mark, int *any, uint64_t *min_mark, char *err) {
    if (!e->ep) return ds_seterr(err, DS_ERR_ARG, "expert parallel: the engine is in no group");
    ds_comm *c = e->ep->comm;
    int64_t send[64], recv[64];
    for (int r = 0; r < c->size; r++) send[r] = (int64_t)((mark << 8) | ((uint64_t)flags & 0xff));
    ds_status st = c->exchange_counts(c, send, recv, err);
    int v = 0;
    uint64_t m = UINT64_MAX;
    for (int r = 0; r < c->size; r++) {
        v |= (int)(recv[r] & 0xff);
        uint64_t mk = (uint64_t)recv[r] >> 8;
        m = mk < m ? mk : m;
    }
    *any = v;
    *min_mark = m;
    return st;
}
