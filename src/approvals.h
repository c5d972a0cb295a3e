/*
 * approvals.h - human approval of sensitive tool calls.
 *
 * A call that needs approval is not executed. An approval is bound to {key,
 * agent, thread, run, tool call id, tool name, SHA-256 of the canonical
 * arguments, policy version, expiry} and decided once: approve, deny, or
 * expire (treated as denied). An approved server tool runs exactly once:
 * its execution is claimed in the database before it starts, so neither a
 * second approve nor a crash and restart can run it twice.
 *
 * Creating and deciding write the approval and its audit row in one
 * transaction. Thread-safe.
 */
#ifndef GH_APPROVALS_H
#define GH_APPROVALS_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "app.h"
#include "err.h"
#include "policy.h"
#include "util.h"

struct gh_approval_req {
	const struct gh_principal *who;
	const char *agent_id, *thread_id, *run_id;
	const char *tool_call_id, *tool_name;
	enum gh_tool_source source;
	const cJSON *args;                  /* the exact arguments (unredacted) */
	const struct gh_decision *decision; /* verdict GH_V_APPROVAL, its rule and approver */
	const char *surface;
};

/* Records a pending approval and its "approval_requested" audit row.
 * id gets the approval id, *expires_at its expiry (Unix ms). */
enum gh_code gh_approval_create(struct gh_app *app, const struct gh_approval_req *rq,
				 char id[GH_ID_MAX], int64_t *expires_at, struct gh_err *e);


/* JSON for the API: {id, runId, toolCallId, toolName, args, status, ...,
 * executedAt, execution}; times are ISO-8601 strings. */
cJSON *gh_approval_json(const struct gh_approval *a);

/* GH_E_NOTFOUND when absent, or when owner is non-NULL and differs. */
enum gh_code gh_approval_get(struct gh_app *app, const char *owner, const char *id,
			     struct gh_approval *out, struct gh_err *e);
enum gh_code gh_approval_by_call(struct gh_app *app, const char *owner,
				 const char *tool_call_id, struct gh_approval *out,
				 struct gh_err *e);

/* Lists approvals, oldest first for "pending", newest first otherwise.
 * status NULL = all, else pending, approved, denied or expired (another is
 * GH_E_BADREQ); owner NULL = every owner (admins). At most limit rows
 * with created_at/id after the cursor. *out: array of gh_approval_json. */
enum gh_code gh_approval_list(struct gh_app *app, const char *status, const char *owner,
			      int limit, cJSON **out, struct gh_err *e);

/* Decides approval id. Admins may decide any; a key may decide only an
 * approval of its own owner whose approver is "caller". GH_E_CONFLICT when
 * already decided (message names who and how), GH_E_FORBIDDEN when the
 * principal may not decide it. edited (may be NULL; borrowed): approve
 * with these arguments instead; the approval then binds to their digest
 * and its audit row keeps both digests and who edited (edited arguments
 * equal to the asked ones are no edit). The caller checks them first
 * (gh_answer_tool_call does), and sees to the run's continuation. out
 * (may be NULL) gets the decided row. */
enum gh_code gh_approval_decide(struct gh_app *app, const struct gh_principal *who,
				const char *id, int approve, const char *reason,
				const cJSON *edited, struct gh_approval *out, struct gh_err *e);

/* Claims the single execution of an approved call. GH_E_CONFLICT when it
 * was already claimed (then the tool must not run). call (may be NULL)
 * opens the call in the same transaction; see gh_store_approval_claim_exec. */
enum gh_code gh_approval_claim_execution(struct gh_app *app, const char *id,
					 const struct gh_audit_event *call, int64_t *call_id,
					 struct gh_err *e);

/* Appends the audit row ev that says how approved call id ended and
 * records the outcome on the approval ("ok", "error", or "not_run" when it
 * was not executed after all; error may be NULL), in one transaction, so
 * the approvals API reports what the audit log says. */
enum gh_code gh_approval_finish_execution(struct gh_app *app, const char *id,
					  const char *outcome, const char *error,
					  const struct gh_audit_event *ev, struct gh_err *e);

/* Expires pending approvals past their expiry (audit "expired" rows) and
 * hands each one's run to resume(ud, run_id) (may be NULL); *n gets how
 * many. */
enum gh_code gh_approvals_expire(struct gh_app *app, void (*resume)(void *ud, const char *run_id),
				 void *ud, int *n, struct gh_err *e);

/* SHA-256 hex of the canonical JSON of args (65 bytes). */
void gh_approval_args_hash(const cJSON *args, char out[65]);

#endif
