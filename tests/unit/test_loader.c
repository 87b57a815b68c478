/* Loading checkpoints: the forms users download (single file, shards with an index, the released and
 * the transformers-5 config spellings) load and give the reference logits; broken checkpoints (made
 * here from a fixture: truncated, wrong shape, missing tensor, bad JSON, bad header, unknown
 * architecture, missing shard, FP8 without scales) give the right status and a message naming the
 * file and tensor, from the API and from the CLI (exit code and stderr). */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/file.h"
#include "dsinfer.h"
#include "golden.h"
#include "testutil.h"

static char tmp_root[256];

/* The whole file (NUL-terminated), or NULL. */
static char *read_all(const char *path, size_t *n) { return ds_read_file(path, (size_t)1 << 30, n); }

static void write_all(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); exit(1); }
    fwrite(data, 1, n, f);
    fclose(f);
}

/* A fresh case folder under tmp_root holding a copy of fixture `src`'s config.json. */
static void make_case(char *dir, size_t n, const char *name, const char *src) {
    snprintf(dir, n, "%s/%s", tmp_root, name);
    mkdir(dir, 0755);
    char p[700];
    size_t len;
    snprintf(p, sizeof p, "%s/%s/config.json", fixtures_dir(), src);
    char *cfg = read_all(p, &len);
    snprintf(p, sizeof p, "%s/config.json", dir);
    write_all(p, cfg, len);
    free(cfg);
}

/* Splits a safetensors blob into its parsed header and a pointer to the data. */
static cJSON *split_st(const char *blob, size_t n, const char **data, size_t *data_n) {
    uint64_t h;
    memcpy(&h, blob, 8);
    *data = blob + 8 + h;
    *data_n = n - 8 - h;
    return cJSON_ParseWithLength(blob + 8, h);
}

static void write_st(const char *path, cJSON *hdr, const char *data, size_t data_n) {
    char *txt = cJSON_PrintUnformatted(hdr);
    uint64_t h = strlen(txt);
    FILE *f = fopen(path, "wb");
    fwrite(&h, 8, 1, f);
    fwrite(txt, 1, h, f);
    fwrite(data, 1, data_n, f);
    fclose(f);
    free(txt);
}

typedef void (*mutate_fn)(cJSON *hdr);

/* Case folder whose model.safetensors is the fixture's with its header changed by mut. */
static void make_mutated(char *dir, size_t n, const char *name, const char *src, mutate_fn mut) {
    make_case(dir, n, name, src);
    char p[700];
    size_t len, dn;
    const char *data;
    snprintf(p, sizeof p, "%s/%s/model.safetensors", fixtures_dir(), src);
    char *blob = read_all(p, &len);
    cJSON *hdr = split_st(blob, len, &data, &dn);
    if (mut) mut(hdr);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    write_st(p, hdr, data, dn);
    cJSON_Delete(hdr);
    free(blob);
}

static void mut_wrong_shape(cJSON *h) {
    cJSON *t = cJSON_GetObjectItem(h, "model.layers.1.self_attn.kv_b_proj.weight");
    cJSON *shape = cJSON_GetObjectItem(t, "shape");
    int r = cJSON_GetArrayItem(shape, 0)->valueint, c = cJSON_GetArrayItem(shape, 1)->valueint;
    cJSON_ReplaceItemInArray(shape, 0, cJSON_CreateNumber(c));   /* transposed: same bytes, wrong shape */
    cJSON_ReplaceItemInArray(shape, 1, cJSON_CreateNumber(r));
}
static void mut_missing(cJSON *h) { cJSON_DeleteItemFromObject(h, "model.layers.2.mlp.experts.3.up_proj.weight"); }
static void mut_bad_offsets(cJSON *h) {
    cJSON *t = cJSON_GetObjectItem(h, "model.norm.weight");
    cJSON_ReplaceItemInObject(t, "data_offsets", cJSON_Parse("[0, 4]"));
}
static void mut_no_scale(cJSON *h) { cJSON_DeleteItemFromObject(h, "model.layers.0.self_attn.o_proj.weight_scale_inv"); }
static void mut_bad_dtype(cJSON *h) {
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(h, "model.norm.weight"), "dtype", cJSON_CreateString("Q4_K"));
}

/* Expects ds_engine_open(dir) to fail with st and a message holding `needle`, and the CLI to exit
 * with the matching code and print the message. */
