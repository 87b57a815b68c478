/* Flag parsing shared by the model commands. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/model_args.h"

enum { OPT_THREADS = 256, OPT_BACKEND, OPT_TEMP, OPT_TOPK, OPT_TOPP, OPT_MINP, OPT_SEED, OPT_REP, OPT_PRES,
       OPT_FREQ, OPT_PRINT_IDS, OPT_IGNORE_EOS, OPT_ABSORBED, OPT_HELP, OPT_PROMPT, OPT_TEMPLATE, OPT_SYSTEM,
       OPT_FILE, OPT_CTX, OPT_DUMMY, OPT_KV_DTYPE, OPT_REF_MODEL, OPT_QUANT, OPT_TP, OPT_PP };

static const struct option long_opts[] = {
    {"model", required_argument, 0, 'm'}, {"ids", required_argument, 0, 'i'}, {"out", required_argument, 0, 'o'},
    {"threads", required_argument, 0, OPT_THREADS}, {"backend", required_argument, 0, OPT_BACKEND},
    {"temperature", required_argument, 0, OPT_TEMP}, {"top-k", required_argument, 0, OPT_TOPK},
    {"top-p", required_argument, 0, OPT_TOPP}, {"min-p", required_argument, 0, OPT_MINP},
    {"seed", required_argument, 0, OPT_SEED}, {"repetition-penalty", required_argument, 0, OPT_REP},
    {"presence-penalty", required_argument, 0, OPT_PRES}, {"frequency-penalty", required_argument, 0, OPT_FREQ},
    {"print-ids", no_argument, 0, OPT_PRINT_IDS}, {"ignore-eos", no_argument, 0, OPT_IGNORE_EOS},
    {"absorbed", no_argument, 0, OPT_ABSORBED}, {"help", no_argument, 0, OPT_HELP},
    {"prompt", required_argument, 0, OPT_PROMPT}, {"chat-template", required_argument, 0, OPT_TEMPLATE},
    {"system", required_argument, 0, OPT_SYSTEM}, {"file", required_argument, 0, OPT_FILE},
    {"ctx", required_argument, 0, OPT_CTX}, {"dummy-weights", no_argument, 0, OPT_DUMMY},
    {"kv-cache-dtype", required_argument, 0, OPT_KV_DTYPE}, {"ref-model", required_argument, 0, OPT_REF_MODEL},
    {"quantization", required_argument, 0, OPT_QUANT}, {"tensor-parallel-size", required_argument, 0, OPT_TP},
    {"pipeline-parallel-size", required_argument, 0, OPT_PP},
    {0, 0, 0, 0}};

static void usage(const char *cmd) {
    if (strcmp(cmd, "logits") == 0)
        fprintf(stderr, "usage: dsinfer logits --model DIR --ids 0,17,99 --out FILE.npy [--threads N] [--backend cpu|cuda] [--dummy-weights] [--kv-cache-dtype auto|bf16|fp8|fp32] [--quantization fp8|fp4] [--tensor-parallel-size N] [--pipeline-parallel-size N]\n"
                        "  writes float32 [T, vocab] logits at every prompt position\n");
    else if (strcmp(cmd, "compare") == 0)
        fprintf(stderr, "usage: dsinfer compare --model DIR [--ref-model DIR] --file TEXT [--ctx N] [--kv-cache-dtype fp8|bf16|fp32]\n"
                        "         [--threads N] [--backend cpu|cuda]\n"
                        "  KL divergence, top-1 agreement and max logit difference of --model (with its options)\n"
                        "  against --ref-model (default: the same folder, default options), and both perplexities\n");
    else if (strcmp(cmd, "perplexity") == 0)
        fprintf(stderr, "usage: dsinfer perplexity --model DIR --file TEXT [--ctx N] [--threads N] [--backend cpu|cuda] [--dummy-weights] [--kv-cache-dtype auto|bf16|fp8|fp32] [--quantization fp8|fp4] [--tensor-parallel-size N] [--pipeline-parallel-size N]\n"
                        "  perplexity of the file's text: windows of N tokens (default: the model's context), each\n"
                        "  starting with BOS, predicting every token after the BOS\n");
    else if (strcmp(cmd, "chat") == 0)
        fprintf(stderr, "usage: dsinfer chat --model DIR [--system TEXT] [--chat-template deepseek-v3|deepseek-r1|deepseek-v2]\n"
                        "         [-n 512] [sampling flags as for generate] [--threads N] [--backend cpu|cuda] [--dummy-weights] [--kv-cache-dtype auto|bf16|fp8|fp32] [--quantization fp8|fp4] [--tensor-parallel-size N] [--pipeline-parallel-size N]\n"
                        "  an interactive chat on the terminal; an empty line or end of input quits\n");
    else
        fprintf(stderr,
                "usage: dsinfer generate --model DIR (--ids 0,17,99 | --prompt TEXT) [-n 32] [--temperature 0.7] [--top-k K]\n"
                "         [--top-p P] [--min-p P] [--seed S] [--repetition-penalty R] [--presence-penalty P]\n"
                "         [--frequency-penalty F] [--ignore-eos] [--print-ids] [--threads N] [--backend cpu|cuda] [--dummy-weights] [--kv-cache-dtype auto|bf16|fp8|fp32] [--quantization fp8|fp4] [--tensor-parallel-size N] [--pipeline-parallel-size N]\n");
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
int model_args_parse(int argc, char **argv, model_args *a) {
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
        case OPT_PROMPT: a->prompt = optarg; break;
        case OPT_TEMPLATE: a->chat_template = optarg; break;
        case OPT_SYSTEM: a->system = optarg; break;
        case OPT_FILE: a->file = optarg; break;
        case OPT_CTX: bad = parse_num("--ctx", optarg, 2, 1 << 30, &x); a->ctx = (int)x; break;
        case OPT_DUMMY: a->dummy_weights = 1; break;
        case OPT_KV_DTYPE: a->kv_cache_dtype = optarg; break;
        case OPT_REF_MODEL: a->ref_model = optarg; break;
        case OPT_QUANT: a->quantization = optarg; break;
        case OPT_TP: bad = parse_num("--tensor-parallel-size", optarg, 1, 64, &x); a->tensor_parallel_size = (int)x; break;
        case OPT_PP: bad = parse_num("--pipeline-parallel-size", optarg, 1, 64, &x); a->pipeline_parallel_size = (int)x; break;
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
    if (!a->model) {
        fprintf(stderr, "dsinfer %s: --model DIR is required\n", argv[0]);
        usage(argv[0]);
        return 2;
    }
    int needs_input = strcmp(argv[0], "logits") == 0 || strcmp(argv[0], "generate") == 0;
    if (needs_input && !a->ids == !a->prompt) {
        fprintf(stderr, "dsinfer %s: give exactly one of --ids and --prompt\n", argv[0]);
        usage(argv[0]);
        return 2;
    }
    return 0;
}

ds_status model_args_open_engine(const model_args *a, ds_engine **eng, char *err) {
    ds_engine_opts o = {.backend = a->backend, .n_threads = a->threads, .force_absorbed = a->force_absorbed,
                        .dummy_weights = a->dummy_weights, .kv_cache_dtype = a->kv_cache_dtype,
                        .quantization = a->quantization, .tensor_parallel_size = a->tensor_parallel_size,
                        .pipeline_parallel_size = a->pipeline_parallel_size};
    return ds_engine_open(a->model, &o, eng, err);
}

