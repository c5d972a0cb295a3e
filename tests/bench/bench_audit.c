/*
 * bench_audit.c - the audit log at volume.
 *
 * 1. Ingest: many threads call gh_store_audit_append on a real store (WAL,
 *    group commit, signed checkpoints every 1000 rows) in a
 *    temp dir for a fixed time; events/s, transactions, jobs per
 *    transaction, the largest batch so far (the store's own counter), the
 *    append latency a caller sees, and the CPU the process and the store's
 *    housekeeping thread (which takes over committing when callers queue
 *    up) spend per event. The runs share one database, so it grows from
 *    one thread count to the next. For scale, the same rows are also
 *    inserted by one thread straight into SQLite in transactions of 1000
 *    (no hashing, no group commit): the ceiling the store's writer works
 *    under, with SQLite's defaults and with a bigger page cache and rarer
 *    WAL checkpoints. And one caller with the store in inline mode (no
 *    housekeeping thread, as the CLI runs it) against the threaded store:
 *    a lone caller commits its own batch either way, so the two should
 *    match.
 *
 * 2. A large log (default 10 million rows): the chain is started and ended
 *    by the store's own writer, and the rows in between are written by a
 *    bulk path in this file that computes the same hash chain with
 *    gh_audit_row_hash and signs a checkpoint every 1000 rows with the
 *    store's key; then the store builds the filter index over the loaded
 *    blocks (gh_store_audit_reindex, what a server does in the background
 *    for a database upgraded with rows in it). "gatehouse audit
 *    verify" must then find the whole log intact (that checks the bulk
 *    path), and its throughput is measured. Then one filtered page of
 *    GET /api/audit (newest first, limit 50, cursor) is timed over many
 *    random filters, through "gatehouse serve", and then the same pages in
 *    process through gh_store_audit_query for the SQL alone (after the
 *    server has had the database, as in production).
 *
 * 3. On PostgreSQL (--backend with pg and/or pg-sync): this program starts
 *    a server with tests/pg/pg_server.sh (fsync=on, shared_buffers=256MB;
 *    GH_BENCH_PG_SETTINGS replaces them) and runs the ingest of 1. on a
 *    database of its own (synchronous_commit=off for pg, on for pg-sync),
 *    with a raw ceiling of one connection inserting the same rows with a
 *    prepared INSERT in transactions of 1000. For pg the log of 2., made
 *    on SQLite as there (the bulk path is SQLite's), is moved into a new
 *    database by "gatehouse migrate --from sqlite:... --to ..." (timed; it
 *    verifies the log on both sides), and verify and the filtered pages
 *    are measured there the same way, through a "gatehouse serve" on
 *    PostgreSQL with the SQLite log's key files and witness.
 *
 * Mind the disk: 10 million rows take about 6 GB in the temp dir
 * (GH_BENCH_TMP, default /tmp), and on PostgreSQL about 9 GB more in the
 * cluster (GH_PG_TMP, default /tmp); both are removed at the end.
 *
 * Threading: ingest threads share the store (thread-safe); everything else
 * runs on the main thread, store_url included.
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <sys/file.h>
#include <sys/statvfs.h>

#include <cjson/cJSON.h>

#include "audit.h"
#include "audit_witness.h"
#include "audit_verify.h"
#include "log.h"
#include "store.h"
#include "util.h"

#include "bench_pg.h"

/* the PostgreSQL server's settings (see the README's Performance) */
#define PG_SETTINGS "fsync=on shared_buffers=256MB"

/* ------------------------------------------------------ the generator */

#define NKEYS 200
#define NAGENTS 20
#define NTOOLS 30

static const char *const tools[NTOOLS] = {
	"memory_search", "memory_save", "working_memory_update", "get_weather", "send_email",
	"search_docs", "create_ticket", "update_ticket", "get_customer", "list_orders",
	"refund_order", "get_invoice", "send_sms", "calendar_create", "calendar_list",
	"crm_lookup", "crm_update", "run_sql", "fetch_url", "translate",
	"summarize", "delete_file", "read_file", "write_file", "post_slack",
	"get_stock", "book_meeting", "approve_expense", "get_balance", "transfer_funds",
};

/* Events with their share in 1000 and outcome. */
static const struct {
	const char *event, *outcome;
	int share;
} events[] = {
	{"allowed", "allowed", 430},  {"executed", "ok", 400},
	{"failed", "error", 20},      {"denied", "denied", 30},
	{"rate_limited", "rate_limited", 15}, {"approval_requested", "pending", 25},
	{"approved", "approved", 18}, {"rejected", "rejected", 4},
	{"expired", "expired", 3},    {"client_result", "ok", 55},
};
#define NEVENTS ((int)GH_ARRAY_LEN(events))

struct gen {
	uint64_t rng;
	char keys[NKEYS][32];
	char owners[NKEYS / 4][16];
	char agents[NAGENTS][24];
	char run[32], thread[32], call[32];
	int run_left, thread_left, call_left;
	int64_t ts, step_ms;
	char args[200], detail[200];
};

static uint64_t rnd(struct gen *g)
{
	/* xorshift64* */
	g->rng ^= g->rng >> 12;
	g->rng ^= g->rng << 25;
	g->rng ^= g->rng >> 27;
	return g->rng * 2685821657736338717ULL;
}

/* An id as gatehouse makes them (the time, then random characters), for a
 * row written at ts (0: now); the same seed makes the same ids, so the
 * query side can name keys the load made (keys get a fixed time). */
static void rnd_id(struct gen *g, const char *prefix, char *out, size_t cap)
{
	unsigned char r[14];
	uint64_t a = rnd(g), b = rnd(g);

	if (cap < strlen(prefix) + 25)
		bench_die("id buffer too small");
	memcpy(r, &a, 8);
	memcpy(r + 8, &b, 6);
	gh_id_make(prefix, g->ts ? g->ts : gh_now_ms(), r, out, cap);
}

/* Skewed pick in [0, n): a few values take most of the traffic. */
static int skewed(struct gen *g, int n)
{
	double u = (double)(rnd(g) >> 11) / 9007199254740992.0;

	return (int)((double)n * u * u * u);
}

static void gen_init(struct gen *g, uint64_t seed, int64_t first_ts, int64_t step_ms)
{
	int i;

	memset(g, 0, sizeof(*g));
	g->rng = seed ? seed : 88172645463325252ULL;
	g->ts = INT64_C(1767225600000); /* keys were made on 2026-01-01 */
	for (i = 0; i < NKEYS; i++)
		rnd_id(g, "key_", g->keys[i], sizeof(g->keys[i]));
	for (i = 0; i < NKEYS / 4; i++)
		snprintf(g->owners[i], sizeof(g->owners[i]), "owner%02d", i);
	for (i = 0; i < NAGENTS; i++)
		snprintf(g->agents[i], sizeof(g->agents[i]), "agent-%02d", i);
	g->ts = first_ts;
	g->step_ms = step_ms;
}

/* The next row. Strings point into g (valid until the next call). ts 0
 * means "now" (the writer sets it). */
static void gen_event(struct gen *g, struct gh_audit_event *ev, int with_ts)
{
	int k = skewed(g, NKEYS), r = (int)(rnd(g) % 1000), e = 0, acc = 0, t;

	memset(ev, 0, sizeof(*ev));
	for (e = 0; e < NEVENTS - 1; e++) {
		acc += events[e].share;
		if (r < acc)
			break;
	}
	if (g->thread_left-- <= 0) {
		rnd_id(g, "thr_", g->thread, sizeof(g->thread));
		g->thread_left = 5 + (int)(rnd(g) % 40);
	}
	if (g->run_left-- <= 0) {
		rnd_id(g, "run_", g->run, sizeof(g->run));
		g->run_left = 1 + (int)(rnd(g) % 6);
	}
	if (g->call_left-- <= 0) {
		rnd_id(g, "call_", g->call, sizeof(g->call));
		g->call_left = 1;
	}
	t = skewed(g, NTOOLS);
	if (with_ts) {
		g->ts += (int64_t)(rnd(g) % (uint64_t)(2 * g->step_ms + 1));
		ev->ts = g->ts;
	}
	ev->event = events[e].event;
	ev->outcome = events[e].outcome;
	ev->key_id = g->keys[k];
	ev->owner = g->owners[k / 4];
	ev->agent_id = g->agents[k % NAGENTS];
	ev->thread_id = g->thread;
	ev->run_id = g->run;
	ev->tool_call_id = g->call;
	ev->tool_name = tools[t];
	ev->source = t < 3 ? "memory" : (t % 7 == 0 ? "client" : "server");
	snprintf(g->args, sizeof(g->args), "{\"query\":\"order %llu status\",\"limit\":%d}",
		 (unsigned long long)(rnd(g) % 1000000), 1 + (int)(rnd(g) % 20));
	ev->args = g->args;
	ev->duration_ms = !strcmp(ev->event, "executed") || !strcmp(ev->event, "failed")
				  ? (int64_t)(rnd(g) % 900)
				  : -1;
	if (!strcmp(ev->event, "executed")) {
		snprintf(g->detail, sizeof(g->detail),
			 "{\"result\":\"{\\\"ok\\\":true,\\\"count\\\":%d}\","
			 "\"surface\":\"openai\"}",
			 (int)(rnd(g) % 100));
		ev->detail = g->detail;
	} else {
		ev->detail = "{\"surface\":\"native\"}";
	}
	if (!strcmp(ev->event, "failed"))
		ev->error = "upstream tool answered HTTP 502";
	if (!strcmp(ev->event, "denied"))
		ev->reason = "policy \"default\": tools.deny \"delete_*\"";
}

