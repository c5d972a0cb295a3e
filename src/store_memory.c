/*
 * store_memory.c - long-term memories (FTS5, bm25) and working memory, each
 * scoped to (owner, resource). Threading as in store.c.
 */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "json.h"
#include "util.h"

struct mem_arg {
	const char *owner, *resource, *content, *tags;
	int64_t id;
	int64_t now;
};

static enum gh_code save_job(struct gh_store *s, struct store_conn *w, void *arg,
			     struct gh_err *e)
{
	struct mem_arg *a = arg;
	enum gh_code rc;

	(void)s;
	rc = store_insert(w, "INSERT INTO memories (owner, resource_id, content, tags, created_at) "
			   "VALUES (?,?,?,?,?)",
			STORE_ARGS(STORE_TEXT(a->owner), STORE_TEXT(a->resource),
				   STORE_TEXT(a->content), STORE_TEXT(a->tags ? a->tags : ""),
				   STORE_INT(a->now)),
			"saving a memory", &a->id, e);
	return rc;
}

enum gh_code gh_store_memory_save(struct gh_store *s, const char *owner, const char *resource,
				  const char *content, const char *tags, int64_t *id_out,
				  struct gh_err *e)
{
	struct mem_arg a = {owner, resource, content, tags, 0, gh_now_ms()};
	enum gh_code rc = store_write(s, save_job, &a, e);

	if (rc == GH_OK && id_out)
		*id_out = a.id;
	return rc;
}

enum gh_code gh_store_memory_save_tx(struct gh_store_tx *tx, const char *owner,
				     const char *resource, const char *content, const char *tags,
				     int64_t *id_out, struct gh_err *e)
{
	struct mem_arg a = {owner, resource, content, tags, 0, gh_now_ms()};
	enum gh_code rc = save_job(tx->s, tx->w, &a, e);

	if (rc == GH_OK && id_out)
		*id_out = a.id;
	return rc;
}

/* Turns free text into a query of its words, any of which may match: for
 * FTS5 quoted words joined by OR, so any FTS syntax in it (NEAR, column
 * filters, quotes) is inert; for PostgreSQL's to_tsquery (pg) the words
 * joined by |, which holds no other operator as words are letters and
 * digits only. */
static int fts_query(const char *q, int pg, struct gh_buf *out)
{
	const unsigned char *p = (const unsigned char *)q;
	int words = 0;

	while (*p && words < 32) {
		const unsigned char *start;

		while (*p && !(*p >= 0x80 || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
			       (*p >= 'A' && *p <= 'Z')))
			p++;
		start = p;
		while (*p >= 0x80 || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
		       (*p >= 'A' && *p <= 'Z'))
			p++;
		if (p == start)
			break;
		if ((words && gh_buf_puts(out, pg ? " | " : " OR ") != GH_BUF_OK) ||
		    (!pg && gh_buf_putc(out, '"') != GH_BUF_OK) ||
		    gh_buf_append(out, start, (size_t)(p - start)) != GH_BUF_OK ||
		    (!pg && gh_buf_putc(out, '"') != GH_BUF_OK))
			return -1;
		words++;
	}
	return words;
}

/* Appends the memory of a search's row to the array ud. */
static int memory_row(struct store_row *sr, void *ud)
{
	cJSON *m = cJSON_CreateObject();
	char ts[GH_ISO8601_MAX];

	if (!m)
		return STORE_ROW_NOMEM;
	cJSON_AddNumberToObject(m, "id", (double)store_col_int(sr, 0));
	gh_json_add_str(m, "content", store_col_text(sr, 1));
	gh_json_add_str(m, "tags", store_col_text(sr, 2));
	gh_iso8601(store_col_int(sr, 3), ts, sizeof(ts));
	cJSON_AddStringToObject(m, "createdAt", ts);
	/* bm25 is lower-is-better and negative; report higher-is-better */
	cJSON_AddNumberToObject(m, "score", -store_col_double(sr, 4));
	cJSON_AddItemToArray(ud, m);
	return 0;
}

