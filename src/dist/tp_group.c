/* Tensor or pipeline parallelism behind one engine handle (opts.tensor_parallel_size or
 * pipeline_parallel_size = N, CPU backend): the engine the caller holds is rank 0; it opens N - 1 follower
 * engines (same model and options), each keeping its share of the heads and widths (dist/tp.c) or of
 * the layers (forward.c pp_step), with a thread each. A forward on the leader hands the same
 * batch to the followers (their own shadow of every sequence) and runs its share; the all-reduces inside
 * meet. Sequence life (new, free, truncate) is mirrored on the shadows by the leader's calls (between
 * steps, when the followers are idle); prefix sharing and fork are refused (pages differ per rank).
 * Every rank computes the same logits; the leader's are returned. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "dist/tp.h"
#include "model/engine.h"

struct ds_tp_group {
    int n;                        /* ranks; followers are 1 .. n-1 */
    ds_comm_local_group *lg;
    ds_comm **comm;               /* [n] */
    ds_engine **eng;              /* [n]; eng[0] is the leader */
    pthread_t *th;                /* [n] (0 unused) */
    pthread_mutex_t mu;
    pthread_cond_t cv, done_cv;
    unsigned long job;            /* bumped per forward */
    int quit, pending;
    /* the current job */
    ds_batch_item **items;        /* [n][n_items] per follower */
    int n_items;
    float **logits;               /* [n] scratch per follower */
    size_t logits_cap;
    ds_status *st;                /* [n] */
    char (*err)[DS_ERRLEN];
};

static void *follower_main(void *arg) {
    ds_engine *e = arg;
    ds_tp_group *g = e->tp_follower_of;
    int r = e->tp_rank;
    unsigned long seen = 0;
    for (;;) {
        pthread_mutex_lock(&g->mu);
        while (!g->quit && g->job == seen) pthread_cond_wait(&g->cv, &g->mu);
        if (g->quit) {
            pthread_mutex_unlock(&g->mu);
            return NULL;
        }
        seen = g->job;
        pthread_mutex_unlock(&g->mu);
        g->st[r] = ds_engine_forward_local(e, g->items[r], g->n_items, g->logits[r], g->err[r]);
        pthread_mutex_lock(&g->mu);
        if (--g->pending == 0) pthread_cond_broadcast(&g->done_cv);
        pthread_mutex_unlock(&g->mu);
    }
}

void ds_tp_group_free(ds_tp_group *g) {
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    g->quit = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    for (int r = 1; r < g->n; r++) {
        if (g->th[r]) pthread_join(g->th[r], NULL);
        ds_engine_free(g->eng[r]);
    }
    for (int r = 0; r < g->n; r++) {
        if (g->comm[r]) g->comm[r]->destroy(g->comm[r]);
        free(g->items[r]);
        free(g->logits[r]);
    }
    ds_comm_local_group_free(g->lg);
    pthread_cond_destroy(&g->cv);
    pthread_cond_destroy(&g->done_cv);
    pthread_mutex_destroy(&g->mu);
    free(g->comm); free(g->eng); free(g->th); free(g->items); free(g->logits); free(g->st); free(g->err);
    free(g);
}

ds_status ds_tp_group_start(ds_engine *leader, const char *dir, const ds_engine_opts *o, int n, char *err) {
    if (n < 2 || n > 64) return ds_seterr(err, DS_ERR_ARG, "tensor parallel size %d (2 to 64)", n);
    if (strcmp(leader->be->name, "cpu") != 0)
        return ds_seterr(err, DS_ERR_UNSUPPORTED, "--tensor-parallel-size runs on the cpu backend only so far");
    ds_tp_group *g = ds_xcalloc(1, sizeof *g);
    g->n = n;
    g->lg = ds_comm_local_group_new(n);
    g->comm = ds_xcalloc((size_t)n, sizeof(ds_comm *));
    g->eng = ds_xcalloc((size_t)n, sizeof(ds_engine *));
    g->th = ds_xcalloc((size_t)n, sizeof(pthread_t));
    g->items = ds_xcalloc((size_t)n, sizeof(ds_batch_item *));
    g->logits = ds_xcalloc((size_t)n, sizeof(float *));
    g->st = ds_xcalloc((size_t)n, sizeof(ds_status));
    g->err = ds_xcalloc((size_t)n, sizeof(*g->err));
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    pthread_cond_init(&g->done_cv, NULL);
    g->eng[0] = leader;
    ds_engine_opts fo = *o;
    fo.tensor_parallel_size = 0;
    fo.pipeline_parallel_size = 0;
    int pipeline = o->pipeline_parallel_size > 1;
    fo.attn_no_measure = 1;
    ds_status st = DS_OK;
    for (int r = 1; r < n && !st; r++) st = ds_engine_open(dir, &fo, &g->eng[r], err);
    for (int r = 0; r < n && !st; r++) {
        g->comm[r] = ds_comm_local_new(g->lg, r);
        st = pipeline ? ds_engine_set_pipeline_stage(g->eng[r], g->comm[r], err)
                      : ds_engine_set_tensor_parallel(g->eng[r], g->comm[r], o->tensor_expert_parallel, err);
        g->eng[r]->tp_rank = r;
        g->eng[r]->tp_follower_of = r ? g : NULL;
    }
    for (int r = 1; r < n && !st; r++)
        if (pthread_create(&g->th[r], NULL, follower_main, g->eng[r])) st = ds_seterr(err, DS_ERR_NOMEM, "cannot start a thread");
    if (st) {
        g->eng[0] = NULL;   /* the leader is the caller's */
        ds_tp_group_free(g);
        return st;
    }
    leader->tpg = g;
    return DS_OK;
}

