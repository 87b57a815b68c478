/* Unit tests of the pieces under the forward pass: dtype decoding, config derivation (YaRN
 * frequencies, softmax scale, amplitude; spec 6.5 / 7.2 values), MoE routing rules (spec 9.2), the KV
 * page pool, and the sampler. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "core/dtype.h"
#include "kv/kv_pool.h"
#include "loader/config.h"
#include "testutil.h"

#define NEAR(a, b, tol) (fabs((double)(a) - (double)(b)) <= (tol))

static const char *V3_CONFIG =
    "{\"architectures\":[\"DeepseekV3ForCausalLM\"],\"vocab_size\":129280,\"hidden_size\":7168,"
    "\"intermediate_size\":18432,\"moe_intermediate_size\":2048,\"num_hidden_layers\":61,\"num_attention_heads\":128,"
    "\"q_lora_rank\":1536,\"kv_lora_rank\":512,\"qk_nope_head_dim\":128,\"qk_rope_head_dim\":64,\"v_head_dim\":128,"
    "\"n_routed_experts\":256,\"num_experts_per_tok\":8,\"n_shared_experts\":1,\"first_k_dense_replace\":3,"
    "\"moe_layer_freq\":1,\"scoring_func\":\"sigmoid\",\"topk_method\":\"noaux_tc\",\"n_group\":8,\"topk_group\":4,"
    "\"norm_topk_prob\":true,\"routed_scaling_factor\":2.5,\"rms_norm_eps\":1e-6,\"rope_theta\":10000,"
    "\"rope_scaling\":{\"beta_fast\":32,\"beta_slow\":1,\"factor\":40,\"mscale\":1.0,\"mscale_all_dim\":1.0,"
    "\"original_max_position_embeddings\":4096,\"type\":\"yarn\"},\"max_position_embeddings\":163840}";

static void test_dtypes(void) {
    ds_dtype_init();
    CHECK(ds_fp8_e4m3_to_f32(0x7e) == 448.0f);           /* max finite */
    CHECK(ds_fp8_e4m3_to_f32(0xfe) == -448.0f);
    CHECK(isnan(ds_fp8_e4m3_to_f32(0x7f)) && isnan(ds_fp8_e4m3_to_f32(0xff)));
    CHECK(ds_fp8_e4m3_to_f32(0x01) == ldexpf(1.0f, -9)); /* smallest subnormal 2^-6 * 1/8 */
    CHECK(ds_fp8_e4m3_to_f32(0x38) == 1.0f);
    CHECK(ds_fp8_e4m3_to_f32(0x00) == 0.0f);
    CHECK(ds_bf16_to_f32(0x3f80) == 1.0f);
    CHECK(ds_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(ds_f32_to_bf16(1.00390625f) == 0x3f80);        /* tie rounds to even */
    CHECK(ds_f16_to_f32(0x3c00) == 1.0f && ds_f16_to_f32(0xc000) == -2.0f);
    CHECK(ds_dtype_parse("F8_E4M3") == DS_DTYPE_F8_E4M3 && ds_dtype_parse("Q4_K") == -1);
}

static void test_config_v3(void) {
    ds_config c;
    char err[DS_ERRLEN];
    CHECKF(ds_config_parse(V3_CONFIG, "v3", &c, err) == DS_OK, "%s", err);
    CHECK(c.arch == DS_ARCH_V3 && c.qk_head_dim == 192);
    CHECKF(NEAR(c.softmax_scale, 0.1352338, 1e-6), "softmax scale %.7f", c.softmax_scale);
    CHECK(c.rope_amplitude == 1.0f);
    /* spec 7.2 table */
    CHECK(NEAR(c.inv_freq[0], 1.0, 1e-9) && NEAR(c.inv_freq[10], 5.623413e-02, 1e-8));
    CHECKF(NEAR(c.inv_freq[11], 3.900693e-02, 1e-8), "%g", c.inv_freq[11]);
    CHECKF(NEAR(c.inv_freq[16], 5.500000e-03, 1e-9), "%g", c.inv_freq[16]);
    CHECKF(NEAR(c.inv_freq[23], 3.333804e-05, 1e-11), "%g", c.inv_freq[23]);
    CHECKF(NEAR(c.inv_freq[31], 3.333804e-06, 1e-12), "%g", c.inv_freq[31]);
    CHECK(!ds_config_layer_is_moe(&c, 2) && ds_config_layer_is_moe(&c, 3));
}

