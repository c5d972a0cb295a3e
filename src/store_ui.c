/*
 * store_ui.c - reads for the admin UI; see store_ui.h. Threads and
 * messages are read by store_threads.c's code in its admin view (the agent
 * API's code, without the owner check). Threading as in store.c: every
 * function borrows a reader connection for its duration.
 */
#include "store_ui.h"

#include <stdlib.h>
#include <string.h>

#include "audit_index.h"
#include "json.h"
#include "store_int.h"
#include "util.h"

enum gh_code gh_store_ui_threads(struct gh_store *s, const char *owner, const char *agent_id,
				 const char *resource_id, int page, int per_page, cJSON **out,
				 struct gh_err *e)
{
	*out = NULL;
	if (page < 0 || per_page < 1 || per_page > 100)
		return gh_err_set(e, GH_E_BADREQ, "page must be >= 0 and perPage 1..100");
	return store_thread_list(s, STORE_VIEW_ADMIN, owner, agent_id, resource_id, page,
				 per_page, out, e);
}

/* Appends the run of the row to the array ud. */
static int run_row(struct store_row *sr, void *ud)
{
	cJSON *r = cJSON_CreateObject();

	if (!r)
		return STORE_ROW_NOMEM;
	gh_json_add_str(r, "id", store_col_text(sr, 0));
	gh_json_add_str(r, "status", store_col_text(sr, 1));
	gh_json_add_str(r, "agentId", store_col_text(sr, 2));
	gh_json_add_str(r, "keyId", store_col_text(sr, 3));
	gh_json_add_time(r, "createdAt", store_col_int(sr, 4));
	gh_json_add_time(r, "updatedAt", store_col_int(sr, 5));
	cJSON_AddItemToArray(ud, r);
	return 0;
}

enum gh_code gh_store_ui_thread(struct gh_store *s, const char *owner, const char *id,
				cJSON **out, struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	cJSON *res = NULL, *runs;
	enum gh_code rc;

	*out = NULL;
	if ((rc = store_thread_read(c, STORE_VIEW_ADMIN, owner, id, &res, e)) != GH_OK)
		goto out;
	if (!(runs = cJSON_AddArrayToObject(res, "runs"))) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	rc = store_rows(c, "SELECT id, status, agent_id, key_id, created_at, updated_at "
			   "FROM runs WHERE thread_id = ? AND owner = ? "
			   "ORDER BY created_at DESC, id LIMIT 100",
			STORE_ARGS(STORE_TEXT(id), STORE_TEXT(gh_json_str(res, "owner"))), 0, run_row,
			runs, NULL, "listing a thread's runs", e);
	if (rc != GH_OK)
		goto out;
	*out = res;
	res = NULL;
out:
	cJSON_Delete(res);
	store_reader_put(s, c);
	return rc;
}

enum gh_code gh_store_ui_messages(struct gh_store *s, const char *owner, const char *thread_id,
				  int page, int per_page, int last, cJSON **out,
				  struct gh_err *e)
{
	*out = NULL;
	if (last < 0 || last > 100 || (last == 0 && (page < 0 || per_page < 1 ||
						       per_page > 100)))
		return gh_err_set(e, GH_E_BADREQ, "last must be 1..100, or page >= 0 and perPage "
				  "1..100");
	return store_messages_list(s, STORE_VIEW_ADMIN, owner, thread_id, page, per_page, last,
				   out, e);
}

/* Sets the row's count (column 1) of its event (column 0) in the object ud. */
static int event_count_row(struct store_row *sr, void *ud)
{
	const char *ev = store_col_text(sr, 0);

	if (ev)
		cJSON_AddNumberToObject(ud, ev, (double)store_col_int(sr, 1));
	return 0;
}

struct buckets {
	int64_t counts[168];
	int n;
};

/* Adds the row's count (column 1) to its bucket (column 0), if in range. */
static int bucket_row(struct store_row *sr, void *ud)
{
	struct buckets *b = ud;
	int64_t i = store_col_int(sr, 0);

	if (i >= 0 && i < b->n)
		b->counts[i] += store_col_int(sr, 1);
	return 0;
}

