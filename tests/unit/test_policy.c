/*
 * test_policy.c - policy decisions, table-driven over a real config:
 * deny wins over allow, anything unmatched is denied, a key without a
 * policy may do nothing, approval comes from the policy, the agent, the
 * tool's own flag or the client tool's flag (in that order) with the
 * policy's approver and ttl, tool rate limits pick exact > glob > "*",
 * and every decision's rule string names the rule that made it.
 */
#include "policy.h"

#include "t.h"
#include "util.h"

static const char conf_text[] =
	"{\"providers\":{\"m\":{\"type\":\"mock\"}},"
	"\"agents\":{\"a\":{\"provider\":\"m\",\"require_approval\":[\"danger_*\",\"get_secret\"]},"
	"\"b\":{\"provider\":\"m\"}},"
	"\"policies\":{"
	"\"default\":{\"agents\":[\"a\",\"help*\"],"
	"\"tools\":{\"allow\":[\"memory_*\",\"get_*\",\"send_*\",\"danger_*\"],"
	"\"deny\":[\"memory_delete\",\"send_fax\"]},"
	"\"client_tools\":{\"allow\":[\"ui_*\",\"*_client\",\"send_*\"],\"deny\":[\"ui_admin*\"]},"
	"\"approval\":{\"require\":[\"send_*\",\"danger_zone\"],\"approver\":\"caller\","
	"\"ttl_seconds\":600},"
	"\"rate_limits\":{\"tool_calls_per_minute\":{\"*\":100,\"send_*\":10,\"send_email\":3,"
	"\"s?nd_*\":7}}},"
	"\"closed\":{\"agents\":[\"*\"]},"
	"\"open\":{\"agents\":[\"*\"],\"tools\":{\"allow\":[\"*\"]},"
	"\"client_tools\":{\"allow\":[\"*\"]},"
	"\"rate_limits\":{\"tool_calls_per_minute\":{\"send_email\":2}}}}}";

static struct gh_config *conf(void)
{
	struct gh_config *c = NULL;
	struct gh_err e;

	if (gh_config_parse("policy.json", conf_text, strlen(conf_text), &c, &e) != GH_OK)
		fprintf(stderr, "  config: %s\n", e.msg);
	return c;
}

static const char *vname(enum gh_verdict v)
{
	return v == GH_V_ALLOW ? "allow" : v == GH_V_DENY ? "deny" : "approval";
}

static void test_agents(void)
{
	struct gh_config *c = conf();
	const struct gh_policy_conf *p;
	struct gh_decision d;

	T_ASSERT(c);
	p = gh_config_policy(c, "default");
	gh_policy_agent(p, "a", &d);
	T_EQ_INT(d.verdict, GH_V_ALLOW);
	T_EQ_STR(d.rule, "policy \"default\": agents \"a\"");
	gh_policy_agent(p, "helpdesk", &d);
	T_EQ_INT(d.verdict, GH_V_ALLOW);
	T_EQ_STR(d.rule, "policy \"default\": agents \"help*\"");
	gh_policy_agent(p, "b", &d);
	T_EQ_INT(d.verdict, GH_V_DENY);
	T_EQ_STR(d.rule, "policy \"default\": agent \"b\" matches nothing in agents");
	gh_policy_agent(NULL, "a", &d);
	T_EQ_INT(d.verdict, GH_V_DENY);
	T_CONTAINS(d.rule, "no policy applies to this key");
	gh_config_free(c);
}

struct tool_case {
	const char *policy;
	const char *agent;        /* NULL: no agent */
	const char *tool;
	enum gh_tool_source src;
	int flag;                 /* the tool's own require-approval flag */
	enum gh_verdict verdict;
	const char *rule;
};

