/* Chat templates: the DeepSeek V3 / R1 / V2 Jinja templates, rendered in C.
 *
 * Each renderer follows its template text statement by statement, including its quirks, so that the
 * output equals HF's Jinja rendering (tests/scripts/tok_chat.sh checks this with @huggingface/jinja):
 *   - V3 (tokenizer_config.json of DeepSeek-V3): system messages joined by "\n\n" before the first turn;
 *     the is_first flag of tool calls is never reset, so only the very first call of the conversation
 *     opens "<｜Assistant｜><｜tool▁calls▁begin｜>", and "<｜tool▁calls▁end｜><｜end▁of▁sentence｜>" follows
 *     each later call; is_output_first is never reset either. An assistant message whose content is
 *     not null renders its content and ignores its tool_calls.
 *   - R1: V3 plus (a) a historical assistant content is cut to the text after its last "</think>" and
 *     (b) the generation prompt is "<｜Assistant｜><think>\n" (spec 15.2).
 *   - V2: "User: ...\n\n", "Assistant: ..." + EOS, system content + "\n\n"; prompt "Assistant:".
 *   - older V3/R1 texts keep only the last system message ({% set ns.system_prompt = message['content'] %});
 *     that variant is detected and followed.
 * The family of a model folder is detected from its chat_template text (ds_chat_template_detect). Later
 * DeepSeek templates (V3-0324 / R1-0528 / V3.1 style: is_last_user, enable_thinking) differ in ways not
 * reproduced here, so they are refused rather than rendered almost right. */
#include "tokenizer/tok_internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

#define BOS_DEEPSEEK "<｜begin▁of▁sentence｜>"
#define EOS_DEEPSEEK "<｜end▁of▁sentence｜>"

static const struct { const char *name; ds_chat_template t; } NAMES[] = {
    {"auto", DS_CHAT_AUTO},
    {"deepseek-v3", DS_CHAT_DEEPSEEK_V3},
    {"deepseek-r1", DS_CHAT_DEEPSEEK_R1},
    {"deepseek-v2", DS_CHAT_DEEPSEEK_V2},
};

ds_status ds_chat_template_from_name(const char *name, ds_chat_template *out, char *err) {
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++)
        if (!strcmp(name, NAMES[i].name)) { *out = NAMES[i].t; return DS_OK; }
    return ds_seterr(err, DS_ERR_ARG, "unknown chat template \"%s\" (deepseek-v3, deepseek-r1, deepseek-v2, auto)", name);
}

const char *ds_chat_template_name(ds_chat_template t) {
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++)
        if (NAMES[i].t == t) return NAMES[i].name;
    return "?";
}

ds_status tok_chat_detect(const char *jinja, ds_chat_template *out, int *sys_last, char *err) {
    *sys_last = 0;
    const char *newer[] = {"is_last_user", "enable_thinking"};
    for (size_t i = 0; i < 2; i++)
        if (strstr(jinja, newer[i]))
            return ds_seterr(err, DS_ERR_UNSUPPORTED,
                             "the model's chat_template is a later DeepSeek variant (it uses %s) that is not "
                             "reproduced exactly; choose one explicitly (--chat-template deepseek-v3|deepseek-r1)",
                             newer[i]);
    if (strstr(jinja, "<｜User｜>") && strstr(jinja, "<｜Assistant｜>")) {
        *out = strstr(jinja, "</think>") ? DS_CHAT_DEEPSEEK_R1 : DS_CHAT_DEEPSEEK_V3;
        *sys_last = !strstr(jinja, "is_first_sp") && strstr(jinja, "set ns.system_prompt = message['content']");
        return DS_OK;
    }
    if (strstr(jinja, "'User: '") && strstr(jinja, "'Assistant:")) {
        *out = DS_CHAT_DEEPSEEK_V2;
        return DS_OK;
    }
    return ds_seterr(err, DS_ERR_UNSUPPORTED,
                     "the model's chat_template is not a known family (DeepSeek V3, R1, V2); "
                     "choose one explicitly (--chat-template deepseek-v3|deepseek-r1|deepseek-v2)");
}

ds_status ds_chat_template_detect(const char *jinja, ds_chat_template *out, char *err) {
    int sys_last;
    return tok_chat_detect(jinja, out, &sys_last, err);
}

/* ---- message helpers ---- */
static int is_role(const ds_chat_msg *m, const char *role) { return m->role && !strcmp(m->role, role); }

static ds_status need_content(const ds_chat_msg *m, int i, char *err) {
    if (m->content) return DS_OK;
    return ds_seterr(err, DS_ERR_ARG, "message %d (%s) has no content", i, m->role ? m->role : "?");
}