/* The follower shadows of leader sequence s, created on first use and brought to s's length. */
static ds_status shadows_of(ds_tp_group *g, ds_seq *s, char *err) {
    if (!s->shadow) s->shadow = ds_xcalloc((size_t)g->n, sizeof(ds_seq *));
    for (int r = 1; r < g->n; r++) {
        if (!s->shadow[r]) {
            ds_status st = ds_seq_new(g->eng[r], &s->shadow[r], err);
            if (st) return st;
        }
        if (ds_seq_len(s->shadow[r]) > s->len) ds_seq_truncate(s->shadow[r], s->len);
        if (ds_seq_len(s->shadow[r]) != s->len)
            return ds_seterr(err, DS_ERR_ARG, "tensor parallel: rank %d holds %d tokens of a sequence of %d", r,
                             ds_seq_len(s->shadow[r]), s->len);
    }
    return DS_OK;
}

ds_status ds_tp_forward(ds_engine *e, const ds_batch_item *it, int n, float *logits, char *err) {
    ds_tp_group *g = e->tpg;
    ds_status st = DS_OK;
    size_t rows = 0;
    for (int i = 0; i < n && !st; i++) {
        if (!it[i].seq || it[i].seq->eng != e) return ds_seterr(err, DS_ERR_ARG, "batch item %d: no sequence of this engine", i);
        st = shadows_of(g, it[i].seq, err);
        rows += it[i].all_logits ? (size_t)it[i].n_tokens : 1;
    }
    if (st) return st;
    size_t need = rows * (size_t)e->cfg.vocab_size;
    for (int r = 1; r < g->n; r++) {
        g->items[r] = ds_xrealloc(g->items[r], sizeof(ds_batch_item) * (size_t)(n > 0 ? n : 1));
        for (int i = 0; i < n; i++) {
            g->items[r][i] = it[i];
            g->items[r][i].seq = it[i].seq->shadow[r];
        }
        if (need > g->logits_cap) {
            free(g->logits[r]);
            g->logits[r] = ds_xmalloc(sizeof(float) * need);
        }
    }
    if (need > g->logits_cap) g->logits_cap = need;
    pthread_mutex_lock(&g->mu);
    g->n_items = n;
    g->pending = g->n - 1;
    g->job++;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    st = ds_engine_forward_local(e, it, n, logits, err);
    pthread_mutex_lock(&g->mu);
    while (g->pending) pthread_cond_wait(&g->done_cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    for (int r = 1; r < g->n && !st; r++)
        if (g->st[r]) st = ds_seterr(err, g->st[r], "tensor parallel rank %d: %s", r, g->err[r]);
    return st;
}

void ds_tp_seq_free(ds_seq *s) {
    if (!s->shadow) return;
    for (int r = 1; r < s->eng->tpg->n; r++) ds_seq_free(s->shadow[r]);
    free(s->shadow);
    s->shadow = NULL;
}

void ds_tp_seq_truncate(ds_seq *s, int n_tokens) {
    if (!s->shadow) return;
    for (int r = 1; r < s->eng->tpg->n; r++)
        if (s->shadow[r]) ds_seq_truncate(s->shadow[r], n_tokens);
}
