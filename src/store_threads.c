/*
 * store_threads.c - threads, messages, runs and the tool calls runs wait
 * on. Threading as in store.c.
 */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "util.h"

/* ------------------------------------------------------------- threads */


/* The agent API always gives a time as a string (Mastra's clients parse
 * it); the admin view shows an unset one as null. */
static void add_time(cJSON *o, const char *name, int64_t ms, enum store_view v)
{
	char ts[GH_ISO8601_MAX];

	if (v == STORE_VIEW_ADMIN) {
		gh_json_add_time(o, name, ms);
		return;
	}
	gh_iso8601(ms, ts, sizeof(ts));
	cJSON_AddStringToObject(o, name, ts);
}

static void page_fields(cJSON *res, int64_t total, int page, int per_page)
{
	cJSON_AddNumberToObject(res, "total", (double)total);
	cJSON_AddNumberToObject(res, "page", page);
	cJSON_AddNumberToObject(res, "perPage", per_page);
	cJSON_AddBoolToObject(res, "hasMore", (int64_t)(page + 1) * per_page < total);
}

/* What thread_json reads: THREAD_COLS, and for the admin view the owner
 * and the message count after them. */
#define THREAD_COLS "t.id, t.resource_id, t.agent_id, t.title, t.metadata, t.created_at, " \
		    "t.updated_at"
#define THREAD_ADMIN_COLS THREAD_COLS ", t.owner, " \
			  "(SELECT count(*) FROM messages m WHERE m.owner = t.owner AND " \
			  "m.thread_id = t.id)"
/* The agent API asks for one owner (and so uses the owner indexes); the
 * admin view's owner NULL means every owner. */
#define OWNER_IS(n) "t.owner = ?" #n
#define OWNER_ANY(n) "(CAST(?" #n " AS text) IS NULL OR t.owner = ?" #n ")"
#define THREAD_FILTER "(CAST(?2 AS text) IS NULL OR t.agent_id = ?2) " \
	"AND (CAST(?3 AS text) IS NULL OR t.resource_id = ?3)"
#define THREAD_ORDER " ORDER BY t.updated_at DESC, t.id LIMIT ?4 OFFSET ?5"

static cJSON *thread_json(struct store_row *sr, enum store_view v)
{
	cJSON *o = cJSON_CreateObject(), *md;

	if (!o)
		return NULL;
	gh_json_add_str(o, "id", store_col_text(sr, 0));
	if (v == STORE_VIEW_ADMIN)
		gh_json_add_str(o, "owner", store_col_text(sr, 7));
	gh_json_add_str(o, "resourceId", store_col_text(sr, 1));
	gh_json_add_str(o, "agentId", store_col_text(sr, 2));
	gh_json_add_str(o, "title", store_col_text(sr, 3));
	md = store_col_json(sr, 4);
	cJSON_AddItemToObject(o, "metadata", md ? md : cJSON_CreateObject());
	add_time(o, "createdAt", store_col_int(sr, 5), v);
	add_time(o, "updatedAt", store_col_int(sr, 6), v);
	if (v == STORE_VIEW_ADMIN)
		cJSON_AddNumberToObject(o, "messageCount", (double)store_col_int(sr, 8));
	return o;
}

/* The first row of a thread read as JSON; the rows after it are counted
 * only. */
struct thread_one {
	enum store_view v;
	cJSON *t;
};

static int thread_one_row(struct store_row *sr, void *ud)
{
	struct thread_one *x = ud;

	if (!x->t && !(x->t = thread_json(sr, x->v)))
		return STORE_ROW_NOMEM;
	return 0;
}

enum gh_code store_thread_read(struct store_conn *c, enum store_view v, const char *owner,
			       const char *id, cJSON **out, struct gh_err *e)
{
	static const char *const sql[] = {
		[STORE_VIEW_API] = "SELECT " THREAD_COLS " FROM threads t "
				   "WHERE t.id = ?1 AND " OWNER_IS(2),
		[STORE_VIEW_ADMIN] = "SELECT " THREAD_ADMIN_COLS " FROM threads t "
				     "WHERE t.id = ?1 AND " OWNER_ANY(2) " LIMIT 2",
	};
	struct thread_one x = {v, NULL};
	int seen = 0;
	enum gh_code rc;

	*out = NULL;
	rc = store_rows(c, sql[v], STORE_ARGS(STORE_TEXT(id), STORE_TEXT(owner)),
			v == STORE_VIEW_ADMIN ? 2 : 1, thread_one_row, &x, &seen,
			"reading a thread", e);
	if (rc != GH_OK) {
		cJSON_Delete(x.t);
		return rc;
	}
	if (seen == 0)
		return gh_err_set(e, GH_E_NOTFOUND, "no thread %s", id);
	if (seen > 1) {
		/* ids are per owner: an admin asking for any owner's thread
		 * must say whose when several have the id */
		cJSON_Delete(x.t);
		return gh_err_set(e, GH_E_CONFLICT, "threads of several owners have the id "
				  "%s: name the owner", id);
	}
	*out = x.t;
	return GH_OK;
}

enum gh_code gh_store_thread_get(struct gh_store *s, const char *owner, const char *id,
				 cJSON **out, struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	enum gh_code rc = store_thread_read(c, STORE_VIEW_API, owner, id, out, e);

	store_reader_put(s, c);
	return rc;
}

struct thread_rows {
	cJSON *arr;
	enum store_view v;
};

