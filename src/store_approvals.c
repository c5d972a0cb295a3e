/*
 * store_approvals.c - the approvals table and rate-limit snapshots.
 * Threading as in store.c.
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"

#define APPROVAL_COLS "id, key_id, owner, agent_id, coalesce(thread_id, ''), run_id, " \
		      "tool_call_id, tool_name, source, args, args_sha256, policy_version, " \
		      "approver, rule, status, created_at, expires_at, coalesce(decided_at, 0), " \
		      "coalesce(decided_by, ''), reason, coalesce(executed_at, 0), " \
		      "coalesce(policy_name, ''), coalesce(exec_outcome, ''), exec_error, " \
		      "coalesce(exec_finished_at, 0), coalesce(exec_audit_seq, 0), " \
		      "coalesce(edited_args_sha256, ''), edited_args, edited_args_exact"

#define A(KIND, FIELD) STORE_COL(KIND, struct gh_approval, FIELD)
/* APPROVAL_COLS, in order; the last two (edited_args, edited_exact) are
 * read only for an approval with edited arguments. */
static const struct store_col approval_cols[] = {
	A(TEXT, id), A(TEXT, key_id), A(TEXT, owner), A(TEXT, agent_id), A(TEXT, thread_id),
	A(TEXT, run_id), A(TEXT, tool_call_id), A(TEXT, tool_name), A(TEXT, source),
	A(JSON, args), A(TEXT, args_sha256), A(TEXT, policy_version), A(TEXT, approver),
	A(DUP, rule), A(TEXT, status), A(INT, created_at), A(INT, expires_at),
	A(INT, decided_at), A(TEXT, decided_by), A(DUP, reason), A(INT, executed_at),
	A(TEXT, policy_name), A(TEXT, exec_outcome), A(DUP, exec_error),
	A(INT, exec_finished_at), A(INT, exec_audit_seq), A(TEXT, edited_sha256),
	A(JSON, edited_args), A(JSON, edited_exact),
};
#undef A
#define APPROVAL_UNEDITED_COLS (GH_ARRAY_LEN(approval_cols) - 2)

void gh_approval_clear(struct gh_approval *a)
{
	store_cols_clear(approval_cols, GH_ARRAY_LEN(approval_cols), a, sizeof(*a));
}

static int approval_from(struct store_row *sr, struct gh_approval *a)
{
	memset(a, 0, sizeof(*a));
	store_cols_read(sr, approval_cols, APPROVAL_UNEDITED_COLS, a);
	if (a->edited_sha256[0]) {
		a->edited_args = store_col_json(sr, APPROVAL_UNEDITED_COLS);
		a->edited_exact = store_col_json(sr, APPROVAL_UNEDITED_COLS + 1);
	}
	if (!a->args || !a->rule ||
	    (a->edited_sha256[0] && (!a->edited_args || !a->edited_exact))) {
		gh_approval_clear(a);
		return -1;
	}
	return 0;
}

struct insert_arg {
	const struct gh_approval *a;
	const char *args_json;
	const struct gh_audit_event *ev;
};

static enum gh_code insert_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	struct insert_arg *ia = arg;
	const struct gh_approval *a = ia->a;
	enum gh_code rc;

	rc = store_exec(w, "INSERT INTO approvals (id, key_id, owner, agent_id, thread_id, run_id, "
			   "tool_call_id, tool_name, source, args, args_sha256, policy_name, "
			   "policy_version, approver, rule, status, created_at, expires_at) "
			   "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,'pending',?,?)",
			STORE_ARGS(STORE_TEXT(a->id), STORE_TEXT(a->key_id), STORE_TEXT(a->owner),
				   STORE_TEXT(a->agent_id),
				   STORE_TEXT(a->thread_id[0] ? a->thread_id : NULL),
				   STORE_TEXT(a->run_id), STORE_TEXT(a->tool_call_id),
				   STORE_TEXT(a->tool_name), STORE_TEXT(a->source),
				   STORE_TEXT(ia->args_json), STORE_TEXT(a->args_sha256),
				   STORE_TEXT(a->policy_name[0] ? a->policy_name : NULL),
				   STORE_TEXT(a->policy_version), STORE_TEXT(a->approver),
				   STORE_TEXT(a->rule), STORE_INT(a->created_at),
				   STORE_INT(a->expires_at)),
			"recording an approval", NULL, e);
	if (rc != GH_OK)
		return rc;
	return store_audit_append_in(s, w, ia->ev, NULL, e);
}