static void test_config_variants(void) {
    ds_config c;
    char err[DS_ERRLEN], buf[4096];
    /* V2-Lite: mscale 0.707 -> sigma 0.1147214, amplitude 1 */
    const char *lite = "{\"architectures\":[\"DeepseekV2ForCausalLM\"],\"vocab_size\":102400,\"hidden_size\":2048,"
        "\"intermediate_size\":10944,\"num_hidden_layers\":27,\"num_attention_heads\":16,\"q_lora_rank\":null,"
        "\"kv_lora_rank\":512,\"qk_nope_head_dim\":128,\"qk_rope_head_dim\":64,\"v_head_dim\":128,"
        "\"n_routed_experts\":64,\"moe_intermediate_size\":1408,\"num_experts_per_tok\":6,\"topk_method\":\"gready\","
        "\"rope_theta\":10000,\"rope_scaling\":{\"type\":\"yarn\",\"factor\":40,\"mscale\":0.707,"
        "\"mscale_all_dim\":0.707,\"original_max_position_embeddings\":4096}}";
    CHECKF(ds_config_parse(lite, "lite", &c, err) == DS_OK, "%s", err);
    CHECKF(NEAR(c.softmax_scale, 0.1147214, 1e-6), "%.7f", c.softmax_scale);
    CHECK(c.q_lora_rank == 0 && c.topk_method == DS_TOPK_GREEDY && c.scoring == DS_SCORE_SOFTMAX);
    /* rope_parameters (transformers >= 5) with rope_theta inside gives the same as rope_scaling */
    ds_config a, b;
    CHECK(ds_config_parse(V3_CONFIG, "v3", &a, err) == DS_OK);
    const char *old = "\"rope_theta\":10000,\"rope_scaling\":{", *tail = strstr(V3_CONFIG, old) + strlen(old);
    snprintf(buf, sizeof buf, "%.*s\"rope_parameters\":{\"rope_theta\":10000,\"rope_type\":\"yarn\",%s",
             (int)(strstr(V3_CONFIG, old) - V3_CONFIG), V3_CONFIG, tail);
    char *t = strstr(buf, ",\"type\":\"yarn\"");
    memmove(t, t + strlen(",\"type\":\"yarn\""), strlen(t + strlen(",\"type\":\"yarn\"")) + 1);
    CHECKF(ds_config_parse(buf, "v3-params", &b, err) == DS_OK, "%s: %s", err, buf);
    CHECK(b.yarn && b.rope_theta == 10000 && b.softmax_scale == a.softmax_scale);
    CHECK(memcmp(a.inv_freq, b.inv_freq, sizeof a.inv_freq) == 0);
    /* errors name the field */
    CHECK(ds_config_parse("{\"architectures\":[\"DeepseekV3ForCausalLM\"]}", "cfg", &c, err) == DS_ERR_FORMAT);
    CHECKF(strstr(err, "missing field \"vocab_size\"") != NULL, "%s", err);
    CHECK(ds_config_parse("[1,2]", "cfg", &c, err) == DS_ERR_FORMAT);
}

