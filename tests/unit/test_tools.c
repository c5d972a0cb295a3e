/*
 * test_tools.c - a run's tool set: names normalised exactly as Mastra does
 * (compared against a transcription of Mastra's formatTools), client tool
 * definitions from Mastra clientTools and OpenAI tools, invalid schemas
 * refused naming the tool, collisions between any two tools a 400 naming
 * both, client tools the policy refuses a 403 naming the rule, and server
 * tools the policy denies never offered to the model.
 */
#include "schema.h"
#include "tools.h"

#include "json.h"
#include "t.h"
#include "util.h"

/* ---- normalisation ---- */

/*
 * Mastra's Agent.formatTools (@mastra/core 1.x), on JavaScript strings:
 *   newKey = key.replace(/[^a-zA-Z0-9_\-]/g, "_");
 *   if (!newKey[0].match(/[a-zA-Z_]/)) newKey = "_" + newKey;
 *   newKey = newKey.slice(0, 63);
 * One '_' per UTF-16 code unit: one per character of the Basic
 * Multilingual Plane, two for a character beyond it.
 */
static void mastra_normalize(const char *in, char *out, size_t cap)
{
	const unsigned char *p = (const unsigned char *)in;
	char tmp[1024];
	size_t n = 0;

	while (*p && n + 2 < sizeof(tmp)) {
		unsigned char c = *p;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '_' || c == '-') {
			tmp[n++] = (char)c;
			p++;
		} else if (c < 0x80) {
			tmp[n++] = '_';
			p++;
		} else {
			size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;

			tmp[n++] = '_';
			if (len == 4)
				tmp[n++] = '_'; /* a surrogate pair is two code units */
			while (len-- && *p)
				p++;
		}
	}
	tmp[n] = '\0';
	if (!((tmp[0] >= 'a' && tmp[0] <= 'z') || (tmp[0] >= 'A' && tmp[0] <= 'Z') ||
	      tmp[0] == '_'))
		snprintf(out, cap, "_%.62s", tmp);
	else
		snprintf(out, cap, "%.63s", tmp);
}

static void test_normalize(void)
{
	static const char *const names[] = {
		"get_weather",
		"get-weather",
		"getWeather2",
		"get weather",
		"get.weather",
		"a/b:c@d",
		"9lives",
		"-dash",
		"_private",
		".hidden",       /* a bad first character becomes the '_' */
		" spaced",
		"$var",
		"x",
		"0",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		"1aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		"t\xc3\xabst",                   /* tëst */
		"\xc3\xa9t\xc3\xa9",            /* été */
		"price\xe2\x82\xac",             /* price€ */
		"\xf0\x9f\x98\x80smile",         /* an emoji: two UTF-16 units */
	};
	char got[GH_TOOL_NAME_MAX], want[GH_TOOL_NAME_MAX];
	size_t i;
	int bad = 0;

	for (i = 0; i < GH_ARRAY_LEN(names); i++) {
		gh_tool_normalize(names[i], got);
		mastra_normalize(names[i], want, sizeof(want));
		if (strcmp(got, want)) {
			fprintf(stderr, "  \"%s\" -> \"%s\", Mastra gives \"%s\"\n", names[i], got,
				want);
			bad++;
		}
		T_ASSERT(strlen(got) <= 63);
	}
	if (bad)
		T_FAIL("%d of %zu names normalised differently from Mastra", bad,
		       GH_ARRAY_LEN(names));
	/* the rules themselves, spelled out */
	gh_tool_normalize("my tool!", got);
	T_EQ_STR(got, "my_tool_");
	gh_tool_normalize("3d_print", got);
	T_EQ_STR(got, "_3d_print");
	gh_tool_normalize("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
			  "aaaa",
			  got);
	T_EQ_INT(strlen(got), 63);
}

/* ---- client tool definitions ---- */

static cJSON *defs_of(const char *mastra, const char *openai, enum gh_code *rc, struct gh_err *e)
{
	cJSON *m = mastra ? cJSON_Parse(mastra) : NULL, *o = openai ? cJSON_Parse(openai) : NULL;
	cJSON *out = NULL;

	gh_err_clear(e);
	*rc = gh_tools_client_defs(m, o, mastra ? "clientTools" : "tools", &out, e);
	cJSON_Delete(m);
	cJSON_Delete(o);
	return out;
}

