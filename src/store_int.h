/*
 * store_int.h - shared between store.c (connections, migrations, the
 * writer thread) and the store_*.c files that hold each domain's SQL.
 * Not for use outside the store module.
 */
#ifndef GH_STORE_INT_H
#define GH_STORE_INT_H

#include <pthread.h>
#include <stddef.h>
#include <semaphore.h>
#include <stdatomic.h>

#include "audit.h"
#include "store.h"

#define STORE_STMT_CACHE 256

/* The SQLite and PostgreSQL handles a connection holds: only store.c,
 * store_sqlite.c, store_pg.c and store_audit_index.c look inside them; the
 * domain files speak to the statement and row functions below. */
struct sqlite3;
struct sqlite3_stmt;
struct gh_pg_conn;
struct gh_pg_pool;
struct pg_result;

/* A connection with its own prepared-statement cache, keyed by the address
 * of the SQL literal. Used by one thread at a time. On SQLite db is open
 * for the life of the store; on PostgreSQL pg is a connection of the
 * store's pool while the connection is borrowed (a reader) or held by
 * whoever commits (the writer), NULL otherwise: pg_err then says why when
 * the pool could not give one (every statement fails with it). */
struct store_conn {
	struct sqlite3 *db;
	struct gh_pg_conn *pg;
	struct gh_err pg_err;
	struct {
		const char *sql;
		struct sqlite3_stmt *st;
	} cache[STORE_STMT_CACHE];
	size_t ncache;
	int busy;
};

/* A row as the backends hand it to a row callback (only store_sqlite.c and
 * store_pg.c look inside): SQLite's statement stepped to the row, or a
 * PostgreSQL result and the row's number in it, with the bytea values
 * unescaped for the callback (freed when it returns). */
struct store_pg_bytes;
struct store_row {
	struct sqlite3_stmt *st;
	struct pg_result *res;
	int row;
	struct store_pg_bytes *bytes;
};

/* A write job: fn runs on the writer connection inside a savepoint of the
 * batch transaction. It returns GH_OK or an error (with e filled): on error
 * the savepoint is rolled back and the rest of the batch goes on. */
typedef enum gh_code (*store_write_fn)(struct gh_store *s, struct store_conn *w, void *arg,
				       struct gh_err *e);

struct store_job {
	store_write_fn fn;
	void *arg;
	void (*free_arg)(void *arg);   /* async jobs: called after the commit */
	enum gh_code rc;
	struct gh_err err;
	sem_t done;
	int async;
	int barrier;                   /* commits with every job queued before it */
	struct store_job *next;
};

/* Audit chain state, owned by whoever holds the writer (thread or inline). */
struct store_chain {
	int known;                      /* loaded in this transaction */
	int64_t last_seq;
	int64_t last_ts;                /* rows get ts >= this: time order is seq order */
	unsigned char last_hash[GH_AUDIT_HASH_LEN];
	int64_t ckpt_seq;               /* newest checkpoint (0: none) */
	int64_t ckpt_ms;
	unsigned char ckpt_sig[64];     /* its signature: the next one signs it */
};

/* The caches of rows kept across requests (store_caches.c). */
enum store_cache { STORE_CACHE_KEYS, STORE_CACHE_WM, STORE_NCACHES };

/* A write transaction as gh_store_tx_run hands it out. */
struct gh_store_tx {
	struct gh_store *s;
	struct store_conn *w;
};

struct gh_store {
	struct gh_store_opts o;
	struct gh_pg_pool *pool;        /* PostgreSQL (o.url): the connections */
	char *path;
	char *lock_path;
	int lock_fd;
	int schema_version;
	int64_t instance;               /* this process's number: runs it claims and calls
					 * it opens carry it (gh_store_instance) */

	struct store_conn w;            /* the writer connection (NULL db when readonly) */
	pthread_mutex_t inline_mu;      /* serialises inline (CLI) writes */

	struct store_conn *readers;
	size_t nreaders;
	pthread_mutex_t rmu;
	pthread_cond_t rcv;

