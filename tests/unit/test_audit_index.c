/*
 * test_audit_index.c - the audit log's filter index: row-set encoding, one
 * block's postings, and, on a real database of several blocks, filtered
 * pages checked against a brute-force scan, verify's index check, repair,
 * catch-up after the index falls behind, and retention across a block.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "audit_index.h"
#include "audit_verify.h"
#include "log.h"
#include "store_int.h"
#include "t.h"
#include "t_store.h"

/* ---------------------------------------------------------- row sets */

static void test_rows_encoding(void)
{
	struct gh_audit_rows r, back;
	unsigned char enc[GH_AUDIT_BITMAP_BYTES];
	size_t n;
	int i;

	memset(&r, 0, sizeof(r));
	T_EQ_INT(gh_audit_rows_encode(&r, enc), 0);
	/* a few rows: sorted little-endian offsets */
	gh_audit_rows_set(&r, 4095);
	gh_audit_rows_set(&r, 0);
	gh_audit_rows_set(&r, 258);
	n = gh_audit_rows_encode(&r, enc);
	T_EQ_INT(n, 6);
	T_EQ_INT(enc[0], 0);
	T_EQ_INT(enc[1], 0);
	T_EQ_INT(enc[2], 2);
	T_EQ_INT(enc[3], 1);
	T_EQ_INT(enc[4], 0xff);
	T_EQ_INT(enc[5], 0x0f);
	T_EQ_INT(gh_audit_rows_decode(enc, n, &back), 0);
	T_ASSERT(!memcmp(&r, &back, sizeof(r)));
	/* up to GH_AUDIT_ARRAY_MAX rows stay a list; one more is a bitmap */
	memset(&r, 0, sizeof(r));
	for (i = 0; i < GH_AUDIT_ARRAY_MAX; i++)
		gh_audit_rows_set(&r, (unsigned)(i * 16 + 3));
	n = gh_audit_rows_encode(&r, enc);
	T_EQ_INT(n, 2 * GH_AUDIT_ARRAY_MAX);
	T_EQ_INT(gh_audit_rows_decode(enc, n, &back), 0);
	T_ASSERT(!memcmp(&r, &back, sizeof(r)));
	gh_audit_rows_set(&r, 4000);
	n = gh_audit_rows_encode(&r, enc);
	T_EQ_INT(n, GH_AUDIT_BITMAP_BYTES);
	T_EQ_INT(gh_audit_rows_decode(enc, n, &back), 0);
	T_ASSERT(!memcmp(&r, &back, sizeof(r)));
	T_EQ_INT(gh_audit_rows_count(&back), GH_AUDIT_ARRAY_MAX + 1);
	/* what a damaged posting looks like is refused */
	T_EQ_INT(gh_audit_rows_decode(enc, 0, &back), -1);
	T_EQ_INT(gh_audit_rows_decode(enc, 3, &back), -1);
	T_EQ_INT(gh_audit_rows_decode(enc, GH_AUDIT_BITMAP_BYTES + 2, &back), -1);
	enc[0] = 5, enc[1] = 0, enc[2] = 5, enc[3] = 0; /* not ascending */
	T_EQ_INT(gh_audit_rows_decode(enc, 4, &back), -1);
	enc[0] = 0, enc[1] = 0x10;                       /* offset 4096 */
	T_EQ_INT(gh_audit_rows_decode(enc, 2, &back), -1);
}

