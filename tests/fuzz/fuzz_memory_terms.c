/*
 * fuzz_memory_terms.c - the two SQL functions memories_fts is written and
 * searched with (store_fts.c): gh_memory_terms, which turns a memory's
 * text into its scoped words, and gh_memory_match, which turns anything a
 * model sends as a memory_search query into a MATCH expression.
 *
 * The input is "owner\nresource\ntext" (missing parts are empty). On an
 * in-memory table made as migration 0016 makes memories_fts, checks:
 *   - the query built from the text is always a valid MATCH expression:
 *     no input reaches FTS5's query syntax;
 *   - a memory of that text, indexed for (owner, resource), is found by
 *     that same text as a query whenever the text has a word, and never by
 *     the query of another owner or another resource;
 *   - deleting it with the same terms leaves an index FTS5 finds sound and
 *     empty.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "harness.h"
#include "store_sqlite.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static sqlite3 *db;

static void setup(void)
{
	struct gh_err e;

	CHECK(sqlite3_open(":memory:", &db) == SQLITE_OK);
	CHECK(store_fts_register(db, &e) == 0);
	CHECK(sqlite3_exec(db,
			   "CREATE VIRTUAL TABLE m USING fts5 (content, tags, content = '', "
			   "tokenize = 'unicode61')",
			   NULL, NULL, NULL) == SQLITE_OK);
}

/* Rows of m the query made from (owner, resource, text) matches, or -1
 * when the statement fails. */
static int matches(const char *owner, const char *resource, const char *text, int n)
{
	sqlite3_stmt *st;
	int rc, count = -1;

	CHECK(sqlite3_prepare_v2(db, "SELECT count(*) FROM m WHERE m MATCH gh_memory_match(?, ?, ?)",
				 -1, &st, NULL) == SQLITE_OK);
	sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, resource, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, text, n, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		count = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return count;
}

/* Indexes (or with del, takes out) the memory rowid 1 of text. */
static void index_text(const char *owner, const char *resource, const char *text, int n,
		       int del)
{
	sqlite3_stmt *st;

	CHECK(sqlite3_prepare_v2(db,
				 del ? "INSERT INTO m (m, rowid, content, tags) VALUES ('delete', 1, "
				       "gh_memory_terms(?1, ?2, ?3), gh_memory_terms(?1, ?2, ''))"
				     : "INSERT INTO m (rowid, content, tags) VALUES (1, "
				       "gh_memory_terms(?1, ?2, ?3), gh_memory_terms(?1, ?2, ''))",
				 -1, &st, NULL) == SQLITE_OK);
	sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, resource, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, text, n, SQLITE_STATIC);
	CHECK(sqlite3_step(st) == SQLITE_DONE);
	sqlite3_finalize(st);
}

/* 1 when the text has a word: gh_memory_terms makes something of it. */
static int has_words(const char *owner, const char *resource, const char *text, int n)
{
	sqlite3_stmt *st;
	int words;

	CHECK(sqlite3_prepare_v2(db, "SELECT length(gh_memory_terms(?, ?, ?))", -1, &st, NULL) ==
	      SQLITE_OK);
	sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, resource, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, text, n, SQLITE_STATIC);
	CHECK(sqlite3_step(st) == SQLITE_ROW);
	words = sqlite3_column_int(st, 0) > 0;
	sqlite3_finalize(st);
	return words;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *in = malloc(size + 1), *owner, *resource, *text, *nl, *other;
	size_t olen;
	int n, words;

	if (!in)
		return 0;
	if (!db)
		setup();
	memcpy(in, data, size);
	in[size] = '\0';
	owner = in;
	resource = text = in + strlen(in); /* both empty unless split below */
	if ((nl = strchr(in, '\n'))) {
		*nl = '\0';
		resource = nl + 1;
		text = resource + strlen(resource);
		if ((nl = strchr(resource, '\n'))) {
			*nl = '\0';
			text = nl + 1;
		}
	}
	/* the text may hold NULs: it goes by its length */
	n = (int)(size - (size_t)(text - in));
	if (text == in + strlen(in) && text == resource)
		n = 0;
	CHECK(matches(owner, resource, text, n) == 0);
	words = has_words(owner, resource, text, n);
	index_text(owner, resource, text, n, 0);
	CHECK(matches(owner, resource, text, n) == (words ? 1 : 0));
	/* another owner, then another resource: the name and an 'x' */
	olen = strlen(owner) > strlen(resource) ? strlen(owner) : strlen(resource);
	if ((other = malloc(olen + 2))) {
		snprintf(other, olen + 2, "%sx", owner);
		CHECK(matches(other, resource, text, n) == 0);
		snprintf(other, olen + 2, "%sx", resource);
		CHECK(matches(owner, other, text, n) == 0);
		free(other);
	}
	index_text(owner, resource, text, n, 1);
	CHECK(sqlite3_exec(db, "INSERT INTO m (m) VALUES ('integrity-check')", NULL, NULL, NULL) ==
	      SQLITE_OK);
	CHECK(matches(owner, resource, text, n) == 0);
	free(in);
	return 0;
}