/* ------------------------------------------------------------- ingest */

struct ingest {
	struct gh_store *store;
	int64_t deadline_ns;
	int64_t max_per_thread;
	atomic_int errors;
	pthread_barrier_t go;
};

struct ingest_thread {
	struct ingest *in;
	int id;
	int64_t *lat;
	int64_t n;
};

static void *ingest_main(void *arg)
{
	struct ingest_thread *t = arg;
	struct gen g;
	struct gh_audit_event ev;
	struct gh_err e;

	gen_init(&g, 1234567 + (uint64_t)t->id * 7919, 0, 0);
	pthread_barrier_wait(&t->in->go);
	while (t->n < t->in->max_per_thread) {
		int64_t t0 = bench_ns();

		if (t0 > t->in->deadline_ns)
			break;
		gen_event(&g, &ev, 0);
		if (gh_store_audit_append(t->in->store, &ev, NULL, &e) != GH_OK) {
			if (atomic_fetch_add(&t->in->errors, 1) == 0)
				fprintf(stderr, "bench: append failed: %s\n", e.msg);
			continue;
		}
		t->lat[t->n++] = bench_ns() - t0;
	}
	return NULL;
}

/* CPU time (ns) of every thread of this process but the main one, summed:
 * with the ingest threads joined, that is the store's housekeeping thread. */
static int64_t other_threads_cpu_ns(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int64_t n = 0;
	long tick = sysconf(_SC_CLK_TCK);

	while (d && (de = readdir(d))) {
		char path[PATH_MAX], buf[1024], *p;
		unsigned long long ut = 0, st = 0;
		int f;

		if (de->d_name[0] == '.' || strtol(de->d_name, NULL, 10) == (long)getpid())
			continue;
		bench_fmt(path, sizeof(path), "/proc/self/task/%s/stat", de->d_name);
		if (bench_read_file(path, buf, sizeof(buf)) < 0 || !(p = strrchr(buf, ')')))
			continue;
		for (f = 2; f < 14 && p; f++)
			p = strchr(p + 1, ' ');
		if (p && sscanf(p + 1, "%llu %llu", &ut, &st) == 2)
			n += (int64_t)((ut + st) * (1000000000ULL / (unsigned long long)tick));
	}
	if (d)
		closedir(d);
	return n;
}

struct ingest_result {
	double rate;            /* events/s */
	double seconds;
	int64_t events;
	uint64_t tx, max_batch;
	struct bench_stats lat; /* us */
	double cpu_us;          /* process CPU per event */
	double writer_us;       /* the housekeeping thread's CPU per event */
	double writer_load;     /* the housekeeping thread's CPU / wall time */
};

/* The witness of the store open_store signs with (one at a time). */
static struct gh_witness *bench_witness;

/* The PostgreSQL database the stores of this run are opened on instead
 * of their SQLite file (set while a PostgreSQL part runs); NULL: SQLite. */
static const char *store_url;

/* A store as serve runs it: signed checkpoints (sg, may be NULL), each
 * chained and witnessed in "<path>-witness". On store_url when set (with
 * serve's default pool of 16 connections), else in the file path. Closed
 * by close_store. */
static struct gh_store *open_store(const char *path, int threaded,
				   const struct gh_audit_signer *sg)
{
	struct gh_store_opts o;
	struct gh_store *s = NULL;
	struct gh_err e;

	memset(&o, 0, sizeof(o));
	o.path = path;
	o.url = store_url;
	o.pool_size = 16;
	o.readers = 4;
	o.busy_timeout_ms = 5000;
	o.group_commit_max = 2048;     /* the config's default */
	o.threaded = threaded;
	o.ckpt_rows = 1000;
	o.ckpt_ms = 60000;
	if (gh_store_open(&o, &s, &e) != GH_OK)
		bench_die("store %s: %s", store_url ? "on PostgreSQL" : path, e.msg);
	if (sg) {
		char wpath[PATH_MAX];
		struct gh_witness_opts wo;

		bench_fmt(wpath, sizeof(wpath), "%s-witness", path);
		memset(&wo, 0, sizeof(wo));
		wo.path = wpath;
		if (bench_witness || gh_witness_open(&wo, &bench_witness, &e) != GH_OK)
			bench_die("witness %s: %s", wpath, bench_witness ? "already open" : e.msg);
		gh_store_audit_sign_with(s, sg, gh_witness_on_checkpoint, bench_witness);
	}
	return s;
}

static void close_store(struct gh_store *s)
{
	gh_store_close(s);
	gh_witness_close(bench_witness);
	bench_witness = NULL;
}

static struct ingest_result ingest_run(struct gh_store *s, int threads, int64_t seconds,
				       int64_t max_events)
{
	struct ingest in;
	struct ingest_thread *t = calloc((size_t)threads, sizeof(*t));
	pthread_t *th = calloc((size_t)threads, sizeof(*th));
	struct gh_store_stats s0, s1;
	struct ingest_result res;
	int64_t t0, t1, total = 0, cpu0, wcpu0, k = 0, cap;
	int64_t *all;
	int i;

	if (!t || !th)
		bench_die("out of memory");
	memset(&in, 0, sizeof(in));
	memset(&res, 0, sizeof(res));
	in.store = s;
	in.max_per_thread = max_events / threads + 1;
	/* the latency log: at most ~200k appends/s per thread is plenty */
	cap = in.max_per_thread < seconds * 200000 ? in.max_per_thread : seconds * 200000;
	in.max_per_thread = cap;
	pthread_barrier_init(&in.go, NULL, (unsigned)threads + 1);
	for (i = 0; i < threads; i++) {
		t[i].in = &in;
		t[i].id = i;
		t[i].lat = malloc((size_t)cap * sizeof(int64_t));
		if (!t[i].lat || pthread_create(&th[i], NULL, ingest_main, &t[i]) != 0)
			bench_die("cannot start ingest thread %d", i);
	}
	gh_store_stats(s, &s0);
	cpu0 = bench_cpu_ns(getpid());
	wcpu0 = other_threads_cpu_ns();
	t0 = bench_ns();
	in.deadline_ns = t0 + seconds * 1000000000LL;
	pthread_barrier_wait(&in.go);
	for (i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	t1 = bench_ns();
	res.cpu_us = (double)(bench_cpu_ns(getpid()) - cpu0) / 1e3;
	res.writer_us = (double)(other_threads_cpu_ns() - wcpu0) / 1e3;
	res.writer_load = res.writer_us * 1e3 / (double)(t1 - t0);
	gh_store_stats(s, &s1);
	for (i = 0; i < threads; i++)
		total += t[i].n;
	all = malloc((size_t)(total ? total : 1) * sizeof(int64_t));
	if (!all)
		bench_die("out of memory");
	for (i = 0; i < threads; i++) {
		memcpy(all + k, t[i].lat, (size_t)t[i].n * sizeof(int64_t));
		k += t[i].n;
		free(t[i].lat);
	}
	res.events = total;
	res.seconds = (double)(t1 - t0) / 1e9;
	res.rate = (double)total / res.seconds;
	res.tx = s1.transactions - s0.transactions;
	res.max_batch = s1.max_batch;
	res.lat = bench_summary(all, (size_t)total, 1e3);
	res.cpu_us = total ? res.cpu_us / (double)total : 0;
	res.writer_us = total ? res.writer_us / (double)total : 0;
	if (atomic_load(&in.errors))
		fprintf(stderr, "bench: %d appends failed\n", atomic_load(&in.errors));
	pthread_barrier_destroy(&in.go);
	free(all);
	free(t);
	free(th);
	return res;
}

static const char insert_sql[] =
	"INSERT INTO audit_events (seq, ts, event, key_id, owner, admin_user, "
	"agent_id, thread_id, run_id, tool_call_id, tool_name, source, args, "
	"outcome, duration_ms, error, reason, detail, prev_hash, hash) "
	"VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";

static void bind_text(sqlite3_stmt *st, int i, const char *s)
{
	if (s)
		sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, i);
}

