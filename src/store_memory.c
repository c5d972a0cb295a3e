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
 * digits only. On SQLite it only counts and bounds them: the search gives
 * the text itself to gh_memory_match (store_fts.c), which quotes the words
 * FTS5's tokenizer finds, each with its owner's and resource's scope. */
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

/* The memory of a search's row, as the search returns it; NULL when out
 * of memory. */
static cJSON *memory_item(struct store_row *sr)
{
	cJSON *m = cJSON_CreateObject();
	char ts[GH_ISO8601_MAX];

	if (!m)
		return NULL;
	cJSON_AddNumberToObject(m, "id", (double)store_col_int(sr, 0));
	gh_json_add_str(m, "content", store_col_text(sr, 1));
	gh_json_add_str(m, "tags", store_col_text(sr, 2));
	gh_iso8601(store_col_int(sr, 3), ts, sizeof(ts));
	cJSON_AddStringToObject(m, "createdAt", ts);
	/* bm25 is lower-is-better and negative; report higher-is-better */
	cJSON_AddNumberToObject(m, "score", -store_col_double(sr, 4));
	return m;
}

/* A search's best rows so far, lowest score first; of rows that score
 * alike, the one read first. On SQLite the rows come as FTS5 finds them
 * and the best are kept here: an ORDER BY with a LIMIT would make SQLite
 * build a temporary B-tree for every search (its pager, page cache and
 * pages, a fifth of a tool request's SQLite work when nothing matches),
 * and a row that does not make the cut is never copied. PostgreSQL's rows,
 * and the newest memories of a query without words, come ordered and
 * limited, and stay in that order. */
#define SEARCH_MAX 20

struct best {
	cJSON *item[SEARCH_MAX];
	double score[SEARCH_MAX];
	int n, limit;
};

static int best_row(struct store_row *sr, void *ud)
{
	struct best *b = ud;
	double score = store_col_double(sr, 4);
	cJSON *m;
	int i;

	if (b->n == b->limit && !(score < b->score[b->n - 1]))
		return 0;
	if (!(m = memory_item(sr)))
		return STORE_ROW_NOMEM;
	if (b->n == b->limit)
		cJSON_Delete(b->item[--b->n]);
	for (i = b->n; i > 0 && score < b->score[i - 1]; i--) {
		b->item[i] = b->item[i - 1];
		b->score[i] = b->score[i - 1];
	}
	b->item[i] = m;
	b->score[i] = score;
	b->n++;
	return 0;
}

enum gh_code gh_store_memory_search(struct gh_store *s, const char *owner, const char *resource,
				    const char *query, int limit, cJSON **out, struct gh_err *e)
{
	struct gh_buf q;
	struct best b;
	cJSON *arr = NULL;
	enum gh_code rc;
	int words, i;

	*out = NULL;
	b.n = 0;
	b.limit = limit < 1 ? 1 : limit > SEARCH_MAX ? SEARCH_MAX : limit;
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
				STORE_ARGS(STORE_TEXT(owner), STORE_TEXT(resource), STORE_INT(b.limit)),
				0, best_row, &b, NULL, "searching memories", e);
	else if (store_is_pg(s)) /* lower scores first: the negated ts_rank */
		rc = store_read(s, "SELECT id, content, tags, created_at, "
				   "-ts_rank(doc, to_tsquery('english', ?3)) AS score FROM memories "
				   "WHERE doc @@ to_tsquery('english', ?3) AND owner = ?1 "
				   "AND resource_id = ?2 ORDER BY score, id DESC LIMIT ?4",
				STORE_ARGS(STORE_TEXT(owner), STORE_TEXT(resource),
					   STORE_TEXT(q.data), STORE_INT(b.limit)),
				0, best_row, &b, NULL, "searching memories", e);
	else /* sqlite-only: FTS5 (MATCH, bm25, lower first) over the words
	      * of this owner and resource (store_fts.c, which quotes them) */
		rc = store_read(s, "SELECT m.id, m.content, m.tags, m.created_at, "
				   "bm25(memories_fts) FROM memories_fts "
				   "JOIN memories m ON m.id = memories_fts.rowid "
				   "WHERE memories_fts MATCH gh_memory_match(?1, ?2, ?3) "
				   "AND m.owner = ?1 AND m.resource_id = ?2",
				STORE_ARGS(STORE_TEXT(owner), STORE_TEXT(resource),
					   STORE_TEXT(query)),
				0, best_row, &b, NULL, "searching memories", e);
	for (i = 0; i < b.n; i++) /* the array owns them, on failure too */
		cJSON_AddItemToArray(arr, b.item[i]);
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

/* ------------------------------------------------ working memory cache */

/*
 * Every request of an agent with memory begins by reading its user's
 * working memory, which changes only when working_memory_update runs: reads
 * are kept, by (owner, resource) in WM_SLOTS direct-mapped slots, a user's
 * having none included (a value over WM_VALUE_MAX bytes is read each time),
 * each with the working memory generation loaded before it: a write moves
 * it once its transaction has ended (store_caches.c), so a value read
 * before a write is never served after it. On PostgreSQL the other
 * replicas hear of a write a moment after its commit: a kept read there
 * serves for GH_STORE_KEY_CACHE_MS at most.
 */