enum gh_code gh_store_ui_activity(struct gh_store *s, int64_t since_ms, int64_t bucket_ms,
				  int nbuckets, cJSON **out, struct gh_err *e)
{
	struct store_conn *c;
	cJSON *res = NULL, *by, *hourly;
	struct buckets b;
	int64_t first = 1, calls = 0;
	enum gh_code rc = GH_OK;
	int i;

	*out = NULL;
	if (nbuckets < 1 || nbuckets > (int)GH_ARRAY_LEN(b.counts) || bucket_ms < 1)
		return gh_err_set(e, GH_E_BADREQ, "activity: 1..168 buckets of at least 1 ms");
	memset(&b, 0, sizeof(b));
	b.n = nbuckets;
	c = store_reader(s);
	res = cJSON_CreateObject();
	if (!res || !(by = cJSON_AddObjectToObject(res, "byEvent"))) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	/* ts never decreases with seq: the window is the rows from first on,
	 * and the statements below read only those (one snapshot) */
	if (store_read_begin(c, e) != 0) {
		rc = GH_E_IO;
		goto out;
	}
	if ((rc = store_audit_seq_at(c, since_ms, &first, e)) != GH_OK)
		goto out;
	if ((rc = store_rows(c, "SELECT event, count(*) FROM audit_events WHERE seq >= ? "
				"GROUP BY event ORDER BY event",
			     STORE_ARGS(STORE_INT(first)), 0, event_count_row, by, NULL,
			     "counting audit events", e)) != GH_OK)
		goto out;
	if ((rc = store_rows(c, "SELECT count(DISTINCT tool_call_id) FROM audit_events "
				"WHERE seq >= ? AND tool_call_id IS NOT NULL",
			     STORE_ARGS(STORE_INT(first)), 1, store_row_int, &calls, NULL,
			     "counting tool calls", e)) != GH_OK)
		goto out;
	cJSON_AddNumberToObject(res, "toolCalls", (double)calls);
	if ((rc = store_rows(c, "SELECT (ts - ?1) / ?2, count(DISTINCT tool_call_id) "
				"FROM audit_events WHERE seq >= ?3 AND tool_call_id IS NOT NULL "
				"GROUP BY 1",
			     STORE_ARGS(STORE_INT(since_ms), STORE_INT(bucket_ms), STORE_INT(first)),
			     0, bucket_row, &b, NULL, "counting tool calls per hour", e)) != GH_OK)
		goto out;
	if (!(hourly = cJSON_AddArrayToObject(res, "buckets"))) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < nbuckets; i++)
		cJSON_AddItemToArray(hourly, cJSON_CreateNumber((double)b.counts[i]));
	*out = res;
	res = NULL;
out:
	cJSON_Delete(res);
	store_read_end(c);
	store_reader_put(s, c);
	return rc;
}

enum gh_code gh_store_ui_pending_count(struct gh_store *s, int64_t *n, struct gh_err *e)
{
	*n = 0;
	return store_read(s, "SELECT count(*) FROM approvals WHERE status = 'pending'", NULL, 0, 1,
			  store_row_int, n, NULL, "counting pending approvals", e);
}

/* Rows the values scan reads past the indexed blocks, at most. */
#define VALUES_TAIL_ROWS 8192

/* Replaces the string *ud with a copy of the row's first column. */
static int dup_row(struct store_row *sr, void *ud)
{
	char **last = ud;
	char *v = gh_strdup(store_col_text(sr, 0));

	if (!v)
		return STORE_ROW_NOMEM;
	free(*last);
	*last = v;
	return 0;
}

/* The values handed to a gh_store_ui_audit_values callback so far. */
struct values_walk {
	int (*fn)(void *ud, const char *val);
	void *ud;
	int n, stop;
};

static int value_row(struct store_row *sr, void *ud)
{
	struct values_walk *x = ud;

	x->stop = x->fn(x->ud, store_col_text(sr, 0));
	x->n++;
	return x->stop ? 1 : 0;
}

