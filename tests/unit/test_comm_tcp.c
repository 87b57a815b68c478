/* Ranks over TCP (dist/comm_tcp.c), 3 ranks as threads of this process with real sockets: every collective
 * against its definition (dist/comm.h) — all_to_all_v with uneven sizes, a zero and 6 MB to one peer (more
 * than the socket buffers: the exchange must not deadlock), exchange_counts, all_gather, all_reduce_sum (the
 * same bits on every rank, the rank-order sum), reduce_scatter_sum — then a group whose rank 0 waits for a
 * rank that never comes fails within its timeout. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist/bootstrap.h"
#include "dist/comm.h"
#include "testutil.h"

#define R 3
#define BIG (6u << 20)

typedef struct {
    int rank, port, lfd;
    ds_status st;
    char err[DS_ERRLEN];
    float sums[R][5];   /* all_reduce result, to compare across ranks */
} job;

static unsigned char val(int from, int to, size_t i) { return (unsigned char)(from * 31 + to * 7 + i * 13); }

static void *rank_main(void *arg) {
    job *j = arg;
    ds_comm *c = NULL;
    j->st = ds_comm_tcp_new(j->rank, R, "127.0.0.1", j->port, j->rank == 0 ? j->lfd : -1, 20, &c, j->err);
    if (j->st) return NULL;
    int me = j->rank;
    /* all_to_all_v: rank s sends (s + 1) * 1000 + d bytes to d, except 0 bytes 1 -> 2 and BIG 0 -> 1 */
    size_t sb[R], so[R], rb[R], ro[R], stot = 0, rtot = 0;
    for (int d = 0; d < R; d++) {
        sb[d] = me == 1 && d == 2 ? 0 : me == 0 && d == 1 ? BIG : (size_t)(me + 1) * 1000 + (size_t)d;
        so[d] = stot;
        stot += sb[d];
    }
    for (int s = 0; s < R; s++) {
        rb[s] = s == 1 && me == 2 ? 0 : s == 0 && me == 1 ? BIG : (size_t)(s + 1) * 1000 + (size_t)me;
        ro[s] = rtot;
        rtot += rb[s];
    }
    unsigned char *snd = malloc(stot + 1), *rcv = malloc(rtot + 1);
    for (int d = 0; d < R; d++)
        for (size_t i = 0; i < sb[d]; i++) snd[so[d] + i] = val(me, d, i);
    CHECKF(!(j->st = c->all_to_all_v(c, snd, sb, so, rcv, rb, ro, j->err)), "rank %d all_to_all_v: %s", me, j->err);
    for (int s = 0; s < R && !j->st; s++)
        for (size_t i = 0; i < rb[s]; i++)
            if (rcv[ro[s] + i] != val(s, me, i)) { CHECKF(0, "rank %d: byte %zu from rank %d", me, i, s); break; }
    free(snd);
    free(rcv);
    /* exchange_counts: recv[s] = what s gave for me */
    int64_t cs[R], cr[R];
    for (int d = 0; d < R; d++) cs[d] = 100 * me + d;
    CHECKF(!c->exchange_counts(c, cs, cr, j->err), "%s", j->err);
    for (int s = 0; s < R; s++) CHECKF(cr[s] == 100 * s + me, "rank %d counts[%d] = %lld", me, s, (long long)cr[s]);
    /* all_gather of 5 floats */
    float g[5], ga[R * 5];
    for (int i = 0; i < 5; i++) g[i] = (float)(me * 10 + i);
    CHECKF(!c->all_gather(c, g, ga, 5, j->err), "%s", j->err);
    for (int s = 0; s < R; s++)
        for (int i = 0; i < 5; i++) CHECKF(ga[s * 5 + i] == (float)(s * 10 + i), "rank %d gather[%d][%d]", me, s, i);
    /* all_reduce_sum: values whose sum depends on the order; every rank the rank-order sum */
    float b[5];
    for (int i = 0; i < 5; i++) b[i] = me == 0 ? 1e8f : me == 1 ? -1e8f : 0.5f + (float)i;
    CHECKF(!c->all_reduce_sum(c, b, 5, j->err), "%s", j->err);
    for (int i = 0; i < 5; i++) {
        float want = (1e8f + -1e8f) + (0.5f + (float)i);
        CHECKF(b[i] == want, "rank %d reduce[%d] = %g, want %g", me, i, (double)b[i], (double)want);
        j->sums[me][i] = b[i];
    }
    /* reduce_scatter_sum: send[d * 4 + i] = (me + 1) * (d + 1) + i; this rank's part sums over ranks */
    float rs[R * 4], rr[4];
    for (int d = 0; d < R; d++)
        for (int i = 0; i < 4; i++) rs[d * 4 + i] = (float)((me + 1) * (d + 1) + i);
    CHECKF(!c->reduce_scatter_sum(c, rs, rr, 4, j->err), "%s", j->err);
    for (int i = 0; i < 4; i++) {
        float want = 0;
        for (int s = 0; s < R; s++) want += (float)((s + 1) * (me + 1) + i);
        CHECKF(rr[i] == want, "rank %d reduce_scatter[%d] = %g, want %g", me, i, (double)rr[i], (double)want);
    }
    c->destroy(c);
    return NULL;
}

int main(void) {
    char err[DS_ERRLEN];
    int port = 0, lfd = -1;
    CHECKF(ds_bootstrap_listen("127.0.0.1", &port, &lfd, err) == DS_OK, "%s", err);
    job j[R];
    pthread_t th[R];
    for (int r = 0; r < R; r++) {
        memset(&j[r], 0, sizeof j[r]);
        j[r].rank = r;
        j[r].port = port;
        j[r].lfd = lfd;
        pthread_create(&th[r], NULL, rank_main, &j[r]);
    }
    for (int r = 0; r < R; r++) {
        pthread_join(th[r], NULL);
        CHECKF(j[r].st == DS_OK, "rank %d: %s", r, j[r].err);
    }
    close(lfd);
    for (int r = 1; r < R; r++) CHECK(!memcmp(j[r].sums[r], j[0].sums[0], sizeof j[0].sums[0]));
    /* rank 0 of 2 alone: an error within its timeout */
    ds_comm *c = NULL;
    ds_status st = ds_comm_tcp_new(0, 2, "127.0.0.1", 0, -1, 0.3, &c, err);
    CHECKF(st == DS_ERR_IO && c == NULL, "a lone rank 0: %d %s", st, err);
    printf("comm_tcp: 3 ranks, every collective ok (6 MB one way); a missing rank: \"%s\"\n", err);
    return test_result("test_comm_tcp");
}
