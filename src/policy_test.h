/*
 * policy_test.h - "what would this config change?": the tool decisions
 * the audit log recorded (key, agent, tool, stored arguments, time),
 * decided again under a candidate config with the gate's own functions
 * (gh_policy_for_key, gh_policy_agent, gh_tools_decide and the argument
 * conditions of gh_policy_args), and the calls whose outcome would change,
 * counted per rule. `gatehouse policy test` and POST
 * /api/admin/policy/test report it.
 *
 * What cannot be known is said, never guessed: a call whose decision reads
 * an argument the log stores redacted or truncated, a client tool's own
 * requireApproval flag the log did not record, a federated MCP tool whose
 * definition only a running server has. Rate limits depend on time and on
 * every other call, so they are not replayed: a recorded rate_limited call
 * changes only when the candidate would deny it outright.
 *
 * gh_ptest_decide is pure over the candidate config; gh_ptest_run reads
 * the store (read connections only) and may run on any thread.
 */
#ifndef GH_POLICY_TEST_H
#define GH_POLICY_TEST_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "err.h"
#include "store.h"

struct gh_mcp;

/* One recorded gate decision; every string borrowed (may be NULL). */
struct gh_ptest_call {
	int64_t seq, ts;
	const char *event;      /* allowed | denied | rate_limited | approval_requested */
	const char *key_id, *agent_id, *tool, *source;
	const char *reason;     /* the rule the gate named then */
	const char *args;       /* as stored: canonical JSON, redacted, maybe truncated */
	const char *detail;     /* the row's detail JSON */
};

/* 1 when row is a decision the gate made on a call (not a reviewer's
 * decision, nor the refusal of an approved call at its resumption). */
int gh_ptest_is_gate_row(const struct gh_audit_event *ev);

enum gh_ptest_kind {
	GH_PT_SAME,        /* the candidate decides as the gate did */
	GH_PT_CHANGED,     /* it decides otherwise (after, rule) */
	GH_PT_UNDECIDABLE, /* the log lacks what the decision reads (rule says what) */
	GH_PT_KEY_GONE,    /* the key was revoked or deleted since: not replayed */
};

struct gh_ptest_verdict {
	enum gh_ptest_kind kind;
	const char *before;     /* static: allowed | denied | approval | rate_limited */
	const char *after;      /* static, the same words; NULL when undecidable */
	int agent_gone;         /* the candidate has no such agent (after: denied) */
	char rule[320];         /* the candidate's deciding rule, or why undecidable */
};

/* Decides call again under cand for key k, the key of call->key_id (NULL
 * or revoked: GH_PT_KEY_GONE; a call without a key id, an admin
 * session's, runs under no policy).
 * mcp (may be NULL) has the federated tools published now. */
void gh_ptest_decide(const struct gh_config *cand, struct gh_mcp *mcp, const struct gh_key *k,
		     const struct gh_ptest_call *call, struct gh_ptest_verdict *out);

/* Listed calls are capped (the counts are not). */
#define GH_PTEST_LIST_MAX 500
/* Rows read at most; the report says when it stopped there. */
#define GH_PTEST_ROWS_MAX 2000000

/* The report for every gate decision recorded from since_ms (0: all) on:
 * {since, candidate, totals:{decisions, unchanged, changed, undecidable,
 * keyGone, rateLimitedNotReplayed}, transitions:{"allowed -> denied": n,
 * ...}, rules:[{rule, changed, transitions}], changes:[{seq, time, key,
 * agent, tool, before, after, rule, recordedRule}], undecidable:[{seq,
 * time, key, agent, tool, before, why}], undecidableRules:[{rule, calls}],
 * gone:{agents:[{agent, calls}], keys:[{key, calls}], policies:[{key,
 * policy}]}, changesListed, complete, notes:[...]}. candidate_name is what
 * the report calls the candidate. *out owned by the caller. */
enum gh_code gh_ptest_run(struct gh_store *s, const struct gh_config *cand, struct gh_mcp *mcp,
			  const char *candidate_name, int64_t since_ms, cJSON **out,
			  struct gh_err *e);

/* "7d", "12h", "30m", "90s" before now_ms, or an ISO-8601 UTC time or Unix
 * ms; 0 with *ms set, -1 when s is none of these. */
int gh_ptest_parse_since(const char *s, int64_t now_ms, int64_t *ms);

#endif
