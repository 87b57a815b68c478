/* Responses of the OpenAI API from a request's progress (srv_req): the whole chat.completion /
 * text_completion object, or SSE chunks as the tokens come.
 *
 * Each call takes what the engine thread published since the last call (text, tokens, the finish),
 * then, for chat, splits R1 reasoning from content (ds_reasoning) and DeepSeek-V3 tool calls from
 * content (ds_toolparse, when the request offered tools). Non-streaming responses accumulate the same
 * pieces. Logprobs use the raw logits (vLLM); -inf is written as -9999.0 (vLLM). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "core/status.h"
#include "server/srv_internal.h"

typedef struct { char *s; size_t len, cap; } sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (!n) return;
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->s = ds_xrealloc(b->s, b->cap);
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

/* A JSON string of n bytes that may hold NUL (written \u0000; cJSON strings stop at NUL). The text is
 * valid UTF-8 (the detokenizer guarantees it), so only control characters, quote and backslash need
 * escaping. */
static cJSON *jstr(const char *s, size_t n) {
    sbuf b = {0};
    sb_add(&b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') { esc[0] = '\\'; esc[1] = (char)c; sb_add(&b, esc, 2); }
        else if (c == '\n') sb_add(&b, "\\n", 2);
        else if (c < 0x20) { snprintf(esc, sizeof esc, "\\u%04x", c); sb_add(&b, esc, 6); }
        else sb_add(&b, (const char *)&c, 1);
    }
    sb_add(&b, "\"", 1);
    cJSON *o = cJSON_CreateRaw(b.s);
    free(b.s);
    return o;
}

struct srv_render {
    srv_engine *e;
    srv_req *r;
    srv_opts o;
    char id[48];
    long created;
    ds_reasoning *rs;        /* R1 chat only */
    ds_toolparse *tp;        /* chat with tools only */
    size_t text_done;        /* bytes of r->text consumed */
    int toks_done, sent_role, done;
    sbuf content, reasoning; /* accumulated (non-streaming) */
    cJSON *calls;            /* tool_calls array (accumulated) */
    cJSON *lp;               /* accumulated logprobs (chat: content array; completions: object) */
    size_t text_offset;
};

/* What the engine thread published since the last call. */
typedef struct {
    char *text; size_t text_len;
    srv_tok *toks; int n_toks;
    int finished, stop_index, http_status, n_cached, n_total_toks;
    const char *reason;
    char err[DS_ERRLEN];
} progress;

srv_render *srv_render_new(srv_engine *e, srv_req *r, const srv_opts *o) {
    srv_render *rr = ds_xcalloc(1, sizeof(*rr));
    rr->e = e;
    rr->r = r;
    rr->o = *o;
    static atomic_ullong counter;
    uint64_t x = (uint64_t)time(NULL) ^ (atomic_fetch_add(&counter, 1) * 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ull;
    snprintf(rr->id, sizeof rr->id, "%s-%016llx", o->kind == SRV_CHAT ? "chatcmpl" : "cmpl", (unsigned long long)x);
    rr->created = (long)time(NULL);
    if (o->reasoning) rr->rs = ds_reasoning_new(1);
    if (o->want_tools) rr->tp = ds_toolparse_new();
    rr->calls = cJSON_CreateArray();
    rr->lp = o->kind == SRV_CHAT ? cJSON_CreateArray() : NULL;
    return rr;
}

void srv_render_free(srv_render *rr) {
    if (!rr) return;
    ds_reasoning_free(rr->rs);
    ds_toolparse_free(rr->tp);
    free(rr->content.s);
    free(rr->reasoning.s);
    cJSON_Delete(rr->calls);
    cJSON_Delete(rr->lp);
    free(rr);
}

static void take_progress(srv_render *rr, progress *p) {
    srv_req *r = rr->r;
    memset(p, 0, sizeof(*p));
    pthread_mutex_lock(&r->mu);
    p->text_len = r->text_len - rr->text_done;
    p->text = ds_xmalloc(p->text_len + 1);
    if (p->text_len) memcpy(p->text, r->text + rr->text_done, p->text_len);
    p->text[p->text_len] = 0;
    p->n_toks = r->n_toks - rr->toks_done;
    p->toks = ds_xmalloc(sizeof(srv_tok) * (size_t)(p->n_toks + 1));
    if (p->n_toks) memcpy(p->toks, r->toks + rr->toks_done, sizeof(srv_tok) * (size_t)p->n_toks);
    p->finished = r->finished;
    p->reason = r->finish_reason;
    p->stop_index = r->stop_index;
    p->http_status = r->http_status;
    p->n_cached = r->n_cached;
    p->n_total_toks = r->n_toks;
    snprintf(p->err, sizeof p->err, "%s", r->err);
    pthread_mutex_unlock(&r->mu);
    rr->text_done += p->text_len;
    rr->toks_done += p->n_toks;
}

/* ---- logprobs ------------------------------------------------------------------------------- */
static double clamp_lp(float lp) { return lp < -9999.0f ? -9999.0 : (double)lp; }

static char *token_str(const srv_render *rr, int32_t id) {
    if (rr->o.return_token_ids) {
        char *s = ds_xmalloc(32);
        snprintf(s, 32, "token_id:%d", id);
        return s;
    }
    char *text = NULL;
    size_t len;
    char err[DS_ERRLEN];
    if (ds_tokenizer_decode(srv_engine_tokenizer(rr->e), &id, 1, 0, &text, &len, err)) return ds_xstrdup("");
    return text;
}

static cJSON *chat_lp_entry(const srv_render *rr, int32_t id, float lp) {
    cJSON *o = cJSON_CreateObject();
    char *s = token_str(rr, id);
    cJSON_AddStringToObject(o, "token", s);
    cJSON_AddNumberToObject(o, "logprob", clamp_lp(lp));
    cJSON *bytes = cJSON_AddArrayToObject(o, "bytes");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) cJSON_AddItemToArray(bytes, cJSON_CreateNumber(*c));
    free(s);
    return o;
}

