/*
 * store.h - the only code that speaks SQL.
 *
 * One SQLite file in WAL mode. Writes: one writer connection owned by a
 * writer thread; callers hand it jobs and wait for their own commit, and the
 * writer runs every queued job in one transaction (group commit), each job
 * inside its own savepoint so one failure does not sink the others. Reads: a
 * bounded pool of read-only connections that never checkpoint.
 *
 * Across processes (the CLI beside a running server) every write
 * transaction, and therefore every checkpoint, runs under an exclusive
 * flock on "<db>-writer.lock": no two connections ever write or checkpoint
 * at once (SQLite's WAL-reset bug, 3.7.0 to 3.51.2).
 *
 * All gh_store_* functions are thread-safe. Strings and cJSON values they
 * return are owned by the caller unless said otherwise.
 */
#ifndef GH_STORE_H
#define GH_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "err.h"
#include "util.h"

struct gh_store;
struct gh_audit_event;
struct gh_audit_signer;
struct gh_audit_checkpoint;
struct gh_store_tx;

struct gh_store_opts {
	const char *path;          /* SQLite: the database file */
	const char *url;           /* PostgreSQL (postgres:// or postgresql://): used
				    * instead of path when set; borrowed for open */
	int pool_size;             /* PostgreSQL: connections (0: readers + 1) */
	int statement_timeout_ms;  /* PostgreSQL: 0 = the server's */
	int connect_timeout_ms;    /* PostgreSQL: per attempt (0: 5 s) */
	int synchronous_full;      /* PRAGMA synchronous=FULL instead of NORMAL */
	int readers;               /* read pool size (>= 1) */
	int busy_timeout_ms;
	int group_commit_max;      /* most jobs per transaction */
	int threaded;              /* 1: writer thread (serve); 0: writes run inline (CLI) */
	int readonly;              /* 1: no writer at all (CLI reads); no migrations */
	/* Audit checkpoints: signer borrowed for the life of the store; NULL
	 * disables them. Signed every ckpt_rows rows or ckpt_ms ms. */
	const struct gh_audit_signer *signer;
	int64_t ckpt_rows;
	int64_t ckpt_ms;
	/* readonly: why, for the GH_E_UNAVAILABLE every write then gets (NULL:
	 * "database: opened read-only"). Borrowed for the life of the store. */
	const char *readonly_reason;
};

/* Opens (creating when needed, unless readonly), applies pending migrations
 * under the writer lock and starts the writer thread. Refuses a database
 * whose schema is newer than this binary knows (GH_E_IO with both
 * versions in the message). */
enum gh_code gh_store_open(const struct gh_store_opts *o, struct gh_store **out,
			   struct gh_err *e);

/* Starts signing audit checkpoints with signer (borrowed for the life of
 * the store) from the next commit on, for a store opened without one:
 * serve opens its store unsigned, checks the chain it finds, and only then
 * signs (a checkpoint covers every row before it). on_checkpoint (may be
 * NULL) is called after the commit of every checkpoint signed (never for
 * one rolled back), on the committing thread while it holds the writer:
 * it must only hand the checkpoint on (the witness queues it). prev_sig is
 * the signature of the checkpoint it chains to. */
void gh_store_audit_sign_with(struct gh_store *s, const struct gh_audit_signer *signer,
			      void (*on_checkpoint)(void *ud, const struct gh_audit_checkpoint *c,
						    const unsigned char prev_sig[64]),
			      void *ud);

/* Drains queued writes, stops the writer, checkpoints (under the lock) and
 * closes every connection. NULL is a no-op. */
void gh_store_close(struct gh_store *s);

/* PostgreSQL: the store's connection pool (for what replicas share
 * besides the store: rate limits, health); NULL on SQLite. */
struct gh_pg_pool;
struct gh_pg_pool *gh_store_pg_pool(struct gh_store *s);

/* Highest migration applied / known to this binary. */
int gh_store_schema_version(struct gh_store *s);
int gh_store_schema_latest(void);

/* Applies pending migrations; *applied gets how many ran. Used by
 * "gatehouse migrate" (gh_store_open already does it for serve). */
enum gh_code gh_store_migrate(struct gh_store *s, int *applied, struct gh_err *e);

/* Refreshes the query planner's statistics (sampled ANALYZE), so filtered
 * queries use their most selective index. Runs on the writer. */
enum gh_code gh_store_analyze(struct gh_store *s, struct gh_err *e);

/* Counters for benchmarks and /healthz: commits, jobs, largest batch. */
struct gh_store_stats {
	uint64_t transactions;
	uint64_t jobs;
	uint64_t max_batch;
};
void gh_store_stats(struct gh_store *s, struct gh_store_stats *out);

/* ---------------------------------------------------------------- keys */

#define GH_NAME_MAX 128