#define WM_SLOTS 256
#define WM_VALUE_MAX 16384

struct wmslot {
	char *owner, *resource;       /* NULL: empty */
	char *content;                /* NULL: the user has none */
	uint64_t gen;
	int64_t at_ms;                /* monotonic, when it was read */
};

struct store_wmcache {
	pthread_mutex_t mu;
	int64_t max_age_ms;           /* 0: none */
	struct wmslot slot[WM_SLOTS];
};

void store_wm_cache_open(struct gh_store *s)
{
	struct store_wmcache *c;

	if (!s->gen[STORE_CACHE_WM] || !(c = calloc(1, sizeof(*c))))
		return;
	pthread_mutex_init(&c->mu, NULL);
	c->max_age_ms = store_is_pg(s) ? GH_STORE_KEY_CACHE_MS : 0;
	s->wmcache = c;
}

static void slot_clear(struct wmslot *sl)
{
	free(sl->owner);
	free(sl->resource);
	free(sl->content);
	memset(sl, 0, sizeof(*sl));
}

void store_wm_cache_close(struct gh_store *s)
{
	struct store_wmcache *c = s->wmcache;
	size_t i;

	if (c) {
		for (i = 0; i < WM_SLOTS; i++)
			slot_clear(&c->slot[i]);
		pthread_mutex_destroy(&c->mu);
		free(c);
	}
	s->wmcache = NULL;
}

static struct wmslot *wm_slot(struct store_wmcache *c, const char *owner, const char *resource)
{
	uint32_t h = 2166136261u; /* FNV-1a over owner, a 0 byte, resource */
	const unsigned char *p;

	for (p = (const unsigned char *)owner; *p; p++)
		h = (h ^ *p) * 16777619u;
	h *= 16777619u;
	for (p = (const unsigned char *)resource; *p; p++)
		h = (h ^ *p) * 16777619u;
	return &c->slot[h % WM_SLOTS];
}

/* 1 and *out (a copy, NULL for none) when a read of (owner, resource) made
 * at generation gen is kept; 0 when not; -1 out of memory. */
static int wm_lookup(struct store_wmcache *c, const char *owner, const char *resource,
		     uint64_t gen, int64_t now, char **out)
{
	struct wmslot *sl = wm_slot(c, owner, resource);
	int hit;

	pthread_mutex_lock(&c->mu);
	hit = sl->owner && sl->gen == gen && (!c->max_age_ms || now - sl->at_ms < c->max_age_ms) &&
	      !strcmp(sl->owner, owner) && !strcmp(sl->resource, resource);
	if (hit && sl->content && !(*out = gh_strdup(sl->content)))
		hit = -1;
	pthread_mutex_unlock(&c->mu);
	return hit;
}

/* Keeps what a read of (owner, resource) begun at generation gen found
 * (content NULL: none), in place of what the slot held. */
static void wm_keep(struct store_wmcache *c, const char *owner, const char *resource,
		    const char *content, uint64_t gen, int64_t now)
{
	struct wmslot *sl = wm_slot(c, owner, resource), n, old;

	if (content && strlen(content) > WM_VALUE_MAX)
		return;
	memset(&n, 0, sizeof(n));
	n.owner = gh_strdup(owner);
	n.resource = gh_strdup(resource);
	n.content = content ? gh_strdup(content) : NULL;
	n.gen = gen;
	n.at_ms = now;
	if (!n.owner || !n.resource || (content && !n.content)) {
		slot_clear(&n);
		return;
	}
	pthread_mutex_lock(&c->mu);
	old = *sl; /* freed outside the lock */
	*sl = n;
	pthread_mutex_unlock(&c->mu);
	slot_clear(&old);
}

static enum gh_code wm_job(struct gh_store *s, struct store_conn *w, void *arg, struct gh_err *e)
{
	struct mem_arg *a = arg;
	enum gh_code rc;

	rc = store_exec(w, "INSERT INTO working_memory (owner, resource_id, content, "
			   "updated_at) VALUES (?1,?2,?3,?4) ON CONFLICT (owner, "
			   "resource_id) DO UPDATE SET content = ?3, updated_at = ?4",
			STORE_ARGS(STORE_TEXT(a->owner), STORE_TEXT(a->resource),
				   STORE_TEXT(a->content), STORE_INT(a->now)),
			"saving working memory", NULL, e);
	return rc == GH_OK ? store_cache_wrote(s, w, STORE_CACHE_WM, e) : rc;
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
	struct store_wmcache *c = s->wmcache;
	uint64_t gen = 0;
	int64_t now = 0;
	enum gh_code rc;

	*out = NULL;
	if (c) {
		int hit;

		gen = atomic_load(s->gen[STORE_CACHE_WM]);
		now = gh_mono_ns() / 1000000;
		if ((hit = wm_lookup(c, owner, resource, gen, now, out)) < 0)
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
		if (hit)
			return GH_OK;
	}
	rc = store_read(s, "SELECT content FROM working_memory WHERE owner = ? "
			   "AND resource_id = ?",
			STORE_ARGS(STORE_TEXT(owner), STORE_TEXT(resource)), 1, text_dup_row, out,
			NULL, "reading working memory", e);
	if (c && rc == GH_OK)
		wm_keep(c, owner, resource, *out, gen, now);
	return rc;
}
