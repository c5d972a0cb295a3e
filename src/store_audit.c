/*
 * store_audit.c - the audit table: appending to the hash chain (writer
 * only), signed checkpoints, retention, and streaming reads for query,
 * export and verify. Threading as in store.c.
 */
#include "store_sqlite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_index.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "util.h"

static const unsigned char genesis[GH_AUDIT_HASH_LEN];

/* ------------------------------------------------------------- writing */

enum gh_code store_chain_load(struct gh_store *s, struct store_conn *w, struct gh_err *e)
{
	sqlite3_stmt *st;
	struct store_chain *c = &s->chain;
	int rc;

	if (c->known)
		return GH_OK;
	memset(c, 0, sizeof(*c));
	st = store_stmt(w, "SELECT seq, hash, ts FROM audit_events ORDER BY seq DESC LIMIT 1", e);
	if (!st)
		return GH_E_IO;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		if (sqlite3_column_bytes(st, 1) != GH_AUDIT_HASH_LEN) {
			sqlite3_reset(st);
			return gh_err_set(e, GH_E_IO, "audit: the newest row has a damaged hash; "
						      "run gatehouse audit verify");
		}
		c->last_seq = sqlite3_column_int64(st, 0);
		memcpy(c->last_hash, sqlite3_column_blob(st, 1), GH_AUDIT_HASH_LEN);
		c->last_ts = sqlite3_column_int64(st, 2);
	} else if (rc == SQLITE_DONE) {
		sqlite3_reset(st);
		/* Empty table: after a full prune the anchor says where to go on. */
		st = store_stmt(w, "SELECT seq, prev_hash FROM audit_anchor WHERE id = 1", e);
		if (!st)
			return GH_E_IO;
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW && sqlite3_column_bytes(st, 1) == GH_AUDIT_HASH_LEN) {
			c->last_seq = sqlite3_column_int64(st, 0) - 1;
			memcpy(c->last_hash, sqlite3_column_blob(st, 1), GH_AUDIT_HASH_LEN);
		} else if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
			return store_fail(w, "reading the audit anchor", e);
		} else {
			memcpy(c->last_hash, genesis, GH_AUDIT_HASH_LEN);
		}
	} else {
		return store_fail(w, "reading the audit chain", e);
	}
	sqlite3_reset(st);
	st = store_stmt(w, "SELECT seq, ts, signature FROM audit_checkpoints "
			   "ORDER BY seq DESC LIMIT 1", e);
	if (!st)
		return GH_E_IO;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		c->ckpt_seq = sqlite3_column_int64(st, 0);
		c->ckpt_ms = sqlite3_column_int64(st, 1);
		/* a damaged signature chains as zeros: verify reports it */
		if (sqlite3_column_bytes(st, 2) == 64)
			memcpy(c->ckpt_sig, sqlite3_column_blob(st, 2), 64);
	} else if (rc != SQLITE_DONE) {
		return store_fail(w, "reading audit checkpoints", e);
	}
	sqlite3_reset(st);
	c->known = 1;
	return GH_OK;
}

/* Signs (seq, hash, ts) of the newest row chained to the newest checkpoint
 * (audit.h), and keeps it for the witness until the commit. */
static enum gh_code insert_checkpoint(struct gh_store *s, struct store_conn *w,
				      struct gh_err *e)
{
	unsigned char sig[64];
	int64_t now = gh_now_ms();
	struct gh_audit_checkpoint *k = &s->ckpt_new;
	enum gh_code rc;

	gh_audit_sign_ckpt(s->signer, s->chain.last_seq, s->chain.last_hash, now,
			   s->chain.ckpt_seq, s->chain.ckpt_sig, sig);
	rc = store_exec(w, "INSERT INTO audit_checkpoints (seq, hash, ts, public_key, signature, "
			   "prev_seq) VALUES (?, ?, ?, ?, ?, ?)",
			STORE_ARGS(STORE_INT(s->chain.last_seq),
				   STORE_BLOB(s->chain.last_hash, GH_AUDIT_HASH_LEN), STORE_INT(now),
				   STORE_BLOB(s->signer->pk, 32), STORE_BLOB(sig, 64),
				   STORE_INT(s->chain.ckpt_seq)),
			"writing an audit checkpoint", NULL, e);
	if (rc != GH_OK)
		return rc;
	memset(k, 0, sizeof(*k));
	k->seq = s->chain.last_seq;
	k->ts = now;
	memcpy(k->hash, s->chain.last_hash, GH_AUDIT_HASH_LEN);
	memcpy(k->public_key, s->signer->pk, 32);
	memcpy(k->signature, sig, 64);
	k->ok_sizes = 1;
	k->chained = 1;
	k->prev_seq = s->chain.ckpt_seq;
	memcpy(s->ckpt_new_prev_sig, s->chain.ckpt_sig, 64);
	s->ckpt_pending = 1;
	s->chain.ckpt_seq = s->chain.last_seq;
	s->chain.ckpt_ms = now;
	memcpy(s->chain.ckpt_sig, sig, 64);
	return GH_OK;
}

void store_checkpoint_committed(struct gh_store *s, int ok)
{
	if (s->ckpt_pending && ok)
		gh_metrics_audit_checkpoint(s->ckpt_new.ts);
	if (s->ckpt_pending && ok && s->on_checkpoint)
		s->on_checkpoint(s->on_checkpoint_ud, &s->ckpt_new, s->ckpt_new_prev_sig);
	s->ckpt_pending = 0;
}

enum gh_code store_checkpoint_if_due(struct gh_store *s, struct store_conn *w, int force,
				     struct gh_err *e)
{
	enum gh_code rc;
	int64_t now;