enum gh_code gh_store_approval_insert(struct gh_store *s, const struct gh_approval *a,
				      const char *args_json, const struct gh_audit_event *ev,
				      struct gh_err *e)
{
	struct insert_arg ia = {a, args_json, ev};

	return store_write(s, insert_job, &ia, e);
}

static int approval_row(struct store_row *sr, void *ud)
{
	return approval_from(sr, ud) != 0 ? -1 : 0;
}

enum gh_code gh_store_approval_get(struct gh_store *s, const char *owner, const char *id,
				   int by_call, struct gh_approval *out, struct gh_err *e)
{
	return store_get(s, by_call
			 ? "SELECT " APPROVAL_COLS " FROM approvals WHERE tool_call_id = ?1 "
			   "AND (CAST(?2 AS text) IS NULL OR owner = ?2)"
			 : "SELECT " APPROVAL_COLS " FROM approvals WHERE id = ?1 "
			   "AND (CAST(?2 AS text) IS NULL OR owner = ?2)",
			 STORE_ARGS(STORE_TEXT(id), STORE_TEXT(owner)), approval_row, out,
			 sizeof(*out), "reading an approval", e, "no approval %s", id);
}

/* a damaged row is left out of a list */
STORE_EACH(approval, struct gh_approval, approval_from, gh_approval_clear, 1)

enum gh_code gh_store_approval_list(struct gh_store *s, const char *status, const char *owner,
				    int limit, int (*fn)(void *ud, const struct gh_approval *a),
				    void *ud, struct gh_err *e)
{
	struct approval_each x = {fn, ud};
	int oldest_first = status && !strcmp(status, "pending");

	return store_read(s, oldest_first
			  ? "SELECT " APPROVAL_COLS " FROM approvals WHERE status = ?1 "
			    "AND (CAST(?2 AS text) IS NULL OR owner = ?2) ORDER BY created_at, id LIMIT ?3"
			  : "SELECT " APPROVAL_COLS " FROM approvals WHERE (CAST(?1 AS text) IS NULL OR "
			    "status = ?1) AND (CAST(?2 AS text) IS NULL OR owner = ?2) "
			    "ORDER BY created_at DESC, id DESC LIMIT ?3",
			  STORE_ARGS(STORE_TEXT(status), STORE_TEXT(owner), STORE_INT(limit)), 0,
			  approval_each_row, &x, NULL, "listing approvals", e);
}

struct decide_arg {
	const char *id, *status, *decided_by, *reason;
	const struct gh_approval_edit *edit;
	const struct gh_audit_event *ev;
	int64_t now;
};

/* An approval's decision so far, as decide_job reads it. */
struct decided {
	char status[32];
	char by[256];
	int64_t expires_at;
};

static int decided_row(struct store_row *sr, void *ud)
{
	struct decided *d = ud;

	store_col_copy(sr, 0, d->status, sizeof(d->status));
	store_col_copy(sr, 1, d->by, sizeof(d->by));
	d->expires_at = store_col_int(sr, 2);
	return 0;
}

/* Reads approval a->id into d: GH_OK when it is pending and not yet
 * expired, else the error a reviewer sees (not found, decided, expired). */
static enum gh_code decide_check(struct store_conn *w, const struct decide_arg *a,
				 struct decided *d, struct gh_err *e)
{
	int found = 0;
	enum gh_code rc;

