/*
 * test_explain.c - one policy decision, two callers: over a table of keys,
 * agents and tools, the verdict the gate acts on (the run's tool set,
 * gh_toolset_decision) and what GET /api/policy/explain answers
 * (gh_explain_json) are the same, rule, approver and ttl included, and
 * are the verdict the table expects. A tool the agent does not have is
 * denied by both (the gate as an unknown tool).
 */
#include "explain.h"

#include "json.h"
#include "mcp.h"
#include "t.h"
#include "tools.h"
#include "util.h"

#define SRV(name, extra)                                                                    \
	"\"" name "\":{\"type\":\"http\",\"description\":\"" name " tool\",\"url\":"        \
	"\"http://127.0.0.1:9/" name "\",\"input_schema\":{\"type\":\"object\"}" extra "}"

static const char conf_text[] =
	"{\"providers\":{\"m\":{\"type\":\"mock\"}},"
	"\"tools\":{" SRV("get_weather", "") "," SRV("send_email", ",\"require_approval\":true")
	"," SRV("wire_money", "") "," SRV("not_listed", "") "},"
	"\"agents\":{\"a\":{\"provider\":\"m\",\"memory\":{\"enabled\":true},"
	"\"require_approval\":[\"wire_*\"],"
	"\"tools\":[\"memory_*\",\"get_weather\",\"send_email\",\"wire_money\"]},"
	"\"nomem\":{\"provider\":\"m\",\"tools\":[\"memory_*\",\"get_*\"]}},"
	"\"policies\":{"
	"\"p\":{\"agents\":[\"*\"],\"tools\":{\"allow\":[\"memory_*\",\"get_*\",\"send_*\","
	"\"wire_*\"],\"deny\":[\"memory_delete\"]},"
	"\"client_tools\":{\"allow\":[\"ui_*\",\"ask_*\"],\"deny\":[\"ui_admin*\"]},"
	"\"approval\":{\"require\":[\"memory_save\",\"ask_*\"],\"approver\":\"caller\","
	"\"ttl_seconds\":90},"
	"\"rate_limits\":{\"tool_calls_per_minute\":{\"get_*\":5}}},"
	"\"strict\":{\"agents\":[\"*\"],\"tools\":{\"allow\":[\"get_*\"]},"
	"\"client_tools\":{\"allow\":[\"ui_*\"]}}}}";

static const struct {
	const char *policy, *agent, *tool, *verdict;
} table[] = {
	{"p", "a", "get_weather", "allow"},          /* tools.allow */
	{"p", "a", "send_email", "approval"},        /* the tool's own flag */
	{"p", "a", "wire_money", "approval"},        /* the agent's require_approval */
	{"p", "a", "memory_save", "approval"},       /* the policy's approval.require */
	{"p", "a", "memory_delete", "deny"},         /* tools.deny wins */
	{"p", "a", "memory_search", "allow"},
	{"p", "a", "not_listed", "deny"},            /* not in the agent's tools */
	{"p", "nomem", "memory_search", "deny"},     /* memory disabled */
	{"p", "nomem", "get_weather", "allow"},
	{"p", "a", "ui_button", "allow"},            /* a client tool */
	{"p", "a", "ui_admin_panel", "deny"},        /* client_tools.deny */
	{"p", "a", "ask_user", "approval"},          /* a client tool needing approval */
	{"strict", "a", "send_email", "deny"},       /* unmatched: fail closed */
	{"strict", "a", "get_weather", "allow"},
	{"strict", "a", "memory_save", "deny"},
	{"strict", "a", "ui_button", "allow"},
	{NULL, "a", "get_weather", "deny"},          /* no policy: nothing */
};

static const char *vname(enum gh_verdict v)
{
	return v == GH_V_ALLOW ? "allow" : v == GH_V_DENY ? "deny" : "approval";
}