	if (!s->signer)
		return GH_OK;
	if ((rc = store_chain_load(s, w, e)) != GH_OK)
		return rc;
	if (s->chain.last_seq <= s->chain.ckpt_seq)
		return GH_OK;
	now = gh_now_ms();
	if (force || s->chain.last_seq - s->chain.ckpt_seq >= s->ckpt_rows ||
	    now - s->chain.ckpt_ms >= s->ckpt_every_ms)
		return insert_checkpoint(s, w, e);
	return GH_OK;
}

struct append_arg {
	const struct gh_audit_event *ev;
	int64_t seq;
};

enum gh_code store_audit_append_in(struct gh_store *s, struct store_conn *w,
				   const struct gh_audit_event *in, int64_t *seq_out,
				   struct gh_err *e)
{
	struct gh_audit_event ev = *in;
	unsigned char hash[GH_AUDIT_HASH_LEN];
	enum gh_code rc;
	int64_t seq;

	if ((rc = store_chain_load(s, w, e)) != GH_OK)
		return rc;
	/* The writer stamps the time (callers normally leave it 0), never
	 * earlier than the row before: time order is row order, so a time
	 * range is a range of rows. */
	if (ev.ts == 0)
		ev.ts = gh_now_ms();
	if (ev.ts < s->chain.last_ts)
		ev.ts = s->chain.last_ts;
	seq = s->chain.last_seq + 1;
	gh_audit_row_hash(s->chain.last_hash, seq, &ev, hash);
	rc = store_exec(w, "INSERT INTO audit_events (seq, ts, event, key_id, owner, admin_user, "
			   "agent_id, thread_id, run_id, tool_call_id, tool_name, source, args, "
			   "outcome, duration_ms, error, reason, detail, prev_hash, hash) "
			   "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
			STORE_ARGS(STORE_INT(seq), STORE_INT(ev.ts), STORE_TEXT(ev.event),
				   STORE_TEXT(ev.key_id), STORE_TEXT(ev.owner),
				   STORE_TEXT(ev.admin_user), STORE_TEXT(ev.agent_id),
				   STORE_TEXT(ev.thread_id), STORE_TEXT(ev.run_id),
				   STORE_TEXT(ev.tool_call_id), STORE_TEXT(ev.tool_name),
				   STORE_TEXT(ev.source), STORE_TEXT(ev.args), STORE_TEXT(ev.outcome),
				   ev.duration_ms >= 0 ? STORE_INT(ev.duration_ms) : STORE_TEXT(NULL),
				   STORE_TEXT(ev.error), STORE_TEXT(ev.reason), STORE_TEXT(ev.detail),
				   STORE_BLOB(s->chain.last_hash, GH_AUDIT_HASH_LEN),
				   STORE_BLOB(hash, GH_AUDIT_HASH_LEN)),
			"appending an audit event", NULL, e);
	if (rc != GH_OK)
		return rc == GH_E_CONFLICT ? gh_err_set(e, GH_E_IO, "audit: sequence clash") : rc;
	s->chain.last_seq = seq;
	s->audit_rows_tx++;
	s->chain.last_ts = ev.ts;
	memcpy(s->chain.last_hash, hash, GH_AUDIT_HASH_LEN);
	if (((seq + 1) & (GH_AUDIT_BLOCK_ROWS - 1)) == 0)
		s->audit_index_due = 1; /* this row completes a block */
	if (seq_out)
		*seq_out = seq;
	return GH_OK;
}

static enum gh_code append_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	struct append_arg *a = arg;

	return store_audit_append_in(s, w, a->ev, &a->seq, e);
}

enum gh_code gh_store_audit_append(struct gh_store *s, const struct gh_audit_event *ev,
				   int64_t *seq_out, struct gh_err *e)
{
	struct append_arg a = {ev, 0};
	enum gh_code rc = store_write(s, append_job, &a, e);

	if (rc == GH_OK && seq_out)
		*seq_out = a.seq;
	return rc;
}

/* ------------------------------------------------------ open calls */

static enum gh_code open_call_in(struct store_conn *w, const struct gh_audit_event *ev,
				 const char *approval_id, int64_t *call_id, struct gh_err *e)
{
	enum gh_code rc = store_exec(w, "INSERT INTO audit_open_calls (opened_at, key_id, owner, "
					"admin_user, agent_id, thread_id, run_id, tool_call_id, "
					"tool_name, source, args, approval_id) "
					"VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
				     STORE_ARGS(STORE_INT(gh_now_ms()), STORE_TEXT(ev->key_id),
						STORE_TEXT(ev->owner), STORE_TEXT(ev->admin_user),
						STORE_TEXT(ev->agent_id), STORE_TEXT(ev->thread_id),
						STORE_TEXT(ev->run_id), STORE_TEXT(ev->tool_call_id),
						STORE_TEXT(ev->tool_name), STORE_TEXT(ev->source),
						STORE_TEXT(ev->args), STORE_TEXT(approval_id)),
				     "registering an open call", NULL, e);

	if (rc == GH_OK)
		*call_id = sqlite3_last_insert_rowid(w->db);
	return rc;
}

enum gh_code store_audit_call_register(struct store_conn *w, const struct gh_audit_event *call,
				       const char *approval_id, int64_t *call_id,
				       struct gh_err *e)
{
	return open_call_in(w, call, approval_id, call_id, e);
}

static enum gh_code close_call_in(struct gh_store *s, struct store_conn *w, int64_t call_id,
				  const struct gh_audit_event *ev, struct gh_err *e)
{
	enum gh_code rc;

	if (ev && (rc = store_audit_append_in(s, w, ev, NULL, e)) != GH_OK)
		return rc;
	if (call_id <= 0)
		return GH_OK;
	return store_exec(w, "DELETE FROM audit_open_calls WHERE id = ?",
			  STORE_ARGS(STORE_INT(call_id)), "closing an open call", NULL, e);
}

