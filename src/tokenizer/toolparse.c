/* DeepSeek-V3 tool-call parsing, streaming-safe.
 *
 *   content <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>TYPE<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>
 *   [\n<｜tool▁call▁begin｜>...<｜tool▁call▁end｜>]... <｜tool▁calls▁end｜> [content]
 *
 * A state machine over a buffer of unconsumed text. Each state consumes what it can decide and keeps
 * the rest (a possible prefix of the marker it waits for) for the next feed. Arguments are streamed as
 * deltas, holding back a tail that may be the start of "\n```<｜tool▁call▁end｜>"; the CALL_END event
 * carries the complete arguments with the closing fence removed. */
#include "tokenizer/tok_internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

#define CALLS_BEGIN "<｜tool▁calls▁begin｜>"
#define CALLS_END "<｜tool▁calls▁end｜>"
#define CALL_BEGIN "<｜tool▁call▁begin｜>"
#define CALL_END "<｜tool▁call▁end｜>"
#define TOOL_SEP "<｜tool▁sep｜>"
#define FENCE_OPEN "```json\n"
#define ARGS_END "\n```" CALL_END

typedef enum { ST_TEXT, ST_CALLS, ST_HEADER, ST_FENCE, ST_ARGS } tp_state;

typedef struct {
    char *type, *name;
} tp_call;

typedef struct {
    ds_tool_ev_kind kind;
    int index, valid;
    size_t off, len;   /* into evtext */
} tp_event;

struct ds_toolparse {
    tp_state st;
    tok_buf in;                  /* unconsumed text */
    tok_buf args;                /* arguments of the current call so far (streamed part) */
    tp_call *calls; int n_calls, cap_calls;
    tp_event *ev; int n_ev, cap_ev;
    tok_buf evtext;
    ds_tool_event *out; int cap_out;
};

ds_toolparse *ds_toolparse_new(void) { return ds_xcalloc(1, sizeof(ds_toolparse)); }

void ds_toolparse_free(ds_toolparse *p) {
    if (!p) return;
    for (int i = 0; i < p->n_calls; i++) { free(p->calls[i].type); free(p->calls[i].name); }
    free(p->calls); free(p->ev); free(p->out);
    tok_buf_free(&p->in); tok_buf_free(&p->args); tok_buf_free(&p->evtext);
    free(p);
}

int ds_toolparse_n_calls(const ds_toolparse *p) { return p->n_calls; }

static void emit(ds_toolparse *p, ds_tool_ev_kind kind, const char *s, size_t n, int valid) {
    if (kind == DS_TOOL_EV_CONTENT && !n) return;
    if ((kind == DS_TOOL_EV_CONTENT || kind == DS_TOOL_EV_ARGS) && p->n_ev && p->ev[p->n_ev - 1].kind == kind) {
        tok_buf_put(&p->evtext, s, n);      /* extend the previous delta (its text is last in evtext) */
        p->ev[p->n_ev - 1].len += n;
        return;
    }
    if (kind == DS_TOOL_EV_ARGS && !n) return;
    if (p->n_ev == p->cap_ev) p->ev = ds_xrealloc(p->ev, (size_t)(p->cap_ev = p->cap_ev ? 2 * p->cap_ev : 8) * sizeof *p->ev);
    p->ev[p->n_ev++] = (tp_event){kind, p->n_calls - (kind == DS_TOOL_EV_CONTENT ? 0 : 1), valid, p->evtext.len, n};
    tok_buf_put(&p->evtext, s, n);
}

/* Longest suffix of s[0..n) that is a proper prefix of m. */
static size_t partial(const char *s, size_t n, const char *m) {
    size_t t = strlen(m);
    for (size_t k = t - 1 < n ? t - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, m, k)) return k;
    return 0;
}

static int starts(const char *s, size_t n, const char *m) { size_t k = strlen(m); return n >= k && !memcmp(s, m, k); }
/* 1 if s[0..n) could still grow into m (a proper prefix, possibly empty). */
static int may_start(const char *s, size_t n, const char *m) { return n < strlen(m) && !memcmp(s, m, n); }

/* Each step consumes from s[0..n) and returns the bytes consumed; 0 = needs more text. */
static size_t step_text(ds_toolparse *p, const char *s, size_t n, int final) {
    const char *b = memmem(s, n, CALLS_BEGIN, strlen(CALLS_BEGIN));
    if (b) {
        emit(p, DS_TOOL_EV_CONTENT, s, (size_t)(b - s), 0);
        p->st = ST_CALLS;
        return (size_t)(b - s) + strlen(CALLS_BEGIN);
    }
    size_t keep = final ? 0 : partial(s, n, CALLS_BEGIN);
    emit(p, DS_TOOL_EV_CONTENT, s, n - keep, 0);
    return n - keep;
}

static size_t step_calls(ds_toolparse *p, const char *s, size_t n, int final) {
    size_t i = 0;
    while (i < n && (s[i] == '\n' || s[i] == ' ' || s[i] == '\r' || s[i] == '\t')) i++;
    if (starts(s + i, n - i, CALL_BEGIN)) { p->st = ST_HEADER; return i + strlen(CALL_BEGIN); }
    if (starts(s + i, n - i, CALLS_END)) { p->st = ST_TEXT; return i + strlen(CALLS_END); }
    if (!final && (may_start(s + i, n - i, CALL_BEGIN) || may_start(s + i, n - i, CALLS_END))) return i;
    /* unexpected text between calls: give it back as content */
    p->st = ST_TEXT;
    return i;
}

