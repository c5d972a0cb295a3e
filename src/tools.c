/*
 * tools.c - building a run's tool set; see tools.h.
 */
#include "tools.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "mcp.h"
#include "schema.h"
#include "util.h"

const char *const gh_memory_tool_names[] = {"memory_save", "memory_search", "memory_delete",
					    "working_memory_update", NULL};

static const char *const memory_descriptions[] = {
	"Save a fact worth remembering about the user or the task, for later conversations.",
	"Search saved memories by keywords; returns the best matches, most relevant first.",
	"Delete a saved memory by its id (from memory_search).",
	"Replace the working memory: a short note about the user kept in every conversation.",
};

static const char *const memory_schemas[] = {
	"{\"type\":\"object\",\"properties\":{"
	"\"content\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":8000,"
	"\"description\":\"The fact to remember, as a full sentence.\"},"
	"\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":64},"
	"\"maxItems\":16}},\"required\":[\"content\"],\"additionalProperties\":false}",
	"{\"type\":\"object\",\"properties\":{"
	"\"query\":{\"type\":\"string\",\"maxLength\":1000,\"description\":\"Keywords.\"},"
	"\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":20}},"
	"\"required\":[\"query\"],\"additionalProperties\":false}",
	"{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\",\"minimum\":1}},"
	"\"required\":[\"id\"],\"additionalProperties\":false}",
	"{\"type\":\"object\",\"properties\":{\"content\":{\"type\":\"string\",\"maxLength\":16000}},"
	"\"required\":[\"content\"],\"additionalProperties\":false}",
};

/* What each memory tool answers (tool_memory.c), held to it like any
 * other tool's result. */
static const char *const memory_output_schemas[] = {
	"{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},"
	"\"content\":{\"type\":\"string\"},\"saved\":{\"const\":true}},"
	"\"required\":[\"id\",\"content\",\"saved\"]}",
	"{\"type\":\"object\",\"properties\":{\"memories\":{\"type\":\"array\",\"items\":{"
	"\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},"
	"\"content\":{\"type\":\"string\"},\"tags\":{\"type\":[\"string\",\"null\"]},"
	"\"createdAt\":{\"type\":\"string\"},\"score\":{\"type\":\"number\"}},"
	"\"required\":[\"id\",\"content\"]}}},\"required\":[\"memories\"]}",
	"{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},"
	"\"deleted\":{\"const\":true}},\"required\":[\"id\",\"deleted\"]}",
	"{\"type\":\"object\",\"properties\":{\"updated\":{\"const\":true}},"
	"\"required\":[\"updated\"]}",
};

static cJSON *memory_parsed[4], *memory_output_parsed[4];
static pthread_once_t memory_once = PTHREAD_ONCE_INIT;

static void parse_memory_schemas(void)
{
	size_t i;

	for (i = 0; i < GH_ARRAY_LEN(memory_schemas); i++) {
		memory_parsed[i] = gh_json_parse_stored(memory_schemas[i]);
		memory_output_parsed[i] = gh_json_parse_stored(memory_output_schemas[i]);
	}
}

/* The schema of memory tool name in parsed (one of the tables above), or
 * NULL when name is no memory tool. */
static const cJSON *memory_schema_in(cJSON *const *parsed, const char *name)
{
	size_t i;

	pthread_once(&memory_once, parse_memory_schemas);
	for (i = 0; gh_memory_tool_names[i]; i++)
		if (!strcmp(gh_memory_tool_names[i], name))
			return parsed[i];
	return NULL;
}

const cJSON *gh_tools_memory_schema(const char *name)
{
	return memory_schema_in(memory_parsed, name);
}

const cJSON *gh_tools_memory_output_schema(const char *name)
{
	return memory_schema_in(memory_output_parsed, name);
}

/* 1 when s starts (after white space) like a JSON object or array. */
static int json_text(const char *s)
{
	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
		s++;
	return *s == '{' || *s == '[';
}

