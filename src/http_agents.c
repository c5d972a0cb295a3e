/*
 * http_agents.c - the native agent API, wire-compatible with Mastra's
 * client-js: GET /api/agents, GET /api/agents/:id and
 * POST /api/agents/:id/generate. Streaming lives in http_stream.c.
 *
 * Thin: parse and check the request, run the engine, shape its result.
 */
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "http_native.h"
#include "json.h"
#include "run.h"
#include "tools.h"

static cJSON *tool_json(const char *name, const char *desc, const cJSON *schema,
			const cJSON *annotations)
{
	cJSON *t = cJSON_CreateObject();

	if (!t)
		return NULL;
	cJSON_AddStringToObject(t, "id", name);
	cJSON_AddStringToObject(t, "description", desc ? desc : "");
	cJSON_AddItemToObject(t, "inputSchema", schema ? cJSON_Duplicate(schema, 1)
						       : cJSON_CreateObject());
	if (annotations)
		cJSON_AddItemToObject(t, "annotations", cJSON_Duplicate(annotations, 1));
	return t;
}

/* An agent as GET /api/agents shows it: only the tools its callers' policy
 * lets them see. */
cJSON *gh_native_agent_json(struct gh_req *r, const struct gh_agent_conf *a)
{
	cJSON *o = cJSON_CreateObject(), *tools;
	struct gh_toolset ts;
	struct gh_err e;
	size_t i;

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "id", a->id);
	cJSON_AddStringToObject(o, "name", a->name);
	cJSON_AddStringToObject(o, "description", a->description ? a->description : "");
	cJSON_AddStringToObject(o, "instructions", a->instructions ? a->instructions : "");
	cJSON_AddStringToObject(o, "provider", a->prov->name);
	cJSON_AddStringToObject(o, "modelId", a->model);
	cJSON_AddNumberToObject(o, "maxSteps", (double)a->max_steps);
	cJSON_AddBoolToObject(o, "memory", a->memory_enabled);
	tools = cJSON_AddObjectToObject(o, "tools");
	if (gh_toolset_build(r->app->cfg, r->app->mcp, a, r->who.policy, NULL, &ts, &e) == GH_OK) {
		for (i = 0; i < ts.n; i++) {
			const struct gh_tool *t = &ts.v[i];

			if (!t->offered)
				continue;
			cJSON_AddItemToObject(tools, t->name,
					      tool_json(t->name, t->description, t->schema,
							t->annotations));
		}
		gh_toolset_free(&ts);
	}
	return o;
}

