/* Chat templates.
 *   test_tok_chat                 built-in checks: spec 15 examples, detection, errors
 *   test_tok_chat --cases FILE    conversations rendered by @huggingface/jinja from the templates' own
 *                                 text (tests/tokenizer/gen_chat.js): identical text, and identical ids
 *                                 from the reference tokenizer (one BOS only). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tokenizer/tokenizer.h"

static char *render(const ds_tokenizer *tok, ds_chat_template t, const ds_chat_msg *m, int n, int gen) {
    char *out = NULL, err[DS_ERRLEN];
    ds_status st = ds_chat_render(tok, t, m, n, gen, &out, err);
    CHECKF(st == DS_OK, "%s", err);
    return out;
}

static void builtin(void) {
    ds_chat_msg m[] = {{.role = "system", .content = "You are a good assistant"},
                       {.role = "user", .content = "What is the weather in Copenhagen?"}};
    char *s = render(NULL, DS_CHAT_DEEPSEEK_R1, m, 2, 1);
    CHECK(s && !strcmp(s, "<｜begin▁of▁sentence｜>You are a good assistant<｜User｜>What is the weather in Copenhagen?"
                          "<｜Assistant｜><think>\n"));
    free(s);
    s = render(NULL, DS_CHAT_DEEPSEEK_V3, m, 2, 1);
    CHECK(s && !strcmp(s, "<｜begin▁of▁sentence｜>You are a good assistant<｜User｜>What is the weather in Copenhagen?"
                          "<｜Assistant｜>"));
    free(s);
    s = render(NULL, DS_CHAT_DEEPSEEK_V2, m, 2, 1);
    CHECK(s && !strcmp(s, "<｜begin▁of▁sentence｜>You are a good assistant\n\nUser: What is the weather in Copenhagen?\n\n"
                          "Assistant:"));
    free(s);
    /* names and detection */
    ds_chat_template t;
    char err[DS_ERRLEN];
    CHECK(ds_chat_template_from_name("deepseek-r1", &t, err) == DS_OK && t == DS_CHAT_DEEPSEEK_R1);
    CHECK(ds_chat_template_from_name("chatml", &t, err) == DS_ERR_ARG);
    CHECK(ds_chat_template_detect("{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}", &t, err) ==
          DS_ERR_UNSUPPORTED);
    CHECK(strstr(err, "--chat-template") != NULL);
    /* later DeepSeek variants are refused, not rendered almost right */
    CHECK(ds_chat_template_detect("{{'<｜User｜>' + c}}{% set ns.is_last_user = true %}<｜Assistant｜>", &t, err) ==
          DS_ERR_UNSUPPORTED && strstr(err, "is_last_user"));
    /* the fixture model folder carries the V3 template */
    ds_tokenizer *tok;
    CHECK(ds_tokenizer_load("tests/fixtures/tiny-v3", &tok, err) == DS_OK);
    s = render(tok, DS_CHAT_AUTO, m + 1, 1, 1);
    CHECK(s && !strcmp(s, "<｜begin▁of▁sentence｜><｜User｜>What is the weather in Copenhagen?<｜Assistant｜>"));
    int32_t *ids; size_t n;
    CHECK(ds_tokenizer_encode(tok, s, strlen(s), 0, &ids, &n, err) == DS_OK);
    CHECK(n > 2 && ids[0] == 0 && ids[1] == 3 && ids[n - 1] == 4);   /* one BOS, <｜User｜>, <｜Assistant｜> */
    free(ids);
    free(s);
    /* bad messages are errors, not crashes */
    ds_chat_msg bad[] = {{.role = "assistant"}, {.role = "robot", .content = "x"},
                         {.role = "assistant", .tool_calls = "{not json"}};
    for (int i = 0; i < 3; i++) {
        char *o = NULL;
        CHECK(ds_chat_render(tok, DS_CHAT_AUTO, &bad[i], 1, 1, &o, err) == DS_ERR_ARG && !o);
    }
    ds_tokenizer_free(tok);
}

/* ---- cases from the Jinja reference ---- */
typedef struct { char *path; ds_tokenizer *tok; } cached_tok;
static cached_tok cache[4];

