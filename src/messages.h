/*
 * messages.h - CoreMessages, the engine's message format (the AI SDK's:
 * {role, content} with content a string or parts {type:'text'|'tool-call'|
 * 'tool-result', ...}): normalising what clients send into them, and the
 * few readings of them the engine and the surfaces share.
 *
 * Pure functions over cJSON values; safe from any thread.
 */
#ifndef GH_MESSAGES_H
#define GH_MESSAGES_H

#include <cjson/cJSON.h>

#include "err.h"

/* Normalises what clients send as messages into CoreMessages: a string, an
 * array of strings, or an array of {role, content} (content a string or
 * parts; UI messages may carry their parts in "parts"). Unknown roles and
 * shapes are a GH_E_BADREQ naming the index; at most 1000 messages. *out:
 * caller frees. */
enum gh_code gh_messages_normalize(const cJSON *in, cJSON **out, struct gh_err *e);

/* The text of a CoreMessage's content: a string as it is, or the text of
 * its {type:'text'} parts run together; "" when there is none. Caller
 * frees; NULL when out of memory. */
char *gh_messages_text(const cJSON *content);

/* History read back from a thread may start mid-exchange (the window cut a
 * tool call from its results) or hold a call never answered: a copy that
 * keeps only well-formed sequences (an unanswered call's text survives),
 * so providers never see a dangling tool call. Caller frees; NULL on OOM. */
cJSON *gh_messages_sanitize_history(const cJSON *hist);

/* The tool-result parts of the role "tool" messages in messages, as an
 * array of references (borrowed from messages; free the array only).
 * NULL on OOM. */
cJSON *gh_messages_tool_results(const cJSON *messages);

#endif