static void bind_row(sqlite3_stmt *st, int64_t seq, const struct gh_audit_event *ev,
		     const unsigned char *prev, const unsigned char *hash)
{
	sqlite3_bind_int64(st, 1, seq);
	sqlite3_bind_int64(st, 2, ev->ts);
	bind_text(st, 3, ev->event);
	bind_text(st, 4, ev->key_id);
	bind_text(st, 5, ev->owner);
	bind_text(st, 6, ev->admin_user);
	bind_text(st, 7, ev->agent_id);
	bind_text(st, 8, ev->thread_id);
	bind_text(st, 9, ev->run_id);
	bind_text(st, 10, ev->tool_call_id);
	bind_text(st, 11, ev->tool_name);
	bind_text(st, 12, ev->source);
	bind_text(st, 13, ev->args);
	bind_text(st, 14, ev->outcome);
	if (ev->duration_ms >= 0)
		sqlite3_bind_int64(st, 15, ev->duration_ms);
	else
		sqlite3_bind_null(st, 15);
	bind_text(st, 16, ev->error);
	bind_text(st, 17, ev->reason);
	bind_text(st, 18, ev->detail);
	sqlite3_bind_blob(st, 19, prev, GH_AUDIT_HASH_LEN, SQLITE_STATIC);
	sqlite3_bind_blob(st, 20, hash, GH_AUDIT_HASH_LEN, SQLITE_STATIC);
}

static void sql_exec(sqlite3 *db, const char *sql)
{
	char *msg = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
		bench_die("sqlite: %s: %s", sql, msg ? msg : sqlite3_errmsg(db));
}

/* One thread inserting the same kind of rows straight into SQLite (same
 * schema, synchronous=NORMAL, transactions of 1000), for `seconds`, with
 * the given page cache (KiB, 0 = SQLite's default) and WAL auto-checkpoint
 * (pages, 0 = default 1000). */
