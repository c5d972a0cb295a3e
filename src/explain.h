/*
 * explain.h - "why": what a key's policy lets it do with an agent and a
 * tool, as GET /api/policy/explain answers. The tool's verdict comes from
 * gh_tools_decide, the function the gate itself acts on, so an explanation
 * cannot disagree with what happens to a call.
 *
 * Pure over the immutable config; safe from any thread.
 */
#ifndef GH_EXPLAIN_H
#define GH_EXPLAIN_H

#include <cjson/cJSON.h>

#include "config.h"
#include "policy.h"

/* {key:{id, name, owner, role}, policy, policyVersion, note?, warnings
 * (rules that can match nothing, gh_policy_lint), clientToolsNote?, rateLimits?,
 * agent?:{id, allowed, rule}, tool?:{name, source, mcp?:{server, tool, pin,
 * annotations?, approvalDefault}, note?, decision, rule, decidedBy ("rule"
 * or "annotation"), annotation?, approver?, approvalTtlSeconds?,
 * rateLimit?}}. mcp (may be NULL) has the federated tools; a and tool may
 * be NULL; tool is normalised first unless it names a federated tool.
 * Caller frees; NULL on OOM. */
struct gh_mcp;
cJSON *gh_explain_json(const struct gh_config *cfg, struct gh_mcp *mcp,
		       const struct gh_principal *p, const struct gh_agent_conf *a,
		       const char *tool);

/* The same for a call of tool with sample arguments args (may be NULL):
 * the policy's argument conditions (gh_policy_args, as the gate applies
 * them) join the decision, and tool.arguments echoes args. */
cJSON *gh_explain_call_json(const struct gh_config *cfg, struct gh_mcp *mcp,
			    const struct gh_principal *p, const struct gh_agent_conf *a,
			    const char *tool, const cJSON *args);

#endif