struct gh_key {
	char id[48];
	char name[GH_NAME_MAX + 1];
	char owner[GH_NAME_MAX + 1];
	char policy[GH_NAME_MAX + 1];   /* "" = the policy named "default" */
	int admin;
	char prefix[16];
	int64_t created_at;
	int64_t last_used_at;            /* 0 = never */
	int64_t revoked_at;              /* 0 = live */
};

/* Inserts k; k->hash is the keyed hash of the secret (32 bytes). */
enum gh_code gh_store_key_insert(struct gh_store *s, const struct gh_key *k,
				 const unsigned char hash[32], struct gh_err *e);
/* GH_E_NOTFOUND when no key has this hash. Revoked keys are returned (the
 * caller tells "revoked" from "unknown"). */
enum gh_code gh_store_key_by_hash(struct gh_store *s, const unsigned char hash[32],
				  struct gh_key *out, struct gh_err *e);
enum gh_code gh_store_key_by_id(struct gh_store *s, const char *id, struct gh_key *out,
				struct gh_err *e);
/* Calls fn for every key, newest first; fn returns nonzero to stop. */
enum gh_code gh_store_key_list(struct gh_store *s, int (*fn)(void *ud, const struct gh_key *k),
			       void *ud, struct gh_err *e);
/* GH_E_NOTFOUND for an unknown id, GH_E_CONFLICT when already revoked.
 * Once it returns GH_OK no process on the database authenticates the key
 * again: lookups by hash are cached (for at most GH_STORE_KEY_CACHE_MS),
 * and a revocation drops the cache of this process, of every other
 * process on the same SQLite file, and (PostgreSQL) of every process that
 * hears GH_STORE_KEYS_CHANNEL (gh_store_caches_changed). */
enum gh_code gh_store_key_revoke(struct gh_store *s, const char *id, struct gh_err *e);

#define GH_STORE_KEY_CACHE_MS 1000
/* PostgreSQL: the channel a change of a cached table is notified on, in
 * the transaction that makes it; the payload names the cache. */
#define GH_STORE_KEYS_CHANNEL "gatehouse_keys"
#define GH_STORE_CACHE_KEYS ""
#define GH_STORE_CACHE_WM "working_memory"
/* Drops this process's cached rows of the cache a notification on
 * GH_STORE_KEYS_CHANNEL names (what, its payload), or of every cache
 * (what NULL: notifications may have been missed, the listening
 * connection was lost). Any thread. */
void gh_store_caches_changed(struct gh_store *s, const char *what);
/* Records use without waiting (fire and forget); cheap to call per request. */
void gh_store_key_touch(struct gh_store *s, const char *id, int64_t now_ms);

/* ------------------------------------------------------------- threads */

/* Thread ids are unique per owner: a thread is (owner, id), and another
 * owner's thread with the same id is a different thread, never in the way.
 *
 * A thread as the memory API shows it: {id, resourceId, agentId, title,
 * metadata, createdAt, updatedAt}. GH_E_NOTFOUND when owner has none. */
enum gh_code gh_store_thread_get(struct gh_store *s, const char *owner, const char *id,
				 cJSON **out, struct gh_err *e);
/* Threads of owner, newest first, filtered by agent and/or resource (NULL =
 * any); page is 0-based. *out is {threads:[...], total, page, perPage,
 * hasMore}. */
enum gh_code gh_store_thread_list(struct gh_store *s, const char *owner, const char *agent_id,
				  const char *resource_id, int page, int per_page, cJSON **out,
				  struct gh_err *e);
enum gh_code gh_store_thread_create(struct gh_store *s, const char *owner, const char *id,
				    const char *resource_id, const char *agent_id,
				    const char *title, const cJSON *metadata, struct gh_err *e);
/* Any of title/metadata/resource_id may be NULL (unchanged). */
enum gh_code gh_store_thread_update(struct gh_store *s, const char *owner, const char *id,
				    const char *title, const cJSON *metadata,
				    const char *resource_id, struct gh_err *e);
/* Deletes the thread with its messages. */
enum gh_code gh_store_thread_delete(struct gh_store *s, const char *owner, const char *id,
				    struct gh_err *e);
/* The last `limit` messages of owner's thread, oldest first, as
 * CoreMessages {role, content}. */
enum gh_code gh_store_messages_recent(struct gh_store *s, const char *owner,
				      const char *thread_id, int limit, cJSON **out,
				      struct gh_err *e);
/* One page of a thread's messages, oldest first: {messages:[{id, threadId,
 * resourceId, role, content, type, createdAt, runId}], total, page,
 * perPage, hasMore}. Checks the owner (GH_E_NOTFOUND). */
enum gh_code gh_store_messages_page(struct gh_store *s, const char *owner, const char *thread_id,
				    int page, int per_page, cJSON **out, struct gh_err *e);