static double raw_sqlite_rate(const char *path, int64_t seconds, int64_t cache_kb,
			      int64_t autockpt)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	struct gen g;
	struct gh_audit_event ev;
	unsigned char h[GH_AUDIT_HASH_LEN] = {1};
	int64_t n = 0, t0, end, seq;

	if (sqlite3_open(path, &db) != SQLITE_OK)
		bench_die("sqlite open %s", path);
	sql_exec(db, "PRAGMA journal_mode = WAL");
	sql_exec(db, "PRAGMA synchronous = NORMAL");
	if (cache_kb > 0) {
		char pragma[64];

		bench_fmt(pragma, sizeof(pragma), "PRAGMA cache_size = -%lld", (long long)cache_kb);
		sql_exec(db, pragma);
	}
	if (autockpt > 0) {
		char pragma[64];

		bench_fmt(pragma, sizeof(pragma), "PRAGMA wal_autocheckpoint = %lld",
			  (long long)autockpt);
		sql_exec(db, pragma);
	}
	if (sqlite3_prepare_v2(db, "SELECT coalesce(max(seq), 0) FROM audit_events", -1, &st,
			       NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW)
		bench_die("sqlite: %s", sqlite3_errmsg(db));
	seq = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	if (sqlite3_prepare_v2(db, insert_sql, -1, &st, NULL) != SQLITE_OK)
		bench_die("sqlite: %s", sqlite3_errmsg(db));
	gen_init(&g, 42, gh_now_ms(), 1);
	t0 = bench_ns();
	end = t0 + seconds * 1000000000LL;
	while (bench_ns() < end) {
		int i;

		sql_exec(db, "BEGIN IMMEDIATE");
		for (i = 0; i < 1000; i++) {
			gen_event(&g, &ev, 1);
			bind_row(st, ++seq, &ev, h, h);
			if (sqlite3_step(st) != SQLITE_DONE)
				bench_die("sqlite insert: %s", sqlite3_errmsg(db));
			sqlite3_reset(st);
		}
		sql_exec(db, "COMMIT");
		n += 1000;
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return (double)n / ((double)(bench_ns() - t0) / 1e9);
}

/* One thread inserting the same kind of rows straight into PostgreSQL
 * (the store's schema, a prepared INSERT, transactions of 1000; no
 * hashing, no lock, no group commit) for `seconds`. */
static double raw_pg_rate(const char *url, int64_t seconds)
{
	static const char sql[] =
		"INSERT INTO audit_events (seq, ts, event, key_id, owner, admin_user, "
		"agent_id, thread_id, run_id, tool_call_id, tool_name, source, args, "
		"outcome, duration_ms, error, reason, detail, prev_hash, hash) "
		"VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20)";
	PGconn *c = bench_pg_connect(url);
	PGresult *r;
	struct gen g;
	struct gh_audit_event ev;
	char hex[3 + 2 * GH_AUDIT_HASH_LEN], num[3][24];
	const char *v[20];
	int64_t n = 0, t0, end, seq;
	int i;

	seq = bench_pg_int(url, "SELECT coalesce(max(seq), 0) FROM audit_events");
	memcpy(hex, "\\x", 2);
	for (i = 0; i < GH_AUDIT_HASH_LEN; i++)
		memcpy(hex + 2 + 2 * i, "01", 2);
	hex[2 + 2 * GH_AUDIT_HASH_LEN] = '\0';
	r = PQprepare(c, "ins", sql, 20, NULL);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		bench_die("PostgreSQL: prepare: %s", PQerrorMessage(c));
	PQclear(r);
	gen_init(&g, 42, gh_now_ms(), 1);
	t0 = bench_ns();
	end = t0 + seconds * 1000000000LL;
	while (bench_ns() < end) {
		PQclear(PQexec(c, "BEGIN"));
		for (i = 0; i < 1000; i++) {
			gen_event(&g, &ev, 1);
			snprintf(num[0], sizeof(num[0]), "%lld", (long long)++seq);
			snprintf(num[1], sizeof(num[1]), "%lld", (long long)ev.ts);
			snprintf(num[2], sizeof(num[2]), "%lld", (long long)ev.duration_ms);
			v[0] = num[0], v[1] = num[1], v[2] = ev.event, v[3] = ev.key_id;
			v[4] = ev.owner, v[5] = ev.admin_user, v[6] = ev.agent_id;
			v[7] = ev.thread_id, v[8] = ev.run_id, v[9] = ev.tool_call_id;
			v[10] = ev.tool_name, v[11] = ev.source, v[12] = ev.args, v[13] = ev.outcome;
			v[14] = ev.duration_ms >= 0 ? num[2] : NULL;
			v[15] = ev.error, v[16] = ev.reason, v[17] = ev.detail, v[18] = hex;
			v[19] = hex;
			r = PQexecPrepared(c, "ins", 20, v, NULL, NULL, 0);
			if (PQresultStatus(r) != PGRES_COMMAND_OK)
				bench_die("PostgreSQL insert: %s", PQerrorMessage(c));
			PQclear(r);
		}
		r = PQexec(c, "COMMIT");
		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			bench_die("PostgreSQL commit: %s", PQerrorMessage(c));
		PQclear(r);
		n += 1000;
	}
	PQfinish(c);
	return (double)n / ((double)(bench_ns() - t0) / 1e9);
}

/* Ingest on SQLite (pg NULL) or on a new database of pg's server, with
 * synchronous_commit as sync says. */
static void ingest_bench(const char *dir, const int *threads, int nthreads, int64_t seconds,
			 int64_t reps, const struct bench_pg *pg, int sync)
{
	char db[PATH_MAX], rawdb[PATH_MAX], keyf[PATH_MAX], url[1024], rawurl[1024];
	struct gh_audit_signer sg;
	struct gh_err e;
	struct gh_store *s;
	struct ingest_result r, one[2];
	double raw;
	int i;
	int64_t rep;

	bench_fmt(db, sizeof(db), "%s/ingest.db", dir);
	bench_fmt(rawdb, sizeof(rawdb), "%s/raw.db", dir);
	bench_fmt(keyf, sizeof(keyf), "%s/ingest.key", dir);
	if (gh_audit_signer_load(keyf, 1, &sg, &e) != GH_OK)
		bench_die("%s", e.msg);

	if (pg) {
		bench_pg_db(pg, "gh_bench_ingest", sync, url, sizeof(url));
		store_url = url;
		printf("\n== audit ingest on PostgreSQL %s: gh_store_audit_append from N threads, "
		       "%lld s per run, %lld runs per N (median shown; synchronous_commit=%s, "
		       "a pool of 16, checkpoints every 1000 rows)\n", pg->version,
		       (long long)seconds, (long long)reps, sync ? "on" : "off");
	} else {
		printf("\n== audit ingest: gh_store_audit_append from N threads, %lld s per run, "
		       "%lld runs per N (median shown; WAL, synchronous=NORMAL, checkpoints every "
		       "1000 rows)\n", (long long)seconds, (long long)reps);
	}
	printf("  (CPU us/ev: the whole process; hk us: the housekeeping thread's CPU per event "
	       "(it commits when callers queue up); hk: its share of one core)\n");
	printf("  %-8s %10s %8s %8s %9s %9s %9s %9s %9s %7s\n", "threads", "events/s", "tx/s",
	       "jobs/tx", "max batch", "p50 us", "p99 us", "CPU us/ev", "hk us", "hk");
	s = open_store(db, 1, &sg);
	for (i = 0; i < nthreads; i++) {
		double rate[64], txs[64], jpt[64], p50[64], p99[64], cpu[64], wus[64], wl[64];
		uint64_t maxb = 0;

		for (rep = 0; rep < reps && rep < 64; rep++) {
			r = ingest_run(s, threads[i], seconds, INT64_MAX / 4);
			rate[rep] = r.rate;
			txs[rep] = (double)r.tx / r.seconds;
			jpt[rep] = r.tx ? (double)r.events / (double)r.tx : 0;
			p50[rep] = r.lat.p50;
			p99[rep] = r.lat.p99;
			cpu[rep] = r.cpu_us;
			wus[rep] = r.writer_us;
			wl[rep] = r.writer_load;
			maxb = r.max_batch;
		}
		printf("  %-8d %10.0f %8.0f %8.1f %9llu %9.1f %9.1f %9.1f %9.1f %6.0f%%\n",
		       threads[i], bench_median(rate, (size_t)rep), bench_median(txs, (size_t)rep),
		       bench_median(jpt, (size_t)rep), (unsigned long long)maxb,
		       bench_median(p50, (size_t)rep), bench_median(p99, (size_t)rep),
		       bench_median(cpu, (size_t)rep), bench_median(wus, (size_t)rep),
		       100 * bench_median(wl, (size_t)rep));
		fflush(stdout);
	}
	{
		int64_t first, last, count;

		if (gh_store_audit_bounds(s, &first, &last, &count, &e) == GH_OK)
			printf("  rows written: %lld (seq %lld..%lld)\n", (long long)count,
			       (long long)first, (long long)last);
	}
	close_store(s);

	/* one caller: the threaded store against the inline one */
	s = open_store(db, 1, &sg);
	one[0] = ingest_run(s, 1, seconds < 5 ? seconds : 5, INT64_MAX / 4);
	close_store(s);
	s = open_store(db, 0, &sg);
	one[1] = ingest_run(s, 1, seconds < 5 ? seconds : 5, INT64_MAX / 4);
	close_store(s);
	printf("  one caller, threaded store: p50 %.1f us, p99 %.1f us, %.0f events/s\n",
	       one[0].lat.p50, one[0].lat.p99, one[0].rate);
	printf("  one caller, inline store:   p50 %.1f us, p99 %.1f us, %.0f events/s "
	       "(threaded minus inline at p50: %.1f us)\n",
	       one[1].lat.p50, one[1].lat.p99, one[1].rate, one[0].lat.p50 - one[1].lat.p50);

	if (pg) {
		char sql[96];

		/* the ceiling: the same rows inserted straight into PostgreSQL */
		bench_pg_db(pg, "gh_bench_raw", sync, rawurl, sizeof(rawurl));
		store_url = rawurl;
		s = open_store(rawdb, 0, NULL); /* schema only */
		close_store(s);
		store_url = NULL;
		raw = raw_pg_rate(rawurl, seconds < 5 ? seconds : 5);
		printf("  raw PostgreSQL, 1 connection, 1000 rows per transaction, a prepared "
		       "INSERT, same schema: %.0f rows/s\n", raw);
		for (i = 0; i < 2; i++) {
			bench_fmt(sql, sizeof(sql), "DROP DATABASE %s WITH (FORCE)",
				  i ? "gh_bench_raw" : "gh_bench_ingest");
			bench_pg_exec(pg->url, sql);
		}
		gh_audit_signer_wipe(&sg);
		unlink(keyf);
		return;
	}
	/* the ceiling: raw SQLite inserts of the same rows, with the store's
	 * settings and with a bigger page cache and rarer checkpoints */
	s = open_store(rawdb, 0, NULL); /* schema only */
	close_store(s);
	raw = raw_sqlite_rate(rawdb, seconds < 5 ? seconds : 5, 0, 0);
	printf("  raw SQLite, 1 thread, 1000 rows per transaction, same schema: %.0f rows/s\n",
	       raw);
	raw = raw_sqlite_rate(rawdb, seconds < 5 ? seconds : 5, 65536, 10000);
	printf("  the same with a 64 MB page cache and wal_autocheckpoint 10000: %.0f rows/s\n",
	       raw);
	gh_audit_signer_wipe(&sg);
	unlink(db);
	unlink(rawdb);
}

/* ------------------------------------------------------- the big log */

struct idx {
	char name[64];
	char sql[512];
};

/* Writes rows through the bulk path: same columns, same hash chain, a
 * signed checkpoint every ckpt_rows rows; indexes dropped during the load
 * and re-created from their own SQL. Holds the store's cross-process writer
 * lock throughout. */
static void bulk_load(const char *db_path, const struct gh_audit_signer *sg, int64_t rows,
		      int64_t ckpt_rows, int64_t first_ts, int64_t span_ms)
{
	char lock_path[PATH_MAX];
	sqlite3 *db;
	sqlite3_stmt *st, *ck;
	struct idx ix[32];
	int nix = 0, lockfd, i;
	int64_t seq, done = 0, t0 = bench_ns(), t1;
	unsigned char prev[GH_AUDIT_HASH_LEN], hash[GH_AUDIT_HASH_LEN], sig[64];
	unsigned char ck_prev_sig[64] = {0};
	int64_t ck_prev = 0;
	struct gen g;
	struct gh_audit_event ev;

	bench_fmt(lock_path, sizeof(lock_path), "%s-writer.lock", db_path);
	lockfd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lockfd < 0 || flock(lockfd, LOCK_EX) != 0)
		bench_die("cannot take %s", lock_path);
	if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
		bench_die("sqlite open %s", db_path);
	sql_exec(db, "PRAGMA synchronous = OFF");
	sql_exec(db, "PRAGMA cache_size = -524288");
	sql_exec(db, "PRAGMA wal_autocheckpoint = 0");
	sql_exec(db, "PRAGMA threads = 2");

	/* where the chain stands */
	if (sqlite3_prepare_v2(db, "SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1",
			       -1, &st, NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW ||
	    sqlite3_column_bytes(st, 1) != GH_AUDIT_HASH_LEN)
		bench_die("the chain must be started by the store first");
	seq = sqlite3_column_int64(st, 0);
	memcpy(prev, sqlite3_column_blob(st, 1), GH_AUDIT_HASH_LEN);
	sqlite3_finalize(st);
	/* checkpoints chain, as the writer's do: each signs the one before */
	if (sqlite3_prepare_v2(db, "SELECT seq, signature FROM audit_checkpoints ORDER BY seq DESC "
			       "LIMIT 1", -1, &st, NULL) != SQLITE_OK)
		bench_die("sqlite: %s", sqlite3_errmsg(db));
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_bytes(st, 1) == 64) {
		ck_prev = sqlite3_column_int64(st, 0);
		memcpy(ck_prev_sig, sqlite3_column_blob(st, 1), 64);
	}
	sqlite3_finalize(st);

	if (sqlite3_prepare_v2(db, "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND "
			       "tbl_name = 'audit_events' AND sql IS NOT NULL", -1, &st,
			       NULL) != SQLITE_OK)
		bench_die("sqlite: %s", sqlite3_errmsg(db));
	while (sqlite3_step(st) == SQLITE_ROW && nix < 32) {
		bench_fmt(ix[nix].name, sizeof(ix[nix].name), "%s",
			  (const char *)sqlite3_column_text(st, 0));
		bench_fmt(ix[nix].sql, sizeof(ix[nix].sql), "%s",
			  (const char *)sqlite3_column_text(st, 1));
		nix++;
	}
	sqlite3_finalize(st);
	for (i = 0; i < nix; i++) {
		char drop[128];

		bench_fmt(drop, sizeof(drop), "DROP INDEX \"%s\"", ix[i].name);
		sql_exec(db, drop);
	}

	if (sqlite3_prepare_v2(db, insert_sql, -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "INSERT INTO audit_checkpoints (seq, hash, ts, public_key, "
			       "signature, prev_seq) VALUES (?, ?, ?, ?, ?, ?)", -1, &ck,
			       NULL) != SQLITE_OK)
		bench_die("sqlite: %s", sqlite3_errmsg(db));
	gen_init(&g, 20261121, first_ts, span_ms / (rows ? rows : 1) > 0 ? span_ms / rows : 1);
	while (done < rows) {
		int64_t batch = rows - done < 100000 ? rows - done : 100000, k;

		sql_exec(db, "BEGIN");
		for (k = 0; k < batch; k++) {
			gen_event(&g, &ev, 1);
			seq++;
			gh_audit_row_hash(prev, seq, &ev, hash);
			bind_row(st, seq, &ev, prev, hash);
			if (sqlite3_step(st) != SQLITE_DONE)
				bench_die("bulk insert: %s", sqlite3_errmsg(db));
			sqlite3_reset(st);
			memcpy(prev, hash, GH_AUDIT_HASH_LEN);
			if (seq % ckpt_rows == 0) {
				gh_audit_sign_ckpt(sg, seq, hash, ev.ts, ck_prev, ck_prev_sig, sig);
				sqlite3_bind_int64(ck, 1, seq);
				sqlite3_bind_blob(ck, 2, hash, GH_AUDIT_HASH_LEN, SQLITE_STATIC);
				sqlite3_bind_int64(ck, 3, ev.ts);
				sqlite3_bind_blob(ck, 4, sg->pk, 32, SQLITE_STATIC);
				sqlite3_bind_blob(ck, 5, sig, 64, SQLITE_STATIC);
				sqlite3_bind_int64(ck, 6, ck_prev);
				if (sqlite3_step(ck) != SQLITE_DONE)
					bench_die("checkpoint insert: %s", sqlite3_errmsg(db));
				sqlite3_reset(ck);
				ck_prev = seq;
				memcpy(ck_prev_sig, sig, 64);
			}
		}
		sql_exec(db, "COMMIT");
		done += batch;
		if (done % 1000000 == 0 || done == rows) {
			t1 = bench_ns();
			printf("  bulk: %lld rows in %.0f s\n", (long long)done,
			       (double)(t1 - t0) / 1e9);
			fflush(stdout);
		}
	}
	sqlite3_finalize(st);
	sqlite3_finalize(ck);
	t1 = bench_ns();
	for (i = 0; i < nix; i++)
		sql_exec(db, ix[i].sql);
	if (nix)
		printf("  bulk: indexes re-created in %.0f s\n", (double)(bench_ns() - t1) / 1e9);
	sql_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
	sqlite3_close(db);
	flock(lockfd, LOCK_UN);
	close(lockfd);
}