	memset(d, 0, sizeof(*d));
	rc = store_rows(w, "SELECT status, coalesce(decided_by, ''), expires_at "
			   "FROM approvals WHERE id = ?",
			STORE_ARGS(STORE_TEXT(a->id)), 1, decided_row, d, &found,
			"deciding an approval", e);
	if (rc != GH_OK)
		return rc;
	if (!found)
		return gh_err_set(e, GH_E_NOTFOUND, "no approval %s", a->id);
	if (strcmp(d->status, "pending"))
		return !strcmp(d->status, "expired")
			? gh_err_set(e, GH_E_CONFLICT, "approval %s already expired", a->id)
			: gh_err_set(e, GH_E_CONFLICT, "approval %s was already %s by %s", a->id,
				     d->status, d->by);
	if (d->expires_at <= a->now)
		return gh_err_set(e, GH_E_CONFLICT, "approval %s already expired", a->id);
	return GH_OK;
}

static enum gh_code decide_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	struct decide_arg *a = arg;
	struct decided d;
	int changed = 0;
	enum gh_code rc;

	if ((rc = decide_check(w, a, &d, e)) != GH_OK)
		return rc;
	rc = store_exec(w, "UPDATE approvals SET status = ?, decided_at = ?, decided_by = ?, "
			   "reason = ?, edited_args = ?, edited_args_exact = ?, "
			   "edited_args_sha256 = ? WHERE id = ? AND status = 'pending'",
			STORE_ARGS(STORE_TEXT(a->status), STORE_INT(a->now),
				   STORE_TEXT(a->decided_by), STORE_TEXT(a->reason),
				   STORE_TEXT(a->edit ? a->edit->redacted : NULL),
				   STORE_TEXT(a->edit ? a->edit->exact : NULL),
				   STORE_TEXT(a->edit ? a->edit->sha256 : NULL), STORE_TEXT(a->id)),
			"deciding an approval", &changed, e);
	if (rc != GH_OK)
		return rc;
	/* PostgreSQL: two replicas read "pending" at once; the second
	 * update waits for the first and then changes nothing. It reads
	 * the decision again to say who made it. */
	if (!changed)
		return decide_check(w, a, &d, e) == GH_OK
			? gh_err_set(e, GH_E_CONFLICT, "approval %s was already decided", a->id)
			: e->code;
	return store_audit_append_in(s, w, a->ev, NULL, e);
}

enum gh_code gh_store_approval_decide(struct gh_store *s, const char *id, const char *status,
				      const char *decided_by, const char *reason,
				      const struct gh_approval_edit *edit,
				      const struct gh_audit_event *ev, struct gh_err *e)
{
	struct decide_arg a = {id, status, decided_by, reason, edit, ev, gh_now_ms()};

	return store_write(s, decide_job, &a, e);
}

struct claim_arg {
	const char *id;
	const struct gh_audit_event *call;
	int64_t call_id;
};

static enum gh_code claim_job(struct gh_store *s, struct store_conn *w, void *arg,
			      struct gh_err *e)
{
	struct claim_arg *a = arg;
	int changed = 0;
	enum gh_code rc = store_exec(w, "UPDATE approvals SET executed_at = ? WHERE id = ? "
					"AND status = 'approved' AND executed_at IS NULL",
				     STORE_ARGS(STORE_INT(gh_now_ms()), STORE_TEXT(a->id)),
				     "claiming an approved execution", &changed, e);

	if (rc != GH_OK)
		return rc;
	if (changed == 0)
		return gh_err_set(e, GH_E_CONFLICT, "approval %s was already executed", a->id);
	/* from here the call is open: a crash before its end is recorded
	 * leaves it to be closed as interrupted */
	if (a->call)
		return store_audit_call_register(s, w, a->call, a->id, &a->call_id, e);
	return GH_OK;
}