/* Chat logprobs entries of the new tokens, appended to arr. */
static void chat_logprobs(const srv_render *rr, const progress *p, cJSON *arr) {
    for (int i = 0; i < p->n_toks; i++) {
        cJSON *o = chat_lp_entry(rr, p->toks[i].id, p->toks[i].logprob);
        cJSON *top = cJSON_AddArrayToObject(o, "top_logprobs");
        for (int k = 0; k < p->toks[i].n_top; k++) cJSON_AddItemToArray(top, chat_lp_entry(rr, p->toks[i].top_id[k], p->toks[i].top_lp[k]));
        cJSON_AddItemToArray(arr, o);
    }
}

/* Completions logprobs of the new tokens, appended to obj's arrays (created on first use). */
static void completion_logprobs(srv_render *rr, const progress *p, cJSON *obj) {
    const char *keys[] = {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
    cJSON *a[4];
    for (int k = 0; k < 4; k++) {
        a[k] = cJSON_GetObjectItemCaseSensitive(obj, keys[k]);
        if (!a[k]) a[k] = cJSON_AddArrayToObject(obj, keys[k]);
    }
    for (int i = 0; i < p->n_toks; i++) {
        char *s = token_str(rr, p->toks[i].id);
        cJSON_AddItemToArray(a[0], cJSON_CreateString(s));
        cJSON_AddItemToArray(a[1], cJSON_CreateNumber(clamp_lp(p->toks[i].logprob)));
        cJSON *top = cJSON_CreateObject();
        for (int k = 0; k < p->toks[i].n_top; k++) {
            char *t = token_str(rr, p->toks[i].top_id[k]);
            if (!cJSON_GetObjectItemCaseSensitive(top, t)) cJSON_AddNumberToObject(top, t, clamp_lp(p->toks[i].top_lp[k]));
            free(t);
        }
        cJSON_AddItemToArray(a[2], top);
        cJSON_AddItemToArray(a[3], cJSON_CreateNumber((double)rr->text_offset));
        rr->text_offset += strlen(s);
        free(s);
    }
}

/* ---- splitting the text --------------------------------------------------------------------- */
/* One piece of chat output: reasoning or content text, or a tool-call event. Pieces own copies of
 * their strings (the parsers' buffers live only until their next call). */
typedef struct { int kind; char *text; size_t len; ds_tool_event ev; } piece;
enum { P_REASONING, P_CONTENT, P_TOOL };
typedef struct { piece *v; int n, cap; } pieces;

static void add_piece(pieces *ps, int kind, const char *text, size_t len, const ds_tool_event *ev) {
    if (kind != P_TOOL && len == 0) return;
    if (ps->n == ps->cap) ps->v = ds_xrealloc(ps->v, sizeof(piece) * (size_t)(ps->cap = ps->cap ? 2 * ps->cap : 8));
    piece *p = &ps->v[ps->n++];
    memset(p, 0, sizeof(*p));
    p->kind = kind;
    p->text = ds_xmalloc(len + 1);
    if (len) memcpy(p->text, text, len);
    p->text[len] = 0;
    p->len = len;
    if (ev) {
        p->ev = *ev;
        p->ev.text = p->text;
        p->ev.name = ev->name ? ds_xstrdup(ev->name) : NULL;
        p->ev.type = ev->type ? ds_xstrdup(ev->type) : NULL;
    }
}

static void free_pieces(pieces *ps) {
    for (int i = 0; i < ps->n; i++) {
        free(ps->v[i].text);
        free((char *)ps->v[i].ev.name);
        free((char *)ps->v[i].ev.type);
    }
    free(ps->v);
}

static void add_events(pieces *ps, const ds_tool_event *ev, int n_ev) {
    for (int i = 0; i < n_ev; i++)
        add_piece(ps, ev[i].kind == DS_TOOL_EV_CONTENT ? P_CONTENT : P_TOOL, ev[i].text, ev[i].text ? ev[i].len : 0, &ev[i]);
}

/* Content goes through the tool-call parser when the request offered tools. */
static void add_content(srv_render *rr, const char *s, size_t n, int final, pieces *ps) {
    if (!rr->tp) {
        add_piece(ps, P_CONTENT, s, n, NULL);
        return;
    }
    const ds_tool_event *ev;
    int n_ev = 0;
    if (n) {
        ds_toolparse_feed(rr->tp, s, n, &ev, &n_ev);
        add_events(ps, ev, n_ev);
    }
    if (final) {
        ds_toolparse_finish(rr->tp, &ev, &n_ev);
        add_events(ps, ev, n_ev);
    }
}

/* Pieces of chat output from the progress (reasoning first split off for R1). */
static void chat_pieces(srv_render *rr, const progress *p, pieces *ps) {
    memset(ps, 0, sizeof(*ps));
    if (!rr->rs) {
        add_content(rr, p->text, p->text_len, p->finished, ps);
        return;
    }
    ds_reasoning_delta d;
    ds_reasoning_feed(rr->rs, p->text, p->text_len, &d);
    add_piece(ps, P_REASONING, d.reasoning, d.reasoning_len, NULL);
    add_content(rr, d.content, d.content_len, 0, ps);
    if (!p->finished) return;
    ds_reasoning_finish(rr->rs, &d);
    add_piece(ps, P_REASONING, d.reasoning, d.reasoning_len, NULL);
    add_content(rr, d.content, d.content_len, 1, ps);
}

/* ---- shared response parts ------------------------------------------------------------------ */
static const char *finish_reason(const srv_render *rr, const progress *p) {
    if (p->http_status) return "error";
    if (strcmp(p->reason, "stop") == 0 && cJSON_GetArraySize(rr->calls) > 0) return "tool_calls";
    return p->reason;
}

static void add_usage(cJSON *o, const srv_render *rr, const progress *p) {
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", rr->r->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", p->n_total_toks);
    cJSON_AddNumberToObject(u, "total_tokens", rr->r->n_prompt + p->n_total_toks);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "prompt_tokens_details"), "cached_tokens", p->n_cached);
}

