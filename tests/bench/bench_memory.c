/*
 * bench_memory.c - memory_search as the store runs it, against a database
 * holding many users' memories: how long one user's search takes as the
 * other users' memories grow, with each word indexed under its owner's and
 * resource's scope (memories_fts, store_fts.c) and, side by side on the
 * same database, with the one shared index gatehouse kept before (FTS5 over
 * memories' own text, porter unicode61, the search joined to memories for
 * owner and resource).
 *
 * Per size N: a fresh SQLite store (gh_store_open, as the server opens it)
 * gets the shared index and its trigger (on a connection of the bench's
 * own), then N memories spread evenly over --owners owners, each saved as
 * the server saves one, so that both indexes grow the same way. Each memory
 * is a sentence of words drawn from a shared vocabulary, so that most words
 * are in many users' memories, as everyday words are. Each repetition times
 * --searches searches, owners taken in turn, the query "favourite colour"
 * (both words common):
 *   scoped       gh_store_memory_search (the server's path: a reader, the
 *                statement, the JSON of the results);
 *   scoped-sql   the scoped statement alone, on the bench's connection;
 *   shared-sql   the statement of before on the shared index, on the same
 *                connection.
 * The two -sql rows run the same way, so their ratio is the index's.
 * Tables show medians over repetitions; on the first, every owner's search
 * must find the same memories both ways (up to ties at the limit).
 */
#include <sqlite3.h>

#include <cjson/cJSON.h>

#include "log.h"
#include "store.h"
#include "store_sqlite.h"
#include "util.h"

#include "bench.h"

#define MAX_SIZES 8
#define MAX_REPS 20
#define LIMIT 5

static const char *const vocab[] = {
	"favourite", "colour", "blue",    "green",   "tea",     "coffee",  "morning", "meeting",
	"project",   "deadline", "likes", "prefers", "email",   "phone",   "address", "birthday",
	"daughter",  "son",     "travel", "flight",  "hotel",   "budget",  "report",  "weekly",
	"music",     "jazz",    "book",   "reading", "garden",  "dog",     "cat",     "allergy",
	"vegetarian", "lunch",  "team",   "manager", "language", "french", "spanish", "city",
};

struct opts {
	int sizes[MAX_SIZES];
	int nsizes;
	int64_t owners;
	int64_t searches;
	int64_t reps;
};

#define SHARED_SQL                                                                            \
	"SELECT m.id FROM shared_fts JOIN memories m ON m.id = shared_fts.rowid "             \
	"WHERE shared_fts MATCH ?3 AND m.owner = ?1 AND m.resource_id = ?2 "                \
	"ORDER BY bm25(shared_fts) LIMIT ?4"
#define SCOPED_SQL                                                                            \
	"SELECT m.id FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid "         \
	"WHERE memories_fts MATCH gh_memory_match(?1, ?2, ?3) AND m.owner = ?1 "              \
	"AND m.resource_id = ?2 ORDER BY bm25(memories_fts) LIMIT ?4"

static void owner_name(int64_t i, char *out, size_t cap)
{
	bench_fmt(out, cap, "owner-%05lld", (long long)i);
}

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Saves n memories, memory i owner i % owners's, each as the server saves
 * one (a job, a savepoint, of its own: FTS5 writes a segment per
 * savepoint and merges them as they pile up). */
static void seed(struct gh_store *s, int64_t n, int64_t owners)
{
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	char owner[32], text[512];
	struct gh_err e;
	int64_t i;

	for (i = 0; i < n; i++) {
		size_t len = 0;
		int w, words = 6 + (int)(next_rand(&rng) % 10);

		for (w = 0; w < words && len + 32 < sizeof(text); w++)
			len += (size_t)snprintf(text + len, sizeof(text) - len, "%s%s", w ? " " : "",
						vocab[next_rand(&rng) % (sizeof(vocab) / sizeof(vocab[0]))]);
		owner_name(i % owners, owner, sizeof(owner));
		if (gh_store_memory_save(s, owner, "default", text, "note", NULL, &e) != GH_OK)
			bench_die("seeding: %s", e.msg);
	}
}

