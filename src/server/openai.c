/* The OpenAI API: request JSON -> generation inputs (validated; every mistake is a 400 naming the
 * field), and the request's progress -> responses (chat.completion, text_completion) and stream
 * chunks. Field semantics follow OpenAI and, where it is silent, vLLM (defaults, extensions
 * ignore_eos and return_tokens_as_token_ids, error texts for the context length).
 *
 * Sections: errors, field readers, messages and prompts, limits, parse, rendering. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "core/status.h"
#include "server/srv_internal.h"

/* ---- errors ---------------------------------------------------------------------------------- */
int srv_seterror(srv_error *er, int status, const char *param, const char *code, const char *fmt, ...) {
    er->status = status;
    snprintf(er->param, sizeof er->param, "%s", param ? param : "");
    snprintf(er->code, sizeof er->code, "%s", code ? code : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(er->message, sizeof er->message, fmt, ap);
    va_end(ap);
    return -1;
}

char *srv_error_json(const srv_error *er) {
    const char *type = er->status == 401 ? "authentication_error" : er->status == 404 ? "not_found_error"
                     : er->status == 503 ? "service_unavailable" : er->status >= 500 ? "internal_server_error"
                                                                  : "invalid_request_error";
    cJSON *root = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(e, "message", er->message);
    cJSON_AddStringToObject(e, "type", type);
    if (er->param[0]) cJSON_AddStringToObject(e, "param", er->param); else cJSON_AddNullToObject(e, "param");
    if (er->code[0]) cJSON_AddStringToObject(e, "code", er->code); else cJSON_AddNullToObject(e, "code");
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

/* ---- field readers: absent or null leaves *out unchanged and returns 0 ------------------------ */
static const cJSON *field(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static int get_num(const cJSON *o, const char *key, double lo, double hi, double *out, srv_error *er) {
    const cJSON *v = field(o, key);
    if (!v) return 0;
    if (!cJSON_IsNumber(v)) return srv_seterror(er, 400, key, "invalid_type", "'%s' must be a number", key);
    if (!(v->valuedouble >= lo && v->valuedouble <= hi))
        return srv_seterror(er, 400, key, "invalid_value", "'%s' must be in [%g, %g], got %g", key, lo, hi, v->valuedouble);
    *out = v->valuedouble;
    return 0;
}

static int get_int(const cJSON *o, const char *key, double lo, double hi, double *out, srv_error *er) {
    const cJSON *v = field(o, key);
    if (v && (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble)))
        return srv_seterror(er, 400, key, "invalid_type", "'%s' must be an integer", key);
    return get_num(o, key, lo, hi, out, er);
}

static int get_bool(const cJSON *o, const char *key, int *out, srv_error *er) {
    const cJSON *v = field(o, key);
    if (!v) return 0;
    if (!cJSON_IsBool(v)) return srv_seterror(er, 400, key, "invalid_type", "'%s' must be a boolean", key);
    *out = cJSON_IsTrue(v);
    return 0;
}

/* ---- messages and prompts -------------------------------------------------------------------- */
/* Message content: a string, or an array of {"type":"text","text":...} parts (joined). *out malloc'd. */
static int content_text(const cJSON *c, int i, char **out, srv_error *er) {
    if (cJSON_IsString(c)) { *out = ds_xstrdup(c->valuestring); return 0; }
    if (!cJSON_IsArray(c))
        return srv_seterror(er, 400, "messages", "invalid_type", "messages[%d].content must be a string or an array of text parts", i);
    size_t len = 0;
    char *s = ds_xstrdup("");
    const cJSON *part;
    cJSON_ArrayForEach(part, c) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type"), *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") != 0 || !cJSON_IsString(text)) {
            free(s);
            return srv_seterror(er, 400, "messages", "invalid_value", "messages[%d].content: only text parts are supported", i);
        }
        size_t n = strlen(text->valuestring);
        s = ds_xrealloc(s, len + n + 1);
        memcpy(s + len, text->valuestring, n + 1);
        len += n;
    }
    *out = s;
    return 0;
}