/* The client tools a caller would declare for the case's tool. */
static cJSON *defs_for(const char *tool)
{
	cJSON *o = cJSON_CreateArray(), *t = cJSON_CreateObject(), *fn, *defs = NULL;
	struct gh_err e;

	cJSON_AddItemToArray(o, t);
	cJSON_AddStringToObject(t, "type", "function");
	fn = cJSON_AddObjectToObject(t, "function");
	cJSON_AddStringToObject(fn, "name", tool);
	if (gh_tools_client_defs(NULL, o, "tools", &defs, &e) != GH_OK)
		fprintf(stderr, "  client defs: %s\n", e.msg);
	cJSON_Delete(o);
	return defs;
}

static int is_client(const struct gh_config *c, const char *tool)
{
	return !gh_config_tool(c, tool) && strncmp(tool, "memory_", 7);
}

static void test_gate_and_explain_agree(void)
{
	struct gh_config *c = NULL;
	struct gh_err e;
	size_t i;

	T_EQ_INT(gh_config_parse("explain.json", conf_text, strlen(conf_text), &c, &e), GH_OK);
	for (i = 0; i < GH_ARRAY_LEN(table); i++) {
		const struct gh_agent_conf *a = gh_config_agent(c, table[i].agent);
		struct gh_principal p;
		struct gh_toolset ts;
		struct gh_decision gate;
		cJSON *defs = is_client(c, table[i].tool) ? defs_for(table[i].tool) : NULL;
		cJSON *x, *tool;
		int in_set;

		memset(&p, 0, sizeof(p));
		p.policy = table[i].policy ? gh_config_policy(c, table[i].policy) : NULL;
		T_ASSERT(a && (!table[i].policy || p.policy));
		/* the gate: a refused client tool is a 403 for the request */
		if (gh_toolset_build(c, NULL, a, p.policy, defs, &ts, &e) != GH_OK) {
			T_ASSERT(defs != NULL);
			memset(&ts, 0, sizeof(ts));
			memset(&gate, 0, sizeof(gate));
			gate.verdict = GH_V_DENY;
		} else {
			gh_toolset_decision(&ts, table[i].tool, &gate);
		}
		in_set = gh_toolset_find(&ts, table[i].tool) != NULL;
		x = gh_explain_json(c, NULL, &p, a, table[i].tool);
		tool = cJSON_GetObjectItemCaseSensitive(x, "tool");
		if (strcmp(vname(gate.verdict), table[i].verdict) ||
		    strcmp(gh_json_str(tool, "decision"), table[i].verdict))
			fprintf(stderr, "  case %zu (%s, %s, %s): gate %s, explain %s, want %s\n", i,
				table[i].policy ? table[i].policy : "-", table[i].agent,
				table[i].tool, vname(gate.verdict), gh_json_str(tool, "decision"),
				table[i].verdict);
		T_EQ_STR(vname(gate.verdict), table[i].verdict);
		T_EQ_STR(gh_json_str(tool, "decision"), table[i].verdict);
		if (in_set)
			T_EQ_STR(gh_json_str(tool, "rule"), gate.rule);
		if (gate.verdict == GH_V_APPROVAL) {
			T_EQ_STR(gh_json_str(tool, "approver"),
				 gate.approver == GH_APPROVER_CALLER ? "caller" : "admin");
			T_EQ_INT(gh_json_int(tool, "approvalTtlSeconds", -1), gate.ttl_s);
		}
		cJSON_Delete(x);
		gh_toolset_free(&ts);
		cJSON_Delete(defs);
	}
	gh_config_free(c);
}

/* explain names the rate limit the gate applies. */
static void test_rate_limit_named(void)
{
	struct gh_config *c = NULL;
	struct gh_principal p;
	struct gh_err e;
	cJSON *x, *rl;

	T_EQ_INT(gh_config_parse("explain.json", conf_text, strlen(conf_text), &c, &e), GH_OK);
	memset(&p, 0, sizeof(p));
	p.policy = gh_config_policy(c, "p");
	x = gh_explain_json(c, NULL, &p, gh_config_agent(c, "a"), "get_weather");
	rl = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(x, "tool"),
					      "rateLimit");
	T_EQ_INT(gh_json_int(rl, "perMinute", 0), 5);
	T_EQ_STR(gh_json_str(rl, "rule"), "get_*");
	cJSON_Delete(x);
	gh_config_free(c);
}

