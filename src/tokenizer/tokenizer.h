/* Tokenizer, chat templates, and the parsing of generated text (reasoning and tool calls).
 *
 * This header is the project-wide contract of src/tokenizer/. Everything here is plain C over UTF-8
 * strings and int32 token ids; nothing depends on the engine.
 *
 *   ds_tokenizer     a Hugging Face `tokenizer.json` (byte-level BPE) + `tokenizer_config.json`, loaded
 *                    from a model folder. Immutable after load: encode/decode may run on many threads.
 *   ds_detok         incremental decoding for streaming: never emits a partial UTF-8 sequence.
 *   ds_chat_render   DeepSeek V3 / R1 / V2 chat templates, rendered in C exactly as their Jinja text.
 *   ds_reasoning     splits R1 output into reasoning_content and content, streaming-safe.
 *   ds_toolparse     parses DeepSeek-V3 tool calls (<｜tool▁calls▁begin｜> ...), streaming-safe.
 *
 * Errors follow include/dsinfer.h: calls that bad input can fail return a ds_status and write a
 * one-line message into err (DS_ERRLEN bytes, may be NULL).
 */
#ifndef DS_TOKENIZER_H
#define DS_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "dsinfer.h"

/* ---- tokenizer ------------------------------------------------------------------------------- */
typedef struct ds_tokenizer ds_tokenizer;

/* Loads DIR/tokenizer.json (required) and DIR/tokenizer_config.json (optional: bos/eos, add_bos_token,
 * chat_template). Supported: model BPE (byte-level, merges as "a b" or ["a","b"], ignore_merges),
 * normalizer null or an empty Sequence, pre_tokenizer Split (Regex or String pattern, any behavior,
 * invert) and ByteLevel (use_regex, add_prefix_space), alone or in a Sequence ending with ByteLevel,
 * decoder ByteLevel, added tokens (special or not, normalized or not, lstrip/rstrip). Anything else (other
 * models, normalizers, pre-tokenizers, decoders, single_word) fails with DS_ERR_UNSUPPORTED naming it.
 * The post_processor is ignored: BOS is added only on request (see ds_tokenizer_encode). */
ds_status ds_tokenizer_load(const char *dir, ds_tokenizer **out, char *err);
/* Same, from explicit file paths; config_path may be NULL. */
ds_status ds_tokenizer_load_files(const char *tokenizer_json, const char *config_path, ds_tokenizer **out,
                                  char *err);
void ds_tokenizer_free(ds_tokenizer *tok);

int ds_tokenizer_n_vocab(const ds_tokenizer *tok);   /* max id + 1 (vocab and added tokens) */
int ds_tokenizer_bos_id(const ds_tokenizer *tok);    /* -1 if none */
int ds_tokenizer_eos_id(const ds_tokenizer *tok);    /* -1 if none */
int ds_tokenizer_add_bos(const ds_tokenizer *tok);   /* tokenizer_config add_bos_token (0/1) */
/* Id of a token given its exact text (vocab entry or added token); -1 if none. */
int ds_tokenizer_token_id(const ds_tokenizer *tok, const char *text);
/* The token's text as stored in tokenizer.json (byte-level chars, e.g. "Ġthe"); NULL if id unknown. */
const char *ds_tokenizer_token_text(const ds_tokenizer *tok, int id);
int ds_tokenizer_is_special(const ds_tokenizer *tok, int id);   /* added token with special: true */
/* chat_template text of tokenizer_config.json, or NULL. */
const char *ds_tokenizer_chat_template_text(const ds_tokenizer *tok);

/* Encodes UTF-8 text exactly as HF tokenizers' encode(text, add_special_tokens=False): added tokens
 * (special or not) matched first, leftmost-longest, then the pre-tokenizer, then BPE by merge rank.
 * add_bos = 1 prepends the BOS id (callers that render a chat template must pass 0: the template already
 * starts with the BOS text). *ids is malloc'd (free it); *n_ids may be 0 for empty text.
 * Fails with DS_ERR_ARG on invalid UTF-8 (message names the byte offset). Known difference: regex classes
 * (\p{L}, \p{N}, ...) use the Unicode tables of the system's PCRE2 (Unicode 14 for 10.42), so characters
 * assigned later may pre-tokenize differently from HF's Oniguruma. */
ds_status ds_tokenizer_encode(const ds_tokenizer *tok, const char *text, size_t len, int add_bos,
                              int32_t **ids, size_t *n_ids, char *err);

/* Decodes ids exactly as HF tokenizers' decode(ids, skip_special_tokens): token texts mapped back to
 * bytes by the ByteLevel decoder, invalid UTF-8 replaced by U+FFFD (one per maximal invalid subpart),
 * unknown ids skipped. *text is malloc'd and NUL-terminated; *len excludes the NUL. */
ds_status ds_tokenizer_decode(const ds_tokenizer *tok, const int32_t *ids, size_t n_ids,
                              int skip_special_tokens, char **text, size_t *len, char *err);

/* ---- incremental decoding (streaming) -------------------------------------------------------- */
/* Feeding ids one at a time and concatenating every returned piece plus ds_detok_flush() gives exactly
 * ds_tokenizer_decode() of all ids. A piece never ends inside a UTF-8 sequence that may still be
 * completed by later ids. */
typedef struct ds_detok ds_detok;
ds_detok *ds_detok_new(const ds_tokenizer *tok, int skip_special_tokens);
void ds_detok_free(ds_detok *d);
/* Returns the newly decodable text (may be ""), owned by d, valid until the next call on d. */
const char *ds_detok_push(ds_detok *d, int32_t id, size_t *len);
/* End of stream: returns what was held back (incomplete UTF-8 becomes U+FFFD), then resets d. */
const char *ds_detok_flush(ds_detok *d, size_t *len);

