/* The server's response rendering without a model: a request's progress is published by hand (as the
 * engine thread would, in small UTF-8-safe pieces) and the streamed SSE chunks and the non-streaming
 * JSON are checked: DeepSeek-V3 tool calls into tool_calls (finish_reason tool_calls), R1 reasoning into
 * reasoning_content, usage, stop_reason, NUL bytes in text, and the error object format. */
#include <string.h>

#include <cjson/cJSON.h>

#include "core/status.h"
#include "server/srv_internal.h"
#include "testutil.h"

static const char TOOL_TEXT[] =
    "Let me check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
    "{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n"
    "{\"tz\": \"CET\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";

/* Publishes text (and one token per call) as the engine thread does. */
static void publish(srv_req *r, const char *text, size_t n, const char *finish) {
    pthread_mutex_lock(&r->mu);
    r->text = ds_xrealloc(r->text, r->text_len + n + 1);
    memcpy(r->text + r->text_len, text, n);
    r->text_len += n;
    r->text[r->text_len] = 0;
    r->toks = ds_xrealloc(r->toks, sizeof(srv_tok) * (size_t)(r->n_toks + 1));
    r->toks[r->n_toks++] = (srv_tok){.id = 7};
    if (finish) { r->finished = 1; r->finish_reason = finish; }
    pthread_mutex_unlock(&r->mu);
}

static srv_req *new_req(void) {
    srv_req *r = srv_req_new();
    r->n_prompt = 5;
    return r;
}

/* Streams `text` in pieces of about `step` bytes (never splitting a UTF-8 sequence); returns the SSE. */
static char *stream_text(const srv_opts *o, const char *text, size_t step) {
    srv_req *r = new_req();
    srv_render *rr = srv_render_new(NULL, r, o);
    size_t len = strlen(text), i = 0, out_len = 0;
    char *out = ds_xstrdup("");
    int complete = 0;
    while (!complete) {
        size_t j = i + step < len ? i + step : len;
        while (j < len && (text[j] & 0xC0) == 0x80) j++;
        if (i < len || !r->finished) publish(r, text + i, j - i, j == len ? "stop" : NULL);
        i = j;
        char *piece;
        size_t n;
        complete = srv_render_stream(rr, &piece, &n);
        out = ds_xrealloc(out, out_len + n + 1);
        if (n) memcpy(out + out_len, piece, n);
        out_len += n;
        out[out_len] = 0;
        free(piece);
    }
    srv_render_free(rr);
    srv_req_release(r);
    return out;
}

typedef struct {
    char content[512], reasoning[512], names[2][64], args[2][128], finish[32];
    int n_chunks, role_first, done, usage_total;
} sse_result;

static void cat(char *dst, size_t cap, const char *s) { strncat(dst, s, cap - strlen(dst) - 1); }