int gh_tools_output_check(const cJSON *schema, const cJSON *result, cJSON **structured,
			  char *msg, size_t cap)
{
	char why[GH_SCHEMA_MSG_MAX];
	cJSON *parsed = NULL;
	struct gh_err pe;

	*structured = NULL;
	if (cap)
		msg[0] = '\0';
	if (!schema || gh_schema_validate(schema, result, why, sizeof(why)) == 0)
		return 0;
	/* surfaces whose results are text (AG-UI, OpenAI-style tool messages)
	 * carry a structured result as its JSON: an object or an array (a
	 * text "5" stays a text) */
	if (cJSON_IsString(result) && json_text(result->valuestring) &&
	    gh_json_parse(result->valuestring, strlen(result->valuestring), "result", &parsed,
			  &pe) == GH_OK) {
		char why2[GH_SCHEMA_MSG_MAX];

		if (gh_schema_validate(schema, parsed, why2, sizeof(why2)) == 0) {
			*structured = parsed;
			return 0;
		}
		/* what was wrong with the structure says more than "expected
		 * object, got string" */
		gh_strlcpy(why, why2, sizeof(why));
		cJSON_Delete(parsed);
	}
	if (cap)
		snprintf(msg, cap, "the result does not match the output schema: %s", why);
	return -1;
}

/* Length of the UTF-8 sequence at p and how many UTF-16 code units it is
 * (what JavaScript's string functions count); invalid bytes count as one. */
static size_t utf8_char(const unsigned char *p, int *units)
{
	size_t n = 1, i;
	unsigned cp;

	*units = 1;
	if (p[0] < 0x80)
		return 1;
	if ((p[0] & 0xe0) == 0xc0) {
		n = 2;
		cp = p[0] & 0x1f;
	} else if ((p[0] & 0xf0) == 0xe0) {
		n = 3;
		cp = p[0] & 0x0f;
	} else if ((p[0] & 0xf8) == 0xf0) {
		n = 4;
		cp = p[0] & 0x07;
	} else {
		return 1;
	}
	for (i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 1;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if (cp >= 0x10000)
		*units = 2; /* a surrogate pair in UTF-16 */
	return n;
}

/* Mastra's rule (Agent.formatTools): every UTF-16 code unit outside
 * [a-zA-Z0-9_-] becomes '_', a '_' is prefixed when the first character is
 * not a letter or '_', and the result is cut to 63 characters. */
void gh_tool_normalize(const char *in, char out[GH_TOOL_NAME_MAX])
{
	const unsigned char *p = (const unsigned char *)in;
	size_t o = 0;

	/* after replacement only a digit or '-' can be a bad first character
	 * (anything else became '_', a good one) */
	if ((*p >= '0' && *p <= '9') || *p == '-' || !*p)
		out[o++] = '_';
	while (*p && o < GH_TOOL_NAME_MAX - 1) {
		unsigned char c = *p;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '_' || c == '-') {
			out[o++] = (char)c;
			p++;
		} else {
			int units;

			p += utf8_char(p, &units);
			while (units-- > 0 && o < GH_TOOL_NAME_MAX - 1)
				out[o++] = '_';
		}
	}
	out[o] = '\0';
}

/* A client tool's declared output schema (NULL: none), checked like its
 * input schema, kept as the definition's "outputSchema". */
static enum gh_code add_output_schema(cJSON *d, const cJSON *schema, const char *where,
				      const char *name, struct gh_err *e)
{
	char msg[256];
	cJSON *sc;

	if (!schema || cJSON_IsNull(schema))
		return GH_OK;
	/* zod-to-json-schema output may arrive wrapped as {jsonSchema: ...} */
	if (cJSON_GetObjectItemCaseSensitive(schema, "jsonSchema"))
		schema = cJSON_GetObjectItemCaseSensitive(schema, "jsonSchema");
	if (!cJSON_IsObject(schema) && !cJSON_IsBool(schema))
		return gh_err_set(e, GH_E_BADREQ, "%s.%s: the output schema must be a JSON Schema "
						  "object", where, name);
	if (gh_schema_check(schema, msg, sizeof(msg)) != 0)
		return gh_err_set(e, GH_E_BADREQ, "%s.%s: invalid output schema: %s", where, name,
				  msg);
	if (!(sc = cJSON_Duplicate(schema, 1)))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	cJSON_AddItemToObject(d, "outputSchema", sc);
	return GH_OK;
}