/* Strings of the rendered messages, freed together. */
typedef struct { char **s; int n; } strlist;
static char *keep(strlist *l, char *s) {
    l->s = ds_xrealloc(l->s, sizeof(char *) * (size_t)(l->n + 1));
    return l->s[l->n++] = s;
}
static void strlist_free(strlist *l) { for (int i = 0; i < l->n; i++) free(l->s[i]); free(l->s); }

static int parse_message(const cJSON *m, int i, ds_chat_msg *out, strlist *keep_list, srv_error *er) {
    static const char *const roles[] = {"system", "user", "assistant", "tool", "developer"};
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    if (!cJSON_IsObject(m) || !cJSON_IsString(role))
        return srv_seterror(er, 400, "messages", "invalid_type", "messages[%d] must be an object with a string 'role'", i);
    int known = -1;
    for (int r = 0; r < 5; r++) if (strcmp(role->valuestring, roles[r]) == 0) known = r;
    if (known < 0) return srv_seterror(er, 400, "messages", "invalid_value", "messages[%d].role \"%s\" is not one of system, user, assistant, tool", i, role->valuestring);
    memset(out, 0, sizeof(*out));
    out->role = roles[known == 4 ? 0 : known];
    const cJSON *c = field(m, "content"), *tc = field(m, "tool_calls"), *rc = field(m, "reasoning_content");
    char *text = NULL;
    if (c) {
        if (content_text(c, i, &text, er)) return -1;
        out->content = keep(keep_list, text);
    }
    if (tc) {
        if (!cJSON_IsArray(tc) || known != 2)
            return srv_seterror(er, 400, "messages", "invalid_value", "messages[%d].tool_calls must be an array on an assistant message", i);
        out->tool_calls = keep(keep_list, cJSON_PrintUnformatted(tc));
    }
    if (cJSON_IsString(rc)) out->reasoning_content = rc->valuestring;
    if (!out->content && !out->tool_calls)
        return srv_seterror(er, 400, "messages", "invalid_value", "messages[%d].content is missing", i);
    return 0;
}

static int chat_prompt(srv_engine *e, const cJSON *root, int32_t **ids, size_t *n, srv_error *er) {
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0)
        return srv_seterror(er, 400, "messages", "invalid_type", "'messages' must be a non-empty array");
    int n_msgs = cJSON_GetArraySize(msgs), i = 0, rc = 0;
    ds_chat_msg *cm = ds_xcalloc((size_t)n_msgs, sizeof(*cm));
    strlist kl = {0};
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) if (!rc) rc = parse_message(m, i, &cm[i], &kl, er), i++;
    char *text = NULL, err[DS_ERRLEN];
    if (!rc && ds_chat_render(srv_engine_tokenizer(e), srv_engine_template(e), cm, n_msgs, 1, &text, err))
        rc = srv_seterror(er, 400, "messages", "invalid_value", "%s", err);
    if (!rc && ds_tokenizer_encode(srv_engine_tokenizer(e), text, strlen(text), 0, ids, n, err))
        rc = srv_seterror(er, 400, "messages", "invalid_value", "%s", err);
    free(text);
    strlist_free(&kl);
    free(cm);
    return rc;
}

static int token_array(srv_engine *e, const cJSON *a, int32_t **ids, size_t *n, srv_error *er) {
    int len = cJSON_GetArraySize(a), i = 0;
    *ids = ds_xmalloc(sizeof(int32_t) * (size_t)(len ? len : 1));
    const cJSON *t;
    cJSON_ArrayForEach(t, a) {
        if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble) || t->valuedouble < 0 ||
            t->valuedouble >= srv_engine_vocab(e)) {
            free(*ids);
            *ids = NULL;
            return srv_seterror(er, 400, "prompt", "invalid_value", "prompt[%d] is not a token id in [0, %d)", i, srv_engine_vocab(e));
        }
        (*ids)[i++] = (int32_t)t->valuedouble;
    }
    *n = (size_t)len;
    return 0;
}

