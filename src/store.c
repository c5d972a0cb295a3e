/*
 * store.c - connections, migrations and the writer thread (group commit).
 *
 * Threading: gh_store_* may be called from any thread. Writes become jobs
 * on a queue drained by one writer thread; a caller blocks on its job's
 * semaphore until the batch holding it has committed. Reads borrow a
 * connection from a fixed pool. In inline mode (CLI) the calling thread
 * plays the writer under inline_mu. Either way every write transaction
 * holds the cross-process flock on "<db>-writer.lock".
 *
 * On PostgreSQL (o.url) the same queue and savepoints run on one
 * connection of the store's pool, taken by whoever commits a batch for
 * that batch; readers borrow a pool connection with their slot. There is
 * no lock file, WAL, PRAGMA or block index: the server serialises writers,
 * and the audit chain takes an advisory lock (store_audit.c).
 */
#include "store_sqlite.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "audit_index.h"
#include "embed.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "pg.h"
#include "store_pg.h"
#include "util.h"

/* ------------------------------------------------------------ helpers */

void store_col_copy(struct store_row *r, int i, char *dst, size_t cap)
{
	const char *t = store_col_text(r, i);

	gh_strlcpy(dst, t ? t : "", cap);
}

int store_row_text(struct store_row *r, void *ud)
{
	struct store_buf *b = ud;

	store_col_copy(r, 0, b->buf, b->cap);
	return 0;
}

int store_row_int(struct store_row *r, void *ud)
{
	*(int64_t *)ud = store_col_int(r, 0);
	return 0;
}

int store_row_none(struct store_row *r, void *ud)
{
	(void)r;
	(void)ud;
	return 0;
}

enum gh_code store_read(struct gh_store *s, const char *sql, const struct store_arg *args, int n,
			int max, store_row_fn row, void *ud, int *nrows, const char *what,
			struct gh_err *e)
{
	struct store_conn *c = store_reader_for(s, sql);
	enum gh_code rc = store_rows(c, sql, args, n, max, row, ud, nrows, what, e);

	store_reader_put(s, c);
	return rc;
}

/* store_get's read on a reader that waits for queued writes, or not
 * (now): GH_E_NOTFOUND with e untouched when there is no row, for the
 * caller to say what was not found. */
static enum gh_code get_row(struct gh_store *s, int now, const char *sql,
			    const struct store_arg *args, int n, store_row_fn row, void *out,
			    size_t out_size, const char *what, struct gh_err *e)
{
	struct store_conn *c = now ? store_reader_now(s) : store_reader_for(s, sql);
	int seen = 0;
	enum gh_code rc;

	memset(out, 0, out_size);
	rc = store_rows(c, sql, args, n, 1, row, out, &seen, what, e);
	store_reader_put(s, c);
	if (rc != GH_OK || seen)
		return rc;
	return GH_E_NOTFOUND;
}

enum gh_code store_get(struct gh_store *s, const char *sql, const struct store_arg *args, int n,
		       store_row_fn row, void *out, size_t out_size, const char *what,
		       struct gh_err *e, const char *notfound, ...)
{
	enum gh_code rc = get_row(s, 0, sql, args, n, row, out, out_size, what, e);
	va_list ap;

	if (rc == GH_E_NOTFOUND) {
		va_start(ap, notfound);
		gh_err_vset(e, GH_E_NOTFOUND, notfound, ap);
		va_end(ap);
	}
	return rc;
}

enum gh_code store_get_now(struct gh_store *s, const char *sql, const struct store_arg *args,
			   int n, store_row_fn row, void *out, size_t out_size, const char *what,
			   struct gh_err *e, const char *notfound)
{
	enum gh_code rc = get_row(s, 1, sql, args, n, row, out, out_size, what, e);

	if (rc == GH_E_NOTFOUND)
		gh_err_set(e, GH_E_NOTFOUND, "%s", notfound);
	return rc;
}

cJSON *store_col_json(struct store_row *r, int i)
{
	size_t n;
	const char *t = store_col_blob(r, i, &n);
	cJSON *v = NULL;
	struct gh_err ignore;

	if (!t)
		return NULL;
	gh_json_parse_opts(t, n, "stored JSON", GH_JSON_STORED, &v, &ignore);
	return v;
}

void store_cols_read(struct store_row *r, const struct store_col *cols, size_t n, void *base)
{
	size_t i;

	for (i = 0; i < n; i++) {
		char *dst = (char *)base + cols[i].off;
		int col = (int)i;

		switch (cols[i].kind) {
		case STORE_COL_SKIP:
			break;
		case STORE_COL_TEXT:
			store_col_copy(r, col, dst, cols[i].size);
			break;
		case STORE_COL_INT:
			*(int64_t *)(void *)dst = store_col_int(r, col);
			break;
		case STORE_COL_DUP:
			*(char **)(void *)dst = gh_strdup(store_col_text(r, col));
			break;
		case STORE_COL_JSON:
			*(cJSON **)(void *)dst = store_col_json(r, col);
			break;
		}
	}
}

void store_cols_clear(const struct store_col *cols, size_t n, void *base, size_t size)
{
	size_t i;

	if (!base)
		return;
	for (i = 0; i < n; i++) {
		char *dst = (char *)base + cols[i].off;

		if (cols[i].kind == STORE_COL_DUP)
			free(*(char **)(void *)dst);
		else if (cols[i].kind == STORE_COL_JSON)
			cJSON_Delete(*(cJSON **)(void *)dst);
	}
	memset(base, 0, size);
}

static void conn_close(struct store_conn *c)
{
	size_t i;

	for (i = 0; i < c->ncache; i++)
		sqlite3_finalize(c->cache[i].st);
	c->ncache = 0;
	if (c->db)
		sqlite3_close(c->db);
	c->db = NULL;
}