enum gh_code gh_store_memory_search(struct gh_store *s, const char *owner, const char *resource,
				    const char *query, int limit, cJSON **out, struct gh_err *e)
{
	struct gh_buf q;
	cJSON *arr = NULL;
	enum gh_code rc;
	int words;

	*out = NULL;
	gh_buf_init(&q, 8192);
	words = fts_query(query ? query : "", store_is_pg(s), &q);
	if (words < 0) {
		gh_buf_free(&q);
		return gh_err_set(e, GH_E_BADREQ, "query is too long");
	}
	if (!(arr = cJSON_CreateArray())) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	if (words == 0)
		rc = store_read(s, "SELECT id, content, tags, created_at, 0.0 FROM memories "
				   "WHERE owner = ?1 AND resource_id = ?2 "
				   "ORDER BY id DESC LIMIT ?3",
				STORE_ARGS(STORE_TEXT(owner), STORE_TEXT(resource), STORE_INT(limit)),
				0, memory_row, arr, NULL, "searching memories", e);
	else /* lower scores first: bm25 and the negated ts_rank */
		rc = store_read(s, STORE_SQL(s,
				/* sqlite-only: FTS5 (MATCH, bm25) */
				"SELECT m.id, m.content, m.tags, m.created_at, "
				"bm25(memories_fts) AS score FROM memories_fts "
				"JOIN memories m ON m.id = memories_fts.rowid "
				"WHERE memories_fts MATCH ?3 AND m.owner = ?1 "
				"AND m.resource_id = ?2 ORDER BY score LIMIT ?4",
				/* PostgreSQL's text search over memories.doc */
				"SELECT id, content, tags, created_at, "
				"-ts_rank(doc, to_tsquery('english', ?3)) AS score FROM memories "
				"WHERE doc @@ to_tsquery('english', ?3) AND owner = ?1 "
				"AND resource_id = ?2 ORDER BY score, id DESC LIMIT ?4"),
				STORE_ARGS(STORE_TEXT(owner), STORE_TEXT(resource), STORE_TEXT(q.data),
					   STORE_INT(limit)),
				0, memory_row, arr, NULL, "searching memories", e);
	if (rc == GH_OK) {
		*out = arr;
		arr = NULL;
	}
out:
	cJSON_Delete(arr);
	gh_buf_free(&q);
	return rc;
}

static enum gh_code delete_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	struct mem_arg *a = arg;
	int changed = 0;
	enum gh_code rc = store_exec(w, "DELETE FROM memories WHERE id = ? AND owner = ? "
					"AND resource_id = ?",
				     STORE_ARGS(STORE_INT(a->id), STORE_TEXT(a->owner),
						STORE_TEXT(a->resource)),
				     "deleting a memory", &changed, e);

	(void)s;
	if (rc == GH_OK && changed == 0)
		return gh_err_set(e, GH_E_NOTFOUND, "no memory %lld", (long long)a->id);
	return rc;
}

enum gh_code gh_store_memory_delete(struct gh_store *s, const char *owner, const char *resource,
				    int64_t id, struct gh_err *e)
{
	struct mem_arg a = {owner, resource, NULL, NULL, id, 0};

	return store_write(s, delete_job, &a, e);
}

enum gh_code gh_store_memory_delete_tx(struct gh_store_tx *tx, const char *owner,
				       const char *resource, int64_t id, struct gh_err *e)
{
	struct mem_arg a = {owner, resource, NULL, NULL, id, 0};

	return delete_job(tx->s, tx->w, &a, e);
}

static enum gh_code wm_job(struct gh_store *s, struct store_conn *w, void *arg, struct gh_err *e)
{
	struct mem_arg *a = arg;

	(void)s;
	return store_exec(w, "INSERT INTO working_memory (owner, resource_id, content, "
			     "updated_at) VALUES (?1,?2,?3,?4) ON CONFLICT (owner, "
			     "resource_id) DO UPDATE SET content = ?3, updated_at = ?4",
			  STORE_ARGS(STORE_TEXT(a->owner), STORE_TEXT(a->resource),
				     STORE_TEXT(a->content), STORE_INT(a->now)),
			  "saving working memory", NULL, e);
}

enum gh_code gh_store_working_memory_set(struct gh_store *s, const char *owner,
					 const char *resource, const char *content,
					 struct gh_err *e)
{
	struct mem_arg a = {owner, resource, content, NULL, 0, gh_now_ms()};

	return store_write(s, wm_job, &a, e);
}

enum gh_code gh_store_working_memory_set_tx(struct gh_store_tx *tx, const char *owner,
					    const char *resource, const char *content,
					    struct gh_err *e)
{
	struct mem_arg a = {owner, resource, content, NULL, 0, gh_now_ms()};

	return wm_job(tx->s, tx->w, &a, e);
}

static int text_dup_row(struct store_row *sr, void *ud)
{
	char **out = ud;
	const char *t = store_col_text(sr, 0);

	*out = gh_strdup(t ? t : "");
	return *out ? 0 : STORE_ROW_NOMEM;
}

enum gh_code gh_store_working_memory_get(struct gh_store *s, const char *owner,
					 const char *resource, char **out, struct gh_err *e)
{
	*out = NULL;
	return store_read(s, "SELECT content FROM working_memory WHERE owner = ? "
			     "AND resource_id = ?",
			  STORE_ARGS(STORE_TEXT(owner), STORE_TEXT(resource)), 1, text_dup_row, out,
			  NULL, "reading working memory", e);
}