/* prompt: a string, an array of token ids, or a one-element array of either. */
static int completion_prompt(srv_engine *e, const cJSON *root, int32_t **ids, size_t *n, srv_error *er) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && !cJSON_IsNumber(cJSON_GetArrayItem(p, 0)))
        p = cJSON_GetArrayItem(p, 0);
    char err[DS_ERRLEN];
    const ds_tokenizer *tok = srv_engine_tokenizer(e);
    if (cJSON_IsString(p)) {
        if (ds_tokenizer_encode(tok, p->valuestring, strlen(p->valuestring), ds_tokenizer_add_bos(tok), ids, n, err))
            return srv_seterror(er, 400, "prompt", "invalid_value", "%s", err);
        return 0;
    }
    if (cJSON_IsArray(p) && (cJSON_GetArraySize(p) == 0 || cJSON_IsNumber(cJSON_GetArrayItem(p, 0))))
        return token_array(e, p, ids, n, er);
    if (cJSON_IsArray(p)) return srv_seterror(er, 400, "prompt", "invalid_value", "batched prompts are not supported: send one prompt per request");
    return srv_seterror(er, 400, "prompt", "invalid_type", "'prompt' must be a string or an array of token ids");
}

/* ---- sampling and output options ----------------------------------------------------------- */
static int parse_stop(const cJSON *root, srv_req *r, srv_error *er) {
    const cJSON *s = field(root, "stop"), *it;
    if (!s) return 0;
    if (cJSON_IsString(s)) {
        if (s->valuestring[0]) r->stop[r->n_stop++] = ds_xstrdup(s->valuestring);
        return 0;
    }
    if (!cJSON_IsArray(s)) return srv_seterror(er, 400, "stop", "invalid_type", "'stop' must be a string or an array of strings");
    if (cJSON_GetArraySize(s) > SRV_MAX_STOP) return srv_seterror(er, 400, "stop", "invalid_value", "at most %d stop strings", SRV_MAX_STOP);
    cJSON_ArrayForEach(it, s) {
        if (!cJSON_IsString(it)) return srv_seterror(er, 400, "stop", "invalid_type", "'stop' must be a string or an array of strings");
        if (it->valuestring[0]) r->stop[r->n_stop++] = ds_xstrdup(it->valuestring);
    }
    return 0;
}

static uint64_t fresh_seed(void) {
    static atomic_ullong counter;
    uint64_t z = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull + atomic_fetch_add(&counter, 1) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 30)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int parse_sampling(const cJSON *root, srv_req *r, srv_error *er) {
    double temp = 1, top_p = 1, top_k = 0, min_p = 0, pres = 0, freq = 0, seed = -1;
    int has_seed = field(root, "seed") != NULL;
    if (get_num(root, "temperature", 0, 100, &temp, er) || get_num(root, "top_p", 1e-9, 1, &top_p, er) ||
        get_int(root, "top_k", -1, 1 << 30, &top_k, er) || get_num(root, "min_p", 0, 1, &min_p, er) ||
        get_num(root, "presence_penalty", -2, 2, &pres, er) || get_num(root, "frequency_penalty", -2, 2, &freq, er) ||
        get_int(root, "seed", -9.2e18, 1.8e19, &seed, er) || get_bool(root, "ignore_eos", &r->ignore_eos, er))
        return -1;
    ds_sampling_defaults(&r->sp);
    r->sp.temperature = (float)temp;
    r->sp.top_p = (float)top_p;
    r->sp.top_k = top_k > 0 ? (int)top_k : 0;
    r->sp.min_p = (float)min_p;
    r->sp.presence_penalty = (float)pres;
    r->sp.frequency_penalty = (float)freq;
    r->sp.seed = has_seed ? (seed < 0 ? (uint64_t)(int64_t)seed : (uint64_t)seed) : fresh_seed();
    return 0;
}