static int thread_row(struct store_row *sr, void *ud)
{
	struct thread_rows *tr = ud;
	cJSON *t = thread_json(sr, tr->v);

	if (!t)
		return STORE_ROW_NOMEM;
	cJSON_AddItemToArray(tr->arr, t);
	return 0;
}

enum gh_code store_thread_list(struct gh_store *s, enum store_view v, const char *owner,
			       const char *agent_id, const char *resource_id, int page,
			       int per_page, cJSON **out, struct gh_err *e)
{
	static const char *const sql_count[] = {
		[STORE_VIEW_API] = "SELECT count(*) FROM threads t WHERE " OWNER_IS(1)
				   " AND " THREAD_FILTER,
		[STORE_VIEW_ADMIN] = "SELECT count(*) FROM threads t WHERE " OWNER_ANY(1)
				     " AND " THREAD_FILTER,
	};
	static const char *const sql_page[] = {
		[STORE_VIEW_API] = "SELECT " THREAD_COLS " FROM threads t WHERE " OWNER_IS(1)
				   " AND " THREAD_FILTER THREAD_ORDER,
		[STORE_VIEW_ADMIN] = "SELECT " THREAD_ADMIN_COLS " FROM threads t WHERE "
				     OWNER_ANY(1) " AND " THREAD_FILTER THREAD_ORDER,
	};
	struct store_conn *c = store_reader(s);
	struct thread_rows tr = {NULL, v};
	cJSON *res = NULL;
	enum gh_code rc;
	int64_t total = 0;

	*out = NULL;
	rc = store_rows(c, sql_count[v], STORE_ARGS(STORE_TEXT(owner), STORE_TEXT(agent_id),
						     STORE_TEXT(resource_id)),
			1, store_row_int, &total, NULL, "counting threads", e);
	if (rc != GH_OK)
		goto out;
	res = cJSON_CreateObject();
	if (!res || !(tr.arr = cJSON_AddArrayToObject(res, "threads"))) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	rc = store_rows(c, sql_page[v], STORE_ARGS(STORE_TEXT(owner), STORE_TEXT(agent_id),
						    STORE_TEXT(resource_id), STORE_INT(per_page),
						    STORE_INT((int64_t)page * per_page)),
			0, thread_row, &tr, NULL, "listing threads", e);
	if (rc != GH_OK)
		goto out;
	page_fields(res, total, page, per_page);
	*out = res;
	res = NULL;
out:
	cJSON_Delete(res);
	store_reader_put(s, c);
	return rc;
}

enum gh_code gh_store_thread_list(struct gh_store *s, const char *owner, const char *agent_id,
				  const char *resource_id, int page, int per_page, cJSON **out,
				  struct gh_err *e)
{
	return store_thread_list(s, STORE_VIEW_API, owner, agent_id, resource_id, page, per_page,
				 out, e);
}

struct thread_arg {
	const char *owner, *id, *resource_id, *agent_id, *title;
	const cJSON *metadata;
	int64_t now;
};

static enum gh_code insert_thread(struct store_conn *w, const struct thread_arg *a,
				  struct gh_err *e)
{
	char *md = NULL;
	enum gh_code rc;

	if (a->metadata && !(md = gh_json_dump(a->metadata)))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	rc = store_exec(w, "INSERT INTO threads (id, owner, resource_id, agent_id, title, "
			   "metadata, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?)",
			STORE_ARGS(STORE_TEXT(a->id), STORE_TEXT(a->owner),
				   STORE_TEXT(a->resource_id), STORE_TEXT(a->agent_id),
				   STORE_TEXT(a->title), STORE_TEXT(md), STORE_INT(a->now),
				   STORE_INT(a->now)),
			"creating a thread", NULL, e);
	free(md);
	if (rc == GH_E_CONFLICT)
		gh_err_set(e, GH_E_CONFLICT, "thread %s already exists", a->id);
	return rc;
}

static enum gh_code create_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	return insert_thread(w, arg, e);
}

enum gh_code gh_store_thread_create(struct gh_store *s, const char *owner, const char *id,
				    const char *resource_id, const char *agent_id,
				    const char *title, const cJSON *metadata, struct gh_err *e)
{
	struct thread_arg a = {owner, id, resource_id, agent_id, title, metadata, gh_now_ms()};

	return store_write(s, create_job, &a, e);
}

static enum gh_code update_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	struct thread_arg *a = arg;
	char *md = NULL;
	int changed = 0;
	enum gh_code rc;

	(void)s;
	if (a->metadata && !(md = gh_json_dump(a->metadata)))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	rc = store_exec(w, "UPDATE threads SET title = coalesce(?1, title), "
			   "metadata = coalesce(?2, metadata), "
			   "resource_id = coalesce(?3, resource_id), updated_at = ?4 "
			   "WHERE id = ?5 AND owner = ?6",
			STORE_ARGS(STORE_TEXT(a->title), STORE_TEXT(md), STORE_TEXT(a->resource_id),
				   STORE_INT(a->now), STORE_TEXT(a->id), STORE_TEXT(a->owner)),
			"updating a thread", &changed, e);
	free(md);
	if (rc == GH_OK && changed == 0)
		return gh_err_set(e, GH_E_NOTFOUND, "no thread %s", a->id);
	return rc;
}

enum gh_code gh_store_thread_update(struct gh_store *s, const char *owner, const char *id,
				    const char *title, const cJSON *metadata,
				    const char *resource_id, struct gh_err *e)
{
	struct thread_arg a = {owner, id, resource_id, NULL, title, metadata, gh_now_ms()};

	return store_write(s, update_job, &a, e);
}