static void test_tools_table(void)
{
	static const struct tool_case tc[] = {
		/* allow lists */
		{"default", "b", "memory_save", GH_SRC_MEMORY, 0, GH_V_ALLOW,
		 "policy \"default\": tools.allow \"memory_*\""},
		{"default", "b", "get_weather", GH_SRC_SERVER, 0, GH_V_ALLOW,
		 "policy \"default\": tools.allow \"get_*\""},
		/* deny wins over an allow that also matches */
		{"default", "b", "memory_delete", GH_SRC_MEMORY, 0, GH_V_DENY,
		 "policy \"default\": tools.deny \"memory_delete\""},
		{"default", "a", "send_fax", GH_SRC_SERVER, 1, GH_V_DENY,
		 "policy \"default\": tools.deny \"send_fax\""},
		/* unmatched is denied */
		{"default", "b", "rm_rf", GH_SRC_SERVER, 0, GH_V_DENY,
		 "policy \"default\": tool \"rm_rf\" matches nothing in tools.allow"},
		{"default", "b", "ui_button", GH_SRC_SERVER, 0, GH_V_DENY,
		 "policy \"default\": tool \"ui_button\" matches nothing in tools.allow"},
		{"closed", "b", "memory_save", GH_SRC_MEMORY, 0, GH_V_DENY,
		 "policy \"closed\": tool \"memory_save\" matches nothing in tools.allow"},
		/* approval: policy first, then agent, then the tool's flag */
		{"default", "a", "send_email", GH_SRC_SERVER, 1, GH_V_APPROVAL,
		 "policy \"default\": approval.require \"send_*\""},
		{"default", "a", "danger_zone", GH_SRC_SERVER, 1, GH_V_APPROVAL,
		 "policy \"default\": approval.require \"danger_zone\""},
		{"default", "a", "danger_x", GH_SRC_SERVER, 1, GH_V_APPROVAL,
		 "agent \"a\": require_approval \"danger_*\""},
		{"default", "a", "get_secret", GH_SRC_SERVER, 0, GH_V_APPROVAL,
		 "agent \"a\": require_approval \"get_secret\""},
		{"default", "b", "danger_x", GH_SRC_SERVER, 0, GH_V_ALLOW,
		 "policy \"default\": tools.allow \"danger_*\""},
		{"default", NULL, "danger_x", GH_SRC_SERVER, 0, GH_V_ALLOW,
		 "policy \"default\": tools.allow \"danger_*\""},
		{"default", "b", "get_weather", GH_SRC_SERVER, 1, GH_V_APPROVAL,
		 "tool \"get_weather\": require_approval"},
		{"open", "b", "anything", GH_SRC_SERVER, 1, GH_V_APPROVAL,
		 "tool \"anything\": require_approval"},
		/* client tools: the client allow/deny lists, not tools.allow */
		{"default", "b", "ui_button", GH_SRC_CLIENT, 0, GH_V_ALLOW,
		 "policy \"default\": client_tools.allow \"ui_*\""},
		{"default", "b", "local_client", GH_SRC_CLIENT, 0, GH_V_ALLOW,
		 "policy \"default\": client_tools.allow \"*_client\""},
		{"default", "b", "ui_button", GH_SRC_CLIENT, 1, GH_V_APPROVAL,
		 "client tool \"ui_button\" declares requireApproval"},
		{"default", "b", "ui_admin_panel", GH_SRC_CLIENT, 0, GH_V_DENY,
		 "policy \"default\": client_tools.deny \"ui_admin*\""},
		{"default", "b", "get_weather", GH_SRC_CLIENT, 0, GH_V_DENY,
		 "policy \"default\": client tool \"get_weather\" matches nothing in "
		 "client_tools.allow"},
		{"closed", "b", "ui_button", GH_SRC_CLIENT, 0, GH_V_DENY,
		 "policy \"closed\": client tools are not allowed (client_tools.allow is empty)"},
		/* the policy's approval list covers client tools too; the agent's too */
		{"default", "b", "send_sms", GH_SRC_CLIENT, 0, GH_V_APPROVAL,
		 "policy \"default\": approval.require \"send_*\""},
		{"open", "a", "danger_ui", GH_SRC_CLIENT, 0, GH_V_APPROVAL,
		 "agent \"a\": require_approval \"danger_*\""},
		/* no policy: nothing at all */
		{NULL, "a", "memory_save", GH_SRC_MEMORY, 0, GH_V_DENY,
		 "no policy applies to this key (and none is named \"default\")"},
		{NULL, "a", "ui_button", GH_SRC_CLIENT, 0, GH_V_DENY,
		 "no policy applies to this key (and none is named \"default\")"},
	};
	struct gh_config *c = conf();
	size_t i;
	int bad = 0;

	T_ASSERT(c);
	for (i = 0; i < GH_ARRAY_LEN(tc); i++) {
		const struct gh_policy_conf *p = tc[i].policy ? gh_config_policy(c, tc[i].policy)
							      : NULL;
		const struct gh_agent_conf *a =
			tc[i].agent ? gh_config_agent(c, tc[i].agent) : NULL;
		struct gh_decision d;

		memset(&d, 0x5a, sizeof(d));
		gh_policy_tool(p, a, tc[i].tool, tc[i].src, tc[i].flag, &d);
		if (d.verdict != tc[i].verdict || strcmp(d.rule, tc[i].rule)) {
			fprintf(stderr,
				"  case %zu (%s, %s, %s %s): %s \"%s\", expected %s \"%s\"\n", i,
				tc[i].policy ? tc[i].policy : "-", tc[i].agent ? tc[i].agent : "-",
				gh_tool_source_name(tc[i].src), tc[i].tool, vname(d.verdict),
				d.rule,
				vname(tc[i].verdict), tc[i].rule);
			bad++;
		}
	}
	if (bad)
		T_FAIL("%d of %zu decisions wrong", bad, GH_ARRAY_LEN(tc));
	gh_config_free(c);
}

