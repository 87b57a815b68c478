/* A terminal chat over the public API: the conversation, its template, and one sequence whose KV
 * cache is reused across turns. */
#ifndef DS_CLI_CHAT_SESSION_H
#define DS_CLI_CHAT_SESSION_H

#include "cli/model_args.h"

typedef struct chat_session chat_session;

ds_status chat_session_open(const model_args *a, chat_session **out, char *err);
void chat_session_free(chat_session *cs);
const char *chat_session_describe(const chat_session *cs);
/* One user turn: renders, generates, prints the reply (reasoning apart, dimmed when color), and
 * appends the answer to the history. DS_ERR_ARG when the conversation no longer fits the context. */
ds_status chat_session_turn(chat_session *cs, const char *user_text, int color, char *err);

#endif