static enum gh_code delete_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	struct thread_arg *a = arg;
	int changed = 0;
	enum gh_code rc = store_exec(w, "DELETE FROM threads WHERE id = ? AND owner = ?",
				     STORE_ARGS(STORE_TEXT(a->id), STORE_TEXT(a->owner)),
				     "deleting a thread", &changed, e);

	(void)s;
	if (rc == GH_OK && changed == 0)
		return gh_err_set(e, GH_E_NOTFOUND, "no thread %s", a->id);
	return rc;
}

enum gh_code gh_store_thread_delete(struct gh_store *s, const char *owner, const char *id,
				    struct gh_err *e)
{
	struct thread_arg a = {.owner = owner, .id = id};

	return store_write(s, delete_job, &a, e);
}

/* ------------------------------------------------------------ messages */

/* Messages read newest first into arr, each put before the others;
 * damaged says a row's content did not parse (or memory ran out). */
struct recent_rows {
	cJSON *arr;
	int damaged;
};

static int recent_row(struct store_row *sr, void *ud)
{
	struct recent_rows *x = ud;
	cJSON *m = cJSON_CreateObject(), *content = store_col_json(sr, 1);

	if (!m || !content) {
		cJSON_Delete(m);
		cJSON_Delete(content);
		x->damaged = 1;
		return 1;
	}
	gh_json_add_str(m, "role", store_col_text(sr, 0));
	cJSON_AddItemToObject(m, "content", content);
	/* newest first from SQL: prepend to get oldest first */
	cJSON_InsertItemInArray(x->arr, 0, m);
	return 0;
}

enum gh_code gh_store_messages_recent(struct gh_store *s, const char *owner,
				      const char *thread_id, int limit, cJSON **out,
				      struct gh_err *e)
{
	struct recent_rows x = {cJSON_CreateArray(), 0};
	enum gh_code rc;

	*out = NULL;
	if (!x.arr)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	rc = store_read(s, "SELECT role, content FROM messages WHERE owner = ? AND "
			   "thread_id = ? ORDER BY seq DESC LIMIT ?",
			STORE_ARGS(STORE_TEXT(owner), STORE_TEXT(thread_id), STORE_INT(limit)), 0,
			recent_row, &x, NULL, "reading messages", e);
	if (rc == GH_OK && x.damaged)
		rc = gh_err_set(e, GH_E_IO, "database: a stored message is damaged");
	if (rc == GH_OK) {
		*out = x.arr;
		x.arr = NULL;
	}
	cJSON_Delete(x.arr);
	return rc;
}

/* A thread's resource, message count and owner, by id (?1) and owner (?2);
 * at most two rows (more than one: several owners have the id). */
#define THREAD_SIZE "SELECT t.resource_id, (SELECT count(*) FROM messages m " \
		    "WHERE m.owner = t.owner AND m.thread_id = t.id), t.owner " \
		    "FROM threads t WHERE t.id = ?1 AND "

/* A message row (id, role, content, run_id, created_at, seq) of thread_id;
 * NULL when content is damaged or memory ran out. The agent API adds the
 * thread's resource and Mastra's type; the admin view the sequence number. */
static cJSON *message_json(struct store_row *sr, enum store_view v, const char *thread_id,
			   const char *resource)
{
	cJSON *m = cJSON_CreateObject(), *content = store_col_json(sr, 2);

	if (!m || !content) {
		cJSON_Delete(m);
		cJSON_Delete(content);
		return NULL;
	}
	gh_json_add_str(m, "id", store_col_text(sr, 0));
	if (v == STORE_VIEW_ADMIN)
		cJSON_AddNumberToObject(m, "seq", (double)store_col_int(sr, 5));
	gh_json_add_str(m, "threadId", thread_id);
	if (v == STORE_VIEW_API)
		gh_json_add_str(m, "resourceId", resource);
	gh_json_add_str(m, "role", store_col_text(sr, 1));
	cJSON_AddItemToObject(m, "content", content);
	if (v == STORE_VIEW_API)
		cJSON_AddStringToObject(m, "type", cJSON_IsString(content) ? "text" : "tool-call");
	add_time(m, "createdAt", store_col_int(sr, 4), v);
	gh_json_add_str(m, "runId", store_col_text(sr, 3));
	return m;
}

/* The thread a message list reads: its resource, its message count and
 * whose it is; n counts the rows (more than one: several owners). */
struct thread_size {
	char resource[GH_NAME_MAX + 1], whose[GH_NAME_MAX + 1];
	int64_t total;
	int n;
};

static int thread_size_row(struct store_row *sr, void *ud)
{
	struct thread_size *t = ud;

	if (t->n++ == 0) {
		store_col_copy(sr, 0, t->resource, sizeof(t->resource));
		t->total = store_col_int(sr, 1);
		store_col_copy(sr, 2, t->whose, sizeof(t->whose));
	}
	return 0;
}

/* A thread's messages read into arr; damaged says a row's content did not
 * parse (or memory ran out). */
struct message_rows {
	cJSON *arr;
	enum store_view v;
	const char *thread_id, *resource;
	int damaged;
};

static int message_row(struct store_row *sr, void *ud)
{
	struct message_rows *x = ud;
	cJSON *m = message_json(sr, x->v, x->thread_id, x->resource);

	if (!m) {
		x->damaged = 1;
		return 1;
	}
	cJSON_AddItemToArray(x->arr, m);
	return 0;
}