/* ---------------------------------------------------------------- runs */

/* Everything a request persists at its end, in one transaction: the thread
 * (created when new), the new messages, the run row and its tool calls. */
struct gh_run_commit {
	const char *run_id;
	const char *owner;
	const char *key_id;
	const char *agent_id;
	const char *thread_id;         /* NULL: the run has no thread */
	const char *resource_id;
	int create_thread;             /* insert the thread row first */
	const char *thread_title;
	const cJSON *messages;         /* array of CoreMessages to append, or NULL */
	const char *status;            /* runs.status */
	const char *expect_status;     /* NULL: a new run (inserted; an existing id is
					* GH_E_CONFLICT). Else the run must exist with
					* this status (GH_E_CONFLICT otherwise). */
	const cJSON *state;            /* run working state */
	const cJSON *output;           /* final output or NULL */
	const char *error;             /* NULL */
	/* Tool calls handed out now (pending) and answered now. */
	const char *const *pending_ids;
	const char *const *pending_names;
	const char *const *pending_sources;
	size_t npending;
	const char *const *answered_ids;
	size_t nanswered;
	int64_t wait_until;            /* Unix ms a waiting run expires at; 0: never */
	/* Optional: more writes that commit with the run, or not at all (the
	 * audit row that ends a call made just before): with_tx(tx, with_ud)
	 * runs last in the run's transaction, as a gh_store_tx_run fn. */
	enum gh_code (*with_tx)(struct gh_store_tx *tx, void *ud, struct gh_err *e);
	void *with_ud;
};
enum gh_code gh_store_run_commit(struct gh_store *s, const struct gh_run_commit *c,
				 struct gh_err *e);
/* The same for a new run that ends here with nothing else to write (no
 * thread, no tool calls, nothing pending or answered, no with_tx): the
 * commit is queued and made in the background, so the caller answers
 * without waiting for it. Every later read of the store waits for it
 * first; a crash before it loses only that run's record. Copies what it
 * needs from c. GH_E_BADREQ when c is not such a run, GH_E_NOMEM: commit
 * it with gh_store_run_commit instead. */
enum gh_code gh_store_run_commit_later(struct gh_store *s, const struct gh_run_commit *c,
				       struct gh_err *e);

/* Atomically moves a run from `from` to `to` (e.g. waiting -> running when a
 * continuation claims it), remembering `from` so a crash mid-run can be
 * undone by gh_store_runs_recover. GH_E_CONFLICT when the run is not in
 * `from`. */
enum gh_code gh_store_run_transition(struct gh_store *s, const char *run_id, const char *from,
				     const char *to, struct gh_err *e);

/* At start: runs a crash left "running" go back to the status they were
 * claimed from. *n gets how many. On PostgreSQL only the runs of
 * replicas that are not alive (their presence lock is free): another
 * replica's running runs are its own. */
enum gh_code gh_store_runs_recover(struct gh_store *s, int *n, struct gh_err *e);

/* This process's instance number (random, > 0, drawn at open): a run it
 * claims and a call it opens are marked with it, and on PostgreSQL it
 * holds an advisory lock on it while it lives (pg_leader.h). */
int64_t gh_store_instance(struct gh_store *s);

/* PostgreSQL: the instance numbers of replicas that left running runs or
 * open calls behind and hold no presence lock now (at most cap). Always
 * none on SQLite, where a restart recovers everything. */
enum gh_code gh_store_replicas_gone(struct gh_store *s, int64_t *ids, size_t cap, size_t *n,
				    struct gh_err *e);
/* Recovers what the dead replica `instance` left: its open calls closed
 * with "interrupted" audit rows, its running runs back to the status they
 * were claimed from. fn (may be NULL) gets each such run's id after the
 * commit, to resume it; *nruns and *ncalls (may be NULL) how many. */
enum gh_code gh_store_replica_recover(struct gh_store *s, int64_t instance,
				      void (*fn)(void *ud, const char *run_id), void *ud,
				      int *nruns, int *ncalls, struct gh_err *e);
/* Suspended runs whose approvals are all decided, the last one before
 * decided_before (Unix ms): a replica that decided them died before it
 * resumed them. Calls fn for at most cap of them. */
enum gh_code gh_store_runs_stalled(struct gh_store *s, int64_t decided_before, size_t cap,
				   void (*fn)(void *ud, const char *run_id), void *ud,
				   struct gh_err *e);

/* Calls fn with the id of every run in status, oldest first. */
enum gh_code gh_store_runs_with_status(struct gh_store *s, const char *status,
				       int (*fn)(void *ud, const char *run_id), void *ud,
				       struct gh_err *e);