struct call_arg {
	const struct gh_audit_event *ev;
	int64_t call_id;
	int64_t seq;
};

static enum gh_code call_open_job(struct gh_store *s, struct store_conn *w, void *arg,
				  struct gh_err *e)
{
	struct call_arg *a = arg;
	enum gh_code rc = store_audit_append_in(s, w, a->ev, &a->seq, e);

	return rc == GH_OK ? open_call_in(w, a->ev, NULL, &a->call_id, e) : rc;
}

enum gh_code gh_store_audit_call_open(struct gh_store *s, const struct gh_audit_event *ev,
				      int64_t *call_id, int64_t *seq_out, struct gh_err *e)
{
	struct call_arg a = {ev, 0, 0};
	enum gh_code rc = store_write(s, call_open_job, &a, e);

	*call_id = rc == GH_OK ? a.call_id : 0;
	if (seq_out)
		*seq_out = rc == GH_OK ? a.seq : 0;
	return rc;
}

static enum gh_code call_close_job(struct gh_store *s, struct store_conn *w, void *arg,
				   struct gh_err *e)
{
	struct call_arg *a = arg;

	return close_call_in(s, w, a->call_id, a->ev, e);
}

enum gh_code gh_store_audit_call_close(struct gh_store *s, int64_t call_id,
				       const struct gh_audit_event *ev, struct gh_err *e)
{
	struct call_arg a = {ev, call_id, 0};

	return store_write(s, call_close_job, &a, e);
}

struct tx_arg {
	gh_store_tx_fn fn;
	void *ud;
};

static enum gh_code tx_job(struct gh_store *s, struct store_conn *w, void *arg,
			   struct gh_err *e)
{
	struct tx_arg *a = arg;
	struct gh_store_tx tx = {s, w};

	return a->fn(&tx, a->ud, e);
}

enum gh_code gh_store_tx_run(struct gh_store *s, gh_store_tx_fn fn, void *ud, struct gh_err *e)
{
	struct tx_arg a = {fn, ud};

	return store_write(s, tx_job, &a, e);
}

enum gh_code gh_store_tx_audit_call_close(struct gh_store_tx *tx, int64_t call_id,
					  const struct gh_audit_event *ev, struct gh_err *e)
{
	return close_call_in(tx->s, tx->w, call_id, ev, e);
}

#define INTERRUPTED_BATCH 256

struct interrupted_arg {
	int n;
	int more;
};

static enum gh_code interrupted_job(struct gh_store *s, struct store_conn *w, void *arg,
				    struct gh_err *e)
{
	struct interrupted_arg *a = arg;
	sqlite3_stmt *st = store_stmt(w, "SELECT id, opened_at, key_id, owner, admin_user, "
					 "agent_id, thread_id, run_id, tool_call_id, tool_name, "
					 "source, args, approval_id FROM audit_open_calls "
					 "ORDER BY id LIMIT ?", e);
	int src, n = 0;
	enum gh_code rc = GH_OK;

	a->more = 0;
	if (!st)
		return GH_E_IO;
	sqlite3_bind_int(st, 1, INTERRUPTED_BATCH);
	/* the row being read stays valid while the audit row is appended:
	 * they are other tables, and the delete comes after the scan */
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		struct gh_audit_event ev;
		cJSON *d = cJSON_CreateObject();
		char opened[GH_ISO8601_MAX], *detail = NULL;
		const char *src_name = (const char *)sqlite3_column_text(st, 10);
		const char *apr = (const char *)sqlite3_column_text(st, 12);

		if (!d) {
			rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
			break;
		}
		gh_iso8601(sqlite3_column_int64(st, 1), opened, sizeof(opened));
		cJSON_AddStringToObject(d, "opened_at", opened);
		if (apr)
			cJSON_AddStringToObject(d, "approval_id", apr);
		detail = gh_json_dump(d);
		cJSON_Delete(d);
		if (!detail) {
			rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
			break;
		}
		memset(&ev, 0, sizeof(ev));
		ev.event = "interrupted";
		ev.key_id = (const char *)sqlite3_column_text(st, 2);
		ev.owner = (const char *)sqlite3_column_text(st, 3);
		ev.admin_user = (const char *)sqlite3_column_text(st, 4);
		ev.agent_id = (const char *)sqlite3_column_text(st, 5);
		ev.thread_id = (const char *)sqlite3_column_text(st, 6);
		ev.run_id = (const char *)sqlite3_column_text(st, 7);
		ev.tool_call_id = (const char *)sqlite3_column_text(st, 8);
		ev.tool_name = (const char *)sqlite3_column_text(st, 9);
		ev.source = src_name;
		ev.args = (const char *)sqlite3_column_text(st, 11);
		/* a memory tool's effect commits with its end: none happened */
		ev.outcome = src_name && !strcmp(src_name, "memory") ? "no_effect" : "unknown";
		ev.duration_ms = -1;
		ev.reason = "gatehouse stopped before the end of the call was recorded";
		ev.detail = detail;
		rc = store_audit_append_in(s, w, &ev, NULL, e);
		free(detail);
		if (rc != GH_OK)
			break;
		n++;
	}
	sqlite3_reset(st);
	if (rc != GH_OK)
		return rc;
	if (src != SQLITE_ROW && src != SQLITE_DONE)
		return store_fail(w, "reading open calls", e);
	if ((rc = store_exec(w, "DELETE FROM audit_open_calls WHERE id IN (SELECT id FROM "
				"audit_open_calls ORDER BY id LIMIT ?)",
			     STORE_ARGS(STORE_INT(n)), "closing interrupted calls", NULL, e)) != GH_OK)
		return rc;
	a->n = n;
	a->more = n == INTERRUPTED_BATCH;
	return GH_OK;
}