enum gh_code store_messages_list(struct gh_store *s, enum store_view v, const char *owner,
				 const char *thread_id, int page, int per_page, int last,
				 cJSON **out, struct gh_err *e)
{
	static const char *const sql_thread[] = {
		[STORE_VIEW_API] = THREAD_SIZE OWNER_IS(2),
		[STORE_VIEW_ADMIN] = THREAD_SIZE OWNER_ANY(2) " LIMIT 2",
	};
	struct store_conn *c = store_reader(s);
	struct thread_size t;
	struct message_rows x = {NULL, v, thread_id, t.resource, 0};
	cJSON *res = NULL;
	enum gh_code rc;
	int64_t total, offset;
	int limit;

	*out = NULL;
	memset(&t, 0, sizeof(t));
	rc = store_rows(c, sql_thread[v], STORE_ARGS(STORE_TEXT(thread_id), STORE_TEXT(owner)),
			v == STORE_VIEW_ADMIN ? 2 : 1, thread_size_row, &t, NULL,
			"reading a thread", e);
	if (rc != GH_OK)
		goto out;
	if (t.n == 0) {
		rc = gh_err_set(e, GH_E_NOTFOUND, "no thread %s", thread_id);
		goto out;
	}
	if (t.n > 1) {
		rc = gh_err_set(e, GH_E_CONFLICT, "threads of several owners have the id %s: "
				"name the owner", thread_id);
		goto out;
	}
	total = t.total;
	if (last > 0) {
		limit = last;
		offset = total > last ? total - last : 0;
	} else {
		limit = per_page;
		offset = (int64_t)page * per_page;
	}
	res = cJSON_CreateObject();
	if (!res || !(x.arr = cJSON_AddArrayToObject(res, "messages"))) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	rc = store_rows(c, "SELECT id, role, content, run_id, created_at, seq FROM messages "
			   "WHERE owner = ? AND thread_id = ? ORDER BY seq LIMIT ? OFFSET ?",
			STORE_ARGS(STORE_TEXT(t.whose), STORE_TEXT(thread_id), STORE_INT(limit),
				   STORE_INT(offset)),
			0, message_row, &x, NULL, "reading messages", e);
	if (rc == GH_OK && x.damaged)
		rc = gh_err_set(e, GH_E_IO, "database: a stored message is damaged");
	if (rc != GH_OK)
		goto out;
	if (last > 0) {
		/* the window ends at the newest message: "more" lies before it */
		cJSON_AddNumberToObject(res, "total", (double)total);
		cJSON_AddNumberToObject(res, "page", 0);
		cJSON_AddNumberToObject(res, "perPage", last);
		cJSON_AddBoolToObject(res, "hasMore", total > last);
	} else {
		page_fields(res, total, page, per_page);
	}
	*out = res;
	res = NULL;
out:
	cJSON_Delete(res);
	store_reader_put(s, c);
	return rc;
}

enum gh_code gh_store_messages_page(struct gh_store *s, const char *owner, const char *thread_id,
				    int page, int per_page, cJSON **out, struct gh_err *e)
{
	return store_messages_list(s, STORE_VIEW_API, owner, thread_id, page, per_page, 0, out, e);
}

/* ---------------------------------------------------------------- runs */

static enum gh_code check_status(struct store_conn *w, const char *run_id, const char *want,
				 struct gh_err *e)
{
	char status[16];
	struct store_buf b = {status, sizeof(status)};
	int seen = 0;
	/* PostgreSQL: the row stays locked until the commit, so no other
	 * replica moves the run between this check and the write after it */
	enum gh_code rc = store_rows(w, w->pg ? "SELECT status FROM runs WHERE id = ? FOR UPDATE"
					      : "SELECT status FROM runs WHERE id = ?",
				     STORE_ARGS(STORE_TEXT(run_id)), 1, store_row_text, &b, &seen,
				     "reading a run", e);

	if (rc != GH_OK)
		return rc;
	if (seen == 0)
		return gh_err_set(e, GH_E_NOTFOUND, "no run %s", run_id);
	if (strcmp(status, want) != 0)
		return gh_err_set(e, GH_E_CONFLICT, "run %s is %s, not %s", run_id, status, want);
	return GH_OK;
}

static enum gh_code append_messages(struct store_conn *w, const struct gh_run_commit *c,
				    int64_t now, struct gh_err *e)
{
	const cJSON *m;
	int64_t seq = 0;
	enum gh_code rc;

	rc = store_rows(w, "SELECT coalesce(max(seq), 0) FROM messages WHERE owner = ? AND "
			   "thread_id = ?",
			STORE_ARGS(STORE_TEXT(c->owner), STORE_TEXT(c->thread_id)), 1, store_row_int,
			&seq, NULL, "reading messages", e);
	if (rc != GH_OK)
		return rc;
	cJSON_ArrayForEach(m, c->messages) {
		char id[GH_ID_MAX], *content;
		const char *role = gh_json_str(m, "role");

		content = gh_json_dump(cJSON_GetObjectItemCaseSensitive(m, "content"));
		if (!role || !content) {
			free(content);
			return gh_err_set(e, GH_E_INTERNAL, "message without role or content");
		}
		gh_id_new("msg_", id, sizeof(id));
		rc = store_exec(w, "INSERT INTO messages (id, owner, thread_id, seq, role, content, "
				   "run_id, created_at) VALUES (?,?,?,?,?,?,?,?)",
				STORE_ARGS(STORE_TEXT(id), STORE_TEXT(c->owner),
					   STORE_TEXT(c->thread_id), STORE_INT(++seq), STORE_TEXT(role),
					   STORE_TEXT(content), STORE_TEXT(c->run_id), STORE_INT(now)),
				"appending a message", NULL, e);
		free(content);
		if (rc != GH_OK)
			return rc;
	}
	return store_exec(w, "UPDATE threads SET updated_at = ? WHERE owner = ? AND id = ?",
			  STORE_ARGS(STORE_INT(now), STORE_TEXT(c->owner), STORE_TEXT(c->thread_id)),
			  "touching a thread", NULL, e);
}