/* noaux_tc: the bias picks the experts, the unbiased sigmoid scores weight them; groups limit. */
static void test_routing(void) {
    ds_config c;
    char err[DS_ERRLEN];
    float scratch[64], w[8], logits[8], bias[8] = {0};
    int32_t ids[8];
    CHECK(ds_config_parse(V3_CONFIG, "v3", &c, err) == DS_OK);
    c.n_routed_experts = 8; c.num_experts_per_tok = 2; c.n_group = 4; c.topk_group = 2;
    for (int e = 0; e < 8; e++) logits[e] = -1.0f + 0.1f * e;   /* increasing scores */
    ds_route_token(&c, logits, bias, ids, w, scratch);
    CHECK(ids[0] == 7 && ids[1] == 6);
    float s7 = 1 / (1 + expf(-logits[7])), s6 = 1 / (1 + expf(-logits[6]));
    CHECK(NEAR(w[0], 2.5 * s7 / (s7 + s6), 1e-6) && NEAR(w[1], 2.5 * s6 / (s7 + s6), 1e-6));
    bias[0] = 10.0f;   /* expert 0 selected by bias, weighted by its own (small) score */
    ds_route_token(&c, logits, bias, ids, w, scratch);
    float s0 = 1 / (1 + expf(-logits[0]));
    CHECK(ids[0] == 0 && ids[1] == 7);
    CHECK(NEAR(w[0], 2.5 * s0 / (s0 + s7), 1e-6));
    /* group restriction: group 1 (experts 2,3) wins on the sum of its top-2, so expert 7 (group 3,
     * alone high) loses to experts in the two best groups */
    float l2[8] = {0, 0, 2, 2, 0, 0, -5, 3};
    memset(bias, 0, sizeof bias);
    c.topk_group = 1;
    ds_route_token(&c, l2, bias, ids, w, scratch);
    CHECK((ids[0] == 2 && ids[1] == 3) || (ids[0] == 3 && ids[1] == 2));
    /* V2 greedy softmax, no renormalisation, x routed_scaling_factor */
    c.arch = DS_ARCH_V2; c.scoring = DS_SCORE_SOFTMAX; c.topk_method = DS_TOPK_GREEDY; c.norm_topk_prob = 0;
    c.routed_scaling_factor = 16.0f;
    ds_route_token(&c, l2, NULL, ids, w, scratch);
    double z = 0;
    for (int e = 0; e < 8; e++) z += exp(l2[e]);
    CHECK(ids[0] == 7 && NEAR(w[0], 16.0 * exp(3.0) / z, 1e-5));
}

static void test_kv_pool(void) {
    char err[DS_ERRLEN];
    ds_kv_pool *p = ds_kv_pool_new(4);
    int a = ds_kv_pool_take(p), b = ds_kv_pool_take(p);
    CHECK(a == 0 && b == 1 && ds_kv_pool_free_count(p) == 2);
    ds_kv_pool_ref(p, a);
    CHECK(ds_kv_pool_unref(p, a) == 0 && ds_kv_pool_unref(p, a) == 1);
    CHECK(ds_kv_pool_check(p, err) == DS_OK);
    CHECK(ds_kv_pool_take(p) >= 0 && ds_kv_pool_take(p) >= 0 && ds_kv_pool_take(p) >= 0);
    CHECK(ds_kv_pool_take(p) == -1);
    CHECK(ds_kv_pool_check(p, err) == DS_OK);
    ds_kv_pool_free(p);
}

static int32_t sample_once(const ds_sampling_params *sp, const float *logits, int V) {
    ds_sampler *s;
    char err[DS_ERRLEN];
    float *l = malloc(sizeof(float) * V);
    memcpy(l, logits, sizeof(float) * V);
    CHECK(ds_sampler_new(sp, V, &s, err) == DS_OK);
    int32_t t = ds_sampler_sample(s, l);
    ds_sampler_free(s);
    free(l);
    return t;
}