enum gh_code gh_store_audit_close_interrupted(struct gh_store *s, int *n, struct gh_err *e)
{
	struct interrupted_arg a;
	enum gh_code rc;

	*n = 0;
	do {
		memset(&a, 0, sizeof(a));
		if ((rc = store_write(s, interrupted_job, &a, e)) != GH_OK)
			return rc;
		*n += a.n;
	} while (a.more);
	return GH_OK;
}

/* ------------------------------------------------------------- reading */

#define ROW_COLS "seq, ts, event, key_id, owner, admin_user, agent_id, thread_id, run_id, " \
		 "tool_call_id, tool_name, source, args, outcome, duration_ms, error, reason, " \
		 "detail, prev_hash, hash"

static const char *col(sqlite3_stmt *st, int i)
{
	return (const char *)sqlite3_column_text(st, i);
}

static void row_from(sqlite3_stmt *st, struct gh_audit_row *r, struct gh_audit_event *ev)
{
	r->seq = sqlite3_column_int64(st, 0);
	ev->ts = sqlite3_column_int64(st, 1);
	ev->event = col(st, 2);
	ev->key_id = col(st, 3);
	ev->owner = col(st, 4);
	ev->admin_user = col(st, 5);
	ev->agent_id = col(st, 6);
	ev->thread_id = col(st, 7);
	ev->run_id = col(st, 8);
	ev->tool_call_id = col(st, 9);
	ev->tool_name = col(st, 10);
	ev->source = col(st, 11);
	ev->args = col(st, 12);
	ev->outcome = col(st, 13);
	ev->duration_ms = sqlite3_column_type(st, 14) == SQLITE_NULL ? -1
								     : sqlite3_column_int64(st, 14);
	ev->error = col(st, 15);
	ev->reason = col(st, 16);
	ev->detail = col(st, 17);
	r->prev_hash = sqlite3_column_blob(st, 18);
	r->prev_len = (size_t)sqlite3_column_bytes(st, 18);
	r->hash = sqlite3_column_blob(st, 19);
	r->hash_len = (size_t)sqlite3_column_bytes(st, 19);
	r->ev = ev;
}

/* What a verify reads before the rows, in their snapshot. */
struct scan_head {
	gh_audit_ckpt_fn anchor_fn;
	gh_audit_ckpt_fn ckpt_fn;
};

static enum gh_code anchor_on(struct store_conn *c, struct gh_audit_checkpoint *out,
			      struct gh_err *e);
static enum gh_code ckpts_on(struct gh_store *s, struct store_conn *c,
			     int (*fn)(void *ud, const struct gh_audit_checkpoint *k), void *ud,
			     struct gh_err *e);

static enum gh_code scan(struct gh_store *s, int64_t from_seq, int64_t to_seq,
			 gh_audit_row_fn row_fn, gh_audit_block_fn block_fn,
			 const struct scan_head *head, void *ud, struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	struct gh_audit_blockmap *b = NULL;
	sqlite3_stmt *st;
	enum gh_code rc = GH_OK;
	int64_t next = 0, blk = -1;
	int src = SQLITE_DONE, began = 0;

	if (block_fn || head) {
		if (store_read_begin(c, e) != 0) {
			rc = GH_E_IO;
			goto out;
		}
		began = 1;
	}
	if (head) {
		struct gh_audit_checkpoint a;

		rc = anchor_on(c, &a, e);
		if (rc == GH_OK) {
			from_seq = a.seq;
			if (head->anchor_fn(ud, &a))
				goto out;
		} else if (rc != GH_E_NOTFOUND) {
			goto out;
		}
		if ((rc = ckpts_on(s, c, head->ckpt_fn, ud, e)) != GH_OK)
			goto out;
	}
	if (block_fn) {
		if (!(b = gh_audit_blockmap_new())) {
			rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
			goto out;
		}
		if ((rc = store_audit_index_next(c, &next, e)) != GH_OK)
			goto out;
	}
	st = store_stmt(c, "SELECT " ROW_COLS " FROM audit_events "
			   "WHERE seq >= ? AND seq <= ? ORDER BY seq", e);
	if (!st) {
		rc = GH_E_IO;
		goto out;
	}
	sqlite3_bind_int64(st, 1, from_seq);
	sqlite3_bind_int64(st, 2, to_seq > 0 ? to_seq : INT64_MAX);
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		struct gh_audit_row r;
		struct gh_audit_event ev;

		row_from(st, &r, &ev);
		if (block_fn && r.seq >> GH_AUDIT_BLOCK_SHIFT != blk) {
			const char *why = NULL;

			blk = r.seq >> GH_AUDIT_BLOCK_SHIFT;
			if (blk < next &&
			    (rc = store_audit_block_load(c, blk, b, &why, e)) != GH_OK)
				break;
			if (block_fn(ud, blk, blk < next ? b : NULL, why))
				break;
		}
		if (row_fn(ud, &r))
			break;
	}
	if (rc == GH_OK && src != SQLITE_ROW && src != SQLITE_DONE)
		rc = store_fail(c, "reading the audit log", e);
out:
	if (began)
		store_read_end(c);
	gh_audit_blockmap_free(b);
	store_reader_put(s, c);
	return rc;
}

enum gh_code gh_store_audit_scan(struct gh_store *s, int64_t from_seq, int64_t to_seq,
				 gh_audit_row_fn fn, void *ud, struct gh_err *e)
{
	return scan(s, from_seq, to_seq, fn, NULL, NULL, ud, e);
}

enum gh_code gh_store_audit_scan_verify(struct gh_store *s, gh_audit_ckpt_fn anchor_fn,
					gh_audit_ckpt_fn ckpt_fn, gh_audit_row_fn row_fn,
					gh_audit_block_fn block_fn, void *ud, struct gh_err *e)
{
	struct scan_head head = {anchor_fn, ckpt_fn};

	return scan(s, 1, 0, row_fn, block_fn, &head, ud, e);
}