/* One parsed tool call of an assistant message. */
typedef struct {
    const char *type, *name;
    char *args;   /* owned */
} chat_call;

static ds_status parse_calls(const ds_chat_msg *m, int i, cJSON **root, chat_call **calls, int *n, char *err) {
    *root = NULL; *calls = NULL; *n = 0;
    if (!m->tool_calls) return ds_seterr(err, DS_ERR_ARG, "message %d: assistant without content or tool_calls", i);
    cJSON *arr = cJSON_Parse(m->tool_calls);
    if (!cJSON_IsArray(arr)) {
        cJSON_Delete(arr);
        return ds_seterr(err, DS_ERR_ARG, "message %d: tool_calls is not a JSON array", i);
    }
    *root = arr;
    *calls = ds_xcalloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof **calls);
    const cJSON *c;
    cJSON_ArrayForEach(c, arr) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(c, "type");
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (!cJSON_IsString(name) || !args)
            return ds_seterr(err, DS_ERR_ARG, "message %d: tool call %d without function name/arguments", i, *n);
        chat_call *cc = &(*calls)[(*n)++];
        cc->type = cJSON_IsString(type) ? type->valuestring : "function";
        cc->name = name->valuestring;
        cc->args = cJSON_IsString(args) ? ds_xstrdup(args->valuestring) : cJSON_PrintUnformatted(args);
    }
    return DS_OK;
}

static void free_calls(cJSON *root, chat_call *calls, int n) {
    for (int i = 0; i < n; i++) free(calls[i].args);
    free(calls);
    cJSON_Delete(root);
}

static void put_call(tok_buf *o, const chat_call *c) {
    tok_buf_puts(o, c->type);
    tok_buf_puts(o, "<｜tool▁sep｜>");
    tok_buf_puts(o, c->name);
    tok_buf_puts(o, "\n```json\n");
    tok_buf_puts(o, c->args);
    tok_buf_puts(o, "\n```<｜tool▁call▁end｜>");
}

/* ---- V3 / R1 ---- */
typedef struct {
    int is_first, is_tool, is_output_first;
} v3_state;

static ds_status v3_tool_calls(const ds_chat_msg *m, int i, v3_state *ns, tok_buf *o, char *err) {
    cJSON *root; chat_call *calls; int n;
    ds_status st = parse_calls(m, i, &root, &calls, &n, err);
    ns->is_tool = 0;
    for (int k = 0; !st && k < n; k++) {
        if (!ns->is_first) {
            tok_buf_puts(o, "<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>");
            put_call(o, &calls[k]);
            ns->is_first = 1;
        } else {
            tok_buf_puts(o, "\n<｜tool▁call▁begin｜>");
            put_call(o, &calls[k]);
            tok_buf_puts(o, "<｜tool▁calls▁end｜><｜end▁of▁sentence｜>");
        }
    }
    free_calls(root, calls, n);
    return st;
}

/* R1: the text after the last "</think>" (Python's content.split('</think>')[-1]). */
static const char *after_think(const char *s) {
    const char *p;
    while ((p = strstr(s, "</think>"))) s = p + strlen("</think>");
    return s;
}

static void v3_assistant(const ds_chat_msg *m, int r1, v3_state *ns, tok_buf *o) {
    if (ns->is_tool) {
        tok_buf_puts(o, "<｜tool▁outputs▁end｜>");
        tok_buf_puts(o, m->content);
        tok_buf_puts(o, "<｜end▁of▁sentence｜>");
        ns->is_tool = 0;
        return;
    }
    tok_buf_puts(o, "<｜Assistant｜>");
    tok_buf_puts(o, r1 ? after_think(m->content) : m->content);
    tok_buf_puts(o, "<｜end▁of▁sentence｜>");
}

static void v3_tool(const ds_chat_msg *m, v3_state *ns, tok_buf *o) {
    ns->is_tool = 1;
    if (ns->is_output_first) {
        tok_buf_puts(o, "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>");
        ns->is_output_first = 0;
    } else {
        tok_buf_puts(o, "\n<｜tool▁output▁begin｜>");
    }
    tok_buf_puts(o, m->content);
    tok_buf_puts(o, "<｜tool▁output▁end｜>");
}

/* The system prompt: all system contents joined by "\n\n", or only the last one (sys_last). */
static ds_status v3_system(const ds_chat_msg *msgs, int n, int sys_last, tok_buf *o, char *err) {
    int first = 1, last = -1;
    for (int i = 0; i < n; i++) {
        if (!is_role(&msgs[i], "system")) continue;
        if (need_content(&msgs[i], i, err)) return DS_ERR_ARG;
        last = i;
        if (sys_last) continue;
        if (!first) tok_buf_puts(o, "\n\n");
        tok_buf_puts(o, msgs[i].content);
        first = 0;
    }
    if (sys_last && last >= 0) tok_buf_puts(o, msgs[last].content);
    return DS_OK;
}

