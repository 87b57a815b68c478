/* `dsinfer quantize --in DIR --out DIR --to fp8|fp4`: writes a quantized copy of a checkpoint. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "model/quantize.h"

static void usage(void) {
    fprintf(stderr, "usage: dsinfer quantize --in DIR --out DIR --to fp8|fp4\n"
                    "  fp8: DeepSeek's block format (e4m3, one fp32 scale per 128x128 block)\n"
                    "  fp4: NVIDIA NVFP4 (E2M1, one e4m3 scale per 16 values, one fp32 scale per tensor)\n");
}

int cli_quantize(int argc, char **argv) {
    static const struct option opts[] = {{"in", required_argument, 0, 'i'}, {"out", required_argument, 0, 'o'},
                                         {"to", required_argument, 0, 't'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *in = NULL, *out = NULL, *to = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'i') in = optarg;
        else if (c == 'o') out = optarg;
        else if (c == 't') to = optarg;
        else if (c == 'h') { usage(); return 0; }
        else { fprintf(stderr, "dsinfer quantize: unknown or incomplete option \"%s\"\n", argv[optind - 1]); usage(); return 2; }
    }
    if (!in || !out || !to || optind < argc) { usage(); return 2; }
    char err[DS_ERRLEN];
    ds_quant q;
    ds_status st = ds_quant_parse(to, &q, err);
    if (!st) st = ds_quantize_checkpoint(in, out, q, isatty(2), err);
    if (st) {
        fprintf(stderr, "dsinfer: error: %s\n", err);
        return ds_cli_exit_code(st);
    }
    fprintf(stderr, "quantize: wrote %s (%s)\n", out, to);
    return 0;
}
