/* Rendezvous of the ranks of a group over TCP (issue 10, several processes or nodes): rank 0 listens at
 * addr:port and sends a blob (NCCL's unique id) to every other rank; the others connect (retrying until
 * timeout_s) and receive it. Plain POSIX sockets; no GPU code, tested on the CPU (test_bootstrap). */
#ifndef DS_DIST_BOOTSTRAP_H
#define DS_DIST_BOOTSTRAP_H

#include <stddef.h>

#include "dsinfer.h"

/* Rank 0: *port_inout 0 picks a free port and returns it (tests; real runs give --master-port). */
ds_status ds_bootstrap_serve(const char *addr, int *port_inout, int n_ranks, const void *blob, size_t len,
                             double timeout_s, char *err);
/* Ranks 1..n-1: blob receives len bytes from rank 0; the rank number is sent for rank 0's log. */
ds_status ds_bootstrap_join(const char *addr, int port, int rank, void *blob, size_t len, double timeout_s, char *err);

/* Rank 0 in two halves, for a caller that must learn the port before the others connect (tests):
 * listen, then serve on the returned socket. */
ds_status ds_bootstrap_listen(const char *addr, int *port_inout, int *fd_out, char *err);
ds_status ds_bootstrap_serve_fd(int fd, int n_ranks, const void *blob, size_t len, double timeout_s, char *err);

/* A plain channel (the server's replicas on other nodes, server/remote.c): connect to addr:port (retrying
 * until timeout_s), send the rank (4 bytes), and keep the socket (*fd_out); the listener takes one with
 * ds_bootstrap_accept (the rank it sent in *rank_out; bounded by timeout_s). */
ds_status ds_bootstrap_connect(const char *addr, int port, int rank, double timeout_s, int *fd_out, char *err);
ds_status ds_bootstrap_accept(int listen_fd, double timeout_s, int *fd_out, int *rank_out, char *err);

#endif