static void parse_sse(const char *sse, sse_result *res) {
    memset(res, 0, sizeof(*res));
    const char *p = sse;
    while ((p = strstr(p, "data: ")) != NULL) {
        p += 6;
        const char *end = strstr(p, "\n\n");
        if (!end) break;
        if (strncmp(p, "[DONE]", 6) == 0) { res->done = 1; break; }
        cJSON *o = cJSON_ParseWithLength(p, (size_t)(end - p));
        CHECKF(o != NULL, "chunk is JSON: %.80s", p);
        if (!o) break;
        const cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0), *u = cJSON_GetObjectItem(o, "usage");
        if (u && cJSON_IsObject(u)) res->usage_total = cJSON_GetObjectItem(u, "total_tokens")->valueint;
        if (choice) {
            const cJSON *d = cJSON_GetObjectItem(choice, "delta"), *f = cJSON_GetObjectItem(choice, "finish_reason");
            if (res->n_chunks == 0) res->role_first = cJSON_IsString(cJSON_GetObjectItem(d, "role"));
            const cJSON *c = cJSON_GetObjectItem(d, "content"), *rc = cJSON_GetObjectItem(d, "reasoning_content");
            if (cJSON_IsString(c)) cat(res->content, sizeof res->content, c->valuestring);
            if (cJSON_IsString(rc)) cat(res->reasoning, sizeof res->reasoning, rc->valuestring);
            if (cJSON_IsString(f)) snprintf(res->finish, sizeof res->finish, "%s", f->valuestring);
            const cJSON *tc;
            cJSON_ArrayForEach(tc, cJSON_GetObjectItem(d, "tool_calls")) {
                int idx = cJSON_GetObjectItem(tc, "index")->valueint;
                const cJSON *fn = cJSON_GetObjectItem(tc, "function"), *name = cJSON_GetObjectItem(fn, "name");
                const cJSON *args = cJSON_GetObjectItem(fn, "arguments");
                if (idx < 0 || idx > 1) continue;
                if (cJSON_IsString(name)) snprintf(res->names[idx], sizeof res->names[idx], "%s", name->valuestring);
                if (cJSON_IsString(args)) cat(res->args[idx], sizeof res->args[idx], args->valuestring);
            }
        }
        res->n_chunks++;
        cJSON_Delete(o);
        p = end;
    }
}

static void test_tool_calls_stream(void) {
    srv_opts o = {.kind = SRV_CHAT, .stream = 1, .want_tools = 1, .include_usage = 1, .model = "m"};
    size_t steps[] = {1, 3, 7, 1000};
    for (size_t s = 0; s < sizeof steps / sizeof steps[0]; s++) {
        char *sse = stream_text(&o, TOOL_TEXT, steps[s]);
        sse_result res;
        parse_sse(sse, &res);
        CHECKF(res.role_first && res.done, "step %zu: role first, [DONE] last", steps[s]);
        CHECKF(strcmp(res.content, "Let me check.") == 0, "step %zu: content \"%s\"", steps[s], res.content);
        CHECKF(strcmp(res.names[0], "get_weather") == 0 && strcmp(res.names[1], "get_time") == 0, "step %zu: names %s %s",
               steps[s], res.names[0], res.names[1]);
        CHECKF(strcmp(res.args[0], "{\"city\": \"Paris\"}") == 0 && strcmp(res.args[1], "{\"tz\": \"CET\"}") == 0,
               "step %zu: arguments %s | %s", steps[s], res.args[0], res.args[1]);
        CHECKF(strcmp(res.finish, "tool_calls") == 0, "step %zu: finish_reason %s", steps[s], res.finish);
        CHECKF(res.usage_total > 5, "step %zu: usage chunk", steps[s]);
        free(sse);
    }
}

static char last_raw[4096];   /* the last response as sent */

static cJSON *full_response(const srv_opts *o, const char *text, size_t len, const char *finish, int stop_index) {
    srv_req *r = new_req();
    r->stop[0] = ds_xstrdup("STOP");
    r->n_stop = 1;
    publish(r, text, len, finish);
    r->stop_index = stop_index;
    srv_render *rr = srv_render_new(NULL, r, o);
    char *s = srv_render_full(rr);
    cJSON *j = cJSON_Parse(s);
    CHECKF(j != NULL, "response is JSON: %s", s);
    snprintf(last_raw, sizeof last_raw, "%s", s);
    free(s);
    srv_render_free(rr);
    srv_req_release(r);
    return j;
}

static const cJSON *msg_of(const cJSON *j) {
    return cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "message");
}