static int parse_logprobs(const cJSON *root, srv_kind kind, srv_req *r, srv_opts *o, srv_error *er) {
    double top = 0;
    if (kind == SRV_CHAT) {
        if (get_bool(root, "logprobs", &r->logprobs, er) || get_int(root, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &top, er)) return -1;
        if (top > 0 && !r->logprobs) return srv_seterror(er, 400, "top_logprobs", "invalid_value", "'top_logprobs' needs 'logprobs': true");
    } else {
        top = -1;
        if (get_int(root, "logprobs", 0, SRV_MAX_TOP_LOGPROBS, &top, er)) return -1;
        r->logprobs = top >= 0;
        if (top < 0) top = 0;
    }
    r->top_logprobs = (int)top;
    return get_bool(root, "return_tokens_as_token_ids", &o->return_token_ids, er);
}

static int parse_stream(const cJSON *root, srv_opts *o, srv_error *er) {
    if (get_bool(root, "stream", &o->stream, er)) return -1;
    const cJSON *so = field(root, "stream_options");
    if (!so) return 0;
    if (!o->stream) return srv_seterror(er, 400, "stream_options", "invalid_value", "'stream_options' needs 'stream': true");
    if (!cJSON_IsObject(so)) return srv_seterror(er, 400, "stream_options", "invalid_type", "'stream_options' must be an object");
    return get_bool(so, "include_usage", &o->include_usage, er);
}

/* Unsupported options that change the result are refused rather than ignored. */
static int refuse_unsupported(const cJSON *root, srv_error *er) {
    double n = 1, best_of = 1;
    int echo = 0;
    if (get_int(root, "n", -1e18, 1e18, &n, er) || get_int(root, "best_of", -1e18, 1e18, &best_of, er) ||
        get_bool(root, "echo", &echo, er))
        return -1;
    if (n != 1) return srv_seterror(er, 400, "n", "unsupported_value", "'n' other than 1 is not supported");
    if (best_of != 1) return srv_seterror(er, 400, "best_of", "unsupported_value", "'best_of' other than 1 is not supported");
    if (echo) return srv_seterror(er, 400, "echo", "unsupported_value", "'echo' is not supported");
    const cJSON *sfx = field(root, "suffix");
    if (sfx && !(cJSON_IsString(sfx) && !sfx->valuestring[0]))
        return srv_seterror(er, 400, "suffix", "unsupported_value", "'suffix' is not supported");
    return 0;
}