/* Which waiting runs gh_store_runs_waiting lists: of owner and key_id on
 * agent_id, suspended or waiting; thread_id and resource_id NULL = any;
 * last changed within [from_ms, to_ms] (to_ms 0 = no bound); at most
 * limit, newest first. */
struct gh_store_runs_filter {
	const char *owner, *key_id, *agent_id, *thread_id, *resource_id;
	int64_t from_ms, to_ms;
	int limit;
};
enum gh_code gh_store_runs_waiting(struct gh_store *s, const struct gh_store_runs_filter *f,
				   int (*fn)(void *ud, const char *run_id), void *ud,
				   struct gh_err *e);

/* The ids of up to cap runs waiting (status "waiting") whose wait_until
 * has passed at now_ms, soonest first, into ids; *n gets how many. Reads
 * only (called every second). */
enum gh_code gh_store_runs_due(struct gh_store *s, int64_t now_ms, char (*ids)[48], size_t cap,
			       size_t *n, struct gh_err *e);

struct gh_run_row {
	char id[48];
	char owner[GH_NAME_MAX + 1];
	char key_id[48];
	char agent_id[GH_NAME_MAX + 1];
	char thread_id[GH_NAME_MAX + 1];   /* "" = none */
	char resource_id[GH_NAME_MAX + 1];
	char status[16];
	cJSON *state;                      /* owned; gh_run_row_clear */
	cJSON *output;                     /* owned or NULL */
	char *error;                       /* owned or NULL */
	int64_t created_at;
	int64_t updated_at;
};
void gh_run_row_clear(struct gh_run_row *r);
/* GH_E_NOTFOUND when absent or owned by another owner (owner NULL = any). */
enum gh_code gh_store_run_get(struct gh_store *s, const char *owner, const char *run_id,
			      struct gh_run_row *out, struct gh_err *e);

/* Finds the run waiting on a tool call id. *status_out is "pending" or
 * "answered". GH_E_NOTFOUND when unknown (or another owner's). */
enum gh_code gh_store_tool_call_find(struct gh_store *s, const char *owner,
				     const char *tool_call_id, char run_id[48],
				     char status_out[16], struct gh_err *e);

/* ------------------------------------------------------------- memory */

enum gh_code gh_store_memory_save(struct gh_store *s, const char *owner, const char *resource,
				  const char *content, const char *tags, int64_t *id_out,
				  struct gh_err *e);
/* The writes below inside a transaction (gh_store_tx_run). */
enum gh_code gh_store_memory_save_tx(struct gh_store_tx *tx, const char *owner,
				     const char *resource, const char *content, const char *tags,
				     int64_t *id_out, struct gh_err *e);
enum gh_code gh_store_memory_delete_tx(struct gh_store_tx *tx, const char *owner,
				       const char *resource, int64_t id, struct gh_err *e);
enum gh_code gh_store_working_memory_set_tx(struct gh_store_tx *tx, const char *owner,
					    const char *resource, const char *content,
					    struct gh_err *e);
/* bm25-ranked full-text search within (owner, resource); at most limit
 * results. *out is an array of {id, content, tags, createdAt, score}. The
 * query is taken as plain words (FTS syntax in it has no effect). */
enum gh_code gh_store_memory_search(struct gh_store *s, const char *owner, const char *resource,
				    const char *query, int limit, cJSON **out, struct gh_err *e);
/* GH_E_NOTFOUND when id is not a memory of (owner, resource). */
enum gh_code gh_store_memory_delete(struct gh_store *s, const char *owner, const char *resource,
				    int64_t id, struct gh_err *e);
enum gh_code gh_store_working_memory_set(struct gh_store *s, const char *owner,
					 const char *resource, const char *content,
					 struct gh_err *e);
/* *out is NULL when none; caller frees. */
enum gh_code gh_store_working_memory_get(struct gh_store *s, const char *owner,
					 const char *resource, char **out, struct gh_err *e);

/* -------------------------------------------------------------- audit */

/* Appends one event to the hash chain and waits for its commit. The writer
 * assigns seq and computes the hashes, and signs a checkpoint when due.
 * Failing here means the event is not recorded: the caller must not run
 * the tool (fail closed). */
enum gh_code gh_store_audit_append(struct gh_store *s, const struct gh_audit_event *ev,
				   int64_t *seq_out, struct gh_err *e);

/* Every execution accounted for. A call gatehouse runs itself (a memory
 * or server tool) is open from the row that lets it run until the row that
 * ends it; each step is written in the same transaction as its audit row,
 * into a register of open calls, so a crash leaves in the register exactly
 * the calls whose end was never recorded (gh_store_audit_close_interrupted
 * closes them at the next start). */

/* Appends ev (the "allowed" row) and registers the call it names as open,
 * in one transaction. *call_id identifies the call for its end; *seq_out
 * (may be NULL) gets the row's seq. */