static void test_sampler(void) {
    enum { V = 6 };
    float logits[V] = {1.0f, 3.0f, 2.9f, 0.5f, -1.0f, 2.0f};
    ds_sampling_params sp;
    char err[DS_ERRLEN];
    ds_sampling_defaults(&sp);
    sp.temperature = 0;
    CHECK(sample_once(&sp, logits, V) == 1);
    sp.repetition_penalty = 2.0f;   /* token 1 in the prompt: 3.0 -> 1.5, so 2 wins */
    ds_sampler *s;
    CHECK(ds_sampler_new(&sp, V, &s, err) == DS_OK);
    ds_sampler_accept_prompt(s, 1);
    float l[V];
    memcpy(l, logits, sizeof l);
    CHECK(ds_sampler_sample(s, l) == 2);
    ds_sampler_free(s);
    /* presence/frequency count generated tokens only: a prompt token is not penalised */
    ds_sampling_defaults(&sp);
    sp.temperature = 0;
    sp.presence_penalty = 1.0f;
    sp.frequency_penalty = 0.5f;
    CHECK(ds_sampler_new(&sp, V, &s, err) == DS_OK);
    ds_sampler_accept_prompt(s, 1);
    memcpy(l, logits, sizeof l);
    CHECK(ds_sampler_sample(s, l) == 1 && l[1] == 3.0f);
    ds_sampler_accept(s, 1);          /* generated once: 3.0 - 1.0 - 0.5 = 1.5 < 2.9 */
    memcpy(l, logits, sizeof l);
    CHECK(ds_sampler_sample(s, l) == 2 && l[1] == 1.5f);
    ds_sampler_free(s);
    ds_sampling_defaults(&sp);
    sp.temperature = 1.0f;
    sp.top_k = 1;
    CHECK(sample_once(&sp, logits, V) == 1);
    sp.top_k = 0;
    sp.top_p = 0.01f;
    CHECK(sample_once(&sp, logits, V) == 1);
    /* frequencies follow the softmax: 20000 seeded draws, and the same seed gives the same stream */
    ds_sampling_defaults(&sp);
    sp.seed = 1234;
    int count[V] = {0};
    ds_sampler *s1, *s2;
    ds_sampler_new(&sp, V, &s1, err);
    ds_sampler_new(&sp, V, &s2, err);
    int same = 1;
    for (int i = 0; i < 20000; i++) {
        float a[V], b[V];
        memcpy(a, logits, sizeof a);
        memcpy(b, logits, sizeof b);
        int32_t x = ds_sampler_sample(s1, a), y = ds_sampler_sample(s2, b);
        same &= x == y;
        count[x]++;
    }
    CHECK(same);
    double z = 0;
    for (int i = 0; i < V; i++) z += exp(logits[i]);
    for (int i = 0; i < V; i++) CHECKF(NEAR(count[i] / 20000.0, exp(logits[i]) / z, 0.015), "token %d", i);
    ds_sampler_free(s1);
    ds_sampler_free(s2);
    /* min_p 0.5 keeps tokens with prob >= half the top one: 1, 2 (and not 5: e^-1 < 0.5) */
    sp.min_p = 0.5f;
    for (int i = 0; i < 200; i++) {
        sp.seed = (uint64_t)i;
        int32_t t = sample_once(&sp, logits, V);
        CHECK(t == 1 || t == 2);
    }
    sp.top_p = 0;
    CHECK(ds_sampler_new(&sp, V, &s, err) == DS_ERR_ARG && strstr(err, "top_p"));
}

/* top-k by partial selection equals top-k of the full sort: same tokens drawn for the same seeds,
 * ties (equal logits) included. */
static void test_top_k_selection(void) {
    enum { V = 5000 };
    float *logits = malloc(sizeof(float) * V), *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V);
    uint64_t st = 99;
    for (int i = 0; i < V; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        logits[i] = (float)((st >> 40) % 200) / 10.0f;   /* many exact ties */
    }
    /* the rank order of a full sort (higher logit first, then lower id), by insertion: slow but plain */
    int32_t *idx = malloc(sizeof(int32_t) * V);
    for (int i = 0; i < V; i++) {
        int j = i;
        for (; j > 0 && (logits[i] > logits[idx[j - 1]] || (logits[i] == logits[idx[j - 1]] && i < idx[j - 1])); j--)
            idx[j] = idx[j - 1];
        idx[j] = i;
    }
    char err[DS_ERRLEN];
    int same = 1;
    for (int k = 1; k <= 4096; k *= 4)
        for (uint64_t seed = 0; seed < 50; seed++) {
            ds_sampling_params p;
            ds_sampling_defaults(&p);
            p.seed = seed;
            p.top_p = 0.9f;
            ds_sampler *s1, *s2;
            p.top_k = k;
            ds_sampler_new(&p, V, &s1, err);
            p.top_k = 0;   /* reference: the full sort over logits masked outside the k best */
            ds_sampler_new(&p, V, &s2, err);
            memcpy(a, logits, sizeof(float) * V);
            for (int i = 0; i < V; i++) b[i] = -INFINITY;
            for (int i = 0; i < k; i++) b[idx[i]] = logits[idx[i]];
            same &= ds_sampler_sample(s1, a) == ds_sampler_sample(s2, b);
            ds_sampler_free(s1);
            ds_sampler_free(s2);
        }
    free(idx);
    CHECK(same);
    free(logits);
    free(a);
    free(b);
}

