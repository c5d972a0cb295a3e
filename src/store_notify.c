/*
 * store_notify.c - notification deliveries (migration 0013); see store.h.
 * Written by the notifier's delivery thread, read by the admin API,
 * pruned by the maintenance thread (retention).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store_int.h"

#define NOTIFY_COLS "id, event_id, target, kind, event, approval_id, payload, state, " \
		    "attempts, coalesce(last_code, 0), last_error, " \
		    "coalesce(next_attempt_at, 0), created_at, updated_at, " \
		    "coalesce(delivered_at, 0)"

/* A time or code whose 0 is stored as NULL. The cast types the parameter
 * on PostgreSQL, which would take it for an integer from the 0 and refuse
 * a millisecond time as out of range. */
#define ZERO_IS_NULL "nullif(CAST(? AS bigint), 0)"

#define N(KIND, FIELD) STORE_COL(KIND, struct gh_notify_row, FIELD)
static const struct store_col notify_cols[] = {
	N(INT, id), N(TEXT, event_id), N(TEXT, target), N(TEXT, kind), N(TEXT, event),
	N(TEXT, approval_id), N(DUP, payload), N(TEXT, state), N(INT, attempts),
	N(INT, last_code), N(DUP, last_error), N(INT, next_attempt_at), N(INT, created_at),
	N(INT, updated_at), N(INT, delivered_at),
};
#undef N

void gh_notify_row_clear(struct gh_notify_row *r)
{
	store_cols_clear(notify_cols, GH_ARRAY_LEN(notify_cols), r, sizeof(*r));
}

static int notify_from(struct store_row *sr, struct gh_notify_row *r)
{
	memset(r, 0, sizeof(*r));
	store_cols_read(sr, notify_cols, GH_ARRAY_LEN(notify_cols), r);
	return 0;
}

STORE_EACH(notify, struct gh_notify_row, notify_from, gh_notify_row_clear, 1)

struct insert_arg {
	const struct gh_notify_row *r;
	int64_t id;
};

static enum gh_code insert_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	struct insert_arg *a = arg;
	const struct gh_notify_row *r = a->r;
	enum gh_code rc;

	(void)s;
	rc = store_insert(w, "INSERT INTO notification_deliveries (event_id, target, kind, event, "
			   "approval_id, payload, state, attempts, last_code, last_error, "
			   "next_attempt_at, created_at, updated_at, delivered_at) "
			   "VALUES (?,?,?,?,?,?,?,?," ZERO_IS_NULL ",?," ZERO_IS_NULL ",?,?,"
			   ZERO_IS_NULL ")",
			STORE_ARGS(STORE_TEXT(r->event_id), STORE_TEXT(r->target),
				   STORE_TEXT(r->kind), STORE_TEXT(r->event),
				   STORE_TEXT(r->approval_id), STORE_TEXT(r->payload),
				   STORE_TEXT(r->state), STORE_INT(r->attempts),
				   STORE_INT(r->last_code), STORE_TEXT(r->last_error),
				   STORE_INT(r->next_attempt_at), STORE_INT(r->created_at),
				   STORE_INT(r->updated_at), STORE_INT(r->delivered_at)),
			"recording a notification delivery", &a->id, e);
	return rc;
}

enum gh_code gh_store_notify_insert(struct gh_store *s, const struct gh_notify_row *r,
				    int64_t *id, struct gh_err *e)
{
	struct insert_arg a = {r, 0};
	enum gh_code rc = store_write(s, insert_job, &a, e);

	if (id)
		*id = rc == GH_OK ? a.id : 0;
	return rc;
}

static enum gh_code update_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	const struct gh_notify_row *r = arg;

	(void)s;
	return store_exec(w, "UPDATE notification_deliveries SET state = ?, kind = ?, "
			     "attempts = ?, last_code = " ZERO_IS_NULL ", last_error = ?, "
			     "next_attempt_at = " ZERO_IS_NULL ", updated_at = ?, "
			     "delivered_at = " ZERO_IS_NULL " WHERE id = ?",
			  STORE_ARGS(STORE_TEXT(r->state), STORE_TEXT(r->kind),
				     STORE_INT(r->attempts),
				     STORE_INT(r->last_code), STORE_TEXT(r->last_error),
				     STORE_INT(r->next_attempt_at), STORE_INT(r->updated_at),
				     STORE_INT(r->delivered_at), STORE_INT(r->id)),
			  "updating a notification delivery", NULL, e);
}