enum gh_code gh_store_audit_call_open(struct gh_store *s, const struct gh_audit_event *ev,
				      int64_t *call_id, int64_t *seq_out, struct gh_err *e);
/* Appends ev (the "executed" or "failed" row) and closes call_id, in one
 * transaction. call_id 0: a plain append. */
enum gh_code gh_store_audit_call_close(struct gh_store *s, int64_t call_id,
				       const struct gh_audit_event *ev, struct gh_err *e);
/* The end of call_id could not be written (the database was out of reach,
 * or its commit failed): noted, so that gh_store_audit_close_unclosed
 * closes it with an "interrupted" row once the database is back, rather
 * than leaving it open until the next restart. Bounded: past a few
 * hundred noted, a call stays open for the restart (or, on PostgreSQL,
 * another replica) to close, and a warning says so. call_id 0: no-op. */
void gh_store_audit_call_unclosed(struct gh_store *s, int64_t call_id);
/* Closes the calls noted above that are still open; those it cannot
 * close yet stay noted. *n (may be NULL) gets how many it closed. */
enum gh_code gh_store_audit_close_unclosed(struct gh_store *s, int *n, struct gh_err *e);

/* At start, before anything runs: closes every call still open with an
 * "interrupted" row (outcome "no_effect" for memory tools, whose effect
 * commits with their end, "unknown" for the others: the tool may or may
 * not have acted). *n gets how many. */
enum gh_code gh_store_audit_close_interrupted(struct gh_store *s, int *n, struct gh_err *e);

/* A write transaction handed to the caller's fn (gh_store_tx_run): what fn
 * does through the *_tx functions commits together, or not at all (fn
 * returning an error rolls all of it back). fn runs on whichever thread
 * commits the batch, while it holds the writer: it must not call any other
 * gh_store_* function, nor block. tx is valid only inside fn. */
typedef enum gh_code (*gh_store_tx_fn)(struct gh_store_tx *tx, void *ud, struct gh_err *e);
enum gh_code gh_store_tx_run(struct gh_store *s, gh_store_tx_fn fn, void *ud, struct gh_err *e);
/* gh_store_audit_call_close inside a transaction: an in-database tool's
 * effect and its end row commit together. ev NULL: only closes call_id
 * (the row was appended otherwise in this transaction). */
enum gh_code gh_store_tx_audit_call_close(struct gh_store_tx *tx, int64_t call_id,
					  const struct gh_audit_event *ev, struct gh_err *e);


/* A stored audit row; strings are borrowed until the callback returns. */
struct gh_audit_row {
	int64_t seq;
	struct gh_audit_event *ev;
	const unsigned char *prev_hash;   /* prev_len bytes */
	size_t prev_len;
	const unsigned char *hash;        /* hash_len bytes */
	size_t hash_len;
};

/* What the audit readers call for each row, checkpoint (or anchor) and
 * indexed block (see gh_store_audit_scan_indexed); nonzero stops the
 * reading. */
struct gh_audit_checkpoint;
struct gh_audit_blockmap;
typedef int (*gh_audit_row_fn)(void *ud, const struct gh_audit_row *r);
typedef int (*gh_audit_ckpt_fn)(void *ud, const struct gh_audit_checkpoint *c);
typedef int (*gh_audit_block_fn)(void *ud, int64_t blk, const struct gh_audit_blockmap *stored,
				 const char *why);

/* Calls fn for every row with seq >= from_seq in ascending order (verify,
 * export). Streams: memory use does not grow with the table. fn returns
 * nonzero to stop. */
enum gh_code gh_store_audit_scan(struct gh_store *s, int64_t from_seq, int64_t to_seq,
				 gh_audit_row_fn fn, void *ud, struct gh_err *e);

/* Like gh_store_audit_scan from from_seq to the end, in one snapshot, and
 * with the filter index: before the first row of each block, block_fn gets
 * the block number and its stored postings (audit_index.h) when the block
 * is indexed, else NULL; why is set when a stored posting is damaged (the
 * postings are then incomplete). Either callback returns nonzero to stop.
 * For `audit verify`, which checks every row against them. */
enum gh_code gh_store_audit_scan_indexed(struct gh_store *s, int64_t from_seq,
					 gh_audit_row_fn row_fn, gh_audit_block_fn block_fn,
					 void *ud, struct gh_err *e);

/* Builds the filter index of every complete block not yet indexed, one
 * block per transaction; from_scratch drops the index first (repairs a
 * damaged one). progress(ud, blocks), when set, is called every 256
 * blocks. The server does this by itself as blocks fill up. */
enum gh_code gh_store_audit_reindex(struct gh_store *s, int from_scratch,
				    void (*progress)(void *ud, int64_t blocks), void *ud,
				    struct gh_err *e);