enum gh_code gh_store_approval_claim_exec(struct gh_store *s, const char *id,
					  const struct gh_audit_event *call, int64_t *call_id,
					  struct gh_err *e)
{
	struct claim_arg a = {id, call, 0};
	enum gh_code rc = store_write(s, claim_job, &a, e);

	if (call_id)
		*call_id = rc == GH_OK ? a.call_id : 0;
	return rc;
}

struct finish_arg {
	const char *id, *outcome, *error;
	const struct gh_audit_event *ev;
};

static enum gh_code finish_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	struct finish_arg *a = arg;
	int64_t seq = 0;
	enum gh_code rc = store_audit_append_in(s, w, a->ev, &seq, e);

	if (rc != GH_OK)
		return rc;
	return store_exec(w, "UPDATE approvals SET exec_outcome = ?, exec_error = ?, "
			     "exec_finished_at = ?, exec_audit_seq = ? WHERE id = ? "
			     "AND exec_outcome IS NULL",
			  STORE_ARGS(STORE_TEXT(a->outcome), STORE_TEXT(a->error),
				     STORE_INT(gh_now_ms()), STORE_INT(seq), STORE_TEXT(a->id)),
			  "recording an approved call's outcome", NULL, e);
}

enum gh_code gh_store_approval_finish_exec(struct gh_store *s, const char *id,
					   const char *outcome, const char *error,
					   const struct gh_audit_event *ev, struct gh_err *e)
{
	struct finish_arg a = {id, outcome, error, ev};

	return store_write(s, finish_job, &a, e);
}

enum gh_code gh_store_approval_finish_exec_tx(struct gh_store_tx *tx, const char *id,
					      const char *outcome, const char *error,
					      const struct gh_audit_event *ev, struct gh_err *e)
{
	struct finish_arg a = {id, outcome, error, ev};

	return finish_job(tx->s, tx->w, &a, e);
}

struct expire_arg {
	int64_t now;
	struct gh_approval *rows;
	size_t n, cap;
};

/* Takes the row into a->rows while there is room; a damaged row is left
 * pending. */
static int expire_row(struct store_row *sr, void *ud)
{
	struct expire_arg *a = ud;

	if (a->n >= a->cap)
		return 1;
	if (approval_from(sr, &a->rows[a->n]) == 0)
		a->n++;
	return 0;
}

static enum gh_code expire_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	struct expire_arg *a = arg;
	enum gh_code rc;
	size_t i;

	rc = store_rows(w, "SELECT " APPROVAL_COLS " FROM approvals WHERE "
			   "status = 'pending' AND expires_at <= ? ORDER BY expires_at LIMIT 256",
			STORE_ARGS(STORE_INT(a->now)), 0, expire_row, a, NULL,
			"finding expired approvals", e);
	if (rc != GH_OK)
		return rc;
	for (i = 0; i < a->n; i++) {
		struct gh_approval *ap = &a->rows[i];
		struct gh_audit_event ev;
		char detail[128], *args = gh_json_dump(ap->args);

		if (!args)
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
		rc = store_exec(w, "UPDATE approvals SET status = 'expired', decided_at = ?, "
				   "decided_by = 'system', reason = 'expired' WHERE id = ? "
				   "AND status = 'pending'",
				STORE_ARGS(STORE_INT(a->now), STORE_TEXT(ap->id)),
				"expiring an approval", NULL, e);
		if (rc != GH_OK) {
			free(args);
			return rc;
		}
		snprintf(detail, sizeof(detail), "{\"approval_id\":\"%s\"}", ap->id);
		memset(&ev, 0, sizeof(ev));
		ev.event = "expired";
		ev.key_id = ap->key_id;
		ev.owner = ap->owner;
		ev.agent_id = ap->agent_id;
		ev.thread_id = ap->thread_id[0] ? ap->thread_id : NULL;
		ev.run_id = ap->run_id;
		ev.tool_call_id = ap->tool_call_id;
		ev.tool_name = ap->tool_name;
		ev.source = ap->source;
		ev.args = args;
		ev.outcome = "expired";
		ev.duration_ms = -1;
		ev.reason = "approval expired: treated as denied";
		ev.detail = detail;
		rc = store_audit_append_in(s, w, &ev, NULL, e);
		free(args);
		if (rc != GH_OK)
			return rc;
		gh_strlcpy(ap->status, "expired", sizeof(ap->status));
	}
	return GH_OK;
}