	/* Writing: jobs queue under qmu; the caller that finds no leader
	 * commits the queue itself (store.c: lead), holding wmu, which also
	 * serialises housekeeping's use of the writer connection. */
	pthread_mutex_t wmu;
	pthread_mutex_t qmu;
	pthread_cond_t qcv;             /* wakes housekeeping */
	struct store_job *qhead, *qtail;
	int leader;                     /* someone is committing the queue */
	int house_lead;                 /* ...and hands it to housekeeping */
	int64_t linger_from;            /* when the queue, then empty, took an
					 * async job (Unix ms) */
	int64_t async_at;               /* when the last async job was queued */
	int64_t house_until;            /* housekeeping looks at the queue by
					 * then unwoken (Unix ms; 0 while it
					 * runs, INT64_MAX: not unless woken) */
	int stopping;
	pthread_t house;                /* housekeeping thread */
	int house_started;

	struct store_chain chain;
	int64_t chain_dv;               /* data_version when chain was last checked
					 * (SQLite writer; -1: unknown) */
	const struct gh_audit_signer *signer; /* set under wmu and qmu */
	/* who hears of committed checkpoints, and one written in the batch
	 * being committed, for it once the commit holds */
	void (*on_checkpoint)(void *ud, const struct gh_audit_checkpoint *c,
			      const unsigned char prev_sig[64]);
	void *on_checkpoint_ud;
	int ckpt_pending;
	struct gh_audit_checkpoint ckpt_new;
	unsigned char ckpt_new_prev_sig[64];
	int64_t ckpt_rows;
	int64_t ckpt_every_ms;

	struct gh_audit_blockidx *audit_bidx; /* the writer's, for indexing blocks */
	_Atomic int audit_index_due;    /* a block may be complete */

	_Atomic uint64_t n_tx, n_jobs, max_batch;
	int64_t audit_rows_tx;          /* audit rows the open transaction appended
					 * (writer only; metrics.h at its commit) */
	_Atomic int wal_pages;          /* frames in the WAL after the last commit */
	_Atomic int wal_mark;           /* frames there at the last WAL checkpoint */
	_Atomic int queued;             /* store_write_async jobs not yet committed:
					 * store_reader waits for them */
	int64_t last_analyze_ms;
	/* calls whose end could not be written (the database was out of
	 * reach): closed as interrupted once it is back */
	pthread_mutex_t unclosed_mu;
	int64_t unclosed[256];
	size_t nunclosed;

	/* Rows kept across requests (store_caches.c): key lookups
	 * (store_keys.c) and working memory (store_memory.c), each validated
	 * by its cache's generation, gen[cache]. NULL: no cache (a read-only
	 * SQLite store). */
	_Atomic uint64_t *gen[STORE_NCACHES];
	_Atomic uint64_t gen_own[STORE_NCACHES]; /* PostgreSQL's */
	void *gen_map;                  /* SQLite's: the lock file's first page */
	unsigned caches_wrote;          /* writer only: the open transaction wrote
					 * these caches' tables (1 << cache) */
	struct store_keycache *keycache;
	struct store_wmcache *wmcache;
};

/* A migration's version from its file name ("0007_x.sql" is 7), or -1. */
int store_migration_version(const char *name);

/* Rows kept across requests, and how they stay right (store_caches.c).
 * Each cache has a generation; a kept row is served only under the one it
 * was read at. A write job that changes a cached table calls
 * store_cache_wrote; once that transaction has ended, committed or not,
 * store.c calls store_caches_moved, which moves those caches' generations.
 * On SQLite the generations are words of the lock file's first page,
 * mapped shared by every process that writes the database, so a write by
 * any of them moves them; on PostgreSQL they are this process's own, and
 * store_cache_wrote also notifies GH_STORE_KEYS_CHANNEL, whose payload
 * names the cache, for the other replicas (gh_store_caches_changed).
 *
 * store_caches_open sets up the generations and each cache's slots
 * (store_keys_cache_open, store_wm_cache_open), once the backend is open;
 * store_caches_close undoes it. */
void store_caches_open(struct gh_store *s);
void store_caches_close(struct gh_store *s);
enum gh_code store_cache_wrote(struct gh_store *s, struct store_conn *w, enum store_cache c,
			       struct gh_err *e);