/* The oracle: the plain definition (sort the whole vocabulary, softmax over the top-k or all, top-p, min-p,
 * draw with the same splitmix64 stream), against which the sampler's partial-order fast path must pick
 * the same tokens. */
static const float *oracle_key;
static int oracle_cmp(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (oracle_key[x] != oracle_key[y]) return oracle_key[x] > oracle_key[y] ? -1 : 1;
    return x - y;
}

static int32_t oracle_sample(const float *raw, int V, const ds_sampling_params *p, uint64_t *rng) {
    float *l = malloc(sizeof(float) * V), *pr = malloc(sizeof(float) * V);
    int32_t *o = malloc(sizeof(int32_t) * V);
    for (int i = 0; i < V; i++) l[i] = raw[i] / p->temperature, o[i] = i;
    oracle_key = l;
    qsort(o, (size_t)V, sizeof(int32_t), oracle_cmp);
    int n = p->top_k > 0 && p->top_k < V ? p->top_k : V;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (pr[i] = expf(l[o[i]] - l[o[0]]));
    for (int i = 0; i < n; i++) pr[i] = (float)(pr[i] / sum);
    if (p->top_p < 1) {
        double cum = 0;
        for (int i = 0; i < n; i++)
            if ((cum += pr[i]) >= p->top_p) { n = i + 1; break; }
    }
    if (p->min_p > 0) {
        int keep = 1;
        while (keep < n && pr[keep] >= p->min_p * pr[0]) keep++;
        n = keep;
    }
    double total = 0, cum = 0;
    for (int i = 0; i < n; i++) total += pr[i];
    uint64_t z = (*rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    double r = (double)(z >> 11) * (1.0 / 9007199254740992.0) * total;
    int32_t pick = o[n - 1];
    for (int i = 0; i < n; i++)
        if (r < (cum += pr[i])) { pick = o[i]; break; }
    free(l);
    free(pr);
    free(o);
    return pick;
}

static void test_sampler_vs_oracle(void) {
    enum { V = 3000 };
    float *logits = malloc(sizeof(float) * V), *work = malloc(sizeof(float) * V);
    const float temps[] = {0.3f, 1.0f, 3.0f}, top_ps[] = {1.0f, 0.9f, 0.5f}, min_ps[] = {0, 0.05f};
    const int top_ks[] = {0, 7, 200};
    char err[DS_ERRLEN];
    int cases = 0, differ = 0;
    uint64_t st = 12345;
    for (int shape = 0; shape < 3; shape++) {
        for (int i = 0; i < V; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            double u = (double)(st >> 11) / 9007199254740992.0;
            logits[i] = shape == 0 ? (float)(u * 4) : shape == 1 ? (float)(u * 30) : (float)((int)(u * 8));  /* flat, peaked, tied */
        }
        for (size_t a = 0; a < 3; a++)
            for (size_t b = 0; b < 3; b++)
                for (size_t c = 0; c < 2; c++)
                    for (size_t d = 0; d < 3; d++) {
                        ds_sampling_params p;
                        ds_sampling_defaults(&p);
                        p.temperature = temps[a];
                        p.top_p = top_ps[b];
                        p.min_p = min_ps[c];
                        p.top_k = top_ks[d];
                        p.seed = 1000 + cases;
                        ds_sampler *smp;
                        ds_sampler_new(&p, V, &smp, err);
                        uint64_t rng = p.seed;
                        for (int draw = 0; draw < 4; draw++) {
                            memcpy(work, logits, sizeof(float) * V);
                            differ += ds_sampler_sample(smp, work) != oracle_sample(logits, V, &p, &rng);
                            cases++;
                        }
                        ds_sampler_free(smp);
                    }
    }
    CHECKF(differ == 0, "%d of %d draws differ from the oracle", differ, cases);
    free(logits);
    free(work);
}

int main(void) {
    test_sampler_vs_oracle();
    test_top_k_selection();
    test_dtypes();
    test_config_v3();
    test_config_variants();
    test_routing();
    test_kv_pool();
    test_sampler();
    return test_result("test_units");
}