static void test_rows_walk(void)
{
	static const int members[] = {0, 1, 63, 64, 700, 4094, 4095};
	struct gh_audit_rows r, o;
	int i, at;

	memset(&r, 0, sizeof(r));
	T_EQ_INT(gh_audit_rows_prev(&r, 4095), -1);
	T_EQ_INT(gh_audit_rows_next(&r, 0), -1);
	for (i = 0; i < (int)GH_ARRAY_LEN(members); i++)
		gh_audit_rows_set(&r, (unsigned)members[i]);
	/* newest first */
	at = gh_audit_rows_prev(&r, GH_AUDIT_BLOCK_ROWS - 1);
	for (i = (int)GH_ARRAY_LEN(members) - 1; i >= 0; i--) {
		T_EQ_INT(at, members[i]);
		at = gh_audit_rows_prev(&r, at - 1);
	}
	T_EQ_INT(at, -1);
	/* oldest first */
	at = gh_audit_rows_next(&r, 0);
	for (i = 0; i < (int)GH_ARRAY_LEN(members); i++) {
		T_EQ_INT(at, members[i]);
		at = gh_audit_rows_next(&r, at + 1);
	}
	T_EQ_INT(at, -1);
	T_EQ_INT(gh_audit_rows_prev(&r, 699), 64);
	T_EQ_INT(gh_audit_rows_next(&r, 65), 700);
	T_EQ_INT(gh_audit_rows_next(&r, GH_AUDIT_BLOCK_ROWS), -1);
	/* intersection */
	memset(&o, 0, sizeof(o));
	gh_audit_rows_set(&o, 64);
	gh_audit_rows_set(&o, 65);
	T_EQ_INT(gh_audit_rows_and(&r, &o), 1);
	T_EQ_INT(gh_audit_rows_count(&r), 1);
	T_ASSERT(gh_audit_rows_has(&r, 64));
	memset(&o, 0, sizeof(o));
	T_EQ_INT(gh_audit_rows_and(&r, &o), 0);
}

static void test_blockidx(void)
{
	struct gh_audit_blockidx *b = gh_audit_blockidx_new();
	struct gh_audit_event ev = {0};
	const struct gh_audit_rows *r;
	const char *val;
	size_t len, i;
	int dim, prev_dim = 0;
	char name[32], prev[32] = "";

	T_ASSERT(b);
	/* enough values to make the table grow several times */
	for (i = 0; i < 3000; i++) {
		snprintf(name, sizeof(name), "run_%04zu", (i * 7919) % 3000);
		ev.run_id = name;
		ev.event = i % 2 ? "executed" : "denied";
		ev.key_id = "";                 /* empty: not indexed */
		T_EQ_INT(gh_audit_blockidx_add_row(b, &ev, (unsigned)i), 0);
	}
	T_EQ_INT(gh_audit_blockidx_count(b), 3002);
	T_EQ_INT(gh_audit_blockidx_rows(b), 6000);
	r = gh_audit_blockidx_get(b, GH_AUDIT_DIM_EVENT, "executed");
	T_ASSERT(r && gh_audit_rows_count(r) == 1500 && gh_audit_rows_has(r, 1));
	T_ASSERT(!gh_audit_blockidx_get(b, GH_AUDIT_DIM_KEY, ""));
	T_ASSERT(!gh_audit_blockidx_get(b, GH_AUDIT_DIM_TOOL, "executed"));
	/* sorted by (dim, value bytes), as the table's key orders them */
	gh_audit_blockidx_sort(b);
	for (i = 0; i < gh_audit_blockidx_count(b); i++) {
		gh_audit_blockidx_entry(b, i, &dim, &val, &len, &r);
		T_EQ_INT(len, strlen(val));
		if (dim < prev_dim || (dim == prev_dim && strcmp(prev, val) >= 0))
			T_FAIL("entry %zu (%d, %s) after (%d, %s)", i, dim, val, prev_dim, prev);
		prev_dim = dim;
		gh_strlcpy(prev, val, sizeof(prev));
	}
	gh_audit_blockidx_free(b);
	gh_audit_blockidx_free(NULL);
}