static enum gh_code add_def(cJSON *arr, const char *name, const char *desc, const cJSON *schema,
			    int approval, const char *where, struct gh_err *e)
{
	char norm[GH_TOOL_NAME_MAX], msg[256];
	cJSON *d, *sc;

	if (!name || !*name || strlen(name) > 256)
		return gh_err_set(e, GH_E_BADREQ, "%s: a tool needs a name (1..256 characters)",
				  where);
	if (schema && !cJSON_IsObject(schema) && !cJSON_IsBool(schema))
		return gh_err_set(e, GH_E_BADREQ, "%s.%s: the input schema must be a JSON Schema "
						  "object", where, name);
	if (schema && gh_schema_check(schema, msg, sizeof(msg)) != 0)
		return gh_err_set(e, GH_E_BADREQ, "%s.%s: invalid input schema: %s", where, name,
				  msg);
	if (desc && strlen(desc) > 16384)
		return gh_err_set(e, GH_E_BADREQ, "%s.%s: description longer than 16384 bytes",
				  where, name);
	gh_tool_normalize(name, norm);
	d = cJSON_CreateObject();
	if (!d)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	cJSON_AddItemToArray(arr, d);
	cJSON_AddStringToObject(d, "name", norm);
	cJSON_AddStringToObject(d, "origName", name);
	cJSON_AddStringToObject(d, "description", desc ? desc : "");
	sc = schema ? cJSON_Duplicate(schema, 1)
		    : gh_json_parse_stored("{\"type\":\"object\",\"properties\":{}}");
	if (!sc)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	cJSON_AddItemToObject(d, "parameters", sc);
	cJSON_AddBoolToObject(d, "requireApproval", approval);
	return GH_OK;
}

enum gh_code gh_tools_client_defs(const cJSON *mastra, const cJSON *openai, const char *where,
				  cJSON **out, struct gh_err *e)
{
	cJSON *arr = cJSON_CreateArray();
	const cJSON *it;
	enum gh_code rc = GH_OK;
	int n = 0;

	*out = NULL;
	if (!arr)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	if (mastra && !cJSON_IsNull(mastra)) {
		if (!cJSON_IsObject(mastra)) {
			rc = gh_err_set(e, GH_E_BADREQ, "%s: expected an object of name -> tool",
					where);
			goto out;
		}
		cJSON_ArrayForEach(it, mastra) {
			const cJSON *schema = cJSON_GetObjectItemCaseSensitive(it, "inputSchema");
			int approval;

			if (!cJSON_IsObject(it)) {
				rc = gh_err_set(e, GH_E_BADREQ, "%s.%s: expected an object", where,
						it->string);
				goto out;
			}
			if (!schema || cJSON_IsNull(schema))
				schema = cJSON_GetObjectItemCaseSensitive(it, "parameters");
			if (cJSON_IsNull(schema))
				schema = NULL;
			/* zod-to-json-schema output may arrive wrapped as {jsonSchema: ...} */
			if (schema && cJSON_GetObjectItemCaseSensitive(schema, "jsonSchema"))
				schema = cJSON_GetObjectItemCaseSensitive(schema, "jsonSchema");
			approval = gh_json_bool(it, "requireApproval", 0) ||
				   gh_json_bool(it, "needsApproval", 0);
			if ((rc = add_def(arr, it->string, gh_json_str(it, "description"), schema,
					  approval, where, e)) != GH_OK ||
			    (rc = add_output_schema(cJSON_GetArrayItem(arr, n),
						    cJSON_GetObjectItemCaseSensitive(it, "outputSchema"),
						    where, it->string, e)) != GH_OK)
				goto out;
			if (++n > 128) {
				rc = gh_err_set(e, GH_E_BADREQ, "%s: more than 128 tools", where);
				goto out;
			}
		}
	}
	if (openai && !cJSON_IsNull(openai)) {
		if (!cJSON_IsArray(openai)) {
			rc = gh_err_set(e, GH_E_BADREQ, "%s: expected an array of tools", where);
			goto out;
		}
		cJSON_ArrayForEach(it, openai) {
			const cJSON *fn = cJSON_GetObjectItemCaseSensitive(it, "function");
			const char *type = gh_json_str(it, "type");
			const cJSON *params;

			if (!cJSON_IsObject(it) || (type && strcmp(type, "function")) ||
			    !cJSON_IsObject(fn)) {
				rc = gh_err_set(e, GH_E_BADREQ, "%s[%d]: expected {\"type\":\"function\","
						"\"function\":{name, description, parameters}}",
						where, n);
				goto out;
			}
			params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
			if (cJSON_IsNull(params))
				params = NULL;
			if ((rc = add_def(arr, gh_json_str(fn, "name"), gh_json_str(fn, "description"),
					  params,
					  gh_json_bool(fn, "requireApproval", 0) ||
						  gh_json_bool(it, "requireApproval", 0),
					  where, e)) != GH_OK)
				goto out;
			if (++n > 128) {
				rc = gh_err_set(e, GH_E_BADREQ, "%s: more than 128 tools", where);
				goto out;
			}
		}
	}
	*out = arr;
	arr = NULL;
out:
	cJSON_Delete(arr);
	return rc;
}