/* Inserts the run, or updates it when c expects a status (then GH_E_NOTFOUND
 * when it is not this owner's and agent's). */
static enum gh_code save_run(struct store_conn *w, const struct gh_run_commit *c,
			     const char *state, const char *output, int64_t now, struct gh_err *e)
{
	const struct store_arg args[] = {
		STORE_TEXT(c->run_id), STORE_TEXT(c->owner), STORE_TEXT(c->key_id),
		STORE_TEXT(c->agent_id), STORE_TEXT(c->thread_id), STORE_TEXT(c->resource_id),
		STORE_TEXT(c->status), STORE_TEXT(state), STORE_TEXT(output), STORE_TEXT(c->error),
		STORE_INT(now), c->wait_until > 0 ? STORE_INT(c->wait_until) : STORE_TEXT(NULL),
	};
	int changed = 0;
	enum gh_code rc;

	if (!c->expect_status) {
		rc = store_exec(w, "INSERT INTO runs (id, owner, key_id, agent_id, thread_id, "
				   "resource_id, status, state, output, error, created_at, updated_at, "
				   "wait_until) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?11,?12)",
				args, (int)GH_ARRAY_LEN(args), "saving the run", NULL, e);
		if (rc == GH_E_CONFLICT)
			gh_err_set(e, GH_E_CONFLICT, "run %s already exists", c->run_id);
		return rc;
	}
	/* every parameter a statement is given must appear in it (PostgreSQL
	 * cannot type one that does not): the update takes its own list */
	rc = store_exec(w, "UPDATE runs SET status = ?4, state = ?5, output = ?6, "
			   "error = ?7, updated_at = ?8, prev_status = NULL, wait_until = ?9, "
			   "thread_id = coalesce(?10, thread_id) WHERE id = ?1 AND owner = ?2 "
			   "AND agent_id = ?3",
			STORE_ARGS(args[0], args[1], args[3], args[6], args[7], args[8], args[9],
				   args[10], args[11], args[4]),
			"saving the run", &changed, e);
	if (rc == GH_E_CONFLICT)
		gh_err_set(e, GH_E_CONFLICT, "run %s already exists", c->run_id);
	if (rc == GH_OK && changed == 0)
		/* the run exists but not for this owner and agent */
		rc = gh_err_set(e, GH_E_NOTFOUND, "no run %s", c->run_id);
	return rc;
}

static enum gh_code run_commit_job(struct gh_store *s, struct store_conn *w, void *arg,
				   struct gh_err *e)
{
	const struct gh_run_commit *c = arg;
	int64_t now = gh_now_ms();
	char *state = NULL, *output = NULL;
	enum gh_code rc;
	size_t i;

	if (c->expect_status && (rc = check_status(w, c->run_id, c->expect_status, e)) != GH_OK)
		return rc;
	if (c->create_thread) {
		struct thread_arg ta = {c->owner,    c->thread_id, c->resource_id, c->agent_id,
					c->thread_title, NULL,     now};

		if ((rc = insert_thread(w, &ta, e)) != GH_OK)
			return rc;
	}
	if (c->thread_id && c->messages && cJSON_GetArraySize(c->messages) > 0 &&
	    (rc = append_messages(w, c, now, e)) != GH_OK)
		return rc;
	state = gh_json_dump(c->state);
	output = c->output ? gh_json_dump(c->output) : NULL;
	if (!state || (c->output && !output)) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	if ((rc = save_run(w, c, state, output, now, e)) != GH_OK)
		goto out;
	for (i = 0; i < c->npending; i++) {
		rc = store_exec(w, "INSERT INTO run_tool_calls (tool_call_id, run_id, owner, "
				   "tool_name, source, status, created_at) "
				   "VALUES (?,?,?,?,?,'pending',?)",
				STORE_ARGS(STORE_TEXT(c->pending_ids[i]), STORE_TEXT(c->run_id),
					   STORE_TEXT(c->owner), STORE_TEXT(c->pending_names[i]),
					   STORE_TEXT(c->pending_sources[i]), STORE_INT(now)),
				"saving a pending tool call", NULL, e);
		if (rc != GH_OK)
			goto out;
	}
	for (i = 0; i < c->nanswered; i++) {
		int changed = 0;

		rc = store_exec(w, "UPDATE run_tool_calls SET status = 'answered', answered_at = ? "
				   "WHERE tool_call_id = ? AND run_id = ? AND status = 'pending'",
				STORE_ARGS(STORE_INT(now), STORE_TEXT(c->answered_ids[i]),
					   STORE_TEXT(c->run_id)),
				"answering a tool call", &changed, e);
		if (rc != GH_OK)
			goto out;
		if (changed == 0) {
			rc = gh_err_set(e, GH_E_CONFLICT, "tool call %s was already answered",
					c->answered_ids[i]);
			goto out;
		}
	}
	if (c->with_tx) {
		struct gh_store_tx tx = {s, w};

		if ((rc = c->with_tx(&tx, c->with_ud, e)) != GH_OK)
			goto out;
	}
	rc = GH_OK;
out:
	free(state);
	free(output);
	return rc;
}

