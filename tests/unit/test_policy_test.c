/*
 * test_policy_test.c - replaying recorded tool decisions under a candidate
 * config: the argument conditions over arguments as the audit log stores
 * them (redacted, truncated) decide exactly when nothing unknown could
 * change the decision, and say which rule they cannot answer otherwise;
 * gh_ptest_decide compares a recorded decision with the candidate's.
 */
#include "policy_test.h"

#include "audit.h"
#include "json.h"
#include "policy.h"
#include "t.h"
#include "util.h"

static const char conf_text[] =
	"{\"providers\":{\"m\":{\"type\":\"mock\"}},"
	"\"tools\":{\"fetch\":{\"type\":\"http\",\"description\":\"d\",\"input_schema\":{\"type\":\"object\"},\"url\":\"http://127.0.0.1:9/x\"},"
	"\"read\":{\"type\":\"http\",\"description\":\"d\",\"input_schema\":{\"type\":\"object\"},\"url\":\"http://127.0.0.1:9/x\"}},"
	"\"agents\":{\"a\":{\"provider\":\"m\",\"tools\":[\"fetch\",\"read\"]}},"
	"\"audit\":{\"redact\":[\"token\",\"headers\"]},"
	"\"policies\":{\"default\":{\"agents\":[\"*\"],\"tools\":{\"allow\":[\"*\"]},"
	"\"client_tools\":{\"allow\":[\"*\"]},"
	"\"arguments\":["
	"{\"name\":\"ask-token\",\"tool\":\"Bash\",\"pointer\":\"/token\",\"glob\":\"prod-*\","
	"\"effect\":\"approval\"},"
	"{\"name\":\"no-sudo\",\"tool\":\"Bash\",\"pointer\":\"/command\",\"regex\":\"sudo\","
	"\"effect\":\"deny\"},"
	"{\"name\":\"push\",\"tool\":\"Bash\",\"pointer\":\"/command\",\"regex\":\"^git push\","
	"\"effect\":\"approval\"},"
	"{\"name\":\"bearer\",\"tool\":\"fetch\",\"pointer\":\"/headers/authorization\","
	"\"glob\":\"Bearer*\",\"effect\":\"deny\"}"
	"]}}}";

/* The tightened candidate: fetch denied outright, agent b gone. */
static const char cand_text[] =
	"{\"providers\":{\"m\":{\"type\":\"mock\"}},"
	"\"tools\":{\"fetch\":{\"type\":\"http\",\"description\":\"d\",\"input_schema\":{\"type\":\"object\"},\"url\":\"http://127.0.0.1:9/x\"},"
	"\"read\":{\"type\":\"http\",\"description\":\"d\",\"input_schema\":{\"type\":\"object\"},\"url\":\"http://127.0.0.1:9/x\"}},"
	"\"agents\":{\"a\":{\"provider\":\"m\",\"tools\":[\"fetch\",\"read\"]}},"
	"\"policies\":{\"default\":{\"agents\":[\"*\"],\"tools\":{\"allow\":[\"*\"],"
	"\"deny\":[\"fetch\"]},\"client_tools\":{\"allow\":[\"*\"]},"
	"\"arguments\":[{\"name\":\"no-rm\",\"tool\":\"Bash\",\"pointer\":\"/command\","
	"\"regex\":\"rm\",\"effect\":\"deny\"}]}}}";

static const struct {
	const char *tool, *args; /* args NULL: stored truncated */
	int unknown;
	const char *verdict_or_rule; /* decided: the verdict; unknown: the rule */
} calls[] = {
	{"Bash", "{\"command\":\"ls\"}", 0, "allow"},
	{"Bash", "{\"command\":\"sudo ls\"}", 0, "deny"},
	/* the rule reads the redacted value itself */
	{"Bash", "{\"command\":\"[REDACTED]\"}", 1, "no-sudo"},
	/* a redacted value no rule reads changes nothing */
	{"Bash", "{\"command\":\"git push\",\"other\":\"[REDACTED]\"}", 0, "approval"},
	/* an unknown approval rule does not matter when a deny applies ... */
	{"Bash", "{\"token\":\"[REDACTED]\",\"command\":\"sudo x\"}", 0, "deny"},
	/* ... but does when the call would be allowed or asked by a later rule */
	{"Bash", "{\"token\":\"[REDACTED]\",\"command\":\"ls\"}", 1, "ask-token"},
	{"Bash", "{\"token\":\"[REDACTED]\",\"command\":\"git push\"}", 1, "ask-token"},
	/* the value lies under a redacted member */
	{"fetch", "{\"headers\":\"[REDACTED]\"}", 1, "bearer"},
	{"fetch", "{\"headers\":{\"authorization\":\"[REDACTED]\"}}", 1, "bearer"},
	{"fetch", "{\"url\":\"x\"}", 0, "allow"},
	/* stored truncated: every rule on the tool is unknown, others decide */
	{"Bash", NULL, 1, "no-sudo"},
	{"read", NULL, 0, "allow"},
};