void store_caches_moved(struct gh_store *s);
void store_keys_cache_open(struct gh_store *s);
void store_keys_cache_close(struct gh_store *s);
void store_wm_cache_open(struct gh_store *s);
void store_wm_cache_close(struct gh_store *s);

/* PostgreSQL: true when the replica numbered by the bigint expression x
 * holds its presence lock (pg_leader.h), i.e. is alive. A bigint advisory
 * key shows in pg_locks as classid (high half) and objid (low half). */
#define STORE_PG_ALIVE(x)                                                              \
	"EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.objsubid = 1 " \
	"AND l.granted AND ((l.classid::bigint << 32) | l.objid::bigint) = " x ")"

/* 1 when s is on PostgreSQL, 0 on SQLite. */
static inline int store_is_pg(const struct gh_store *s)
{
	return s->pool != NULL;
}
/* The statement a backend runs: SQLite's, or PostgreSQL's where the two
 * cannot share one (both string literals: each keys its statement cache). */
#define STORE_SQL(s, sqlite_sql, pg_sql) (store_is_pg(s) ? (pg_sql) : (sqlite_sql))

/* Runs fn as a write job and waits for its commit. The result is fn's code,
 * or GH_E_IO when the transaction could not commit (GH_E_UNAVAILABLE when
 * PostgreSQL could not be reached). */
enum gh_code store_write(struct gh_store *s, store_write_fn fn, void *arg, struct gh_err *e);
/* Queues fn without waiting; free_arg(arg) runs after it (NULL ok). Drops the
 * job silently when the queue cannot take it. fn may write only the tables
 * STORE_ASYNC_TABLES names: reads of other tables do not wait for it. */
void store_write_async(struct gh_store *s, store_write_fn fn, void *arg,
		       void (*free_arg)(void *arg));
/* What store_write_async jobs write (bookkeeping only: a run's record, a
 * key's, an admin session's last use, an MCP server's state), space
 * separated. store_read and store_get wait for queued jobs only when their
 * SQL names one of these (store_reader_for). */
#define STORE_ASYNC_TABLES "runs api_keys admin_sessions mcp_servers"

/* Borrows a read connection from the pool (waits when all are taken),
 * after the writes store_write_async queued before the call have
 * committed, so a read sees every write made before it. */
struct store_conn *store_reader(struct gh_store *s);
/* The same without waiting for queued writes: for a read that none of them
 * can change (a key's lookup: only its last use is ever queued). */
struct store_conn *store_reader_now(struct gh_store *s);
/* store_reader when sql names a table of STORE_ASYNC_TABLES (as a word),
 * else store_reader_now: most reads (memory, working memory, messages,
 * approvals, the audit log) then never commit another request's
 * bookkeeping on their way. */
struct store_conn *store_reader_for(struct gh_store *s, const char *sql);
/* Resets every statement of c (ending its read snapshot) and returns it. */
void store_reader_put(struct gh_store *s, struct store_conn *c);

/* Fills e from the connection's last error: GH_E_IO "database: <what>: <msg>"
 * (GH_E_CONFLICT "already exists" for a broken unique key). */
enum gh_code store_fail(struct store_conn *c, const char *what, struct gh_err *e);

/* Statements. SQL text stays in each domain file, as string literals with
 * ? placeholders (the statement cache is keyed by the literal's address).
 * A statement only SQLite runs carries a comment saying "sqlite-only". */

/* A statement parameter: text (NULL binds NULL), an integer, or a blob
 * (text the bytes, num their length). Parameters bind in order, from 1. */
struct store_arg {
	enum { STORE_ARG_TEXT, STORE_ARG_INT, STORE_ARG_BLOB } kind;
	const void *text;
	int64_t num;
};
#define STORE_TEXT(x) ((struct store_arg){STORE_ARG_TEXT, (x), 0})
#define STORE_INT(x) ((struct store_arg){STORE_ARG_INT, NULL, (int64_t)(x)})
#define STORE_BLOB(p, n) ((struct store_arg){STORE_ARG_BLOB, (p), (int64_t)(n)})
#define STORE_ARGS(...) (const struct store_arg[]){__VA_ARGS__}, \
	(int)(sizeof((const struct store_arg[]){__VA_ARGS__}) / sizeof(struct store_arg))