enum gh_code gh_store_run_commit(struct gh_store *s, const struct gh_run_commit *c,
				 struct gh_err *e)
{
	return store_write(s, run_commit_job, (void *)(uintptr_t)c, e);
}

/* A run commit made later: its own copy of what it writes, the state and
 * output as the JSON text the row takes (written on the caller's thread:
 * cheaper than copying the trees and writing them out later). */
struct later {
	struct gh_run_commit c;        /* its fields; state and output are the text below */
	char *strs[7];
	char *state, *output;
};

/* A later commit is a run record alone (gh_store_run_commit_later). */
static enum gh_code later_job(struct gh_store *s, struct store_conn *w, void *arg,
			      struct gh_err *e)
{
	struct later *l = arg;

	(void)s;
	return save_run(w, &l->c, l->state, l->output, gh_now_ms(), e);
}

static void later_free(void *arg)
{
	struct later *l = arg;
	size_t i;

	for (i = 0; i < sizeof(l->strs) / sizeof(l->strs[0]); i++)
		free(l->strs[i]);
	free(l->state);
	free(l->output);
	free(l);
}

/* *dst = a copy of src kept in l->strs[i] (NULL stays NULL); 0 or -1. */
static int later_str(struct later *l, int i, const char *src, const char **dst)
{
	*dst = NULL;
	if (!src)
		return 0;
	if (!(l->strs[i] = strdup(src)))
		return -1;
	*dst = l->strs[i];
	return 0;
}

enum gh_code gh_store_run_commit_later(struct gh_store *s, const struct gh_run_commit *c,
				       struct gh_err *e)
{
	struct later *l;

	if (c->expect_status || c->thread_id || c->create_thread || c->messages || c->npending ||
	    c->nanswered || c->with_tx || c->wait_until)
		return gh_err_set(e, GH_E_BADREQ, "run %s: not a run that can commit later",
				  c->run_id);
	if (!(l = calloc(1, sizeof(*l))))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	if (later_str(l, 0, c->run_id, &l->c.run_id) || later_str(l, 1, c->owner, &l->c.owner) ||
	    later_str(l, 2, c->key_id, &l->c.key_id) ||
	    later_str(l, 3, c->agent_id, &l->c.agent_id) ||
	    later_str(l, 4, c->resource_id, &l->c.resource_id) ||
	    later_str(l, 5, c->status, &l->c.status) || later_str(l, 6, c->error, &l->c.error) ||
	    !(l->state = gh_json_dump(c->state)) ||
	    (c->output && !(l->output = gh_json_dump(c->output)))) {
		later_free(l);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	store_write_async(s, later_job, l, later_free);
	return GH_OK;
}

struct transition_arg {
	const char *run_id, *from, *to;
};

static enum gh_code transition_job(struct gh_store *s, struct store_conn *w, void *arg,
				   struct gh_err *e)
{
	struct transition_arg *a = arg;
	int changed = 0;
	enum gh_code rc;

	/* conditional on the status, so that of two replicas claiming one
	 * run at once exactly one moves it; the claimant is recorded */
	rc = store_exec(w, "UPDATE runs SET status = ?1, prev_status = ?2, updated_at = ?3, "
			   "claimed_by = ?4 WHERE id = ?5 AND status = ?2",
			STORE_ARGS(STORE_TEXT(a->to), STORE_TEXT(a->from), STORE_INT(gh_now_ms()),
				   STORE_INT(s->instance), STORE_TEXT(a->run_id)),
			"updating a run", &changed, e);
	if (rc != GH_OK || changed)
		return rc;
	/* why not: no such run, or another status (the error names it) */
	if ((rc = check_status(w, a->run_id, a->from, e)) != GH_OK)
		return rc;
	return gh_err_set(e, GH_E_CONFLICT, "run %s was claimed by another request", a->run_id);
}

enum gh_code gh_store_run_transition(struct gh_store *s, const char *run_id, const char *from,
				     const char *to, struct gh_err *e)
{
	struct transition_arg a = {run_id, from, to};

	return store_write(s, transition_job, &a, e);
}

void gh_run_row_clear(struct gh_run_row *r)
{
	if (!r)
		return;
	cJSON_Delete(r->state);
	cJSON_Delete(r->output);
	free(r->error);
	memset(r, 0, sizeof(*r));
}

static int run_row(struct store_row *sr, void *ud)
{
	struct gh_run_row *out = ud;

	store_col_copy(sr, 0, out->id, sizeof(out->id));
	store_col_copy(sr, 1, out->owner, sizeof(out->owner));
	store_col_copy(sr, 2, out->key_id, sizeof(out->key_id));
	store_col_copy(sr, 3, out->agent_id, sizeof(out->agent_id));
	store_col_copy(sr, 4, out->thread_id, sizeof(out->thread_id));
	store_col_copy(sr, 5, out->resource_id, sizeof(out->resource_id));
	store_col_copy(sr, 6, out->status, sizeof(out->status));
	out->state = store_col_json(sr, 7);
	out->output = store_col_json(sr, 8);
	if (!store_col_isnull(sr, 9))
		out->error = gh_strdup(store_col_text(sr, 9));
	out->created_at = store_col_int(sr, 10);
	out->updated_at = store_col_int(sr, 11);
	if (!out->state) {
		gh_run_row_clear(out);
		return -1;
	}
	return 0;
}

enum gh_code gh_store_run_get(struct gh_store *s, const char *owner, const char *run_id,
			      struct gh_run_row *out, struct gh_err *e)
{
	return store_get(s, "SELECT id, owner, key_id, agent_id, coalesce(thread_id, ''), "
			    "coalesce(resource_id, ''), status, state, output, error, created_at, "
			    "updated_at FROM runs WHERE id = ?1 AND (CAST(?2 AS text) IS NULL OR owner = ?2)",
			 STORE_ARGS(STORE_TEXT(run_id), STORE_TEXT(owner)), run_row, out,
			 sizeof(*out), "reading a run", e, "no run %s", run_id);
}

struct call_row {
	char run_id[48], status[16];
};

static int call_row(struct store_row *sr, void *ud)
{
	struct call_row *r = ud;

	store_col_copy(sr, 0, r->run_id, sizeof(r->run_id));
	store_col_copy(sr, 1, r->status, sizeof(r->status));
	return 0;
}

enum gh_code gh_store_tool_call_find(struct gh_store *s, const char *owner,
				     const char *tool_call_id, char run_id[48],
				     char status_out[16], struct gh_err *e)
{
	struct call_row r;
	enum gh_code rc = store_get(s, "SELECT run_id, status FROM run_tool_calls "
				       "WHERE tool_call_id = ? AND owner = ?",
				    STORE_ARGS(STORE_TEXT(tool_call_id), STORE_TEXT(owner)), call_row,
				    &r, sizeof(r), "finding a tool call", e,
				    "unknown toolCallId %s", tool_call_id);

	if (rc == GH_OK) {
		gh_strlcpy(run_id, r.run_id, 48);
		gh_strlcpy(status_out, r.status, 16);
	}
	return rc;
}

struct recover_arg {
	int n;
};

static enum gh_code recover_job(struct gh_store *s, struct store_conn *w, void *arg,
				struct gh_err *e)
{
	struct recover_arg *a = arg;