/* ---- limits --------------------------------------------------------------------------------- */
static int parse_limits(srv_engine *e, const cJSON *root, srv_kind kind, srv_req *r, srv_error *er) {
    int ctx = srv_engine_max_context(e), pool = srv_engine_max_tokens_in_pool(e);
    double mt = -1;
    const char *key = kind == SRV_CHAT && field(root, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if (get_int(root, key, -1e18, 1e18, &mt, er)) return -1;
    if (field(root, key) && mt < 1)
        return srv_seterror(er, 400, key, "invalid_value", "'%s' must be at least 1, got %.0f", key, mt);
    if (r->n_prompt == 0) return srv_seterror(er, 400, kind == SRV_CHAT ? "messages" : "prompt", "invalid_value", "the prompt is empty");
    if (r->n_prompt >= ctx)
        return srv_seterror(er, 400, kind == SRV_CHAT ? "messages" : "prompt", "context_length_exceeded",
                            "This model's maximum context length is %d tokens. However, your request has %d input tokens. "
                            "Please reduce the length of the input.", ctx, r->n_prompt);
    if (mt >= 1 && r->n_prompt + mt > ctx)
        return srv_seterror(er, 400, key, "context_length_exceeded",
                            "This model's maximum context length is %d tokens. However, you requested %.0f tokens (%d in the "
                            "input, %.0f in the completion). Please reduce the length of the input or completion.",
                            ctx, r->n_prompt + mt, r->n_prompt, mt);
    if (r->n_prompt + (mt >= 1 ? mt : 1) > pool)
        return srv_seterror(er, 400, key, "context_length_exceeded",
                            "the request needs %.0f tokens of KV cache; the pool holds %d", r->n_prompt + (mt >= 1 ? mt : 1), pool);
    int dflt = kind == SRV_COMPLETION ? 16 : ctx;   /* vLLM: 16 for completions, the rest of the context for chat */
    r->max_tokens = mt >= 1 ? (int)mt : dflt;
    if (r->max_tokens > pool - r->n_prompt) r->max_tokens = pool - r->n_prompt;
    return 0;
}

/* ---- parse ---------------------------------------------------------------------------------- */
static int parse_model(const cJSON *root, const server_config *cfg, srv_opts *o, srv_error *er) {
    const cJSON *m = field(root, "model");
    const char *name = cfg->served_model_name ? cfg->served_model_name : cfg->model_dir;
    if (m && !cJSON_IsString(m)) return srv_seterror(er, 400, "model", "invalid_type", "'model' must be a string");
    if (m && strcmp(m->valuestring, name) != 0)
        return srv_seterror(er, 400, "model", "model_not_found", "The model `%.200s` does not exist.", m->valuestring);
    snprintf(o->model, sizeof o->model, "%s", name);
    return 0;
}

static int parse_tools(const cJSON *root, srv_opts *o, srv_error *er) {
    const cJSON *tools = field(root, "tools"), *choice = field(root, "tool_choice");
    if (tools && !cJSON_IsArray(tools)) return srv_seterror(er, 400, "tools", "invalid_type", "'tools' must be an array");
    o->want_tools = tools && cJSON_GetArraySize(tools) > 0 && !(cJSON_IsString(choice) && strcmp(choice->valuestring, "none") == 0);
    return 0;
}

int srv_openai_parse(srv_engine *e, const server_config *cfg, srv_kind kind, const char *body, size_t len,
                     srv_req *r, srv_opts *o, srv_error *er) {
    memset(o, 0, sizeof(*o));
    o->kind = kind;
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root) return srv_seterror(er, 400, "", "invalid_json", "the request body is not valid JSON");
    int rc = 0;
    if (!cJSON_IsObject(root)) rc = srv_seterror(er, 400, "", "invalid_json", "the request body must be a JSON object");
    if (!rc) rc = parse_model(root, cfg, o, er);
    if (!rc) rc = refuse_unsupported(root, er);
    if (!rc) rc = parse_stream(root, o, er);
    if (!rc) rc = parse_sampling(root, r, er);
    if (!rc) rc = parse_stop(root, r, er);
    if (!rc) rc = parse_logprobs(root, kind, r, o, er);
    if (!rc && kind == SRV_CHAT) rc = parse_tools(root, o, er);
    size_t n = 0;
    if (!rc) rc = kind == SRV_CHAT ? chat_prompt(e, root, &r->prompt, &n, er) : completion_prompt(e, root, &r->prompt, &n, er);
    r->n_prompt = (int)n;
    if (!rc) rc = parse_limits(e, root, kind, r, er);
    char err[DS_ERRLEN];
    ds_sampler *smp = NULL;
    if (!rc && ds_sampler_new(&r->sp, srv_engine_vocab(e), &smp, err)) rc = srv_seterror(er, 400, "", "invalid_value", "%s", err);
    ds_sampler_free(smp);
    o->reasoning = kind == SRV_CHAT && srv_engine_template(e) == DS_CHAT_DEEPSEEK_R1;
    cJSON_Delete(root);
    return rc;
}