static const char *vname(enum gh_verdict v)
{
	return v == GH_V_ALLOW ? "allow" : v == GH_V_DENY ? "deny" : "approval";
}

static void test_args_recorded(void)
{
	struct gh_config *c = NULL;
	struct gh_err e;
	size_t i;

	if (gh_config_parse("c.json", conf_text, strlen(conf_text), &c, &e) != GH_OK) T_FAIL("%s", e.msg);
	for (i = 0; i < GH_ARRAY_LEN(calls); i++) {
		const struct gh_policy_conf *p = gh_config_policy(c, "default");
		const struct gh_arg_rule *unknown = NULL;
		struct gh_decision d, gate;
		cJSON *args = calls[i].args ? gh_json_parse_stored(calls[i].args) : NULL;
		int r;

		memset(&d, 0, sizeof(d));
		d.verdict = GH_V_ALLOW;
		gate = d;
		r = gh_policy_args_recorded(p, calls[i].tool, args, &d, &unknown);
		if (r != calls[i].unknown)
			fprintf(stderr, "  case %zu: %d (%s)\n", i, r, unknown ? unknown->name : d.rule);
		T_EQ_INT(r, calls[i].unknown);
		if (r) {
			T_EQ_STR(unknown->name, calls[i].verdict_or_rule);
		} else {
			T_EQ_STR(vname(d.verdict), calls[i].verdict_or_rule);
			/* decided: exactly what the gate decides on these arguments */
			gh_policy_args(p, calls[i].tool, args, &gate);
			T_EQ_INT(gate.verdict, d.verdict);
			T_EQ_STR(gate.rule, d.rule);
		}
		cJSON_Delete(args);
	}
	gh_config_free(c);
}

/* A call the policy denies before any argument condition is decided. */
static void test_deny_needs_no_arguments(void)
{
	struct gh_config *c = NULL;
	struct gh_err e;
	struct gh_decision d;
	const struct gh_arg_rule *unknown = NULL;

	if (gh_config_parse("c.json", conf_text, strlen(conf_text), &c, &e) != GH_OK) T_FAIL("%s", e.msg);
	memset(&d, 0, sizeof(d));
	d.verdict = GH_V_DENY;
	gh_strlcpy(d.rule, "tools.deny", sizeof(d.rule));
	T_EQ_INT(gh_policy_args_recorded(gh_config_policy(c, "default"), "Bash", NULL, &d,
					 &unknown), 0);
	T_EQ_STR(d.rule, "tools.deny");
	gh_config_free(c);
}

static void decide(const struct gh_config *cand, const struct gh_key *k, const char *event,
		   const char *agent, const char *tool, const char *source, const char *args,
		   struct gh_ptest_verdict *v)
{
	struct gh_ptest_call c = {.seq = 1, .ts = 1, .event = event, .key_id = "key_1",
				  .agent_id = agent, .tool = tool, .source = source,
				  .reason = "r", .args = args, .detail = "{}"};

	gh_ptest_decide(cand, NULL, k, &c, v);
}