static const cJSON *def_named(const cJSON *defs, const char *name)
{
	const cJSON *d;

	cJSON_ArrayForEach(d, defs)
		if (!strcmp(gh_json_str(d, "name"), name))
			return d;
	return NULL;
}

static void test_client_defs_mastra(void)
{
	struct gh_err e;
	enum gh_code rc;
	cJSON *defs = defs_of(
		"{\"getLocation\":{\"id\":\"getLocation\",\"description\":\"Where the user is\","
		"\"inputSchema\":{\"type\":\"object\",\"properties\":{\"precise\":"
		"{\"type\":\"boolean\"}}}},"
		"\"confirm\":{\"parameters\":{\"type\":\"object\"},\"requireApproval\":true},"
		"\"zod\":{\"inputSchema\":{\"jsonSchema\":{\"type\":\"object\","
		"\"required\":[\"q\"]}}},"
		"\"bare\":{},"
		"\"ask.user\":{\"needsApproval\":true,\"inputSchema\":null}}",
		NULL, &rc, &e);
	const cJSON *d;

	T_EQ_INT(rc, GH_OK);
	T_EQ_INT(cJSON_GetArraySize(defs), 5);
	d = def_named(defs, "getLocation");
	T_ASSERT(d != NULL);
	T_EQ_STR(gh_json_str(d, "origName"), "getLocation");
	T_EQ_STR(gh_json_str(d, "description"), "Where the user is");
	T_EQ_INT(gh_json_bool(d, "requireApproval", -1), 0);
	T_ASSERT(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "parameters"),
							 "properties"),
				     "precise") != NULL);
	d = def_named(defs, "confirm");
	T_EQ_INT(gh_json_bool(d, "requireApproval", -1), 1);
	T_EQ_STR(gh_json_str(cJSON_GetObjectItem(d, "parameters"), "type"), "object");
	/* zod-to-json-schema wrapper unwrapped */
	d = def_named(defs, "zod");
	T_ASSERT(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "parameters"), "required") != NULL);
	T_ASSERT(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "parameters"), "jsonSchema") == NULL);
	/* no schema: an empty object schema; no description: "" */
	d = def_named(defs, "bare");
	T_EQ_STR(gh_json_str(cJSON_GetObjectItem(d, "parameters"), "type"), "object");
	T_EQ_STR(gh_json_str(d, "description"), "");
	/* the name the model sees, and the one the client declared */
	d = def_named(defs, "ask_user");
	T_ASSERT(d != NULL);
	T_EQ_STR(gh_json_str(d, "origName"), "ask.user");
	T_EQ_INT(gh_json_bool(d, "requireApproval", -1), 1);
	T_ASSERT(cJSON_GetObjectItem(d, "outputSchema") == NULL);
	cJSON_Delete(defs);

	/* an output schema is kept (zod's wrapper unwrapped), null is none */
	defs = defs_of("{\"count\":{\"outputSchema\":{\"jsonSchema\":{\"type\":\"object\","
		       "\"required\":[\"n\"]}}},\"plain\":{\"outputSchema\":null}}",
		       NULL, &rc, &e);
	T_EQ_INT(rc, GH_OK);
	d = def_named(defs, "count");
	T_ASSERT(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "outputSchema"), "required") != NULL);
	T_ASSERT(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "outputSchema"), "jsonSchema") == NULL);
	T_ASSERT(cJSON_GetObjectItem(def_named(defs, "plain"), "outputSchema") == NULL);
	cJSON_Delete(defs);

	/* nothing sent: an empty list */
	defs = defs_of(NULL, NULL, &rc, &e);
	T_EQ_INT(rc, GH_OK);
	T_ASSERT(cJSON_IsArray(defs) && cJSON_GetArraySize(defs) == 0);
	cJSON_Delete(defs);
	defs = defs_of("null", "null", &rc, &e);
	T_EQ_INT(rc, GH_OK);
	T_EQ_INT(cJSON_GetArraySize(defs), 0);
	cJSON_Delete(defs);
}

