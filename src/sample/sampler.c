/* Sampling from one row of logits: penalties, then greedy or temperature + top-k + top-p + min-p, with
 * a seeded generator so the same seed gives the same tokens.
 *
 * Order (as vLLM): repetition / presence / frequency penalties on the raw logits; temperature 0 ->
 * argmax; else divide by temperature, keep the top_k largest, keep the smallest prefix of the sorted
 * distribution whose mass reaches top_p, drop tokens whose probability is below min_p times the
 * largest, renormalise, draw. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "dsinfer.h"

struct ds_sampler {
    ds_sampling_params p;
    int vocab;
    int *count;      /* [vocab] occurrences among the generated tokens */
    uint8_t *in_prompt; /* [vocab] 1 if the token occurs in the prompt */
    int32_t *seen;   /* distinct tokens seen (prompt or generated), in first-seen order */
    int n_seen;
    uint64_t rng;
    int32_t *order;  /* [vocab] scratch for sorting */
    float *prob;     /* [vocab] scratch */
};

void ds_sampling_defaults(ds_sampling_params *p) {
    memset(p, 0, sizeof(*p));
    p->temperature = 1.0f;
    p->top_p = 1.0f;
    p->repetition_penalty = 1.0f;
}

/* splitmix64: small, fast, and fully determined by the seed. */
static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double next_unit(uint64_t *s) { return (double)(next_u64(s) >> 11) * (1.0 / 9007199254740992.0); }

ds_status ds_sampler_new(const ds_sampling_params *p, int vocab, ds_sampler **out, char *err) {
    if (vocab <= 0) return ds_seterr(err, DS_ERR_ARG, "vocab size must be positive");
    if (!(p->temperature >= 0) || !isfinite(p->temperature))
        return ds_seterr(err, DS_ERR_ARG, "temperature must be >= 0 (got %g)", p->temperature);
    if (p->top_k < 0) return ds_seterr(err, DS_ERR_ARG, "top_k must be >= 0 (got %d)", p->top_k);
    if (!(p->top_p > 0 && p->top_p <= 1)) return ds_seterr(err, DS_ERR_ARG, "top_p must be in (0, 1] (got %g)", p->top_p);
    if (!(p->min_p >= 0 && p->min_p <= 1)) return ds_seterr(err, DS_ERR_ARG, "min_p must be in [0, 1] (got %g)", p->min_p);
    if (!(p->repetition_penalty > 0) || !isfinite(p->repetition_penalty))
        return ds_seterr(err, DS_ERR_ARG, "repetition_penalty must be > 0 (got %g)", p->repetition_penalty);
    if (!isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty))
        return ds_seterr(err, DS_ERR_ARG, "presence/frequency penalties must be finite");
    ds_sampler *s = ds_xcalloc(1, sizeof(*s));
    s->p = *p;
    s->vocab = vocab;
    s->count = ds_xcalloc((size_t)vocab, sizeof(int));
    s->in_prompt = ds_xcalloc((size_t)vocab, 1);
    s->seen = ds_xmalloc(sizeof(int32_t) * 64);
    s->order = ds_xmalloc(sizeof(int32_t) * (size_t)vocab);
    s->prob = ds_xmalloc(sizeof(float) * (size_t)vocab);
    s->rng = p->seed;
    *out = s;
    return DS_OK;
}

void ds_sampler_free(ds_sampler *s) {
    if (!s) return;
    free(s->count); free(s->in_prompt); free(s->seen); free(s->order); free(s->prob);
    free(s);
}

static void note_seen(ds_sampler *s, int32_t tok) {
    if (s->count[tok] || s->in_prompt[tok]) return;
    if ((s->n_seen & (s->n_seen - 1)) == 0 && s->n_seen >= 64)
        s->seen = ds_xrealloc(s->seen, sizeof(int32_t) * (size_t)s->n_seen * 2);
    s->seen[s->n_seen++] = tok;
}

void ds_sampler_accept(ds_sampler *s, int32_t tok) {
    if (tok < 0 || tok >= s->vocab) return;
    note_seen(s, tok);
    s->count[tok]++;
}

void ds_sampler_accept_prompt(ds_sampler *s, int32_t tok) {
    if (tok < 0 || tok >= s->vocab) return;
    note_seen(s, tok);
    s->in_prompt[tok] = 1;
}

static void apply_penalties(const ds_sampler *s, float *logits) {
    const ds_sampling_params *p = &s->p;
    for (int i = 0; i < s->n_seen; i++) {
        int t = s->seen[i];
        float *l = &logits[t];
        if (p->repetition_penalty != 1.0f) *l = *l > 0 ? *l / p->repetition_penalty : *l * p->repetition_penalty;
        if (s->count[t]) *l -= p->presence_penalty + p->frequency_penalty * (float)s->count[t];
    }
}

