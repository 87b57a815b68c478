/* `dsinfer chat`: an interactive chat on the terminal. Each turn renders the whole conversation with
 * the model's chat template, keeps the KV cache of the longest common token prefix with what the
 * sequence already holds (ds_seq_truncate) and feeds only the rest. R1-style output is split into
 * reasoning (shown dimmed on a terminal, apart from the answer) and the answer, which alone goes back
 * into the history. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/chat_session.h"
#include "cli/cli.h"
#include "core/status.h"

int cli_chat(int argc, char **argv) {
    model_args o;
    int rc = model_args_parse(argc, argv, &o);
    if (rc) return rc;
    if (o.n_new == 32) o.n_new = 512;   /* the generate default is short; a chat reply may be longer */
    char err[DS_ERRLEN];
    chat_session *cs = NULL;
    ds_status st = chat_session_open(&o, &cs, err);
    if (st) {
        fprintf(stderr, "dsinfer: error: %s\n", err);
        return ds_cli_exit_code(st);
    }
    int tty = isatty(0) && isatty(1);
    if (tty) fprintf(stderr, "%s\n(empty line or Ctrl-D to quit)\n", chat_session_describe(cs));
    char *line = NULL;
    size_t cap = 0;
    for (;;) {
        if (tty) fputs("\n> ", stdout), fflush(stdout);
        ssize_t n = getline(&line, &cap, stdin);
        if (n <= 0) break;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (n == 0) break;
        st = chat_session_turn(cs, line, tty, err);
        if (st) {
            fprintf(stderr, "dsinfer: error: %s\n", err);
            if (st != DS_ERR_ARG) break;   /* a too-long turn is reported; anything else ends the chat */
        }
    }
    free(line);
    chat_session_free(cs);
    return st && st != DS_ERR_ARG ? ds_cli_exit_code(st) : 0;
}