enum gh_code gh_store_audit_scan_indexed(struct gh_store *s, int64_t from_seq,
					 gh_audit_row_fn row_fn, gh_audit_block_fn block_fn,
					 void *ud, struct gh_err *e)
{
	return scan(s, from_seq, 0, row_fn, block_fn, NULL, ud, e);
}

enum gh_code store_audit_seq_at(struct store_conn *c, int64_t ms, int64_t *seq,
				struct gh_err *e)
{
	/* two subqueries: SQLite answers a lone min() or max() from the
	 * b-tree's edge, but both in one SELECT scan the table */
	sqlite3_stmt *st = store_stmt(c, "SELECT coalesce((SELECT min(seq) FROM audit_events), 1), "
					 "coalesce((SELECT max(seq) FROM audit_events), 0)", e);
	int64_t lo, hi;
	int src;

	if (!st)
		return GH_E_IO;
	if (sqlite3_step(st) != SQLITE_ROW) {
		sqlite3_reset(st);
		return store_fail(c, "querying the audit log", e);
	}
	lo = sqlite3_column_int64(st, 0);
	hi = sqlite3_column_int64(st, 1) + 1;
	sqlite3_reset(st);
	/* the smallest x such that every row before x has ts < ms and every
	 * row from x on has ts >= ms; a probe reads the first row at or after
	 * its midpoint (seq may have gaps where retention cut) */
	st = store_stmt(c, "SELECT seq, ts FROM audit_events WHERE seq >= ? ORDER BY seq LIMIT 1",
			e);
	if (!st)
		return GH_E_IO;
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;

		sqlite3_bind_int64(st, 1, mid);
		src = sqlite3_step(st);
		if (src == SQLITE_ROW) {
			int64_t at = sqlite3_column_int64(st, 0);

			if (sqlite3_column_int64(st, 1) >= ms)
				hi = mid;
			else
				lo = at + 1;
		} else if (src == SQLITE_DONE) {
			hi = mid;
		} else {
			sqlite3_reset(st);
			return store_fail(c, "querying the audit log", e);
		}
		sqlite3_reset(st);
	}
	*seq = lo;
	return GH_OK;
}

/* One page being filled: rows go to the caller until it holds limit, and
 * one more match means there is a next page. */
struct page {
	const struct gh_audit_filter *f;
	const struct store_audit_cond *conds;
	int nconds;
	gh_audit_row_fn fn;
	void *ud;
	int limit, n, more, stopped;
	int64_t last;
	struct store_conn *c;
	struct gh_err *e;
	int failed;
};

/* 1 when the page is done. */
static int page_add(struct page *p, sqlite3_stmt *st)
{
	struct gh_audit_row r;
	struct gh_audit_event ev;

	if (p->n == p->limit) {
		p->more = 1;
		return 1;
	}
	row_from(st, &r, &ev);
	p->last = r.seq;
	p->n++;
	if (p->fn(p->ud, &r)) {
		p->stopped = 1;
		return 1;
	}
	return 0;
}

/* A match from the index: read the row and check it really matches (the
 * index is derived data; a row is never shown for a filter it fails). */
static int page_seq(void *ud, int64_t seq)
{
	struct page *p = ud;
	sqlite3_stmt *st = store_stmt(p->c, "SELECT " ROW_COLS " FROM audit_events WHERE seq = ?",
				      p->e);
	struct gh_audit_row r;
	struct gh_audit_event ev;
	int src, i, done = 0;

	if (!st) {
		p->failed = 1;
		return -1;
	}
	sqlite3_bind_int64(st, 1, seq);
	src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		row_from(st, &r, &ev);
		for (i = 0; i < p->nconds; i++) {
			const char *v = gh_audit_dim_value(&ev, p->conds[i].dim);

			if (!v || strcmp(v, p->conds[i].val) != 0)
				break;
		}
		if (i == p->nconds)
			done = page_add(p, st);
	} else if (src != SQLITE_DONE) {
		store_fail(p->c, "querying the audit log", p->e);
		p->failed = 1;
		done = -1;
	}
	sqlite3_reset(st);
	return done;
}

/* Rows in [lo, hi] matched by SQL, without the index (the unindexed tail,
 * or no filter at all). Each combination of conditions is a distinct SQL
 * text, so it is prepared per call; every value is bound, never spliced. */
static enum gh_code page_scan(struct page *p, int64_t lo, int64_t hi, int asc)
{
	char sql[1024];
	size_t used;
	sqlite3_stmt *st = NULL;
	int i, bi = 1, src;

	used = (size_t)snprintf(sql, sizeof(sql), "SELECT " ROW_COLS " FROM audit_events "
						   "WHERE seq BETWEEN ? AND ?");
	for (i = 0; i < p->nconds; i++)
		used += (size_t)snprintf(sql + used, sizeof(sql) - used, " AND %s = ?",
					 gh_audit_dim_name(p->conds[i].dim));
	snprintf(sql + used, sizeof(sql) - used,
		 asc ? " ORDER BY seq LIMIT ?" : " ORDER BY seq DESC LIMIT ?");
	if (sqlite3_prepare_v2(p->c->db, sql, -1, &st, NULL) != SQLITE_OK)
		return store_fail(p->c, "querying the audit log", p->e);
	sqlite3_bind_int64(st, bi++, lo);
	sqlite3_bind_int64(st, bi++, hi);
	for (i = 0; i < p->nconds; i++)
		store_bind_text(st, bi++, p->conds[i].val);
	sqlite3_bind_int(st, bi, p->limit + 1 - p->n);
	while ((src = sqlite3_step(st)) == SQLITE_ROW)
		if (page_add(p, st))
			break;
	sqlite3_finalize(st);
	if (src != SQLITE_ROW && src != SQLITE_DONE)
		return store_fail(p->c, "querying the audit log", p->e);
	return GH_OK;
}