enum gh_code gh_store_notify_update(struct gh_store *s, const struct gh_notify_row *r,
				    struct gh_err *e)
{
	return store_write(s, update_job, (void *)(uintptr_t)r, e);
}

struct overflow_arg {
	int64_t after_id;
	const char *error;
};

static enum gh_code overflow_job(struct gh_store *s, struct store_conn *w, void *arg,
				 struct gh_err *e)
{
	struct overflow_arg *a = arg;
	int64_t now = gh_now_ms();

	(void)s;
	return store_exec(w, "UPDATE notification_deliveries SET state = 'failed', "
			     "last_error = ?, next_attempt_at = NULL, updated_at = ? "
			     "WHERE state = 'pending' AND id > ?",
			  STORE_ARGS(STORE_TEXT(a->error), STORE_INT(now), STORE_INT(a->after_id)),
			  "failing notification deliveries", NULL, e);
}

struct pending_arg {
	int (*fn)(void *ud, const struct gh_notify_row *r);
	void *ud;
	int64_t last_id;
};

static int pending_cb(void *ud, const struct gh_notify_row *r)
{
	struct pending_arg *a = ud;

	a->last_id = r->id;
	return a->fn(a->ud, r);
}

enum gh_code gh_store_notify_pending(struct gh_store *s, int limit, const char *overflow,
				     int (*fn)(void *ud, const struct gh_notify_row *r), void *ud,
				     struct gh_err *e)
{
	struct pending_arg pa = {fn, ud, 0};
	struct notify_each x = {pending_cb, &pa};
	struct overflow_arg oa;
	enum gh_code rc;
	int n = 0;

	rc = store_read(s, "SELECT " NOTIFY_COLS " FROM notification_deliveries "
			   "WHERE state = 'pending' ORDER BY id LIMIT ?",
			STORE_ARGS(STORE_INT(limit)), 0, notify_each_row, &x, &n,
			"reading pending notification deliveries", e);
	if (rc != GH_OK || n < limit)
		return rc;
	oa.after_id = pa.last_id;
	oa.error = overflow;
	return store_write(s, overflow_job, &oa, e);
}

enum gh_code gh_store_notify_list(struct gh_store *s, const char *approval_id, int limit,
				  int (*fn)(void *ud, const struct gh_notify_row *r), void *ud,
				  struct gh_err *e)
{
	struct notify_each x = {fn, ud};

	if (!approval_id)
		return store_read(s, "SELECT " NOTIFY_COLS " FROM notification_deliveries "
				     "ORDER BY id DESC LIMIT ?",
				  STORE_ARGS(STORE_INT(limit)), 0, notify_each_row, &x, NULL,
				  "listing notification deliveries", e);
	return store_read(s, "SELECT " NOTIFY_COLS " FROM notification_deliveries "
			     "WHERE approval_id = ? ORDER BY id DESC LIMIT ?",
			  STORE_ARGS(STORE_TEXT(approval_id), STORE_INT(limit)), 0,
			  notify_each_row, &x, NULL, "listing notification deliveries", e);
}

/* At most this many rows go in one write: a first prune of a large table
 * does not hold the writer (and every other write) for long. */
#define PRUNE_BATCH 5000

struct prune_arg {
	int64_t cutoff_ms;
	int deleted;
};

static enum gh_code prune_job(struct gh_store *s, struct store_conn *w, void *arg,
			      struct gh_err *e)
{
	struct prune_arg *a = arg;

	(void)s;
	return store_exec(w, "DELETE FROM notification_deliveries WHERE id IN (SELECT id FROM "
			     "notification_deliveries WHERE state IN ('delivered', 'failed') AND "
			     "updated_at < ? LIMIT ?)",
			  STORE_ARGS(STORE_INT(a->cutoff_ms), STORE_INT(PRUNE_BATCH)),
			  "pruning notification deliveries", &a->deleted, e);
}

enum gh_code gh_store_notify_prune(struct gh_store *s, int64_t cutoff_ms, int64_t *deleted,
				   struct gh_err *e)
{
	struct prune_arg a;
	enum gh_code rc;
	int64_t total = 0;

	do {
		a.cutoff_ms = cutoff_ms;
		a.deleted = 0;
		if ((rc = store_write(s, prune_job, &a, e)) != GH_OK)
			break;
		total += a.deleted;
	} while (a.deleted == PRUNE_BATCH);
	if (deleted)
		*deleted = total;
	if (total)
		gh_info("notifications: retention pruned %lld deliveries", (long long)total);
	return rc;
}