/* An approval says who approves and for how long. */
static void test_approver_and_ttl(void)
{
	struct gh_config *c = conf();
	struct gh_decision d;

	T_ASSERT(c);
	gh_policy_tool(gh_config_policy(c, "default"), gh_config_agent(c, "a"), "send_email",
		       GH_SRC_SERVER, 0, &d);
	T_EQ_INT(d.verdict, GH_V_APPROVAL);
	T_EQ_INT(d.approver, GH_APPROVER_CALLER);
	T_EQ_INT(d.ttl_s, 600);
	gh_policy_tool(gh_config_policy(c, "open"), gh_config_agent(c, "b"), "send_email",
		       GH_SRC_SERVER, 1, &d);
	T_EQ_INT(d.verdict, GH_V_APPROVAL);
	T_EQ_INT(d.approver, GH_APPROVER_ADMIN); /* the default */
	T_EQ_INT(d.ttl_s, 3600);
	gh_config_free(c);
}

static void test_client_tool_declaration(void)
{
	struct gh_config *c = conf();
	const struct gh_policy_conf *p;
	struct gh_decision d;

	T_ASSERT(c);
	p = gh_config_policy(c, "default");
	gh_policy_client_tool(p, "ui_button", &d);
	T_EQ_INT(d.verdict, GH_V_ALLOW);
	gh_policy_client_tool(p, "ui_admin", &d);
	T_EQ_INT(d.verdict, GH_V_DENY);
	T_EQ_STR(d.rule, "policy \"default\": client_tools.deny \"ui_admin*\"");
	gh_policy_client_tool(gh_config_policy(c, "closed"), "x", &d);
	T_EQ_INT(d.verdict, GH_V_DENY);
	gh_policy_client_tool(NULL, "x", &d);
	T_EQ_INT(d.verdict, GH_V_DENY);
	gh_config_free(c);
}

static void test_policy_for_key(void)
{
	struct gh_config *c = conf(), *nodefault = NULL;
	struct gh_key k;
	struct gh_err e;
	static const char text[] = "{\"providers\":{\"m\":{\"type\":\"mock\"}},"
				   "\"agents\":{\"a\":{\"provider\":\"m\"}},"
				   "\"policies\":{\"p\":{\"agents\":[\"*\"]}}}";

	T_ASSERT(c);
	memset(&k, 0, sizeof(k));
	T_ASSERT(gh_policy_for_key(c, &k) == gh_config_policy(c, "default"));
	gh_strlcpy(k.policy, "open", sizeof(k.policy));
	T_ASSERT(gh_policy_for_key(c, &k) == gh_config_policy(c, "open"));
	/* a key naming a policy that is gone runs under none (not "default") */
	gh_strlcpy(k.policy, "removed", sizeof(k.policy));
	T_ASSERT(gh_policy_for_key(c, &k) == NULL);
	T_EQ_INT(gh_config_parse("n.json", text, strlen(text), &nodefault, &e), GH_OK);
	k.policy[0] = '\0';
	T_ASSERT(gh_policy_for_key(nodefault, &k) == NULL);
	gh_config_free(nodefault);
	gh_config_free(c);
}

static void test_tool_limits(void)
{
	static const struct {
		const char *policy, *tool;
		int64_t limit;
		const char *rule; /* NULL: no entry applies */
	} tc[] = {
		{"default", "send_email", 3, "send_email"}, /* exact beats the globs */
		{"default", "send_sms", 10, "send_*"},      /* first glob in file order */
		{"default", "sand_box", 7, "s?nd_*"},
		{"default", "get_weather", 100, "*"},       /* "*" last */
		{"default", "", 100, "*"},
		{"open", "send_email", 2, "send_email"},
		{"open", "send_sms", 0, NULL},
		{"closed", "x", 0, NULL},
		{NULL, "x", 0, NULL},
	};
	struct gh_config *c = conf();
	size_t i;

	T_ASSERT(c);
	for (i = 0; i < GH_ARRAY_LEN(tc); i++) {
		const char *rule = "untouched";
		int64_t n = gh_policy_tool_limit(tc[i].policy ? gh_config_policy(c, tc[i].policy)
							      : NULL,
						 tc[i].tool, &rule);

		if (n != tc[i].limit || strcmp(rule, tc[i].rule ? tc[i].rule : "untouched"))
			T_FAIL("%s/%s: %lld by \"%s\", expected %lld by \"%s\"",
			       tc[i].policy ? tc[i].policy : "-", tc[i].tool, (long long)n, rule,
			       (long long)tc[i].limit, tc[i].rule ? tc[i].rule : "untouched");
	}
	T_EQ_INT(gh_policy_tool_limit(gh_config_policy(c, "default"), "send_email", NULL), 3);
	gh_config_free(c);
}