static void test_blockmap(void)
{
	struct gh_audit_blockmap *m = gh_audit_blockmap_new();
	struct gh_audit_rows r;
	unsigned char enc[GH_AUDIT_BITMAP_BYTES], two[4] = {7, 0, 9, 0}, bad[4] = {9, 0, 7, 0};
	const char *why = NULL;
	size_t n;
	int i;

	T_ASSERT(m);
	/* a list and a bitmap, in two columns */
	T_EQ_INT(gh_audit_blockmap_load(m, GH_AUDIT_DIM_TOOL, "send_email", 10, two, 4, &why), 0);
	memset(&r, 0, sizeof(r));
	for (i = 0; i < 1000; i++)
		gh_audit_rows_set(&r, (unsigned)(i * 4));
	n = gh_audit_rows_encode(&r, enc);
	T_EQ_INT(n, GH_AUDIT_BITMAP_BYTES);
	T_EQ_INT(gh_audit_blockmap_load(m, GH_AUDIT_DIM_EVENT, "executed", 8, enc, n, &why), 0);
	T_EQ_STR(gh_audit_blockmap_value_at(m, GH_AUDIT_DIM_TOOL, 7), "send_email");
	T_EQ_STR(gh_audit_blockmap_value_at(m, GH_AUDIT_DIM_TOOL, 9), "send_email");
	T_ASSERT(!gh_audit_blockmap_value_at(m, GH_AUDIT_DIM_TOOL, 8));
	T_EQ_STR(gh_audit_blockmap_value_at(m, GH_AUDIT_DIM_EVENT, 3996), "executed");
	T_ASSERT(!gh_audit_blockmap_value_at(m, GH_AUDIT_DIM_EVENT, 3997));
	T_ASSERT(!gh_audit_blockmap_value_at(m, GH_AUDIT_DIM_EVENT, 7));
	/* damage: a row under a second value of a column, a bad encoding */
	T_EQ_INT(gh_audit_blockmap_load(m, GH_AUDIT_DIM_TOOL, "get_weather", 11, two + 2, 2, &why),
		 -1);
	T_CONTAINS(why, "two values");
	T_EQ_INT(gh_audit_blockmap_load(m, GH_AUDIT_DIM_AGENT, "a", 1, bad, 4, &why), -1);
	T_CONTAINS(why, "malformed");
	T_EQ_INT(gh_audit_blockmap_load(m, GH_AUDIT_DIM_AGENT, "a", 1, two, 3, &why), -1);
	T_EQ_INT(gh_audit_blockmap_load(m, 0, "a", 1, two, 2, &why), -1);
	T_EQ_INT(gh_audit_blockmap_load(m, GH_AUDIT_DIM_LAST + 1, "a", 1, two, 2, &why), -1);
	/* another block starts empty */
	gh_audit_blockmap_reset(m);
	T_ASSERT(!gh_audit_blockmap_value_at(m, GH_AUDIT_DIM_TOOL, 7));
	T_EQ_INT(gh_audit_blockmap_load(m, GH_AUDIT_DIM_TOOL, "get_weather", 11, two, 4, &why), 0);
	T_EQ_STR(gh_audit_blockmap_value_at(m, GH_AUDIT_DIM_TOOL, 9), "get_weather");
	gh_audit_blockmap_free(m);
	gh_audit_blockmap_free(NULL);
}

/* ------------------------------------------------- a multi-block log */

#define APPENDERS 4
#define PER_APPENDER 3100     /* 12,400 rows: three full blocks and a tail */
#define NROWS (APPENDERS * PER_APPENDER)

static const char *const events[] = {"executed", "failed", "denied", "pending", "approved"};
static const char *const outcomes[] = {"ok", "error", "denied"};