static cJSON *envelope(const srv_render *rr, const char *object) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", rr->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)rr->created);
    cJSON_AddStringToObject(o, "model", rr->o.model);
    return o;
}

static void add_stop_reason(cJSON *choice, const srv_render *rr, const progress *p) {
    if (p->stop_index >= 0) cJSON_AddStringToObject(choice, "stop_reason", rr->r->stop[p->stop_index]);
    else cJSON_AddNullToObject(choice, "stop_reason");
}

/* Records a tool-call event in rr->calls; returns the call's JSON entry. */
static cJSON *record_call(srv_render *rr, const ds_tool_event *ev) {
    cJSON *call = cJSON_GetArrayItem(rr->calls, ev->index);
    if (!call) {
        call = cJSON_CreateObject();
        char id[40];
        snprintf(id, sizeof id, "call_%s_%d", rr->id + strlen(rr->id) - 12, ev->index);
        cJSON_AddStringToObject(call, "id", id);
        cJSON_AddStringToObject(call, "type", "function");
        cJSON *fn = cJSON_AddObjectToObject(call, "function");
        cJSON_AddStringToObject(fn, "name", ev->name ? ev->name : "");
        cJSON_AddStringToObject(fn, "arguments", "");
        cJSON_AddItemToArray(rr->calls, call);
    }
    if (ev->kind == DS_TOOL_EV_CALL_END)
        cJSON_ReplaceItemInObject(cJSON_GetObjectItem(call, "function"), "arguments", cJSON_CreateString(ev->text));
    return call;
}