static void expect_open_error(const char *dir, ds_status want, const char *needle) {
    char err[DS_ERRLEN] = "";
    ds_engine *e = NULL;
    ds_engine_opts o = {.n_threads = 1};
    ds_status st = ds_engine_open(dir, &o, &e, err);
    CHECKF(st == want, "%s: status %d (%s), want %d", dir, st, err, want);
    CHECKF(strstr(err, needle) != NULL, "%s: message \"%s\" lacks \"%s\"", dir, err, needle);
    CHECK(e == NULL);
    ds_engine_free(e);
    const char *bin = getenv("DSINFER_BIN");
    if (!bin) return;
    char cmd[2048], out[700];
    snprintf(out, sizeof out, "%s/stderr.txt", tmp_root);
    snprintf(cmd, sizeof cmd, "%s logits --model %s --ids 0,5 --out %s/x.npy 2>%s", bin, dir, tmp_root, out);
    int rc = system(cmd);
    int code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    int want_code = want == DS_ERR_IO ? 3 : want == DS_ERR_FORMAT ? 4 : want == DS_ERR_UNSUPPORTED ? 5 : -2;
    CHECKF(code == want_code, "CLI on %s exited %d, want %d", dir, code, want_code);
    size_t n;
    char *msg = read_all(out, &n);
    CHECKF(msg && strstr(msg, "error:") && strstr(msg, needle), "CLI stderr \"%s\" lacks \"%s\"", msg ? msg : "", needle);
    free(msg);
}

static void test_broken(void) {
    char d[512], p[700];
    make_mutated(d, sizeof d, "wrong_shape", "tiny-v3", mut_wrong_shape);
    expect_open_error(d, DS_ERR_FORMAT, "model.layers.1.self_attn.kv_b_proj.weight has shape [32, 256], expected [256, 32]");
    make_mutated(d, sizeof d, "missing", "tiny-v3", mut_missing);
    expect_open_error(d, DS_ERR_FORMAT, "missing tensor model.layers.2.mlp.experts.3.up_proj.weight");
    make_mutated(d, sizeof d, "bad_offsets", "tiny-v3", mut_bad_offsets);
    expect_open_error(d, DS_ERR_FORMAT, "model.norm.weight: 4 bytes for 128 elements of BF16");
    make_mutated(d, sizeof d, "no_scale", "tiny-v3-fp8", mut_no_scale);
    expect_open_error(d, DS_ERR_FORMAT, "o_proj.weight_scale_inv is missing");
    make_mutated(d, sizeof d, "bad_dtype", "tiny-v3", mut_bad_dtype);
    expect_open_error(d, DS_ERR_UNSUPPORTED, "model.norm.weight: unsupported dtype Q4_K");

    /* truncated: the last tensor's bytes run past the end of the file */
    make_mutated(d, sizeof d, "truncated", "tiny-v3", NULL);
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    size_t n;
    char *blob = read_all(p, &n);
    write_all(p, blob, n - 1000);
    free(blob);
    expect_open_error(d, DS_ERR_FORMAT, "truncated file?");
    /* header length beyond the file */
    write_all(p, "\xff\xff\xff\x00\x00\x00\x00\x00{}", 10);
    expect_open_error(d, DS_ERR_FORMAT, "model.safetensors: header length");
    /* header that is not JSON */
    write_all(p, "\x04\x00\x00\x00\x00\x00\x00\x00{{{{", 12);
    expect_open_error(d, DS_ERR_FORMAT, "header is not a valid JSON object");

    make_case(d, sizeof d, "bad_json", "tiny-v3");
    snprintf(p, sizeof p, "%s/config.json", d);
    write_all(p, "{\"architectures\": [", 19);
    expect_open_error(d, DS_ERR_FORMAT, "config.json: not a valid JSON object");
    write_all(p, "{\"architectures\": [\"LlamaForCausalLM\"]}", 39);
    expect_open_error(d, DS_ERR_UNSUPPORTED, "unsupported architecture \"LlamaForCausalLM\"");
    make_case(d, sizeof d, "no_weights", "tiny-v3");
    expect_open_error(d, DS_ERR_IO, "no model.safetensors or model.safetensors.index.json");
    snprintf(d, sizeof d, "%s/does_not_exist", tmp_root);
    expect_open_error(d, DS_ERR_IO, "config.json: cannot open");
}

