/*
 * fuzz_schema.c - tool schemas declared by clients and the arguments
 * models send against them.
 *
 * The input is "<schema JSON>\0<value JSON>" (no NUL: the whole input is
 * the schema and the value is missing). Both halves go through
 * cJSON_ParseWithLength; a schema that gh_schema_check() accepts is then
 * used to validate the value. Checks:
 *   - the messages are NUL-terminated inside their buffer, even a tiny one;
 *   - a refusal always says something, an acceptance leaves "";
 *   - validating twice gives the same verdict and the same message, and a
 *     short buffer holds a prefix of the full message;
 *   - no crash, no leak, bounded time (the step budget and depth limits).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                  \
	do {                      \
		if (!(c))         \
			abort();  \
	} while (0)

static void check_msg(const char *msg, size_t cap, int rc)
{
	size_t n = strnlen(msg, cap);

	CHECK(n < cap);
	CHECK(rc == 0 ? n == 0 : n > 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	const char *nul = memchr(p, '\0', size);
	size_t slen = nul ? (size_t)(nul - p) : size;
	cJSON *schema = NULL, *value = NULL;
	char msg[GH_SCHEMA_MSG_MAX], again[GH_SCHEMA_MSG_MAX], tiny[8];
	int rc, rc2, rc3;

	schema = cJSON_ParseWithLength(p, slen);
	if (nul)
		value = cJSON_ParseWithLength(nul + 1, size - slen - 1);
	if (!schema)
		goto out;
	memset(msg, 'x', sizeof(msg));
	rc = gh_schema_check(schema, msg, sizeof(msg));
	CHECK(rc == 0 || rc == -1);
	check_msg(msg, sizeof(msg), rc);
	if (rc != 0)
		goto out;

	memset(msg, 'x', sizeof(msg));
	rc = gh_schema_validate(schema, value, msg, sizeof(msg));
	CHECK(rc == 0 || rc == -1);
	check_msg(msg, sizeof(msg), rc);
	CHECK(value || rc == -1);

	memset(again, 'y', sizeof(again));
	rc2 = gh_schema_validate(schema, value, again, sizeof(again));
	CHECK(rc2 == rc);
	CHECK(strcmp(msg, again) == 0);

	memset(tiny, 'z', sizeof(tiny));
	rc3 = gh_schema_validate(schema, value, tiny, sizeof(tiny));
	CHECK(rc3 == rc);
	check_msg(tiny, sizeof(tiny), rc);
	CHECK(strncmp(msg, tiny, strlen(tiny)) == 0);
out:
	cJSON_Delete(schema);
	cJSON_Delete(value);
	return 0;
}
