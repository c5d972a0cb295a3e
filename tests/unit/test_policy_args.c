/*
 * test_policy_args.c - argument conditions in policies ("arguments"
 * rules): over a table of calls, the decision the gate acts on (the run's
 * tool set, gh_toolset_decision, then gh_policy_args on the call's
 * arguments, as run.c's gate does) and what GET /api/policy/explain answers
 * with the same sample arguments (gh_explain_call_json) agree with each
 * other and with the verdict and rule the table expects. Then: a pattern
 * that cannot be used stops the config, naming the policy and the rule.
 */
#include "explain.h"
#include "policy.h"

#include "json.h"
#include "t.h"
#include "tools.h"
#include "util.h"

static const char conf_text[] =
	"{\"providers\":{\"m\":{\"type\":\"mock\"}},"
	"\"agents\":{\"a\":{\"provider\":\"m\"}},"
	"\"policies\":{\"coding\":{\"agents\":[\"*\"],"
	"\"client_tools\":{\"allow\":[\"*\"]},"
	"\"approval\":{\"require\":[\"Deploy\"]},"
	"\"arguments\":["
	"{\"name\":\"no-sudo\",\"tool\":\"Bash\",\"pointer\":\"/command\","
	"\"regex\":\"(^|[;&|]\\\\s*)(sudo|rm\\\\s+-rf)\",\"effect\":\"deny\"},"
	"{\"tool\":\"Bash\",\"pointer\":\"/command\",\"regex\":\"^git push\",\"effect\":\"approval\"},"
	"{\"name\":\"outside-workspace\",\"tool\":\"Write\",\"pointer\":\"/file_path\","
	"\"glob\":\"/workspace/**\",\"negate\":true,\"effect\":\"approval\"},"
	"{\"name\":\"no-env\",\"tool\":\"*\",\"pointer\":\"/file_path\",\"glob\":\"**/.env\","
	"\"effect\":\"deny\"},"
	"{\"name\":\"first-url\",\"tool\":\"Fetch\",\"pointer\":\"/urls/0\","
	"\"regex\":\"^http://\",\"effect\":\"deny\"},"
	"{\"name\":\"deploy-prod\",\"tool\":\"Deploy\",\"pointer\":\"/env\",\"glob\":\"prod\","
	"\"effect\":\"deny\"}"
	"]}}}";

static const struct {
	const char *tool, *args, *verdict, *rule; /* rule: a part of the rule's text */
} table[] = {
	{"Bash", "{\"command\":\"ls -la\"}", "allow", "client_tools.allow"},
	{"Bash", "{\"command\":\"sudo apt install x\"}", "deny", "arguments \"no-sudo\""},
	{"Bash", "{\"command\":\"cd /tmp && rm  -rf /\"}", "deny", "no-sudo"},
	{"Bash", "{\"command\":\"cd /tmp; rm -rf /\"}", "deny", "arguments \"no-sudo\""},
	{"Bash", "{\"command\":\"echo hi | sudo tee /etc/x\"}", "deny", "no-sudo"},
	{"Bash", "{\"command\":\"echo pseudo-sudo\"}", "allow", "client_tools.allow"},
	{"Bash", "{\"command\":\"git push origin main\"}", "approval", "arguments[1]"},
	/* deny wins over approval, whatever the order of the rules */
	{"Bash", "{\"command\":\"git push; sudo reboot\"}", "deny", "no-sudo"},
	{"Write", "{\"file_path\":\"/workspace/src/a.c\"}", "allow", "client_tools.allow"},
	{"Write", "{\"file_path\":\"/etc/passwd\"}", "approval", "outside-workspace"},
	/* judged after "." and ".." are resolved */
	{"Write", "{\"file_path\":\"/workspace/../etc/passwd\"}", "approval", "outside-workspace"},
	{"Write", "{\"file_path\":\"/workspace/./x/../y\"}", "allow", "client_tools.allow"},
	/* no value where the pointer points: a negated rule applies */
	{"Write", "{\"content\":\"x\"}", "approval", "outside-workspace"},
	{"Write", "{\"file_path\":\"/workspace/app/.env\"}", "deny", "no-env"},
	{"Edit", "{\"file_path\":\"/home/dev/.env\"}", "deny", "no-env"},
	{"Edit", "{\"file_path\":\"/home/dev/env\"}", "allow", "client_tools.allow"},
	{"Fetch", "{\"urls\":[\"http://a\",\"https://b\"]}", "deny", "first-url"},
	{"Fetch", "{\"urls\":[\"https://a\",\"http://b\"]}", "allow", "client_tools.allow"},
	/* an argument rule turns the tool's approval into a deny, never an allow */
	{"Deploy", "{\"env\":\"prod\"}", "deny", "deploy-prod"},
	{"Deploy", "{\"env\":\"staging\"}", "approval", "approval.require"},
	/* a rule for another tool does nothing */
	{"Read", "{\"command\":\"sudo ls\"}", "allow", "client_tools.allow"},
};