static sqlite3_stmt *prepare(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		bench_die("prepare: %s", sqlite3_errmsg(db));
	return st;
}

/* Runs st for owner: the ids found, in order, into ids (at most LIMIT). */
static int run_sql(sqlite3_stmt *st, const char *owner, const char *match, int64_t *ids)
{
	int n = 0, rc;

	sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, "default", -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, match, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 4, LIMIT);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		if (n < LIMIT)
			ids[n++] = sqlite3_column_int64(st, 0);
	if (rc != SQLITE_DONE)
		bench_die("search: %s", sqlite3_errmsg(sqlite3_db_handle(st)));
	sqlite3_reset(st);
	return n;
}

struct row {
	double us[3][MAX_REPS];    /* scoped, scoped-sql, shared-sql */
	int64_t found;             /* memories the first repetition found */
	double seed_s;
};

static void run_size(const struct opts *o, int n, struct row *r)
{
	char dir[256], path[300], owner[32];
	struct gh_store_opts so;
	struct gh_store *s = NULL;
	struct gh_err e;
	sqlite3 *db;
	sqlite3_stmt *scoped, *shared;
	int64_t t0, i, rep;

	bench_tmpdir(dir, sizeof(dir), "memory");
	bench_fmt(path, sizeof(path), "%s/gatehouse.db", dir);
	memset(&so, 0, sizeof(so));
	so.path = path;
	so.readers = 2;
	so.busy_timeout_ms = 5000;
	so.group_commit_max = 64;
	so.threaded = 1;
	if (gh_store_open(&so, &s, &e) != GH_OK)
		bench_die("store: %s", e.msg);
	/* the shared index kept up by a trigger, as gatehouse kept it, so
	 * that it grows segment by segment alongside memories_fts */
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
		bench_die("%s: %s", path, sqlite3_errmsg(db));
	sqlite3_busy_timeout(db, 5000);
	if (store_fts_register(db, &e) != 0)
		bench_die("%s", e.msg);
	if (sqlite3_exec(db,
			 "CREATE VIRTUAL TABLE shared_fts USING fts5 (content, tags, "
			 "content = 'memories', content_rowid = 'id', tokenize = 'porter unicode61');"
			 "CREATE TRIGGER shared_ai AFTER INSERT ON memories BEGIN "
			 "INSERT INTO shared_fts (rowid, content, tags) "
			 "VALUES (new.id, new.content, new.tags); END",
			 NULL, NULL, NULL) != SQLITE_OK)
		bench_die("shared index: %s", sqlite3_errmsg(db));
	t0 = bench_ns();
	seed(s, n, o->owners);
	r->seed_s = (double)(bench_ns() - t0) / 1e9;

	scoped = prepare(db, SCOPED_SQL);
	shared = prepare(db, SHARED_SQL);

	r->found = 0;
	for (rep = 0; rep < o->reps; rep++) {
		int64_t ids_a[LIMIT], ids_b[LIMIT], t;

		/* the server's path */
		t = bench_ns();
		for (i = 0; i < o->searches; i++) {
			cJSON *out = NULL;

			owner_name(i % o->owners, owner, sizeof(owner));
			if (gh_store_memory_search(s, owner, "default", "favourite colour", LIMIT, &out,
						   &e) != GH_OK)
				bench_die("search: %s", e.msg);
			cJSON_Delete(out);
		}
		r->us[0][rep] = (double)(bench_ns() - t) / 1e3 / (double)o->searches;
		/* the statements alone, the same way */
		t = bench_ns();
		for (i = 0; i < o->searches; i++) {
			owner_name(i % o->owners, owner, sizeof(owner));
			run_sql(scoped, owner, "favourite colour", ids_a);
		}
		r->us[1][rep] = (double)(bench_ns() - t) / 1e3 / (double)o->searches;
		t = bench_ns();
		for (i = 0; i < o->searches; i++) {
			owner_name(i % o->owners, owner, sizeof(owner));
			run_sql(shared, owner, "\"favourite\" OR \"colour\"", ids_b);
		}
		r->us[2][rep] = (double)(bench_ns() - t) / 1e3 / (double)o->searches;
		if (rep == 0) /* both find the same memories, whatever their order */
			for (i = 0; i < o->owners && i < o->searches; i++) {
				int na, nb, k, j;

				owner_name(i, owner, sizeof(owner));
				na = run_sql(scoped, owner, "favourite colour", ids_a);
				nb = run_sql(shared, owner, "\"favourite\" OR \"colour\"", ids_b);
				if (na != nb)
					bench_die("%s: %d memories found scoped, %d shared", owner,
						  na, nb);
				for (k = 0; k < na; k++) {
					for (j = 0; j < nb && ids_b[j] != ids_a[k]; j++)
						;
					if (j == nb && na == LIMIT)
						continue; /* ties at the limit may differ */
					if (j == nb)
						bench_die("%s: memory %lld found scoped only", owner,
							  (long long)ids_a[k]);
				}
				r->found += na;
			}
	}
	sqlite3_finalize(scoped);
	sqlite3_finalize(shared);
	sqlite3_close(db);
	gh_store_close(s);
	bench_rmrf(dir);
}