static ds_status render_v3(const char *bos, const ds_chat_msg *msgs, int n, int gen, int r1, int sys_last,
                           tok_buf *o, char *err) {
    tok_buf_puts(o, bos);
    if (v3_system(msgs, n, sys_last, o, err)) return DS_ERR_ARG;
    v3_state ns = {.is_output_first = 1};
    for (int i = 0; i < n; i++) {
        const ds_chat_msg *m = &msgs[i];
        ds_status st = DS_OK;
        if (is_role(m, "user")) {
            if ((st = need_content(m, i, err))) return st;
            ns.is_tool = 0;
            tok_buf_puts(o, "<｜User｜>");
            tok_buf_puts(o, m->content);
        } else if (is_role(m, "assistant")) {
            if (!m->content) st = v3_tool_calls(m, i, &ns, o, err);
            else v3_assistant(m, r1, &ns, o);
        } else if (is_role(m, "tool")) {
            if ((st = need_content(m, i, err))) return st;
            v3_tool(m, &ns, o);
        } else if (!is_role(m, "system")) {
            return ds_seterr(err, DS_ERR_ARG, "message %d: unknown role \"%s\"", i, m->role ? m->role : "(null)");
        }
        if (st) return st;
    }
    if (ns.is_tool) tok_buf_puts(o, "<｜tool▁outputs▁end｜>");
    if (gen && !ns.is_tool) tok_buf_puts(o, r1 ? "<｜Assistant｜><think>\n" : "<｜Assistant｜>");
    return DS_OK;
}

/* ---- V2 ---- */
static ds_status render_v2(const char *bos, const char *eos, const ds_chat_msg *msgs, int n, int gen, tok_buf *o,
                           char *err) {
    tok_buf_puts(o, bos);
    for (int i = 0; i < n; i++) {
        const ds_chat_msg *m = &msgs[i];
        int user = is_role(m, "user"), asst = is_role(m, "assistant"), sys = is_role(m, "system");
        if (!user && !asst && !sys) continue;   /* the V2 template renders no other role */
        if (need_content(m, i, err)) return DS_ERR_ARG;
        if (user) tok_buf_puts(o, "User: ");
        if (asst) tok_buf_puts(o, "Assistant: ");
        tok_buf_puts(o, m->content);
        tok_buf_puts(o, asst ? eos : "\n\n");
    }
    if (gen) tok_buf_puts(o, "Assistant:");
    return DS_OK;
}

ds_status ds_chat_render(const ds_tokenizer *tok, ds_chat_template tpl, const ds_chat_msg *msgs,
                         int n_msgs, int add_generation_prompt, char **out, char *err) {
    *out = NULL;
    int sys_last = 0;   /* explicit templates follow the spec: system messages joined */
    if (tpl == DS_CHAT_AUTO) {
        if (!tok) return ds_seterr(err, DS_ERR_ARG, "no tokenizer and no explicit chat template");
        if (!tok->chat_template)
            return ds_seterr(err, DS_ERR_UNSUPPORTED, "the model has no chat_template; choose one with --chat-template");
        if (tok->tpl == DS_CHAT_AUTO) return ds_seterr(err, DS_ERR_UNSUPPORTED, "%s", tok->tpl_err);
        tpl = tok->tpl;
        sys_last = tok->tpl_sys_last;
    }
    const char *bos = tok && tok->bos_text ? tok->bos_text : BOS_DEEPSEEK;
    const char *eos = tok && tok->eos_text ? tok->eos_text : EOS_DEEPSEEK;
    tok_buf o = {0};
    ds_status st = tpl == DS_CHAT_DEEPSEEK_V2
                       ? render_v2(bos, eos, msgs, n_msgs, add_generation_prompt, &o, err)
                       : render_v3(bos, msgs, n_msgs, add_generation_prompt, tpl == DS_CHAT_DEEPSEEK_R1, sys_last,
                                   &o, err);
    if (st) { tok_buf_free(&o); return st; }
    *out = tok_buf_take(&o, NULL);
    return DS_OK;
}

ds_status ds_chat_template_choose(const ds_tokenizer *tok, const char *name, ds_chat_template *out, char *err) {
    ds_status st = ds_chat_template_from_name(name ? name : "auto", out, err);
    if (st || *out != DS_CHAT_AUTO) return st;
    const char *jinja = ds_tokenizer_chat_template_text(tok);
    if (!jinja) return ds_seterr(err, DS_ERR_UNSUPPORTED, "the model has no chat_template; choose one with --chat-template");
    return ds_chat_template_detect(jinja, out, err);
}
