/*
 * explain.c - policy explanations; see explain.h.
 */
#include "explain.h"

#include "json.h"
#include "mcp.h"
#include "tools.h"

static const char *verdict_name(enum gh_verdict v)
{
	return v == GH_V_ALLOW ? "allow" : v == GH_V_DENY ? "deny" : "approval";
}

static void add_warning(void *ud, const char *msg)
{
	cJSON_AddItemToArray(ud, cJSON_CreateString(msg));
}

static void explain_key(cJSON *o, const struct gh_config *cfg, const struct gh_principal *p)
{
	cJSON *ko = cJSON_AddObjectToObject(o, "key");

	gh_json_add_str(ko, "id", p->key.id[0] ? p->key.id : NULL);
	gh_json_add_str(ko, "name", p->key.name[0] ? p->key.name : NULL);
	gh_json_add_str(ko, "owner", p->key.owner[0] ? p->key.owner : NULL);
	cJSON_AddStringToObject(ko, "role", p->key.admin ? "admin" : "user");
	gh_json_add_str(o, "policy", p->policy ? p->policy->name : NULL);
	gh_json_add_str(o, "policyVersion", p->policy ? p->policy->version : NULL);
	if (!p->policy)
		cJSON_AddStringToObject(o, "note", "no policy applies to this key (none named on the "
				       "key and no policy \"default\"): everything is denied");
	/* rules of this policy that can match nothing, as serve warns at start */
	gh_policy_lint(cfg, p->policy, add_warning, cJSON_AddArrayToObject(o, "warnings"));
	if (p->policy && (p->policy->client_allow.n || p->policy->client_deny.n))
		cJSON_AddStringToObject(o, "clientToolsNote", "client_tools globs are not checked "
				       "against anything: client tools are declared by each "
				       "request");
	if (p->policy) {
		cJSON *rl = cJSON_AddObjectToObject(o, "rateLimits");

		cJSON_AddNumberToObject(rl, "requestsPerMinute",
					(double)p->policy->requests_per_minute);
		cJSON_AddNumberToObject(rl, "burst", (double)p->policy->burst);
		cJSON_AddNumberToObject(rl, "tokensPerMinute", (double)p->policy->tokens_per_minute);
	}
}

/* A federated tool: its server, upstream name, pin and annotations. */
static void explain_mcp(cJSON *to, const struct gh_mcp_tool *mt)
{
	cJSON *mo = cJSON_AddObjectToObject(to, "mcp");

	cJSON_AddStringToObject(mo, "server", mt->server);
	cJSON_AddStringToObject(mo, "tool", mt->upstream_name);
	cJSON_AddStringToObject(mo, "pin", mt->pin);
	if (mt->def.annotations)
		cJSON_AddItemToObject(mo, "annotations", cJSON_Duplicate(mt->def.annotations, 1));
	cJSON_AddStringToObject(mo, "approvalDefault",
				gh_mcp_hint_text(gh_mcp_hint_of(mt->def.annotations)));
}

static void explain_tool(cJSON *o, const struct gh_config *cfg, struct gh_mcp *mcp,
			 const struct gh_principal *p, const struct gh_agent_conf *a,
			 const char *tool, const cJSON *args)
{
	char norm[GH_TOOL_NAME_MAX + 1];
	struct gh_tool_verdict v;
	cJSON *to = cJSON_AddObjectToObject(o, "tool");
	/* a federated tool's name may be 64 characters: looked up as is */
	struct gh_mcp_tool *mt = gh_mcp_tool_find(mcp, tool);

	if (mt)
		gh_strlcpy(norm, mt->name, sizeof(norm));
	else
		gh_tool_normalize(tool, norm);
	gh_tools_decide(cfg, mt, a, p->policy, norm, NULL, &v);
	gh_policy_args(p->policy, norm, args, &v.d);
	cJSON_AddStringToObject(to, "name", norm);
	if (args)
		cJSON_AddItemToObject(to, "arguments", cJSON_Duplicate(args, 1));
	cJSON_AddStringToObject(to, "source", gh_tool_source_name(v.src));
	if (mt)
		explain_mcp(to, mt);
	if (v.src == GH_SRC_CLIENT)
		cJSON_AddStringToObject(to, "note", "not a server or memory tool: judged as a "
				       "client tool the caller declares");
	cJSON_AddStringToObject(to, "decision", verdict_name(v.d.verdict));
	cJSON_AddStringToObject(to, "rule", v.d.rule);
	/* what decided: a rule of the config, or a federated tool's annotation
	 * (the default a policy can override) */
	cJSON_AddStringToObject(to, "decidedBy", v.annotation ? "annotation" : "rule");
	if (v.annotation)
		cJSON_AddStringToObject(to, "annotation", v.annotation);
	if (v.d.verdict == GH_V_APPROVAL) {
		cJSON_AddStringToObject(to, "approver", v.d.approver == GH_APPROVER_CALLER
							? "caller" : "admin");
		cJSON_AddNumberToObject(to, "approvalTtlSeconds", (double)v.d.ttl_s);
	}
	if (v.per_minute > 0) {
		cJSON *rl = cJSON_AddObjectToObject(to, "rateLimit");

		cJSON_AddNumberToObject(rl, "perMinute", (double)v.per_minute);
		cJSON_AddStringToObject(rl, "rule", v.limit_rule);
	}
	gh_mcp_tool_unref(mt);
}

cJSON *gh_explain_json(const struct gh_config *cfg, struct gh_mcp *mcp,
		       const struct gh_principal *p, const struct gh_agent_conf *a,
		       const char *tool)
{
	return gh_explain_call_json(cfg, mcp, p, a, tool, NULL);
}

cJSON *gh_explain_call_json(const struct gh_config *cfg, struct gh_mcp *mcp,
			    const struct gh_principal *p, const struct gh_agent_conf *a,
			    const char *tool, const cJSON *args)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	explain_key(o, cfg, p);
	if (a) {
		struct gh_decision d;
		cJSON *ao = cJSON_AddObjectToObject(o, "agent");

		gh_policy_agent(p->policy, a->id, &d);
		cJSON_AddStringToObject(ao, "id", a->id);
		cJSON_AddBoolToObject(ao, "allowed", d.verdict == GH_V_ALLOW);
		cJSON_AddStringToObject(ao, "rule", d.rule);
	}
	if (tool && *tool)
		explain_tool(o, cfg, mcp, p, a, tool, args);
	return o;
}
