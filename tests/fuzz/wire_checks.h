/*
 * wire_checks.h - properties every wire parser's target checks of the
 * CoreMessages it hands the engine.
 */
#ifndef GH_FUZZ_WIRE_CHECKS_H
#define GH_FUZZ_WIRE_CHECKS_H

#include <string.h>

#include "harness.h"
#include "json.h"
#include "messages.h"

/* How many messages of msgs have this role. */
static inline int count_role(const cJSON *msgs, const char *role)
{
	const cJSON *m;
	int n = 0;

	cJSON_ArrayForEach(m, msgs) {
		const char *r = gh_json_str(m, "role");

		n += r && !strcmp(r, role);
	}
	return n;
}

/* The engine takes what the wire hands it: an array (empty only when
 * allow_empty) that the engine's own normaliser accepts, message for
 * message. */
static inline void check_core(const cJSON *msgs, int allow_empty)
{
	cJSON *norm = NULL;
	struct gh_err e;

	CHECK(cJSON_IsArray(msgs));
	if (cJSON_GetArraySize(msgs) == 0) {
		CHECK(allow_empty);
		return;
	}
	CHECK(gh_messages_normalize(msgs, &norm, &e) == GH_OK);
	CHECK(cJSON_GetArraySize(norm) == cJSON_GetArraySize(msgs));
	cJSON_Delete(norm);
}

#endif
