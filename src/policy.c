/*
 * policy.c - policy evaluation; see policy.h.
 */
#include "policy.h"

#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"
#include "jsregex.h"
#include "schema.h"
#include "tools.h"
#include "util.h"

/* Longest argument value an argument condition looks at (bytes). */
#define ARG_VALUE_MAX (1u << 20)

const char *gh_tool_source_name(enum gh_tool_source s)
{
	switch (s) {
	case GH_SRC_MEMORY: return "memory";
	case GH_SRC_SERVER: return "server";
	case GH_SRC_CLIENT: return "client";
	}
	return "server";
}

const struct gh_policy_conf *gh_policy_for_key(const struct gh_config *c, const struct gh_key *k)
{
	if (k->policy[0])
		return gh_config_policy(c, k->policy);
	return gh_config_policy(c, "default");
}

/* Index of the first glob in l matching s, or -1. */
static int first_match(const struct gh_strlist *l, const char *s)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (gh_glob_match(l->v[i], s))
			return (int)i;
	return -1;
}

static void set(struct gh_decision *d, enum gh_verdict v, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set(struct gh_decision *d, enum gh_verdict v, const char *fmt, ...)
{
	va_list ap;

	d->verdict = v;
	va_start(ap, fmt);
	vsnprintf(d->rule, sizeof(d->rule), fmt, ap);
	va_end(ap);
}

/* A key without a policy may do nothing: 1 with d set to say so. */
static int no_policy(const struct gh_policy_conf *p, struct gh_decision *d)
{
	memset(d, 0, sizeof(*d));
	if (!p)
		set(d, GH_V_DENY, "no policy applies to this key (and none is named \"default\")");
	return !p;
}

void gh_policy_agent(const struct gh_policy_conf *p, const char *agent_id, struct gh_decision *d)
{
	int i;

	if (no_policy(p, d))
		return;
	i = first_match(&p->agents, agent_id);
	if (i < 0)
		set(d, GH_V_DENY, "policy \"%s\": agent \"%s\" matches nothing in agents", p->name,
		    agent_id);
	else
		set(d, GH_V_ALLOW, "policy \"%s\": agents \"%s\"", p->name, p->agents.v[i]);
}

void gh_policy_client_tool(const struct gh_policy_conf *p, const char *name,
			   struct gh_decision *d)
{
	int i;

	if (no_policy(p, d))
		return;
	if ((i = first_match(&p->client_deny, name)) >= 0) {
		set(d, GH_V_DENY, "policy \"%s\": client_tools.deny \"%s\"", p->name,
		    p->client_deny.v[i]);
		return;
	}
	if ((i = first_match(&p->client_allow, name)) >= 0) {
		set(d, GH_V_ALLOW, "policy \"%s\": client_tools.allow \"%s\"", p->name,
		    p->client_allow.v[i]);
		return;
	}
	if (!p->client_tools_enabled)
		set(d, GH_V_DENY, "policy \"%s\": client tools are not allowed (client_tools.allow "
				  "is empty)", p->name);
	else
		set(d, GH_V_DENY, "policy \"%s\": client tool \"%s\" matches nothing in "
				  "client_tools.allow", p->name, name);
}

void gh_policy_tool(const struct gh_policy_conf *p, const struct gh_agent_conf *a,
		    const char *tool_name, enum gh_tool_source src, int tool_requires_approval,
		    struct gh_decision *d)
{
	int i;

	if (no_policy(p, d))
		return;
	if (src == GH_SRC_CLIENT) {
		gh_policy_client_tool(p, tool_name, d);
		if (d->verdict == GH_V_DENY)
			return;
	} else {
		if ((i = first_match(&p->tools_deny, tool_name)) >= 0) {
			set(d, GH_V_DENY, "policy \"%s\": tools.deny \"%s\"", p->name,
			    p->tools_deny.v[i]);
			return;
		}
		if ((i = first_match(&p->tools_allow, tool_name)) < 0) {
			set(d, GH_V_DENY, "policy \"%s\": tool \"%s\" matches nothing in tools.allow",
			    p->name, tool_name);
			return;
		}
		set(d, GH_V_ALLOW, "policy \"%s\": tools.allow \"%s\"", p->name,
		    p->tools_allow.v[i]);
	}
	d->approver = p->approver;
	d->ttl_s = p->approval_ttl_s;
	if ((i = first_match(&p->approval_require, tool_name)) >= 0) {
		set(d, GH_V_APPROVAL, "policy \"%s\": approval.require \"%s\"", p->name,
		    p->approval_require.v[i]);
		return;
	}
	if (a && (i = first_match(&a->require_approval, tool_name)) >= 0) {
		set(d, GH_V_APPROVAL, "agent \"%s\": require_approval \"%s\"", a->id,
		    a->require_approval.v[i]);
		return;
	}
	if (tool_requires_approval) {
		set(d, GH_V_APPROVAL, src == GH_SRC_CLIENT
					      ? "client tool \"%s\" declares requireApproval"
					      : "tool \"%s\": require_approval",
		    tool_name);
		return;
	}
}

int gh_policy_tool_annotations(const struct gh_policy_conf *p, const char *tool_name,
			       int destructive, const char *hint, struct gh_decision *d)
{
	char allowed[sizeof(d->rule)];
	int i;

	if (!p || d->verdict != GH_V_ALLOW)
		return 0;
	gh_strlcpy(allowed, d->rule, sizeof(allowed));
	if (!destructive) {
		set(d, GH_V_ALLOW, "%.150s; annotation %s: no approval by default", allowed, hint);
		return 1;
	}
	if ((i = first_match(&p->approval_exempt, tool_name)) >= 0) {
		set(d, GH_V_ALLOW, "%.120s; approval.exempt \"%.40s\" waives the annotation %s",
		    allowed, p->approval_exempt.v[i], hint);
		return 0;
	}
	set(d, GH_V_APPROVAL, "tool \"%.64s\": annotation %s (approval by default; the policy's "
			      "approval.exempt can waive it)", tool_name, hint);
	return 1;
}

int gh_policy_agent_allowed(const struct gh_policy_conf *p, const char *agent_id)
{
	struct gh_decision d;

	gh_policy_agent(p, agent_id, &d);
	return d.verdict == GH_V_ALLOW;
}

int64_t gh_policy_tool_limit(const struct gh_policy_conf *p, const char *tool_name,
			     const char **rule)
{
	size_t i;
	const struct gh_tool_limit *star = NULL;

	if (!p)
		return 0;
	for (i = 0; i < p->ntool_limits; i++) {
		if (!strcmp(p->tool_limits[i].glob, tool_name)) {
			if (rule)
				*rule = p->tool_limits[i].glob;
			return p->tool_limits[i].per_minute;
		}
	}
	for (i = 0; i < p->ntool_limits; i++) {
		if (!strcmp(p->tool_limits[i].glob, "*")) {
			star = &p->tool_limits[i];
			continue;
		}
		if (gh_glob_match(p->tool_limits[i].glob, tool_name)) {
			if (rule)
				*rule = p->tool_limits[i].glob;
			return p->tool_limits[i].per_minute;
		}
	}
	if (star) {
		if (rule)
			*rule = star->glob;
		return star->per_minute;
	}
	return 0;
}

/* ---------------------------------------------------------------- lint */

/* 1 when glob matches a configured server tool or a memory tool. */
static int matches_known_tool(const struct gh_config *c, const char *glob)
{
	size_t i;

	for (i = 0; i < c->ntools; i++)
		if (gh_glob_match(glob, c->tools[i].name))
			return 1;
	for (i = 0; gh_memory_tool_names[i]; i++)
		if (gh_glob_match(glob, gh_memory_tool_names[i]))
			return 1;
	return 0;
}

static void lint_tool(const struct gh_config *c, const struct gh_policy_conf *p,
		      const char *where, const char *glob, int client_too, gh_policy_warn_fn fn,
		      void *ud)
{
	char msg[GH_POLICY_WARN_MAX];

	if (matches_known_tool(c, glob))
		return;
	snprintf(msg, sizeof(msg), "policy \"%s\": %s \"%s\" matches no server or memory "
		 "tool%s", p->name, where, glob,
		 client_too ? " (it may be meant for a client tool, which each request declares: "
			      "that cannot be checked here)" : "");
	fn(ud, msg);
}

void gh_policy_lint(const struct gh_config *c, const struct gh_policy_conf *p,
		    gh_policy_warn_fn fn, void *ud)
{
	char msg[GH_POLICY_WARN_MAX], ids[160];
	size_t i, j, len;

	if (!p)
		return;
	for (i = 0; i < p->agents.n; i++) {
		for (j = 0; j < c->nagents; j++)
			if (gh_glob_match(p->agents.v[i], c->agents[j].id))
				break;
		if (j < c->nagents)
			continue;
		ids[0] = '\0';
		for (j = 0, len = 0; j < c->nagents && len < sizeof(ids); j++)
			len += (size_t)snprintf(ids + len, sizeof(ids) - len, "%s%s", j ? ", " : "",
						c->agents[j].id);
		snprintf(msg, sizeof(msg), "policy \"%s\": agents \"%s\" matches no agent (the "
			 "agents are: %s)", p->name, p->agents.v[i], ids);
		fn(ud, msg);
	}
	for (i = 0; i < p->tools_allow.n; i++)
		lint_tool(c, p, "tools.allow", p->tools_allow.v[i], 0, fn, ud);
	for (i = 0; i < p->tools_deny.n; i++)
		lint_tool(c, p, "tools.deny", p->tools_deny.v[i], 0, fn, ud);
	for (i = 0; i < p->approval_require.n; i++)
		lint_tool(c, p, "approval.require", p->approval_require.v[i], 1, fn, ud);
	for (i = 0; i < p->ntool_limits; i++)
		lint_tool(c, p, "rate_limits.tool_calls_per_minute", p->tool_limits[i].glob, 1, fn,
			  ud);
}

/* ------------------------------------------------- argument conditions */

int gh_policy_arg_rule_compile(struct gh_arg_rule *rule, char *why, size_t cap)
{
	regex_t *re;

	if (!rule->regex)
		return 0;
	if (!(re = calloc(1, sizeof(*re)))) {
		snprintf(why, cap, "out of memory");
		return -1;
	}
	if (gh_jsregex_compile(rule->regex, re, &rule->cost, why, cap) != 0) {
		free(re);
		return -1;
	}
	rule->re = re;
	return 0;
}

void gh_policy_arg_rule_free(struct gh_arg_rule *rule)
{
	if (rule->re) {
		regfree(rule->re);
		free(rule->re);
	}
	rule->re = NULL;
}

/* The value at an RFC 6901 pointer, or NULL. */
static const cJSON *pointer_get(const cJSON *doc, const char *ptr)
{
	const cJSON *cur = doc;
	char tok[256];

	if (!*ptr)
		return doc;
	if (*ptr != '/')
		return NULL;
	while (cur && *ptr == '/') {
		size_t n = 0;

		ptr++;
		while (*ptr && *ptr != '/') {
			char ch = *ptr++;

			if (ch == '~' && (*ptr == '0' || *ptr == '1'))
				ch = *ptr++ == '0' ? '~' : '/';
			if (n + 1 >= sizeof(tok))
				return NULL;
			tok[n++] = ch;
		}
		tok[n] = '\0';
		if (cJSON_IsObject(cur)) {
			cur = cJSON_GetObjectItemCaseSensitive(cur, tok);
		} else if (cJSON_IsArray(cur)) {
			char *end;
			long i = strtol(tok, &end, 10);

			if (!n || *end || i < 0 || (n > 1 && tok[0] == '0'))
				return NULL;
			cur = cJSON_GetArrayItem(cur, (int)i);
		} else {
			return NULL;
		}
	}
	return cur;
}

/* An absolute path with "." and ".." segments resolved and repeated
 * slashes folded, so "/workspace/../etc" is judged as "/etc". */
static void path_clean(const char *in, char *out, size_t cap)
{
	size_t o = 0, seg;
	const char *p = in;

	while (*p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		for (seg = 0; p[seg] && p[seg] != '/'; seg++)
			;
		if (seg == 2 && p[0] == '.' && p[1] == '.') {
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;
		} else if (!(seg == 1 && p[0] == '.') && o + 1 + seg < cap) {
			out[o++] = '/';
			memcpy(out + o, p, seg);
			o += seg;
		}
		p += seg;
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
}

/* '*' and '?' within one path segment, '**' across segments. */
static int path_glob(const char *p, const char *s)
{
	for (; *p; p++, s++) {
		if (p[0] == '*' && p[1] == '*') {
			p += 2;
			for (;; s++) {
				if (path_glob(p, s))
					return 1;
				if (!*s)
					return 0;
			}
		}
		if (*p == '*') {
			for (p++;; s++) {
				if (path_glob(p, s))
					return 1;
				if (!*s || *s == '/')
					return 0;
			}
		}
		if (!*s || (*p == '?' ? *s == '/' : *p != *s))
			return 0;
	}
	return !*s;
}

/* 1 when the value matches the rule's pattern, 0 when not, -1 when it is
 * too long to check within bounds. */
static int value_matches(const struct gh_arg_rule *rule, const char *v)
{
	size_t n = strlen(v);

	if (rule->re) {
		if (n > ARG_VALUE_MAX ||
		    (rule->cost > 0 && (long)n > GH_SCHEMA_MAX_PATTERN_WORK / rule->cost))
			return -1;
		return regexec(rule->re, v, 0, NULL, 0) == 0;
	}
	if (rule->glob) {
		char clean[4096];

		if (v[0] == '/') {
			if (n >= sizeof(clean))
				return -1;
			path_clean(v, clean, sizeof(clean));
			v = clean;
		}
		return path_glob(rule->glob, v);
	}
	return 0;
}

/* 1 when v is what the audit log stores in place of a redacted value, or
 * holds one at any depth. */
static int holds_redacted(const cJSON *v, int depth)
{
	const cJSON *c;

	if (cJSON_IsString(v))
		return !strcmp(v->valuestring, GH_POLICY_REDACTED);
	if (depth > 64)
		return 1; /* deeper than redaction looks: cannot say it holds none */
	cJSON_ArrayForEach(c, v)
		if (holds_redacted(c, depth + 1))
			return 1;
	return 0;
}

/* 1 when the value rule reads lies under, is or holds a redacted value
 * (each step of the pointer checked: a redacted object hides its members). */
static int reads_redacted(const cJSON *args, const char *ptr)
{
	char prefix[1024];
	size_t i, n = strlen(ptr);
	const cJSON *v;

	for (i = 1; i <= n && i < sizeof(prefix); i++) {
		if (i < n && ptr[i] != '/')
			continue;
		memcpy(prefix, ptr, i);
		prefix[i] = '\0';
		v = pointer_get(args, prefix);
		if (!v)
			return 0;
		if (cJSON_IsString(v) && !strcmp(v->valuestring, GH_POLICY_REDACTED))
			return 1;
	}
	v = pointer_get(args, ptr);
	return v && holds_redacted(v, 0);
}

/* Whether rule applies to args: 1 or 0, or -1 when recorded is set and the
 * answer depends on a value the audit log does not hold. */
static int rule_applies(const struct gh_arg_rule *rule, const cJSON *args, int recorded)
{
	const cJSON *v;
	char *text = NULL;
	int m;

	if (recorded && reads_redacted(args, rule->pointer))
		return -1;
	v = pointer_get(args, rule->pointer);
	if (!v)
		m = 0;
	else if (cJSON_IsString(v))
		m = value_matches(rule, v->valuestring);
	else if (!(text = gh_json_dump(v)))
		m = -1;
	else
		m = value_matches(rule, text);
	free(text);
	if (m < 0)
		return 1;
	return rule->negate ? !m : m;
}

static void arg_rule_name(const struct gh_policy_conf *p, const struct gh_arg_rule *rule,
			  const char *tool, struct gh_decision *d, enum gh_verdict v)
{
	char name[96];

	if (rule->name)
		snprintf(name, sizeof(name), "arguments \"%.60s\"", rule->name);
	else
		snprintf(name, sizeof(name), "arguments[%zu]", rule->index);
	set(d, v, "policy \"%s\": %s (%s %s %s %s \"%.80s\")", p->name, name, tool,
	    rule->pointer[0] ? rule->pointer : "(the arguments)",
	    rule->negate ? "does not match" : "matches", rule->regex ? "regex" : "glob",
	    rule->regex ? rule->regex : rule->glob);
}

/* The argument conditions, as the gate applies them: deny > approval >
 * allow, the first matching deny or approval rule naming the decision.
 * With recorded (arguments as the audit log stores them), a rule whose
 * answer is unknown (-1) makes the decision unknown when it could change
 * it: a deny rule before any deny that applies, or an approval rule of an
 * allowed call before the first approval rule that applies. Returns 0 when
 * d is the decision, 1 when it is unknown (*unknown names the rule). args
 * NULL with recorded: every rule is unknown (arguments stored truncated). */
static int args_eval(const struct gh_policy_conf *p, const char *tool_name, const cJSON *args,
		     int recorded, struct gh_decision *d, const struct gh_arg_rule **unknown)
{
	const struct gh_arg_rule *approval = NULL, *open = NULL;
	size_t i;
	int m;

	if (!p || (!args && !recorded) || !tool_name || d->verdict == GH_V_DENY)
		return 0;
	for (i = 0; i < p->narg_rules; i++) {
		const struct gh_arg_rule *rule = &p->arg_rules[i];

		if (!gh_glob_match(rule->tool, tool_name))
			continue;
		m = args ? rule_applies(rule, args, recorded) : -1;
		if (m == 0)
			continue;
		if (rule->effect == GH_ARG_DENY) {
			if (m < 0) {
				*unknown = rule;
				return 1;
			}
			arg_rule_name(p, rule, tool_name, d, GH_V_DENY);
			return 0;
		}
		if (approval || open)
			continue;
		if (m < 0)
			open = rule; /* matters unless a deny applies */
		else
			approval = rule;
	}
	if (open && d->verdict == GH_V_ALLOW) {
		*unknown = open;
		return 1;
	}
	if (approval && d->verdict == GH_V_ALLOW) {
		d->approver = p->approver;
		d->ttl_s = p->approval_ttl_s;
		arg_rule_name(p, approval, tool_name, d, GH_V_APPROVAL);
	}
	return 0;
}

void gh_policy_args(const struct gh_policy_conf *p, const char *tool_name, const cJSON *args,
		    struct gh_decision *d)
{
	const struct gh_arg_rule *unknown = NULL;

	args_eval(p, tool_name, args, 0, d, &unknown);
}

int gh_policy_args_recorded(const struct gh_policy_conf *p, const char *tool_name,
			    const cJSON *args, struct gh_decision *d,
			    const struct gh_arg_rule **unknown)
{
	*unknown = NULL;
	return args_eval(p, tool_name, args, 1, d, unknown);
}