static size_t step_header(ds_toolparse *p, const char *s, size_t n, int final) {
    const char *sep = memmem(s, n, TOOL_SEP, strlen(TOOL_SEP));
    const char *nl = sep ? memchr(sep, '\n', n - (size_t)(sep - s)) : NULL;
    if (!nl && !final) return 0;
    const char *name = sep ? sep + strlen(TOOL_SEP) : s;
    const char *end = nl ? nl : s + n;
    if (p->n_calls == p->cap_calls)
        p->calls = ds_xrealloc(p->calls, (size_t)(p->cap_calls = p->cap_calls ? 2 * p->cap_calls : 4) * sizeof *p->calls);
    tp_call *c = &p->calls[p->n_calls++];
    c->type = strndup(sep ? s : "function", sep ? (size_t)(sep - s) : 8);
    c->name = strndup(name, (size_t)(end - name));
    DS_CHECK(c->type && c->name);
    emit(p, DS_TOOL_EV_CALL_BEGIN, "", 0, 0);
    p->args.len = 0;
    p->st = ST_FENCE;
    return (size_t)(end - s) + (nl ? 1 : 0);
}

static size_t step_fence(ds_toolparse *p, const char *s, size_t n, int final) {
    if (starts(s, n, FENCE_OPEN)) { p->st = ST_ARGS; return strlen(FENCE_OPEN); }
    if (!final && may_start(s, n, FENCE_OPEN)) return 0;
    p->st = ST_ARGS;   /* no fence: arguments start right away */
    return 0;
}

/* The complete arguments: the streamed text minus a closing fence and trailing newlines. */
static void end_call(ds_toolparse *p) {
    tok_buf *a = &p->args;
    tok_buf_put(a, "", 0);
    size_t n = a->len;
    if (n >= 3 && !memcmp(a->p + n - 3, "```", 3)) n -= 3;
    while (n && (a->p[n - 1] == '\n' || a->p[n - 1] == '\r')) n--;
    a->p[n] = 0;
    cJSON *j = cJSON_Parse(a->p);
    emit(p, DS_TOOL_EV_CALL_END, a->p, n, j != NULL);
    cJSON_Delete(j);
    p->st = ST_CALLS;
}

static size_t step_args(ds_toolparse *p, const char *s, size_t n, int final) {
    const char *e = memmem(s, n, CALL_END, strlen(CALL_END));
    size_t take;
    if (e) take = (size_t)(e - s);
    else {
        size_t k1 = partial(s, n, ARGS_END), k2 = partial(s, n, CALL_END);
        take = final ? n : n - (k1 > k2 ? k1 : k2);
    }
    /* stream everything but a trailing "\n```" that closes the arguments */
    size_t stream = take;
    if (e) {
        if (stream >= 3 && !memcmp(s + stream - 3, "```", 3)) stream -= 3;
        while (stream && (s[stream - 1] == '\n' || s[stream - 1] == '\r')) stream--;
    }
    emit(p, DS_TOOL_EV_ARGS, s, stream, 0);
    tok_buf_put(&p->args, s, take);
    if (e || final) { end_call(p); return take + (e ? strlen(CALL_END) : 0); }
    return take;
}

static void run(ds_toolparse *p, int final) {
    p->n_ev = 0;
    p->evtext.len = 0;
    size_t pos = 0;
    for (;;) {
        const char *s = p->in.p + pos;
        size_t n = p->in.len - pos, used = 0;
        tp_state before = p->st;
        switch (p->st) {
        case ST_TEXT: used = step_text(p, s, n, final); break;
        case ST_CALLS: used = step_calls(p, s, n, final); break;
        case ST_HEADER: used = n || final ? step_header(p, s, n, final) : 0; break;
        case ST_FENCE: used = step_fence(p, s, n, final); break;
        case ST_ARGS: used = step_args(p, s, n, final); break;
        }
        pos += used;
        if (!used && p->st == before) break;
        if (final && pos == p->in.len && (p->st == ST_TEXT || p->st == ST_CALLS)) break;
    }
    memmove(p->in.p, p->in.p + pos, p->in.len - pos);
    p->in.len -= pos;
}

static void deliver(ds_toolparse *p, const ds_tool_event **events, int *n_events) {
    if (p->n_ev > p->cap_out) p->out = ds_xrealloc(p->out, (size_t)(p->cap_out = p->n_ev) * sizeof *p->out);
    tok_buf_put(&p->evtext, "", 0);
    for (int i = 0; i < p->n_ev; i++) {
        const tp_event *e = &p->ev[i];
        const tp_call *c = e->kind == DS_TOOL_EV_CONTENT ? NULL : &p->calls[e->index];
        p->out[i] = (ds_tool_event){e->kind, e->index, p->evtext.p + e->off, e->len,
                                    c ? c->name : NULL, c ? c->type : NULL, e->valid};
    }
    *events = p->out;
    *n_events = p->n_ev;
}

void ds_toolparse_feed(ds_toolparse *p, const char *text, size_t len, const ds_tool_event **events,
                       int *n_events) {
    tok_buf_put(&p->in, text, len);
    run(p, 0);
    deliver(p, events, n_events);
}

void ds_toolparse_finish(ds_toolparse *p, const ds_tool_event **events, int *n_events) {
    tok_buf_put(&p->in, "", 0);
    run(p, 1);
    deliver(p, events, n_events);
}