/* Runs the cached statement sql (a string literal) with args on a write
 * connection: GH_OK when it ran to completion, else GH_E_IO "database:
 * <what>: ...". *changes (may be NULL) gets the rows it changed. */
enum gh_code store_exec(struct store_conn *w, const char *sql, const struct store_arg *args,
			int n, const char *what, int *changes, struct gh_err *e);
/* store_exec for an INSERT into a table with an integer key: *id gets the
 * key of the row it inserted. */
enum gh_code store_insert(struct store_conn *w, const char *sql, const struct store_arg *args,
			  int n, const char *what, int64_t *id, struct gh_err *e);

/* A row being read, as a row callback gets it: borrowed for the callback,
 * read through the accessors below (columns count from 0). Text and blobs
 * they return are borrowed until the callback returns. */
struct store_row;
/* How many columns the row has. */
int store_col_count(struct store_row *r);
/* Whether column i is NULL. */
int store_col_isnull(struct store_row *r, int i);
/* Column i as text, NULL when NULL; an integer or real reads as its
 * decimal text. */
const char *store_col_text(struct store_row *r, int i);
/* Column i as an integer: 0 when NULL, text read as far as it is a number
 * ("12ab" is 12), a real truncated toward zero and clamped to int64_t. */
int64_t store_col_int(struct store_row *r, int i);
/* Column i as a real: 0 when NULL. */
double store_col_double(struct store_row *r, int i);
/* Column i's bytes and *len their count: NULL (and *len 0) when NULL or
 * empty. Text reads as its bytes, without the terminator. */
const void *store_col_blob(struct store_row *r, int i, size_t *len);
/* Called for each row read: 0 goes on, 1 stops (not an error), -1 says
 * the row is damaged (the read fails with GH_E_IO), STORE_ROW_NOMEM that
 * memory ran out (GH_E_NOMEM); on a failure the callback has freed what it
 * took from that row. */
#define STORE_ROW_NOMEM (-2)
typedef int (*store_row_fn)(struct store_row *r, void *ud);

/* Steps sql with args on c, handing each row to row, at most max rows
 * (max <= 0: every row). *nrows (may be NULL) gets how many were read.
 * GH_E_IO "database: <what>: ..." on a database error or a damaged row. */
enum gh_code store_rows(struct store_conn *c, const char *sql, const struct store_arg *args,
			int n, int max, store_row_fn row, void *ud, int *nrows, const char *what,
			struct gh_err *e);
/* The same for sql built for this call (not a literal): prepared, run and
 * dropped, never cached. */
enum gh_code store_rows_once(struct store_conn *c, const char *sql, const struct store_arg *args,
			     int n, int max, store_row_fn row, void *ud, int *nrows,
			     const char *what, struct gh_err *e);
/* A row callback that copies the first column's text into the store_buf
 * ud ("" when NULL). */
struct store_buf {
	char *buf;
	size_t cap;
};
int store_row_text(struct store_row *r, void *ud);
/* A row callback that stores the first column as an integer in the
 * int64_t ud. */
int store_row_int(struct store_row *r, void *ud);
/* A row callback that ignores its rows (a statement run for its effect). */
int store_row_none(struct store_row *r, void *ud);
/* The same on a reader borrowed for the call. */
enum gh_code store_read(struct gh_store *s, const char *sql, const struct store_arg *args, int n,
			int max, store_row_fn row, void *ud, int *nrows, const char *what,
			struct gh_err *e);
/* One row, read into out (out_size bytes, zeroed first) by row:
 * GH_E_NOTFOUND with e formatted from notfound when there is none. */
enum gh_code store_get(struct gh_store *s, const char *sql, const struct store_arg *args, int n,
		       store_row_fn row, void *out, size_t out_size, const char *what,
		       struct gh_err *e, const char *notfound, ...)
	__attribute__((format(printf, 10, 11)));
/* The same on store_reader_now, for a read no queued write can change;
 * notfound is the message as it is. */
enum gh_code store_get_now(struct gh_store *s, const char *sql, const struct store_arg *args,
			   int n, store_row_fn row, void *out, size_t out_size, const char *what,
			   struct gh_err *e, const char *notfound);