static const char *vname(enum gh_verdict v)
{
	return v == GH_V_ALLOW ? "allow" : v == GH_V_DENY ? "deny" : "approval";
}

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

static void test_gate_and_explain_agree(void)
{
	struct gh_config *c = NULL;
	struct gh_err e;
	size_t i;

	T_EQ_INT(gh_config_parse("args.json", conf_text, strlen(conf_text), &c, &e), GH_OK);
	for (i = 0; i < GH_ARRAY_LEN(table); i++) {
		const struct gh_agent_conf *a = gh_config_agent(c, "a");
		struct gh_principal p;
		struct gh_toolset ts;
		struct gh_decision gate;
		cJSON *defs = defs_for(table[i].tool), *args = gh_json_parse_stored(table[i].args);
		cJSON *x, *tool;

		memset(&p, 0, sizeof(p));
		p.policy = gh_config_policy(c, "coding");
		T_ASSERT(args && defs);
		T_EQ_INT(gh_toolset_build(c, NULL, a, p.policy, defs, &ts, &e), GH_OK);
		/* what the gate does for the call */
		gh_toolset_decision(&ts, table[i].tool, &gate);
		gh_policy_args(p.policy, table[i].tool, args, &gate);
		x = gh_explain_call_json(c, NULL, &p, a, table[i].tool, args);
		tool = cJSON_GetObjectItemCaseSensitive(x, "tool");
		if (strcmp(vname(gate.verdict), table[i].verdict) || !strstr(gate.rule, table[i].rule))
			fprintf(stderr, "  case %zu (%s %s): gate %s \"%s\", want %s \"%s\"\n", i,
				table[i].tool, table[i].args, vname(gate.verdict), gate.rule,
				table[i].verdict, table[i].rule);
		T_EQ_STR(vname(gate.verdict), table[i].verdict);
		T_ASSERT(strstr(gate.rule, table[i].rule) != NULL);
		T_EQ_STR(gh_json_str(tool, "decision"), table[i].verdict);
		T_EQ_STR(gh_json_str(tool, "rule"), gate.rule);
		T_ASSERT(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(tool, "arguments"), args, 1));
		cJSON_Delete(x);
		cJSON_Delete(args);
		gh_toolset_free(&ts);
		cJSON_Delete(defs);
	}
	gh_config_free(c);
}

/* The rule's text says what matched. */
static void test_rule_text(void)
{
	struct gh_config *c = NULL;
	struct gh_decision d;
	struct gh_err e;
	cJSON *args = gh_json_parse_stored("{\"command\":\"sudo ls\"}");

	T_EQ_INT(gh_config_parse("args.json", conf_text, strlen(conf_text), &c, &e), GH_OK);
	memset(&d, 0, sizeof(d));
	d.verdict = GH_V_ALLOW;
	gh_policy_args(gh_config_policy(c, "coding"), "Bash", args, &d);
	T_EQ_STR(d.rule, "policy \"coding\": arguments \"no-sudo\" (Bash /command matches regex "
			 "\"(^|[;&|]\\s*)(sudo|rm\\s+-rf)\")");
	cJSON_Delete(args);
	gh_config_free(c);
}