struct appender {
	struct gh_store *s;
	int id, failures;
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

/* Values are skewed and correlated, like a real log: some combinations are
 * common, many are rare, some never happen. */
static void *append_rows(void *arg)
{
	struct appender *a = arg;
	int i;

	for (i = 0; i < PER_APPENDER; i++) {
		struct gh_audit_event ev = {0};
		struct gh_err e;
		uint64_t r = mix((uint64_t)a->id * 100003 + (uint64_t)i);
		char key[16], agent[16], thread[16], run[16], tool[16], owner[16];
		int k = (int)(r % 100) < 60 ? (int)(r >> 8) % 3 : (int)(r >> 8) % 12;

		snprintf(key, sizeof(key), "key_%d", k);
		snprintf(owner, sizeof(owner), "owner_%d", k / 4);
		snprintf(agent, sizeof(agent), "agent_%d", (int)(r >> 16) % 3);
		snprintf(thread, sizeof(thread), "thr_%d_%d", a->id, i / 40);
		snprintf(run, sizeof(run), "run_%d_%d", a->id, i / 3);
		snprintf(tool, sizeof(tool), "tool_%d", (int)((r >> 24) % 100) < 50
							   ? (int)(r >> 32) % 2
							   : (int)(r >> 32) % 20);
		ev.key_id = key;
		ev.owner = owner;
		ev.agent_id = agent;
		ev.thread_id = (r >> 40) % 10 ? thread : NULL;
		ev.run_id = run;
		ev.tool_name = (r >> 44) % 17 ? tool : NULL;
		ev.event = events[(r >> 48) % 5 < 3 ? 0 : (r >> 50) % 5];
		ev.outcome = outcomes[(r >> 52) % 3];
		ev.args = "{}";
		ev.duration_ms = -1;
		ev.ts = INT64_C(1795000000000) + (int64_t)a->id * 7 + (int64_t)i * 1000;
		if (gh_store_audit_append(a->s, &ev, NULL, &e) != GH_OK)
			a->failures++;
	}
	return NULL;
}

/* The whole log in memory, for answers computed the slow, obvious way. */
struct mrow {
	int64_t seq, ts;
	char v[GH_AUDIT_DIM_LAST + 1][24];
};

struct mlog {
	struct mrow *r;
	size_t n, cap;
};

static int collect_row(void *ud, const struct gh_audit_row *row)
{
	struct mlog *m = ud;
	struct mrow *x;
	int d;

	if (m->n == m->cap) {
		size_t nc = m->cap ? m->cap * 2 : 4096;
		struct mrow *p = realloc(m->r, nc * sizeof(*p));

		if (!p)
			return 1;
		m->r = p;
		m->cap = nc;
	}
	x = &m->r[m->n++];
	x->seq = row->seq;
	x->ts = row->ev->ts;
	for (d = 1; d <= GH_AUDIT_DIM_LAST; d++) {
		const char *v = gh_audit_dim_value(row->ev, d);

		gh_strlcpy(x->v[d], v ? v : "", sizeof(x->v[d]));
	}
	return 0;
}

static int load_log(struct gh_store *s, struct mlog *m)
{
	struct gh_err e;

	m->n = 0;
	return gh_store_audit_scan(s, 1, 0, collect_row, m, &e) == GH_OK ? 0 : -1;
}

static const char *filter_val(const struct gh_audit_filter *f, int d)
{
	switch (d) {
	case GH_AUDIT_DIM_KEY: return f->key_id;
	case GH_AUDIT_DIM_AGENT: return f->agent_id;
	case GH_AUDIT_DIM_THREAD: return f->thread_id;
	case GH_AUDIT_DIM_RUN: return f->run_id;
	case GH_AUDIT_DIM_TOOL: return f->tool_name;
	case GH_AUDIT_DIM_EVENT: return f->event;
	case GH_AUDIT_DIM_OUTCOME: return f->outcome;
	default: return f->owner;
	}
}

static int matches(const struct mrow *x, const struct gh_audit_filter *f)
{
	int d;

	if (f->from_ms > 0 && x->ts < f->from_ms)
		return 0;
	if (f->to_ms > 0 && x->ts >= f->to_ms)
		return 0;
	for (d = 1; d <= GH_AUDIT_DIM_LAST; d++) {
		const char *v = filter_val(f, d);

		if (v && *v && strcmp(v, x->v[d]) != 0)
			return 0;
	}
	return 1;
}

struct got {
	int64_t seq[128];
	int n;
};

static int got_row(void *ud, const struct gh_audit_row *r)
{
	struct got *g = ud;

	if (g->n < (int)GH_ARRAY_LEN(g->seq))
		g->seq[g->n++] = r->seq;
	return 0;
}

static void set_filter(struct gh_audit_filter *f, int d, const char *v)
{
	switch (d) {
	case GH_AUDIT_DIM_KEY: f->key_id = v; break;
	case GH_AUDIT_DIM_AGENT: f->agent_id = v; break;
	case GH_AUDIT_DIM_THREAD: f->thread_id = v; break;
	case GH_AUDIT_DIM_RUN: f->run_id = v; break;
	case GH_AUDIT_DIM_TOOL: f->tool_name = v; break;
	case GH_AUDIT_DIM_EVENT: f->event = v; break;
	case GH_AUDIT_DIM_OUTCOME: f->outcome = v; break;
	default: f->owner = v; break;
	}
}

/* nq random pages (filters taken from real rows, sometimes a value no row
 * has; time ranges; cursors; both directions) must equal the brute-force
 * answer, row for row, and so must the next cursor. Returns the number of
 * pages that had rows, or -1 after reporting a difference. */
static int check_pages(struct gh_store *s, const struct mlog *m, int nq, uint64_t seed)
{
	int q, nonempty = 0;

	for (q = 0; q < nq; q++) {
		struct gh_audit_filter f;
		struct gh_err e;
		struct got g = {{0}, 0};
		uint64_t r = mix(seed + (uint64_t)q);
		const struct mrow *pick = &m->r[r % m->n];
		int nf = 1 + (int)((r >> 20) % 3), limit = 1 + (int)((r >> 24) % 60), i, want = 0;
		int asc = (int)((r >> 30) & 1), more = 0;
		int64_t cursor = 0, next = -1, expect[128], last = 0;

		/* cursors that seek at once, after a step, or step along */
		store_audit_steps_before_seek = q % 3 == 0 ? 0 : q % 3 == 1 ? 1 : 8;
		memset(&f, 0, sizeof(f));
		for (i = 0; i < nf; i++) {
			int d = 1 + (int)((r >> (32 + 4 * i)) % GH_AUDIT_DIM_LAST);

			set_filter(&f, d, pick->v[d]);
		}
		if ((r >> 44) % 13 == 0)
			f.tool_name = "tool_none";
		if ((r >> 48) % 4 == 0) {
			f.from_ms = m->r[(r >> 8) % m->n].ts;
			f.to_ms = f.from_ms + 1 + (int64_t)((r >> 52) % 4000000);
		}
		if ((r >> 56) % 3 == 0)
			cursor = m->r[(r >> 12) % m->n].seq;
		/* the expected page */
		if (!asc) {
			for (i = (int)m->n - 1; i >= 0; i--) {
				const struct mrow *x = &m->r[i];

				if ((cursor && x->seq >= cursor) || !matches(x, &f))
					continue;
				if (want == limit) {
					more = 1;
					break;
				}
				expect[want++] = x->seq;
			}
		} else {
			for (i = 0; i < (int)m->n; i++) {
				const struct mrow *x = &m->r[i];

				if ((cursor && x->seq <= cursor) || !matches(x, &f))
					continue;
				if (want == limit) {
					more = 1;
					break;
				}
				expect[want++] = x->seq;
			}
		}
		if (gh_store_audit_query(s, &f, cursor, limit, asc, got_row, &g, &next, &e) !=
		    GH_OK) {
			fprintf(stderr, "  query %d: %s\n", q, e.msg);
			return -1;
		}
		if (want)
			last = expect[want - 1];
		if (g.n != want || memcmp(g.seq, expect, sizeof(int64_t) * (size_t)want) != 0 ||
		    next != (more ? last : 0)) {
			fprintf(stderr, "  query %d (key %s agent %s thread %s run %s tool %s event %s "
				"outcome %s owner %s, from %lld to %lld, cursor %lld, limit %d, %s): "
				"%d rows, expected %d; next %lld, expected %lld\n", q,
				f.key_id ? f.key_id : "-", f.agent_id ? f.agent_id : "-",
				f.thread_id ? f.thread_id : "-", f.run_id ? f.run_id : "-",
				f.tool_name ? f.tool_name : "-", f.event ? f.event : "-",
				f.outcome ? f.outcome : "-", f.owner ? f.owner : "-",
				(long long)f.from_ms, (long long)f.to_ms, (long long)cursor, limit,
				asc ? "oldest first" : "newest first", g.n, want, (long long)next,
				(long long)(more ? last : 0));
			return -1;
		}
		nonempty += want > 0;
	}
	store_audit_steps_before_seek = 8;
	return nonempty;
}

static int64_t sql_int(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int64_t v = -1;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

static int sql_exec(const char *path, const char *sql)
{
	sqlite3 *db = NULL;
	int rc = -1;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK)
		rc = sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
	sqlite3_close(db);
	return rc;
}

static int fill(struct t_store *t)
{
	struct appender a[APPENDERS];
	pthread_t th[APPENDERS];
	int i, failures = 0;

	for (i = 0; i < APPENDERS; i++) {
		a[i].s = t->s;
		a[i].id = i;
		a[i].failures = 0;
		pthread_create(&th[i], NULL, append_rows, &a[i]);
	}
	for (i = 0; i < APPENDERS; i++) {
		pthread_join(th[i], NULL);
		failures += a[i].failures;
	}
	return failures;
}

/* The writer indexes blocks by itself; wait (bounded) until it has. */
static int wait_indexed(const char *path, int64_t blocks)
{
	int i;

	for (i = 0; i < 500; i++) {
		if (sql_int(path, "SELECT next_blk FROM audit_index_state") >= blocks)
			return 0;
		nanosleep(&(struct timespec){0, 10000000}, NULL);
	}
	return -1;
}

static void test_pages_match_brute_force(void)
{
	struct t_store t;
	struct gh_err e;
	struct gh_audit_verify rep;
	struct mlog m = {0};
	int n;

	T_EQ_INT(t_store_open(&t), 0);
	T_EQ_INT(fill(&t), 0);
	/* on PostgreSQL every page comes from SQL over its plain indexes */
	if (!t_store_sqlite_only("the block index's state and postings")) {
		T_EQ_INT(wait_indexed(t.path, 3), 0);
		/* three whole blocks indexed, the tail (12288..12400) not */
		T_EQ_INT(sql_int(t.path, "SELECT next_blk FROM audit_index_state"), 3);
		T_EQ_INT(sql_int(t.path, "SELECT max(blk) FROM audit_postings"), 2);
	}
	T_EQ_INT(load_log(t.s, &m), 0);
	T_EQ_INT(m.n, NROWS);
	n = check_pages(t.s, &m, 600, 1);
	if (n < 0) {
		free(m.r);
		t_store_close(&t);
		T_FAIL("a page differs from the brute-force answer");
	}
	/* the check is not vacuous: most pages had rows */
	T_ASSERT(n > 300);
	/* every page of one filter, followed to the end, is every match once */
	{
		struct gh_audit_filter f = {0};
		struct got g;
		int64_t cursor = 0, next, total = 0, expect = 0;
		size_t i;

		f.key_id = "key_1";
		f.event = "failed";
		for (i = 0; i < m.n; i++)
			expect += matches(&m.r[i], &f);
		do {
			g.n = 0;
			T_EQ_INT(gh_store_audit_query(t.s, &f, cursor, 7, 0, got_row, &g, &next, &e),
				 GH_OK);
			total += g.n;
			cursor = next;
		} while (next);
		if (expect < 20)
			T_FAIL("only %lld rows match: too few to page through", (long long)expect);
		T_EQ_INT(total, expect);
	}
	/* verify checks every indexed row against the index */
	T_EQ_INT(gh_audit_verify(t.s, NULL, &rep, &e), GH_OK);
	if (!rep.ok)
		T_FAIL("verify: %s / %s", rep.message, rep.index_message);
	T_EQ_INT(rep.index_blocks, t_store_pg() ? 0 : 3);
	free(m.r);
	t_store_close(&t);
}

static void test_verify_finds_index_damage(void)
{
	static const struct {
		const char *sql, *says;
	} damage[] = {
		/* a value's postings gone: its rows vanish from filtered pages */
		{"DELETE FROM audit_postings WHERE blk = 1 AND dim = 1 AND val = 'key_0'",
		 "missing from the filter index under key_id"},
		/* postings moved to another value */
		{"UPDATE audit_postings SET val = 'key_x' WHERE blk = 0 AND dim = 5 AND "
		 "val = 'tool_1'",
		 "missing from the filter index under tool_name"},
		/* a row listed under a second value of one column */
		{"INSERT INTO audit_postings (blk, dim, val, rows) VALUES (2, 1, 'key_zz', "
		 "X'0100')",
		 "a row is listed under two values of one column"},
		/* a row without a thread listed under one (NULL: made below) */
		{NULL, "under a thread_id it does not have"},
		/* a row set that does not decode */
		{"UPDATE audit_postings SET rows = X'01' WHERE blk = 2 AND dim = 6 AND "
		 "val = 'executed'",
		 "is damaged: an entry is malformed"},
	};
	struct t_store t;
	struct gh_err e;
	struct gh_audit_verify rep;
	struct mlog m = {0};
	size_t i;

	if (t_store_sqlite_only("the block index"))
		return;

	gh_log_set_level(GH_LOG_WARN);
	T_EQ_INT(t_store_open(&t), 0);
	T_EQ_INT(fill(&t), 0);
	T_EQ_INT(wait_indexed(t.path, 3), 0);
	T_EQ_INT(load_log(t.s, &m), 0);
	for (i = 0; i < GH_ARRAY_LEN(damage); i++) {
		struct gh_audit_filter f = {0};
		struct got g = {{0}, 0};
		int64_t next;

		char sql[256];

		gh_store_close(t.s);
		t.s = NULL;
		if (!damage[i].sql) {
			int64_t seq = sql_int(t.path, "SELECT min(seq) FROM audit_events WHERE "
						      "thread_id IS NULL AND seq >= 4096");

			T_ASSERT(seq >= 4096 && seq < 8192);
			snprintf(sql, sizeof(sql), "INSERT INTO audit_postings (blk, dim, val, rows) "
				 "VALUES (1, 3, 'thr_zz', X'%02x%02x')", (unsigned)(seq & 0xff),
				 (unsigned)((seq >> 8) & 0x0f));
		} else {
			gh_strlcpy(sql, damage[i].sql, sizeof(sql));
		}
		T_EQ_INT(sql_exec(t.path, sql), 0);
		T_EQ_INT(t_store_reopen(&t, 0, 0, &e), GH_OK);
		T_EQ_INT(gh_audit_verify(t.s, NULL, &rep, &e), GH_OK);
		if (rep.ok || rep.index_ok || !rep.chain_ok) {
			free(m.r);
			t_store_close(&t);
			T_FAIL("damage %zu not reported (ok %d, index_ok %d, chain_ok %d)", i,
			       rep.ok, rep.index_ok, rep.chain_ok);
		}
		T_CONTAINS(rep.index_message, damage[i].says);
		/* a bogus posting never puts a wrong row on a page */
		f.key_id = "key_zz";
		T_EQ_INT(gh_store_audit_query(t.s, &f, 0, 50, 0, got_row, &g, &next, &e), GH_OK);
		T_EQ_INT(g.n, 0);
		/* reindex repairs it: verify passes and pages are right again */
		T_EQ_INT(gh_store_audit_reindex(t.s, 1, NULL, NULL, &e), GH_OK);
		T_EQ_INT(gh_audit_verify(t.s, NULL, &rep, &e), GH_OK);
		if (!rep.ok)
			T_FAIL("after reindex: %s", rep.index_message);
		T_EQ_INT(rep.index_blocks, 3);
	}
	if (check_pages(t.s, &m, 200, 2) < 0)
		T_FAIL("a page differs after reindexing");
	free(m.r);
	gh_log_set_level(GH_LOG_INFO);
	t_store_close(&t);
}

/* An index that fell behind (a database upgraded with rows in it, blocks
 * completed by a CLI process) gives the same pages, and the server catches
 * up by itself. */
static void test_index_catches_up(void)
{
	struct t_store t;
	struct gh_err e;
	struct mlog m = {0};

	if (t_store_sqlite_only("the block index"))
		return;

	T_EQ_INT(t_store_open(&t), 0);
	T_EQ_INT(fill(&t), 0);
	T_EQ_INT(wait_indexed(t.path, 3), 0);
	T_EQ_INT(load_log(t.s, &m), 0);
	gh_store_close(t.s);
	t.s = NULL;
	T_EQ_INT(sql_exec(t.path, "DELETE FROM audit_postings WHERE blk >= 1; "
				  "UPDATE audit_index_state SET next_blk = 1"), 0);
	/* read-only: nothing indexes, queries scan the rest */
	{
		struct gh_store_opts o = {0};

		o.path = t.path;
		o.readers = 2;
		o.busy_timeout_ms = 5000;
		o.readonly = 1;
		T_EQ_INT(gh_store_open(&o, &t.s, &e), GH_OK);
	}
	if (check_pages(t.s, &m, 200, 3) < 0)
		T_FAIL("a page differs with the index one block in");
	gh_store_close(t.s);
	t.s = NULL;
	T_EQ_INT(t_store_reopen(&t, 0, 0, &e), GH_OK);
	T_EQ_INT(wait_indexed(t.path, 3), 0);
	if (check_pages(t.s, &m, 200, 4) < 0)
		T_FAIL("a page differs after catching up");
	free(m.r);
	t_store_close(&t);
}

/* Retention cuts through a block: the blocks before go from the index, the
 * cut one is rebuilt from the rows that stay, and all still verifies. */
static void test_prune_across_blocks(void)
{
	struct t_store t;
	struct gh_err e;
	struct gh_audit_verify rep;
	struct mlog m = {0};
	int64_t deleted = 0, cutoff;

	if (t_store_sqlite_only("the block index"))
		return;

	gh_log_set_level(GH_LOG_WARN);
	T_EQ_INT(t_store_dir(&t), 0);
	T_EQ_INT(t_store_reopen(&t, 1, 500, &e), GH_OK);
	T_EQ_INT(fill(&t), 0);
	T_EQ_INT(wait_indexed(t.path, 3), 0);
	gh_store_close(t.s); /* signs the rest */
	T_EQ_INT(t_store_reopen(&t, 1, 500, &e), GH_OK);
	/* cut at row 6000's time: inside block 1 (rows 4096..8191) */
	T_EQ_INT(load_log(t.s, &m), 0);
	cutoff = m.r[5999].ts;
	T_EQ_INT(gh_store_audit_prune(t.s, cutoff, &deleted, &e), GH_OK);
	T_ASSERT(deleted > 4096 && deleted < 8192);
	T_EQ_INT(sql_int(t.path, "SELECT min(blk) FROM audit_postings"), 1);
	T_EQ_INT(gh_audit_verify(t.s, t.signer.pk, &rep, &e), GH_OK);
	if (!rep.ok)
		T_FAIL("after pruning: %s / %s", rep.message, rep.index_message);
	T_EQ_INT(rep.index_blocks, 2);
	T_EQ_INT(load_log(t.s, &m), 0);
	T_EQ_INT((int64_t)m.n, NROWS - deleted);
	if (check_pages(t.s, &m, 300, 5) < 0)
		T_FAIL("a page differs after pruning");
	free(m.r);
	gh_log_set_level(GH_LOG_INFO);
	t_store_close(&t);
}

T_MAIN(T(test_rows_encoding), T(test_rows_walk), T(test_blockidx), T(test_blockmap),
       T(test_pages_match_brute_force), T(test_verify_finds_index_damage),
       T(test_index_catches_up), T(test_prune_across_blocks))
