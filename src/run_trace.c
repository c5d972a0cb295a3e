/*
 * run_trace.c - the run engine's spans; see run_trace.h.
 */
#include "run_trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "json.h"
#include "util.h"

static const char *provider_name(const struct gh_agent_conf *a)
{
	const struct gh_provider_conf *p = a->prov;

	return !p ? NULL : p->type == GH_PROVIDER_ANTHROPIC ? "anthropic"
		: p->type == GH_PROVIDER_OPENAI ? "openai" : "gatehouse.mock";
}

static void set_error(struct gh_span *sp, enum gh_code rc, const char *type, const char *msg)
{
	gh_otel_set_str(sp, "error.type", type ? type : gh_code_name(rc));
	gh_otel_set_error(sp, msg);
}

struct gh_span *gh_run_trace_begin(const struct gh_agent_conf *agent,
				   const struct gh_principal *who, const char *run_id,
				   const char *surface, int resumed, const cJSON *state)
{
	struct gh_trace_ctx in, stored;
	const struct gh_trace_ctx *parent = NULL, *link = NULL;
	struct gh_span *sp;
	char name[GH_NAME_MAX + 16];

	if (!gh_otel_enabled())
		return NULL;
	gh_traceparent_parse(state ? gh_json_str(state, "trace") : NULL, NULL, &stored);
	if (gh_otel_incoming(&in) == 0) {
		parent = &in;
		link = stored.valid ? &stored : NULL;
	} else if (stored.valid) {
		parent = &stored;
	}
	snprintf(name, sizeof(name), "invoke_agent %s", agent->id);
	if (!(sp = gh_otel_span_begin(name, GH_SPAN_INTERNAL, parent, link)))
		return NULL;
	gh_otel_set_str(sp, "gen_ai.operation.name", "invoke_agent");
	gh_otel_set_str(sp, "gen_ai.agent.id", agent->id);
	gh_otel_set_str(sp, "gen_ai.agent.name", agent->name ? agent->name : agent->id);
	gh_otel_set_str(sp, "gen_ai.provider.name", provider_name(agent));
	if (agent->model && *agent->model)
		gh_otel_set_str(sp, "gen_ai.request.model", agent->model);
	if (run_id && *run_id)
		gh_otel_set_str(sp, "gatehouse.run.id", run_id);
	if (who && who->key.id[0])
		gh_otel_set_str(sp, "gatehouse.key.id", who->key.id);
	gh_otel_set_str(sp, "gatehouse.surface", surface);
	if (resumed)
		gh_otel_set_bool(sp, "gatehouse.run.resumed", 1);
	return sp;
}

void gh_run_trace_remember(const struct gh_span *run, cJSON *state)
{
	struct gh_trace_ctx c;
	char tp[GH_TRACEPARENT_LEN + 1];

	if (!run || !state || cJSON_GetObjectItemCaseSensitive(state, "trace"))
		return;
	gh_otel_span_ctx(run, &c);
	gh_traceparent_format(&c, tp, sizeof(tp));
	cJSON_AddStringToObject(state, "trace", tp);
}

void gh_run_trace_end(struct gh_span *run, const char *run_id, const char *thread_id,
		      const struct gh_run_usage *used, enum gh_code rc, const struct gh_err *e)
{
	if (!run)
		return;
	if (run_id && *run_id)
		gh_otel_set_str(run, "gatehouse.run.id", run_id);
	if (thread_id && *thread_id)
		gh_otel_set_str(run, "gen_ai.conversation.id", thread_id);
	gh_otel_set_int(run, "gen_ai.usage.input_tokens", used->input_tokens);
	gh_otel_set_int(run, "gen_ai.usage.output_tokens", used->output_tokens);
	if (rc != GH_OK)
		set_error(run, rc, NULL, e ? e->msg : gh_code_name(rc));
	gh_otel_activate(NULL);
	gh_otel_span_end(run);
}

struct gh_span *gh_run_trace_chat(const struct gh_span *run, const struct gh_agent_conf *agent,
				  const char *model, const char *thread_id)
{
	struct gh_trace_ctx parent;
	struct gh_span *sp;
	char name[160];

	if (!run)
		return NULL;
	gh_otel_span_ctx(run, &parent);
	snprintf(name, sizeof(name), "chat %s", model ? model : "");
	if (!(sp = gh_otel_span_begin(name, GH_SPAN_CLIENT, &parent, NULL)))
		return NULL;
	gh_otel_set_str(sp, "gen_ai.operation.name", "chat");
	gh_otel_set_str(sp, "gen_ai.provider.name", provider_name(agent));
	gh_otel_set_str(sp, "gen_ai.request.model", model);
	gh_otel_set_str(sp, "gatehouse.provider", agent->provider);
	if (thread_id && *thread_id)
		gh_otel_set_str(sp, "gen_ai.conversation.id", thread_id);
	gh_otel_activate(sp);
	return sp;
}