static void test_source_names(void)
{
	T_EQ_STR(gh_tool_source_name(GH_SRC_MEMORY), "memory");
	T_EQ_STR(gh_tool_source_name(GH_SRC_SERVER), "server");
	T_EQ_STR(gh_tool_source_name(GH_SRC_CLIENT), "client");
}

struct warnings {
	char msg[16][GH_POLICY_WARN_MAX];
	int n;
};

static void collect(void *ud, const char *msg)
{
	struct warnings *w = ud;

	if (w->n < 16)
		gh_strlcpy(w->msg[w->n], msg, sizeof(w->msg[0]));
	w->n++;
}

/* Every glob that can match nothing is reported, in the policy's order,
 * and nothing else: agents against the agents, tool rules against the
 * server and memory tools, client_tools never. */
static void test_lint(void)
{
	static const char *const want[] = {
		"policy \"default\": agents \"help*\" matches no agent (the agents are: a, b)",
		"policy \"default\": tools.allow \"get_*\" matches no server or memory tool",
		"policy \"default\": tools.allow \"send_*\" matches no server or memory tool",
		"policy \"default\": tools.allow \"danger_*\" matches no server or memory tool",
		"policy \"default\": tools.deny \"send_fax\" matches no server or memory tool",
		"policy \"default\": approval.require \"send_*\" matches no server or memory tool "
		"(it may be meant for a client tool, which each request declares: that cannot be "
		"checked here)",
		"policy \"default\": approval.require \"danger_zone\" matches no server or memory "
		"tool (it may",
		"policy \"default\": rate_limits.tool_calls_per_minute \"send_*\" matches no server "
		"or memory tool (it may",
		"policy \"default\": rate_limits.tool_calls_per_minute \"send_email\" matches no",
		"policy \"default\": rate_limits.tool_calls_per_minute \"s?nd_*\" matches no",
	};
	struct gh_config *c = conf();
	struct warnings w;
	size_t i;

	T_ASSERT(c);
	memset(&w, 0, sizeof(w));
	gh_policy_lint(c, gh_config_policy(c, "default"), collect, &w);
	T_EQ_INT(w.n, GH_ARRAY_LEN(want));
	for (i = 0; i < GH_ARRAY_LEN(want); i++)
		if (strncmp(w.msg[i], want[i], strlen(want[i])))
			T_FAIL("warning %zu: \"%s\", expected \"%s...\"", i, w.msg[i], want[i]);
	memset(&w, 0, sizeof(w));
	gh_policy_lint(c, gh_config_policy(c, "closed"), collect, &w);
	T_EQ_INT(w.n, 0);
	memset(&w, 0, sizeof(w));
	gh_policy_lint(c, gh_config_policy(c, "open"), collect, &w);
	T_EQ_INT(w.n, 1);
	T_CONTAINS(w.msg[0], "tool_calls_per_minute \"send_email\" matches no server or memory");
	memset(&w, 0, sizeof(w));
	gh_policy_lint(c, NULL, collect, &w);
	T_EQ_INT(w.n, 0);
	gh_config_free(c);
}

/* A configured server tool and the memory tools are known tools. */
static void test_lint_known_tools(void)
{
	static const char text[] =
		"{\"providers\":{\"m\":{\"type\":\"mock\"}},"
		"\"agents\":{\"assistant\":{\"provider\":\"m\"}},"
		"\"tools\":{\"send_email\":{\"type\":\"http\",\"description\":\"d\","
		"\"url\":\"http://127.0.0.1:9/x\",\"input_schema\":{\"type\":\"object\"}}},"
		"\"policies\":{\"p\":{\"agents\":[\"assist*\",\"asistant\"],"
		"\"tools\":{\"allow\":[\"send_*\",\"working_memory_update\",\"memroy_*\"]},"
		"\"client_tools\":{\"allow\":[\"nothing_matches_this\"]}}}}";
	struct gh_config *c = NULL;
	struct gh_err e;
	struct warnings w;

	T_EQ_INT(gh_config_parse("t.json", text, strlen(text), &c, &e), GH_OK);
	memset(&w, 0, sizeof(w));
	gh_policy_lint(c, gh_config_policy(c, "p"), collect, &w);
	T_EQ_INT(w.n, 2);
	T_EQ_STR(w.msg[0], "policy \"p\": agents \"asistant\" matches no agent (the agents "
			   "are: assistant)");
	T_EQ_STR(w.msg[1], "policy \"p\": tools.allow \"memroy_*\" matches no server or memory "
			   "tool");
	gh_config_free(c);
}

T_MAIN(T(test_agents), T(test_tools_table), T(test_approver_and_ttl),
       T(test_client_tool_declaration), T(test_policy_for_key), T(test_tool_limits),
       T(test_source_names), T(test_lint), T(test_lint_known_tools))