static int page_done(const struct page *p)
{
	return p->more || p->stopped;
}

/* Time ranges become seq ranges; filters use the index for indexed blocks
 * and SQL for the rest, so a page reads the rows it returns plus the short
 * unindexed tail, whatever the filters' combination. */
enum gh_code gh_store_audit_query(struct gh_store *s, const struct gh_audit_filter *f,
				  int64_t before, int limit, int ascending, gh_audit_row_fn fn,
				  void *ud, int64_t *next_before, struct gh_err *e)
{
	const char *vals[GH_AUDIT_DIM_LAST + 1] = {0};
	struct store_audit_cond conds[GH_AUDIT_DIM_LAST];
	struct page p;
	enum gh_code rc = GH_OK;
	int64_t lo = 1, hi = INT64_MAX, next_blk, split;
	int d, nconds = 0;

	if (limit < 1)
		limit = 1;
	if (next_before)
		*next_before = 0;
	vals[GH_AUDIT_DIM_KEY] = f->key_id;
	vals[GH_AUDIT_DIM_AGENT] = f->agent_id;
	vals[GH_AUDIT_DIM_THREAD] = f->thread_id;
	vals[GH_AUDIT_DIM_RUN] = f->run_id;
	vals[GH_AUDIT_DIM_TOOL] = f->tool_name;
	vals[GH_AUDIT_DIM_EVENT] = f->event;
	vals[GH_AUDIT_DIM_OUTCOME] = f->outcome;
	vals[GH_AUDIT_DIM_OWNER] = f->owner;
	for (d = 1; d <= GH_AUDIT_DIM_LAST; d++) {
		if (vals[d] && *vals[d]) {
			conds[nconds].dim = d;
			conds[nconds].val = vals[d];
			nconds++;
		}
	}
	memset(&p, 0, sizeof(p));
	p.f = f;
	p.conds = conds;
	p.nconds = nconds;
	p.fn = fn;
	p.ud = ud;
	p.limit = limit;
	p.e = e;
	p.c = store_reader(s);
	if (store_read_begin(p.c, e) != 0) {
		store_reader_put(s, p.c);
		return GH_E_IO;
	}
	if ((f->from_ms > 0 && (rc = store_audit_seq_at(p.c, f->from_ms, &lo, e)) != GH_OK) ||
	    (f->to_ms > 0 && (rc = store_audit_seq_at(p.c, f->to_ms, &hi, e)) != GH_OK))
		goto out;
	if (f->to_ms > 0)
		hi--; /* to is exclusive */
	if (before > 0) {
		if (ascending && before + 1 > lo)
			lo = before + 1;
		if (!ascending && before - 1 < hi)
			hi = before - 1;
	}
	if (lo > hi)
		goto out; /* nothing in range */
	if (nconds == 0) {
		rc = page_scan(&p, lo, hi, ascending);
		goto out;
	}
	if ((rc = store_audit_index_next(p.c, &next_blk, e)) != GH_OK)
		goto out;
	split = next_blk << GH_AUDIT_BLOCK_SHIFT; /* first unindexed seq */
	if (!ascending && hi >= split && (rc = page_scan(&p, lo > split ? lo : split, hi, 0)) != GH_OK)
		goto out;
	if (!page_done(&p) && lo < split) {
		rc = store_audit_postings_walk(p.c, conds, nconds, lo, hi < split ? hi : split - 1,
					       ascending, page_seq, &p, e);
		if (rc != GH_OK)
			goto out;
	}
	if (ascending && !page_done(&p) && hi >= split)
		rc = page_scan(&p, lo > split ? lo : split, hi, 1);
out:
	store_read_end(p.c);
	store_reader_put(s, p.c);
	if (rc == GH_OK && next_before)
		*next_before = p.more ? p.last : 0;
	return rc;
}

/* Columns seq, hash, ts, public_key, signature and, when with_prev,
 * prev_seq (NULL: written before checkpoints chained). */
static void ckpt_from(sqlite3_stmt *st, int with_prev, struct gh_audit_checkpoint *c)
{
	memset(c, 0, sizeof(*c));
	c->seq = sqlite3_column_int64(st, 0);
	c->ts = sqlite3_column_int64(st, 2);
	c->ok_sizes = sqlite3_column_bytes(st, 1) == 32 && sqlite3_column_bytes(st, 3) == 32 &&
		      sqlite3_column_bytes(st, 4) == 64;
	if (c->ok_sizes) {
		memcpy(c->hash, sqlite3_column_blob(st, 1), 32);
		memcpy(c->public_key, sqlite3_column_blob(st, 3), 32);
		memcpy(c->signature, sqlite3_column_blob(st, 4), 64);
	}
	if (with_prev && sqlite3_column_type(st, 5) != SQLITE_NULL) {
		c->chained = 1;
		c->prev_seq = sqlite3_column_int64(st, 5);
	}
}

/* Checkpoints chain from schema version 8 on; a read-only connection to
 * an older database (not yet migrated) reads them without prev_seq. */
#define CKPT_CHAINED_SCHEMA 8
#define CKPT_COLS "seq, hash, ts, public_key, signature, prev_seq"
#define CKPT_COLS_OLD "seq, hash, ts, public_key, signature"

static int with_prev(struct gh_store *s)
{
	return gh_store_schema_version(s) >= CKPT_CHAINED_SCHEMA;
}