static void test_client_defs_openai(void)
{
	struct gh_err e;
	enum gh_code rc;
	cJSON *defs = defs_of(
		NULL,
		"[{\"type\":\"function\",\"function\":{\"name\":\"get.time\","
		"\"description\":\"Now\",\"parameters\":{\"type\":\"object\","
		"\"properties\":{\"tz\":{\"type\":\"string\"}}}}},"
		"{\"function\":{\"name\":\"noparams\"}},"
		"{\"type\":\"function\",\"function\":{\"name\":\"strict\",\"strict\":true,"
		"\"parameters\":{\"type\":\"object\",\"properties\":{},"
		"\"additionalProperties\":false,"
		"\"required\":[]}},\"requireApproval\":true}]",
		&rc, &e);
	const cJSON *d;

	T_EQ_INT(rc, GH_OK);
	T_EQ_INT(cJSON_GetArraySize(defs), 3);
	d = def_named(defs, "get_time");
	T_ASSERT(d != NULL);
	T_EQ_STR(gh_json_str(d, "origName"), "get.time");
	T_EQ_STR(gh_json_str(d, "description"), "Now");
	T_EQ_INT(gh_json_bool(d, "requireApproval", -1), 0);
	d = def_named(defs, "noparams");
	T_EQ_STR(gh_json_str(cJSON_GetObjectItem(d, "parameters"), "type"), "object");
	d = def_named(defs, "strict");
	T_EQ_INT(gh_json_bool(d, "requireApproval", -1), 1);
	cJSON_Delete(defs);

	/* both shapes in one request are merged */
	{
		cJSON *m = cJSON_Parse("{\"a\":{}}");
		cJSON *o = cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"b\"}}]");

		T_EQ_INT(gh_tools_client_defs(m, o, "x", &defs, &e), GH_OK);
		T_EQ_INT(cJSON_GetArraySize(defs), 2);
		cJSON_Delete(defs);
		cJSON_Delete(m);
		cJSON_Delete(o);
	}
}

static void test_client_defs_refused(void)
{
	static const struct {
		const char *mastra, *openai, *msg;
	} c[] = {
		{"{\"sendIt\":{\"inputSchema\":{\"type\":\"object\",\"properties\":{\"to\":"
		 "{\"type\":\"strng\"}}}}}",
		 NULL,
		 "clientTools.sendIt: invalid input schema: properties.to.type: unknown type"},
		{"{\"p\":{\"inputSchema\":{\"pattern\":\"(?=x)\"}}}", NULL,
		 "clientTools.p: invalid input schema: pattern:"},
		{"{\"s\":{\"inputSchema\":\"object\"}}", NULL,
		 "clientTools.s: the input schema must be a JSON Schema object"},
		{"{\"s\":{\"parameters\":[1]}}", NULL,
		 "clientTools.s: the input schema must be a JSON Schema object"},
		{"{\"t\":true}", NULL, "clientTools.t: expected an object"},
		{"{\"o\":{\"outputSchema\":{\"type\":\"strng\"}}}", NULL,
		 "clientTools.o: invalid output schema: type: unknown type"},
		{"{\"o\":{\"outputSchema\":[1]}}", NULL,
		 "clientTools.o: the output schema must be a JSON Schema object"},
		{"[]", NULL, "clientTools: expected an object of name -> tool"},
		{NULL, "{}", "tools: expected an array of tools"},
		{NULL, "[{\"type\":\"function\",\"function\":{\"name\":\"x\",\"parameters\":"
		       "{\"required\":\"a\"}}}]",
		 "tools.x: invalid input schema: required: must be an array of strings"},
		{NULL, "[{\"type\":\"code_interpreter\"}]",
		 "tools[0]: expected {\"type\":\"function\""},
		{NULL, "[{\"type\":\"function\",\"function\":{\"name\":\"ok\"}},\"x\"]",
		 "tools[1]: expected {\"type\":\"function\""},
		{NULL, "[{\"type\":\"function\",\"function\":{\"description\":\"no name\"}}]",
		 "tools: a tool needs a name"},
		{NULL, "[{\"type\":\"function\",\"function\":{\"name\":\"\"}}]",
		 "tools: a tool needs a name"},
	};
	struct gh_err e;
	enum gh_code rc;
	size_t i;

	for (i = 0; i < GH_ARRAY_LEN(c); i++) {
		cJSON *defs = defs_of(c[i].mastra, c[i].openai, &rc, &e);

		T_ASSERT(defs == NULL);
		if (rc != GH_E_BADREQ || !strstr(e.msg, c[i].msg))
			T_FAIL("case %zu: rc %d \"%s\", expected \"%s\"", i, rc, e.msg, c[i].msg);
	}
}

