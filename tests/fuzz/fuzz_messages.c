/*
 * fuzz_messages.c - what a client sends to generate/stream: the messages
 * (normalised into CoreMessages) and the client tool definitions (Mastra
 * and OpenAI shapes, schemas checked). Input: a JSON document
 * {"messages": ..., "clientTools": ..., "tools": ...}. Must never crash or
 * leak, and anything accepted must be well-formed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "messages.h"
#include "tools.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *doc = NULL, *msgs = NULL, *defs = NULL, *m;
	struct gh_err e;

	if (gh_json_parse((const char *)data, size, "input", &doc, &e) != GH_OK)
		return 0;
	if (gh_messages_normalize(cJSON_GetObjectItemCaseSensitive(doc, "messages"), &msgs,
				      &e) == GH_OK) {
		cJSON_ArrayForEach(m, msgs) {
			const char *role = gh_json_str(m, "role");

			if (!role || !cJSON_GetObjectItemCaseSensitive(m, "content"))
				abort(); /* accepted messages always have both */
		}
	}
	if (gh_tools_client_defs(cJSON_GetObjectItemCaseSensitive(doc, "clientTools"),
				 cJSON_GetObjectItemCaseSensitive(doc, "tools"), "clientTools", &defs,
				 &e) == GH_OK) {
		cJSON_ArrayForEach(m, defs) {
			const char *name = gh_json_str(m, "name");

			if (!name || !*name || strlen(name) > 63)
				abort(); /* names are always normalised */
		}
	}
	cJSON_Delete(defs);
	cJSON_Delete(msgs);
	cJSON_Delete(doc);
	return 0;
}
