/*
 * test_store_ui.c - reads for the admin UI: the values the audit filters
 * offer come from the filter index's postings and from the rows not yet
 * indexed, each value once, bounded.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "audit_index.h"
#include "store_ui.h"
#include "t.h"
#include "t_store.h"

/* One block and a little more: block 0 gets indexed, the rest is the tail. */
#define NROWS (GH_AUDIT_BLOCK_ROWS + 100)

static int append(struct gh_store *s, int i)
{
	struct gh_audit_event ev = {0};
	struct gh_err e;
	char tool[32];

	/* a tool only the indexed block names, one only the tail names, and
	 * two everywhere; events and outcomes likewise */
	if (i == 7)
		gh_strlcpy(tool, "only_indexed", sizeof(tool));
	else if (i == NROWS - 3)
		gh_strlcpy(tool, "only_in_tail", sizeof(tool));
	else
		snprintf(tool, sizeof(tool), "tool_%d", i % 2);
	ev.event = i == 11 ? "rare_event" : i == NROWS - 1 ? "newest_event" : "executed";
	ev.outcome = i % 3 ? "ok" : "error";
	ev.tool_name = i % 5 ? tool : NULL;
	if (i == 7 || i == NROWS - 3)
		ev.tool_name = tool;
	ev.key_id = "key_1";
	ev.args = "{}";
	ev.duration_ms = -1;
	return gh_store_audit_append(s, &ev, NULL, &e) == GH_OK ? 0 : -1;
}

static int64_t next_block(const char *path)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int64_t v = -1;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, "SELECT next_blk FROM audit_index_state", -1, &st, NULL) ==
		    SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

struct seen {
	char v[16][32];
	int n, calls;
	int stop_after;
};

static int collect(void *ud, const char *val)
{
	struct seen *s = ud;
	int i;

	s->calls++;
	for (i = 0; i < s->n; i++)
		if (!strcmp(s->v[i], val))
			return s->stop_after && s->calls >= s->stop_after;
	if (s->n < 16)
		gh_strlcpy(s->v[s->n++], val, sizeof(s->v[0]));
	return s->stop_after && s->calls >= s->stop_after;
}

static int has(const struct seen *s, const char *val)
{
	int i;

	for (i = 0; i < s->n; i++)
		if (!strcmp(s->v[i], val))
			return 1;
	return 0;
}

static void test_audit_values(void)
{
	struct t_store t;
	struct seen s;
	struct gh_err e;
	int i;

	T_EQ_INT(t_store_open(&t), 0);
	for (i = 0; i < NROWS; i++)
		T_EQ_INT(append(t.s, i), 0);
	/* the writer indexes the complete block by itself: wait (bounded) */
	if (!t_store_sqlite_only("the block index indexing a complete block")) {
		for (i = 0; i < 500 && next_block(t.path) < 1; i++)
			nanosleep(&(struct timespec){0, 10000000}, NULL);
		T_EQ_INT(next_block(t.path), 1);
	}

	memset(&s, 0, sizeof(s));
	T_EQ_INT(gh_store_ui_audit_values(t.s, GH_AUDIT_DIM_TOOL, 100, collect, &s, &e), GH_OK);
	T_EQ_INT(s.n, 4);
	T_ASSERT(has(&s, "only_indexed"));
	T_ASSERT(has(&s, "only_in_tail"));
	T_ASSERT(has(&s, "tool_0") && has(&s, "tool_1"));

	memset(&s, 0, sizeof(s));
	T_EQ_INT(gh_store_ui_audit_values(t.s, GH_AUDIT_DIM_EVENT, 100, collect, &s, &e), GH_OK);
	T_EQ_INT(s.n, 3);
	T_ASSERT(has(&s, "rare_event") && has(&s, "newest_event") && has(&s, "executed"));

	memset(&s, 0, sizeof(s));
	T_EQ_INT(gh_store_ui_audit_values(t.s, GH_AUDIT_DIM_OUTCOME, 100, collect, &s, &e),
		 GH_OK);
	T_EQ_INT(s.n, 2);

	/* bounded: at most max calls, and the callback can stop it */
	memset(&s, 0, sizeof(s));
	T_EQ_INT(gh_store_ui_audit_values(t.s, GH_AUDIT_DIM_TOOL, 2, collect, &s, &e), GH_OK);
	T_EQ_INT(s.calls, 2);
	memset(&s, 0, sizeof(s));
	s.stop_after = 1;
	T_EQ_INT(gh_store_ui_audit_values(t.s, GH_AUDIT_DIM_TOOL, 100, collect, &s, &e), GH_OK);
	T_EQ_INT(s.calls, 1);

	/* only the columns a filter offers */
	memset(&s, 0, sizeof(s));
	T_EQ_INT(gh_store_ui_audit_values(t.s, GH_AUDIT_DIM_RUN, 100, collect, &s, &e),
		 GH_E_INTERNAL);
	t_store_close(&t);
}

T_MAIN(T(test_audit_values))
