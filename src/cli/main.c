/* dsinfer: one binary, subcommands dispatched from a table. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/env_check.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"logits", cli_logits, "write the logits of every prompt position to a .npy file"},
    {"generate", cli_generate, "generate tokens from a prompt"},
    {"chat", cli_chat, "chat with the model in the terminal"},
    {"perplexity", cli_perplexity, "perplexity of a text file"},
    {"quantize", cli_quantize, "write an FP8 or NVFP4 copy of a checkpoint"},
    {"plan", cli_plan, "memory plan of a model on N GPUs (weights, KV tokens that fit)"},
    {"compare", cli_compare, "accuracy of one configuration against another (KL, top-1, perplexity)"},
    {"tokenize", cli_tokenize, "print the token ids of the text on stdin"},
    {"detokenize", cli_detokenize, "print the text of token ids"},
    {"serve", cli_serve, "an OpenAI-compatible HTTP server with continuous batching"},
    {"bench", cli_bench, "bench serve: load-test a running server (TTFT, TPOT, ITL, throughput)"},
    {"top", cli_top, "live figures and alerts of a running server in the terminal"},
};

static void usage(void) {
    fprintf(stderr, "usage: dsinfer <command> [options]   (dsinfer <command> --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(stderr, "  %-12s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
    ds_env_warn_unknown(environ, stderr);   /* a misspelt or removed DSINFER_* switch: said, not silently ignored */
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage();
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "dsinfer: unknown command \"%s\"\n", argv[1]);
    usage();
    return 2;
}