/* For `audit verify`: in one snapshot, the retention anchor (anchor_fn,
 * when there is one), every checkpoint in ascending seq (ckpt_fn), then
 * every row from the anchor's (or the first) on, with the filter index as
 * gh_store_audit_scan_indexed gives it. Any callback stops the reading by
 * returning nonzero. One snapshot: a server committing meanwhile cannot
 * make checkpoints and rows disagree. */
enum gh_code gh_store_audit_scan_verify(struct gh_store *s, gh_audit_ckpt_fn anchor_fn,
					gh_audit_ckpt_fn ckpt_fn, gh_audit_row_fn row_fn,
					gh_audit_block_fn block_fn, void *ud, struct gh_err *e);

struct gh_audit_filter {
	int64_t from_ms, to_ms;           /* 0 = open */
	const char *key_id, *agent_id, *thread_id, *run_id, *tool_name, *event, *outcome;
	const char *owner;                /* restrict to one owner (non-admin callers) */
};
/* One page of matching rows. Newest first with rows whose seq < cursor
 * (cursor 0 = from the newest), or with ascending oldest first with rows
 * whose seq > cursor. At most limit rows; fn is called per row; *next gets
 * the cursor for the next page (0 when this was the last). */
enum gh_code gh_store_audit_query(struct gh_store *s, const struct gh_audit_filter *f,
				  int64_t cursor, int limit, int ascending, gh_audit_row_fn fn,
				  void *ud, int64_t *next, struct gh_err *e);

struct gh_audit_checkpoint {
	int64_t seq;
	int64_t ts;
	unsigned char hash[32];
	unsigned char public_key[32];
	unsigned char signature[64];
	int ok_sizes;                      /* 0 when a blob had the wrong length */
	int chained;                       /* signs the checkpoint before it (audit.h) */
	int64_t prev_seq;                  /* ...which covers this row (0: none) */
};
/* Calls fn for every checkpoint in ascending seq. */
enum gh_code gh_store_audit_checkpoints(struct gh_store *s, gh_audit_ckpt_fn fn, void *ud,
					struct gh_err *e);
/* The checkpoint at seq; GH_E_NOTFOUND when there is none. */
enum gh_code gh_store_audit_checkpoint_at(struct gh_store *s, int64_t seq,
					  struct gh_audit_checkpoint *out, struct gh_err *e);
/* The newest end of the chain, in one snapshot, for the start-up check:
 * anchor_fn gets the retention anchor when there is one, ckpt_fn the
 * newest checkpoint and then the one before it (when there are), then
 * row_fn every row from the newest checkpoint's row, or from the anchor's
 * when that is later, or from the first row when there is no checkpoint,
 * onwards in order. Any of them stops the reading by returning nonzero. */
enum gh_code gh_store_audit_newest(struct gh_store *s, gh_audit_ckpt_fn anchor_fn,
				   gh_audit_ckpt_fn ckpt_fn, gh_audit_row_fn row_fn, void *ud,
				   struct gh_err *e);
/* The retention anchor; GH_E_NOTFOUND when the chain starts at genesis. The
 * anchor's hash field holds the prev_hash of its first kept row. */
enum gh_code gh_store_audit_anchor(struct gh_store *s, struct gh_audit_checkpoint *out,
				   struct gh_err *e);
/* Rows and seq range: for status displays. */
enum gh_code gh_store_audit_bounds(struct gh_store *s, int64_t *first, int64_t *last,
				   int64_t *count, struct gh_err *e);
/* Deletes rows older than cutoff_ms, keeping the chain verifiable: records
 * a signed anchor at the first kept row. Never deletes past the newest
 * checkpoint. *deleted gets the count. */
enum gh_code gh_store_audit_prune(struct gh_store *s, int64_t cutoff_ms, int64_t *deleted,
				  struct gh_err *e);

/* ------------------------------------------------------------ approvals */

struct gh_approval {
	char id[GH_ID_MAX];
	char key_id[GH_ID_MAX];
	char owner[GH_NAME_MAX + 1];
	char agent_id[GH_NAME_MAX + 1];
	char thread_id[GH_NAME_MAX + 1];
	char run_id[GH_ID_MAX];
	char tool_call_id[GH_ID_MAX];
	char tool_name[72];                 /* federated tools' names reach 64 */
	char source[16];
	char args_sha256[65];
	char policy_name[GH_NAME_MAX + 1];
	char policy_version[17];
	char approver[8];
	char status[16];
	char decided_by[GH_NAME_MAX + 16];
	char *rule;                         /* owned */
	char *reason;                       /* owned or NULL */
	cJSON *args;                        /* owned: redacted canonical arguments */
	int64_t created_at, expires_at, decided_at, executed_at;
	/* How the approved call ended, as its audit row says: exec_outcome
	 * "ok", "error" or "not_run" ("" while unknown), the error or why it
	 * did not run (owned or NULL), when, and that row's seq (0 = none). */
	char exec_outcome[8];
	char *exec_error;
	int64_t exec_finished_at, exec_audit_seq;
	/* Approved with edited arguments: edited_sha256 non-empty, edited_args
	 * redacted for reviewers, edited_exact what the tool runs with (both
	 * owned); NULL/"" when approved as asked. */
	char edited_sha256[65];
	cJSON *edited_args, *edited_exact;
};
/* Frees what a owns and zeroes it. */
void gh_approval_clear(struct gh_approval *a);

