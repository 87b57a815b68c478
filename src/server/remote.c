/* Data-parallel replicas in processes of their own (`dsinfer serve --data-parallel-size N
 * --data-parallel-backend mp`, the default on CUDA: one process per GPU, each with its own CUDA context,
 * engine, KV pool and scheduler; the HTTP front end and its load balancing stay in the parent, which
 * never touches a GPU).
 *
 * Each replica process is forked at start-up, before the HTTP threads exist, with CUDA_VISIBLE_DEVICES
 * naming its GPU (the parent's list, or 0 .. N-1). It runs an ordinary single-replica engine
 * (worker.c) and talks to the parent over a socketpair in length-prefixed messages:
 *   parent -> replica: SUBMIT (a request's inputs), CANCEL, ABORT_ALL, CHECK, STOP;
 *   replica -> parent: HELLO (its limits, or the error that stopped it), PROGRESS (new tokens, new text,
 *   and the finish), STATS (after changes, at most every 50 ms), STEP (for the dashboard), CHECK_REPLY.
 * The replica process relays each request's progress as it appears (a relay thread polling every
 * millisecond); the parent's reader thread appends it to the caller's srv_req under its lock, so the
 * HTTP side sees the same object as with in-process replicas. The parent keeps the queue bound per
 * replica (max_queue / N) and the request metrics. A replica process that dies ends its requests with
 * an error (500) and takes no more; the server stays up. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/status.h"
#include "dist/bootstrap.h"
#include "dist/comm.h"
#include "dist/launch.h"
#include "server/remote.h"
#ifdef DS_HAVE_CUDA
#include "dist/comm_nccl.h"
#endif

enum { M_HELLO = 1, M_SUBMIT, M_CANCEL, M_ABORT_ALL, M_CHECK, M_CHECK_REPLY, M_STOP, M_PROGRESS, M_STATS, M_STEP };
#define MAX_MSG ((uint32_t)256 << 20)

/* ---- framing ------------------------------------------------------------------------------------- */
static int write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