/* Defines NAME_each (a list's callback and its argument) and NAME_each_row, a
 * store_row_fn that reads a row into a TYPE with FROM(r, &row) (0, or -1
 * for a damaged row: skipped when SKIP, else the read fails), hands it to
 * the callback (nonzero stops the list) and clears it with CLEAR. */
#define STORE_EACH(NAME, TYPE, FROM, CLEAR, SKIP)                                       \
	struct NAME##_each {                                                            \
		int (*fn)(void *ud, const TYPE *row);                                   \
		void *ud;                                                               \
	};                                                                              \
	static int NAME##_each_row(struct store_row *r, void *ud)                       \
	{                                                                               \
		struct NAME##_each *x = ud;                                             \
		TYPE row;                                                               \
		int stop;                                                               \
                                                                                        \
		if (FROM(r, &row) != 0)                                                 \
			return (SKIP) ? 0 : -1;                                         \
		stop = x->fn(x->ud, &row);                                              \
		CLEAR(&row);                                                            \
		return stop ? 1 : 0;                                                    \
	}

/* A CLEAR for rows that own nothing. */
#define STORE_NO_CLEAR(row) ((void)(row))

/* Column text copied into dst (cap bytes); "" when NULL. */
void store_col_copy(struct store_row *r, int i, char *dst, size_t cap);
/* Column text parsed as JSON, or NULL when NULL/unparsable. Caller frees. */
cJSON *store_col_json(struct store_row *r, int i);

/* A row read into a struct by a table of its columns: column i goes to
 * cols[i], at offset off of the struct (a field of size bytes). TEXT copies
 * into a char array ("" when NULL); INT reads an int64_t; DUP a char *
 * (NULL when NULL) and JSON a cJSON * (NULL when NULL or unparsable), both
 * owned by the struct; SKIP leaves the column to the caller. */