/* Inserts a (status pending) and its audit row ev in one transaction. */
enum gh_code gh_store_approval_insert(struct gh_store *s, const struct gh_approval *a,
				      const char *args_json, const struct gh_audit_event *ev,
				      struct gh_err *e);
/* By id, or by tool call id when by_call. GH_E_NOTFOUND when absent or
 * owned by another owner (owner NULL = any). */
enum gh_code gh_store_approval_get(struct gh_store *s, const char *owner, const char *id,
				   int by_call, struct gh_approval *out, struct gh_err *e);
/* status NULL = any; owner NULL = any. Pending oldest first, else newest
 * first; at most limit. fn returns nonzero to stop. */
enum gh_code gh_store_approval_list(struct gh_store *s, const char *status, const char *owner,
				    int limit, int (*fn)(void *ud, const struct gh_approval *a),
				    void *ud, struct gh_err *e);
/* Arguments an approver edited: canonical JSON, redacted and exact, and
 * the SHA-256 of the exact one. */
struct gh_approval_edit {
	const char *redacted, *exact, *sha256;
};
/* Decides a pending, unexpired approval (status "approved"/"denied") and
 * appends ev in the same transaction; edit (may be NULL) records edited
 * arguments. GH_E_CONFLICT (message says who decided, or that it expired)
 * when not pending. */
enum gh_code gh_store_approval_decide(struct gh_store *s, const char *id, const char *status,
				      const char *decided_by, const char *reason,
				      const struct gh_approval_edit *edit,
				      const struct gh_audit_event *ev, struct gh_err *e);
/* Sets executed_at once; GH_E_CONFLICT when already set. With call (the
 * identity of the call: key, agent, thread, run, tool call, tool, source,
 * args), the claim also opens the call (gh_store_audit_call_open), in the
 * same transaction, and *call_id identifies it. */
enum gh_code gh_store_approval_claim_exec(struct gh_store *s, const char *id,
					  const struct gh_audit_event *call, int64_t *call_id,
					  struct gh_err *e);
/* Appends ev (the row saying how approved call id ended) and records on the
 * approval its outcome ("ok", "error" or "not_run"), error (may be NULL),
 * the time and the row's seq, in one transaction. The first outcome
 * recorded stays. */
enum gh_code gh_store_approval_finish_exec(struct gh_store *s, const char *id,
					   const char *outcome, const char *error,
					   const struct gh_audit_event *ev, struct gh_err *e);
/* The same inside a transaction (gh_store_tx_run): with the call's end. */
enum gh_code gh_store_approval_finish_exec_tx(struct gh_store_tx *tx, const char *id,
					      const char *outcome, const char *error,
					      const struct gh_audit_event *ev, struct gh_err *e);
/* Marks pending approvals past expiry as expired, appending an "expired"
 * audit row for each, in one transaction; fn gets each (after commit). */
enum gh_code gh_store_approvals_expire(struct gh_store *s, int64_t now_ms,
				       void (*fn)(void *ud, const struct gh_approval *a), void *ud,
				       int *n, struct gh_err *e);

/* --------------------------------------------------------- admin users */

struct gh_admin_user {
	char name[GH_NAME_MAX + 1];
	char password_hash[160];          /* crypto_pwhash_str output */
	int64_t created_at, disabled_at, last_login_at;
};

/* Account changes. Each appends ev (when not NULL) to the audit log in
 * the change's own transaction: if the row cannot be written, nothing
 * changes. GH_E_NOTFOUND for an unknown name ("no admin ..."). */

/* GH_E_CONFLICT when the name exists. */
enum gh_code gh_store_admin_create(struct gh_store *s, const char *name, const char *pwhash,
				   const struct gh_audit_event *ev, struct gh_err *e);
enum gh_code gh_store_admin_get(struct gh_store *s, const char *name, struct gh_admin_user *out,
				struct gh_err *e);
enum gh_code gh_store_admin_list(struct gh_store *s,
				 int (*fn)(void *ud, const struct gh_admin_user *u), void *ud,
				 struct gh_err *e);
/* Disables the user and ends all their sessions (*ended, may be NULL:
 * how many). GH_E_CONFLICT when disabled already. */