	/* PostgreSQL: only what replicas that are gone left running */
	return store_exec(w, STORE_SQL(s, "UPDATE runs SET status = coalesce(prev_status, 'failed'), "
				       "error = CASE WHEN prev_status IS NULL THEN "
				       "'interrupted by a restart' ELSE error END, "
				       "prev_status = NULL, claimed_by = NULL WHERE status = 'running'",
				       "UPDATE runs SET status = coalesce(prev_status, 'failed'), "
				       "error = CASE WHEN prev_status IS NULL THEN "
				       "'interrupted by a restart' ELSE error END, "
				       "prev_status = NULL, claimed_by = NULL WHERE status = 'running' "
				       "AND (claimed_by IS NULL OR NOT " STORE_PG_ALIVE("claimed_by") ")"),
			  NULL, 0, "recovering runs", &a->n, e);
}

enum gh_code gh_store_runs_recover(struct gh_store *s, int *n, struct gh_err *e)
{
	struct recover_arg a = {0};
	enum gh_code rc = store_write(s, recover_job, &a, e);

	if (n)
		*n = a.n;
	return rc;
}

struct ids64 {
	int64_t *ids;
	size_t cap, n;
};

static int id64_row(struct store_row *sr, void *ud)
{
	struct ids64 *x = ud;

	if (x->n >= x->cap)
		return 1;
	x->ids[x->n++] = store_col_int(sr, 0);
	return 0;
}

enum gh_code gh_store_replicas_gone(struct gh_store *s, int64_t *ids, size_t cap, size_t *n,
				    struct gh_err *e)
{
	struct ids64 x = {ids, cap, 0};
	enum gh_code rc;

	*n = 0;
	if (!store_is_pg(s) || !cap)
		return GH_OK;
	rc = store_read(s, "SELECT x FROM (SELECT claimed_by AS x FROM runs WHERE status = 'running' "
			   "UNION SELECT instance FROM audit_open_calls) t "
			   "WHERE x IS NOT NULL AND NOT " STORE_PG_ALIVE("x") " LIMIT ?",
			STORE_ARGS(STORE_INT((int64_t)cap)), 0, id64_row, &x, NULL,
			"looking for replicas that are gone", e);
	*n = x.n;
	return rc;
}

struct orphans {
	char (*ids)[48];
	size_t cap, n;
	int64_t instance;
	int changed;
};

static int orphan_row(struct store_row *sr, void *ud)
{
	struct orphans *o = ud;

	if (o->n >= o->cap)
		return 1;
	store_col_copy(sr, 0, o->ids[o->n++], 48);
	return 0;
}

static enum gh_code orphans_job(struct gh_store *s, struct store_conn *w, void *arg,
				struct gh_err *e)
{
	struct orphans *o = arg;
	enum gh_code rc;

