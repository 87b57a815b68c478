/* NCCL communicator: see comm_nccl.h. all_to_all_v is one NCCL group of point-to-point sends and
 * receives (bytes), the way NCCL's documentation builds an all-to-all; exchange_counts stages the host
 * counts through a small device buffer. */
#include "dist/comm_nccl.h"

#include <stdlib.h>

#include "core/status.h"

#if defined(DS_HAVE_CUDA) && defined(__has_include)
#if __has_include(<nccl.h>)
#define DS_WITH_NCCL 1
#endif
#endif

#ifndef DS_WITH_NCCL
ds_status ds_nccl_unique_id(void *id, char *err) {
    (void)id;
    return ds_seterr(err, DS_ERR_UNSUPPORTED, "this dsinfer is built without CUDA/NCCL headers");
}
ds_status ds_comm_nccl_new(int rank, int n, const void *id, ds_comm **out, char *err) {
    (void)rank, (void)n, (void)id;
    *out = NULL;
    return ds_seterr(err, DS_ERR_UNSUPPORTED, "this dsinfer is built without CUDA/NCCL headers");
}
#else
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>
#include <string.h>

#include "backend/cuda/cuda_api.h"

typedef struct {
    void *lib;
    ncclResult_t (*get_unique_id)(ncclUniqueId *);
    ncclResult_t (*init_rank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*destroy)(ncclComm_t);
    ncclResult_t (*send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*group_start)(void);
    ncclResult_t (*group_end)(void);
    const char *(*error_string)(ncclResult_t);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*all_gather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*reduce_scatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
} nccl_api;
static nccl_api api;

static ds_status load_api(char *err) {
    if (api.lib) return DS_OK;
    const char *path = getenv("DSINFER_NCCL_LIB");
    void *lib = dlopen(path && *path ? path : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "NCCL: cannot load %s (%s); put its folder on LD_LIBRARY_PATH or "
                         "name the file in DSINFER_NCCL_LIB", path && *path ? path : "libnccl.so.2", dlerror());
    struct { void **fn; const char *name; } syms[] = {
        {(void **)&api.get_unique_id, "ncclGetUniqueId"}, {(void **)&api.init_rank, "ncclCommInitRank"},
        {(void **)&api.destroy, "ncclCommDestroy"}, {(void **)&api.send, "ncclSend"}, {(void **)&api.recv, "ncclRecv"},
        {(void **)&api.group_start, "ncclGroupStart"}, {(void **)&api.group_end, "ncclGroupEnd"},
        {(void **)&api.error_string, "ncclGetErrorString"}, {(void **)&api.all_reduce, "ncclAllReduce"},
        {(void **)&api.all_gather, "ncclAllGather"}, {(void **)&api.reduce_scatter, "ncclReduceScatter"}};
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].fn = dlsym(lib, syms[i].name);
        if (!*syms[i].fn) {
            dlclose(lib);
            memset(&api, 0, sizeof api);
            return ds_seterr(err, DS_ERR_UNSUPPORTED, "NCCL: %s lacks %s", path && *path ? path : "libnccl.so.2",
                             syms[i].name);
        }
    }
    api.lib = lib;
    return DS_OK;
}

#define NCCL_TRY(call, what)                                                                                   \
    do {                                                                                                       \
        ncclResult_t r_ = (call);                                                                              \
        if (r_ != ncclSuccess) return ds_seterr(err, DS_ERR_BACKEND, "NCCL %s: %s", what, api.error_string(r_)); \
    } while (0)
#define CUDA_TRY(call, what)                                                                                   \
    do {                                                                                                       \
        cudaError_t e_ = (call);                                                                               \
        if (e_ != cudaSuccess) return ds_seterr(err, DS_ERR_BACKEND, "CUDA %s: %s", what, cudaGetErrorString(e_)); \
    } while (0)

typedef struct {
    ds_comm base;
    ncclComm_t comm;
    int64_t *d_counts;   /* [2, size] staging for exchange_counts */
} nccl_comm;

static ds_status nccl_all_to_all_v(ds_comm *c, const void *send, const size_t *send_bytes, const size_t *send_off,
                                   void *recv, const size_t *recv_bytes, const size_t *recv_off, char *err) {
    nccl_comm *nc = (nccl_comm *)c;
    cudaStream_t s = (cudaStream_t)ds_cuda_stream();
    NCCL_TRY(api.group_start(), "group start");
    for (int p = 0; p < c->size; p++) {
        if (send_bytes[p]) NCCL_TRY(api.send((const char *)send + send_off[p], send_bytes[p], ncclUint8, p, nc->comm, s), "send");
        if (recv_bytes[p]) NCCL_TRY(api.recv((char *)recv + recv_off[p], recv_bytes[p], ncclUint8, p, nc->comm, s), "recv");
    }
    NCCL_TRY(api.group_end(), "group end");
    return DS_OK;
}