int main(int argc, char **argv)
{
	struct opts o = {{1000, 10000, 50000}, 3, 1000, 2000, 5};
	struct row rows[MAX_SIZES];
	int i;

	bench_init();
	gh_log_set_level(GH_LOG_WARN); /* not a line per migration per size */
	for (i = 1; i < argc; i++) {
		const char *v;

		if ((v = bench_opt(argc, argv, &i, "--memories")))
			o.nsizes = bench_nums(v, o.sizes, MAX_SIZES, 0, 10000000, "--memories");
		else if ((v = bench_opt(argc, argv, &i, "--owners")))
			o.owners = bench_num(v, 1, 1000000, "--owners");
		else if ((v = bench_opt(argc, argv, &i, "--searches")))
			o.searches = bench_num(v, 1, 10000000, "--searches");
		else if ((v = bench_opt(argc, argv, &i, "--reps")))
			o.reps = bench_num(v, 1, MAX_REPS, "--reps");
		else
			bench_die("usage: bench_memory [--memories 1000,10000,50000] [--owners 1000]\n"
				  "       [--searches 2000] [--reps 5]");
	}
	printf("bench_memory: one user's memory_search (\"favourite colour\", limit %d) among "
	       "%lld users' memories\n",
	       LIMIT, (long long)o.owners);
	bench_print_host();
	printf("%d size(s), %lld searches per repetition, %lld repetitions (us per search, "
	       "median over repetitions)\n\n",
	       o.nsizes, (long long)o.searches, (long long)o.reps);
	printf("  memories  per user |   scoped  scoped-sql  shared-sql | shared/scoped | "
	       "found  seed s\n");
	for (i = 0; i < o.nsizes; i++) {
		struct row *r = &rows[i];
		double a, b, c;

		run_size(&o, o.sizes[i], r);
		a = bench_median(r->us[0], (size_t)o.reps);
		b = bench_median(r->us[1], (size_t)o.reps);
		c = bench_median(r->us[2], (size_t)o.reps);
		printf("  %8d  %8.1f | %8.1f  %10.1f  %10.1f | %12.1fx | %5lld  %6.1f\n",
		       o.sizes[i], (double)o.sizes[i] / (double)o.owners, a, b, c, b > 0 ? c / b : 0,
		       (long long)r->found, r->seed_s);
		fflush(stdout);
	}
	printf("\nscoped: gh_store_memory_search, as a tool call runs it; the -sql rows: the "
	       "statement alone\n(scoped index, and the shared index of before) on one "
	       "connection. shared/scoped is their ratio.\n");
	return 0;
}
