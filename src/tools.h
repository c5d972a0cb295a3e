/*
 * tools.h - the tool set of one run: built-in memory tools, the agent's
 * configured server tools and the client's own tools, merged under one
 * namespace.
 *
 * Names are normalised the way Mastra does (characters outside
 * [a-zA-Z0-9_-] become '_', the first character is a letter or '_', at
 * most 63 characters); two tools that resolve to one name are a 400 naming
 * both, never silent shadowing. Client tool schemas are checked before use.
 *
 * Federated tools of upstream MCP servers (mcp.h) are server tools too: a
 * tool set holds a reference to each one it has, so the run keeps the
 * definition it was offered whatever the upstream does meanwhile. Their
 * annotations set approval defaults the policy can override
 * (gh_policy_tool_annotations); a held or refused definition is a deny
 * naming why.
 *
 * A toolset belongs to one run on one thread.
 */
#ifndef GH_TOOLS_H
#define GH_TOOLS_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "err.h"
#include "policy.h"
#include "provider.h"

#define GH_TOOL_NAME_MAX 64

struct gh_mcp;
struct gh_mcp_tool;

struct gh_tool {
	char name[GH_TOOL_NAME_MAX + 1];  /* normalised (at most 63 characters), or a
					   * federated tool's name (at most 64) */
	char *orig_name;                  /* as declared (client tools) */
	enum gh_tool_source src;
	const char *description;          /* borrowed from config or the client defs */
	const cJSON *schema;              /* borrowed */
	const struct gh_tool_conf *conf;  /* server tools */
	int require_approval;             /* the tool's own flag */
	struct gh_mcp_tool *mcp;          /* a federated MCP tool (referenced), or NULL */
	const cJSON *annotations;         /* borrowed: MCP-style hints or NULL */
	const cJSON *output_schema;       /* borrowed: what its results must match, or NULL
					   * (config, a client's declaration, the built-in
					   * memory tools, a federated tool's outputSchema) */
	int offered;                      /* sent to the model (policy allows it) */
	struct gh_decision decision;      /* the allowlist verdict for offered */
};

struct gh_toolset {
	struct gh_tool *v;
	size_t n;
	struct gh_tool_spec *specs;       /* the offered tools, for providers */
	size_t nspecs;
};

/* Normalises a tool name into out (GH_TOOL_NAME_MAX bytes). */
void gh_tool_normalize(const char *in, char out[GH_TOOL_NAME_MAX]);

/* Turns what a client sent into gatehouse's client tool definitions: an
 * array of {name, origName, description, parameters, requireApproval,
 * outputSchema?}.
 *  - Mastra clientTools: object name -> {id?, description, inputSchema |
 *    parameters, outputSchema?, requireApproval?, needsApproval?} (a surface
 *    whose clients declare output schemas otherwise, such as TanStack AI's
 *    outputSchema, passes its tools in this shape)
 *  - OpenAI tools: array of {type:"function", function:{name, description,
 *    parameters}}
 * Checks every schema; GH_E_BADREQ naming the tool and field. *out owned by
 * the caller; NULL input gives an empty array. where names the field in
 * messages ("clientTools", "tools"). */
enum gh_code gh_tools_client_defs(const cJSON *mastra, const cJSON *openai, const char *where,
				  cJSON **out, struct gh_err *e);

/* For surfaces whose clients always declare their whole tool set (coding
 * agents): marks the client tool definitions policy p does not let the
 * key declare as withheld ("withheld": true, in place), with a call of
 * removed(ud, original name, rule) each. gh_toolset_build then keeps them
 * out of what the model is offered instead of refusing the request, so the
 * agent keeps working with the tools it may use, and a call the model
 * makes to one anyway is denied naming the rule. */
void gh_tools_client_defs_withhold(const struct gh_policy_conf *p, cJSON *client_defs,
				   void (*removed)(void *ud, const char *name, const char *rule),
				   void *ud);

/* Builds the run's tool set. client_defs (from gh_tools_client_defs, may be
 * NULL) is borrowed and must outlive the set. mcp (may be NULL) gives the
 * federated tools the agent lists. Client tools the policy does not allow
 * are a GH_E_FORBIDDEN naming the rule, unless withheld (above). Collisions
 * are GH_E_BADREQ. */
enum gh_code gh_toolset_build(const struct gh_config *cfg, struct gh_mcp *mcp,
			      const struct gh_agent_conf *a, const struct gh_policy_conf *p,
			      const cJSON *client_defs, struct gh_toolset *out, struct gh_err *e);

const struct gh_tool *gh_toolset_find(const struct gh_toolset *ts, const char *name);

