/*
 * metrics.h - the process's counters and histograms, and their Prometheus
 * text exposition (format 0.0.4) for GET /metrics (http_metrics.c).
 *
 * Modules record what happened with one call at the place it happened
 * (gh_metrics_request at the end of a request, gh_metrics_upstream at the
 * end of a model call, ...). Recording takes no lock: every value is a C11
 * atomic (relaxed) in a fixed array. Label values that are names (agents,
 * providers, tools) live in fixed-capacity tables: a name's first sighting
 * takes the table's mutex once to add it; every later lookup is lock-free.
 * A table that is full counts further names under its overflow value
 * ("_other"), so no input can grow memory or the exposition without bound.
 * No ids and no free text ever become label values.
 *
 * One set of metrics per process, zero until recorded; safe from any
 * thread. Rendering reads the atomics without stopping writers: a scrape
 * sees each value as of some moment during the scrape.
 */
#ifndef GH_METRICS_H
#define GH_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* The surface a request was routed to (bounded: the route tables). */
enum gh_metrics_surface {
	GH_MS_NONE,        /* no route matched (404/405) or refused before routing */
	GH_MS_NATIVE,      /* /api/agents, /api/memory, /api/runs */
	GH_MS_OPENAI,
	GH_MS_RESPONSES,
	GH_MS_ANTHROPIC,
	GH_MS_AGUI,
	GH_MS_A2A,
	GH_MS_MCP,
	GH_MS_ADMIN,       /* admin API and UI, approvals, policy, audit, login */
	GH_MS_HEALTH,
	GH_MS_METRICS,
	GH_MS_COUNT
};

/* A tool call's gate decision, and a reviewer's or the clock's later one. */
enum gh_metrics_decision {
	GH_MD_ALLOWED,
	GH_MD_DENIED,
	GH_MD_RATE_LIMITED,
	GH_MD_APPROVAL_REQUESTED,
	GH_MD_APPROVED,
	GH_MD_DENIED_BY_REVIEWER,
	GH_MD_EXPIRED,
	GH_MD_COUNT
};

/* How a model call ended. */
enum gh_metrics_outcome {
	GH_MO_OK,
	GH_MO_ERROR,       /* unreachable, non-2xx, malformed */
	GH_MO_TIMEOUT,
	GH_MO_RATE_LIMITED,
	GH_MO_CANCELLED,   /* the client went away */
	GH_MO_COUNT
};

/* How a tool that gatehouse ran (server, MCP, memory) ended. */
enum gh_metrics_exec {
	GH_ME_OK,
	GH_ME_ERROR,       /* the tool answered with an error result */
	GH_ME_FAILED,      /* gatehouse could not run it (or was cancelled) */
	GH_ME_COUNT
};

/* ---- recording (lock-free after a name's first sighting) ---- */

/* Names the agent of the request running on this thread (the run engine
 * calls it; a thread-local index, reset by gh_metrics_request). agent NULL
 * or "": none. */
void gh_metrics_set_agent(const char *agent);

/* One finished HTTP request: its surface, status and duration; the agent
 * is the one gh_metrics_set_agent named on this thread since the last call
 * (none: ""). */
void gh_metrics_request(enum gh_metrics_surface surface, int status, int64_t dur_ns);

/* One model call to the provider entry named provider (its type "openai",
 * "anthropic", "mock"), its duration, the time to its first streamed
 * token (ttft_ns < 0: none, e.g. not streamed) and tokens used (< 0: not
 * reported). */
void gh_metrics_upstream(const char *provider, const char *type, enum gh_metrics_outcome o,
			 int64_t dur_ns, int64_t ttft_ns, int64_t tokens_in, int64_t tokens_out);

/* A tool call's decision. source: "server", "client", "mcp", "memory"
 * (NULL or other: "server"). A decision recorded from a stored approval
 * (which says "server" for an MCP tool) is counted with the tool's MCP
 * series when the gate counted the tool as MCP. tool NULL: "_unknown" (a
 * name the model made up is free text). */
void gh_metrics_tool(const char *tool, const char *source, enum gh_metrics_decision d);

/* One execution of a tool gatehouse ran, and how long it took. */
void gh_metrics_tool_exec(const char *tool, const char *source, enum gh_metrics_exec x,
			  int64_t dur_ns);

/* An approval decided (approved 1: approved, 0: denied by its reviewer)
 * or expired (expired 1), wait_ms after it was requested. */
void gh_metrics_approval_decided(int approved, int expired, int64_t wait_ms);

/* One group commit of the store: jobs in the transaction, audit rows it
 * appended, and its duration (BEGIN to COMMIT). */
void gh_metrics_audit_commit(int64_t jobs, int64_t audit_rows, int64_t dur_ns);

/* The newest signed checkpoint's time (Unix ms). */
void gh_metrics_audit_checkpoint(int64_t ts_ms);

/* The last chain verification (start-up check or full verify): ok 1 when
 * intact, at ts_ms. */
void gh_metrics_audit_verified(int ok, int64_t ts_ms);

/* ---- exposition ---- */

/* What only the scraper can read (gathered at scrape time, off the
 * request path). */
struct gh_metrics_gauges {
	int64_t active_streams;
	int64_t max_streams;
	int64_t approvals_pending;   /* < 0: unknown (the query failed) */
	int64_t now_ms;              /* for the checkpoint's age */
};

/* Writes every metric into b (text format 0.0.4). Returns GH_BUF_OK or the
 * buffer's error. Families with no sample yet are still declared (HELP
 * and TYPE lines). */
int gh_metrics_render(struct gh_buf *b, const struct gh_metrics_gauges *g);

/* Writers for families gathered elsewhere (an MCP server's state, an
 * exporter's counters): a family's HELP and TYPE lines once, then its
 * samples. labels is n pairs {name, value}; values are escaped here
 * (backslash, double quote, newline). */
struct gh_metrics_label {
	const char *name;
	const char *value;
};
int gh_metrics_family(struct gh_buf *b, const char *name, const char *type, const char *help);
int gh_metrics_sample(struct gh_buf *b, const char *name, const struct gh_metrics_label *l,
		      size_t n, double value);

/* Writes s escaped as a label value (format 0.0.4). */
int gh_metrics_escape(struct gh_buf *b, const char *s);

/* Zeroes every value and forgets every name (unit tests only: never while
 * other threads record). */
void gh_metrics_reset(void);

/* The name tables' capacities, overflow included. */
#define GH_METRICS_AGENTS 64
#define GH_METRICS_PROVIDERS 32
#define GH_METRICS_TOOLS 256

#endif
