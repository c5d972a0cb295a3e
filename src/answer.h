/*
 * answer.h - answering a tool call that waits on a person: approve or
 * decline it (by whom, with what reason) and, when asked, wait for the
 * run's continuation. Every surface that lets someone answer a call uses
 * this one entry point: POST /api/approvals/:id/approve|deny, Mastra's
 * approve-tool-call / decline-tool-call, and the surfaces to come (MCP
 * elicitation, AG-UI resume).
 *
 * A decision is recorded with its audit row (approvals.h). Then:
 *  - GH_ANSWER_BACKGROUND: the background resumer carries it out; the call
 *    returns at once with the decided approval.
 *  - GH_ANSWER_CONTINUE: when who may decide (an admin, or the caller of
 *    an approval whose approver is "caller"), the run continues on the
 *    calling thread, its events going to the sink, and out->result holds
 *    the continuation's result. When someone else must decide (an admin),
 *    or already did, the call waits (bounded by wait_ms, woken by the hub)
 *    until the run has settled after the decision; out->view is the run
 *    as it settled, or as it stood when the wait ended.
 *
 * Thread-safe; runs on the calling thread.
 */
#ifndef GH_ANSWER_H
#define GH_ANSWER_H

#include "app.h"
#include "buf.h"
#include "err.h"
#include "policy.h"
#include "run.h"

enum gh_answer_mode { GH_ANSWER_BACKGROUND, GH_ANSWER_CONTINUE };

struct gh_tool_answer {
	const char *approval_id;      /* the approval, or */
	const char *tool_call_id;     /* the call it is bound to */
	const char *run_id;           /* optional: the call must belong to this run */
	int approve;                  /* 1 approve, 0 decline */
	const char *reason;           /* optional (at most 2000 characters); a decline's
				       * reason reaches the model */
	enum gh_answer_mode mode;
	int64_t wait_ms;              /* CONTINUE: how long to wait for someone else */
	int (*gone)(void *ud);        /* CONTINUE: asked while waiting; nonzero stops */
	void *ud;
};

struct gh_answer_out {
	struct gh_approval approval;  /* as decided, or as it stands after a wait */
	int decided_here;             /* this call recorded the decision */
	int continued;                /* result holds the continuation run here */
	struct gh_run_result result;
	int waited;                   /* view holds the run after a wait */
	enum gh_code wait_rc;         /* GH_OK settled, GH_E_TIMEOUT, GH_E_CANCELLED */
	struct gh_run_view view;
};

void gh_answer_out_clear(struct gh_answer_out *o);

/* Answers the call. Errors: GH_E_NOTFOUND (no such approval for who),
 * GH_E_CONFLICT (another run's call; a caller's approval already decided),
 * GH_E_FORBIDDEN (who may not decide it), GH_E_BADREQ (reason too long),
 * and, with CONTINUE, the continuation's own errors (out->decided_here then
 * says the decision stands). out is cleared first; clear it after. */
enum gh_code gh_answer_tool_call(struct gh_app *app, const struct gh_principal *who,
				 const struct gh_tool_answer *a, const struct gh_run_sink *sink,
				 struct gh_answer_out *out, struct gh_err *e);

/* The calls of v waiting on a decision that is still pending, in order:
 * start with *i = 0; NULL after the last. *caller (may be NULL) is 1 when
 * the caller may decide the call (approver "caller"), 0 when an admin must. */
const struct gh_run_call *gh_answer_next_waiting(const struct gh_run_view *v, size_t *i,
						 int *caller);

/* Text for a client that has no other way to show a pending approval:
 * "Waiting for approval apr_… (tool T needs an admin's approval). …" and
 * what to do, or, when none waits any more, where the run's answer will
 * be. ids (may be NULL) gets the ids, comma-separated. Caller frees; NULL
 * when out of memory. */
char *gh_answer_waiting_note(const struct gh_run_view *v, struct gh_buf *ids);

/* Waits (bounded by server.approval_wait_ms, woken by the hub) for the
 * decision on run_id's approvals to be carried out. GH_OK with *out the
 * run as it stands: completed, waiting for client tools, or still
 * suspended when the wait ended first; GH_E_UPSTREAM when it ended any
 * other way (the message says how); GH_E_CANCELLED when gone(ud) said the
 * client left. Clear *out after, whatever the result. */
enum gh_code gh_answer_await(struct gh_app *app, const char *owner, const char *run_id,
			     int (*gone)(void *ud), void *ud, struct gh_run_view *out,
			     struct gh_err *e);

/* The same check on a run a wait already returned (wait_rc as
 * gh_run_wait's): GH_OK, GH_E_UPSTREAM or GH_E_CANCELLED as above. */
enum gh_code gh_answer_settled(const struct gh_run_view *v, enum gh_code wait_rc,
			       struct gh_err *e);

#endif
