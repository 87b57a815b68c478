/* The communicator over NCCL (dist/comm.h) for one process per GPU: NCCL is loaded at run time
 * (dlopen of libnccl.so.2, or DSINFER_NCCL_LIB), so dsinfer runs without it until a multi-GPU mode is
 * asked for. Buffers are the CUDA backend's device memory; the work goes on its stream. NVLink
 * multicast stays off unless the environment says otherwise (NCCL_NVLS_ENABLE=0, the GPU machines'
 * rule). */
#ifndef DS_DIST_COMM_NCCL_H
#define DS_DIST_COMM_NCCL_H

#include "dist/comm.h"

#define DS_NCCL_ID_BYTES 128
/* Rank 0 makes the group's id (then sends it to the others: dist/bootstrap.h). */
ds_status ds_nccl_unique_id(void *id, char *err);
/* Joins the group of n ranks as `rank` (every rank calls it together; blocks until all have). */
ds_status ds_comm_nccl_new(int rank, int n, const void *id, ds_comm **out, char *err);

#endif
