/* CUDA graphs for decode steps: the device work of one step (every layer and the lm_head) captured
 * once per key and replayed, so a step costs one graph launch instead of hundreds of kernel launches.
 *
 * The key is the model's (batch size, page-table width, activation and cache addresses); the backend
 * adds its own condition, cu_ws_epoch: a workspace that grows moves, and every graph holding the old
 * address is dropped. A key is run eagerly the first time (workspaces reach their size, cuBLAS picks
 * its kernels), captured the second time, replayed after. A capture during which a workspace moved is
 * thrown away and the step runs eagerly. Switched off with DSINFER_CUDA_GRAPHS=0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_profiler_api.h>

#include "backend/cuda/cuda.h"

#define MAX_GRAPHS 64

typedef struct {
    uint64_t key;
    unsigned long epoch;
    int seen;                  /* eager runs so far */
    cudaGraphExec_t exec;      /* NULL until captured */
    unsigned long used;        /* LRU tick */
} graph_entry;

struct cu_graphs {
    graph_entry e[MAX_GRAPHS];
    int n;
    unsigned long tick;
};

static graph_entry *find_or_add(struct cu_graphs *g, uint64_t key) {
    for (int i = 0; i < g->n; i++)
        if (g->e[i].key == key) return &g->e[i];
    graph_entry *v;
    if (g->n < MAX_GRAPHS) v = &g->e[g->n++];
    else {   /* replace the least recently used */
        v = &g->e[0];
        for (int i = 1; i < g->n; i++)
            if (g->e[i].used < v->used) v = &g->e[i];
        if (v->exec) CUDA_CHECK(cudaGraphExecDestroy(v->exec));
    }
    graph_entry fresh = {key, 0, 0, NULL, 0};
    *v = fresh;
    return v;
}

/* DSINFER_CUDA_PROFILE_STEPS=a,b,...: profiler range (cudaProfilerStart/Stop, for `ncu --profile-from-start
 * off`) around the a-th, b-th ... forward of the process (1-based; counted at each set_batch, so prefill
 * forwards count and can be profiled too: before the sixth session only decode graph runs counted; `bench`
 * runs calibration forwards first). DSINFER_CUDA_PROFILE_STEPS=list prints each forward's number and token
 * count on stderr instead, to find the one to profile. */
void cu_profile_hook(int n_tokens) {
    static int n_calls, n_want = -1, want[8], active, list;
    if (n_want < 0) {
        n_want = 0;
        const char *v = getenv("DSINFER_CUDA_PROFILE_STEPS");
        list = v && !strcmp(v, "list");
        while (!list && v && *v && n_want < 8) {
            want[n_want++] = atoi(v);
            v = strchr(v, ',');
            if (v) v++;
        }
    }
    if (list) fprintf(stderr, "profile: forward %d, %d tokens\n", ++n_calls, n_tokens);
    if (!n_want) return;
    n_calls++;
    if (active) {
        CUDA_CHECK(cudaStreamSynchronize(cu_stream));
        cudaProfilerStop();
        active = 0;
    }
    for (int i = 0; i < n_want; i++)
        if (want[i] == n_calls) {
            CUDA_CHECK(cudaStreamSynchronize(cu_stream));
            cudaProfilerStart();
            active = 1;
        }
}

/* DSINFER_CUDA_GRAPH_NODES=1: each captured graph's nodes counted by type on stderr (a debug line: which non-kernel
 * nodes a step holds; a memset node cost ~1.4 us a layer at batch 1 under PDL, the forty-seventh session) */
static void print_graph_nodes(cudaGraph_t graph, int n_tokens) {
    static int want = -1;
    if (want < 0) want = getenv("DSINFER_CUDA_GRAPH_NODES") && atoi(getenv("DSINFER_CUDA_GRAPH_NODES")) > 0;
    if (!want) return;
    size_t n = 0;
    CUDA_CHECK(cudaGraphGetNodes(graph, NULL, &n));
    cudaGraphNode_t *nodes = (cudaGraphNode_t *)ds_xcalloc(n ? n : 1, sizeof(cudaGraphNode_t));
    CUDA_CHECK(cudaGraphGetNodes(graph, nodes, &n));
    size_t kernel = 0, memset_n = 0, memcpy_n = 0, other = 0;
    for (size_t i = 0; i < n; i++) {
        enum cudaGraphNodeType t;
        CUDA_CHECK(cudaGraphNodeGetType(nodes[i], &t));
        if (t == cudaGraphNodeTypeKernel) kernel++;
        else if (t == cudaGraphNodeTypeMemset) memset_n++;
        else if (t == cudaGraphNodeTypeMemcpy) memcpy_n++;
        else other++;
    }
    free(nodes);
    fprintf(stderr, "graph: %d tokens: %zu nodes: %zu kernel, %zu memset, %zu memcpy, %zu other\n", n_tokens, n, kernel,
            memset_n, memcpy_n, other);
}

ds_status cu_graph_run(ds_backend *be, uint64_t key, void (*fn)(void *), void *ctx, char *err) {
    ds_cuda_backend *cb = cu_of(be);
    (void)err;
    /* the per-expert MoE path syncs with the host: such steps run eagerly */
    int moe_sync = be->cfg->n_routed_experts && (!cb->opt.moe_grouped || cb->b.n_tokens > cb->opt.moe_grouped_max_m);
    if (!cb->opt.graphs || moe_sync) {
        fn(ctx);
        return DS_OK;
    }
    if (!cb->graphs) cb->graphs = (struct cu_graphs *)ds_xcalloc(1, sizeof(struct cu_graphs));
    graph_entry *v = find_or_add(cb->graphs, key);
    v->used = ++cb->graphs->tick;
    if (v->exec && v->epoch != cu_ws_epoch) {
        CUDA_CHECK(cudaGraphExecDestroy(v->exec));
        v->exec = NULL;
        v->seen = 0;
    }
    if (v->exec) {
        CUDA_CHECK(cudaGraphLaunch(v->exec, cu_stream));
        return DS_OK;
    }
    if (v->seen++ == 0) {   /* first time: eager, so workspaces grow outside any capture */
        fn(ctx);
        return DS_OK;
    }
    unsigned long before = cu_ws_epoch;
    cudaGraph_t graph;
    cu_prefetch_join(cb);   /* an eager step's last L2 prefetch joins outside the capture (a capture may not wait on it) */
    CUDA_CHECK(cudaStreamBeginCapture(cu_stream, cudaStreamCaptureModeThreadLocal));
    fn(ctx);
    cu_prefetch_join(cb);   /* a forked L2 prefetch joins the capture before it ends */
    CUDA_CHECK(cudaStreamEndCapture(cu_stream, &graph));
    if (cu_ws_epoch != before) {   /* a workspace moved while capturing: the graph is stale */
        CUDA_CHECK(cudaGraphDestroy(graph));
        fn(ctx);
        return DS_OK;
    }
    print_graph_nodes(graph, cb->b.n_tokens);
    CUDA_CHECK(cudaGraphInstantiate(&v->exec, graph, 0));
    CUDA_CHECK(cudaGraphDestroy(graph));
    v->epoch = cu_ws_epoch;
    CUDA_CHECK(cudaGraphLaunch(v->exec, cu_stream));
    return DS_OK;
}

void cu_graphs_free(ds_cuda_backend *cb) {
    if (!cb->graphs) return;
    for (int i = 0; i < cb->graphs->n; i++)
        if (cb->graphs->e[i].exec) cudaGraphExecDestroy(cb->graphs->e[i].exec);
    free(cb->graphs);
    cb->graphs = NULL;
}