static void test_decide(void)
{
	struct gh_config *cand = NULL;
	struct gh_err e;
	struct gh_key k;
	struct gh_ptest_verdict v;

	T_EQ_INT(gh_config_parse("cand.json", cand_text, strlen(cand_text), &cand, &e), GH_OK);
	memset(&k, 0, sizeof(k));
	gh_strlcpy(k.id, "key_1", sizeof(k.id));
	/* a tightened rule: allowed -> denied, naming it */
	decide(cand, &k, "allowed", "a", "fetch", "server", "{\"url\":\"u\"}", &v);
	T_EQ_INT(v.kind, GH_PT_CHANGED);
	T_EQ_STR(v.before, "allowed");
	T_EQ_STR(v.after, "denied");
	T_EQ_STR(v.rule, "policy \"default\": tools.deny \"fetch\"");
	decide(cand, &k, "allowed", "a", "read", "server", "{}", &v);
	T_EQ_INT(v.kind, GH_PT_SAME);
	/* and back: denied then, allowed now */
	decide(cand, &k, "denied", "a", "read", "server", "{}", &v);
	T_EQ_INT(v.kind, GH_PT_CHANGED);
	T_EQ_STR(v.after, "allowed");
	decide(cand, &k, "approval_requested", "a", "read", "server", "{}", &v);
	T_EQ_STR(v.before, "approval");
	T_EQ_INT(v.kind, GH_PT_CHANGED);
	/* rate limits are not replayed: only a deny changes such a call */
	decide(cand, &k, "rate_limited", "a", "read", "server", "{}", &v);
	T_EQ_INT(v.kind, GH_PT_SAME);
	decide(cand, &k, "rate_limited", "a", "fetch", "server", "{}", &v);
	T_EQ_INT(v.kind, GH_PT_CHANGED);
	/* an agent the candidate lacks */
	decide(cand, &k, "allowed", "b", "read", "server", "{}", &v);
	T_EQ_INT(v.kind, GH_PT_CHANGED);
	T_ASSERT(v.agent_gone);
	T_CONTAINS(v.rule, "agent \"b\" is not in the candidate config");
	/* a server tool the candidate no longer has */
	decide(cand, &k, "allowed", "a", "gone_tool", "server", "{}", &v);
	T_EQ_INT(v.kind, GH_PT_CHANGED);
	T_CONTAINS(v.rule, "unknown tool");
	/* a client tool: its requireApproval flag is known when it was allowed */
	decide(cand, &k, "allowed", "a", "Bash", "client", "{\"command\":\"ls\"}", &v);
	T_EQ_INT(v.kind, GH_PT_SAME);
	decide(cand, &k, "allowed", "a", "Bash", "client", "{\"command\":\"rm x\"}", &v);
	T_EQ_INT(v.kind, GH_PT_CHANGED);
	T_CONTAINS(v.rule, "arguments \"no-rm\"");
	decide(cand, &k, "denied", "a", "Bash", "client", "{\"command\":\"ls\"}", &v);
	T_EQ_INT(v.kind, GH_PT_UNDECIDABLE);
	T_CONTAINS(v.rule, "requireApproval");
	/* a rule reading a redacted value */
	decide(cand, &k, "allowed", "a", "Bash", "client", "{\"command\":\"[REDACTED]\"}", &v);
	T_EQ_INT(v.kind, GH_PT_UNDECIDABLE);
	T_CONTAINS(v.rule, "arguments \"no-rm\" reads /command, which the audit log stores "
			   "redacted");
	T_ASSERT(v.after == NULL);
	decide(cand, &k, "allowed", "a", "Bash", "client",
	       "{\"blake2b\":\"00\",\"bytes\":9999999,\"truncated\":true}", &v);
	T_EQ_INT(v.kind, GH_PT_UNDECIDABLE);
	T_CONTAINS(v.rule, "truncated");
	/* a revoked or deleted key is not replayed */
	decide(cand, NULL, "allowed", "a", "read", "server", "{}", &v);
	T_EQ_INT(v.kind, GH_PT_KEY_GONE);
	k.revoked_at = 5;
	decide(cand, &k, "allowed", "a", "read", "server", "{}", &v);
	T_EQ_INT(v.kind, GH_PT_KEY_GONE);
	/* an admin session's call (no key) runs under no policy */
	{
		struct gh_ptest_call c = {.seq = 1, .ts = 1, .event = "denied", .agent_id = "a",
					  .tool = "read", .source = "server", .args = "{}"};

		gh_ptest_decide(cand, NULL, NULL, &c, &v);
		T_EQ_INT(v.kind, GH_PT_SAME);
		T_CONTAINS(v.rule, "no policy applies");
	}
	/* a key whose policy the candidate lacks runs under none */
	k.revoked_at = 0;
	gh_strlcpy(k.policy, "old", sizeof(k.policy));
	decide(cand, &k, "allowed", "a", "read", "server", "{}", &v);
	T_EQ_INT(v.kind, GH_PT_CHANGED);
	T_CONTAINS(v.rule, "no policy applies");
	gh_config_free(cand);
}

static void test_gate_rows(void)
{
	struct gh_audit_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.event = "denied";
	ev.tool_name = "t";
	ev.agent_id = "a";
	ev.source = "server";
	ev.detail = "{\"surface\":\"native\"}";
	T_ASSERT(gh_ptest_is_gate_row(&ev));
	ev.detail = "{\"approval_id\":\"apr_1\",\"decided_by\":\"admin:root\"}";
	T_ASSERT(!gh_ptest_is_gate_row(&ev));
	ev.detail = "{\"approval_id\":\"apr_1\"}";
	T_ASSERT(!gh_ptest_is_gate_row(&ev));
	ev.event = "approval_requested";
	T_ASSERT(gh_ptest_is_gate_row(&ev));
	ev.event = "executed";
	T_ASSERT(!gh_ptest_is_gate_row(&ev));
}

static void test_since(void)
{
	int64_t ms;

	T_EQ_INT(gh_ptest_parse_since("7d", 1000000000000, &ms), 0);
	T_EQ_INT(ms, 1000000000000 - 7 * 86400000LL);
	T_EQ_INT(gh_ptest_parse_since("90s", 1000000000000, &ms), 0);
	T_EQ_INT(ms, 1000000000000 - 90000);
	T_EQ_INT(gh_ptest_parse_since("2026-01-01T00:00:00Z", 0, &ms), 0);
	T_EQ_INT(ms, 1767225600000LL);
	T_EQ_INT(gh_ptest_parse_since("1234", 0, &ms), 0);
	T_EQ_INT(ms, 1234);
	T_EQ_INT(gh_ptest_parse_since("d", 0, &ms), -1);
	T_EQ_INT(gh_ptest_parse_since("-1d", 1000000000000, &ms), -1);
	T_EQ_INT(gh_ptest_parse_since("soon", 0, &ms), -1);
}

T_MAIN(T(test_args_recorded), T(test_deny_needs_no_arguments), T(test_decide), T(test_gate_rows),
       T(test_since))
