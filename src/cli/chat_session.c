/* Chat session: conversation state for `dsinfer chat`.
 *
 * Each turn renders the whole conversation (system, earlier turns, the new user message, the
 * generation prompt), encodes it, keeps the sequence's KV cache for the longest common prefix with
 * the tokens it holds (ds_seq_truncate) and feeds only the rest. The reply streams through the
 * detokenizer; with an R1 template it is split into reasoning and answer, and only the answer joins
 * the history (the template would drop earlier reasoning anyway). */
#include "cli/chat_session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

struct chat_session {
    model_args a;
    ds_engine *eng;
    ds_tokenizer *tok;
    ds_chat_template tpl;
    ds_seq *seq;
    int32_t *held;      /* tokens in seq's cache, in order */
    int n_held;
    ds_chat_msg *msgs;  /* strings owned (malloc'd) */
    int n_msgs;
    char desc[300];
};

static void add_msg(chat_session *cs, const char *role, const char *content) {
    cs->msgs = ds_xrealloc(cs->msgs, sizeof(ds_chat_msg) * (size_t)(cs->n_msgs + 1));
    cs->msgs[cs->n_msgs++] = (ds_chat_msg){.role = role, .content = ds_xstrdup(content)};
}

ds_status chat_session_open(const model_args *a, chat_session **out, char *err) {
    chat_session *cs = ds_xcalloc(1, sizeof(*cs));
    cs->a = *a;
    ds_status st = model_args_open_engine(a, &cs->eng, err);
    if (!st) st = ds_tokenizer_load(a->model, &cs->tok, err);
    if (!st) st = ds_chat_template_choose(cs->tok, a->chat_template, &cs->tpl, err);
    if (!st) st = ds_seq_new(cs->eng, &cs->seq, err);
    if (st) { chat_session_free(cs); return st; }
    if (a->system) add_msg(cs, "system", a->system);
    snprintf(cs->desc, sizeof cs->desc, "%s; chat template %s", ds_engine_describe(cs->eng), ds_chat_template_name(cs->tpl));
    *out = cs;
    return DS_OK;
}

void chat_session_free(chat_session *cs) {
    if (!cs) return;
    for (int i = 0; i < cs->n_msgs; i++) free((char *)cs->msgs[i].content);
    free(cs->msgs);
    free(cs->held);
    ds_seq_free(cs->seq);
    ds_tokenizer_free(cs->tok);
    ds_engine_free(cs->eng);
    free(cs);
}

const char *chat_session_describe(const chat_session *cs) { return cs->desc; }

/* Keeps the cached common prefix of held and ids (at least one token must be fed to get logits). */
static int reuse_prefix(chat_session *cs, const int32_t *ids, int n) {
    int k = 0;
    while (k < cs->n_held && k < n - 1 && cs->held[k] == ids[k]) k++;
    ds_seq_truncate(cs->seq, k);
    cs->n_held = k;
    return k;
}

static void remember(chat_session *cs, const int32_t *ids, int n) {
    cs->held = ds_xrealloc(cs->held, sizeof(int32_t) * (size_t)(cs->n_held + n));
    memcpy(cs->held + cs->n_held, ids, sizeof(int32_t) * (size_t)n);
    cs->n_held += n;
}

/* Prints reasoning dimmed and the answer plain; collects the answer. */
static void show(const ds_reasoning_delta *d, int color, char **answer, size_t *alen) {
    if (d->reasoning_len) {
        if (color) fputs("\033[2m", stdout);
        fwrite(d->reasoning, 1, d->reasoning_len, stdout);
        if (color) fputs("\033[0m", stdout);
    }
    if (d->content_len) {
        fwrite(d->content, 1, d->content_len, stdout);
        *answer = ds_xrealloc(*answer, *alen + d->content_len + 1);
        memcpy(*answer + *alen, d->content, d->content_len);
        *alen += d->content_len;
        (*answer)[*alen] = 0;
    }
    fflush(stdout);
}

/* Samples the reply token by token until EOS, -n tokens, or the context is full. */
static ds_status reply(chat_session *cs, const int32_t *feed, int n_feed, int color, char **answer, char *err) {
    int V = ds_engine_vocab_size(cs->eng), eos = ds_engine_eos_id(cs->eng);
    float *logits = ds_xmalloc(sizeof(float) * (size_t)V);
    ds_sampler *smp = NULL;
    ds_detok *dt = ds_detok_new(cs->tok, 1);
    ds_reasoning *rs = ds_reasoning_new(cs->tpl == DS_CHAT_DEEPSEEK_R1);
    ds_reasoning_delta d;
    size_t alen = 0, len;
    *answer = ds_xstrdup("");
    ds_status st = ds_sampler_new(&cs->a.sp, V, &smp, err);
    for (int i = 0; !st && i < cs->n_held; i++) ds_sampler_accept_prompt(smp, cs->held[i]);
    ds_batch_item it = {.seq = cs->seq, .tokens = feed, .n_tokens = n_feed};
    if (!st) st = ds_engine_forward(cs->eng, &it, 1, logits, err);
    if (!st) remember(cs, feed, n_feed);
    for (int i = 0; !st && i < cs->a.n_new && ds_seq_len(cs->seq) < ds_engine_max_context(cs->eng); i++) {
        int32_t t = ds_sampler_sample(smp, logits);
        ds_sampler_accept(smp, t);
        if (t == eos) break;
        const char *txt = ds_detok_push(dt, t, &len);
        ds_reasoning_feed(rs, txt, len, &d);
        show(&d, color, answer, &alen);
        it = (ds_batch_item){.seq = cs->seq, .tokens = &t, .n_tokens = 1};
        st = ds_engine_forward(cs->eng, &it, 1, logits, err);
        if (!st) remember(cs, &t, 1);
    }
    const char *rest = ds_detok_flush(dt, &len);
    ds_reasoning_feed(rs, rest, len, &d);
    show(&d, color, answer, &alen);
    ds_reasoning_finish(rs, &d);
    show(&d, color, answer, &alen);
    fputc('\n', stdout);
    ds_reasoning_free(rs);
    ds_detok_free(dt);
    ds_sampler_free(smp);
    free(logits);
    return st;
}

ds_status chat_session_turn(chat_session *cs, const char *user_text, int color, char *err) {
    add_msg(cs, "user", user_text);
    char *prompt = NULL, *answer = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    ds_status st = ds_chat_render(cs->tok, cs->tpl, cs->msgs, cs->n_msgs, 1, &prompt, err);
    if (!st) st = ds_tokenizer_encode(cs->tok, prompt, strlen(prompt), 0, &ids, &n, err);
    if (!st && (int)n >= ds_engine_max_context(cs->eng))
        st = ds_seterr(err, DS_ERR_ARG, "the conversation (%zu tokens) no longer fits the context of %d", n,
                       ds_engine_max_context(cs->eng));
    if (!st) {
        int k = reuse_prefix(cs, ids, (int)n);
        st = reply(cs, ids + k, (int)n - k, color, &answer, err);
    }
    if (!st) add_msg(cs, "assistant", answer);
    else free((char *)cs->msgs[--cs->n_msgs].content);   /* the turn failed: forget it */
    free(answer);
    free(ids);
    free(prompt);
    return st;
}