static int agent_lists(const struct gh_agent_conf *a, const char *name)
{
	return gh_strlist_match(&a->tools, name);
}

static enum gh_code add_tool(struct gh_toolset *ts, size_t cap, const char *name,
			     const char *orig, enum gh_tool_source src, struct gh_err *e,
			     struct gh_tool **out)
{
	size_t i;
	struct gh_tool *t;

	for (i = 0; i < ts->n; i++) {
		if (!strcmp(ts->v[i].name, name)) {
			const char *other = ts->v[i].orig_name ? ts->v[i].orig_name : ts->v[i].name;

			return gh_err_set(e, GH_E_BADREQ,
					  "tool name collision: %s tool \"%s\" and %s tool \"%s\" "
					  "both resolve to \"%s\"",
					  gh_tool_source_name(ts->v[i].src), other,
					  gh_tool_source_name(src), orig ? orig : name, name);
		}
	}
	if (ts->n >= cap)
		return gh_err_set(e, GH_E_INTERNAL, "tool set overflow");
	t = &ts->v[ts->n++];
	memset(t, 0, sizeof(*t));
	gh_strlcpy(t->name, name, sizeof(t->name));
	if (orig && !(t->orig_name = strdup(orig)))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	t->src = src;
	*out = t;
	return GH_OK;
}

void gh_tools_client_defs_withhold(const struct gh_policy_conf *p, cJSON *client_defs,
				   void (*removed)(void *ud, const char *name, const char *rule),
				   void *ud)
{
	cJSON *d;

	cJSON_ArrayForEach(d, client_defs) {
		struct gh_decision dec;

		gh_policy_client_tool(p, gh_json_str(d, "name"), &dec);
		if (dec.verdict != GH_V_DENY || cJSON_GetObjectItemCaseSensitive(d, "withheld"))
			continue;
		cJSON_AddTrueToObject(d, "withheld");
		if (removed)
			removed(ud, gh_json_str(d, "origName") ? gh_json_str(d, "origName")
							      : gh_json_str(d, "name"),
				dec.rule);
	}
}