enum store_col_kind { STORE_COL_SKIP, STORE_COL_TEXT, STORE_COL_INT, STORE_COL_DUP, STORE_COL_JSON };
struct store_col {
	enum store_col_kind kind;
	size_t off;
	size_t size;
};
#define STORE_COL(KIND, TYPE, FIELD) \
	{STORE_COL_##KIND, offsetof(TYPE, FIELD), sizeof(((TYPE *)0)->FIELD)}
#define STORE_COL_SKIPPED {STORE_COL_SKIP, 0, 0}

/* Reads the row's first n columns into base as cols says; the fields it
 * does not write keep their value. */
void store_cols_read(struct store_row *r, const struct store_col *cols, size_t n, void *base);
/* Frees what the DUP and JSON columns of base own, then zeroes the whole
 * struct (size bytes). base NULL: nothing. */
void store_cols_clear(const struct store_col *cols, size_t n, void *base, size_t size);


/* Threads and messages (store_threads.c) as the agent API shows them
 * (store.h: one owner, where NULL matches nothing; Mastra's shapes) or as
 * the admin UI does (store_ui.h: owner NULL = every owner; a thread adds
 * owner and messageCount, a message its seq, an unset time is null). Page
 * bounds are the callers' to check. cJSON results are owned by the
 * caller. */
enum store_view { STORE_VIEW_API, STORE_VIEW_ADMIN };

/* One thread of owner, read on c. GH_E_NOTFOUND when absent. */
enum gh_code store_thread_read(struct store_conn *c, enum store_view v, const char *owner,
			       const char *id, cJSON **out, struct gh_err *e);
/* Threads of owner, newest first, filtered by agent and/or resource (NULL =
 * any); page is 0-based. *out is {threads:[...], total, page, perPage,
 * hasMore}. */
enum gh_code store_thread_list(struct gh_store *s, enum store_view v, const char *owner,
			       const char *agent_id, const char *resource_id, int page,
			       int per_page, cJSON **out, struct gh_err *e);
/* A thread's messages, oldest first: the last `last` when last > 0 (page
 * and per_page ignored; hasMore then says older ones exist), else one
 * page. *out is {messages:[...], total, page, perPage, hasMore}.
 * GH_E_NOTFOUND when owner has no such thread. */
enum gh_code store_messages_list(struct gh_store *s, enum store_view v, const char *owner,
				 const char *thread_id, int page, int per_page, int last,
				 cJSON **out, struct gh_err *e);

/* Audit writer helpers (store_audit.c), run inside the batch transaction. */
enum gh_code store_chain_load(struct gh_store *s, struct store_conn *w, struct gh_err *e);
/* Appends ev to the chain inside the current job (same transaction). */
enum gh_code store_audit_append_in(struct gh_store *s, struct store_conn *w,
				   const struct gh_audit_event *ev, int64_t *seq_out,
				   struct gh_err *e);
/* Registers call (its identity: key, agent, run, tool call, tool, source,
 * args) as open in the current job; see gh_store_audit_call_open. */
enum gh_code store_audit_call_register(struct gh_store *s, struct store_conn *w,
				       const struct gh_audit_event *call,
				       const char *approval_id, int64_t *call_id,
				       struct gh_err *e);
/* Closes the open calls the process numbered instance left (0: every
 * one) with "interrupted" audit rows, in transactions of a few hundred.
 * *n gets how many. */
enum gh_code store_audit_interrupted_of(struct gh_store *s, int64_t instance, int *n,
					struct gh_err *e);
enum gh_code store_checkpoint_if_due(struct gh_store *s, struct store_conn *w, int force,
				     struct gh_err *e);
/* After a commit (ok) or a rollback (!ok) of the writer's transaction:
 * hands a checkpoint it wrote to on_checkpoint, or forgets it. */
void store_checkpoint_committed(struct gh_store *s, int ok);
/* The first seq whose row has ts >= ms (rows' ts never decreases with seq):
 * a binary search over seq. last + 1 when every row is older. */
enum gh_code store_audit_seq_at(struct store_conn *c, int64_t ms, int64_t *seq,
				struct gh_err *e);

/* Read transactions: statements between them see one snapshot. */
int store_read_begin(struct store_conn *c, struct gh_err *e);
void store_read_end(struct store_conn *c);

/* The audit filter index (store_audit_index.c; audit_index.h). */
struct gh_audit_blockidx;
struct store_audit_cond {
	int dim;                        /* enum gh_audit_dim */
	const char *val;
};
/* Blocks below *next are indexed. */
enum gh_code store_audit_index_next(struct store_conn *c, int64_t *next, struct gh_err *e);
/* Writer: indexes the oldest complete unindexed block, if any; *more says
 * whether another one is complete. */
enum gh_code store_audit_index_step(struct gh_store *s, struct store_conn *w, int *more,
				    struct gh_err *e);
/* Writer: rebuilds the postings of an indexed block from its rows (after
 * retention removed part of it). */
enum gh_code store_audit_index_rebuild(struct gh_store *s, struct store_conn *w, int64_t blk,
				       struct gh_err *e);
/* Writer: drops the postings of blocks that end before seq. */
enum gh_code store_audit_index_drop_below(struct store_conn *w, int64_t seq, struct gh_err *e);
/* Calls fn(ud, seq) for every indexed row in [lo, hi] that matches every
 * cond (1..GH_AUDIT_DIM_LAST of them), newest first unless asc. The range
 * must lie in indexed blocks. fn returns 0 to go on, 1 to stop, -1 to stop
 * on an error of its own (then GH_E_IO is returned). */
enum gh_code store_audit_postings_walk(struct store_conn *c, const struct store_audit_cond *conds,
				       int nconds, int64_t lo, int64_t hi, int asc,
				       int (*fn)(void *ud, int64_t seq), void *ud,
				       struct gh_err *e);
/* How many audit rows a scan reads per statement on PostgreSQL (tests
 * change it). */
extern int store_audit_scan_page;
/* How far a postings cursor steps before it seeks (tests change it). */
extern int store_audit_steps_before_seek;
/* Loads block blk's stored postings into m. A damaged posting sets *why
 * (and stops loading) but is not an error of the call. */
struct gh_audit_blockmap;
enum gh_code store_audit_block_load(struct store_conn *c, int64_t blk,
				    struct gh_audit_blockmap *m, const char **why,
				    struct gh_err *e);

#endif