/* ---- non-streaming ------------------------------------------------------------------------- */
char *srv_render_full(srv_render *rr) {
    progress p;
    take_progress(rr, &p);
    cJSON *o = envelope(rr, rr->o.kind == SRV_CHAT ? "chat.completion" : "text_completion");
    cJSON *choice = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "choices"), choice);
    cJSON_AddNumberToObject(choice, "index", 0);
    if (rr->o.kind == SRV_CHAT) {
        pieces ps;
        chat_pieces(rr, &p, &ps);
        for (int i = 0; i < ps.n; i++) {
            if (ps.v[i].kind == P_TOOL) record_call(rr, &ps.v[i].ev);
            else sb_add(ps.v[i].kind == P_REASONING ? &rr->reasoning : &rr->content, ps.v[i].text, ps.v[i].len);
        }
        free_pieces(&ps);
        cJSON *msg = cJSON_AddObjectToObject(choice, "message");
        cJSON_AddStringToObject(msg, "role", "assistant");
        int n_calls = cJSON_GetArraySize(rr->calls);
        if (rr->content.len || !(n_calls || rr->rs)) cJSON_AddItemToObject(msg, "content", jstr(rr->content.s, rr->content.len));
        else cJSON_AddNullToObject(msg, "content");
        if (rr->rs) {
            if (rr->reasoning.len) cJSON_AddItemToObject(msg, "reasoning_content", jstr(rr->reasoning.s, rr->reasoning.len));
            else cJSON_AddNullToObject(msg, "reasoning_content");
        }
        if (n_calls) cJSON_AddItemToObject(msg, "tool_calls", cJSON_Duplicate(rr->calls, 1));
        if (rr->r->logprobs) {
            chat_logprobs(rr, &p, rr->lp);
            cJSON_AddItemToObject(cJSON_AddObjectToObject(choice, "logprobs"), "content", cJSON_Duplicate(rr->lp, 1));
        } else cJSON_AddNullToObject(choice, "logprobs");
    } else {
        cJSON_AddItemToObject(choice, "text", jstr(p.text, p.text_len));
        if (rr->r->logprobs) completion_logprobs(rr, &p, cJSON_AddObjectToObject(choice, "logprobs"));
        else cJSON_AddNullToObject(choice, "logprobs");
    }
    cJSON_AddStringToObject(choice, "finish_reason", finish_reason(rr, &p));
    add_stop_reason(choice, rr, &p);
    add_usage(o, rr, &p);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    free(p.text);
    free(p.toks);
    return s;
}

/* ---- streaming ----------------------------------------------------------------------------- */
static void sse(sbuf *out, cJSON *o) {
    char *s = cJSON_PrintUnformatted(o);
    sb_add(out, "data: ", 6);
    sb_add(out, s, strlen(s));
    sb_add(out, "\n\n", 2);
    free(s);
    cJSON_Delete(o);
}

/* A chunk with one choice; returns the choice (delta or text added by the caller). */
static cJSON *chunk(const srv_render *rr, cJSON **root) {
    *root = envelope(rr, rr->o.kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion");
    cJSON *choice = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(*root, "choices"), choice);
    cJSON_AddNumberToObject(choice, "index", 0);
    return choice;
}

