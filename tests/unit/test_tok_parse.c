/* Output parsing: R1 reasoning split and DeepSeek-V3 tool calls, fed whole and one byte at a time
 * (streaming must give the same concatenated result as one feed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tokenizer/tokenizer.h"

typedef struct { char r[4096], c[4096]; int in_reasoning; } split_out;

/* Feeds text in chunks of `chunk` bytes (0 = whole) and concatenates the deltas. */
static void split(const char *text, int start_in_reasoning, size_t chunk, split_out *o) {
    memset(o, 0, sizeof *o);
    ds_reasoning *r = ds_reasoning_new(start_in_reasoning);
    ds_reasoning_delta d;
    size_t n = strlen(text), step = chunk ? chunk : n ? n : 1;
    for (size_t i = 0; i < n; i += step) {
        ds_reasoning_feed(r, text + i, i + step > n ? n - i : step, &d);
        strncat(o->r, d.reasoning, d.reasoning_len);
        strncat(o->c, d.content, d.content_len);
    }
    ds_reasoning_finish(r, &d);
    strncat(o->r, d.reasoning, d.reasoning_len);
    strncat(o->c, d.content, d.content_len);
    o->in_reasoning = ds_reasoning_in_reasoning(r);
    ds_reasoning_free(r);
}

static void check_split(const char *text, int start, const char *want_r, const char *want_c) {
    for (size_t chunk = 0; chunk < 4; chunk++) {
        split_out o;
        split(text, start, chunk, &o);
        CHECKF(!strcmp(o.r, want_r) && !strcmp(o.c, want_c), "text \"%s\" chunk %zu: reasoning \"%s\" content \"%s\"",
               text, chunk, o.r, o.c);
    }
}

static void test_reasoning(void) {
    check_split("Let me think.\n</think>\n\nThe answer is 4.", 1, "Let me think.\n", "\n\nThe answer is 4.");
    check_split("<think>\nR1-0528 style</think>answer", 1, "\nR1-0528 style", "answer");
    check_split("no end tag, all reasoning", 1, "no end tag, all reasoning", "");
    check_split("ends with a partial </thi", 1, "ends with a partial </thi", "");
    check_split("a < b and </ c </think>x</think>y", 1, "a < b and </ c ", "x</think>y");
    check_split("plain V3 answer <think>", 0, "", "plain V3 answer <think>");
    check_split("", 1, "", "");
}

/* ---- tool calls ---- */
typedef struct { char content[4096], names[256], args[4096], final_args[4096]; int begins, ends, valid; } tool_out;

static void collect(const ds_tool_event *ev, int n, tool_out *o) {
    for (int i = 0; i < n; i++) {
        const ds_tool_event *e = &ev[i];
        if (e->kind == DS_TOOL_EV_CONTENT) strncat(o->content, e->text, e->len);
        if (e->kind == DS_TOOL_EV_ARGS) strncat(o->args, e->text, e->len);
        if (e->kind == DS_TOOL_EV_CALL_BEGIN) { o->begins++; strcat(o->names, e->name); strcat(o->names, ";"); }
        if (e->kind == DS_TOOL_EV_CALL_END) {
            o->ends++; o->valid += e->args_valid_json;
            strncat(o->final_args, e->text, e->len); strcat(o->final_args, ";");
            strcat(o->args, ";");
        }
    }
}

static void parse_tools(const char *text, size_t chunk, tool_out *o) {
    memset(o, 0, sizeof *o);
    ds_toolparse *p = ds_toolparse_new();
    const ds_tool_event *ev;
    int n;
    size_t len = strlen(text), step = chunk ? chunk : len ? len : 1;
    for (size_t i = 0; i < len; i += step) {
        ds_toolparse_feed(p, text + i, i + step > len ? len - i : step, &ev, &n);
        collect(ev, n, o);
    }
    ds_toolparse_finish(p, &ev, &n);
    collect(ev, n, o);
    ds_toolparse_free(p);
}

static void test_tools(void) {
    const char *two =
        "Let me check.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
        "{\"location\": \"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n"
        "```json\n{\"tz\": \"CET\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    for (size_t chunk = 0; chunk < 8; chunk++) {
        tool_out o;
        parse_tools(two, chunk, &o);
        CHECKF(!strcmp(o.content, "Let me check."), "chunk %zu: content \"%s\"", chunk, o.content);
        CHECKF(!strcmp(o.names, "get_weather;get_time;"), "chunk %zu: names %s", chunk, o.names);
        CHECKF(!strcmp(o.final_args, "{\"location\": \"Paris\"};{\"tz\": \"CET\"};"), "chunk %zu: %s", chunk, o.final_args);
        CHECKF(!strcmp(o.args, o.final_args), "chunk %zu: streamed args \"%s\"", chunk, o.args);
        CHECK(o.begins == 2 && o.ends == 2 && o.valid == 2);
    }
    tool_out o;
    parse_tools("Just text with a < and a <｜tool", 1, &o);
    CHECK(!strcmp(o.content, "Just text with a < and a <｜tool") && o.begins == 0);
    /* unterminated call (generation stopped): ends with what it has */
    parse_tools("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": 1", 3, &o);
    CHECK(o.begins == 1 && o.ends == 1 && !strcmp(o.final_args, "{\"a\": 1;") && o.valid == 0);
}

/* Generated ids -> streaming detokenizer -> reasoning splitter -> tool-call parser, one id at a time, as
 * the server chains them (fixture tokenizer: <think> 5 and </think> 6 are added tokens). */
static void test_pipeline(void) {
    ds_tokenizer *tok;
    char err[DS_ERRLEN];
    if (ds_tokenizer_load("tests/fixtures/tiny-v3", &tok, err)) { CHECKF(0, "%s", err); return; }
    const char *out = "Weather needed \xe2\x98\x81 first.\n</think>\n\nChecking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
                      "function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Oslo\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    int32_t *ids; size_t n;
    CHECK(ds_tokenizer_encode(tok, out, strlen(out), 0, &ids, &n, err) == DS_OK);
    ds_detok *d = ds_detok_new(tok, 0);
    ds_reasoning *r = ds_reasoning_new(1);
    ds_toolparse *p = ds_toolparse_new();
    tool_out o;
    memset(&o, 0, sizeof o);
    char reasoning[512] = "";
    ds_reasoning_delta rd;
    const ds_tool_event *ev;
    int nev;
    for (size_t i = 0; i <= n; i++) {
        size_t k;
        const char *text = i < n ? ds_detok_push(d, ids[i], &k) : ds_detok_flush(d, &k);
        if (i < n) ds_reasoning_feed(r, text, k, &rd); else ds_reasoning_finish(r, &rd);
        strncat(reasoning, rd.reasoning, rd.reasoning_len);
        ds_toolparse_feed(p, rd.content, rd.content_len, &ev, &nev);
        collect(ev, nev, &o);
    }
    ds_toolparse_finish(p, &ev, &nev);
    collect(ev, nev, &o);
    CHECKF(!strcmp(reasoning, "Weather needed \xe2\x98\x81 first.\n"), "reasoning \"%s\"", reasoning);
    CHECKF(!strcmp(o.content, "\n\nChecking."), "content \"%s\"", o.content);
    CHECK(!strcmp(o.names, "get_weather;") && !strcmp(o.final_args, "{\"city\": \"Oslo\"};") && o.valid == 1);
    ds_toolparse_free(p);
    ds_reasoning_free(r);
    ds_detok_free(d);
    free(ids);
    ds_tokenizer_free(tok);
}

int main(void) {
    test_pipeline();
    test_reasoning();
    test_tools();
    return test_result("test_tok_parse");
}
