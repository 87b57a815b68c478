/* `dsinfer logits` and `dsinfer generate`: argument parsing, then calls into the public API. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/npy.h"
#include "core/status.h"

typedef struct {
    const char *model, *ids, *out, *backend;
    int threads, n_new, print_ids, ignore_eos, force_absorbed;
    ds_sampling_params sp;
} model_args;

enum { OPT_THREADS = 256, OPT_BACKEND, OPT_TEMP, OPT_TOPK, OPT_TOPP, OPT_MINP, OPT_SEED, OPT_REP, OPT_PRES,
       OPT_FREQ, OPT_PRINT_IDS, OPT_IGNORE_EOS, OPT_ABSORBED, OPT_HELP };

static const struct option long_opts[] = {
    {"model", required_argument, 0, 'm'}, {"ids", required_argument, 0, 'i'}, {"out", required_argument, 0, 'o'},
    {"threads", required_argument, 0, OPT_THREADS}, {"backend", required_argument, 0, OPT_BACKEND},
    {"temperature", required_argument, 0, OPT_TEMP}, {"top-k", required_argument, 0, OPT_TOPK},
    {"top-p", required_argument, 0, OPT_TOPP}, {"min-p", required_argument, 0, OPT_MINP},
    {"seed", required_argument, 0, OPT_SEED}, {"repetition-penalty", required_argument, 0, OPT_REP},
    {"presence-penalty", required_argument, 0, OPT_PRES}, {"frequency-penalty", required_argument, 0, OPT_FREQ},
    {"print-ids", no_argument, 0, OPT_PRINT_IDS}, {"ignore-eos", no_argument, 0, OPT_IGNORE_EOS},
    {"absorbed", no_argument, 0, OPT_ABSORBED}, {"help", no_argument, 0, OPT_HELP}, {0, 0, 0, 0}};

static void usage(const char *cmd) {
    if (strcmp(cmd, "logits") == 0)
        fprintf(stderr, "usage: dsinfer logits --model DIR --ids 0,17,99 --out FILE.npy [--threads N] [--backend cpu]\n"
                        "  writes float32 [T, vocab] logits at every prompt position\n");
    else
        fprintf(stderr,
                "usage: dsinfer generate --model DIR --ids 0,17,99 [-n 32] [--temperature 0.7] [--top-k K]\n"
                "         [--top-p P] [--min-p P] [--seed S] [--repetition-penalty R] [--presence-penalty P]\n"
                "         [--frequency-penalty F] [--ignore-eos] [--print-ids] [--threads N] [--backend cpu]\n");
}

static int parse_num(const char *flag, const char *v, double lo, double hi, double *out) {
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !isfinite(x) || x < lo || x > hi) {
        fprintf(stderr, "dsinfer: %s: bad value \"%s\" (expected a number in [%g, %g])\n", flag, v, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

/* Returns 0 on success, 2 on a bad flag (message printed). */
static int parse_args(int argc, char **argv, model_args *a) {
    memset(a, 0, sizeof(*a));
    ds_sampling_defaults(&a->sp);
    a->sp.temperature = 0.7f;
    a->n_new = 32;
    a->backend = "cpu";
    optind = 1;
    opterr = 0;
    int c;
    double x;
    while ((c = getopt_long(argc, argv, "m:i:o:n:", long_opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'm': a->model = optarg; break;
        case 'i': a->ids = optarg; break;
        case 'o': a->out = optarg; break;
        case 'n': bad = parse_num("-n", optarg, 0, 1 << 30, &x); a->n_new = (int)x; break;
        case OPT_THREADS: bad = parse_num("--threads", optarg, 0, 4096, &x); a->threads = (int)x; break;
        case OPT_BACKEND: a->backend = optarg; break;
        case OPT_TEMP: bad = parse_num("--temperature", optarg, 0, 1e6, &x); a->sp.temperature = (float)x; break;
        case OPT_TOPK: bad = parse_num("--top-k", optarg, 0, 1 << 30, &x); a->sp.top_k = (int)x; break;
        case OPT_TOPP: bad = parse_num("--top-p", optarg, 1e-9, 1, &x); a->sp.top_p = (float)x; break;
        case OPT_MINP: bad = parse_num("--min-p", optarg, 0, 1, &x); a->sp.min_p = (float)x; break;
        case OPT_SEED: bad = parse_num("--seed", optarg, 0, 1.8e19, &x); a->sp.seed = (uint64_t)x; break;
        case OPT_REP: bad = parse_num("--repetition-penalty", optarg, 1e-6, 1e6, &x); a->sp.repetition_penalty = (float)x; break;
        case OPT_PRES: bad = parse_num("--presence-penalty", optarg, -1e6, 1e6, &x); a->sp.presence_penalty = (float)x; break;
        case OPT_FREQ: bad = parse_num("--frequency-penalty", optarg, -1e6, 1e6, &x); a->sp.frequency_penalty = (float)x; break;
        case OPT_PRINT_IDS: a->print_ids = 1; break;
        case OPT_IGNORE_EOS: a->ignore_eos = 1; break;
        case OPT_ABSORBED: a->force_absorbed = 1; break;
        case OPT_HELP: usage(argv[0]); exit(0);
        default:
            fprintf(stderr, "dsinfer %s: unknown or incomplete option \"%s\"\n", argv[0], argv[optind - 1]);
            bad = 1;
        }
        if (bad) { usage(argv[0]); return 2; }
    }
    if (optind < argc) {
        fprintf(stderr, "dsinfer %s: unexpected argument \"%s\"\n", argv[0], argv[optind]);
        usage(argv[0]);
        return 2;
    }
    if (!a->model || !a->ids) {
        fprintf(stderr, "dsinfer %s: --model and --ids are required\n", argv[0]);
        usage(argv[0]);
        return 2;
    }
    return 0;
}

static ds_status open_engine(const model_args *a, ds_engine **eng, char *err) {
    ds_engine_opts o = {.backend = a->backend, .n_threads = a->threads, .force_absorbed = a->force_absorbed};
    return ds_engine_open(a->model, &o, eng, err);
}

static int fail(ds_status st, const char *err) {
    fprintf(stderr, "dsinfer: error: %s\n", err);
    return ds_cli_exit_code(st);
}

int cli_logits(int argc, char **argv) {
    model_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc;
    if (!a.out) { fprintf(stderr, "dsinfer logits: --out FILE.npy is required\n"); return 2; }
    int32_t *ids;
    int n;
    if (ds_cli_parse_ids(a.ids, &ids, &n)) return 2;
    char err[DS_ERRLEN];
    ds_engine *eng = NULL;
    ds_seq *seq = NULL;
    float *logits = NULL;
    ds_status st = open_engine(&a, &eng, err);
    if (!st) st = ds_seq_new(eng, &seq, err);
    if (!st) {
        logits = malloc(sizeof(float) * (size_t)n * (size_t)ds_engine_vocab_size(eng));
        ds_batch_item item = {.seq = seq, .tokens = ids, .n_tokens = n, .all_logits = 1};
        st = logits ? ds_engine_forward(eng, &item, 1, logits, err)
                    : ds_seterr(err, DS_ERR_NOMEM, "cannot allocate %d x %d logits", n, ds_engine_vocab_size(eng));
    }
    if (!st) st = ds_npy_write_f32(a.out, logits, n, ds_engine_vocab_size(eng), err);
    rc = st ? fail(st, err) : 0;
    free(logits);
    free(ids);
    ds_seq_free(seq);
    ds_engine_free(eng);
    return rc;
}

/* Prompt prefill, then one decode step per new token; stops at EOS unless --ignore-eos. */
static ds_status generate_ids(ds_engine *eng, const model_args *a, const int32_t *ids, int n, char *err) {
    int V = ds_engine_vocab_size(eng);
    float *logits = malloc(sizeof(float) * (size_t)V);
    ds_seq *seq = NULL;
    ds_sampler *smp = NULL;
    ds_status st = logits ? DS_OK : ds_seterr(err, DS_ERR_NOMEM, "out of memory");
    if (!st) st = ds_seq_new(eng, &seq, err);
    if (!st) st = ds_sampler_new(&a->sp, V, &smp, err);
    for (int i = 0; !st && i < n; i++) ds_sampler_accept(smp, ids[i]);
    ds_batch_item item = {.seq = seq, .tokens = ids, .n_tokens = n, .all_logits = 0};
    if (!st) st = ds_engine_forward(eng, &item, 1, logits, err);
    for (int i = 0; !st && i < a->n_new; i++) {
        int32_t tok = ds_sampler_sample(smp, logits);
        ds_sampler_accept(smp, tok);
        printf("%s%d", i ? "," : "", tok);
        fflush(stdout);
        if ((tok == ds_engine_eos_id(eng) && !a->ignore_eos) || i + 1 == a->n_new) break;
        item = (ds_batch_item){.seq = seq, .tokens = &tok, .n_tokens = 1, .all_logits = 0};
        st = ds_engine_forward(eng, &item, 1, logits, err);
    }
    printf("\n");
    ds_sampler_free(smp);
    ds_seq_free(seq);
    free(logits);
    return st;
}

int cli_generate(int argc, char **argv) {
    model_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc;
    int32_t *ids;
    int n;
    if (ds_cli_parse_ids(a.ids, &ids, &n)) return 2;
    char err[DS_ERRLEN];
    ds_engine *eng = NULL;
    ds_status st = open_engine(&a, &eng, err);
    if (!st) st = generate_ids(eng, &a, ids, n, err);
    rc = st ? fail(st, err) : 0;
    free(ids);
    ds_engine_free(eng);
    return rc;
}
