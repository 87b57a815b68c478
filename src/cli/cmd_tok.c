/* `dsinfer tokenize` and `dsinfer detokenize`: argument parsing around src/tokenizer/tokenizer.h.
 *
 *   dsinfer tokenize --model DIR [--bos] < text      ids of stdin, comma-separated on one line, as HF's
 *                                                   encode(text, add_special_tokens=False)
 *   dsinfer detokenize --model DIR --ids 1,2,3 [--skip-special-tokens]    the decoded text + "\n" */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/status.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    const char *model, *ids;
    int bos, skip_special;
} tok_args;

enum { OPT_BOS = 256, OPT_SKIP, OPT_HELP };

static const struct option long_opts[] = {
    {"model", required_argument, 0, 'm'}, {"ids", required_argument, 0, 'i'}, {"bos", no_argument, 0, OPT_BOS},
    {"skip-special-tokens", no_argument, 0, OPT_SKIP}, {"help", no_argument, 0, OPT_HELP}, {0, 0, 0, 0}};

static void usage(const char *cmd) {
    if (!strcmp(cmd, "tokenize"))
        fprintf(stderr, "usage: dsinfer tokenize --model DIR [--bos] < text.txt\n"
                        "  prints the token ids of stdin (UTF-8), comma-separated on one line\n");
    else
        fprintf(stderr, "usage: dsinfer detokenize --model DIR --ids 1,2,3 [--skip-special-tokens]\n"
                        "  prints the text of the ids\n");
}

/* Returns 0, or 2 after printing the usage. */
static int parse_args(int argc, char **argv, int need_ids, tok_args *a) {
    memset(a, 0, sizeof *a);
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "m:i:", long_opts, NULL)) != -1) {
        switch (c) {
        case 'm': a->model = optarg; break;
        case 'i': a->ids = optarg; break;
        case OPT_BOS: a->bos = 1; break;
        case OPT_SKIP: a->skip_special = 1; break;
        case OPT_HELP: usage(argv[0]); return 2;
        default:
            fprintf(stderr, "dsinfer %s: unknown or incomplete flag \"%s\"\n", argv[0], argv[optind - 1]);
            usage(argv[0]);
            return 2;
        }
    }
    if (optind < argc) { fprintf(stderr, "dsinfer %s: unexpected argument \"%s\"\n", argv[0], argv[optind]); usage(argv[0]); return 2; }
    if (!a->model) { fprintf(stderr, "dsinfer %s: --model DIR is required\n", argv[0]); usage(argv[0]); return 2; }
    if (need_ids && !a->ids) { fprintf(stderr, "dsinfer %s: --ids is required\n", argv[0]); usage(argv[0]); return 2; }
    return 0;
}

static int load(const char *cmd, const char *dir, ds_tokenizer **tok) {
    char err[DS_ERRLEN];
    ds_status st = ds_tokenizer_load(dir, tok, err);
    if (st) fprintf(stderr, "dsinfer %s: %s: %s\n", cmd, dir, err);
    return st ? ds_cli_exit_code(st) : 0;
}

static char *read_stdin(size_t *len) {
    size_t cap = 1 << 16, n = 0, r;
    char *buf = ds_xmalloc(cap);
    while ((r = fread(buf + n, 1, cap - n, stdin)) > 0) {
        n += r;
        if (n == cap) buf = ds_xrealloc(buf, cap *= 2);
    }
    *len = n;
    return buf;
}

int cli_tokenize(int argc, char **argv) {
    tok_args a;
    int rc = parse_args(argc, argv, 0, &a);
    ds_tokenizer *tok = NULL;
    if (rc || (rc = load(argv[0], a.model, &tok))) return rc;
    size_t len, n = 0;
    char *text = read_stdin(&len), err[DS_ERRLEN];
    int32_t *ids = NULL;
    ds_status st = ds_tokenizer_encode(tok, text, len, a.bos, &ids, &n, err);
    if (st) {
        fprintf(stderr, "dsinfer %s: %s\n", argv[0], err);
        rc = ds_cli_exit_code(st);
    } else {
        for (size_t i = 0; i < n; i++) printf(i ? ",%d" : "%d", ids[i]);
        printf("\n");
    }
    free(ids);
    free(text);
    ds_tokenizer_free(tok);
    return rc;
}

int cli_detokenize(int argc, char **argv) {
    tok_args a;
    int rc = parse_args(argc, argv, 1, &a);
    ds_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    int n = 0;
    if (rc) return rc;
    if (ds_cli_parse_ids(a.ids, &ids, &n)) return 2;
    if ((rc = load(argv[0], a.model, &tok))) { free(ids); return rc; }
    char *text, err[DS_ERRLEN];
    size_t len;
    ds_status st = ds_tokenizer_decode(tok, ids, (size_t)n, a.skip_special, &text, &len, err);
    if (st) {
        fprintf(stderr, "dsinfer %s: %s\n", argv[0], err);
        rc = ds_cli_exit_code(st);
    } else {
        fwrite(text, 1, len, stdout);
        fputc('\n', stdout);
        free(text);
    }
    free(ids);
    ds_tokenizer_free(tok);
    return rc;
}