static void test_client_defs_limits(void)
{
	struct gh_buf b;
	struct gh_err e;
	enum gh_code rc;
	cJSON *defs;
	char *desc;
	int i;

	/* 128 tools fit, 129 do not */
	gh_buf_init(&b, 1 << 16);
	gh_buf_putc(&b, '{');
	for (i = 0; i < 128; i++)
		gh_buf_printf(&b, "%s\"t%d\":{}", i ? "," : "", i);
	gh_buf_putc(&b, '}');
	defs = defs_of(b.data, NULL, &rc, &e);
	T_EQ_INT(rc, GH_OK);
	T_EQ_INT(cJSON_GetArraySize(defs), 128);
	cJSON_Delete(defs);
	b.len--;
	gh_buf_puts(&b, ",\"t128\":{}}");
	defs = defs_of(b.data, NULL, &rc, &e);
	T_EQ_INT(rc, GH_E_BADREQ);
	T_CONTAINS(e.msg, "more than 128 tools");
	gh_buf_free(&b);

	/* a description of 16 KiB fits, one byte more does not */
	desc = malloc(16384 + 64);
	memset(desc, 'd', 16384 + 1);
	desc[16384 + 1] = '\0';
	{
		cJSON *m = cJSON_CreateObject(), *t = cJSON_AddObjectToObject(m, "long");

		cJSON_AddStringToObject(t, "description", desc);
		T_EQ_INT(gh_tools_client_defs(m, NULL, "clientTools", &defs, &e), GH_E_BADREQ);
		T_CONTAINS(e.msg, "clientTools.long: description longer than 16384 bytes");
		desc[16384] = '\0';
		cJSON_ReplaceItemInObject(t, "description", cJSON_CreateString(desc));
		T_EQ_INT(gh_tools_client_defs(m, NULL, "clientTools", &defs, &e), GH_OK);
		cJSON_Delete(defs);
		cJSON_Delete(m);
	}
	free(desc);
}

/* ---- tool sets ---- */

#define SRV(name, extra)                                                                    \
	"\"" name "\":{\"type\":\"http\",\"description\":\"" name " tool\",\"url\":"        \
	"\"http://127.0.0.1:9/" name "\",\"input_schema\":{\"type\":\"object\"}" extra "}"

static const char conf_text[] =
	"{\"providers\":{\"m\":{\"type\":\"mock\"}},"
	"\"tools\":{" SRV("get_weather", "") "," SRV("send_email", ",\"require_approval\":true")
	"," SRV("internal_x", "") "," SRV("not_listed", "") "},"
	"\"agents\":{\"a\":{\"provider\":\"m\",\"memory\":{\"enabled\":true},"
	"\"tools\":[\"memory_*\",\"get_weather\",\"send_email\",\"internal_x\"]},"
	"\"nomem\":{\"provider\":\"m\",\"tools\":[\"memory_*\",\"get_*\"]}},"
	"\"policies\":{\"p\":{\"agents\":[\"*\"],\"tools\":{\"allow\":[\"memory_*\",\"get_*\","
	"\"send_*\"],\"deny\":[\"memory_delete\"]},\"client_tools\":{\"allow\":[\"*\"],"
	"\"deny\":[\"evil*\"]}},"
	"\"noclient\":{\"agents\":[\"*\"],\"tools\":{\"allow\":[\"*\"]}}}}";

static struct gh_config *conf(void)
{
	struct gh_config *c = NULL;
	struct gh_err e;

	if (gh_config_parse("tools.json", conf_text, strlen(conf_text), &c, &e) != GH_OK)
		fprintf(stderr, "  config: %s\n", e.msg);
	return c;
}

static int offered(const struct gh_toolset *ts, const char *name)
{
	size_t i;

	for (i = 0; i < ts->nspecs; i++)
		if (!strcmp(ts->specs[i].name, name))
			return 1;
	return 0;
}