enum gh_code gh_store_approvals_expire(struct gh_store *s, int64_t now_ms,
				       void (*fn)(void *ud, const struct gh_approval *a), void *ud,
				       int *n, struct gh_err *e)
{
	struct expire_arg a = {now_ms, NULL, 0, 256};
	int64_t one = 0;
	enum gh_code rc;
	size_t i;
	int due = 0;

	/* called every second: a read first, so an idle gateway writes nothing */
	if (n)
		*n = 0;
	rc = store_read(s, "SELECT 1 FROM approvals WHERE status = 'pending' AND expires_at <= ? "
			   "LIMIT 1",
			STORE_ARGS(STORE_INT(now_ms)), 1, store_row_int, &one, &due,
			"finding expired approvals", e);
	if (rc != GH_OK || !due)
		return rc;
	a.rows = calloc(a.cap, sizeof(*a.rows));
	if (!a.rows)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	rc = store_write(s, expire_job, &a, e);
	if (n)
		*n = rc == GH_OK ? (int)a.n : 0;
	for (i = 0; i < a.n; i++) {
		if (rc == GH_OK && fn)
			fn(ud, &a.rows[i]);
		gh_approval_clear(&a.rows[i]);
	}
	free(a.rows);
	return rc;
}

/* ---------------------------------------------------- rate-limit state */

struct rl_arg {
	const char *const *keys;
	const int64_t *tats;
	size_t n;
};

static enum gh_code rl_save_job(struct gh_store *s, struct store_conn *w, void *arg,
				struct gh_err *e)
{
	struct rl_arg *a = arg;
	enum gh_code rc;
	size_t i;

	(void)s;
	rc = store_exec(w, "DELETE FROM rate_limit_state WHERE tat_ms < ?",
			STORE_ARGS(STORE_INT(gh_now_ms())), "pruning rate-limit state", NULL, e);
	for (i = 0; rc == GH_OK && i < a->n; i++)
		rc = store_exec(w, "INSERT INTO rate_limit_state (key, tat_ms) VALUES (?1, ?2) "
				   "ON CONFLICT (key) DO UPDATE SET tat_ms = ?2",
				STORE_ARGS(STORE_TEXT(a->keys[i]), STORE_INT(a->tats[i])),
				"saving rate-limit state", NULL, e);
	return rc;
}

enum gh_code gh_store_ratelimit_save(struct gh_store *s, const char *const *keys,
				     const int64_t *tats, size_t n, struct gh_err *e)
{
	struct rl_arg a = {keys, tats, n};

	return store_write(s, rl_save_job, &a, e);
}

struct rl_each {
	int (*fn)(void *ud, const char *key, int64_t tat_ms);
	void *ud;
};

static int rl_row(struct store_row *sr, void *ud)
{
	struct rl_each *x = ud;

	return x->fn(x->ud, store_col_text(sr, 0), store_col_int(sr, 1)) ? 1 : 0;
}

enum gh_code gh_store_ratelimit_load(struct gh_store *s,
				     int (*fn)(void *ud, const char *key, int64_t tat_ms),
				     void *ud, struct gh_err *e)
{
	struct rl_each x = {fn, ud};

	return store_read(s, "SELECT key, tat_ms FROM rate_limit_state", NULL, 0, 0, rl_row, &x,
			  NULL, "loading rate-limit state", e);
}