static int read_all(int fd, void *p, size_t n) {
    char *c = p;
    while (n) {
        ssize_t k = read(fd, c, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

typedef struct {
    char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *p, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = ds_xrealloc(b->p, b->cap);
    }
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
}

/* one message (header + body) under the writer's lock; -1 when the peer is gone */
static int send_msg(int fd, pthread_mutex_t *mu, uint32_t type, const void *body, size_t n) {
    uint32_t h[2] = {type, (uint32_t)n};
    pthread_mutex_lock(mu);
    int rc = write_all(fd, h, sizeof h) || write_all(fd, body, n) ? -1 : 0;
    pthread_mutex_unlock(mu);
    return rc;
}

/* the next message (malloc'd body, NUL-terminated for convenience), or NULL when the peer is gone */
static char *recv_msg(int fd, uint32_t *type, uint32_t *len) {
    uint32_t h[2];
    if (read_all(fd, h, sizeof h) || h[1] > MAX_MSG) return NULL;
    char *b = ds_xmalloc((size_t)h[1] + 1);
    if (read_all(fd, b, h[1])) {
        free(b);
        return NULL;
    }
    b[h[1]] = 0;
    *type = h[0];
    *len = h[1];
    return b;
}

/* a cursor over a message body; ok drops to 0 on a short body */
typedef struct {
    const char *p;
    size_t left;
    int ok;
} rd;

static void take(rd *r, void *dst, size_t n) {
    if (!r->ok || n > r->left) {
        r->ok = 0;
        memset(dst, 0, n);
        return;
    }
    memcpy(dst, r->p, n);
    r->p += n;
    r->left -= n;
}

/* ---- messages -------------------------------------------------------------------------------------- */
typedef struct {
    int32_t max_ctx, vocab, max_tokens_in_pool, status;
    char err[DS_ERRLEN];
} hello_msg;

typedef struct {
    sched_stats st;
    int32_t pool_ok;
} stats_msg;

typedef struct {
    int32_t status;
    sched_stats st;
    char err[DS_ERRLEN];
} check_msg;

typedef struct {
    double now, dur;
    int32_t n_items, n_tokens, n_sampled, n_decode;
} step_msg;

/* PROGRESS: this head, then n_toks srv_tok, then text_len bytes */
typedef struct {
    uint64_t id;
    int32_t n_toks, text_len, finished, reason, stop_index, n_cached, http_status;
    double t_first;
    char err[DS_ERRLEN];
} progress_head;

static const char *const REASONS[] = {"stop", "length", "abort", "error"};
static int reason_code(const char *r) {
    for (int i = 0; i < 4; i++)
        if (r && !strcmp(r, REASONS[i])) return i;
    return 3;
}

/* SUBMIT: id, the inputs (n_prompt, max_tokens, sp, n_stop, ignore_eos, logprobs, top_logprobs), the
 * prompt ids, then each stop string as a length and its bytes */
typedef struct {
    uint64_t id;
    int32_t n_prompt, max_tokens, n_stop, ignore_eos, logprobs, top_logprobs;
    ds_sampling_params sp;
    double t_arrival;
} submit_head;

/* ======================================================================================================
 * The replica process
 * ==================================================================================================== */
typedef struct live {
    uint64_t id;
    srv_req *r;
    int sent_toks;
    size_t sent_text;
    struct live *next;
} live;

typedef struct {
    int fd;
    pthread_mutex_t wmu;   /* writes to fd */
    pthread_mutex_t mu;    /* the list */
    live *head;
    srv_engine *eng;
    volatile int quit;
} child;

static child *g_child;   /* the replica process's relay, for the step hook */

static void step_to_parent(double now, double dur, int n_items, int n_tokens, int n_sampled, int n_decode) {
    child *c = g_child;
    if (!c) return;
    step_msg s = {now, dur, n_items, n_tokens, n_sampled, n_decode};
    send_msg(c->fd, &c->wmu, M_STEP, &s, sizeof s);
}

static void child_submit(child *c, const char *body, uint32_t len) {
    rd r = {body, len, 1};
    submit_head h;
    take(&r, &h, sizeof h);
    if (!r.ok || h.n_prompt < 0 || h.n_prompt > (1 << 24) || h.n_stop < 0 || h.n_stop > SRV_MAX_STOP) return;
    srv_req *q = srv_req_new();
    q->n_prompt = h.n_prompt;
    q->max_tokens = h.max_tokens;
    q->sp = h.sp;
    q->ignore_eos = h.ignore_eos;
    q->logprobs = h.logprobs;
    q->top_logprobs = h.top_logprobs;
    q->t_arrival = h.t_arrival;
    q->prompt = ds_xmalloc(sizeof(int32_t) * (size_t)(h.n_prompt ? h.n_prompt : 1));
    take(&r, q->prompt, sizeof(int32_t) * (size_t)h.n_prompt);
    for (int i = 0; i < h.n_stop && r.ok; i++) {
        uint32_t n = 0;
        take(&r, &n, sizeof n);
        if (!r.ok || n > r.left) { r.ok = 0; break; }
        q->stop[i] = ds_xmalloc(n + 1);
        take(&r, q->stop[i], n);
        q->stop[i][n] = 0;
        q->n_stop = i + 1;
    }
    live *l = ds_xcalloc(1, sizeof *l);
    l->id = h.id;
    l->r = q;
    int rc = r.ok ? srv_engine_submit(c->eng, q) : -3;
    if (rc) {   /* refused here (full, stopping or garbled): finish it at once */
        pthread_mutex_lock(&q->mu);
        q->finished = 1;
        q->finish_reason = "error";
        q->http_status = rc == -3 ? 500 : 503;
        snprintf(q->err, sizeof q->err, "%s", rc == -3 ? "garbled request from the front end" : "replica queue full");
        pthread_mutex_unlock(&q->mu);
    }
    pthread_mutex_lock(&c->mu);
    l->next = c->head;
    c->head = l;
    pthread_mutex_unlock(&c->mu);
}

static void child_cancel(child *c, uint64_t id) {
    pthread_mutex_lock(&c->mu);
    for (live *l = c->head; l; l = l->next)
        if (l->id == id) atomic_store(&l->r->cancelled, 1);
    pthread_mutex_unlock(&c->mu);
}

/* sends what changed in l's request since the last time; 1 when it finished (l can go) */
static int relay_one(child *c, live *l, buf *b) {
    srv_req *q = l->r;
    progress_head h;
    memset(&h, 0, sizeof h);
    h.id = l->id;
    b->n = 0;
    pthread_mutex_lock(&q->mu);
    int nt = q->n_toks - l->sent_toks;
    size_t nx = q->text_len - l->sent_text;
    int fin = q->finished;
    if (!nt && !nx && !fin) {
        pthread_mutex_unlock(&q->mu);
        return 0;
    }
    h.n_toks = nt;
    h.text_len = (int32_t)nx;
    h.finished = fin;
    h.reason = reason_code(q->finish_reason);
    h.stop_index = q->stop_index;
    h.n_cached = q->n_cached;
    h.http_status = q->http_status;
    h.t_first = q->t_first;
    snprintf(h.err, sizeof h.err, "%s", q->err);
    put(b, &h, sizeof h);
    put(b, q->toks + l->sent_toks, sizeof(srv_tok) * (size_t)nt);
    put(b, q->text + l->sent_text, nx);
    l->sent_toks = q->n_toks;
    l->sent_text = q->text_len;
    pthread_mutex_unlock(&q->mu);
    send_msg(c->fd, &c->wmu, M_PROGRESS, b->p, b->n);
    return fin;
}

static void *relay_main(void *arg) {
    child *c = arg;
    buf b = {0};
    stats_msg last;
    memset(&last, 0xff, sizeof last);
    double t_stats = 0;
    while (!c->quit) {
        pthread_mutex_lock(&c->mu);
        for (live **pl = &c->head; *pl;) {
            live *l = *pl;
            if (relay_one(c, l, &b)) {
                *pl = l->next;
                srv_req_release(l->r);
                free(l);
            } else {
                pl = &l->next;
            }
        }
        pthread_mutex_unlock(&c->mu);
        double now = srv_now();
        if (now - t_stats > 0.05) {
            stats_msg s;
            memset(&s, 0, sizeof s);
            int ok;
            srv_engine_stats(c->eng, &s.st, &ok);
            s.pool_ok = ok;
            if (memcmp(&s, &last, sizeof s)) send_msg(c->fd, &c->wmu, M_STATS, &s, sizeof s);
            last = s;
            t_stats = now;
        }
        usleep(1000);
    }
    free(b.p);
    return NULL;
}

/* The expert-parallel group of the replica processes (srv_remote_ep_group): rank 0's listening socket and
 * its port, set in the parent before the forks; the parent's handles, to kill the rest when one dies. */
static int ep_listen_fd = -1, ep_port = 0, ep_on = 0;
static const char *ep_addr = "127.0.0.1";   /* where the ranks fetch the NCCL id (node 0's address, several nodes) */
static int nodes_listen_fd = -1;            /* the front: where the other nodes' replicas connect (children close it) */
static pthread_mutex_t ep_mu = PTHREAD_MUTEX_INITIALIZER;
static srv_remote *ep_members[64];   /* under ep_mu; NULL once stopped */
static int ep_n_members;

/* A replica process of the group: its communicator, then its engine as that rank. On cuda, NCCL: rank 0 makes
 * the NCCL id and serves it on the inherited socket, the others fetch it; on the CPU backend, ranks over TCP
 * (dist/comm_tcp.c) meeting at the same socket. */
static ds_status child_start_ep(const server_config *cfg, int index, int n, srv_metrics *m, srv_dash *d, srv_engine **eng,
                                char *err) {
    ds_status st;
    ds_comm *cm = NULL;
    int lfd = index == 0 ? ep_listen_fd : -1;
    if (index != 0 && ep_listen_fd >= 0) close(ep_listen_fd);
    ep_listen_fd = -1;
    if (strcmp(cfg->backend, "cuda") != 0) {
        st = ds_comm_tcp_new(index, n, ep_addr, ep_port, lfd, 300, &cm, err);
        if (lfd >= 0) close(lfd);
    } else {
#ifdef DS_HAVE_CUDA
        unsigned char id[DS_NCCL_ID_BYTES];
        if (index == 0) {
            st = ds_nccl_unique_id(id, err);
            if (!st) st = ds_bootstrap_serve_fd(lfd, n, id, sizeof id, 300, err);
        } else {
            st = ds_bootstrap_join(ep_addr, ep_port, index, id, sizeof id, 300, err);
        }
        if (lfd >= 0) close(lfd);
        if (!st) st = ds_comm_nccl_new(index, n, id, &cm, err);
#else
        if (lfd >= 0) close(lfd);
        st = ds_seterr(err, DS_ERR_UNSUPPORTED, "expert parallelism over cuda replica processes needs the CUDA build");
#endif
    }
    if (!st) st = srv_engine_start_ep_rank(cfg, m, d, index, cm, eng, err);   /* it destroys cm when it fails */
    return st;
}

/* the replica process: its engine (one replica, in-process; or its rank of the expert-parallel group), then
 * the parent's commands until STOP or until the parent is gone */
static int child_main(const server_config *cfg, int index, int n, int fd, srv_metrics *m, srv_dash *d) {
    child c = {.fd = fd};
    pthread_mutex_init(&c.wmu, NULL);
    pthread_mutex_init(&c.mu, NULL);
    server_config one = *cfg;
    one.data_parallel_size = 1;
    one.data_parallel_mp = 0;
    one.nnodes = one.node_rank = 0;
    hello_msg h;
    memset(&h, 0, sizeof h);
    ds_status st = ep_on ? child_start_ep(cfg, index, n, m, d, &c.eng, h.err) : srv_engine_start(&one, m, d, &c.eng, h.err);
    h.status = st;
    if (!st) {
        h.max_ctx = srv_engine_max_context(c.eng);
        h.vocab = srv_engine_vocab(c.eng);
        h.max_tokens_in_pool = srv_engine_max_tokens_in_pool(c.eng);
    }
    send_msg(fd, &c.wmu, M_HELLO, &h, sizeof h);
    if (st) return 1;
    g_child = &c;
    srv_step_hook = step_to_parent;
    pthread_t relay;
    if (pthread_create(&relay, NULL, relay_main, &c) != 0) return 1;
    for (;;) {
        uint32_t type, len;
        char *body = recv_msg(fd, &type, &len);
        if (!body) {   /* the parent is gone (or, expert parallel, it dropped us: a rank died) */
            if (ep_on) _exit(1);   /* the engine may wait in a collective for a dead rank: no clean stop */
            break;
        }
        if (type == M_SUBMIT) child_submit(&c, body, len);
        else if (type == M_CANCEL && len == sizeof(uint64_t)) child_cancel(&c, *(uint64_t *)body);
        else if (type == M_ABORT_ALL) srv_engine_abort_all(c.eng);
        else if (type == M_CHECK) {
            check_msg k;
            memset(&k, 0, sizeof k);
            k.status = srv_engine_check(c.eng, &k.st, k.err);
            send_msg(fd, &c.wmu, M_CHECK_REPLY, &k, sizeof k);
        }
        int stop = type == M_STOP;
        free(body);
        if (stop) break;
    }
    srv_engine_abort_all(c.eng);
    usleep(20000);   /* the relay sends the aborts */
    c.quit = 1;
    pthread_join(relay, NULL);
    srv_step_hook = NULL;
    srv_engine_stop(c.eng);
    for (live *l = c.head, *n; l; l = n) {
        n = l->next;
        srv_req_release(l->r);
        free(l);
    }
    return 0;
}

/* ======================================================================================================
 * The parent: one srv_remote per replica process
 * ==================================================================================================== */
typedef struct pend {
    uint64_t id;
    srv_req *r;
    int cancel_sent;
    struct pend *next;
} pend;

struct srv_remote {
    pid_t pid;
    int fd;
    pthread_mutex_t wmu;
    pthread_t reader, watcher;
    int reader_started, watcher_started;
    srv_metrics *m;
    srv_dash *d;
    int max_queue;
    hello_msg hello;
    /* under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pend *live;
    int n_live, dead, stopping, quit;
    uint64_t next_id;
    stats_msg stats;
    int check_wait, check_done;
    check_msg check;
};

static void finish_local(srv_remote *x, srv_req *r, const char *reason, int status, const char *err) {
    pthread_mutex_lock(&r->mu);
    if (!r->finished) {
        r->finished = 1;
        r->finish_reason = reason;
        r->http_status = status;
        snprintf(r->err, sizeof r->err, "%s", err);
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    srv_metrics_request(x->m, reason, r->n_prompt, r->n_toks, -1, -1, srv_now() - r->t_arrival);
    srv_req_release(r);
}

static void apply_progress(srv_remote *x, const char *body, uint32_t len) {
    rd in = {body, len, 1};
    progress_head h;
    take(&in, &h, sizeof h);
    if (!in.ok || h.n_toks < 0 || h.text_len < 0 || (size_t)h.n_toks * sizeof(srv_tok) + (size_t)h.text_len != in.left) return;
    pthread_mutex_lock(&x->mu);
    pend **pp = &x->live;
    while (*pp && (*pp)->id != h.id) pp = &(*pp)->next;
    pend *p = *pp;
    if (p && h.finished) {
        *pp = p->next;
        x->n_live--;
    }
    pthread_mutex_unlock(&x->mu);
    if (!p) return;
    srv_req *r = p->r;
    pthread_mutex_lock(&r->mu);
    if (r->n_toks + h.n_toks > r->cap_toks) {
        r->cap_toks = (r->n_toks + h.n_toks) * 2 + 16;
        r->toks = ds_xrealloc(r->toks, sizeof(srv_tok) * (size_t)r->cap_toks);
    }
    take(&in, r->toks + r->n_toks, sizeof(srv_tok) * (size_t)h.n_toks);
    r->n_toks += h.n_toks;
    if (r->text_len + (size_t)h.text_len + 1 > r->text_cap) {
        r->text_cap = (r->text_len + (size_t)h.text_len + 1) * 2;
        r->text = ds_xrealloc(r->text, r->text_cap);
    }
    take(&in, r->text + r->text_len, (size_t)h.text_len);
    r->text_len += (size_t)h.text_len;
    if (r->text) r->text[r->text_len] = 0;
    int first = !r->t_first && h.t_first > 0;
    if (first) r->t_first = h.t_first;
    r->n_cached = h.n_cached;
    const char *reason = REASONS[h.reason >= 0 && h.reason < 4 ? h.reason : 3];
    if (h.finished) {
        r->finished = 1;
        r->finish_reason = reason;
        r->stop_index = h.stop_index;
        r->http_status = h.http_status;
        snprintf(r->err, sizeof r->err, "%s", h.err);
    }
    int n_gen = r->n_toks;
    double t_first = r->t_first, t_arrival = r->t_arrival;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (first) srv_dash_ttft(x->d, t_first, t_first - t_arrival);
    if (h.finished) {
        double now = srv_now(), ttft = t_first ? t_first - t_arrival : -1;
        double tpot = n_gen > 1 ? (now - t_first) / (n_gen - 1) : -1;
        srv_metrics_request(x->m, reason, r->n_prompt, n_gen, ttft, tpot, now - t_arrival);
        srv_req_release(r);
        free(p);
    }
}

/* the replica process is gone: its requests end with an error, it takes no more */
static void mark_dead(srv_remote *x) {
    pthread_mutex_lock(&x->mu);
    int was_dead = x->dead, stopping = x->quit;
    x->dead = 1;
    pend *l = x->live;
    x->live = NULL;
    x->n_live = 0;
    x->check_done = 1;
    x->check.status = DS_ERR_BACKEND;
    snprintf(x->check.err, sizeof x->check.err, "the replica process %d exited", (int)x->pid);
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
    while (l) {
        pend *n = l->next;
        finish_local(x, l->r, "error", 500, "the replica process serving this request exited");
        free(l);
        l = n;
    }
    if (ep_on && !was_dead && !stopping) {   /* a rank is gone: the group's collectives cannot complete */
        pthread_mutex_lock(&ep_mu);
        for (int i = 0; i < ep_n_members; i++)
            if (ep_members[i] && ep_members[i] != x) {
                if (ep_members[i]->pid > 0) kill(ep_members[i]->pid, SIGKILL);
                else shutdown(ep_members[i]->fd, SHUT_RDWR);   /* on another node: it exits on the EOF */
            }
        pthread_mutex_unlock(&ep_mu);
    }
}

static void *reader_main(void *arg) {
    srv_remote *x = arg;
    for (;;) {
        uint32_t type, len;
        char *b = recv_msg(x->fd, &type, &len);
        if (!b) break;
        if (type == M_PROGRESS) apply_progress(x, b, len);
        else if (type == M_STATS && len == sizeof(stats_msg)) {
            pthread_mutex_lock(&x->mu);
            memcpy(&x->stats, b, sizeof x->stats);
            pthread_mutex_unlock(&x->mu);
        } else if (type == M_STEP && len == sizeof(step_msg)) {
            step_msg s;
            memcpy(&s, b, sizeof s);
            srv_dash_step(x->d, s.now, s.dur, s.n_items, s.n_tokens, s.n_sampled, s.n_decode);
        } else if (type == M_CHECK_REPLY && len == sizeof(check_msg)) {
            pthread_mutex_lock(&x->mu);
            memcpy(&x->check, b, sizeof x->check);
            x->check_done = 1;
            pthread_cond_broadcast(&x->cv);
            pthread_mutex_unlock(&x->mu);
        }
        free(b);
    }
    mark_dead(x);
    return NULL;
}

/* Cancellations (the HTTP side sets srv_req.cancelled: a client went away) go to the replica process;
 * checked every 2 ms. */
static void *watcher_main(void *arg) {
    srv_remote *x = arg;
    for (;;) {
        uint64_t ids[64];
        int n = 0;
        pthread_mutex_lock(&x->mu);
        int quit = x->quit || x->dead;
        for (pend *p = x->live; p && n < 64; p = p->next)
            if (!p->cancel_sent && atomic_load(&p->r->cancelled)) {
                p->cancel_sent = 1;
                ids[n++] = p->id;
            }
        pthread_mutex_unlock(&x->mu);
        for (int i = 0; i < n; i++) send_msg(x->fd, &x->wmu, M_CANCEL, &ids[i], sizeof ids[i]);
        if (quit) break;
        usleep(2000);
    }
    return NULL;
}

static srv_remote *remote_new(const server_config *cfg, pid_t pid, int fd, int n, srv_metrics *m, srv_dash *d);

ds_status srv_remote_spawn(const server_config *cfg, int index, int n, srv_metrics *m, srv_dash *d,
                           srv_remote *const *earlier, srv_remote **out, char *err) {
    *out = NULL;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
        return ds_seterr(err, DS_ERR_BACKEND, "replica %d: socketpair: %s", index, strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return ds_seterr(err, DS_ERR_BACKEND, "replica %d: fork: %s", index, strerror(errno));
    }
    if (pid == 0) {   /* the replica process: only its own socket stays open */
        close(sv[0]);
        for (int i = 0; i < index; i++)
            if (earlier[i]) close(earlier[i]->fd);
        if (nodes_listen_fd >= 0) close(nodes_listen_fd);
        int local = cfg->nnodes > 1 ? index - cfg->node_rank * (n / cfg->nnodes) : index;
        if (!strcmp(cfg->backend, "cuda")) ds_dp_pick_gpu(local);
        _exit(child_main(cfg, index, n, sv[1], m, d));
    }
    close(sv[1]);
    *out = remote_new(cfg, pid, sv[0], n, m, d);
    return DS_OK;
}

/* The parent's handle on a replica reached by fd: a child process (pid), or one on another node (pid 0). */
static srv_remote *remote_new(const server_config *cfg, pid_t pid, int fd, int n, srv_metrics *m, srv_dash *d) {
    srv_remote *x = ds_xcalloc(1, sizeof *x);
    x->pid = pid;
    x->fd = fd;
    x->m = m;
    x->d = d;
    x->max_queue = cfg->max_queue / n > 0 ? cfg->max_queue / n : 1;
    x->next_id = 1;
    x->stats.pool_ok = -1;   /* unchecked until its first report */
    pthread_mutex_init(&x->wmu, NULL);
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->cv, NULL);
    pthread_mutex_lock(&ep_mu);
    if (ep_on && ep_n_members < 64) ep_members[ep_n_members++] = x;
    pthread_mutex_unlock(&ep_mu);
    return x;
}

ds_status srv_remote_ep_group(const server_config *cfg, char *err) {
    int nodes = cfg->nnodes > 1;
    ep_addr = nodes ? cfg->master_addr : "127.0.0.1";
    ep_port = nodes ? cfg->master_port + 1 : 0;
    ds_status st = nodes && cfg->node_rank > 0 ? DS_OK : ds_bootstrap_listen(ep_addr, &ep_port, &ep_listen_fd, err);
    if (!st) ep_on = 1;
    return st;
}

ds_status srv_remote_nodes_listen(const server_config *cfg, char *err) {
    int port = cfg->master_port;
    return ds_bootstrap_listen(cfg->master_addr, &port, &nodes_listen_fd, err);
}

ds_status srv_remote_adopt_all(const server_config *cfg, int n, srv_metrics *m, srv_dash *d, srv_remote **rem, char *err) {
    int local = n / cfg->nnodes, want = n - local;
    ds_status st = DS_OK;
    for (int got = 0; got < want && !st;) {
        int fd = -1, idx = -1;
        st = ds_bootstrap_accept(nodes_listen_fd, 300, &fd, &idx, err);
        if (st) {
            ds_seterr(err, DS_ERR_IO, "%d of the other nodes' %d replicas connected to %s:%d within 300 s", got, want,
                      cfg->master_addr, cfg->master_port);
            break;
        }
        if (idx < local || idx >= n || rem[idx]) {   /* not a replica of another node, or one already here */
            fprintf(stderr, "dsinfer serve: a connection to %s:%d claimed replica %d: dropped\n", cfg->master_addr,
                    cfg->master_port, idx);
            close(fd);
            continue;
        }
        rem[idx] = remote_new(cfg, 0, fd, n, m, d);
        got++;
    }
    close(nodes_listen_fd);
    nodes_listen_fd = -1;
    return st;
}

int srv_remote_node_main(const server_config *cfg, srv_metrics *m, srv_dash *d) {
    int n = cfg->data_parallel_size, local = n / cfg->nnodes, base = cfg->node_rank * local;
    char err[DS_ERRLEN];
    if (cfg->enable_expert_parallel && srv_remote_ep_group(cfg, err)) {
        fprintf(stderr, "dsinfer serve: node %d: %s\n", cfg->node_rank, err);
        return 1;
    }
    sigset_t sigs, old;   /* SIGINT / SIGTERM taken below (and passed on), default in the replicas */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigprocmask(SIG_BLOCK, &sigs, &old);
    fflush(NULL);
    pid_t pid[64];
    int started = 0;
    for (int l = 0; l < local; l++, started++) {
        pid[l] = fork();
        if (pid[l] < 0) break;
        if (pid[l] == 0) {
            sigprocmask(SIG_SETMASK, &old, NULL);
            if (!strcmp(cfg->backend, "cuda")) ds_dp_pick_gpu(l);
            int fd = -1;
            if (ds_bootstrap_connect(cfg->master_addr, cfg->master_port, base + l, 300, &fd, err)) {
                fprintf(stderr, "dsinfer serve: node %d replica %d: %s\n", cfg->node_rank, base + l, err);
                _exit(1);
            }
            _exit(child_main(cfg, base + l, n, fd, m, d));
        }
    }
    fprintf(stderr, "dsinfer serve: node %d of %d: replicas %d-%d for %s:%d\n", cfg->node_rank, cfg->nnodes, base,
            base + started - 1, cfg->master_addr, cfg->master_port);
    int rc = started == local ? 0 : 1, left = started;
    while (left > 0) {   /* until every replica has exited; a signal is passed on to them */
        int status;
        pid_t w = waitpid(-1, &status, WNOHANG);
        if (w > 0) {
            left--;
            if (!WIFEXITED(status) || WEXITSTATUS(status)) rc = 1;
            continue;
        }
        struct timespec ts = {0, 100 * 1000 * 1000};
        int sig = sigtimedwait(&sigs, NULL, &ts);
        if (sig > 0)
            for (int l = 0; l < started; l++) kill(pid[l], SIGTERM);
    }
    return rc;
}

void srv_remote_ep_group_done(void) {
    if (ep_listen_fd >= 0) close(ep_listen_fd);
    ep_listen_fd = -1;
}

ds_status srv_remote_ready(srv_remote *x, int index, char *err) {
    uint32_t type, len;
    char *b = recv_msg(x->fd, &type, &len);
    ds_status st = DS_OK;
    if (!b || type != M_HELLO || len != sizeof(hello_msg))
        st = ds_seterr(err, DS_ERR_BACKEND, "replica %d: its process exited before it was ready", index);
    else {
        memcpy(&x->hello, b, sizeof x->hello);
        if (x->hello.status) st = ds_seterr(err, (ds_status)x->hello.status, "replica %d: %s", index, x->hello.err);
    }
    free(b);
    if (!st && pthread_create(&x->reader, NULL, reader_main, x) != 0)
        st = ds_seterr(err, DS_ERR_NOMEM, "replica %d: cannot start its reader thread", index);
    if (!st) x->reader_started = 1;
    if (!st && pthread_create(&x->watcher, NULL, watcher_main, x) != 0)
        st = ds_seterr(err, DS_ERR_NOMEM, "replica %d: cannot start its watcher thread", index);
    if (!st) x->watcher_started = 1;
    return st;
}

int srv_remote_load(srv_remote *x) {
    pthread_mutex_lock(&x->mu);
    int l = x->dead ? 1 << 30 : x->n_live;
    pthread_mutex_unlock(&x->mu);
    return l;
}

int srv_remote_submit(srv_remote *x, srv_req *r) {
    pthread_mutex_lock(&x->mu);
    int rc = x->dead || x->stopping ? -2 : x->n_live >= x->max_queue ? -1 : 0;
    uint64_t id = x->next_id++;
    if (!rc) {
        pend *p = ds_xcalloc(1, sizeof *p);
        p->id = id;
        p->r = r;
        p->next = x->live;
        x->live = p;
        x->n_live++;
        pthread_mutex_lock(&r->mu);
        r->refs++;
        pthread_mutex_unlock(&r->mu);
    }
    pthread_mutex_unlock(&x->mu);
    if (rc) return rc;
    submit_head h = {.id = id, .n_prompt = r->n_prompt, .max_tokens = r->max_tokens, .n_stop = r->n_stop,
                     .ignore_eos = r->ignore_eos, .logprobs = r->logprobs, .top_logprobs = r->top_logprobs, .sp = r->sp,
                     .t_arrival = r->t_arrival};
    buf b = {0};
    put(&b, &h, sizeof h);
    put(&b, r->prompt, sizeof(int32_t) * (size_t)r->n_prompt);
    for (int i = 0; i < r->n_stop; i++) {
        uint32_t n = (uint32_t)strlen(r->stop[i]);
        put(&b, &n, sizeof n);
        put(&b, r->stop[i], n);
    }
    if (send_msg(x->fd, &x->wmu, M_SUBMIT, b.p, b.n)) shutdown(x->fd, SHUT_RDWR);   /* the reader ends it */
    free(b.p);
    return 0;
}


void srv_remote_stats(srv_remote *x, sched_stats *st, int *pool_ok) {
    pthread_mutex_lock(&x->mu);
    *st = x->stats.st;
    *pool_ok = x->dead ? 0 : x->stats.pool_ok;
    pthread_mutex_unlock(&x->mu);
}

ds_status srv_remote_check(srv_remote *x, sched_stats *st, char *err) {
    pthread_mutex_lock(&x->mu);
    x->check_done = x->dead;
    pthread_mutex_unlock(&x->mu);
    if (!x->dead) send_msg(x->fd, &x->wmu, M_CHECK, NULL, 0);
    pthread_mutex_lock(&x->mu);
    while (!x->check_done) pthread_cond_wait(&x->cv, &x->mu);
    ds_status s = x->dead ? DS_ERR_BACKEND : (ds_status)x->check.status;
    *st = x->check.st;
    snprintf(err, DS_ERRLEN, "%s", x->dead ? "a replica process exited" : x->check.err);
    pthread_mutex_unlock(&x->mu);
    return s;
}

int srv_remote_max_context(const srv_remote *x) { return x->hello.max_ctx; }
int srv_remote_vocab(const srv_remote *x) { return x->hello.vocab; }
int srv_remote_max_tokens_in_pool(const srv_remote *x) { return x->hello.max_tokens_in_pool; }

void srv_remote_abort_all(srv_remote *x) {
    pthread_mutex_lock(&x->mu);
    x->stopping = 1;
    pthread_mutex_unlock(&x->mu);
    send_msg(x->fd, &x->wmu, M_ABORT_ALL, NULL, 0);
}

void srv_remote_stop(srv_remote *x) {
    if (!x) return;
    pthread_mutex_lock(&x->mu);
    x->quit = 1;
    pthread_mutex_unlock(&x->mu);
    pthread_mutex_lock(&ep_mu);
    for (int i = 0; i < ep_n_members; i++)
        if (ep_members[i] == x) ep_members[i] = NULL;
    pthread_mutex_unlock(&ep_mu);
    if (x->watcher_started) pthread_join(x->watcher, NULL);
    send_msg(x->fd, &x->wmu, M_STOP, NULL, 0);
    if (!x->reader_started) shutdown(x->fd, SHUT_RDWR);   /* not readied: EOF tells it to go */
    if (x->pid == 0) {   /* on another node: its reader sees EOF when it exits; 10 s, then the socket is cut */
        int gone = 0;
        for (int i = 0; i < 1000 && !gone; i++) {
            pthread_mutex_lock(&x->mu);
            gone = x->dead || !x->reader_started;
            pthread_mutex_unlock(&x->mu);
            if (!gone) usleep(10000);
        }
        if (!gone) shutdown(x->fd, SHUT_RDWR);
    }
    int status;
    pid_t w = x->pid == 0 ? 1 : 0;   /* pid 0: no process of ours to wait for */
    for (int i = 0; i < 1000 && w == 0; i++) {   /* 10 s to stop, then SIGKILL: a stuck replica must not hang us */
        w = waitpid(x->pid, &status, WNOHANG);
        if (w == 0) usleep(10000);
    }
    if (w == 0) {
        fprintf(stderr, "dsinfer serve: replica process %d did not stop in 10 s; killed\n", (int)x->pid);
        kill(x->pid, SIGKILL);
        while (waitpid(x->pid, &status, 0) < 0 && errno == EINTR) {}
    }
    if (x->reader_started) pthread_join(x->reader, NULL);   /* the process is gone: its reader saw EOF */
    close(x->fd);
    if (!x->reader_started) mark_dead(x);
    pthread_cond_destroy(&x->cv);
    pthread_mutex_destroy(&x->mu);
    pthread_mutex_destroy(&x->wmu);
    free(x);
}