static void test_full_responses(void) {
    srv_opts o = {.kind = SRV_CHAT, .want_tools = 1, .model = "m"};
    cJSON *j = full_response(&o, TOOL_TEXT, strlen(TOOL_TEXT), "stop", -1);
    const cJSON *m = msg_of(j), *calls = cJSON_GetObjectItem(m, "tool_calls");
    CHECK(cJSON_GetArraySize(calls) == 2);
    const cJSON *fn = cJSON_GetObjectItem(cJSON_GetArrayItem(calls, 1), "function");
    CHECK(strcmp(cJSON_GetObjectItem(fn, "name")->valuestring, "get_time") == 0);
    CHECK(strcmp(cJSON_GetObjectItem(fn, "arguments")->valuestring, "{\"tz\": \"CET\"}") == 0);
    CHECK(strcmp(cJSON_GetObjectItem(m, "content")->valuestring, "Let me check.") == 0);
    CHECK(strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "finish_reason")->valuestring, "tool_calls") == 0);
    cJSON_Delete(j);

    srv_opts r1 = {.kind = SRV_CHAT, .reasoning = 1, .model = "m"};
    j = full_response(&r1, "think hard</think>The answer.", 29, "stop", 0);
    m = msg_of(j);
    CHECK(strcmp(cJSON_GetObjectItem(m, "reasoning_content")->valuestring, "think hard") == 0);
    CHECK(strcmp(cJSON_GetObjectItem(m, "content")->valuestring, "The answer.") == 0);
    CHECK(strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "stop_reason")->valuestring, "STOP") == 0);
    cJSON_Delete(j);
    j = full_response(&r1, "still thinking", 14, "length", -1);   /* no </think>: all reasoning, content null */
    m = msg_of(j);
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(m, "content")));
    CHECK(strcmp(cJSON_GetObjectItem(m, "reasoning_content")->valuestring, "still thinking") == 0);
    cJSON_Delete(j);

    srv_opts c = {.kind = SRV_COMPLETION, .model = "m"};
    j = full_response(&c, "a\0b\"\n", 5, "length", -1);   /* NUL, quote and newline survive */
    CHECKF(strstr(last_raw, "\"text\":\"a\\u0000b\\\"\\n\"") != NULL, "text with NUL sent as %s", last_raw);
    const cJSON *u = cJSON_GetObjectItem(j, "usage");
    CHECK(cJSON_GetObjectItem(u, "prompt_tokens")->valueint == 5 && cJSON_GetObjectItem(u, "completion_tokens")->valueint == 1 &&
          cJSON_GetObjectItem(u, "total_tokens")->valueint == 6);
    cJSON_Delete(j);
}

static void test_r1_stream(void) {
    srv_opts o = {.kind = SRV_CHAT, .stream = 1, .reasoning = 1, .model = "m"};
    const char *text = "Hmm, 2 + 2 is 4.</think>It is 4.";
    for (size_t step = 1; step < 12; step += 5) {
        char *sse = stream_text(&o, text, step);
        sse_result res;
        parse_sse(sse, &res);
        CHECKF(strcmp(res.reasoning, "Hmm, 2 + 2 is 4.") == 0 && strcmp(res.content, "It is 4.") == 0,
               "step %zu: reasoning \"%s\" content \"%s\"", step, res.reasoning, res.content);
        CHECK(strcmp(res.finish, "stop") == 0 && res.done);
        free(sse);
    }
}

static void test_error_json(void) {
    srv_error er;
    CHECK(srv_seterror(&er, 400, "max_tokens", "invalid_value", "'%s' must be at least 1", "max_tokens") == -1);
    char *s = srv_error_json(&er);
    cJSON *j = cJSON_Parse(s), *e = cJSON_GetObjectItem(j, "error");
    CHECK(strcmp(cJSON_GetObjectItem(e, "type")->valuestring, "invalid_request_error") == 0);
    CHECK(strcmp(cJSON_GetObjectItem(e, "param")->valuestring, "max_tokens") == 0);
    CHECK(strcmp(cJSON_GetObjectItem(e, "code")->valuestring, "invalid_value") == 0);
    CHECK(strstr(cJSON_GetObjectItem(e, "message")->valuestring, "at least 1") != NULL);
    cJSON_Delete(j);
    free(s);
}

int main(void) {
    test_tool_calls_stream();
    test_full_responses();
    test_r1_stream();
    test_error_json();
    return test_result("test_sched_server");
}