/* What gatehouse decides about one tool for a key: where the tool comes
 * from, whether the agent has it at all, the policy's verdict naming the
 * rule, and the rate limit on its calls. */
struct gh_tool_verdict {
	enum gh_tool_source src;
	int listed;                 /* the agent has it (its tools list; memory enabled) */
	struct gh_decision d;       /* a deny saying why when not listed */
	int64_t per_minute;         /* tool calls per minute; 0: no limit */
	const char *limit_rule;     /* the rate limit entry, borrowed from the config */
	const char *annotation;     /* a federated tool's annotation that decided
				     * ("readOnlyHint true"), static; NULL: a rule did */
};

/* The one decision over a (normalised) tool name for policy p and agent a
 * (NULL: judged for no particular agent). mt is the federated MCP tool of
 * that name (NULL: none): the policy decides it, then a held or refused
 * definition (a deny naming why), then the approval default its
 * annotations set (gh_policy_tool_annotations). client_defs are the
 * caller's client tools (NULL: a name that is no memory, server or
 * federated tool is judged as a client tool the caller would declare).
 * gh_toolset_build decides every tool of a run with it (so the gate acts
 * on it), and GET /api/policy/explain answers with it. */
void gh_tools_decide(const struct gh_config *cfg, const struct gh_mcp_tool *mt,
		     const struct gh_agent_conf *a, const struct gh_policy_conf *p,
		     const char *name, const cJSON *client_defs, struct gh_tool_verdict *out);

/* The decision the gate acts on for a call to name: the tool set's own
 * when it has the tool, else a deny "unknown tool". */
void gh_toolset_decision(const struct gh_toolset *ts, const char *name, struct gh_decision *out);

void gh_toolset_free(struct gh_toolset *ts);

/* MCP-style annotations of a server or memory tool {readOnlyHint,
 * destructiveHint, idempotentHint, openWorldHint}: what the built-in
 * memory tools do; for HTTP tools their configured annotations over the
 * defaults for a tool that reaches outside gatehouse and may change
 * anything (destructive, open world). Caller frees; NULL out of memory. */
cJSON *gh_tool_annotations(const struct gh_tool *t);

/* The built-in memory tools: names and schemas, for listing. */
const cJSON *gh_tools_memory_schema(const char *name);
/* What a memory tool's result looks like (its output schema). */
const cJSON *gh_tools_memory_output_schema(const char *name);

/* Holds a tool's result to the tool's output schema (NULL: any result
 * conforms), with the same validator and bounds as arguments. 0 when it
 * conforms. A text result that the schema refuses but that is the JSON of
 * an object or array it accepts (surfaces whose tool results are text)
 * conforms too: *structured then gets that JSON (caller frees), else NULL;
 * when that JSON does not conform either, msg says what is wrong with it. -1 when it does not
 * conform, with "the result does not match the output schema: $.path:
 * expectation" in msg (cap bytes; GH_SCHEMA_MSG_MAX + 64 never cuts the
 * validator's message). Both are borrowed. */
int gh_tools_output_check(const cJSON *schema, const cJSON *result, cJSON **structured,
			  char *msg, size_t cap);
extern const char *const gh_memory_tool_names[];

/* Running tools. Both return GH_OK with *result set (owned by the caller)
 * whenever the tool ran or failed in a way the model should hear about;
 * *is_error then says which. Other codes mean gatehouse itself failed. */
struct gh_store;
struct gh_store_tx;
/* With tx (a transaction from gh_store_tx_run) the tools that write do it
 * inside it; reads (memory_search) always go through s. */
enum gh_code gh_tool_memory_exec(struct gh_store *s, struct gh_store_tx *tx, const char *owner,
				 const char *resource, const char *name, const cJSON *args,
				 cJSON **result, int *is_error, struct gh_err *e);
/* 1 for the memory tools that change something (their effect can commit
 * with their audit row). */
int gh_tool_memory_writes(const char *name);
/* POSTs args as JSON to the tool's configured URL (never another), with its
 * headers, timeout and response cap; redirects are not followed. The JSON
 * response is the result; a non-2xx status, a timeout or a non-JSON body is
 * a tool error whose message names the status. The result goes to the
 * model and the client, so an error names what failed but not the tool's
 * address; detail (optional, cap bytes; "" when none) gets the whole error
 * for the audit log. */
enum gh_code gh_tool_http_exec(const struct gh_tool_conf *t, const cJSON *args,
			       int (*tick)(void *ud), void *ud, cJSON **result, int *is_error,
			       char *detail, size_t detail_cap, struct gh_err *e);

#endif
