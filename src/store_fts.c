/*
 * store_fts.c - the words of long-term memories as memories_fts indexes
 * them (SQLite only): two SQL functions every connection of the store has.
 *
 *   gh_memory_terms(owner, resource_id, text)   the indexed text
 *   gh_memory_match(owner, resource_id, query)  a search's MATCH expression
 *
 * Every word is indexed as "<scope><stem>": the scope is 'm' and 16 hex
 * digits of a hash of (owner, resource_id), the stem what FTS5's porter
 * tokenizer over unicode61 makes of the word. A search's words get the same
 * scope, so it reads the doclists of its own owner's and resource's words
 * only. Without the scope a search read every memory holding one of its
 * words, whoever it belonged to (and bm25 counted them all): its cost grew
 * with every other user's memories. The table's own tokenizer (unicode61)
 * takes a scoped stem as the one token it is. A hash collision between two
 * scopes costs only speed: the search still joins memories on owner and
 * resource_id.
 *
 * Threading: a connection is used by one thread at a time, and each has its
 * own porter tokenizer (it keeps a buffer).
 */
#include "store_sqlite.h"

#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "buf.h"

#define SCOPE_LEN 17           /* 'm' and 16 hex digits */
#define MATCH_WORDS 32         /* words of a query searched (as before) */
#define TERMS_MAX (256u << 20) /* the longest text either function returns */

struct fts_fns {
	fts5_tokenizer tok;        /* porter's methods */
	Fts5Tokenizer *porter;     /* porter over unicode61 */
};

struct terms {
	struct gh_buf *out;
	const char *scope;
	int query;                 /* 1: quoted and joined by OR */
	int words;
	int failed;                /* the buffer's GH_BUF_ code, or 0 */
};

static void scope_of(const unsigned char *owner, const unsigned char *resource,
		     char out[SCOPE_LEN + 1])
{
	crypto_generichash_state h;
	unsigned char d[8];
	const char *o = owner ? (const char *)owner : "";
	const char *r = resource ? (const char *)resource : "";

	crypto_generichash_init(&h, NULL, 0, sizeof(d));
	crypto_generichash_update(&h, (const unsigned char *)o, strlen(o) + 1); /* and its NUL */
	crypto_generichash_update(&h, (const unsigned char *)r, strlen(r));
	crypto_generichash_final(&h, d, sizeof(d));
	out[0] = 'm';
	sodium_bin2hex(out + 1, SCOPE_LEN, d, sizeof(d));
}

static int on_token(void *ud, int flags, const char *tok, int n, int start, int end)
{
	struct terms *t = ud;
	struct gh_buf *b = t->out;
	int i, bad = GH_BUF_OK;

	(void)start;
	(void)end;
	if (flags & FTS5_TOKEN_COLOCATED)
		return SQLITE_OK;
	if (t->query && t->words == MATCH_WORDS)
		return SQLITE_DONE;
	if (t->words)
		bad = gh_buf_puts(b, t->query ? " OR " : " ");
	if (!bad && t->query)
		bad = gh_buf_putc(b, '"');
	if (!bad)
		bad = gh_buf_append(b, t->scope, SCOPE_LEN);
	/* unicode61 makes no '"' part of a word; a query doubles one anyway */
	for (i = 0; i < n && !bad; i++) {
		if (tok[i] == '"' && t->query)
			bad = gh_buf_putc(b, '"');
		if (!bad)
			bad = gh_buf_putc(b, tok[i]);
	}
	if (!bad && t->query)
		bad = gh_buf_putc(b, '"');
	if (bad) {
		t->failed = bad;
		return SQLITE_NOMEM;
	}
	t->words++;
	return SQLITE_OK;
}