enum gh_code gh_store_ui_audit_values(struct gh_store *s, int dim, int max,
				      int (*fn)(void *ud, const char *val), void *ud,
				      struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	struct values_walk x = {fn, ud, 0, 0};
	const char *tail_sql, *next_sql;
	char *last = NULL;
	int64_t next = 0;
	enum gh_code rc = GH_OK;
	int seen;

	/* one statement per column: the statement cache is keyed by the
	 * literal, and a column name cannot be bound */
	switch (dim) {
	case GH_AUDIT_DIM_TOOL:
		tail_sql = "SELECT DISTINCT tool_name FROM (SELECT tool_name FROM audit_events "
			   "WHERE seq >= ?1 ORDER BY seq DESC LIMIT ?2) WHERE tool_name <> ''";
		next_sql = "SELECT tool_name FROM audit_events WHERE tool_name > ?1 "
			   "ORDER BY tool_name LIMIT 1";
		break;
	case GH_AUDIT_DIM_EVENT:
		tail_sql = "SELECT DISTINCT event FROM (SELECT event FROM audit_events "
			   "WHERE seq >= ?1 ORDER BY seq DESC LIMIT ?2) WHERE event <> ''";
		next_sql = "SELECT event FROM audit_events WHERE event > ?1 ORDER BY event LIMIT 1";
		break;
	case GH_AUDIT_DIM_OUTCOME:
		tail_sql = "SELECT DISTINCT outcome FROM (SELECT outcome FROM audit_events "
			   "WHERE seq >= ?1 ORDER BY seq DESC LIMIT ?2) WHERE outcome <> ''";
		next_sql = "SELECT outcome FROM audit_events WHERE outcome > ?1 "
			   "ORDER BY outcome LIMIT 1";
		break;
	default:
		store_reader_put(s, c);
		return gh_err_set(e, GH_E_INTERNAL, "audit values: unsupported column");
	}
	if (store_read_begin(c, e) != 0) {
		store_reader_put(s, c);
		return GH_E_IO;
	}
	if ((rc = store_audit_index_next(c, &next, e)) != GH_OK)
		goto out;
	/* the indexed blocks: the next value after the last one, by the
	 * (dim, val) index, until there is none; on PostgreSQL (no block
	 * index) every row, by the column's own (value, seq) index */
	while (x.n < max && !x.stop) {
		if (store_is_pg(s))
			rc = store_rows(c, next_sql, STORE_ARGS(STORE_TEXT(last ? last : "")), 1,
					dup_row, &last, &seen, "listing audit values", e);
		else
			rc = store_rows(c, "SELECT val FROM audit_postings WHERE dim = ?1 AND "
					   "val > ?2 ORDER BY val LIMIT 1",
					STORE_ARGS(STORE_INT(dim), STORE_TEXT(last ? last : "")), 1,
					dup_row, &last, &seen, "listing audit values", e);
		if (rc != GH_OK)
			goto out;
		if (seen == 0)
			break;
		x.stop = fn(ud, last);
		x.n++;
	}
	/* the rows not indexed yet (fn sees a value again if it is in both) */
	if (!x.stop && x.n < max && !store_is_pg(s))
		rc = store_rows(c, tail_sql,
				STORE_ARGS(STORE_INT(next * GH_AUDIT_BLOCK_ROWS),
					   STORE_INT(VALUES_TAIL_ROWS)),
				max - x.n, value_row, &x, NULL, "listing audit values", e);
out:
	free(last);
	store_read_end(c);
	store_reader_put(s, c);
	return rc;
}

cJSON *gh_store_ui_summary(const cJSON *activity)
{
	static const struct {
		const char *key, *event;
	} counts[] = {
		{"executed", "executed"}, {"failed", "failed"}, {"denials", "denied"},
		{"rateLimited", "rate_limited"}, {"approvalsRequested", "approval_requested"},
		{"approved", "approved"}, {"expired", "expired"},
		{"failedLogins", "admin_login_failed"},
	};
	const cJSON *by = cJSON_GetObjectItemCaseSensitive(activity, "byEvent");
	cJSON *l = cJSON_CreateObject();
	size_t i;

	if (!l)
		return NULL;
	cJSON_AddNumberToObject(l, "toolCalls", (double)gh_json_int(activity, "toolCalls", 0));
	for (i = 0; i < GH_ARRAY_LEN(counts); i++)
		cJSON_AddNumberToObject(l, counts[i].key,
					(double)gh_json_int(by, counts[i].event, 0));
	return l;
}