enum gh_code gh_store_admin_disable(struct gh_store *s, const char *name,
				    const struct gh_audit_event *ev, int *ended, struct gh_err *e);
/* Enables a disabled user (who then logs in again: their sessions ended
 * when they were disabled). GH_E_CONFLICT when not disabled. */
enum gh_code gh_store_admin_enable(struct gh_store *s, const char *name,
				   const struct gh_audit_event *ev, struct gh_err *e);
/* Replaces the user's password hash and ends their sessions, all of them
 * or all but the one whose token hash is keep_session (32 bytes, may be
 * NULL); *ended (may be NULL) says how many. Disabled users' too. */
enum gh_code gh_store_admin_set_password(struct gh_store *s, const char *name,
					 const char *pwhash, const unsigned char *keep_session,
					 const struct gh_audit_event *ev, int *ended,
					 struct gh_err *e);

struct gh_admin_session {
	char user[GH_NAME_MAX + 1];
	char csrf[64];
	int64_t created_at, last_seen_at, expires_at;
};

/* Creates a session; also records the login time. */
enum gh_code gh_store_session_create(struct gh_store *s, const unsigned char token_hash[32],
				     const char *user, const char *csrf, int64_t expires_at,
				     const char *remote_addr, struct gh_err *e);
/* A live session (not expired, user not disabled) whose last_seen_at is
 * within idle_ms; GH_E_NOTFOUND otherwise. Records use (fire and forget). */
enum gh_code gh_store_session_get(struct gh_store *s, const unsigned char token_hash[32],
				  int64_t idle_ms, struct gh_admin_session *out,
				  struct gh_err *e);
/* The session as stored (expired ones too, disabled users' not), without
 * recording use. */
enum gh_code gh_store_session_peek(struct gh_store *s, const unsigned char token_hash[32],
				   struct gh_admin_session *out, struct gh_err *e);
enum gh_code gh_store_session_delete(struct gh_store *s, const unsigned char token_hash[32],
				     struct gh_err *e);

/* ---------------------------------------------------- rate-limit state */

enum gh_code gh_store_ratelimit_save(struct gh_store *s, const char *const *keys,
				     const int64_t *tats, size_t n, struct gh_err *e);
enum gh_code gh_store_ratelimit_load(struct gh_store *s,
				     int (*fn)(void *ud, const char *key, int64_t tat_ms),
				     void *ud, struct gh_err *e);

/* ------------------------------------------- notification deliveries */

/* One delivery of one approval event to one notification target
 * (notify.h). Never holds a target's URL or secret. */
struct gh_notify_row {
	int64_t id;
	char event_id[GH_ID_MAX];           /* the payload's id, shared by its targets */
	char target[72];
	char kind[16];                      /* webhook | smtp */
	char event[24];                     /* approval-requested | -decided | -expired */
	char approval_id[GH_ID_MAX];
	char *payload;                      /* owned: the event's JSON, or NULL */
	char state[16];                     /* pending | delivered | failed */
	int64_t attempts;
	int64_t last_code;                  /* HTTP status or SMTP reply; 0 = none */
	char *last_error;                   /* owned or NULL */
	int64_t next_attempt_at;            /* Unix ms; 0 = none */
	int64_t created_at, updated_at, delivered_at;
};
/* Frees what r owns and zeroes it. */
void gh_notify_row_clear(struct gh_notify_row *r);
/* Inserts r (its id ignored); *id gets the new row's. */
enum gh_code gh_store_notify_insert(struct gh_store *s, const struct gh_notify_row *r,
				    int64_t *id, struct gh_err *e);
/* Writes r's state, kind, attempts, last_code, last_error,
 * next_attempt_at, updated_at and delivered_at to row r->id. */
enum gh_code gh_store_notify_update(struct gh_store *s, const struct gh_notify_row *r,
				    struct gh_err *e);
/* The oldest `limit` pending deliveries, oldest first; then every pending
 * one after them is marked failed with error `overflow` (they would not
 * fit the queue). */
enum gh_code gh_store_notify_pending(struct gh_store *s, int limit, const char *overflow,
				     int (*fn)(void *ud, const struct gh_notify_row *r), void *ud,
				     struct gh_err *e);
/* Deliveries of approval_id (NULL: of every approval), newest first, at
 * most limit. */
enum gh_code gh_store_notify_list(struct gh_store *s, const char *approval_id, int limit,
				  int (*fn)(void *ud, const struct gh_notify_row *r), void *ud,
				  struct gh_err *e);
/* Retention: deletes the finished deliveries (delivered or failed) last
 * updated before cutoff_ms; pending ones always stay. *deleted (may be
 * NULL) gets how many went. */
enum gh_code gh_store_notify_prune(struct gh_store *s, int64_t cutoff_ms, int64_t *deleted,
				   struct gh_err *e);

#endif