/* A pattern that cannot be used stops the start, naming policy and rule;
 * so do a rule with neither or both patterns, and an unknown effect. */
static void test_bad_rules_fail_closed(void)
{
	static const struct {
		const char *rule, *msg;
	} bad[] = {
		{"{\"name\":\"r1\",\"tool\":\"Bash\",\"pointer\":\"/command\",\"regex\":\"(sudo\","
		 "\"effect\":\"deny\"}",
		 "$.policies.p.arguments[0].regex: policy \"p\" rule r1: the pattern cannot be used"},
		{"{\"tool\":\"Bash\",\"pointer\":\"/command\",\"regex\":\"(?=x)\",\"effect\":\"deny\"}",
		 "policy \"p\" rule arguments[0]: the pattern cannot be used"},
		{"{\"tool\":\"Bash\",\"pointer\":\"/command\",\"effect\":\"deny\"}",
		 "$.policies.p.arguments[0]: expected one of regex or glob"},
		{"{\"tool\":\"Bash\",\"pointer\":\"command\",\"glob\":\"x\",\"effect\":\"deny\"}",
		 "pointer: expected a JSON pointer"},
		{"{\"tool\":\"Bash\",\"pointer\":\"/c\",\"glob\":\"x\",\"effect\":\"allow\"}",
		 "effect: expected \"deny\" or \"approval\""},
		{"{\"tool\":\"Bash\",\"pointer\":\"/c\",\"glob\":\"x\",\"effect\":\"deny\",\"x\":1}",
		 "$.policies.p.arguments[0].x: unknown option"},
	};
	size_t i;

	for (i = 0; i < GH_ARRAY_LEN(bad); i++) {
		char text[1024];
		struct gh_config *c = NULL;
		struct gh_err e;

		snprintf(text, sizeof(text),
			 "{\"providers\":{\"m\":{\"type\":\"mock\"}},\"agents\":{\"a\":{\"provider\":"
			 "\"m\"}},\"policies\":{\"p\":{\"arguments\":[%s]}}}", bad[i].rule);
		T_EQ_INT(gh_config_parse("bad.json", text, strlen(text), &c, &e), GH_E_BADREQ);
		T_ASSERT(c == NULL);
		if (!strstr(e.msg, bad[i].msg))
			fprintf(stderr, "  case %zu: %s\n", i, e.msg);
		T_ASSERT(strstr(e.msg, bad[i].msg) != NULL);
	}
}

/* A value too long to check within bounds counts against the call. */
static void test_long_value_fails_closed(void)
{
	struct gh_config *c = NULL;
	struct gh_decision d;
	struct gh_err e;
	size_t n = 2u << 20;
	char *cmd = malloc(n + 1);
	cJSON *args = cJSON_CreateObject();

	T_ASSERT(cmd && args);
	memset(cmd, 'a', n);
	cmd[n] = '\0';
	cJSON_AddStringToObject(args, "command", cmd);
	free(cmd);
	T_EQ_INT(gh_config_parse("args.json", conf_text, strlen(conf_text), &c, &e), GH_OK);
	memset(&d, 0, sizeof(d));
	d.verdict = GH_V_ALLOW;
	gh_policy_args(gh_config_policy(c, "coding"), "Bash", args, &d);
	T_EQ_INT(d.verdict, GH_V_DENY);
	cJSON_Delete(args);
	gh_config_free(c);
}

T_MAIN(T(test_gate_and_explain_agree), T(test_rule_text), T(test_bad_rules_fail_closed),
       T(test_long_value_fails_closed))