enum gh_code gh_toolset_build(const struct gh_config *cfg, struct gh_mcp *mcp,
			      const struct gh_agent_conf *a, const struct gh_policy_conf *p,
			      const cJSON *client_defs, struct gh_toolset *out, struct gh_err *e)
{
	struct gh_mcp_tool **fed = NULL;
	long nfed = gh_mcp_tools(mcp, &fed), k;
	size_t cap = 4 + cfg->ntools + (size_t)cJSON_GetArraySize(client_defs) +
		     (size_t)(nfed > 0 ? nfed : 0), i;
	const cJSON *d;
	struct gh_tool *t;
	enum gh_code rc;

	memset(out, 0, sizeof(*out));
	if (nfed < 0)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	out->v = calloc(cap, sizeof(*out->v));
	out->specs = calloc(cap, sizeof(*out->specs));
	if (!out->v || !out->specs) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto fail;
	}
	pthread_once(&memory_once, parse_memory_schemas);
	if (a->memory_enabled) {
		for (i = 0; gh_memory_tool_names[i]; i++) {
			if (!agent_lists(a, gh_memory_tool_names[i]))
				continue;
			if ((rc = add_tool(out, cap, gh_memory_tool_names[i], NULL, GH_SRC_MEMORY, e,
					   &t)) != GH_OK)
				goto fail;
			t->description = memory_descriptions[i];
			t->schema = memory_parsed[i];
			t->output_schema = memory_output_parsed[i];
		}
	}
	for (i = 0; i < cfg->ntools; i++) {
		const struct gh_tool_conf *tc = &cfg->tools[i];

		if (!agent_lists(a, tc->name))
			continue;
		if ((rc = add_tool(out, cap, tc->name, NULL, GH_SRC_SERVER, e, &t)) != GH_OK)
			goto fail;
		t->description = tc->description;
		t->schema = tc->input_schema;
		t->conf = tc;
		t->require_approval = tc->require_approval;
		t->annotations = tc->annotations;
		t->output_schema = tc->output_schema;
	}
	for (k = 0; k < nfed; k++) {
		struct gh_mcp_tool *mt = fed[k];

		/* a tool without a name of its own, or whose name another tool
		 * has (reported when it was published), is never in a set */
		if (!mt->name[0] || mt->collision || !agent_lists(a, mt->name))
			continue;
		if ((rc = add_tool(out, cap, mt->name, NULL, GH_SRC_SERVER, e, &t)) != GH_OK)
			goto fail;
		gh_mcp_tool_ref(mt);
		t->mcp = mt;
		t->description = mt->def.description ? mt->def.description : mt->def.title;
		t->schema = mt->def.input_schema;
		t->annotations = mt->def.annotations;
		t->output_schema = mt->def.output_schema;
	}
	cJSON_ArrayForEach(d, client_defs) {
		struct gh_decision dec;
		const char *name = gh_json_str(d, "name");

		gh_policy_client_tool(p, name, &dec);
		if (dec.verdict == GH_V_DENY && !gh_json_bool(d, "withheld", 0)) {
			rc = gh_err_set(e, GH_E_FORBIDDEN, "client tool \"%s\" refused: %s",
					gh_json_str(d, "origName"), dec.rule);
			goto fail;
		}
		if ((rc = add_tool(out, cap, name, gh_json_str(d, "origName"), GH_SRC_CLIENT, e,
				   &t)) != GH_OK)
			goto fail;
		t->description = gh_json_str(d, "description");
		t->schema = cJSON_GetObjectItemCaseSensitive(d, "parameters");
		t->require_approval = gh_json_bool(d, "requireApproval", 0);
		t->output_schema = cJSON_GetObjectItemCaseSensitive(d, "outputSchema");
	}
	for (i = 0; i < out->n; i++) {
		struct gh_tool_verdict v;

		t = &out->v[i];
		gh_tools_decide(cfg, t->mcp, a, p, t->name, client_defs, &v);
		t->decision = v.d;
		t->offered = t->decision.verdict != GH_V_DENY;
		if (t->offered) {
			out->specs[out->nspecs].name = t->name;
			out->specs[out->nspecs].description = t->description;
			out->specs[out->nspecs].schema = t->schema;
			out->nspecs++;
		}
	}
	gh_mcp_tools_free(fed, nfed);
	return GH_OK;
fail:
	gh_mcp_tools_free(fed, nfed);
	gh_toolset_free(out);
	return rc;
}

static const cJSON *client_def(const cJSON *defs, const char *name)
{
	const cJSON *d;

	cJSON_ArrayForEach(d, defs) {
		const char *n = gh_json_str(d, "name");

		if (n && !strcmp(n, name))
			return d;
	}
	return NULL;
}

/* A federated tool the agent lists: the policy, then a held or refused
 * definition, then the approval default its annotations set. Sets
 * out->annotation when that default decided. */
static void mcp_decide(const struct gh_policy_conf *p, const struct gh_agent_conf *a,
		       const struct gh_mcp_tool *mt, struct gh_tool_verdict *out)
{
	enum gh_mcp_hint h = gh_mcp_hint_of(mt->def.annotations);
	struct gh_decision *d = &out->d;

	gh_policy_tool(p, a, mt->name, GH_SRC_SERVER, 0, d);
	if (d->verdict == GH_V_DENY)
		return;
	if (mt->blocked[0]) {
		d->verdict = GH_V_DENY;
		snprintf(d->rule, sizeof(d->rule), "MCP server %.30s: %.210s", mt->server, mt->blocked);
		return;
	}
	out->annotation = h == GH_MCP_HINT_READONLY	       ? "readOnlyHint true"
			  : h == GH_MCP_HINT_NOT_DESTRUCTIVE ? "destructiveHint false"
			  : h == GH_MCP_HINT_DESTRUCTIVE     ? "destructiveHint true"
							     : "destructiveHint absent (MCP's default: "
							       "true)";
	if (!gh_policy_tool_annotations(p, mt->name,
					h == GH_MCP_HINT_DESTRUCTIVE || h == GH_MCP_HINT_DEFAULT,
					out->annotation, d))
		out->annotation = NULL;
}