static void index_progress(void *ud, int64_t blocks)
{
	(void)ud;
	if (blocks % 512 == 0) {
		printf("  index: %lld blocks\n", (long long)blocks);
		fflush(stdout);
	}
}

/* Builds the filter index of the bulk rows the way gatehouse does: one
 * block of rows per transaction through the store's writer. */
static void build_index(const char *db_path, int64_t rows)
{
	struct gh_store *s = open_store(db_path, 0, NULL);
	struct gh_err e;
	int64_t t0 = bench_ns();
	double secs;

	if (gh_store_audit_reindex(s, 0, index_progress, NULL, &e) != GH_OK)
		bench_die("indexing: %s", e.msg);
	secs = (double)(bench_ns() - t0) / 1e9;
	printf("  filter index built in %.0f s (%.0f rows/s), one block per transaction\n",
	       secs, secs > 0 ? (double)rows / secs : 0.0);
	fflush(stdout);
	close_store(s);
}

/* Appends n rows through the store's writer (ts = now). */
static void store_append(const char *db, const struct gh_audit_signer *sg, int64_t n,
			 uint64_t seed)
{
	struct gh_store *s = open_store(db, 1, sg);
	struct gen g;
	struct gh_audit_event ev;
	struct gh_err e;
	int64_t i;

	gen_init(&g, seed, 0, 0);
	for (i = 0; i < n; i++) {
		gen_event(&g, &ev, 0);
		if (gh_store_audit_append(s, &ev, NULL, &e) != GH_OK)
			bench_die("append: %s", e.msg);
	}
	close_store(s);
}

/* ---------------------------------------------------- filtered pages */

enum qkind {
	Q_KEY, Q_TOOL, Q_EVENT, Q_KEY_TOOL, Q_KEY_EVENT, Q_TOOL_EVENT, Q_DAY, Q_KEY_WEEK,
	Q_TOOL_EVENT_DAY, Q_KEY_TOOL_EVENT, Q_AGENT_OUTCOME, Q_KEY_TOOL_PAGE2, Q_RUN,
	Q_NKINDS
};

static const char *const qnames[Q_NKINDS] = {
	"key", "tool", "event", "key+tool", "key+event", "tool+event", "1-day range",
	"key+7-day range", "tool+event+1-day", "key+tool+event", "agent+outcome",
	"key+tool, page 2", "run",
};

struct query {
	enum qkind kind;
	char key[32], agent[24], run[32];
	const char *tool, *event, *outcome;
	int64_t from, to;
};

static void query_pick(struct gen *g, enum qkind kind, int64_t t_first, int64_t t_last,
		       const char *some_run, struct query *q)
{
	int64_t span = t_last - t_first;

	memset(q, 0, sizeof(*q));
	q->kind = kind;
	/* half the time a busy value, half the time any value */
	snprintf(q->key, sizeof(q->key), "%s",
		 g->keys[rnd(g) % 2 ? skewed(g, NKEYS) : (int)(rnd(g) % NKEYS)]);
	snprintf(q->agent, sizeof(q->agent), "%s", g->agents[rnd(g) % NAGENTS]);
	snprintf(q->run, sizeof(q->run), "%s", some_run);
	q->tool = tools[rnd(g) % 2 ? skewed(g, NTOOLS) : (int)(rnd(g) % NTOOLS)];
	q->event = events[rnd(g) % NEVENTS].event;
	q->outcome = events[rnd(g) % NEVENTS].outcome;
	if (kind == Q_DAY || kind == Q_TOOL_EVENT_DAY || kind == Q_KEY_WEEK) {
		int64_t w = kind == Q_KEY_WEEK ? 7 * 86400000LL : 86400000LL;

		q->from = t_first + (int64_t)(rnd(g) % (uint64_t)(span > w ? span - w : 1));
		q->to = q->from + w;
	}
}

static void query_filter(const struct query *q, struct gh_audit_filter *f)
{
	int k = q->kind;

	memset(f, 0, sizeof(*f));
	if (k == Q_KEY || k == Q_KEY_TOOL || k == Q_KEY_TOOL_PAGE2 || k == Q_KEY_EVENT ||
	    k == Q_KEY_WEEK || k == Q_KEY_TOOL_EVENT)
		f->key_id = q->key;
	if (k == Q_TOOL || k == Q_KEY_TOOL || k == Q_KEY_TOOL_PAGE2 || k == Q_TOOL_EVENT ||
	    k == Q_TOOL_EVENT_DAY || k == Q_KEY_TOOL_EVENT)
		f->tool_name = q->tool;
	if (k == Q_EVENT || k == Q_KEY_EVENT || k == Q_TOOL_EVENT || k == Q_TOOL_EVENT_DAY ||
	    k == Q_KEY_TOOL_EVENT)
		f->event = q->event;
	if (k == Q_DAY || k == Q_KEY_WEEK || k == Q_TOOL_EVENT_DAY) {
		f->from_ms = q->from;
		f->to_ms = q->to;
	}
	if (k == Q_AGENT_OUTCOME) {
		f->agent_id = q->agent;
		f->outcome = q->outcome;
	}
	if (k == Q_RUN)
		f->run_id = q->run;
}

/* The query string of GET /api/audit for q (values need no escaping: ids,
 * names and numbers). */
static void query_string(const struct query *q, int64_t cursor, char *out, size_t cap)
{
	struct gh_audit_filter f;
	static const char *const names[6] = {"key", "tool", "event", "agent", "outcome", "run"};
	const char *vals[6];
	size_t n, i;

	query_filter(q, &f);
	vals[0] = f.key_id;
	vals[1] = f.tool_name;
	vals[2] = f.event;
	vals[3] = f.agent_id;
	vals[4] = f.outcome;
	vals[5] = f.run_id;
	n = (size_t)snprintf(out, cap, "/api/audit?limit=50");
	for (i = 0; i < 6 && n < cap; i++)
		if (vals[i])
			n += (size_t)snprintf(out + n, cap - n, "&%s=%s", names[i], vals[i]);
	if (f.from_ms && n < cap)
		n += (size_t)snprintf(out + n, cap - n, "&from=%lld&to=%lld", (long long)f.from_ms,
				      (long long)f.to_ms);
	if (cursor && n < cap)
		n += (size_t)snprintf(out + n, cap - n, "&cursor=%lld", (long long)cursor);
	if (n >= cap)
		bench_die("query string too long");
}