static int32_t argmax(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static int by_logit_desc(const void *a, const void *b, void *key) {
    const float *logits = key;
    float x = logits[*(const int32_t *)a], y = logits[*(const int32_t *)b];
    if (x != y) return x > y ? -1 : 1;
    return *(const int32_t *)a - *(const int32_t *)b;
}

/* 1 if token a ranks before token b: higher logit, then lower id (the sort's order). */
static int ranks_before(const float *logits, int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
}

static void sift_down(int32_t *heap, int n, int i, const float *logits) {
    for (;;) {
        int w = i, l = 2 * i + 1, r = l + 1;   /* the root holds the worst-ranked of the kept tokens */
        if (l < n && ranks_before(logits, heap[w], heap[l])) w = l;
        if (r < n && ranks_before(logits, heap[w], heap[r])) w = r;
        if (w == i) return;
        int32_t t = heap[i];
        heap[i] = heap[w];
        heap[w] = t;
        i = w;
    }
}

/* order[0:k] = the k best-ranked tokens, in rank order: the same as the first k of a full sort, in
 * O(V log k) instead of O(V log V). */
static void top_k_order(ds_sampler *s, const float *logits, int k) {
    int32_t *h = s->order;
    for (int i = 0; i < k; i++) h[i] = i;
    for (int i = k / 2 - 1; i >= 0; i--) sift_down(h, k, i, logits);
    for (int32_t t = k; t < s->vocab; t++)
        if (ranks_before(logits, t, h[0])) {
            h[0] = t;
            sift_down(h, k, 0, logits);
        }
    qsort_r(h, (size_t)k, sizeof(int32_t), by_logit_desc, (void *)logits);
}

/* Tokens kept by top-p and min-p among the sorted prefix order[0:k] whose probabilities are prob[0:k]:
 * the count, or -1 when the cut may lie past the prefix (more of the order is needed). */
static int kept_in_prefix(const ds_sampler *s, int k, int whole) {
    int keep = -1;
    if (s->p.top_p < 1.0f) {
        double cum = 0;
        for (int i = 0; i < k && keep < 0; i++)
            if ((cum += s->prob[i]) >= s->p.top_p) keep = i + 1;
    }
    int limit = keep >= 0 ? keep : k;
    if (s->p.min_p > 0) {
        float floor_p = s->p.min_p * s->prob[0];
        int m = 1;
        while (m < limit && s->prob[m] >= floor_p) m++;
        if (m < limit) keep = m;
    }
    return keep < 0 && whole ? k : keep;
}

/* Draws from prob[0:n] (sorted order) with u in [0, 1), total = their sum. */
static int32_t draw(const ds_sampler *s, int n, double u) {
    double total = 0, cum = 0;
    for (int i = 0; i < n; i++) total += s->prob[i];
    double r = u * total;
    for (int i = 0; i < n; i++)
        if (r < (cum += s->prob[i])) return s->order[i];
    return s->order[n - 1];
}

/* Sampling over the whole vocabulary (no top-k) without sorting all of it: the order is built as a
 * prefix of the best-ranked tokens, grown 16x until the top-p / min-p cut, or the draw itself, falls
 * inside it. Probabilities are normalised over every token (sum in id order). */
static int32_t sample_untruncated(ds_sampler *s, const float *logits) {
    int V = s->vocab;
    float mx = logits[argmax(logits, V)];
    double z = 0;
    for (int i = 0; i < V; i++) z += expf(logits[i] - mx);
    double u = next_unit(&s->rng), total_all = -1;
    int plain = s->p.top_p >= 1.0f && s->p.min_p <= 0;
    for (int k = V < 256 ? V : 256;; k = k > V / 16 ? V : k * 16) {
        top_k_order(s, logits, k);
        for (int i = 0; i < k; i++) s->prob[i] = (float)(expf(logits[s->order[i]] - mx) / z);
        int keep = kept_in_prefix(s, k, k == V);
        if (keep > 0) return draw(s, keep, u);
        if (!plain) continue;
        if (total_all < 0) {   /* no cut: the draw spans all tokens; find it in the prefix if it is there */
            total_all = 0;
            for (int i = 0; i < V; i++) total_all += (float)(expf(logits[i] - mx) / z);
        }
        double r = u * total_all, cum = 0;
        for (int i = 0; i < k; i++)
            if (r < (cum += s->prob[i])) return s->order[i];
    }
}

/* Top-k candidates in rank order with their softmax probabilities over the k (s->prob), cut by top-p
 * and min-p; returns how many are kept. */
static int filter_top_k(ds_sampler *s, const float *logits) {
    int n = s->p.top_k;
    top_k_order(s, logits, n);
    double sum = 0;
    float mx = logits[s->order[0]];
    for (int i = 0; i < n; i++) sum += (s->prob[i] = expf(logits[s->order[i]] - mx));
    for (int i = 0; i < n; i++) s->prob[i] = (float)(s->prob[i] / sum);
    return kept_in_prefix(s, n, 1);
}

int32_t ds_sampler_sample(ds_sampler *s, float *logits) {
    apply_penalties(s, logits);
    if (s->p.temperature == 0.0f) return argmax(logits, s->vocab);
    for (int i = 0; i < s->vocab; i++) logits[i] /= s->p.temperature;
    if (s->p.top_k <= 0 || s->p.top_k >= s->vocab) return sample_untruncated(s, logits);
    int n = filter_top_k(s, logits);
    return draw(s, n, next_unit(&s->rng));
}