/* Splits the fixture's tensors over two shards plus an index (as released checkpoints are) and
 * rewrites config.json in the transformers-5 form (rope_parameters); logits must stay the reference's. */
static void make_sharded(const char *src, char *dir, size_t dn) {
    make_case(dir, dn, "sharded", src);
    char p[700];
    size_t len, data_n;
    const char *data;
    snprintf(p, sizeof p, "%s/%s/model.safetensors", fixtures_dir(), src);
    char *blob = read_all(p, &len);
    cJSON *hdr = split_st(blob, len, &data, &data_n);
    cJSON *shard[2] = {cJSON_CreateObject(), cJSON_CreateObject()}, *map = cJSON_CreateObject();
    size_t off[2] = {0, 0};
    char *buf[2] = {malloc(data_n), malloc(data_n)};
    int i = 0;
    for (cJSON *t = hdr->child; t; t = t->next, i++) {
        if (!strcmp(t->string, "__metadata__")) continue;
        int s = i % 2;   /* alternate, so a weight and its scale often land in different shards */
        cJSON *o = cJSON_GetObjectItem(t, "data_offsets");
        size_t b = (size_t)cJSON_GetArrayItem(o, 0)->valuedouble, e = (size_t)cJSON_GetArrayItem(o, 1)->valuedouble;
        memcpy(buf[s] + off[s], data + b, e - b);
        cJSON *nt = cJSON_Duplicate(t, 1);
        cJSON_ReplaceItemInObject(nt, "data_offsets", cJSON_CreateIntArray((int[]){(int)off[s], (int)(off[s] + e - b)}, 2));
        cJSON_AddItemToObject(shard[s], t->string, nt);
        cJSON_AddStringToObject(map, t->string, s ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors");
        off[s] += e - b;
    }
    for (int s = 0; s < 2; s++) {
        snprintf(p, sizeof p, "%s/model-0000%d-of-00002.safetensors", dir, s + 1);
        write_st(p, shard[s], buf[s], off[s]);
        cJSON_Delete(shard[s]);
        free(buf[s]);
    }
    cJSON *index = cJSON_CreateObject();
    cJSON_AddItemToObject(index, "metadata", cJSON_CreateObject());
    cJSON_AddItemToObject(index, "weight_map", map);
    char *txt = cJSON_Print(index);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    write_all(p, txt, strlen(txt));
    free(txt);
    cJSON_Delete(index);
    cJSON_Delete(hdr);
    free(blob);
    /* config in the transformers >= 5 spelling */
    snprintf(p, sizeof p, "%s/config.json", dir);
    char *cfg = read_all(p, &len);
    cJSON *c = cJSON_Parse(cfg);
    cJSON *rs = cJSON_DetachItemFromObject(c, "rope_scaling");
    cJSON *theta = cJSON_DetachItemFromObject(c, "rope_theta");
    cJSON_DeleteItemFromObject(rs, "type");
    cJSON_AddStringToObject(rs, "rope_type", "yarn");
    cJSON_AddItemToObject(rs, "rope_theta", theta);
    cJSON_AddItemToObject(c, "rope_parameters", rs);
    txt = cJSON_Print(c);
    write_all(p, txt, strlen(txt));
    free(txt);
    free(cfg);
    cJSON_Delete(c);
}

static void test_sharded(const char *src) {
    char d[512], gp[700], err[DS_ERRLEN];
    make_sharded(src, d, sizeof d);
    snprintf(gp, sizeof gp, "%s/%s/golden.safetensors", fixtures_dir(), src);
    ds_st_set *g;
    ds_engine *e;
    ds_engine_opts o = {.n_threads = 2, .kv_cache_dtype = "fp32"};   /* the reference's numbers */
    CHECK(ds_st_open_file(gp, &g, err) == DS_OK);
    CHECKF(ds_engine_open(d, &o, &e, err) == DS_OK, "sharded %s: %s", src, err);
    const ds_st_tensor *ids = golden_get(g, 0, "input_ids"), *ref = golden_get(g, 0, "logits");
    int T = (int)ids->numel, V = ds_engine_vocab_size(e);
    float *out = malloc(sizeof(float) * (size_t)T * V);
    ds_seq *s;
    ds_seq_new(e, &s, err);
    ds_batch_item it = {.seq = s, .tokens = ids->data, .n_tokens = T, .all_logits = 1};
    CHECK(ds_engine_forward(e, &it, 1, out, err) == DS_OK);
    diff_stats ds = diff_f32(out, ref->data, (size_t)T * V);
    CHECKF(ds.max_abs <= 1e-3 && ds.rel_l2 <= 1e-4, "sharded %s: max abs %g rel %g", src, ds.max_abs, ds.rel_l2);
    free(out);
    ds_seq_free(s);
    ds_engine_free(e);
    /* a shard gone: the error names it */
    char p[700];
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", d);
    unlink(p);
    expect_open_error(d, DS_ERR_IO, "model-00002-of-00002.safetensors: cannot open");
    ds_st_close(g);
}

/* Adds an MTP module (layer num_hidden_layers = 3 of tiny-v3: a copy of layer 2 plus enorm, hnorm,
 * eh_proj [D, 2D] and shared_head.norm) to the fixture. eh_cols sets eh_proj's second dimension. */
static void make_mtp(char *dir, size_t dn, const char *name, int eh_cols) {
    make_case(dir, dn, name, "tiny-v3");
    char p[700];
    size_t len, data_n;
    const char *data;
    snprintf(p, sizeof p, "%s/tiny-v3/model.safetensors", fixtures_dir());
    char *blob = read_all(p, &len);
    cJSON *hdr = split_st(blob, len, &data, &data_n);
    const int D = 128;
    size_t extra = (size_t)D * eh_cols * 2 + 3 * (size_t)D * 2, cap = 2 * data_n + extra, off = data_n;
    char *buf = calloc(1, cap);
    memcpy(buf, data, data_n);
    cJSON *add = cJSON_CreateObject();
    for (cJSON *t = hdr->child; t; t = t->next) {
        if (strncmp(t->string, "model.layers.2.", 15)) continue;
        char nm[256];
        snprintf(nm, sizeof nm, "model.layers.3.%s", t->string + 15);
        cJSON_AddItemToObject(add, nm, cJSON_Duplicate(t, 1));   /* same bytes, shared offsets */
    }
    const char *norms[] = {"model.layers.3.enorm.weight", "model.layers.3.hnorm.weight", "model.layers.3.shared_head.norm.weight"};
    for (int i = 0; i < 3; i++) {
        char e[160];
        snprintf(e, sizeof e, "{\"dtype\":\"BF16\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}", D, off, off + 2 * D);
        cJSON_AddItemToObject(add, norms[i], cJSON_Parse(e));
        off += 2 * D;
    }
    char e[160];
    snprintf(e, sizeof e, "{\"dtype\":\"BF16\",\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]}", D, eh_cols, off,
             off + (size_t)2 * D * eh_cols);
    cJSON_AddItemToObject(add, "model.layers.3.eh_proj.weight", cJSON_Parse(e));
    off += (size_t)2 * D * eh_cols;
    for (cJSON *t = add->child; t;) {
        cJSON *next = t->next;
        cJSON_AddItemToObject(hdr, t->string, cJSON_DetachItemViaPointer(add, t));
        t = next;
    }
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    write_st(p, hdr, buf, off);
    cJSON_Delete(add);
    cJSON_Delete(hdr);
    free(buf);
    free(blob);
}

static void test_mtp(void) {
    char d[512], err[DS_ERRLEN];
    make_mtp(d, sizeof d, "mtp", 256);
    ds_engine *e = NULL;
    ds_engine_opts o = {.n_threads = 1};
    CHECKF(ds_engine_open(d, &o, &e, err) == DS_OK, "%s", err);
    if (e) CHECKF(strstr(ds_engine_describe(e), "MTP layer present") != NULL, "%s", ds_engine_describe(e));
    ds_engine_free(e);
    make_mtp(d, sizeof d, "mtp_bad", 200);
    expect_open_error(d, DS_ERR_FORMAT, "model.layers.3.eh_proj.weight has shape [128, 200], expected [128, 256]");
}

int main(void) {
    snprintf(tmp_root, sizeof tmp_root, "/tmp/dsinfer-test-loader-XXXXXX");
    if (!mkdtemp(tmp_root)) { perror("mkdtemp"); return 1; }
    test_broken();
    test_sharded("tiny-v3");
    test_mtp();
    test_sharded("tiny-v3-fp8");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp_root);
    return test_result("test_loader");
}