static ds_status nccl_exchange_counts(ds_comm *c, const int64_t *send, int64_t *recv, char *err) {
    nccl_comm *nc = (nccl_comm *)c;
    size_t n = (size_t)c->size, *b = calloc(4 * n, sizeof(size_t)), *o = b + n, *rb = o + n, *ro = rb + n;
    for (size_t p = 0; p < n; p++) {
        b[p] = rb[p] = sizeof(int64_t);
        o[p] = ro[p] = p * sizeof(int64_t);
    }
    cudaStream_t s = (cudaStream_t)ds_cuda_stream();
    ds_status st = DS_OK;
    if (cudaMemcpyAsync(nc->d_counts, send, n * sizeof(int64_t), cudaMemcpyHostToDevice, s) != cudaSuccess)
        st = ds_seterr(err, DS_ERR_BACKEND, "CUDA: staging the counts failed");
    if (!st) st = nccl_all_to_all_v(c, nc->d_counts, b, o, nc->d_counts + n, rb, ro, err);
    if (!st && (cudaMemcpyAsync(recv, nc->d_counts + n, n * sizeof(int64_t), cudaMemcpyDeviceToHost, s) != cudaSuccess ||
                cudaStreamSynchronize(s) != cudaSuccess))
        st = ds_seterr(err, DS_ERR_BACKEND, "CUDA: reading the counts back failed");
    free(b);
    return st;
}

static ds_status nccl_all_reduce_sum(ds_comm *c, float *buf, size_t n, char *err) {
    nccl_comm *nc = (nccl_comm *)c;
    if (!n) return DS_OK;
    NCCL_TRY(api.all_reduce(buf, buf, n, ncclFloat32, ncclSum, nc->comm, (cudaStream_t)ds_cuda_stream()), "all-reduce");
    return DS_OK;
}

static ds_status nccl_all_gather(ds_comm *c, const float *send, float *recv, size_t n, char *err) {
    nccl_comm *nc = (nccl_comm *)c;
    if (!n) return DS_OK;
    NCCL_TRY(api.all_gather(send, recv, n, ncclFloat32, nc->comm, (cudaStream_t)ds_cuda_stream()), "all-gather");
    return DS_OK;
}

static ds_status nccl_reduce_scatter_sum(ds_comm *c, const float *send, float *recv, size_t n, char *err) {
    nccl_comm *nc = (nccl_comm *)c;
    if (!n) return DS_OK;
    NCCL_TRY(api.reduce_scatter(send, recv, n, ncclFloat32, ncclSum, nc->comm, (cudaStream_t)ds_cuda_stream()),
             "reduce-scatter");
    return DS_OK;
}

static void nccl_destroy(ds_comm *c) {
    nccl_comm *nc = (nccl_comm *)c;
    if (nc->comm) api.destroy(nc->comm);
    if (nc->d_counts) cudaFree(nc->d_counts);
    free(nc);
}

ds_status ds_nccl_unique_id(void *id, char *err) {
    ds_status st = load_api(err);
    if (st) return st;
    ncclUniqueId u;
    NCCL_TRY(api.get_unique_id(&u), "get unique id");
    memcpy(id, &u, sizeof u);
    return DS_OK;
}

ds_status ds_comm_nccl_new(int rank, int n, const void *id, ds_comm **out, char *err) {
    *out = NULL;
    ds_status st = load_api(err);
    if (st) return st;
    setenv("NCCL_NVLS_ENABLE", "0", 0);   /* NVLink multicast off unless asked for (see comm_nccl.h) */
    nccl_comm *nc = calloc(1, sizeof *nc);
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclResult_t r = api.init_rank(&nc->comm, n, u, rank);
    if (r != ncclSuccess) {
        free(nc);
        return ds_seterr(err, DS_ERR_BACKEND, "NCCL init of rank %d of %d: %s", rank, n, api.error_string(r));
    }
    if (cudaMalloc((void **)&nc->d_counts, 2 * (size_t)n * sizeof(int64_t)) != cudaSuccess) {
        nccl_destroy(&nc->base);
        return ds_seterr(err, DS_ERR_NOMEM, "NCCL comm: cannot allocate %d counts on the GPU", 2 * n);
    }
    nc->base.rank = rank;
    nc->base.size = n;
    nc->base.all_to_all_v = nccl_all_to_all_v;
    nc->base.exchange_counts = nccl_exchange_counts;
    nc->base.all_reduce_sum = nccl_all_reduce_sum;
    nc->base.all_gather = nccl_all_gather;
    nc->base.reduce_scatter_sum = nccl_reduce_scatter_sum;
    nc->base.destroy = nccl_destroy;
    *out = &nc->base;
    return DS_OK;
}
#endif