static int count_row(void *ud, const struct gh_audit_row *r)
{
	(void)r;
	(*(int *)ud)++;
	return 0;
}

struct qstats {
	int64_t *lat[Q_NKINDS];
	size_t n[Q_NKINDS];
	int64_t *all;
	size_t nall;
	int64_t rows;
};

static void qstats_add(struct qstats *s, enum qkind k, int64_t ns, size_t cap)
{
	if (!s->lat[k] && !(s->lat[k] = malloc(cap * sizeof(int64_t))))
		bench_die("out of memory");
	if (!s->all && !(s->all = malloc(cap * Q_NKINDS * sizeof(int64_t))))
		bench_die("out of memory");
	if (s->n[k] < cap)
		s->lat[k][s->n[k]++] = ns;
	s->all[s->nall++] = ns;
}

static void qstats_print(struct qstats *s, const char *title)
{
	struct bench_stats a;
	int k;

	printf("  %s\n", title);
	printf("    %-22s %7s %9s %9s %9s %9s\n", "filter", "pages", "p50 ms", "p90 ms", "p99 ms",
	       "max ms");
	for (k = 0; k < Q_NKINDS; k++) {
		struct bench_stats st = bench_summary(s->lat[k], s->n[k], 1e6);

		printf("    %-22s %7zu %9.2f %9.2f %9.2f %9.2f\n", qnames[k], st.n, st.p50, st.p90,
		       st.p99, st.max);
	}
	a = bench_summary(s->all, s->nall, 1e6);
	printf("    %-22s %7zu %9.2f %9.2f %9.2f %9.2f\n", "ALL", a.n, a.p50, a.p90, a.p99,
	       a.max);
	printf("    target: one page p99 <= 10 ms: %s\n", a.p99 <= 10 ? "met" : "NOT met");
	for (k = 0; k < Q_NKINDS; k++)
		free(s->lat[k]);
	free(s->all);
	memset(s, 0, sizeof(*s));
}

/* In process: the SQL of gh_store_audit_query alone. */
static void query_inproc(const char *db, int64_t per_kind, int64_t max_seconds, int64_t t_first,
			 int64_t t_last, const char *some_run)
{
	struct gh_store_opts o;
	struct gh_store *s = NULL;
	struct gh_err e;
	struct gen g;
	struct qstats qs;
	int64_t i, end = bench_ns() + max_seconds * 1000000000LL;

	memset(&o, 0, sizeof(o));
	memset(&qs, 0, sizeof(qs));
	o.path = db;
	o.url = store_url;
	o.pool_size = 2;
	o.readers = 1;
	o.busy_timeout_ms = 5000;
	o.readonly = 1;
	if (gh_store_open(&o, &s, &e) != GH_OK)
		bench_die("%s", e.msg);
	gen_init(&g, 20261121, 0, 0); /* the same keys as the log */
	g.rng = 99991;
	for (i = 0; i < per_kind * Q_NKINDS && bench_ns() < end; i++) {
		struct query q;
		struct gh_audit_filter f;
		int64_t next = 0, cursor = 0, t0;
		int n = 0;

		query_pick(&g, (enum qkind)(i % Q_NKINDS), t_first, t_last, some_run, &q);
		query_filter(&q, &f);
		if (q.kind == Q_KEY_TOOL_PAGE2) {
			if (gh_store_audit_query(s, &f, 0, 50, 0, count_row, &n, &next,
						 &e) != GH_OK)
				bench_die("query: %s", e.msg);
			if (!next)
				continue;
			cursor = next;
		}
		t0 = bench_ns();
		if (gh_store_audit_query(s, &f, cursor, 50, 0, count_row, &n, &next, &e) != GH_OK)
			bench_die("query: %s", e.msg);
		qstats_add(&qs, q.kind, bench_ns() - t0, (size_t)per_kind);
		qs.rows += n;
	}
	close_store(s);
	qstats_print(&qs, "in process, gh_store_audit_query (SQL only):");
}

/* Through gatehouse serve: GET /api/audit with an admin key. */
static void query_http(int port, const char *auth, int64_t per_kind, int64_t max_seconds,
		       int64_t t_first, int64_t t_last, const char *some_run)
{
	struct bconn c;
	struct gen g;
	struct qstats qs;
	int64_t i, end = bench_ns() + max_seconds * 1000000000LL, pages_with_rows = 0;

	memset(&qs, 0, sizeof(qs));
	if (bconn_open(&c, port, 60000) != 0)
		bench_die("cannot connect to gatehouse");
	gen_init(&g, 20261121, 0, 0);
	g.rng = 99991;
	for (i = 0; i < per_kind * Q_NKINDS && bench_ns() < end; i++) {
		struct query q;
		struct bresp r;
		char path[600];
		int64_t cursor = 0, t0, t1;

		query_pick(&g, (enum qkind)(i % Q_NKINDS), t_first, t_last, some_run, &q);
		if (q.kind == Q_KEY_TOOL_PAGE2) {
			const char *nc;

			query_string(&q, 0, path, sizeof(path));
			if (bconn_request(&c, "GET", path, auth, NULL, 0, &r) != 0 ||
			    r.status != 200)
				bench_die("GET %s failed", path);
			nc = strstr(r.body, "\"nextCursor\":\"");
			cursor = nc ? strtoll(nc + 14, NULL, 10) : 0;
			bresp_free(&r);
			if (!cursor)
				continue;
		}
		query_string(&q, cursor, path, sizeof(path));
		t0 = bench_ns();
		if (bconn_request(&c, "GET", path, auth, NULL, 0, &r) != 0)
			bench_die("GET %s: no response", path);
		t1 = bench_ns();
		if (r.status != 200)
			bench_die("GET %s: status %d: %.200s", path, r.status, r.body);
		if (strstr(r.body, "\"seq\""))
			pages_with_rows++;
		bresp_free(&r);
		qstats_add(&qs, q.kind, t1 - t0, (size_t)per_kind);
	}
	bconn_close(&c);
	qstats_print(&qs, "through gatehouse, GET /api/audit (limit 50, newest first):");
	printf("    %lld of the pages had rows\n", (long long)pages_with_rows);
}

/* ------------------------------------------------------------- verify */

/* Runs "gatehouse audit verify"; returns wall seconds, fills rows/s as the
 * command reported it; dies unless the log is intact. */
static double run_verify(const char *gh, const char *dir, const char *cfg, double *reported)
{
	char outp[PATH_MAX], buf[4096];
	char *argv[] = {(char *)(uintptr_t)gh, "audit", "verify", "--config",
			(char *)(uintptr_t)cfg, NULL};
	const char *env[] = {"GH_LOG=warn", NULL};
	const char *p;
	int64_t t0 = bench_ns();
	int rc;

	bench_fmt(outp, sizeof(outp), "%s/verify.out", dir);
	unlink(outp);
	rc = bench_run(argv, dir, outp, NULL, env, 3600 * 1000);
	t0 = bench_ns() - t0;
	bench_read_file(outp, buf, sizeof(buf));
	if (rc != 0 || !strstr(buf, "audit log intact"))
		bench_die("gatehouse audit verify failed (%d):\n%s", rc, buf);
	p = strstr(buf, "s (");
	*reported = p ? strtod(p + 3, NULL) : 0;
	printf("    %s", buf);
	return (double)t0 / 1e9;
}

/* 1 when ANALYZE has left statistics for the audit table. */
static int has_stats(const char *db_path)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int n = 0;

	if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_stat1 WHERE tbl = 'audit_events'",
			       -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n > 0;
}

static int64_t dir_bytes(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct stat st;
	char p[PATH_MAX];
	int64_t n = 0;

	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		bench_fmt(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
			n += (int64_t)st.st_size;
	}
	if (d)
		closedir(d);
	return n;
}

/* Verifies the log the config cfg names verify_reps times ("gatehouse
 * audit verify" in dir) and times filtered pages through "gatehouse serve"
 * on it (unless !http) and in process (on db, or store_url when set). */
