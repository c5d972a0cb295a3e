/*
 * fuzz_config.c - the config file parser: comment stripping, JSON, ${ENV}
 * substitution and every section's validation, on arbitrary bytes.
 *
 * Checks, besides no crash, no leak and bounded time:
 *   - GH_OK exactly when a config comes back; a refusal is GH_E_BADREQ (or
 *     GH_E_NOMEM) with a NUL-terminated message that starts with the file
 *     name, as operators see it;
 *   - an accepted config keeps its promises: at least one agent, each with
 *     its provider resolved and a model, the default agent one of them,
 *     threads >= max_streams + 4, every policy version 16 hex digits, every
 *     agent's tools either globs, memory tools or configured tools, every
 *     provider (but mock) and tool URL http(s) with a host and no spaces;
 *   - parsing the same bytes twice gives the same verdict, message and
 *     policy versions.
 * GH_FUZZ_VAR is set so ${GH_FUZZ_VAR} substitutes; others are unset.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "config.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* http:// or https://, a host, nothing curl would refuse. */
static int http_url(const char *u)
{
	size_t n;

	if (!u)
		return 0;
	n = !strncmp(u, "http://", 7) ? 7 : !strncmp(u, "https://", 8) ? 8 : 0;
	if (!n || !u[n] || u[n] == '/' || u[n] == '?' || u[n] == '#')
		return 0;
	for (; *u; u++)
		if ((unsigned char)*u <= ' ' || *u == 0x7f)
			return 0;
	return 1;
}

static void check_accepted(const struct gh_config *c)
{
	size_t i, j;

	CHECK(c->nagents >= 1);
	CHECK(c->default_agent && gh_config_agent(c, c->default_agent));
	CHECK(c->server.threads >= c->server.max_streams + 4);
	CHECK(c->server.listen && c->database.path);
	for (i = 0; i < c->nagents; i++) {
		const struct gh_agent_conf *a = &c->agents[i];

		CHECK(a->id && a->name && a->model && a->prov);
		CHECK(gh_config_provider(c, a->provider) == a->prov);
		CHECK(a->max_steps >= 1 && a->max_steps <= 100);
		for (j = 0; j < a->tools.n; j++) {
			const char *t = a->tools.v[j];

			CHECK(t && *t);
			CHECK(strpbrk(t, "*?") || !strncmp(t, "memory_", 7) ||
			      !strcmp(t, "working_memory_update") || gh_config_tool(c, t));
		}
	}
	for (i = 0; i < c->nproviders; i++) {
		CHECK(c->providers[i].type == GH_PROVIDER_MOCK ||
		      http_url(c->providers[i].base_url));
	}
	for (i = 0; i < c->ntools; i++) {
		CHECK(c->tools[i].input_schema && c->tools[i].description);
		CHECK(http_url(c->tools[i].url));
		for (j = 0; j < c->tools[i].nheaders; j++)
			CHECK(!strpbrk(c->tools[i].headers[j].value, "\r\n"));
	}
	for (i = 0; i < c->npolicies; i++) {
		CHECK(strlen(c->policies[i].version) == 16);
		CHECK(strspn(c->policies[i].version, "0123456789abcdef") == 16);
		CHECK(c->policies[i].approval_ttl_s >= 10);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int env_done;
	struct gh_config *a = NULL, *b = NULL;
	struct gh_err ea, eb;
	enum gh_code ra, rb;
	size_t i;

	if (!env_done) {
		setenv("GH_FUZZ_VAR", "fuzzed", 1);
		env_done = 1;
	}
	if (size > (1 << 16))
		return 0;
	memset(&ea, 'x', sizeof(ea));
	ra = gh_config_parse("fuzz.json", (const char *)data, size, &a, &ea);
	CHECK((ra == GH_OK) == (a != NULL));
	if (ra != GH_OK) {
		CHECK(ra == GH_E_BADREQ || ra == GH_E_NOMEM);
		CHECK(memchr(ea.msg, '\0', sizeof(ea.msg)) != NULL);
		CHECK(ra == GH_E_NOMEM || !strncmp(ea.msg, "fuzz.json: ", 11));
	} else {
		check_accepted(a);
	}
	rb = gh_config_parse("fuzz.json", (const char *)data, size, &b, &eb);
	CHECK(ra == rb);
	if (ra != GH_OK) {
		CHECK(!strcmp(ea.msg, eb.msg));
	} else {
		CHECK(a->npolicies == b->npolicies);
		for (i = 0; i < a->npolicies; i++)
			CHECK(!strcmp(a->policies[i].version, b->policies[i].version));
	}
	gh_config_free(a);
	gh_config_free(b);
	return 0;
}
