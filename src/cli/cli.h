/* dsinfer subcommands. Each takes the argv that follows "dsinfer" (argv[0] = the subcommand) and
 * returns the process exit code: 0 ok, 2 bad usage, otherwise ds_cli_exit_code(status). */
#ifndef DS_CLI_H
#define DS_CLI_H

#include "dsinfer.h"

int cli_logits(int argc, char **argv);
int cli_generate(int argc, char **argv);
int cli_chat(int argc, char **argv);
int cli_perplexity(int argc, char **argv);
int cli_quantize(int argc, char **argv);
int cli_compare(int argc, char **argv);
int cli_plan(int argc, char **argv);
int cli_tokenize(int argc, char **argv);     /* src/cli/cmd_tok.c */
int cli_detokenize(int argc, char **argv);   /* src/cli/cmd_tok.c */
int cli_serve(int argc, char **argv);        /* src/cli/cmd_serve.c */
int cli_bench(int argc, char **argv);        /* src/cli/cmd_bench.c */
int cli_top(int argc, char **argv);          /* src/cli/cmd_top.c */

/* Exit code of a failed call: 2 argument, 3 i/o, 4 bad format, 5 unsupported, 6 memory, 7 backend. */
int ds_cli_exit_code(ds_status st);

/* Parses "1,2,3" into ids (malloc'd); returns -1 and prints why on a bad list. */
int ds_cli_parse_ids(const char *s, int32_t **ids, int *n);

#endif
