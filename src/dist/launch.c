/* One process per GPU: see launch.h. */
#include "dist/launch.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/status.h"
#include "dist/bootstrap.h"
#include "dist/comm_nccl.h"

ds_status ds_dp_spec_check(const ds_dp_spec *s, char *err) {
    if (s->size < 1 || s->size > 64) return ds_seterr(err, DS_ERR_ARG, "data parallel size %d (1 to 64)", s->size);
    if (s->nnodes < 1 || s->nnodes > s->size)
        return ds_seterr(err, DS_ERR_ARG, "--nnodes %d: between 1 and the data parallel size %d", s->nnodes, s->size);
    if (s->size % s->nnodes)
        return ds_seterr(err, DS_ERR_ARG, "data parallel size %d is not a multiple of --nnodes %d", s->size, s->nnodes);
    if (s->node_rank < 0 || s->node_rank >= s->nnodes)
        return ds_seterr(err, DS_ERR_ARG, "--node-rank %d: 0 to %d", s->node_rank, s->nnodes - 1);
    if (s->port < 0 || s->port > 65535) return ds_seterr(err, DS_ERR_ARG, "--master-port %d (0 to 65535)", s->port);
    if (s->nnodes > 1 && (!s->port || !s->addr))
        return ds_seterr(err, DS_ERR_ARG, "several nodes need --master-addr and --master-port (rank 0's node)");
    return DS_OK;
}

void ds_dp_pick_gpu(int l) {
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    char buf[64];
    snprintf(buf, sizeof buf, "%d", l);
    if (vis && *vis) {
        const char *p = vis;
        for (int i = 0; i < l && p; i++) {
            p = strchr(p, ',');
            if (p) p++;
        }
        if (p && *p) {
            size_t n = strcspn(p, ",");
            if (n >= sizeof buf) n = sizeof buf - 1;
            memcpy(buf, p, n);
            buf[n] = 0;
        }
    }
    setenv("CUDA_VISIBLE_DEVICES", buf, 1);
}

/* A child: the rendezvous, the communicator, fn. listen_fd >= 0: rank 0 serves on it (one node, port 0). */
static int child_main(const ds_dp_spec *s, int rank, int local, int listen_fd, int port, ds_dp_rank_fn fn, void *arg) {
    char err[DS_ERRLEN];
    unsigned char id[DS_NCCL_ID_BYTES];
    const char *addr = s->addr ? s->addr : "127.0.0.1";
    double to = s->timeout_s > 0 ? s->timeout_s : 300;
    ds_dp_pick_gpu(local);
    if (s->no_comm) {
        if (listen_fd >= 0) close(listen_fd);
        return fn(rank, NULL, arg);
    }
    ds_status st;
    if (rank == 0) {
        st = ds_nccl_unique_id(id, err);
        if (!st && listen_fd >= 0) st = ds_bootstrap_serve_fd(listen_fd, s->size, id, sizeof id, to, err);
        else if (!st) st = ds_bootstrap_serve(addr, &port, s->size, id, sizeof id, to, err);
    } else {
        if (listen_fd >= 0) close(listen_fd);
        st = ds_bootstrap_join(addr, port, rank, id, sizeof id, to, err);
    }
    ds_comm *cm = NULL;
    if (!st) st = ds_comm_nccl_new(rank, s->size, id, &cm, err);
    if (st) {
        fprintf(stderr, "rank %d: %s\n", rank, err);
        return 1;
    }
    int rc = fn(rank, cm, arg);
    cm->destroy(cm);
    return rc;
}

int ds_dp_launch(const ds_dp_spec *s, ds_dp_rank_fn fn, void *arg, char *err) {
    if (ds_dp_spec_check(s, err)) return 1;
    int local_n = s->size / s->nnodes, base = s->node_rank * local_n, port = s->port, fd = -1;
    if (s->nnodes == 1 && !port && !s->no_comm &&
        ds_bootstrap_listen(s->addr ? s->addr : "127.0.0.1", &port, &fd, err))   /* a free port, held open */
        return 1;
    fflush(stdout);
    fflush(stderr);
    pid_t *pid = ds_xcalloc((size_t)local_n, sizeof(pid_t));
    for (int l = 0; l < local_n; l++) {
        pid[l] = fork();
        if (pid[l] < 0) {
            ds_seterr(err, DS_ERR_IO, "fork failed for rank %d", base + l);
            for (int k = 0; k < l; k++) kill(pid[k], SIGTERM);
            for (int k = 0; k < l; k++) waitpid(pid[k], NULL, 0);
            free(pid);
            if (fd >= 0) close(fd);
            return 1;
        }
        if (pid[l] == 0) _exit(child_main(s, base + l, l, base + l == 0 ? fd : -1, port, fn, arg));
    }
    if (fd >= 0) close(fd);
    int failed = -1, status = 0;
    for (int left = local_n; left > 0; left--) {
        int stt = 0;
        pid_t p = wait(&stt);
        if (p < 0) break;
        int ok = WIFEXITED(stt) && WEXITSTATUS(stt) == 0;
        if (!ok && failed < 0) {
            for (int l = 0; l < local_n; l++) {
                if (pid[l] == p) failed = base + l, status = stt;
                else kill(pid[l], SIGTERM);   /* a rank left the group: the rest would wait on it forever */
            }
        }
    }
    free(pid);
    if (failed >= 0) {
        if (WIFSIGNALED(status)) ds_seterr(err, DS_ERR_BACKEND, "rank %d died of signal %d", failed, WTERMSIG(status));
        else ds_seterr(err, DS_ERR_BACKEND, "rank %d exited with status %d", failed, WEXITSTATUS(status));
        return 1;
    }
    return 0;
}
