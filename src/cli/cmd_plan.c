/* `dsinfer plan --model DIR|config.json [--gpus N] [--parallel dp-ep|tp] [--weights fp8|bf16]
 *  [--kv-cache-dtype fp8|bf16] [--gpu-mem-gb 141] [--utilization 0.9]`: the memory plan of a model on
 * a group of GPUs (src/dist/memplan.h), without loading any weight. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "dist/memplan.h"
#include "core/status.h"
#include "loader/config.h"

static void usage(void) {
    fprintf(stderr, "usage: dsinfer plan --model DIR|config.json [--gpus N] [--parallel dp-ep|tp] [--weights fp8|bf16]\n"
                    "         [--kv-cache-dtype fp8|bf16] [--gpu-mem-gb 141] [--utilization 0.9] [--activations-gb 4]\n");
}

int cli_plan(int argc, char **argv) {
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"gpus", required_argument, 0, 'g'}, {"parallel", required_argument, 0, 'p'},
        {"weights", required_argument, 0, 'w'}, {"kv-cache-dtype", required_argument, 0, 'k'},
        {"gpu-mem-gb", required_argument, 0, 'M'}, {"utilization", required_argument, 0, 'u'},
        {"activations-gb", required_argument, 0, 'a'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *model = NULL;
    ds_plan_input in = {.mode = DS_PAR_DP_EP, .n_gpus = 1, .fp8_weights = 1, .kv_fp8 = 0, .gpu_bytes = 141e9,
                        .utilization = 0.9, .activation_bytes = 4e9};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'm': model = optarg; break;
        case 'g': in.n_gpus = atoi(optarg); bad = in.n_gpus < 1; break;
        case 'p': bad = strcmp(optarg, "dp-ep") && strcmp(optarg, "tp"); in.mode = strcmp(optarg, "tp") ? DS_PAR_DP_EP : DS_PAR_TP; break;
        case 'w': bad = strcmp(optarg, "fp8") && strcmp(optarg, "bf16"); in.fp8_weights = !strcmp(optarg, "fp8"); break;
        case 'k': bad = strcmp(optarg, "fp8") && strcmp(optarg, "bf16"); in.kv_fp8 = !strcmp(optarg, "fp8"); break;
        case 'M': in.gpu_bytes = atof(optarg) * 1e9; bad = in.gpu_bytes <= 0; break;
        case 'u': in.utilization = atof(optarg); bad = in.utilization <= 0 || in.utilization > 1; break;
        case 'a': in.activation_bytes = atof(optarg) * 1e9; bad = in.activation_bytes < 0; break;
        case 'h': usage(); return 0;
        default: bad = 1;
        }
        if (bad) { fprintf(stderr, "dsinfer plan: bad option \"%s\"\n", argv[optind - 1]); usage(); return 2; }
    }
    if (!model || optind < argc) { usage(); return 2; }
    char err[DS_ERRLEN];
    ds_config cfg;
    ds_status st = ds_config_load(model, &cfg, err);
    if (st) { fprintf(stderr, "dsinfer: error: %s\n", err); return ds_cli_exit_code(st); }
    ds_plan p;
    ds_memory_plan(&cfg, &in, &p);
    printf("%s: %.2f B parameters (%.2f B active per token)\n", cfg.architecture, p.params_total / 1e9, p.params_active / 1e9);
    printf("%d GPU(s), %s, %s weights, %s KV cache\n", in.n_gpus, in.mode == DS_PAR_TP ? "tensor parallel" : "data + expert parallel",
           in.fp8_weights ? "FP8" : "BF16", in.kv_fp8 ? "FP8" : "BF16");
    printf("weights: %.2f GB in all, %.2f GB per GPU\n", p.weight_bytes_total / 1e9, p.weight_bytes_per_gpu / 1e9);
    printf("KV cache: %.0f bytes per token; %.2f GB per GPU for the pool\n", p.kv_bytes_per_token, p.kv_bytes_per_gpu / 1e9);
    if (!p.fits) {
        printf("does NOT fit: %.2f GB of weights per GPU > %.2f GB usable\n", p.weight_bytes_per_gpu / 1e9,
               (in.gpu_bytes * in.utilization - in.activation_bytes) / 1e9);
        return 1;
    }
    printf("KV tokens: %.0f per GPU, %.0f in all (%.0f sequences of 4K tokens)\n", p.tokens_per_gpu, p.tokens_total,
           p.tokens_total / 4096);
    return 0;
}