enum gh_code gh_store_audit_checkpoint_at(struct gh_store *s, int64_t seq,
					  struct gh_audit_checkpoint *out, struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	int wp = with_prev(s);
	sqlite3_stmt *st = wp ? store_stmt(c, "SELECT " CKPT_COLS " FROM audit_checkpoints "
					      "WHERE seq = ?", e)
			      : store_stmt(c, "SELECT " CKPT_COLS_OLD " FROM audit_checkpoints "
					      "WHERE seq = ?", e);
	enum gh_code rc;
	int src;

	if (!st) {
		store_reader_put(s, c);
		return GH_E_IO;
	}
	sqlite3_bind_int64(st, 1, seq);
	src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		ckpt_from(st, wp, out);
		rc = GH_OK;
	} else if (src == SQLITE_DONE) {
		rc = gh_err_set(e, GH_E_NOTFOUND, "no checkpoint at row %lld", (long long)seq);
	} else {
		rc = store_fail(c, "reading audit checkpoints", e);
	}
	store_reader_put(s, c);
	return rc;
}

enum gh_code gh_store_audit_newest(struct gh_store *s, gh_audit_ckpt_fn anchor_fn,
				   gh_audit_ckpt_fn ckpt_fn, gh_audit_row_fn row_fn, void *ud,
				   struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	struct gh_audit_checkpoint a;
	int wp = with_prev(s), src = SQLITE_DONE, n = 0, stop = 0;
	int64_t from = 1, from_floor = 0;
	sqlite3_stmt *st;
	enum gh_code rc = GH_OK;

	if (store_read_begin(c, e) != 0) {
		store_reader_put(s, c);
		return GH_E_IO;
	}
	rc = anchor_on(c, &a, e);
	if (rc == GH_OK) {
		from_floor = a.seq;
		if (anchor_fn(ud, &a))
			goto out;
	} else if (rc != GH_E_NOTFOUND) {
		goto out;
	}
	rc = GH_OK;
	st = wp ? store_stmt(c, "SELECT " CKPT_COLS " FROM audit_checkpoints "
			       "ORDER BY seq DESC LIMIT 2", e)
		: store_stmt(c, "SELECT " CKPT_COLS_OLD " FROM audit_checkpoints "
			       "ORDER BY seq DESC LIMIT 2", e);
	if (!st) {
		rc = GH_E_IO;
		goto out;
	}
	while (!stop && (src = sqlite3_step(st)) == SQLITE_ROW) {
		struct gh_audit_checkpoint k;

		ckpt_from(st, wp, &k);
		if (n++ == 0)
			from = k.seq;
		stop = ckpt_fn(ud, &k);
	}
	sqlite3_reset(st);
	if (src != SQLITE_ROW && src != SQLITE_DONE) {
		rc = store_fail(c, "reading audit checkpoints", e);
		goto out;
	}
	if (stop)
		goto out;
	if (n == 0) {
		/* no checkpoint: the rows start at the first one kept */
		st = store_stmt(c, "SELECT coalesce(min(seq), 1) FROM audit_events", e);
		if (!st) {
			rc = GH_E_IO;
			goto out;
		}
		if (sqlite3_step(st) == SQLITE_ROW)
			from = sqlite3_column_int64(st, 0);
		sqlite3_reset(st);
	}
	if (from < from_floor)
		from = from_floor;
	st = store_stmt(c, "SELECT " ROW_COLS " FROM audit_events WHERE seq >= ? ORDER BY seq", e);
	if (!st) {
		rc = GH_E_IO;
		goto out;
	}
	sqlite3_bind_int64(st, 1, from);
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		struct gh_audit_row r;
		struct gh_audit_event ev;

		row_from(st, &r, &ev);
		if (row_fn(ud, &r))
			break;
	}
	if (src != SQLITE_ROW && src != SQLITE_DONE)
		rc = store_fail(c, "reading the audit log", e);
	sqlite3_reset(st);
out:
	store_read_end(c);
	store_reader_put(s, c);
	return rc;
}

static enum gh_code ckpts_on(struct gh_store *s, struct store_conn *c,
			     int (*fn)(void *ud, const struct gh_audit_checkpoint *k), void *ud,
			     struct gh_err *e)
{
	int wp = with_prev(s);
	sqlite3_stmt *st = wp ? store_stmt(c, "SELECT " CKPT_COLS " FROM audit_checkpoints "
					      "ORDER BY seq", e)
			      : store_stmt(c, "SELECT " CKPT_COLS_OLD " FROM audit_checkpoints "
					      "ORDER BY seq", e);
	enum gh_code rc = GH_OK;
	int src;

	if (!st)
		return GH_E_IO;
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		struct gh_audit_checkpoint k;

		ckpt_from(st, wp, &k);
		if (fn(ud, &k))
			break;
	}
	if (src != SQLITE_ROW && src != SQLITE_DONE)
		rc = store_fail(c, "reading audit checkpoints", e);
	sqlite3_reset(st);
	return rc;
}

enum gh_code gh_store_audit_checkpoints(struct gh_store *s, gh_audit_ckpt_fn fn, void *ud,
					struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	enum gh_code rc = ckpts_on(s, c, fn, ud, e);

	store_reader_put(s, c);
	return rc;
}

static enum gh_code anchor_on(struct store_conn *c, struct gh_audit_checkpoint *out,
			      struct gh_err *e)
{
	sqlite3_stmt *st = store_stmt(c, "SELECT seq, prev_hash, ts, public_key, signature "
					 "FROM audit_anchor WHERE id = 1", e);
	enum gh_code rc;
	int src;

	if (!st)
		return GH_E_IO;
	src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		ckpt_from(st, 0, out);
		rc = GH_OK;
	} else if (src == SQLITE_DONE) {
		rc = gh_err_set(e, GH_E_NOTFOUND, "no audit anchor");
	} else {
		rc = store_fail(c, "reading the audit anchor", e);
	}
	sqlite3_reset(st);
	return rc;
}