/* ---- chat templates --------------------------------------------------------------------------- */
typedef enum {
    DS_CHAT_AUTO = 0,      /* the template detected from the tokenizer's tokenizer_config.json */
    DS_CHAT_DEEPSEEK_V3,   /* DeepSeek-V3 tokenizer_config.json template (spec 15.1) */
    DS_CHAT_DEEPSEEK_R1,   /* V3 + history cut after </think> + "<｜Assistant｜><think>\n" (spec 15.2) */
    DS_CHAT_DEEPSEEK_V2,   /* "User: ...\n\nAssistant: ..." (spec 15.3) */
} ds_chat_template;

/* "deepseek-v3", "deepseek-r1", "deepseek-v2" (and "auto"). */
ds_status ds_chat_template_from_name(const char *name, ds_chat_template *out, char *err);
const char *ds_chat_template_name(ds_chat_template t);
/* Identifies the family of a Jinja chat_template text; DS_ERR_UNSUPPORTED for an unknown one, and for later
 * DeepSeek variants (V3-0324 / R1-0528 / V3.1 style) whose differences are not reproduced. */
ds_status ds_chat_template_detect(const char *jinja, ds_chat_template *out, char *err);
/* The template to use: `name` (a --chat-template choice; NULL or "auto" = detect from the tokenizer's
 * chat_template text). DS_ERR_UNSUPPORTED when the model has no template or an unknown one. */
ds_status ds_chat_template_choose(const ds_tokenizer *tok, const char *name, ds_chat_template *out, char *err);

/* One chat message, OpenAI style. Strings are UTF-8, NUL-terminated; NULL = absent. */
typedef struct {
    const char *role;               /* "system", "user", "assistant" or "tool" */
    const char *content;            /* NULL only for an assistant message that carries tool_calls */
    const char *reasoning_content;  /* assistant; never rendered (templates drop earlier reasoning) */
    const char *tool_calls;         /* assistant; JSON array of {"type":"function","function":
                                       {"name":"...","arguments":"<JSON text>"}} (arguments may also be
                                       an object: it is then written compactly) */
    const char *tool_call_id;       /* tool; not rendered by the DeepSeek templates */
} ds_chat_msg;

/* Renders messages to the prompt text, equal to the model's Jinja template rendered by HF with
 * bos_token/eos_token of the tokenizer. tok may be NULL when tpl is explicit (DeepSeek BOS/EOS texts are
 * used). Encode the result with add_bos = 0: it starts with the BOS text (one BOS only).
 * *out is malloc'd, NUL-terminated. */
ds_status ds_chat_render(const ds_tokenizer *tok, ds_chat_template tpl, const ds_chat_msg *msgs,
                         int n_msgs, int add_generation_prompt, char **out, char *err);

/* ---- reasoning parsing (R1, spec 16) ------------------------------------------------------------ */
/* Splits generated text into reasoning (inside <think> ... </think>) and content (after </think>). Starts
 * in reasoning mode when start_in_reasoning (R1's template forces "<think>\n" into the prompt). A <think>
 * tag seen in reasoning mode is dropped; the first </think> switches to content; tags never appear in
 * either output. Text that may be the start of a tag is held back until it is decided. */
typedef struct ds_reasoning ds_reasoning;
typedef struct {
    const char *reasoning; size_t reasoning_len;   /* new reasoning text (owned by the parser) */
    const char *content; size_t content_len;       /* new content text (owned by the parser) */
} ds_reasoning_delta;
ds_reasoning *ds_reasoning_new(int start_in_reasoning);
void ds_reasoning_free(ds_reasoning *r);
/* Feeds generated text; delta is valid until the next call on r. */
void ds_reasoning_feed(ds_reasoning *r, const char *text, size_t len, ds_reasoning_delta *delta);
/* End of generation: releases held-back text. */
void ds_reasoning_finish(ds_reasoning *r, ds_reasoning_delta *delta);
int ds_reasoning_in_reasoning(const ds_reasoning *r);   /* 1 until </think> was seen */

/* ---- tool-call parsing (DeepSeek-V3 format) ------------------------------------------------------ */
/* Format: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>TYPE<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>
 * (more calls, optionally separated by "\n") <｜tool▁calls▁end｜>. Text outside the block is content. */
typedef enum {
    DS_TOOL_EV_CONTENT,     /* text: a content delta */
    DS_TOOL_EV_CALL_BEGIN,  /* index, name, type: a call's header is complete */
    DS_TOOL_EV_ARGS,        /* index, text: a delta of the arguments text */
    DS_TOOL_EV_CALL_END,    /* index, name, type, text: the complete arguments; args_valid_json */
} ds_tool_ev_kind;
typedef struct {
    ds_tool_ev_kind kind;
    int index;                /* 0-based call index */
    const char *text; size_t len;
    const char *name;         /* CALL_BEGIN / CALL_END */
    const char *type;         /* CALL_BEGIN / CALL_END, e.g. "function" */
    int args_valid_json;      /* CALL_END: 1 if text parses as JSON */
} ds_tool_event;
typedef struct ds_toolparse ds_toolparse;
ds_toolparse *ds_toolparse_new(void);
void ds_toolparse_free(ds_toolparse *p);
/* Feeds generated text; *events (owned by p, valid until the next call) receives *n_events events. */
void ds_toolparse_feed(ds_toolparse *p, const char *text, size_t len, const ds_tool_event **events,
                       int *n_events);
/* End of generation: releases held-back text (an unterminated call ends with what it has). */
void ds_toolparse_finish(ds_toolparse *p, const ds_tool_event **events, int *n_events);
int ds_toolparse_n_calls(const ds_toolparse *p);

#endif
