/*
 * run_trace.h - the run engine's spans (otel.h): each request's part of a
 * run is an invoke_agent span, each model call a chat span under it, each
 * gated or settled tool call an execute_tool span, with the GenAI
 * semantic-convention attributes and gatehouse's own (decision, rule,
 * audit row, approval). Only the engine (run.c) calls these.
 *
 * Every function takes a NULL span and does nothing: without an exporter
 * no span is made. Spans belong to the run's thread until they end.
 */
#ifndef GH_RUN_TRACE_H
#define GH_RUN_TRACE_H

#include <cjson/cJSON.h>

#include "otel.h"
#include "run.h"
#include "store.h"

/* The run's span for this request: a child of the request's traceparent;
 * else, for a run that began in an earlier request, of that request's span
 * (state's "trace"); with both, the stored one becomes a link. NULL when
 * nothing is traced. state may be NULL (a new run). */
struct gh_span *gh_run_trace_begin(const struct gh_agent_conf *agent,
				   const struct gh_principal *who, const char *run_id,
				   const char *surface, int resumed, const cJSON *state);
/* Keeps run's context in state as "trace" unless one is kept already. */
void gh_run_trace_remember(const struct gh_span *run, cJSON *state);
/* Ends the run's span (takes it): the run, thread, usage, and the error. */
void gh_run_trace_end(struct gh_span *run, const char *run_id, const char *thread_id,
		      const struct gh_run_usage *used, enum gh_code rc, const struct gh_err *e);

/* A model call's span, active (its context goes with the provider
 * request) until gh_run_trace_chat_end, which takes it. */
struct gh_span *gh_run_trace_chat(const struct gh_span *run, const struct gh_agent_conf *agent,
				  const char *model, const char *thread_id);
void gh_run_trace_chat_end(struct gh_span *sp, enum gh_code rc, const struct gh_err *e,
			   const struct gh_chat_response *resp);

/* A tool call's span, for call c (a run's stored call); with content
 * capture on, its arguments redacted with redact. */
struct gh_span *gh_run_trace_tool(const struct gh_span *run, const cJSON *c, const char *run_id,
				  const char *thread_id, const struct gh_principal *who,
				  const struct gh_strlist *redact);
/* The gate's decision (event, as its audit row says) and that row's seq
 * (0: none known). */
void gh_run_trace_decision(struct gh_span *sp, const char *event, int64_t seq);
/* The call now waits for approval id, from approver ("admin", "caller"). */
void gh_run_trace_asked(struct gh_span *sp, const char *id, const char *approver);
/* The tool ran: executed or failed, in dur_ms. */
void gh_run_trace_ran(struct gh_span *sp, int is_error, int64_t dur_ms);
/* A decided approval of the call in hand: decision, rule, wait. */
void gh_run_trace_settled(struct gh_span *sp, const struct gh_approval *a);
/* Ends a tool call's span (takes it): source, outcome, result (with
 * content capture), and error (the tool error the model saw, or what
 * failed: NULL when neither). */
void gh_run_trace_tool_end(struct gh_span *sp, const cJSON *c, enum gh_code rc,
			   const char *error, const struct gh_strlist *redact);

#endif