static int exec(struct store_conn *c, const char *sql, struct gh_err *e)
{
	char *msg = NULL;

	if (sqlite3_exec(c->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		gh_err_set(e, GH_E_IO, "database: %s", msg ? msg : sqlite3_errmsg(c->db));
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

/* Runs a cached statement that returns no rows. */
static int step_done(struct store_conn *c, const char *sql, struct gh_err *e)
{
	sqlite3_stmt *st;
	int rc;

	if (!c->db) /* PostgreSQL: its BEGIN always waits for what it needs */
		return store_pg_run(c, !strcmp(sql, "BEGIN IMMEDIATE") ? "BEGIN" : sql, e) ==
				       GH_OK ? 0 : -1;
	if (!(st = store_stmt(c, sql, e)))
		return -1;
	rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
		store_fail(c, sql, e);
		return -1;
	}
	return 0;
}

int store_read_begin(struct store_conn *c, struct gh_err *e)
{
	if (!c->db) /* one snapshot for every statement, as SQLite's BEGIN */
		return step_done(c, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", e);
	return step_done(c, "BEGIN", e);
}

void store_read_end(struct store_conn *c)
{
	struct gh_err ignore;

	/* a read transaction has nothing to commit; this only ends it */
	if (c->pg) {
		if (PQtransactionStatus(gh_pg_conn_raw(c->pg)) != PQTRANS_IDLE)
			step_done(c, "COMMIT", &ignore);
		return;
	}
	if (c->db && !sqlite3_get_autocommit(c->db))
		step_done(c, "COMMIT", &ignore);
}

/* ---------------------------------------------------- cross-process lock */

static int lock_writer(struct gh_store *s)
{
	if (store_is_pg(s))
		return 0;
	while (flock(s->lock_fd, LOCK_EX) != 0) {
		if (errno != EINTR)
			return -1;
	}
	return 0;
}

static void unlock_writer(struct gh_store *s)
{
	if (store_is_pg(s))
		return;
	flock(s->lock_fd, LOCK_UN);
}

/* -------------------------------------------------------------- batches */

/* SQLite's count of commits by other connections (PRAGMA data_version:
 * another process's, the CLI's; never this writer's own), or -1. */
static int64_t data_version(struct store_conn *w)
{
	struct gh_err ignore;
	sqlite3_stmt *st = store_stmt(w, "PRAGMA data_version", &ignore);
	int64_t v = -1;

	if (st && sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	if (st)
		sqlite3_reset(st);
	return v;
}

/* At the start of a write transaction: the audit chain's head as the last
 * transaction left it still holds when nobody else has committed since
 * (this writer appends every row a gatehouse process makes; the CLI and
 * other processes move data_version). Otherwise, and always on
 * PostgreSQL, where replicas append to one chain, it is read again. */
static void chain_check(struct gh_store *s)
{
	int64_t v = store_is_pg(s) ? -1 : data_version(&s->w);

	if (v < 0 || v != s->chain_dv)
		s->chain.known = 0;
	s->chain_dv = v;
}

/* 1 when s has a writer (SQLite's connection, or PostgreSQL's pool and
 * not read-only). */
static int writable(const struct gh_store *s)
{
	return s->w.db || (s->pool && !s->o.readonly);
}

/* PostgreSQL: takes the pool connection the writer commits on (on failure
 * its statements fail with the reason); gives it back. No-ops on SQLite. */
static void writer_take(struct gh_store *s)
{
	if (!store_is_pg(s))
		return;
	gh_err_clear(&s->w.pg_err);
	if (gh_pg_acquire(s->pool, &s->w.pg, &s->w.pg_err) != GH_OK)
		s->w.pg = NULL;
}

static void writer_give(struct gh_store *s)
{
	if (s->w.pg)
		gh_pg_release(s->pool, s->w.pg);
	s->w.pg = NULL;
}

static void run_batch_on(struct gh_store *s, struct store_job *jobs, int idle_checkpoint);

/* Runs jobs (a list) in one transaction; fills each job's rc/err. */
static void run_batch(struct gh_store *s, struct store_job *jobs, int idle_checkpoint)
{
	writer_take(s);
	run_batch_on(s, jobs, idle_checkpoint);
	writer_give(s);
	if (s->caches_wrote)
		store_caches_moved(s);
}

static void run_batch_on(struct gh_store *s, struct store_job *jobs, int idle_checkpoint)
{
	struct store_job *j;
	struct gh_err be;
	uint64_t n = 0, prev;
	int64_t t0 = gh_mono_ns();
	int ok = 0, lone;

	gh_err_clear(&be);
	if (lock_writer(s) != 0) {
		gh_err_set(&be, GH_E_IO, "database: cannot take the writer lock: %s",
			   strerror(errno));
		goto fail_all;
	}
	if (step_done(&s->w, "BEGIN IMMEDIATE", &be) != 0) {
		unlock_writer(s);
		goto fail_all;
	}
	chain_check(s);
	s->audit_rows_tx = 0;
	/* a lone job needs no savepoint: when it fails, the transaction is
	 * its own to roll back (two statements fewer per commit at low load) */
	lone = jobs && !jobs->next;
	for (j = jobs; j; j = j->next) {
		struct store_chain saved = s->chain;
		int64_t rows = s->audit_rows_tx;

		n++;
		gh_err_clear(&j->err);
		if (!lone && step_done(&s->w, "SAVEPOINT job", &j->err) != 0) {
			j->rc = j->err.code;
			continue;
		}
		j->rc = j->fn(s, &s->w, j->arg, &j->err);
		if (j->rc != GH_OK && lone) {
			int undone = step_done(&s->w, "ROLLBACK", &be) == 0;

			s->chain = saved;
			s->chain.known = 0;
			unlock_writer(s);
			if (!undone)
				goto fail_all;
			return;
		}
		if (j->rc != GH_OK) {
			struct gh_err ignore;

			step_done(&s->w, "ROLLBACK TO job", &ignore);
			s->chain = saved;
			s->audit_rows_tx = rows;
		}
		if (!lone && step_done(&s->w, "RELEASE job", &be) != 0) {
			/* The transaction is in an unknown state: give up on it. */
			step_done(&s->w, "ROLLBACK", &be);
			s->chain.known = 0;
			store_checkpoint_committed(s, 0);
			unlock_writer(s);
			goto fail_all;
		}
	}
	if (s->signer) {
		struct gh_err ce;

		if (store_checkpoint_if_due(s, &s->w, idle_checkpoint, &ce) != GH_OK)
			gh_warn("audit: checkpoint not written: %s", ce.msg);
	}
	if (step_done(&s->w, "COMMIT", &be) != 0) {
		struct gh_err ignore;

		step_done(&s->w, "ROLLBACK", &ignore);
		s->chain.known = 0;
		store_checkpoint_committed(s, 0);
		unlock_writer(s);
		goto fail_all;
	}
	unlock_writer(s);
	store_checkpoint_committed(s, 1);
	if (n)
		gh_metrics_audit_commit((int64_t)n, s->audit_rows_tx, gh_mono_ns() - t0);
	ok = 1;
	atomic_fetch_add(&s->n_tx, 1);
	atomic_fetch_add(&s->n_jobs, n);
	prev = atomic_load(&s->max_batch);
	while (n > prev && !atomic_compare_exchange_weak(&s->max_batch, &prev, n))
		;
fail_all:
	if (!ok) {
		gh_error("%s", be.msg);
		for (j = jobs; j; j = j->next) {
			if (j->rc == GH_OK || j->err.code == GH_OK) {
				/* PostgreSQL out of reach: 503, as every request then */
				j->rc = be.code == GH_E_UNAVAILABLE ? GH_E_UNAVAILABLE : GH_E_IO;
				j->err = be;
			}
		}
	}
}

/* Hands each job its result: a waiting caller is woken (except self, the
 * thread running this), an async job is freed. */
static void finish_jobs(struct gh_store *s, struct store_job *jobs, struct store_job *self)
{
	struct store_job *j, *next;

	for (j = jobs; j; j = next) {
		next = j->next;
		if (j->async) {
			if (j->rc != GH_OK)
				gh_warn("database: background write failed: %s", j->err.msg);
			if (j->free_arg)
				j->free_arg(j->arg);
			free(j);
			atomic_fetch_sub(&s->queued, 1);
		} else if (j != self) {
			sem_post(&j->done);
		}
	}
}

/* Up to group_commit_max jobs from the head of the queue (qmu held). A
 * worker leading for its own write (all 0) leaves the async jobs where
 * they are, in their order, for housekeeping to commit in batches of their
 * own: they are another request's bookkeeping, which this request's answer
 * need not wait for (they write only STORE_ASYNC_TABLES, which no waiting
 * write depends on). A barrier (a read that must see them) takes them
 * along, ahead of itself. */
static struct store_job *take_batch(struct gh_store *s, int all)
{
	struct store_job *batch = NULL, **tail = &batch, *keep = NULL, **ktail = &keep;
	struct store_job *klast = NULL, *j;
	int n = 0, nkeep = 0;

	while ((j = s->qhead) && n < s->o.group_commit_max) {
		s->qhead = j->next;
		j->next = NULL;
		if (!all && j->async) {
			*ktail = j;
			ktail = &j->next;
			klast = j;
			nkeep++;
			continue;
		}
		if (!all && j->barrier && keep) {
			*tail = keep;
			tail = ktail;
			n += nkeep;
			keep = NULL;
			ktail = &keep;
			klast = NULL;
			all = 1;
		}
		*tail = j;
		tail = &j->next;
		n++;
	}
	if (keep) {
		/* back in front of what was not taken, in their order */
		klast->next = s->qhead;
		if (!s->qhead)
			s->qtail = klast;
		s->qhead = keep;
	}
	if (!s->qhead)
		s->qtail = NULL;
	return batch;
}

/* 1 when every job in the queue is async (qmu held). */
static int only_async(const struct gh_store *s)
{
	const struct store_job *j;

	for (j = s->qhead; j; j = j->next)
		if (!j->async)
			return 0;
	return 1;
}

/* Housekeeping checkpoints the WAL into the database, not SQLite inside a
 * commit: a commit that happens to trigger one would make that caller wait
 * for two fsyncs. It holds the writer (wmu and the writer lock) while it
 * does: a checkpoint must never run beside a write (see README, "One
 * writer"), and flock does not exclude threads sharing the lock file. */
#define CKPT_PAGES 1000

/* Async jobs nobody leads wait in the queue for up to LINGER_MS (or until
 * LINGER_JOBS of them are there) so that housekeeping commits them together:
 * at one request at a time, every run record would otherwise be a
 * transaction and a wake-up of its own. Only bookkeeping goes async (a run
 * record, a key's last use); a read waits for it by committing the queue
 * itself (store_reader), so linger delays no one, and a crash in the
 * window loses at most that bookkeeping. */
#define LINGER_MS 5
#define LINGER_JOBS 64

/* While async jobs keep coming (the last one less than WARM_MS ago),
 * housekeeping looks at the queue every LINGER_MS on its own, so the job
 * that finds the queue empty need not wake it: at one request at a time
 * that is a wake-up (two context switches) saved per request, for at most
 * 200 timed wake-ups a second while warm. (The idle audit checkpoint,
 * which waits for a quiet ckpt_every_ms, thus comes up to WARM_MS later.) */
#define WARM_MS 1000

static int wal_hook(void *ud, sqlite3 *db, const char *name, int pages)
{
	struct gh_store *s = ud;

	(void)db;
	(void)name;
	if (pages < atomic_load(&s->wal_mark))
		atomic_store(&s->wal_mark, 0); /* the WAL started over */
	atomic_store(&s->wal_pages, pages);
	return SQLITE_OK;
}

/* Enough new frames since the last checkpoint to run another. */
static int wal_due(struct gh_store *s)
{
	return atomic_load(&s->wal_pages) - atomic_load(&s->wal_mark) >= CKPT_PAGES;
}

/* Group commit without a hand-off at low load: the first caller to find
 * no one committing becomes the leader and commits the queue itself (its
 * own job and whatever queued behind it) until its own job is done; a lone
 * caller thus commits on its own thread with no wake-ups. If others queued
 * meanwhile, housekeeping takes the lead and drains the queue batch after
 * batch, as a dedicated writer would, so a busy store pays one wake-up per
 * burst rather than per batch. self is NULL for housekeeping, which leads
 * until the queue is empty. */
static void lead(struct gh_store *s, struct store_job *self)
{
	int mine = 0;

	while (!mine) {
		struct store_job *batch, *j;

		pthread_mutex_lock(&s->qmu);
		batch = take_batch(s, !self || self->barrier);
		pthread_mutex_unlock(&s->qmu);
		if (!batch)
			break;
		pthread_mutex_lock(&s->wmu);
		run_batch(s, batch, 0);
		pthread_mutex_unlock(&s->wmu);
		for (j = batch; self && j; j = j->next)
			if (j == self)
				mine = 1;
		finish_jobs(s, batch, self);
	}
	pthread_mutex_lock(&s->qmu);
	if (s->qhead && !(self && only_async(s)))
		s->house_lead = 1; /* the lead stays taken: housekeeping has it */
	else
		s->leader = 0;     /* what is left lingers for housekeeping */
	if (s->house_lead || atomic_load(&s->audit_index_due) || wal_due(s))
		pthread_cond_signal(&s->qcv);
	pthread_mutex_unlock(&s->qmu);
}

static enum gh_code index_job(struct gh_store *s, struct store_conn *w, void *arg,
			      struct gh_err *e)
{
	return store_audit_index_step(s, w, arg, e);
}

/* Indexes one complete block of audit rows, in a transaction of its own
 * (the caller holds the writer): commits wait for at most one block. */
static void index_one_block(struct gh_store *s)
{
	struct store_job j;
	int more = 0;

	memset(&j, 0, sizeof(j));
	j.fn = index_job;
	j.arg = &more;
	run_batch(s, &j, 0);
	if (j.rc != GH_OK)
		gh_warn("audit: indexing a block of rows: %s", j.err.msg);
	/* on failure the next completed block tries again */
	atomic_store(&s->audit_index_due, j.rc == GH_OK && more);
}

static void wal_checkpoint(struct gh_store *s)
{
	int log = 0, done = 0, rc;

	/* frames readers still need stay; the next try comes after as many
	 * new ones, not in a loop */
	atomic_store(&s->wal_mark, atomic_load(&s->wal_pages));
	pthread_mutex_lock(&s->wmu);
	if (lock_writer(s) != 0) {
		pthread_mutex_unlock(&s->wmu);
		return;
	}
	rc = sqlite3_wal_checkpoint_v2(s->w.db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
	unlock_writer(s);
	if (rc != SQLITE_OK)
		gh_warn("database: checkpoint: %s", sqlite3_errmsg(s->w.db));
	pthread_mutex_unlock(&s->wmu);
	if (log > atomic_load(&s->wal_mark))
		atomic_store(&s->wal_mark, log);
}

/* Waits on qcv (qmu held) until woken or Unix ms time at. */
static int wait_until(struct gh_store *s, int64_t at)
{
	struct timespec ts;

	ts.tv_sec = (time_t)(at / 1000);
	ts.tv_nsec = (long)(at % 1000) * 1000000;
	return pthread_cond_timedwait(&s->qcv, &s->qmu, &ts);
}

/* Housekeeping: commits async jobs nobody is leading, indexes audit
 * blocks as they fill, signs an audit checkpoint when the log has been
 * quiet for a while, and checkpoints the WAL. */
static void *housekeeping(void *arg)
{
	struct gh_store *s = arg;

	for (;;) {
		int timed_out = 0, lead_now = 0, stop;

		pthread_mutex_lock(&s->qmu);
		while (!s->stopping && !s->house_lead && !atomic_load(&s->audit_index_due) &&
		       !wal_due(s)) {
			int64_t now = gh_now_ms(), due = 0, idle = 0;

			if (s->qhead) {
				due = s->linger_from + LINGER_MS;
				if (!s->leader &&
				    (now >= due || atomic_load(&s->queued) >= LINGER_JOBS))
					break;
				/* a worker leads (and leaves the async jobs): look
				 * again a linger later, unwoken */
				if (now >= due)
					due = now + LINGER_MS;
			} else if (now - s->async_at < WARM_MS) {
				due = now + LINGER_MS;
			}
			if (s->signer && s->ckpt_every_ms > 0)
				idle = now + s->ckpt_every_ms;
			if (due && (!idle || due <= idle)) {
				s->house_until = due;
				wait_until(s, due);
			} else if (idle) {
				s->house_until = idle;
				if (wait_until(s, idle) == ETIMEDOUT) {
					timed_out = 1;
					break;
				}
			} else {
				s->house_until = INT64_MAX;
				pthread_cond_wait(&s->qcv, &s->qmu);
			}
		}
		s->house_until = 0; /* awake: it looks at the queue before it waits */
		if (s->stopping && !s->qhead && !s->house_lead) {
			pthread_mutex_unlock(&s->qmu);
			break;
		}
		if (s->house_lead) {
			s->house_lead = 0;
			lead_now = 1;
		} else if (s->qhead && !s->leader) {
			s->leader = 1;
			lead_now = 1;
		}
		stop = s->stopping;
		pthread_mutex_unlock(&s->qmu);
		if (lead_now)
			lead(s, NULL);
		if (atomic_load(&s->audit_index_due) && !stop) {
			pthread_mutex_lock(&s->wmu);
			index_one_block(s);
			pthread_mutex_unlock(&s->wmu);
		}
		if (timed_out) {
			pthread_mutex_lock(&s->wmu);
			run_batch(s, NULL, 1);
			pthread_mutex_unlock(&s->wmu);
		}
		if (wal_due(s))
			wal_checkpoint(s);
	}
	return NULL;
}

static int enqueue(struct gh_store *s, struct store_job *j, int *leader)
{
	int was_empty;

	pthread_mutex_lock(&s->qmu);
	if (s->stopping) {
		pthread_mutex_unlock(&s->qmu);
		return -1;
	}
	j->next = NULL;
	was_empty = !s->qhead;
	if (s->qtail)
		s->qtail->next = j;
	else
		s->qhead = j;
	s->qtail = j;
	if (j->async)
		s->async_at = gh_now_ms();
	if (!s->leader) {
		if (leader) {
			s->leader = 1;
			*leader = 1;
		} else if (was_empty) {
			/* housekeeping leads async jobs: woken unless it looks
			 * within a linger anyway */
			s->linger_from = s->async_at;
			if (s->house_until > s->linger_from + LINGER_MS)
				pthread_cond_signal(&s->qcv);
		} else if (atomic_load(&s->queued) >= LINGER_JOBS) {
			pthread_cond_signal(&s->qcv);
		}
	}
	pthread_mutex_unlock(&s->qmu);
	return 0;
}

static enum gh_code write_job(struct gh_store *s, store_write_fn fn, void *arg, int barrier,
			      struct gh_err *e);

enum gh_code store_write(struct gh_store *s, store_write_fn fn, void *arg, struct gh_err *e)
{
	return write_job(s, fn, arg, 0, e);
}

/* store_write, or (barrier) a job committed only with every job queued
 * before it, the async ones included (take_batch). */
static enum gh_code write_job(struct gh_store *s, store_write_fn fn, void *arg, int barrier,
			      struct gh_err *e)
{
	struct store_job j;
	int leader = 0;

	if (!writable(s))
		return gh_err_set(e, GH_E_UNAVAILABLE, "%s",
				  s->o.readonly_reason ? s->o.readonly_reason
						       : "database: opened read-only");
	memset(&j, 0, sizeof(j));
	j.fn = fn;
	j.arg = arg;
	j.barrier = barrier;
	if (!s->o.threaded) {
		pthread_mutex_lock(&s->inline_mu);
		run_batch(s, &j, 0);
		if (atomic_load(&s->audit_index_due))
			index_one_block(s);
		pthread_mutex_unlock(&s->inline_mu);
	} else {
		if (sem_init(&j.done, 0, 0) != 0)
			return gh_err_set(e, GH_E_INTERNAL, "database: sem_init failed");
		if (enqueue(s, &j, &leader) != 0) {
			sem_destroy(&j.done);
			return gh_err_set(e, GH_E_UNAVAILABLE, "database: shutting down");
		}
		if (leader)
			lead(s, &j);
		else
			while (sem_wait(&j.done) != 0 && errno == EINTR)
				;
		sem_destroy(&j.done);
	}
	if (j.rc != GH_OK && e)
		*e = j.err;
	return j.rc;
}

void store_write_async(struct gh_store *s, store_write_fn fn, void *arg,
		       void (*free_arg)(void *arg))
{
	struct store_job *j;

	if (!writable(s) || !s->o.threaded) {
		struct gh_err ignore;

		if (writable(s))
			store_write(s, fn, arg, &ignore);
		if (free_arg)
			free_arg(arg);
		return;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		if (free_arg)
			free_arg(arg);
		return;
	}
	j->fn = fn;
	j->arg = arg;
	j->free_arg = free_arg;
	j->async = 1;
	atomic_fetch_add(&s->queued, 1);
	if (enqueue(s, j, NULL) != 0) {
		atomic_fetch_sub(&s->queued, 1);
		if (free_arg)
			free_arg(arg);
		free(j);
	}
}

/* --------------------------------------------------------------- readers */

static enum gh_code nothing_job(struct gh_store *s, struct store_conn *w, void *arg,
				 struct gh_err *e)
{
	(void)s;
	(void)w;
	(void)arg;
	(void)e;
	return GH_OK;
}

struct store_conn *store_reader_now(struct gh_store *s)
{
	size_t i;

	pthread_mutex_lock(&s->rmu);
	for (;;) {
		for (i = 0; i < s->nreaders; i++) {
			if (!s->readers[i].busy) {
				struct store_conn *c = &s->readers[i];

				c->busy = 1;
				pthread_mutex_unlock(&s->rmu);
				if (store_is_pg(s)) {
					/* on failure its statements fail with why */
					gh_err_clear(&c->pg_err);
					if (gh_pg_acquire(s->pool, &c->pg, &c->pg_err) != GH_OK)
						c->pg = NULL;
				}
				return c;
			}
		}
		pthread_cond_wait(&s->rcv, &s->rmu);
	}
}

struct store_conn *store_reader(struct gh_store *s)
{
	if (atomic_load(&s->queued) > 0) {
		/* a write queued before this read commits first (the queue is
		 * in order): a reader sees every write made before it */
		struct gh_err ignore;

		write_job(s, nothing_job, NULL, 1, &ignore);
	}
	return store_reader_now(s);
}

/* 1 when sql names table (bounded by characters that cannot be in a
 * name on either side). */
static int names_table(const char *sql, const char *table, size_t len)
{
	const char *p = sql;

	while ((p = strstr(p, table))) {
		char before = p == sql ? ' ' : p[-1], after = p[len];

		if (!(isalnum((unsigned char)before) || before == '_') &&
		    !(isalnum((unsigned char)after) || after == '_'))
			return 1;
		p += len;
	}
	return 0;
}

struct store_conn *store_reader_for(struct gh_store *s, const char *sql)
{
	const char *t = STORE_ASYNC_TABLES;

	if (atomic_load(&s->queued) == 0)
		return store_reader_now(s);
	while (*t) {
		size_t len = strcspn(t, " ");
		char name[32];

		if (len < sizeof(name)) {
			memcpy(name, t, len);
			name[len] = '\0';
			if (names_table(sql, name, len))
				return store_reader(s);
		}
		t += len;
		t += *t == ' ';
	}
	return store_reader_now(s);
}

void store_reader_put(struct gh_store *s, struct store_conn *c)
{
	size_t i;

	for (i = 0; i < c->ncache; i++)
		sqlite3_reset(c->cache[i].st);
	if (c->pg)
		gh_pg_release(s->pool, c->pg);
	c->pg = NULL;
	pthread_mutex_lock(&s->rmu);
	c->busy = 0;
	pthread_cond_signal(&s->rcv);
	pthread_mutex_unlock(&s->rmu);
}

/* ------------------------------------------------------------ migrations */

int store_migration_version(const char *name)
{
	int v = 0, i;

	for (i = 0; i < 4; i++) {
		if (name[i] < '0' || name[i] > '9')
			return -1;
		v = v * 10 + (name[i] - '0');
	}
	return name[4] == '_' ? v : -1;
}

int gh_store_schema_latest(void)
{
	int v = 0;
	const struct gh_embedded *m;

	for (m = gh_embedded_migrations; m->name; m++)
		if (store_migration_version(m->name) > v)
			v = store_migration_version(m->name);
	return v;
}

static int read_version(struct store_conn *c, int *out, struct gh_err *e)
{
	sqlite3_stmt *st;
	int rc;

	/* No table yet means version 0. */
	rc = sqlite3_prepare_v2(c->db,
				"SELECT count(*) FROM sqlite_master WHERE name = 'schema_migrations'",
				-1, &st, NULL);
	if (rc != SQLITE_OK)
		return store_fail(c, "reading the schema version", e), -1;
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		sqlite3_finalize(st);
		return store_fail(c, "reading the schema version", e), -1;
	}
	if (sqlite3_column_int(st, 0) == 0) {
		sqlite3_finalize(st);
		*out = 0;
		return 0;
	}
	sqlite3_finalize(st);
	rc = sqlite3_prepare_v2(c->db, "SELECT coalesce(max(version), 0) FROM schema_migrations",
				-1, &st, NULL);
	if (rc != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW) {
		sqlite3_finalize(st);
		return store_fail(c, "reading the schema version", e), -1;
	}
	*out = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return 0;
}

/* 0 when no row breaks a foreign key; -1 with e naming the table. */
static int fk_check(struct store_conn *c, struct gh_err *e)
{
	sqlite3_stmt *st = NULL;
	int rc = -1, src;

	if (sqlite3_prepare_v2(c->db, "PRAGMA foreign_key_check", -1, &st, NULL) != SQLITE_OK) {
		gh_err_set(e, GH_E_IO, "foreign key check: %s", sqlite3_errmsg(c->db));
		return -1;
	}
	src = sqlite3_step(st);
	if (src == SQLITE_ROW)
		gh_err_set(e, GH_E_IO, "a row of %s breaks a foreign key",
			   (const char *)sqlite3_column_text(st, 0));
	else if (src != SQLITE_DONE)
		gh_err_set(e, GH_E_IO, "foreign key check: %s", sqlite3_errmsg(c->db));
	else
		rc = 0;
	sqlite3_finalize(st);
	return rc;
}

/* Applies pending migrations in order, each in its own transaction, under
 * the writer lock. */
static enum gh_code migrate(struct gh_store *s, int *applied, struct gh_err *e)
{
	const struct gh_embedded *m;
	int cur, latest = gh_store_schema_latest(), n = 0;
	enum gh_code rc = GH_OK;

	if (lock_writer(s) != 0)
		return gh_err_set(e, GH_E_IO, "database: cannot take the writer lock: %s",
				  strerror(errno));
	if (exec(&s->w, "CREATE TABLE IF NOT EXISTS schema_migrations ("
			"version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
			"applied_at INTEGER NOT NULL)", e) != 0 ||
	    read_version(&s->w, &cur, e) != 0) {
		rc = GH_E_IO;
		goto out;
	}
	if (cur > latest) {
		rc = gh_err_set(e, GH_E_IO,
				"database %s has schema version %d, newer than this gatehouse "
				"knows (%d): refusing to touch it; upgrade gatehouse",
				s->path, cur, latest);
		goto out;
	}
	for (int v = cur + 1; v <= latest; v++) {
		const struct gh_embedded *found = NULL;
		char ins[320];

		for (m = gh_embedded_migrations; m->name; m++) {
			if (store_migration_version(m->name) != v)
				continue;
			if (found) {
				/* two branches each took the next number */
				rc = gh_err_set(e, GH_E_INTERNAL, "migrations %s and %s have the "
						"same version", found->name, m->name);
				goto out;
			}
			found = m;
		}
		if (!found) {
			rc = gh_err_set(e, GH_E_INTERNAL, "migration %04d is missing from the build",
					v);
			goto out;
		}
		/* a migration may rebuild a table others reference (SQLite's way
		 * to change a constraint): foreign keys off meanwhile (a no-op
		 * inside a transaction), checked before the commit */
		if (exec(&s->w, "PRAGMA foreign_keys = OFF", e) != 0 ||
		    exec(&s->w, "BEGIN IMMEDIATE", e) != 0) {
			rc = GH_E_IO;
			goto out;
		}
		snprintf(ins, sizeof(ins),
			 "INSERT INTO schema_migrations (version, name, applied_at) "
			 "VALUES (%d, '%.*s', %lld)",
			 v, 200, found->name, (long long)gh_now_ms());
		if (exec(&s->w, (const char *)found->data, e) != 0 || exec(&s->w, ins, e) != 0 ||
		    fk_check(&s->w, e) != 0) {
			struct gh_err ignore;
			char why[GH_ERR_MSG_MAX];

			gh_strlcpy(why, e ? e->msg : "", sizeof(why));
			exec(&s->w, "ROLLBACK", &ignore);
			rc = gh_err_set(e, GH_E_IO, "migration %s failed: %s", found->name, why);
			goto out;
		}
		if (exec(&s->w, "COMMIT", e) != 0) {
			struct gh_err ignore;

			exec(&s->w, "ROLLBACK", &ignore);
			rc = GH_E_IO;
			goto out;
		}
		if (exec(&s->w, "PRAGMA foreign_keys = ON", e) != 0) {
			rc = GH_E_IO;
			goto out;
		}
		gh_info("database: applied migration %s", found->name);
		n++;
	}
	s->schema_version = latest;
out:
	if (rc != GH_OK) {
		struct gh_err ignore;

		exec(&s->w, "PRAGMA foreign_keys = ON", &ignore);
	}
	s->chain.known = 0; /* a migration may have moved audit rows */
	unlock_writer(s);
	if (applied)
		*applied = n;
	return rc;
}

/* PostgreSQL: applies migrations/postgres (embedded) with gh_pg_migrate,
 * which serialises replicas with an advisory lock. */
static enum gh_code pg_migrate(struct gh_store *s, int *applied, struct gh_err *e)
{
	struct gh_pg_migration m[64];
	struct gh_pg_conn *c = NULL;
	const struct gh_embedded *em;
	size_t n = 0;
	int v = 0;
	enum gh_code rc;

	for (em = gh_embedded_pg_migrations; em->name; em++) {
		if (n == sizeof(m) / sizeof(m[0]) || store_migration_version(em->name) < 1)
			return gh_err_set(e, GH_E_INTERNAL, "migration %s: bad name or too many",
					  em->name);
		m[n].version = store_migration_version(em->name);
		m[n].name = em->name + 5;
		m[n].sql = (const char *)em->data;
		n++;
	}
	if ((rc = gh_pg_acquire(s->pool, &c, e)) != GH_OK)
		return rc;
	rc = gh_pg_migrate(c, m, n, &v, e);
	gh_pg_release(s->pool, c);
	if (rc != GH_OK)
		return rc;
	if (applied)
		*applied = v > s->schema_version ? v - s->schema_version : 0;
	s->schema_version = v;
	return GH_OK;
}

enum gh_code gh_store_migrate(struct gh_store *s, int *applied, struct gh_err *e)
{
	enum gh_code rc;

	if (!writable(s))
		return gh_err_set(e, GH_E_IO, "database: opened read-only");
	if (s->o.threaded) {
		/* gh_store_open applied every migration before starting the
		 * writer, which now owns the connection: nothing is pending */
		if (applied)
			*applied = 0;
		return GH_OK;
	}
	pthread_mutex_lock(&s->inline_mu);
	rc = store_is_pg(s) ? pg_migrate(s, applied, e) : migrate(s, applied, e);
	pthread_mutex_unlock(&s->inline_mu);
	return rc;
}

/* ------------------------------------------------------------ open/close */

/* Before the first connection: SQLite counts every allocation it makes,
 * under a global mutex, for sqlite3_status(), which gatehouse never asks
 * (a tool request's statements make about 70); and the VFS that writes
 * each WAL frame in one call (store_vfs.c). */
static pthread_once_t sqlite_once = PTHREAD_ONCE_INIT;
static const char *sqlite_vfs;

static void sqlite_setup(void)
{
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	sqlite_vfs = store_vfs_register();
}

static int open_conn(struct gh_store *s, struct store_conn *c, int readonly, struct gh_err *e)
{
	int flags = SQLITE_OPEN_NOMUTEX |
		    (readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);

	memset(c, 0, sizeof(*c));
	pthread_once(&sqlite_once, sqlite_setup);
	if (sqlite3_open_v2(s->path, &c->db, flags, sqlite_vfs) != SQLITE_OK) {
		gh_err_set(e, GH_E_IO, "database %s: %s", s->path,
			   c->db ? sqlite3_errmsg(c->db) : "cannot open");
		conn_close(c);
		return -1;
	}
	sqlite3_extended_result_codes(c->db, 1);
	sqlite3_busy_timeout(c->db, s->o.busy_timeout_ms);
	/* Only the writer, holding the writer lock, may ever checkpoint:
	 * gh_store_close checkpoints explicitly. */
	sqlite3_db_config(c->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
	if (store_fts_register(c->db, e) != 0) {
		conn_close(c);
		return -1;
	}
	if (readonly) {
		if (exec(c, "PRAGMA query_only = 1", e) != 0) {
			conn_close(c);
			return -1;
		}
		return 0;
	}
	if (exec(c, s->o.synchronous_full ? "PRAGMA synchronous = FULL"
					  : "PRAGMA synchronous = NORMAL", e) != 0 ||
	    exec(c, "PRAGMA foreign_keys = ON", e) != 0 ||
	    /* the writer touches the same index pages over and over */
	    exec(c, "PRAGMA cache_size = -32768", e) != 0) {
		conn_close(c);
		return -1;
	}
	return 0;
}

/* An open that failed says which file it was about: SQLite's own messages
 * ("file is not a database", "attempt to write a readonly database") do
 * not name it. */
static void name_path(const char *path, struct gh_err *e)
{
	char was[GH_ERR_MSG_MAX];
	const char *rest;

	if (!e || strstr(e->msg, path))
		return;
	memcpy(was, e->msg, sizeof(was));
	rest = !strncmp(was, "database: ", 10) ? was + 10 : was;
	gh_err_set(e, e->code, "database %s: %s%s", path, rest,
		   strstr(rest, "file is not a database")
			   ? " (database.path must name a gatehouse database, or a file that "
			     "does not exist yet)" : "");
}

/* SQLite: the lock file, the writer connection in WAL mode, migrations. */
static enum gh_code sqlite_open(struct gh_store *s, struct gh_err *e)
{
	size_t plen = strlen(s->o.path);
	int i;

	s->path = strdup(s->o.path);
	s->lock_path = malloc(plen + sizeof("-writer.lock"));
	if (!s->path || !s->lock_path)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	memcpy(s->lock_path, s->o.path, plen);
	memcpy(s->lock_path + plen, "-writer.lock", sizeof("-writer.lock"));

	if (s->o.readonly) {
		if (access(s->path, F_OK) != 0)
			return gh_err_set(e, GH_E_IO,
					  "database %s does not exist (run gatehouse migrate first)",
					  s->path);
	} else {
		s->lock_fd = open(s->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (s->lock_fd < 0)
			return gh_err_set(e, GH_E_IO, "%s: %s", s->lock_path, strerror(errno));
		if (open_conn(s, &s->w, 0, e) != 0)
			return GH_E_IO;
		if (lock_writer(s) != 0)
			return gh_err_set(e, GH_E_IO, "database: cannot take the writer lock");
		i = exec(&s->w, "PRAGMA journal_mode = WAL", e);
		unlock_writer(s);
		if (i != 0)
			return GH_E_IO;
		if (migrate(s, NULL, e) != GH_OK)
			return GH_E_IO;
	}
	return GH_OK;
}

/* SQLite, read-only: the schema is there and not newer than this binary. */
static enum gh_code sqlite_version_check(struct gh_store *s, struct gh_err *e)
{
	struct gh_err ve;
	int v = 0;

	if (read_version(&s->readers[0], &v, &ve) != 0)
		return gh_err_set(e, GH_E_IO, "%s", ve.msg);
	if (v > gh_store_schema_latest())
		return gh_err_set(e, GH_E_IO,
				  "database %s has schema version %d, newer than this "
				  "gatehouse knows (%d); upgrade gatehouse",
				  s->path, v, gh_store_schema_latest());
	if (v == 0)
		return gh_err_set(e, GH_E_IO,
				  "database %s has no schema (run gatehouse migrate first)",
				  s->path);
	s->schema_version = v;
	return GH_OK;
}

/* PostgreSQL: the pool (readers and the writer; one connection made now,
 * so a wrong URL is reported at open) and migrations, or, read-only, the
 * schema version checked. */
static enum gh_code pg_open(struct gh_store *s, struct gh_err *e)
{
	struct gh_pg_opts po = {
		s->o.url,
		s->o.pool_size > 0 ? s->o.pool_size : s->o.readers + 1,
		s->o.connect_timeout_ms > 0 ? (s->o.connect_timeout_ms + 999) / 1000 : 5,
		s->o.statement_timeout_ms,
		s->o.busy_timeout_ms > 0 ? s->o.busy_timeout_ms : 5000,
	};
	struct gh_pg_conn *c = NULL;
	PGresult *r = NULL;
	enum gh_code rc;

	s->o.url = NULL; /* borrowed for the open only */
	if ((rc = gh_pg_pool_open(&po, &s->pool, e)) != GH_OK)
		return rc;
	if (!s->o.readonly)
		return pg_migrate(s, NULL, e);
	if ((rc = gh_pg_acquire(s->pool, &c, e)) != GH_OK)
		return rc;
	rc = gh_pg_exec(c, "SELECT coalesce(max(version), 0) FROM schema_migrations", NULL, 0,
			"reading the schema version", &r, e);
	if (rc == GH_OK)
		s->schema_version = (int)gh_pg_int(r, 0, 0, NULL);
	PQclear(r);
	gh_pg_release(s->pool, c);
	if (rc != GH_OK) {
		char why[GH_ERR_MSG_MAX];

		gh_strlcpy(why, e ? e->msg : "", sizeof(why));
		return gh_err_set(e, GH_E_IO, "database has no schema (run gatehouse migrate "
				  "first): %s", why);
	}
	/* as on SQLite: never read a schema this binary does not know */
	{
		const struct gh_embedded *em;
		int latest = 0;

		for (em = gh_embedded_pg_migrations; em->name; em++)
			if (store_migration_version(em->name) > latest)
				latest = store_migration_version(em->name);
		if (s->schema_version > latest)
			return gh_err_set(e, GH_E_IO, "database has schema version %d, newer than "
					  "this gatehouse knows (%d); upgrade gatehouse",
					  s->schema_version, latest);
		if (s->schema_version == 0)
			return gh_err_set(e, GH_E_IO, "database has no schema (run gatehouse "
					  "migrate first)");
	}
	return GH_OK;
}

enum gh_code gh_store_open(const struct gh_store_opts *o, struct gh_store **out,
			   struct gh_err *e)
{
	struct gh_store *s;
	size_t i;
	enum gh_code rc = GH_E_IO;

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	s->o = *o;
	if (s->o.readers < 1)
		s->o.readers = 1;
	if (s->o.group_commit_max < 1)
		s->o.group_commit_max = 1024;
	s->lock_fd = -1;
	s->chain_dv = -1;
	s->signer = o->signer;
	randombytes_buf(&s->instance, sizeof(s->instance));
	s->instance &= INT64_MAX >> 1; /* > 0, and its halves read back from pg_locks */
	if (!s->instance)
		s->instance = 1;
	s->ckpt_rows = o->ckpt_rows > 0 ? o->ckpt_rows : 1000;
	s->ckpt_every_ms = o->ckpt_ms > 0 ? o->ckpt_ms : 60000;
	pthread_mutex_init(&s->inline_mu, NULL);
	pthread_mutex_init(&s->unclosed_mu, NULL);
	pthread_mutex_init(&s->rmu, NULL);
	pthread_cond_init(&s->rcv, NULL);
	pthread_mutex_init(&s->wmu, NULL);
	pthread_mutex_init(&s->qmu, NULL);
	pthread_cond_init(&s->qcv, NULL);
	if (o->url) {
		if ((rc = pg_open(s, e)) != GH_OK)
			goto fail;
	} else if ((rc = sqlite_open(s, e)) != GH_OK) {
		goto fail;
	}
	s->nreaders = (size_t)s->o.readers;
	s->readers = calloc(s->nreaders, sizeof(*s->readers));
	if (!s->readers) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto fail;
	}
	for (i = 0; !store_is_pg(s) && i < s->nreaders; i++)
		if (open_conn(s, &s->readers[i], 1, e) != 0)
			goto fail;
	if (o->readonly && !store_is_pg(s) && (rc = sqlite_version_check(s, e)) != GH_OK)
		goto fail;
	store_caches_open(s);
	if (o->threaded && !o->readonly) {
		if (!store_is_pg(s)) {
			/* blocks completed while no server ran (or before an
			 * upgrade) are indexed in the background, one at a time */
			atomic_store(&s->audit_index_due, 1);
			sqlite3_wal_hook(s->w.db, wal_hook, s);
		}
		if (pthread_create(&s->house, NULL, housekeeping, s) != 0) {
			rc = gh_err_set(e, GH_E_INTERNAL, "cannot start the database writer");
			goto fail;
		}
		s->house_started = 1;
	}
	*out = s;
	return GH_OK;
fail:
	gh_store_close(s);
	if (!o->url)
		name_path(o->path, e);
	return rc == GH_OK ? GH_E_IO : (e ? e->code : rc);
}

void gh_store_close(struct gh_store *s)
{
	size_t i;

	if (!s)
		return;
	if (s->house_started) {
		pthread_mutex_lock(&s->qmu);
		s->stopping = 1;
		pthread_cond_signal(&s->qcv);
		pthread_mutex_unlock(&s->qmu);
		pthread_join(s->house, NULL);
	}
	for (i = 0; s->readers && i < s->nreaders; i++)
		conn_close(&s->readers[i]);
	free(s->readers);
	if (store_is_pg(s) && writable(s) && s->signer) {
		/* sign whatever is still unsigned before leaving */
		pthread_mutex_lock(&s->wmu);
		run_batch(s, NULL, 1);
		pthread_mutex_unlock(&s->wmu);
	}
	gh_pg_pool_close(s->pool);
	if (s->w.db) {
		if (lock_writer(s) == 0) {
			if (s->signer) {
				struct gh_err ce;

				/* sign whatever is still unsigned before leaving */
				if (step_done(&s->w, "BEGIN IMMEDIATE", &ce) == 0) {
					s->chain.known = 0;
					if (store_checkpoint_if_due(s, &s->w, 1, &ce) != GH_OK)
						gh_warn("audit: final checkpoint: %s", ce.msg);
					if (step_done(&s->w, "COMMIT", &ce) != 0) {
						step_done(&s->w, "ROLLBACK", &ce);
						store_checkpoint_committed(s, 0);
					} else {
						store_checkpoint_committed(s, 1);
					}
				}
			}
			sqlite3_wal_checkpoint_v2(s->w.db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL,
						  NULL);
			conn_close(&s->w);
			unlock_writer(s);
		} else {
			conn_close(&s->w);
		}
	}
	gh_audit_blockidx_free(s->audit_bidx);
	store_caches_close(s);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	pthread_mutex_destroy(&s->inline_mu);
	pthread_mutex_destroy(&s->unclosed_mu);
	pthread_mutex_destroy(&s->rmu);
	pthread_cond_destroy(&s->rcv);
	pthread_mutex_destroy(&s->wmu);
	pthread_mutex_destroy(&s->qmu);
	pthread_cond_destroy(&s->qcv);
	free(s->path);
	free(s->lock_path);
	free(s);
}

void gh_store_audit_sign_with(struct gh_store *s, const struct gh_audit_signer *signer,
			      void (*on_checkpoint)(void *ud, const struct gh_audit_checkpoint *c,
						    const unsigned char prev_sig[64]),
			      void *ud)
{
	/* run_batch reads the signer holding wmu (or inline_mu), housekeeping
	 * holding qmu */
	pthread_mutex_lock(&s->inline_mu);
	pthread_mutex_lock(&s->wmu);
	pthread_mutex_lock(&s->qmu);
	s->signer = signer;
	s->on_checkpoint = on_checkpoint;
	s->on_checkpoint_ud = ud;
	pthread_cond_signal(&s->qcv); /* housekeeping's wait now has a timeout */
	pthread_mutex_unlock(&s->qmu);
	pthread_mutex_unlock(&s->wmu);
	pthread_mutex_unlock(&s->inline_mu);
}

int64_t gh_store_instance(struct gh_store *s)
{
	return s->instance;
}

struct gh_pg_pool *gh_store_pg_pool(struct gh_store *s)
{
	return store_is_pg(s) ? s->pool : NULL;
}

int gh_store_schema_version(struct gh_store *s)
{
	return s->schema_version;
}

void gh_store_stats(struct gh_store *s, struct gh_store_stats *out)
{
	out->transactions = atomic_load(&s->n_tx);
	out->jobs = atomic_load(&s->n_jobs);
	out->max_batch = atomic_load(&s->max_batch);
}

static enum gh_code analyze_job(struct gh_store *s, struct store_conn *w, void *arg,
				struct gh_err *e)
{
	(void)s;
	(void)arg;
	/* sampled statistics: cheap even on millions of rows, enough for the
	 * planner to pick the most selective index of a filtered query */
	if (!w->db)
		/* PostgreSQL: only tables that hold rows. A plan prepared after
		 * statistics said "empty" (a fresh database) stays a sequential
		 * scan until the next ANALYZE, and autovacuum waits for 50 changed
		 * rows and its next round: every commit read the whole audit log
		 * to find its head meanwhile. A table never analyzed is planned
		 * from its size, and autovacuum analyzes it as it grows. */
		return store_pg_run(w, "DO $$DECLARE r record; has boolean; BEGIN "
				       "FOR r IN SELECT c.oid::regclass AS t FROM pg_class c "
				       "WHERE c.relkind = 'r' AND c.relnamespace = "
				       "current_schema()::regnamespace LOOP "
				       "EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s)', r.t) "
				       "INTO has; IF has THEN EXECUTE format('ANALYZE %s', r.t); "
				       "END IF; END LOOP; END$$", e);
	if (exec(w, "PRAGMA analysis_limit = 1000", e) != 0 || exec(w, "ANALYZE", e) != 0)
		return GH_E_IO;
	return GH_OK;
}

enum gh_code gh_store_analyze(struct gh_store *s, struct gh_err *e)
{
	return store_write(s, analyze_job, NULL, e);
}