static void test_toolset_server(void)
{
	struct gh_config *c = conf();
	struct gh_toolset ts;
	struct gh_err e;
	const struct gh_tool *t;

	T_ASSERT(c);
	T_EQ_INT(gh_toolset_build(c, NULL, gh_config_agent(c, "a"), gh_config_policy(c, "p"), NULL, &ts,
				  &e),
		 GH_OK);
	/* memory_save, memory_search, memory_delete (the agent's memory_*), and
	 * three configured tools; not_listed is not the agent's */
	T_EQ_INT(ts.n, 6);
	T_ASSERT(gh_toolset_find(&ts, "not_listed") == NULL);
	T_ASSERT(gh_toolset_find(&ts, "working_memory_update") == NULL);
	/* denied by the policy: in the set (for a clear refusal), never offered */
	t = gh_toolset_find(&ts, "memory_delete");
	T_ASSERT(t && t->src == GH_SRC_MEMORY && !t->offered);
	T_EQ_INT(t->decision.verdict, GH_V_DENY);
	T_CONTAINS(t->decision.rule, "tools.deny \"memory_delete\"");
	t = gh_toolset_find(&ts, "internal_x");
	T_ASSERT(t && !t->offered);
	T_CONTAINS(t->decision.rule, "matches nothing in tools.allow");
	T_ASSERT(!offered(&ts, "memory_delete") && !offered(&ts, "internal_x"));
	/* allowed, and allowed with approval: offered */
	T_EQ_INT(ts.nspecs, 4);
	T_ASSERT(offered(&ts, "memory_save") && offered(&ts, "memory_search"));
	T_ASSERT(offered(&ts, "get_weather") && offered(&ts, "send_email"));
	t = gh_toolset_find(&ts, "send_email");
	T_ASSERT(t && t->offered && t->src == GH_SRC_SERVER && t->require_approval);
	T_EQ_INT(t->decision.verdict, GH_V_APPROVAL);
	T_ASSERT(t->conf == gh_config_tool(c, "send_email"));
	T_EQ_STR(t->description, "send_email tool");
	t = gh_toolset_find(&ts, "memory_save");
	T_ASSERT(t->schema == gh_tools_memory_schema("memory_save"));
	T_ASSERT(t->schema != NULL);
	{
		size_t i;

		for (i = 0; i < ts.nspecs; i++)
			T_ASSERT(ts.specs[i].schema != NULL && ts.specs[i].description != NULL);
	}
	gh_toolset_free(&ts);
	gh_toolset_free(&ts); /* twice is fine */

	/* memory off for the agent: no memory tools even though it lists memory_* */
	T_EQ_INT(gh_toolset_build(c, NULL, gh_config_agent(c, "nomem"), gh_config_policy(c, "p"), NULL,
				  &ts, &e),
		 GH_OK);
	T_EQ_INT(ts.n, 1);
	T_ASSERT(gh_toolset_find(&ts, "get_weather") != NULL);
	gh_toolset_free(&ts);

	/* no policy: the set is built, nothing is offered */
	T_EQ_INT(gh_toolset_build(c, NULL, gh_config_agent(c, "a"), NULL, NULL, &ts, &e), GH_OK);
	T_EQ_INT(ts.nspecs, 0);
	gh_toolset_free(&ts);
	T_ASSERT(gh_tools_memory_schema("no_such_tool") == NULL);
	/* every memory tool declares what it answers, and it is one gatehouse
	 * can enforce */
	{
		size_t i;
		char msg[GH_SCHEMA_MSG_MAX];

		for (i = 0; gh_memory_tool_names[i]; i++) {
			const cJSON *os = gh_tools_memory_output_schema(gh_memory_tool_names[i]);

			T_ASSERT(cJSON_IsObject(os));
			T_EQ_INT(gh_schema_check(os, msg, sizeof(msg)), 0);
		}
		T_ASSERT(gh_tools_memory_output_schema("no_such_tool") == NULL);
	}
	T_ASSERT(cJSON_IsObject(gh_tools_memory_schema("working_memory_update")));
	gh_config_free(c);
}

static enum gh_code build_with(struct gh_config *c, const char *policy, const char *mastra,
			       const char *openai, struct gh_toolset *ts, cJSON **defs,
			       struct gh_err *e)
{
	enum gh_code rc;

	*defs = defs_of(mastra, openai, &rc, e);
	if (rc != GH_OK)
		return rc;
	gh_err_clear(e);
	return gh_toolset_build(c, NULL, gh_config_agent(c, "a"), gh_config_policy(c, policy), *defs,
				ts, e);
}

static void test_toolset_client(void)
{
	struct gh_config *c = conf();
	struct gh_toolset ts;
	struct gh_err e;
	cJSON *defs;
	const struct gh_tool *t;

	T_ASSERT(c);
	T_EQ_INT(build_with(c, "p", "{\"ui.confirm\":{\"description\":\"Ask\",\"requireApproval\":"
				    "true},\"getLocation\":{}}",
			    NULL, &ts, &defs, &e),
		 GH_OK);
	T_EQ_INT(ts.n, 8);
	t = gh_toolset_find(&ts, "ui_confirm");
	T_ASSERT(t && t->src == GH_SRC_CLIENT && t->offered);
	T_EQ_STR(t->orig_name, "ui.confirm");
	T_EQ_STR(t->description, "Ask");
	T_EQ_INT(t->require_approval, 1);
	T_EQ_INT(t->decision.verdict, GH_V_APPROVAL);
	T_CONTAINS(t->decision.rule, "declares requireApproval");
	t = gh_toolset_find(&ts, "getLocation");
	T_ASSERT(t && t->offered && t->decision.verdict == GH_V_ALLOW);
	T_ASSERT(offered(&ts, "ui_confirm") && offered(&ts, "getLocation"));
	gh_toolset_free(&ts);
	cJSON_Delete(defs);
	gh_config_free(c);
}