void gh_run_trace_chat_end(struct gh_span *sp, enum gh_code rc, const struct gh_err *e,
			   const struct gh_chat_response *resp)
{
	if (!sp)
		return;
	gh_otel_activate(NULL);
	if (rc == GH_OK) {
		gh_otel_set_int(sp, "gen_ai.usage.input_tokens", resp->input_tokens);
		gh_otel_set_int(sp, "gen_ai.usage.output_tokens", resp->output_tokens);
		gh_otel_set_int(sp, "gatehouse.tool_calls", (int64_t)resp->ncalls);
	} else {
		set_error(sp, rc, NULL, e->msg);
	}
	gh_otel_span_end(sp);
}

/* A call's arguments or result as the audit log would store them
 * (redacted, cut), when the operator asked for content on spans. */
static void content(struct gh_span *sp, const char *key, const cJSON *v,
		    const struct gh_strlist *redact)
{
	char *j;

	if (!sp || !v || !gh_otel_capture_content())
		return;
	j = gh_audit_args_json(v, redact, GH_OTEL_VALUE_MAX);
	gh_otel_set_str(sp, key, j);
	free(j);
}

struct gh_span *gh_run_trace_tool(const struct gh_span *run, const cJSON *c, const char *run_id,
				  const char *thread_id, const struct gh_principal *who,
				  const struct gh_strlist *redact)
{
	struct gh_trace_ctx parent;
	const char *tool = gh_json_str(c, "toolName");
	struct gh_span *sp;
	char name[160];

	if (!run)
		return NULL;
	gh_otel_span_ctx(run, &parent);
	snprintf(name, sizeof(name), "execute_tool %s", tool ? tool : "");
	if (!(sp = gh_otel_span_begin(name, GH_SPAN_INTERNAL, &parent, NULL)))
		return NULL;
	gh_otel_set_str(sp, "gen_ai.operation.name", "execute_tool");
	gh_otel_set_str(sp, "gen_ai.tool.name", tool);
	gh_otel_set_str(sp, "gen_ai.tool.call.id", gh_json_str(c, "toolCallId"));
	if (thread_id && *thread_id)
		gh_otel_set_str(sp, "gen_ai.conversation.id", thread_id);
	gh_otel_set_str(sp, "gatehouse.run.id", run_id);
	if (who && who->key.id[0])
		gh_otel_set_str(sp, "gatehouse.key.id", who->key.id);
	content(sp, "gen_ai.tool.call.arguments", cJSON_GetObjectItemCaseSensitive(c, "args"),
		redact);
	return sp;
}

void gh_run_trace_decision(struct gh_span *sp, const char *event, int64_t seq)
{
	if (!sp)
		return;
	gh_otel_set_str(sp, "gatehouse.decision", event);
	if (seq > 0)
		gh_otel_set_int(sp, "gatehouse.audit.seq", seq);
}

void gh_run_trace_asked(struct gh_span *sp, const char *id, const char *approver)
{
	if (!sp)
		return;
	gh_run_trace_decision(sp, "approval_requested", 0);
	gh_otel_set_str(sp, "gatehouse.approval.id", id);
	gh_otel_event(sp, "gatehouse.approval.requested", "gatehouse.approver", approver, NULL, 0);
}

void gh_run_trace_ran(struct gh_span *sp, int is_error, int64_t dur_ms)
{
	gh_otel_set_str(sp, "gatehouse.tool.outcome", is_error ? "failed" : "executed");
	gh_otel_set_int(sp, "gatehouse.tool.duration_ms", dur_ms);
}

void gh_run_trace_settled(struct gh_span *sp, const struct gh_approval *a)
{
	int64_t waited = (a->decided_at ? a->decided_at : gh_now_ms()) - a->created_at;

	if (!sp)
		return;
	if (waited < 0)
		waited = 0;
	gh_run_trace_decision(sp, !strcmp(a->status, "approved") ? "approved"
				  : !strcmp(a->status, "denied") ? "denied_by_reviewer"
				  : a->status, 0);
	gh_otel_set_str(sp, "gatehouse.approval.id", a->id);
	gh_otel_set_str(sp, "gatehouse.policy.rule", a->rule);
	gh_otel_set_int(sp, "gatehouse.approval.wait_ms", waited);
	gh_otel_event(sp, "gatehouse.approval.decided", "gatehouse.approval.status", a->status,
		      "gatehouse.approval.wait_ms", waited);
}

void gh_run_trace_tool_end(struct gh_span *sp, const cJSON *c, enum gh_code rc,
			   const char *error, const struct gh_strlist *redact)
{
	const char *src = gh_json_str(c, "source");

	if (!sp)
		return;
	gh_otel_activate(NULL);
	if (src) {
		gh_otel_set_str(sp, "gatehouse.tool.source", src);
		gh_otel_set_str(sp, "gen_ai.tool.type", !strcmp(src, "client") ? "function"
							: !strcmp(src, "memory") ? "datastore"
							: "extension");
	}
	gh_otel_set_str(sp, "gatehouse.mcp.server", gh_json_str(c, "mcpServer"));
	if (rc != GH_OK)
		set_error(sp, rc, NULL, error);
	else if (error)
		set_error(sp, rc, "tool_error", error);
	content(sp, "gen_ai.tool.call.result", cJSON_GetObjectItemCaseSensitive(c, "result"),
		redact);
	gh_otel_span_end(sp);
}