/* Federated MCP tools go through the same function: the policy first (a
 * deny, an approval rule, approval.exempt), then a held definition, then
 * the approval default of the tool's annotations; the verdict says when
 * an annotation decided, and which. */
static const char fed_conf[] =
	"{\"providers\":{\"m\":{\"type\":\"mock\"}},"
	"\"agents\":{\"a\":{\"provider\":\"m\",\"tools\":[\"up_*\"]},"
	"\"b\":{\"provider\":\"m\",\"tools\":[\"other_*\"]}},"
	"\"policies\":{\"p\":{\"agents\":[\"*\"],"
	"\"tools\":{\"allow\":[\"up_*\"],\"deny\":[\"up_drop\"]},"
	"\"approval\":{\"require\":[\"up_ask\"],\"exempt\":[\"up_waived\"]}}}}";

static const struct {
	const char *tool, *annotations, *blocked, *agent, *verdict, *annotation, *rule;
} fed_table[] = {
	{"up_read", "{\"readOnlyHint\":true}", NULL, "a", "allow", "readOnlyHint true",
	 "no approval by default"},
	{"up_safe", "{\"destructiveHint\":false}", NULL, "a", "allow", "destructiveHint false",
	 "no approval by default"},
	{"up_write", NULL, NULL, "a", "approval", "destructiveHint absent (MCP's default: true)",
	 "approval by default"},
	{"up_rm", "{\"destructiveHint\":true,\"readOnlyHint\":false}", NULL, "a", "approval",
	 "destructiveHint true", "approval by default"},
	/* the policy overrides the annotation both ways */
	{"up_waived", NULL, NULL, "a", "allow", NULL, "approval.exempt \"up_waived\""},
	{"up_ask", "{\"readOnlyHint\":true}", NULL, "a", "approval", NULL, "approval.require"},
	{"up_drop", "{\"readOnlyHint\":true}", NULL, "a", "deny", NULL, "tools.deny \"up_drop\""},
	/* a held definition is refused whatever its annotations say */
	{"up_held", "{\"readOnlyHint\":true}", "definition changed: held until an admin accepts it",
	 "a", "deny", NULL, "MCP server up: definition changed"},
	/* an agent that does not list it */
	{"up_read", "{\"readOnlyHint\":true}", NULL, "b", "deny", NULL,
	 "the agent's tools list does not include it"},
};

static void test_federated_tools_decided_by(void)
{
	struct gh_config *c = NULL;
	struct gh_err e;
	size_t i;

	T_EQ_INT(gh_config_parse("fed.json", fed_conf, strlen(fed_conf), &c, &e), GH_OK);
	for (i = 0; i < GH_ARRAY_LEN(fed_table); i++) {
		struct gh_mcp_tool t;
		struct gh_tool_verdict v;
		cJSON *ann = fed_table[i].annotations ? cJSON_Parse(fed_table[i].annotations) : NULL;

		memset(&t, 0, sizeof(t));
		gh_strlcpy(t.name, fed_table[i].tool, sizeof(t.name));
		gh_strlcpy(t.upstream_name, fed_table[i].tool + 3, sizeof(t.upstream_name));
		t.server = "up";
		gh_strlcpy(t.pin, fed_table[i].blocked ? "held" : "pinned", sizeof(t.pin));
		if (fed_table[i].blocked)
			gh_strlcpy(t.blocked, fed_table[i].blocked, sizeof(t.blocked));
		t.def.annotations = ann;
		gh_tools_decide(c, &t, gh_config_agent(c, fed_table[i].agent),
				gh_config_policy(c, "p"), t.name, NULL, &v);
		T_EQ_STR(gh_tool_source_name(v.src), "server");
		T_EQ_STR(vname(v.d.verdict), fed_table[i].verdict);
		if (fed_table[i].annotation)
			T_EQ_STR(v.annotation ? v.annotation : "(a rule)", fed_table[i].annotation);
		else
			T_ASSERT(v.annotation == NULL);
		T_CONTAINS(v.d.rule, fed_table[i].rule);
		cJSON_Delete(ann);
	}
	gh_config_free(c);
}

T_MAIN(T(test_gate_and_explain_agree), T(test_rate_limit_named),
       T(test_federated_tools_decided_by))