/* gh_memory_terms (query 0) and gh_memory_match (query 1). */
static void scoped(sqlite3_context *cx, int query, sqlite3_value **argv)
{
	struct fts_fns *f = sqlite3_user_data(cx);
	const char *text = (const char *)sqlite3_value_text(argv[2]);
	char scope[SCOPE_LEN + 1];
	struct gh_buf out;
	struct terms t;
	int rc;

	scope_of(sqlite3_value_text(argv[0]), sqlite3_value_text(argv[1]), scope);
	gh_buf_init(&out, TERMS_MAX);
	memset(&t, 0, sizeof(t));
	t.out = &out;
	t.scope = scope;
	t.query = query;
	rc = f->tok.xTokenize(f->porter, &t,
			      query ? FTS5_TOKENIZE_QUERY : FTS5_TOKENIZE_DOCUMENT,
			      text ? text : "", text ? sqlite3_value_bytes(argv[2]) : 0, on_token);
	if (t.failed) {
		gh_buf_free(&out);
		if (t.failed == GH_BUF_TOOBIG)
			sqlite3_result_error_toobig(cx);
		else
			sqlite3_result_error_nomem(cx);
		return;
	}
	if (rc != SQLITE_OK && rc != SQLITE_DONE) {
		gh_buf_free(&out);
		sqlite3_result_error_code(cx, rc);
		return;
	}
	/* a query of no words: the bare scope, which no indexed word is */
	if (query && !t.words &&
	    (gh_buf_putc(&out, '"') != GH_BUF_OK ||
	     gh_buf_append(&out, scope, SCOPE_LEN) != GH_BUF_OK ||
	     gh_buf_putc(&out, '"') != GH_BUF_OK)) {
		gh_buf_free(&out);
		sqlite3_result_error_nomem(cx);
		return;
	}
	sqlite3_result_text(cx, out.data ? out.data : "", (int)out.len,
			    out.data ? free : SQLITE_STATIC);
}

static void terms_fn(sqlite3_context *cx, int argc, sqlite3_value **argv)
{
	(void)argc;
	scoped(cx, 0, argv);
}

static void match_fn(sqlite3_context *cx, int argc, sqlite3_value **argv)
{
	(void)argc;
	scoped(cx, 1, argv);
}

static void fns_free(void *p)
{
	struct fts_fns *f = p;

	if (f->porter)
		f->tok.xDelete(f->porter);
	free(f);
}

/* FTS5's API of db, or NULL. */
static fts5_api *fts5_of(sqlite3 *db)
{
	fts5_api *api = NULL;
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &st, NULL) != SQLITE_OK)
		return NULL;
	sqlite3_bind_pointer(st, 1, (void *)&api, "fts5_api_ptr", NULL);
	sqlite3_step(st);
	sqlite3_finalize(st);
	return api;
}

int store_fts_register(sqlite3 *db, struct gh_err *e)
{
	const char *parent[] = {"unicode61"};
	const int how = SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS;
	struct fts_fns *f = calloc(1, sizeof(*f));
	fts5_api *api = fts5_of(db);
	void *ud = NULL;
	int rc;

	if (!f) {
		gh_err_set(e, GH_E_NOMEM, "out of memory");
		return -1;
	}
	if (!api || api->xFindTokenizer(api, "porter", &ud, &f->tok) != SQLITE_OK ||
	    f->tok.xCreate(ud, parent, 1, &f->porter) != SQLITE_OK) {
		free(f);
		gh_err_set(e, GH_E_INTERNAL, "database: SQLite has no FTS5 porter tokenizer");
		return -1;
	}
	/* f goes with the first function (SQLite frees it if this fails) */
	rc = sqlite3_create_function_v2(db, "gh_memory_terms", 3, how, f, terms_fn, NULL, NULL,
					fns_free);
	if (rc == SQLITE_OK)
		rc = sqlite3_create_function_v2(db, "gh_memory_match", 3, how, f, match_fn, NULL,
						NULL, NULL);
	if (rc != SQLITE_OK) {
		gh_err_set(e, GH_E_INTERNAL, "database: %s", sqlite3_errmsg(db));
		return -1;
	}
	return 0;
}