enum gh_code gh_store_audit_anchor(struct gh_store *s, struct gh_audit_checkpoint *out,
				   struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	enum gh_code rc = anchor_on(c, out, e);

	store_reader_put(s, c);
	return rc;
}

enum gh_code gh_store_audit_bounds(struct gh_store *s, int64_t *first, int64_t *last,
				   int64_t *count, struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	sqlite3_stmt *st = store_stmt(c, "SELECT coalesce(min(seq), 0), coalesce(max(seq), 0), "
					 "count(*) FROM audit_events", e);
	enum gh_code rc = GH_OK;

	if (!st) {
		store_reader_put(s, c);
		return GH_E_IO;
	}
	if (sqlite3_step(st) == SQLITE_ROW) {
		*first = sqlite3_column_int64(st, 0);
		*last = sqlite3_column_int64(st, 1);
		*count = sqlite3_column_int64(st, 2);
	} else {
		rc = store_fail(c, "reading the audit log", e);
	}
	store_reader_put(s, c);
	return rc;
}

/* ----------------------------------------------------------- retention */

struct prune_arg {
	int64_t cutoff_ms;
	int64_t deleted;
};

static enum gh_code prune_job(struct gh_store *s, struct store_conn *w, void *arg,
			      struct gh_err *e)
{
	struct prune_arg *a = arg;
	sqlite3_stmt *st;
	int64_t keep_seq = 0, limit_seq;
	unsigned char prev[GH_AUDIT_HASH_LEN], sig[64];
	enum gh_code rc;
	int64_t now = gh_now_ms();
	int deleted = 0;

	if (!s->signer)
		return gh_err_set(e, GH_E_INTERNAL, "audit: pruning needs the signing key");
	if ((rc = store_chain_load(s, w, e)) != GH_OK)
		return rc;
	/* Only rows already covered by a signed checkpoint may go. */
	limit_seq = s->chain.ckpt_seq;
	if ((rc = store_audit_seq_at(w, a->cutoff_ms, &keep_seq, e)) != GH_OK)
		return rc;
	if (keep_seq > limit_seq + 1)
		keep_seq = limit_seq + 1;
	st = store_stmt(w, "SELECT seq, prev_hash FROM audit_events WHERE seq >= ? "
			   "ORDER BY seq LIMIT 1", e);
	if (!st)
		return GH_E_IO;
	sqlite3_bind_int64(st, 1, keep_seq);
	if (sqlite3_step(st) != SQLITE_ROW) {
		sqlite3_reset(st);
		/* Every row is old and signed (a quiet log): all of them go, and
		 * the anchor says the chain goes on after the last one. */
		if (s->chain.last_seq == 0 || s->chain.ckpt_seq != s->chain.last_seq)
			return GH_OK;
		keep_seq = s->chain.last_seq + 1;
		memcpy(prev, s->chain.last_hash, GH_AUDIT_HASH_LEN);
	} else {
		keep_seq = sqlite3_column_int64(st, 0);
		if (sqlite3_column_bytes(st, 1) != GH_AUDIT_HASH_LEN) {
			sqlite3_reset(st);
			return gh_err_set(e, GH_E_IO, "audit: row %lld has a damaged prev_hash",
					  (long long)keep_seq);
		}
		memcpy(prev, sqlite3_column_blob(st, 1), GH_AUDIT_HASH_LEN);
		sqlite3_reset(st);
	}
	if ((rc = store_exec(w, "DELETE FROM audit_events WHERE seq < ?",
			     STORE_ARGS(STORE_INT(keep_seq)), "pruning the audit log", &deleted,
			     e)) != GH_OK)
		return rc;
	a->deleted = deleted;
	if (a->deleted == 0)
		return GH_OK;
	/* the index forgets the blocks that are gone and rebuilds the one
	 * that lost only some of its rows */
	if ((rc = store_audit_index_drop_below(w, keep_seq, e)) != GH_OK ||
	    (rc = store_audit_index_rebuild(s, w, keep_seq >> GH_AUDIT_BLOCK_SHIFT, e)) != GH_OK)
		return rc;
	/* the newest checkpoint of the pruned rows stays: the first kept one
	 * chains to it, so the chain of checkpoints stays whole */
	if ((rc = store_exec(w, "DELETE FROM audit_checkpoints WHERE seq < (SELECT max(seq) FROM "
				"audit_checkpoints WHERE seq < ?1)",
			     STORE_ARGS(STORE_INT(keep_seq)), "pruning audit checkpoints", NULL,
			     e)) != GH_OK)
		return rc;
	gh_audit_sign(s->signer, "anchor", keep_seq, prev, now, sig);
	return store_exec(w, "INSERT OR REPLACE INTO audit_anchor (id, seq, prev_hash, ts, "
			     "public_key, signature) VALUES (1, ?, ?, ?, ?, ?)",
			  STORE_ARGS(STORE_INT(keep_seq), STORE_BLOB(prev, GH_AUDIT_HASH_LEN),
				     STORE_INT(now), STORE_BLOB(s->signer->pk, 32),
				     STORE_BLOB(sig, 64)),
			  "writing the audit anchor", NULL, e);
}

enum gh_code gh_store_audit_prune(struct gh_store *s, int64_t cutoff_ms, int64_t *deleted,
				  struct gh_err *e)
{
	struct prune_arg a = {cutoff_ms, 0};
	enum gh_code rc = store_write(s, prune_job, &a, e);

	if (deleted)
		*deleted = rc == GH_OK ? a.deleted : 0;
	if (rc == GH_OK && a.deleted)
		gh_info("audit: retention pruned %lld rows", (long long)a.deleted);
	return rc;
}