static void measure_log(const char *gh, const char *dir, const char *cfg, const char *db,
			int64_t verify_reps, int64_t per_kind, int64_t max_seconds, int http,
			int64_t t_first, int64_t t_last, const char *some_run)
{
	char key[256], auth[320];
	struct bench_proc gp;
	double wall[16], rep_rate[16];
	int64_t i, r;

	if (verify_reps > 0) {
		printf("  gatehouse audit verify, %lld runs:\n", (long long)verify_reps);
		for (r = 0; r < verify_reps && r < 16; r++) {
			wall[r] = run_verify(gh, dir, cfg, &rep_rate[r]);
			fflush(stdout);
		}
		printf("  verify: median %.1f s wall, %.0f rows/s (as the command reports it; "
		       "min %.0f, max %.0f)\n", bench_median(wall, (size_t)r),
		       bench_median(rep_rate, (size_t)r), bench_min(rep_rate, (size_t)r),
		       bench_maxd(rep_rate, (size_t)r));
		printf("  target: verify >= 500000 rows/s: %s\n",
		       bench_median(rep_rate, (size_t)r) >= 500000 ? "met" : "NOT met");
		fflush(stdout);
	}

	printf("  filtered pages, %lld per filter kind (bounded to %lld s):\n", (long long)per_kind,
	       (long long)max_seconds);
	/* through the server first: whatever it does to a database it opens
	 * (planner statistics) is then in place for the in-process run too */
	if (http) {
		bench_key_create(gh, dir, cfg, store_url ? "auditor-pg" : "auditor", 1, key,
				 sizeof(key));
		bench_fmt(auth, sizeof(auth), "Authorization: Bearer %s\r\n", key);
		bench_gh_start(gh, dir, cfg, "warn", &gp);
		query_http(gp.port, auth, per_kind, max_seconds, t_first, t_last, some_run);
		i = bench_stop(gp.pid, 30000);
		if (i != 0)
			fprintf(stderr, "bench: gatehouse exited %lld\n", (long long)i);
		fflush(stdout);
	}
	if (!store_url)
		printf("    (planner statistics in the database: %s)\n",
		       has_stats(db) ? "yes, sqlite_stat1" : "none");
	query_inproc(db, per_kind, max_seconds, t_first, t_last, some_run);
}

/* The log moved to a new database of pg's server by "gatehouse migrate
 * --from sqlite:DB --to URL" (the configs' key files and witness are the
 * SQLite log's), then measured there as on SQLite. */
static void log_on_pg(const char *gh, const char *dir, const struct bench_pg *pg,
		      int64_t verify_reps, int64_t per_kind, int64_t max_seconds, int http,
		      int64_t t_first, int64_t t_last, const char *some_run)
{
	char pdir[PATH_MAX], cfg[PATH_MAX], scfg[PATH_MAX], db[PATH_MAX], outp[PATH_MAX];
	char url[1024], buf[1 << 14], text[4 * PATH_MAX];
	char *argv[] = {(char *)(uintptr_t)gh, "migrate", "--config", scfg, "--from", text,
			"--to", "${GH_BENCH_LOG_URL}", NULL};
	const char *env[] = {"GH_LOG=warn", NULL};
	int64_t t0, bytes;
	double secs;
	int rc;
	const char *p;

	bench_fmt(pdir, sizeof(pdir), "%s/pg", dir);
	bench_fmt(cfg, sizeof(cfg), "%s/gatehouse.json", pdir);
	bench_fmt(scfg, sizeof(scfg), "%s/gatehouse.json", dir);
	bench_fmt(db, sizeof(db), "%s/gatehouse.db", dir);
	bench_fmt(outp, sizeof(outp), "%s/migrate.out", pdir);
	if (mkdir(pdir, 0700) != 0 && errno != EEXIST)
		bench_die("mkdir %s: %s", pdir, strerror(errno));
	bench_pg_db(pg, "gh_bench_log", 0, url, sizeof(url));
	/* migrate and serve read it from the environment: never on a
	 * command line */
	if (setenv("GH_BENCH_LOG_URL", url, 1) != 0)
		bench_die("setenv");
	bench_fmt(text, sizeof(text), "sqlite:%s", db);
	printf("\n== the log on PostgreSQL %s (fsync=on; synchronous_commit=off for its "
	       "database)\n", pg->version);
	printf("  copied by gatehouse migrate --from sqlite:... --to postgresql://...:\n");
	fflush(stdout);
	unlink(outp);
	t0 = bench_ns();
	rc = bench_run(argv, dir, outp, outp, env, 6 * 3600 * 1000);
	secs = (double)(bench_ns() - t0) / 1e9;
	bench_read_file(outp, buf, sizeof(buf));
	for (p = buf; *p;) {
		size_t n = strcspn(p, "\n");

		/* the audit tables' lines and the verdicts, not every table */
		if (bench_memfind(p, n, "audit", 5) || bench_memfind(p, n, "copied", 6) ||
		    bench_memfind(p, n, "rror", 4))
			printf("    %.*s\n", (int)n, p);
		p += n + (p[n] == '\n');
	}
	if (rc != 0)
		bench_die("gatehouse migrate failed (%d); its output is in %s", rc, outp);
	bytes = bench_pg_int(pg->url, "SELECT pg_database_size('gh_bench_log')");
	printf("  migrate took %.0f s in all (both verifications included); the database is "
	       "%.2f GB\n", secs, (double)bytes / 1e9);
	bench_fmt(text, sizeof(text),
		  "{\"server\": {\"listen\": \"127.0.0.1:0\", \"threads\": 16, "
		  "\"max_streams\": 4},\n"
		  " \"database\": {\"url\": \"${GH_BENCH_LOG_URL}\", \"pool_size\": 16},\n"
		  " \"auth\": {\"key_hash_file\": \"%s/gatehouse.db-hashkey\"},\n"
		  " \"providers\": {\"offline\": {\"type\": \"mock\", \"default\": \"hi\"}},\n"
		  " \"agents\": {\"a\": {\"provider\": \"offline\", \"model\": \"mock\"}},\n"
		  " \"policies\": {\"default\": {\"agents\": [\"*\"]}},\n"
		  " \"audit\": {\"checkpoint_rows\": 1000, \"checkpoint_seconds\": 60, "
		  "\"retention_days\": 0, \"signing_key_file\": \"%s/gatehouse.db-audit.key\", "
		  "\"witness\": {\"file\": \"%s/gatehouse.db-witness\"}}}\n", dir, dir, dir);
	bench_write_file(cfg, text);
	fflush(stdout);
	store_url = url;
	measure_log(gh, pdir, cfg, db, verify_reps, per_kind, max_seconds, http, t_first, t_last,
		    some_run);
	store_url = NULL;
	bench_pg_exec(pg->url, "DROP DATABASE gh_bench_log WITH (FORCE)");
}

/* Builds the log in dir (unless reuse: a log an earlier --keep run left
 * there), then on SQLite (on_sqlite) and on PostgreSQL (pg, may be NULL)
 * verifies it verify_reps times and times filtered pages. */
