/*
 * policy.h - what a key may do: which agents, which tools, which client
 * tools, which calls need a person's approval and who may give it.
 *
 * Globs on names; deny wins; anything unmatched is denied (fail closed). A
 * key without a policy uses the policy named "default"; without one, it may
 * use nothing. Every decision names the rule that made it, so refusals and
 * GET /api/policy/explain can say why. Pure functions over the immutable
 * config; thread-safe.
 */
#ifndef GH_POLICY_H
#define GH_POLICY_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "store.h"

/* Who is calling: an API key and what it resolves to. */
struct gh_principal {
	struct gh_key key;                    /* id "" for admin sessions */
	const struct gh_policy_conf *policy;  /* NULL: no policy applies */
	int admin;                            /* role admin (key or session) */
	char admin_user[GH_NAME_MAX + 1];     /* set for admin sessions */
	char actor[GH_NAME_MAX + 16];         /* "key:<id>" or "admin:<user>", for audit */
};

enum gh_tool_source { GH_SRC_MEMORY, GH_SRC_SERVER, GH_SRC_CLIENT };
const char *gh_tool_source_name(enum gh_tool_source s);

enum gh_verdict { GH_V_ALLOW, GH_V_DENY, GH_V_APPROVAL };

struct gh_decision {
	enum gh_verdict verdict;
	char rule[256];          /* 'policy "default": tools.deny "memory_delete"' */
	enum gh_approver approver;
	int64_t ttl_s;
};

/* The policy a key runs under: its own, or "default", or NULL. */
const struct gh_policy_conf *gh_policy_for_key(const struct gh_config *c, const struct gh_key *k);

/* May the principal use agent_id? */
void gh_policy_agent(const struct gh_policy_conf *p, const char *agent_id, struct gh_decision *d);

/* 1 when gh_policy_agent allows agent_id. */
int gh_policy_agent_allowed(const struct gh_policy_conf *p, const char *agent_id);

/* May the principal declare a client tool named name? */
void gh_policy_client_tool(const struct gh_policy_conf *p, const char *name,
			   struct gh_decision *d);

/* The gate for one tool call the model emitted (before rate limits):
 * allowlist, then approval. tool_requires_approval is the tool's own flag
 * (server tool config, or the client tool's requireApproval). */
void gh_policy_tool(const struct gh_policy_conf *p, const struct gh_agent_conf *a,
		    const char *tool_name, enum gh_tool_source src, int tool_requires_approval,
		    struct gh_decision *d);

/* A federated MCP tool's annotations as an approval default, applied to
 * the decision gh_policy_tool made for it: when that allows the tool
 * without any approval rule, a destructive tool (destructive: its
 * destructiveHint is true, or absent, which MCP reads as true) needs
 * approval unless the policy's approval.exempt matches it; a read-only or
 * non-destructive one runs without. An explicit rule (approval.require,
 * the agent's require_approval) and a deny always win. d->rule then says
 * which rule or annotation decided; hint is the annotation in words
 * ("readOnlyHint true"). Returns 1 when the annotation decided, 0 when a
 * rule did (a deny, an approval rule, approval.exempt). */
int gh_policy_tool_annotations(const struct gh_policy_conf *p, const char *tool_name,
			       int destructive, const char *hint, struct gh_decision *d);
/* Argument conditions ("arguments" rules): compiles rule's pattern at
 * start-up (the config fails closed on a pattern that cannot be used: -1
 * with why). gh_policy_arg_rule_free releases what compiling took. */
int gh_policy_arg_rule_compile(struct gh_arg_rule *rule, char *why, size_t cap);
void gh_policy_arg_rule_free(struct gh_arg_rule *rule);

/* Applies p's argument conditions for a call of tool_name with args to the
 * decision d the gate (and explain) already has for the tool: deny >
 * approval > allow. A matching deny rule makes d a deny, a matching
 * approval rule turns an allow into an approval, each naming the rule
 * ('policy "p": arguments "no-sudo" (Bash /command matches regex ...)').
 * A value the pointer does not find counts as not matching; a value too
 * long to check within bounds counts as matching a non-negated rule and as
 * not matching a negated one (fail closed either way). args NULL: no
 * change. */
void gh_policy_args(const struct gh_policy_conf *p, const char *tool_name, const cJSON *args,
		    struct gh_decision *d);

/* What the audit log stores in place of a redacted argument value
 * (gh_audit_redact). */
#define GH_POLICY_REDACTED "[REDACTED]"

/* gh_policy_args over a call's arguments as the audit log recorded them,
 * for replaying the call against another config (policy_test.h): the same
 * rules in the same order, except that a rule whose pointer reads a
 * redacted value (GH_POLICY_REDACTED at the value, above it or inside it)
 * cannot be answered. args NULL: the arguments were stored truncated, so
 * no rule on this tool can be answered. Returns 0 with d as the gate
 * decides it, or 1 when the decision (its verdict or the rule naming it)
 * depends on an unanswerable rule, *unknown naming the first such rule (d
 * is then meaningless). Rules that cannot change d (d a deny already, an
 * approval rule after one that applies) never make it unknown. */
int gh_policy_args_recorded(const struct gh_policy_conf *p, const char *tool_name,
			    const cJSON *args, struct gh_decision *d,
			    const struct gh_arg_rule **unknown);

/* Tool calls per minute for (policy, tool): an exact entry wins over globs,
 * "*" last; 0 = no limit. rule gets the entry's name. */
int64_t gh_policy_tool_limit(const struct gh_policy_conf *p, const char *tool_name,
			     const char **rule);

/* Rules of p that can match nothing this config knows, one message each
 * ('policy "p": agents "asistant" matches no agent (the agents are: ...)'):
 * agents globs that match no configured agent; tools.allow, tools.deny,
 * approval.require and rate_limits.tool_calls_per_minute globs that match
 * no configured server tool and no memory tool. The last two also apply
 * to client tools, which each request declares: their messages say that
 * this cannot be checked. client_tools globs are not checked at all. A
 * NULL p has no warnings. msg is borrowed for the call. */
#define GH_POLICY_WARN_MAX 512
typedef void (*gh_policy_warn_fn)(void *ud, const char *msg);
void gh_policy_lint(const struct gh_config *c, const struct gh_policy_conf *p,
		    gh_policy_warn_fn fn, void *ud);

#endif