static void chat_delta_chunk(srv_render *rr, sbuf *out, const piece *pc, cJSON *logprobs) {
    cJSON *root, *choice = chunk(rr, &root), *delta = cJSON_AddObjectToObject(choice, "delta");
    if (!rr->sent_role) {
        cJSON_AddStringToObject(delta, "role", "assistant");
        rr->sent_role = 1;
    }
    if (pc && pc->kind == P_REASONING) {
        cJSON_AddItemToObject(delta, "reasoning_content", jstr(pc->text, pc->len));
    } else if (pc && pc->kind == P_CONTENT) {
        cJSON_AddItemToObject(delta, "content", jstr(pc->text, pc->len));
    } else if (pc) {
        cJSON *call = record_call(rr, &pc->ev), *arr = cJSON_AddArrayToObject(delta, "tool_calls"), *d = cJSON_CreateObject();
        cJSON_AddNumberToObject(d, "index", pc->ev.index);
        if (pc->ev.kind == DS_TOOL_EV_CALL_BEGIN) {
            cJSON_AddItemToObject(d, "id", cJSON_Duplicate(cJSON_GetObjectItem(call, "id"), 1));
            cJSON_AddStringToObject(d, "type", "function");
            cJSON *fn = cJSON_AddObjectToObject(d, "function");
            cJSON_AddStringToObject(fn, "name", pc->ev.name ? pc->ev.name : "");
            cJSON_AddStringToObject(fn, "arguments", "");
        } else cJSON_AddStringToObject(cJSON_AddObjectToObject(d, "function"), "arguments", pc->ev.text);
        cJSON_AddItemToArray(arr, d);
    } else cJSON_AddStringToObject(delta, "content", "");
    if (logprobs) cJSON_AddItemToObject(cJSON_AddObjectToObject(choice, "logprobs"), "content", logprobs);
    else cJSON_AddNullToObject(choice, "logprobs");
    cJSON_AddNullToObject(choice, "finish_reason");
    sse(out, root);
}

static void chat_stream(srv_render *rr, const progress *p, sbuf *out) {
    pieces ps;
    chat_pieces(rr, p, &ps);
    cJSON *lp = NULL;
    if (rr->r->logprobs && p->n_toks) {
        lp = cJSON_CreateArray();
        chat_logprobs(rr, p, lp);
    }
    int last = -1;   /* the last piece that makes a chunk carries the logprobs */
    for (int i = 0; i < ps.n; i++)
        if (!(ps.v[i].kind == P_TOOL && ps.v[i].ev.kind == DS_TOOL_EV_CALL_END)) last = i;
    for (int i = 0; i < ps.n; i++) {
        if (ps.v[i].kind == P_TOOL && ps.v[i].ev.kind == DS_TOOL_EV_CALL_END) record_call(rr, &ps.v[i].ev);
        else chat_delta_chunk(rr, out, &ps.v[i], i == last ? lp : NULL);
    }
    if (last < 0 && (lp || !rr->sent_role)) chat_delta_chunk(rr, out, NULL, lp);
    free_pieces(&ps);
}

static void completion_stream(srv_render *rr, const progress *p, sbuf *out) {
    if (!p->text_len && !(rr->r->logprobs && p->n_toks)) return;
    cJSON *root, *choice = chunk(rr, &root);
    cJSON_AddItemToObject(choice, "text", jstr(p->text, p->text_len));
    if (rr->r->logprobs) completion_logprobs(rr, p, cJSON_AddObjectToObject(choice, "logprobs"));
    else cJSON_AddNullToObject(choice, "logprobs");
    cJSON_AddNullToObject(choice, "finish_reason");
    sse(out, root);
}

static void stream_end(srv_render *rr, const progress *p, sbuf *out) {
    if (p->http_status) {
        srv_error er;
        srv_seterror(&er, p->http_status, "", "", "%s", p->err);
        char *s = srv_error_json(&er);
        sb_add(out, "data: ", 6);
        sb_add(out, s, strlen(s));
        sb_add(out, "\n\n", 2);
        free(s);
    } else {
        cJSON *root, *choice = chunk(rr, &root);
        if (rr->o.kind == SRV_CHAT) cJSON_AddObjectToObject(choice, "delta");
        else cJSON_AddStringToObject(choice, "text", "");
        cJSON_AddNullToObject(choice, "logprobs");
        cJSON_AddStringToObject(choice, "finish_reason", finish_reason(rr, p));
        add_stop_reason(choice, rr, p);
        sse(out, root);
        if (rr->o.include_usage) {
            root = envelope(rr, rr->o.kind == SRV_CHAT ? "chat.completion.chunk" : "text_completion");
            cJSON_AddArrayToObject(root, "choices");
            add_usage(root, rr, p);
            sse(out, root);
        }
    }
    sb_add(out, "data: [DONE]\n\n", 14);
    rr->done = 1;
}

int srv_render_stream(srv_render *rr, char **out, size_t *len) {
    if (rr->done) { *out = NULL; *len = 0; return 1; }
    progress p;
    take_progress(rr, &p);
    sbuf b = {0};
    if (!p.http_status) {
        if (rr->o.kind == SRV_CHAT) chat_stream(rr, &p, &b);
        else completion_stream(rr, &p, &b);
    }
    if (p.finished) stream_end(rr, &p, &b);
    free(p.text);
    free(p.toks);
    *out = b.s;
    *len = b.len;
    return rr->done;
}