static ds_tokenizer *get_tok(const char *dir) {
    int i = 0;
    for (; i < 4 && cache[i].path; i++) if (!strcmp(cache[i].path, dir)) return cache[i].tok;
    char err[DS_ERRLEN];
    if (i == 4) return NULL;
    cache[i].path = strdup(dir);
    if (ds_tokenizer_load(dir, &cache[i].tok, err)) { fprintf(stderr, "load %s: %s\n", dir, err); cache[i].tok = NULL; }
    return cache[i].tok;
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    s[fread(s, 1, (size_t)n, f)] = 0;
    fclose(f);
    return s;
}

static void check_case(const cJSON *c, int line) {
    const cJSON *msgs = cJSON_GetObjectItem(c, "messages"), *model = cJSON_GetObjectItem(c, "model");
    const cJSON *tfile = cJSON_GetObjectItem(c, "template_file"), *ids = cJSON_GetObjectItem(c, "ids");
    int n = cJSON_GetArraySize(msgs), gen = cJSON_IsTrue(cJSON_GetObjectItem(c, "add_generation_prompt"));
    ds_chat_msg *m = calloc((size_t)n + 1, sizeof *m);
    char **owned = calloc((size_t)n + 1, sizeof *owned);
    for (int i = 0; i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(msgs, i), *content = cJSON_GetObjectItem(e, "content");
        m[i].role = cJSON_GetObjectItem(e, "role")->valuestring;
        m[i].content = cJSON_IsString(content) ? content->valuestring : NULL;
        const cJSON *tc = cJSON_GetObjectItem(e, "tool_calls");
        if (tc) m[i].tool_calls = owned[i] = cJSON_PrintUnformatted(tc);
    }
    ds_tokenizer *tok = cJSON_IsString(model) ? get_tok(model->valuestring) : NULL;
    ds_chat_template t = DS_CHAT_AUTO;
    char err[DS_ERRLEN];
    if (cJSON_IsString(tfile)) {
        char *jinja = read_text(tfile->valuestring);
        CHECKF(jinja && ds_chat_template_detect(jinja, &t, err) == DS_OK, "line %d: detect %s", line, tfile->valuestring);
        free(jinja);
    }
    CHECKF(tok || t != DS_CHAT_AUTO, "line %d: no tokenizer/template", line);
    char *out = NULL;
    if (tok || t != DS_CHAT_AUTO) out = render(tok, t, m, n, gen);
    const char *want = cJSON_GetObjectItem(c, "expected")->valuestring;
    CHECKF(out && !strcmp(out, want), "line %d:\n  want %s\n  got  %s", line, want, out ? out : "(null)");
    if (out && tok && cJSON_IsArray(ids)) {
        int32_t *got; size_t k;
        CHECK(ds_tokenizer_encode(tok, out, strlen(out), 0, &got, &k, err) == DS_OK);
        int same = (int)k == cJSON_GetArraySize(ids);
        for (size_t i = 0; same && i < k; i++) same = got[i] == cJSON_GetArrayItem(ids, (int)i)->valueint;
        CHECKF(same, "line %d: ids of the rendered prompt differ", line);
        CHECKF(k < 2 || got[1] != got[0], "line %d: two BOS", line);
        free(got);
    }
    free(out);
    for (int i = 0; i < n; i++) free(owned[i]);
    free(owned);
    free(m);
}

static void run_cases(const char *path) {
    FILE *f = fopen(path, "r");
    CHECKF(f != NULL, "cannot open %s", path);
    if (!f) return;
    char *line = NULL;
    size_t cap = 0;
    int n = 0;
    while (getline(&line, &cap, f) > 0) {
        cJSON *c = cJSON_Parse(line);
        n++;
        if (c) check_case(c, n);
        cJSON_Delete(c);
    }
    free(line);
    fclose(f);
    printf("%d conversations compared with the Jinja reference\n", n);
    for (int i = 0; i < 4 && cache[i].path; i++) { free(cache[i].path); ds_tokenizer_free(cache[i].tok); }
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--cases")) run_cases(argv[2]);
    else builtin();
    return test_result("test_tok_chat");
}
