/* One process per GPU (dist/launch.c), the process side on the CPU: every local rank runs, sees its GPU
 * through CUDA_VISIBLE_DEVICES (the l-th entry of the parent's list, or l), a rank that fails makes the
 * launcher stop the others (they would wait on it forever in a collective) and name it, a rank killed by
 * a signal is reported as such, and bad specs are refused before anything starts. No communicator
 * (spec.no_comm): the NCCL rendezvous is test_bootstrap's and test_nccl_ep's. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/status.h"
#include "dist/launch.h"
#include "testutil.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* arg: the expected CUDA_VISIBLE_DEVICES per rank ("a,b,c"), or NULL for the rank number */
static int rank_sees_its_gpu(int rank, ds_comm *cm, void *arg) {
    if (cm) return 9;
    const char *want_list = arg, *got = getenv("CUDA_VISIBLE_DEVICES");
    char want[32];
    if (want_list) {
        const char *p = want_list;
        for (int i = 0; i < rank; i++) p = strchr(p, ',') + 1;
        snprintf(want, sizeof want, "%.*s", (int)strcspn(p, ","), p);
    } else {
        snprintf(want, sizeof want, "%d", rank);
    }
    return got && !strcmp(got, want) ? 0 : 1;
}

static int rank1_fails(int rank, ds_comm *cm, void *arg) {
    (void)cm, (void)arg;
    if (rank == 1) return 3;
    sleep(60);   /* the others wait "in a collective" until the launcher stops them */
    return 0;
}

static int rank2_crashes(int rank, ds_comm *cm, void *arg) {
    (void)cm, (void)arg;
    if (rank == 2) raise(SIGKILL);   /* not SIGSEGV: ASan would catch it and exit 1 */
    sleep(60);
    return 0;
}

int main(void) {
    char err[DS_ERRLEN];
    ds_dp_spec s = {.size = 3, .nnodes = 1, .no_comm = 1};
    unsetenv("CUDA_VISIBLE_DEVICES");
    CHECKF(ds_dp_launch(&s, rank_sees_its_gpu, NULL, err) == 0, "every rank its GPU number: %s", err);
    setenv("CUDA_VISIBLE_DEVICES", "5,7,9", 1);
    CHECKF(ds_dp_launch(&s, rank_sees_its_gpu, "5,7,9", err) == 0, "the parent's list: %s", err);
    unsetenv("CUDA_VISIBLE_DEVICES");

    double t0 = now_s();
    err[0] = 0;
    CHECK(ds_dp_launch(&s, rank1_fails, NULL, err) == 1);
    double dt = now_s() - t0;
    printf("  a failing rank: \"%s\" after %.2f s\n", err, dt);
    CHECK(strstr(err, "rank 1 exited with status 3") != NULL);
    CHECKF(dt < 20, "the other ranks were not stopped (%.1f s)", dt);

    t0 = now_s();
    err[0] = 0;
    CHECK(ds_dp_launch(&s, rank2_crashes, NULL, err) == 1);
    printf("  a crashing rank: \"%s\" after %.2f s\n", err, now_s() - t0);
    CHECK(strstr(err, "rank 2 died of signal 9") != NULL);

    /* node 1 of 2 runs ranks 2 and 3 (GPUs 0 and 1 of its node) */
    ds_dp_spec two = {.size = 4, .nnodes = 2, .node_rank = 1, .addr = "10.0.0.1", .port = 29500, .no_comm = 1};
    setenv("CUDA_VISIBLE_DEVICES", "9,9,2,3", 1);   /* rank r expects entry r: ranks 2, 3 are local 0, 1 */
    CHECKF(ds_dp_launch(&two, rank_sees_its_gpu, "x,y,9,9", err) == 0, "second node: %s", err);
    unsetenv("CUDA_VISIBLE_DEVICES");

    const ds_dp_spec bad[] = {{.size = 0, .nnodes = 1}, {.size = 65, .nnodes = 1}, {.size = 4, .nnodes = 3},
                              {.size = 4, .nnodes = 2, .node_rank = 2, .addr = "h", .port = 1},
                              {.size = 4, .nnodes = 2}, {.size = 2, .nnodes = 1, .port = 70000}};
    const char *why[] = {"data parallel size 0", "data parallel size 65", "not a multiple of --nnodes 3",
                         "--node-rank 2", "need --master-addr", "--master-port 70000"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        CHECKF(ds_dp_spec_check(&bad[i], err) == DS_ERR_ARG && strstr(err, why[i]), "bad spec %zu: \"%s\"", i, err);
    }
    return test_result("test_launch");
}