static void big_log(const char *gh, const char *dir, int reuse, int64_t rows,
		    int64_t verify_reps, int64_t per_kind, int64_t max_seconds, int http,
		    int on_sqlite, const struct bench_pg *pg)
{
	char db[PATH_MAX], keyf[PATH_MAX], cfg[PATH_MAX], some_run[32];
	struct gh_audit_signer sg;
	struct gh_err e;
	struct statvfs vfs;
	int64_t t0, span = 90LL * 86400000, first_ts;
	int64_t first = 0, last = 0, count = 0, t_first = 0, t_last = 0;
	double need = (double)rows * 1000.0 * (pg ? 2 : 1);
	sqlite3 *sdb;
	sqlite3_stmt *st;

	bench_fmt(db, sizeof(db), "%s/gatehouse.db", dir);
	bench_fmt(keyf, sizeof(keyf), "%s/gatehouse.db-audit.key", dir);
	bench_fmt(cfg, sizeof(cfg), "%s/gatehouse.json", dir);
	if (!reuse && statvfs(dir, &vfs) == 0 &&
	    (double)vfs.f_bavail * (double)vfs.f_frsize < need)
		bench_die("%s: about %.1f GB free, the log needs up to %.1f GB (use --rows)", dir,
			  (double)vfs.f_bavail * (double)vfs.f_frsize / 1e9, need / 1e9);
	if (!reuse)
		bench_write_file(cfg,
				 "{\"server\": {\"listen\": \"127.0.0.1:0\", \"threads\": 16, "
				 "\"max_streams\": 4},\n"
				 " \"database\": {\"path\": \"gatehouse.db\"},\n"
				 " \"providers\": {\"offline\": {\"type\": \"mock\", \"default\": "
				 "\"hi\"}},\n"
				 " \"agents\": {\"a\": {\"provider\": \"offline\", \"model\": "
				 "\"mock\"}},\n"
				 " \"policies\": {\"default\": {\"agents\": [\"*\"]}},\n"
				 " \"audit\": {\"checkpoint_rows\": 1000, "
				 "\"checkpoint_seconds\": 60, \"retention_days\": 0}}\n");
	if (gh_audit_signer_load(keyf, 1, &sg, &e) != GH_OK)
		bench_die("%s", e.msg);

	if (reuse) {
		printf("\n== the audit log in %s\n", dir);
	} else {
		printf("\n== a %lld-row audit log (90 days, 200 keys, 30 tools, 10 events)\n",
		       (long long)rows);
		first_ts = gh_now_ms() - span - 3600000;
		t0 = bench_ns();
		store_append(db, &sg, 1000, 1);            /* the store starts the chain */
		bulk_load(db, &sg, rows - 2000, 1000, first_ts, span);
		build_index(db, rows - 2000);
		store_append(db, &sg, 1000, 2);            /* and goes on from the bulk rows */
		printf("  generated in %.0f s; files %.2f GB\n", (double)(bench_ns() - t0) / 1e9,
		       (double)dir_bytes(dir) / 1e9);
		fflush(stdout);
	}
	gh_audit_signer_wipe(&sg);

	if (sqlite3_open_v2(db, &sdb, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(sdb, "SELECT min(seq), max(seq), count(*), "
			       "(SELECT ts FROM audit_events WHERE seq = 1002), max(ts), "
			       "(SELECT run_id FROM audit_events WHERE seq = ?) "
			       "FROM audit_events", -1, &st, NULL) != SQLITE_OK)
		bench_die("cannot read the log back");
	sqlite3_bind_int64(st, 1, 5000);
	if (sqlite3_step(st) != SQLITE_ROW)
		bench_die("cannot read the log back");
	first = sqlite3_column_int64(st, 0);
	last = sqlite3_column_int64(st, 1);
	count = sqlite3_column_int64(st, 2);
	t_first = sqlite3_column_int64(st, 3);
	t_last = sqlite3_column_int64(st, 4);
	snprintf(some_run, sizeof(some_run), "%s",
		 sqlite3_column_text(st, 5) ? (const char *)sqlite3_column_text(st, 5) : "run_x");
	sqlite3_finalize(st);
	sqlite3_close(sdb);
	printf("  rows %lld (seq %lld..%lld)\n", (long long)count, (long long)first,
	       (long long)last);

	if (on_sqlite) {
		printf("\n== the log on SQLite\n");
		measure_log(gh, dir, cfg, db, verify_reps, per_kind, max_seconds, http, t_first,
			    t_last, some_run);
	}
	if (pg)
		log_on_pg(gh, dir, pg, verify_reps, per_kind, max_seconds, http, t_first, t_last,
			  some_run);
}

/* ---------------------------------------------------------------- main */

static void usage(void)
{
	fprintf(stderr,
		"usage: bench_audit [--threads 1,16,64,256] [--seconds 10] [--reps 3]\n"
		"                   [--rows 10000000] [--verify-reps 3] [--queries 200]\n"
		"                   [--query-seconds 300] [--skip-ingest] [--skip-log] [--keep]\n"
		"                   [--log-dir DIR (a log kept by --keep)] [--skip-http]\n"
		"                   [--backend sqlite,pg,pg-sync]\n"
		"Temp files under GH_BENCH_TMP (default /tmp); the big log needs ~0.6 KB/row,\n"
		"and as much again in the PostgreSQL cluster (GH_PG_TMP, default /tmp) with pg.\n"
		"pg: PostgreSQL with synchronous_commit=off; pg-sync: =on (ingest only).\n"
		"GH_BENCH_PG_SETTINGS replaces the server's settings (default " PG_SETTINGS ").\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int threads[16] = {1, 16, 64, 256}, nthreads = 4, skip_ingest = 0, skip_log = 0, keep = 0;
	int http = 1, on_sqlite = 1, on_pg = 0, on_pg_sync = 0;
	const char *log_dir = NULL;
	int64_t seconds = 10, reps = 3, rows = 10000000, verify_reps = 3, per_kind = 200;
	int64_t qseconds = 300;
	char gh[PATH_MAX], fake[PATH_MAX], dir[PATH_MAX], pgdir[PATH_MAX], script[PATH_MAX];
	char why[240], state[PATH_MAX + 8];
	struct bench_pg pg;
	const char *v;
	int i;

	for (i = 1; i < argc; i++) {
		if ((v = bench_opt(argc, argv, &i, "--threads"))) {
			nthreads = bench_nums(v, threads, 16, 1, 4096, "--threads");
		} else if ((v = bench_opt(argc, argv, &i, "--seconds"))) {
			seconds = bench_num(v, 1, 3600, "--seconds");
		} else if ((v = bench_opt(argc, argv, &i, "--reps"))) {
			reps = bench_num(v, 1, 64, "--reps");
		} else if ((v = bench_opt(argc, argv, &i, "--rows"))) {
			rows = bench_num(v, 10000, 1000000000, "--rows");
		} else if ((v = bench_opt(argc, argv, &i, "--verify-reps"))) {
			verify_reps = bench_num(v, 0, 16, "--verify-reps");
		} else if ((v = bench_opt(argc, argv, &i, "--queries"))) {
			per_kind = bench_num(v, 10, 1000000, "--queries");
		} else if ((v = bench_opt(argc, argv, &i, "--query-seconds"))) {
			qseconds = bench_num(v, 1, 36000, "--query-seconds");
		} else if ((v = bench_opt(argc, argv, &i, "--backend"))) {
			on_sqlite = on_pg = on_pg_sync = 0;
			while (*v) {
				size_t k = strcspn(v, ",");

				if (k == 6 && !strncmp(v, "sqlite", 6))
					on_sqlite = 1;
				else if (k == 2 && !strncmp(v, "pg", 2))
					on_pg = 1;
				else if (k == 7 && !strncmp(v, "pg-sync", 7))
					on_pg_sync = 1;
				else
					bench_die("--backend: unknown \"%.*s\" (sqlite, pg, pg-sync)",
						  (int)k, v);
				v += k + (v[k] == ',');
			}
		} else if ((v = bench_opt(argc, argv, &i, "--log-dir"))) {
			log_dir = v;
		} else if (!strcmp(argv[i], "--skip-http")) {
			http = 0;
		} else if (!strcmp(argv[i], "--skip-ingest")) {
			skip_ingest = 1;
		} else if (!strcmp(argv[i], "--skip-log")) {
			skip_log = 1;
		} else if (!strcmp(argv[i], "--keep")) {
			keep = 1;
		} else {
			usage();
		}
	}
	bench_init();
	gh_log_set_level(GH_LOG_WARN);
	bench_paths(gh, fake, sizeof(gh));
	printf("bench_audit: audit log ingest, verify and filtered pages\n");
	bench_print_host();
	memset(&pg, 0, sizeof(pg));
	pgdir[0] = '\0';
	if (on_pg || on_pg_sync) {
		const char *set = getenv("GH_BENCH_PG_SETTINGS");

		if (!set || !*set)
			set = PG_SETTINGS;
		why[0] = '\0';
		bench_tmpdir(pgdir, sizeof(pgdir), "audit-pg");
		bench_fmt(state, sizeof(state), "%s/pg", pgdir);
		if (bench_pg_available(script, sizeof(script), why, sizeof(why)) &&
		    bench_pg_start(&pg, script, state, set, why, sizeof(why)) == 0) {
			printf("PostgreSQL %s on a Unix socket, %s\n", pg.version, set);
		} else {
			printf("PostgreSQL parts skipped: %s\n", why);
			on_pg = on_pg_sync = 0;
		}
	}
	if (!skip_ingest) {
		bench_tmpdir(dir, sizeof(dir), "audit-ingest");
		if (on_sqlite)
			ingest_bench(dir, threads, nthreads, seconds, reps, NULL, 0);
		if (on_pg)
			ingest_bench(dir, threads, nthreads, seconds, reps, &pg, 0);
		if (on_pg_sync)
			ingest_bench(dir, threads, nthreads, seconds, reps, &pg, 1);
		bench_rmrf(dir);
	}
	if (!skip_log && (on_sqlite || on_pg) && log_dir) {
		big_log(gh, log_dir, 1, rows, verify_reps, per_kind, qseconds, http, on_sqlite,
			on_pg ? &pg : NULL);
	} else if (!skip_log && (on_sqlite || on_pg)) {
		bench_tmpdir(dir, sizeof(dir), "audit-log");
		big_log(gh, dir, 0, rows, verify_reps, per_kind, qseconds, http, on_sqlite,
			on_pg ? &pg : NULL);
		if (keep)
			printf("kept %s\n", dir);
		else
			bench_rmrf(dir);
	}
	bench_pg_stop(&pg);
	if (pgdir[0])
		bench_rmrf(pgdir);
	return 0;
}