	(void)s;
	o->n = 0;
	rc = store_rows(w, "SELECT id FROM runs WHERE status = 'running' AND claimed_by = ? "
			   "ORDER BY id LIMIT ?",
			STORE_ARGS(STORE_INT(o->instance), STORE_INT((int64_t)o->cap)), 0,
			orphan_row, o, NULL, "reading a replica's runs", e);
	if (rc != GH_OK || !o->n)
		return rc;
	return store_exec(w, "UPDATE runs SET status = coalesce(prev_status, 'failed'), "
			     "error = CASE WHEN prev_status IS NULL THEN "
			     "'interrupted: its replica stopped' ELSE error END, "
			     "prev_status = NULL, claimed_by = NULL "
			     "WHERE id IN (SELECT id FROM runs WHERE status = 'running' AND "
			     "claimed_by = ? ORDER BY id LIMIT ?)",
			  STORE_ARGS(STORE_INT(o->instance), STORE_INT((int64_t)o->n)),
			  "recovering a replica's runs", &o->changed, e);
}

enum gh_code gh_store_replica_recover(struct gh_store *s, int64_t instance,
				      void (*fn)(void *ud, const char *run_id), void *ud,
				      int *nruns, int *ncalls, struct gh_err *e)
{
	char ids[64][48];
	struct orphans o = {ids, GH_ARRAY_LEN(ids), 0, instance, 0};
	int calls = 0, runs = 0;
	size_t i;
	enum gh_code rc;

	/* calls first: a run resumed below finds its cut-off call closed */
	if ((rc = store_audit_interrupted_of(s, instance, &calls, e)) != GH_OK)
		goto out;
	do {
		if ((rc = store_write(s, orphans_job, &o, e)) != GH_OK)
			goto out;
		runs += o.changed;
		for (i = 0; fn && i < o.n; i++)
			fn(ud, ids[i]);
	} while (o.n == o.cap);
out:
	if (nruns)
		*nruns = runs;
	if (ncalls)
		*ncalls = calls;
	return rc;
}

struct stalled {
	void (*fn)(void *ud, const char *run_id);
	void *ud;
};

static int stalled_row(struct store_row *sr, void *ud)
{
	struct stalled *x = ud;
	const char *id = store_col_text(sr, 0);

	if (id)
		x->fn(x->ud, id);
	return 0;
}

enum gh_code gh_store_runs_stalled(struct gh_store *s, int64_t decided_before, size_t cap,
				   void (*fn)(void *ud, const char *run_id), void *ud,
				   struct gh_err *e)
{
	struct stalled x = {fn, ud};

	return store_read(s, "SELECT r.id FROM runs r WHERE r.status = 'suspended' "
			     "AND NOT EXISTS (SELECT 1 FROM approvals a WHERE a.run_id = r.id "
			     "AND a.status = 'pending') "
			     "AND (SELECT max(decided_at) FROM approvals a WHERE a.run_id = r.id) < ? "
			     "ORDER BY r.updated_at LIMIT ?",
			  STORE_ARGS(STORE_INT(decided_before), STORE_INT((int64_t)cap)), 0,
			  stalled_row, &x, NULL, "looking for stalled runs", e);
}

struct due_ids {
	char (*ids)[48];
	size_t cap, n;
};

static int due_row(struct store_row *sr, void *ud)
{
	struct due_ids *d = ud;

	if (d->n >= d->cap)
		return 1;
	store_col_copy(sr, 0, d->ids[d->n++], 48);
	return 0;
}

enum gh_code gh_store_runs_due(struct gh_store *s, int64_t now_ms, char (*ids)[48], size_t cap,
			       size_t *n, struct gh_err *e)
{
	struct due_ids d = {ids, cap, 0};
	enum gh_code rc;

	rc = store_read(s, "SELECT id FROM runs WHERE status = 'waiting' AND wait_until <= ? "
			   "ORDER BY wait_until",
			STORE_ARGS(STORE_INT(now_ms)), (int)cap, due_row, &d, NULL,
			"listing runs past their deadline", e);
	*n = d.n;
	return rc;
}

struct id_each {
	int (*fn)(void *ud, const char *id);
	void *ud;
};

static int id_each_row(struct store_row *sr, void *ud)
{
	struct id_each *x = ud;
	const char *id = store_col_text(sr, 0);

	return x->fn(x->ud, id ? id : "") ? 1 : 0;
}

enum gh_code gh_store_runs_with_status(struct gh_store *s, const char *status,
				       int (*fn)(void *ud, const char *run_id), void *ud,
				       struct gh_err *e)
{
	struct id_each x = {fn, ud};

	return store_read(s, "SELECT id FROM runs WHERE status = ? ORDER BY updated_at",
			  STORE_ARGS(STORE_TEXT(status)), 0, id_each_row, &x, NULL,
			  "listing runs", e);
}

enum gh_code gh_store_runs_waiting(struct gh_store *s, const struct gh_store_runs_filter *f,
				   int (*fn)(void *ud, const char *run_id), void *ud,
				   struct gh_err *e)
{
	struct id_each x = {fn, ud};

	return store_read(s, "SELECT id FROM runs WHERE owner = ?1 AND key_id = ?2 "
			     "AND agent_id = ?3 AND status IN ('suspended', 'waiting') "
			     "AND (CAST(?4 AS text) IS NULL OR thread_id = ?4) "
			     "AND (CAST(?5 AS text) IS NULL OR resource_id = ?5) "
			     "AND updated_at >= ?6 AND updated_at <= ?7 "
			     "ORDER BY updated_at DESC, id DESC LIMIT ?8",
			  STORE_ARGS(STORE_TEXT(f->owner), STORE_TEXT(f->key_id),
				     STORE_TEXT(f->agent_id), STORE_TEXT(f->thread_id),
				     STORE_TEXT(f->resource_id), STORE_INT(f->from_ms),
				     STORE_INT(f->to_ms > 0 ? f->to_ms : INT64_MAX),
				     STORE_INT(f->limit)),
			  0, id_each_row, &x, NULL, "listing waiting runs", e);
}