void gh_tools_decide(const struct gh_config *cfg, const struct gh_mcp_tool *mt,
		     const struct gh_agent_conf *a, const struct gh_policy_conf *p,
		     const char *name, const cJSON *client_defs, struct gh_tool_verdict *out)
{
	const struct gh_tool_conf *tc = mt ? NULL : gh_config_tool(cfg, name);
	const cJSON *cd = mt ? NULL : client_def(client_defs, name);
	int approval = 0;

	memset(out, 0, sizeof(*out));
	out->src = GH_SRC_CLIENT;
	if (mt) {
		out->src = GH_SRC_SERVER;
	} else if (cd) {
		approval = gh_json_bool(cd, "requireApproval", 0);
	} else if (tc) {
		out->src = GH_SRC_SERVER;
		approval = tc->require_approval;
	} else if (gh_str_in(gh_memory_tool_names, name)) {
		out->src = GH_SRC_MEMORY;
	}
	out->listed = 1;
	if (a && out->src != GH_SRC_CLIENT)
		out->listed = gh_strlist_match(&a->tools, name) &&
			      (out->src != GH_SRC_MEMORY || a->memory_enabled);
	if (out->listed && mt) {
		mcp_decide(p, a, mt, out);
	} else if (out->listed) {
		gh_policy_tool(p, a, name, out->src, approval, &out->d);
	} else {
		out->d.verdict = GH_V_DENY;
		gh_strlcpy(out->d.rule, a->memory_enabled || out->src != GH_SRC_MEMORY
					? "the agent's tools list does not include it"
					: "the agent has memory disabled",
			   sizeof(out->d.rule));
	}
	out->per_minute = gh_policy_tool_limit(p, name, &out->limit_rule);
}

void gh_toolset_decision(const struct gh_toolset *ts, const char *name, struct gh_decision *out)
{
	const struct gh_tool *t = gh_toolset_find(ts, name);

	if (t) {
		*out = t->decision;
		return;
	}
	memset(out, 0, sizeof(*out));
	out->verdict = GH_V_DENY;
	gh_strlcpy(out->rule, "unknown tool", sizeof(out->rule));
}

const struct gh_tool *gh_toolset_find(const struct gh_toolset *ts, const char *name)
{
	size_t i;

	for (i = 0; name && i < ts->n; i++)
		if (!strcmp(ts->v[i].name, name))
			return &ts->v[i];
	return NULL;
}

void gh_toolset_free(struct gh_toolset *ts)
{
	size_t i;

	if (!ts)
		return;
	for (i = 0; i < ts->n; i++) {
		free(ts->v[i].orig_name);
		gh_mcp_tool_unref(ts->v[i].mcp);
	}
	free(ts->v);
	free(ts->specs);
	memset(ts, 0, sizeof(*ts));
}

cJSON *gh_tool_annotations(const struct gh_tool *t)
{
	/* read-only, destructive, idempotent, open world */
	static const struct {
		const char *name;
		int ro, destructive, idempotent, open;
	} memory[] = {
		{"memory_save", 0, 0, 0, 0},
		{"memory_search", 1, 0, 1, 0},
		{"memory_delete", 0, 1, 1, 0},
		{"working_memory_update", 0, 1, 1, 0},
	};
	int ro = 0, destructive = 1, idempotent = 0, open = 1;
	cJSON *o = cJSON_CreateObject();
	size_t i;

	if (!o)
		return NULL;
	for (i = 0; t->src == GH_SRC_MEMORY && i < GH_ARRAY_LEN(memory); i++) {
		if (strcmp(memory[i].name, t->name))
			continue;
		ro = memory[i].ro;
		destructive = memory[i].destructive;
		idempotent = memory[i].idempotent;
		open = memory[i].open;
	}
	cJSON_AddBoolToObject(o, "readOnlyHint", ro);
	cJSON_AddBoolToObject(o, "destructiveHint", destructive);
	cJSON_AddBoolToObject(o, "idempotentHint", idempotent);
	cJSON_AddBoolToObject(o, "openWorldHint", open);
	if (cJSON_IsObject(t->annotations)) {
		/* what the operator configured, or the upstream MCP server
		 * declared, wins over the defaults */
		const cJSON *a;

		cJSON_ArrayForEach(a, t->annotations) {
			cJSON_DeleteItemFromObjectCaseSensitive(o, a->string);
			cJSON_AddItemToObject(o, a->string, cJSON_Duplicate(a, 1));
		}
	}
	return o;
}