static void test_toolset_collisions(void)
{
	static const struct {
		const char *mastra, *openai, *msg;
	} c[] = {
		/* a client tool over a server tool */
		{"{\"get_weather\":{}}", NULL,
		 "tool name collision: server tool \"get_weather\" and client tool \"get_weather\" "
		 "both resolve to \"get_weather\""},
		{"{\"get.weather\":{}}", NULL,
		 "server tool \"get_weather\" and client tool \"get.weather\" both resolve to "
		 "\"get_weather\""},
		/* over a memory tool, even one the policy denies */
		{NULL, "[{\"type\":\"function\",\"function\":{\"name\":\"memory save\"}}]",
		 "memory tool \"memory_save\" and client tool \"memory save\" both resolve to "
		 "\"memory_save\""},
		{"{\"memory_delete\":{}}", NULL,
		 "memory tool \"memory_delete\" and client tool \"memory_delete\""},
		/* two client tools that normalise alike */
		{"{\"a.b\":{},\"a_b\":{}}", NULL,
		 "client tool \"a.b\" and client tool \"a_b\" both resolve to \"a_b\""},
		{"{\"x y\":{}}", "[{\"type\":\"function\",\"function\":{\"name\":\"x/y\"}}]",
		 "client tool \"x y\" and client tool \"x/y\" both resolve to \"x_y\""},
	};
	struct gh_config *cf = conf();
	struct gh_toolset ts;
	struct gh_err e;
	cJSON *defs;
	size_t i;

	T_ASSERT(cf);
	for (i = 0; i < GH_ARRAY_LEN(c); i++) {
		enum gh_code rc = build_with(cf, "p", c[i].mastra, c[i].openai, &ts, &defs, &e);

		cJSON_Delete(defs);
		if (rc == GH_OK)
			gh_toolset_free(&ts);
		if (rc != GH_E_BADREQ || !strstr(e.msg, c[i].msg))
			T_FAIL("case %zu: rc %d \"%s\", expected 400 with \"%s\"", i, rc, e.msg,
			       c[i].msg);
		/* a failed build leaves nothing to free */
		T_ASSERT(ts.v == NULL && ts.n == 0);
	}
	gh_config_free(cf);
}

static void test_toolset_client_forbidden(void)
{
	struct gh_config *c = conf();
	struct gh_toolset ts;
	struct gh_err e;
	cJSON *defs;

	T_ASSERT(c);
	T_EQ_INT(build_with(c, "p", "{\"fine\":{},\"evil.tool\":{}}", NULL, &ts, &defs, &e),
		 GH_E_FORBIDDEN);
	T_CONTAINS(e.msg, "client tool \"evil.tool\" refused: policy \"p\": client_tools.deny "
			  "\"evil*\"");
	cJSON_Delete(defs);
	/* a policy that allows no client tools refuses any */
	T_EQ_INT(build_with(c, "noclient", "{\"fine\":{}}", NULL, &ts, &defs, &e), GH_E_FORBIDDEN);
	T_CONTAINS(e.msg, "client tool \"fine\" refused: policy \"noclient\": client tools are not "
			  "allowed");
	cJSON_Delete(defs);
	/* so does no policy */
	defs = defs_of("{\"fine\":{}}", NULL, &(enum gh_code){0}, &e);
	T_EQ_INT(gh_toolset_build(c, NULL, gh_config_agent(c, "a"), NULL, defs, &ts, &e), GH_E_FORBIDDEN);
	cJSON_Delete(defs);
	gh_config_free(c);
}

T_MAIN(T(test_normalize), T(test_client_defs_mastra), T(test_client_defs_openai),
       T(test_client_defs_refused), T(test_client_defs_limits), T(test_toolset_server),
       T(test_toolset_client), T(test_toolset_collisions), T(test_toolset_client_forbidden))