static void list_agents(struct gh_req *r)
{
	cJSON *o = cJSON_CreateObject();
	size_t i;

	for (i = 0; i < r->app->cfg->nagents; i++) {
		const struct gh_agent_conf *a = &r->app->cfg->agents[i];
		struct gh_decision d;

		gh_policy_agent(r->who.policy, a->id, &d);
		if (d.verdict != GH_V_ALLOW && !r->who.admin)
			continue;
		cJSON_AddItemToObject(o, a->id, gh_native_agent_json(r, a));
	}
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

const struct gh_agent_conf *gh_native_agent(struct gh_req *r, const char *id)
{
	const struct gh_agent_conf *a = gh_config_agent(r->app->cfg, id);
	struct gh_decision d;

	if (!a) {
		gh_http_errorf(r, GH_E_NOTFOUND, "no agent \"%s\"", id);
		return NULL;
	}
	gh_policy_agent(r->who.policy, a->id, &d);
	if (d.verdict != GH_V_ALLOW) {
		gh_http_errorf(r, GH_E_FORBIDDEN, "agent \"%s\" refused: %s", a->id, d.rule);
		return NULL;
	}
	return a;
}

static void get_agent(struct gh_req *r)
{
	const struct gh_agent_conf *a = gh_native_agent(r, r->params[0]);
	cJSON *o;

	if (!a)
		return;
	o = gh_native_agent_json(r, a);
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

/* Picks a string id from a few spellings; NULL when none. Errors when the
 * value is present but not a string. */
static enum gh_code pick_id(const cJSON *v, const char *field, const char **out,
			    struct gh_err *e)
{
	if (!v || cJSON_IsNull(v))
		return GH_OK;
	if (cJSON_IsObject(v)) {
		v = cJSON_GetObjectItemCaseSensitive(v, "id");
		if (!v)
			return GH_OK;
	}
	if (!cJSON_IsString(v) || !*v->valuestring || strlen(v->valuestring) > GH_NAME_MAX)
		return gh_err_set(e, GH_E_BADREQ, "%s: expected a non-empty string of at most %d "
				  "characters", field, GH_NAME_MAX);
	*out = v->valuestring;
	return GH_OK;
}

enum gh_code gh_native_parse(struct gh_req *r, const struct gh_agent_conf *a, cJSON *body,
			     struct gh_native_req *out, struct gh_err *e)
{
	const cJSON *mem = cJSON_GetObjectItemCaseSensitive(body, "memory"), *v;
	enum gh_code rc;

	memset(out, 0, sizeof(*out));
	v = cJSON_GetObjectItemCaseSensitive(body, "messages");
	if (!v)
		return gh_err_set(e, GH_E_BADREQ, "messages: required");
	if ((rc = gh_run_normalize_messages(v, &out->messages, e)) != GH_OK)
		return rc;
	if (cJSON_GetArraySize(out->messages) == 0)
		return gh_err_set(e, GH_E_BADREQ, "messages: at least one message is required");
	if ((rc = gh_tools_client_defs(cJSON_GetObjectItemCaseSensitive(body, "clientTools"), NULL,
				       "clientTools", &out->client_defs, e)) != GH_OK)
		return rc;
	if (mem && !cJSON_IsObject(mem) && !cJSON_IsNull(mem))
		return gh_err_set(e, GH_E_BADREQ, "memory: expected {thread, resource}");
	if ((rc = pick_id(cJSON_GetObjectItemCaseSensitive(mem, "thread"), "memory.thread",
			  &out->thread_id, e)) != GH_OK ||
	    (rc = pick_id(cJSON_GetObjectItemCaseSensitive(mem, "resource"), "memory.resource",
			  &out->resource_id, e)) != GH_OK)
		return rc;
	if (!out->thread_id && (rc = pick_id(cJSON_GetObjectItemCaseSensitive(body, "threadId"),
					     "threadId", &out->thread_id, e)) != GH_OK)
		return rc;
	if (!out->resource_id &&
	    (rc = pick_id(cJSON_GetObjectItemCaseSensitive(body, "resourceId"), "resourceId",
			  &out->resource_id, e)) != GH_OK)
		return rc;
	if ((rc = pick_id(cJSON_GetObjectItemCaseSensitive(body, "runId"), "runId", &out->run_id,
			  e)) != GH_OK)
		return rc;
	v = cJSON_GetObjectItemCaseSensitive(body, "maxSteps");
	if (v && !cJSON_IsNull(v)) {
		if (!gh_json_is_int(v) || v->valuedouble < 1 || v->valuedouble > 100)
			return gh_err_set(e, GH_E_BADREQ, "maxSteps: expected an integer in 1..100");
		out->max_steps = (int)v->valuedouble;
	}
	out->rq.who = &r->who;
	out->rq.agent = a;
	out->rq.thread_id = out->thread_id;
	out->rq.resource_id = out->resource_id;
	if (out->run_id) {
		/* runId is a name within the caller's owner */
		gh_run_named_id(r->who.key.owner, out->run_id, out->named_run);
		out->rq.run_id = out->named_run;
	}
	out->rq.messages = out->messages;
	out->rq.client_defs = out->client_defs;
	out->rq.max_steps = out->max_steps;
	out->rq.surface = "native";
	return GH_OK;
}

void gh_native_req_free(struct gh_native_req *n)
{
	cJSON_Delete(n->messages);
	cJSON_Delete(n->client_defs);
	memset(n, 0, sizeof(*n));
}

/* A tool call or result in both Mastra shapes: {type, runId, from,
 * payload:{...}} and the same fields flat. */
static cJSON *chunk_json(const char *type, const char *run_id, const cJSON *fields)
{
	cJSON *o = cJSON_CreateObject(), *it;

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "type", type);
	cJSON_AddStringToObject(o, "runId", run_id);
	cJSON_AddStringToObject(o, "from", "AGENT");
	cJSON_AddItemToObject(o, "payload", cJSON_Duplicate(fields, 1));
	cJSON_ArrayForEach(it, fields)
		if (strcmp(it->string, "type"))
			cJSON_AddItemToObject(o, it->string, cJSON_Duplicate(it, 1));
	return o;
}

cJSON *gh_native_result_json(const struct gh_run_result *res)
{
	cJSON *o = cJSON_CreateObject(), *arr, *it, *resp, *u;

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "text", res->text ? res->text : "");
	cJSON_AddStringToObject(o, "finishReason", res->finish_reason);
	arr = cJSON_AddArrayToObject(o, "toolCalls");
	cJSON_ArrayForEach(it, res->tool_calls) {
		cJSON *f = cJSON_Duplicate(it, 1);

		cJSON_DeleteItemFromObjectCaseSensitive(f, "source");
		cJSON_AddItemToArray(arr, chunk_json("tool-call", res->run_id, f));
		cJSON_Delete(f);
	}
	arr = cJSON_AddArrayToObject(o, "toolResults");
	cJSON_ArrayForEach(it, res->tool_results)
		cJSON_AddItemToArray(arr, chunk_json("tool-result", res->run_id, it));
	resp = cJSON_AddObjectToObject(o, "response");
	cJSON_AddStringToObject(resp, "id", res->run_id);
	cJSON_AddItemToObject(resp, "messages", cJSON_Duplicate(res->messages, 1));
	u = cJSON_AddObjectToObject(o, "usage");
	cJSON_AddNumberToObject(u, "inputTokens", (double)res->input_tokens);
	cJSON_AddNumberToObject(u, "outputTokens", (double)res->output_tokens);
	cJSON_AddNumberToObject(u, "totalTokens", (double)(res->input_tokens + res->output_tokens));
	cJSON_AddNumberToObject(u, "promptTokens", (double)res->input_tokens);
	cJSON_AddNumberToObject(u, "completionTokens", (double)res->output_tokens);
	cJSON_AddStringToObject(o, "runId", res->run_id);
	gh_json_add_str(o, "threadId", res->thread_id[0] ? res->thread_id : NULL);
	gh_json_add_str(o, "resourceId", res->resource_id[0] ? res->resource_id : NULL);
	cJSON_AddStringToObject(o, "status", res->status);
	if (cJSON_GetArraySize(res->approvals) > 0)
		cJSON_AddItemToObject(o, "approvals", cJSON_Duplicate(res->approvals, 1));
	return o;
}

static void generate(struct gh_req *r)
{
	const struct gh_agent_conf *a = gh_native_agent(r, r->params[0]);
	struct gh_native_req nr;
	struct gh_run_result res;
	struct gh_err e;
	cJSON *body = NULL, *out;

	memset(&nr, 0, sizeof(nr));
	if (!a)
		return;
	if (gh_http_body_object(r, &body, &e) != GH_OK ||
	    gh_native_parse(r, a, body, &nr, &e) != GH_OK ||
	    gh_run_generate(r->app, &nr.rq, NULL, &res, &e) != GH_OK) {
		gh_http_error(r, &e);
		goto out;
	}
	out = gh_native_result_json(&res);
	gh_http_json(r, 200, out);
	cJSON_Delete(out);
	gh_run_result_clear(&res);
out:
	gh_native_req_free(&nr);
	cJSON_Delete(body);
}

const struct gh_route gh_routes_agents[] = {
	{"GET", "/api/agents", GH_AUTH_KEY, list_agents},
	{"GET", "/api/agents/:id", GH_AUTH_KEY, get_agent},
	{"POST", "/api/agents/:id/generate", GH_AUTH_KEY, generate},
	{"POST", "/api/agents/:id/generate-legacy", GH_AUTH_KEY, generate},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
