/*
 * store_audit.c - the audit table: appending to the hash chain (writer
 * only), signed checkpoints, retention, and streaming reads for query,
 * export and verify. Threading as in store.c.
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
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
	st = store_stmt(w, "SELECT seq, ts FROM audit_checkpoints ORDER BY seq DESC LIMIT 1", e);
	if (!st)
		return GH_E_IO;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		c->ckpt_seq = sqlite3_column_int64(st, 0);
		c->ckpt_ms = sqlite3_column_int64(st, 1);
	} else if (rc != SQLITE_DONE) {
		return store_fail(w, "reading audit checkpoints", e);
	}
	sqlite3_reset(st);
	c->known = 1;
	return GH_OK;
}

static enum gh_code insert_checkpoint(struct gh_store *s, struct store_conn *w,
				      struct gh_err *e)
{
	sqlite3_stmt *st;
	unsigned char sig[64];
	int64_t now = gh_now_ms();

	gh_audit_sign(s->signer, "ckpt", s->chain.last_seq, s->chain.last_hash, now, sig);
	st = store_stmt(w, "INSERT INTO audit_checkpoints (seq, hash, ts, public_key, signature) "
			   "VALUES (?, ?, ?, ?, ?)", e);
	if (!st)
		return GH_E_IO;
	sqlite3_bind_int64(st, 1, s->chain.last_seq);
	sqlite3_bind_blob(st, 2, s->chain.last_hash, GH_AUDIT_HASH_LEN, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 3, now);
	sqlite3_bind_blob(st, 4, s->signer->pk, 32, SQLITE_TRANSIENT);
	sqlite3_bind_blob(st, 5, sig, 64, SQLITE_TRANSIENT);
	if (sqlite3_step(st) != SQLITE_DONE)
		return store_fail(w, "writing an audit checkpoint", e);
	sqlite3_reset(st);
	s->chain.ckpt_seq = s->chain.last_seq;
	s->chain.ckpt_ms = now;
	return GH_OK;
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
	sqlite3_stmt *st;
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
	st = store_stmt(w,
			"INSERT INTO audit_events (seq, ts, event, key_id, owner, admin_user, "
			"agent_id, thread_id, run_id, tool_call_id, tool_name, source, args, "
			"outcome, duration_ms, error, reason, detail, prev_hash, hash) "
			"VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", e);
	if (!st)
		return GH_E_IO;
	sqlite3_bind_int64(st, 1, seq);
	sqlite3_bind_int64(st, 2, ev.ts);
	store_bind_text(st, 3, ev.event);
	store_bind_text(st, 4, ev.key_id);
	store_bind_text(st, 5, ev.owner);
	store_bind_text(st, 6, ev.admin_user);
	store_bind_text(st, 7, ev.agent_id);
	store_bind_text(st, 8, ev.thread_id);
	store_bind_text(st, 9, ev.run_id);
	store_bind_text(st, 10, ev.tool_call_id);
	store_bind_text(st, 11, ev.tool_name);
	store_bind_text(st, 12, ev.source);
	store_bind_text(st, 13, ev.args);
	store_bind_text(st, 14, ev.outcome);
	if (ev.duration_ms >= 0)
		sqlite3_bind_int64(st, 15, ev.duration_ms);
	else
		sqlite3_bind_null(st, 15);
	store_bind_text(st, 16, ev.error);
	store_bind_text(st, 17, ev.reason);
	store_bind_text(st, 18, ev.detail);
	sqlite3_bind_blob(st, 19, s->chain.last_hash, GH_AUDIT_HASH_LEN, SQLITE_TRANSIENT);
	sqlite3_bind_blob(st, 20, hash, GH_AUDIT_HASH_LEN, SQLITE_TRANSIENT);
	if (sqlite3_step(st) != SQLITE_DONE) {
		rc = store_fail(w, "appending an audit event", e);
		sqlite3_reset(st);
		return rc == GH_E_CONFLICT ? gh_err_set(e, GH_E_IO, "audit: sequence clash") : rc;
	}
	sqlite3_reset(st);
	s->chain.last_seq = seq;
	s->chain.last_ts = ev.ts;
	memcpy(s->chain.last_hash, hash, GH_AUDIT_HASH_LEN);
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

enum gh_code gh_store_audit_scan(struct gh_store *s, int64_t from_seq, int64_t to_seq,
				 int (*fn)(void *ud, const struct gh_audit_row *r), void *ud,
				 struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	sqlite3_stmt *st = store_stmt(c, "SELECT " ROW_COLS " FROM audit_events "
					 "WHERE seq >= ? AND seq <= ? ORDER BY seq", e);
	enum gh_code rc = GH_OK;
	int src;

	if (!st) {
		store_reader_put(s, c);
		return GH_E_IO;
	}
	sqlite3_bind_int64(st, 1, from_seq);
	sqlite3_bind_int64(st, 2, to_seq > 0 ? to_seq : INT64_MAX);
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		struct gh_audit_row r;
		struct gh_audit_event ev;

		row_from(st, &r, &ev);
		if (fn(ud, &r))
			break;
	}
	if (src != SQLITE_ROW && src != SQLITE_DONE)
		rc = store_fail(c, "reading the audit log", e);
	store_reader_put(s, c);
	return rc;
}

/* The query is built from a fixed set of optional conditions; each
 * combination is a distinct SQL text, so it is prepared per call rather than
 * cached. Every value is bound, never spliced. */
/* The rows a time range covers, as seq bounds: ts never decreases with
 * seq, so two index lookups replace a scan of the range. *lo > *hi when
 * no row is in the range. */
static enum gh_code seq_range(struct store_conn *c, int64_t from_ms, int64_t to_ms, int64_t *lo,
			      int64_t *hi, struct gh_err *e)
{
	sqlite3_stmt *st;
	int src;

	*lo = 1;
	*hi = INT64_MAX;
	if (from_ms > 0) {
		st = store_stmt(c, "SELECT seq FROM audit_events WHERE ts >= ? ORDER BY ts, seq "
				   "LIMIT 1", e);
		if (!st)
			return GH_E_IO;
		sqlite3_bind_int64(st, 1, from_ms);
		src = sqlite3_step(st);
		if (src == SQLITE_ROW)
			*lo = sqlite3_column_int64(st, 0);
		else if (src == SQLITE_DONE)
			*lo = INT64_MAX; /* nothing that recent */
		else
			return store_fail(c, "querying the audit log", e);
		sqlite3_reset(st);
	}
	if (to_ms > 0) {
		st = store_stmt(c, "SELECT seq FROM audit_events WHERE ts < ? ORDER BY ts DESC, "
				   "seq DESC LIMIT 1", e);
		if (!st)
			return GH_E_IO;
		sqlite3_bind_int64(st, 1, to_ms);
		src = sqlite3_step(st);
		if (src == SQLITE_ROW)
			*hi = sqlite3_column_int64(st, 0);
		else if (src == SQLITE_DONE)
			*hi = 0; /* nothing that old */
		else
			return store_fail(c, "querying the audit log", e);
		sqlite3_reset(st);
	}
	return GH_OK;
}

/* The query is built from a fixed set of optional conditions; each
 * combination is a distinct SQL text, so it is prepared per call rather than
 * cached. Every value is bound, never spliced. Time ranges become seq
 * ranges, which every (column, seq) index serves in order. */
enum gh_code gh_store_audit_query(struct gh_store *s, const struct gh_audit_filter *f,
				  int64_t before, int limit, int ascending,
				  int (*fn)(void *ud, const struct gh_audit_row *r), void *ud,
				  int64_t *next_before, struct gh_err *e)
{
	struct {
		const char *col;
		const char *val;
	} conds[] = {
		{"key_id", f->key_id},       {"agent_id", f->agent_id}, {"thread_id", f->thread_id},
		{"run_id", f->run_id},       {"tool_name", f->tool_name}, {"event", f->event},
		{"outcome", f->outcome},     {"owner", f->owner},
	};
	char sql[1024];
	size_t used;
	struct store_conn *c;
	sqlite3_stmt *st = NULL;
	enum gh_code rc = GH_OK;
	int i, bi = 1, src = SQLITE_DONE, n = 0;
	int64_t last = 0, lo, hi;

	if (limit < 1)
		limit = 1;
	if (next_before)
		*next_before = 0;
	c = store_reader(s);
	if ((rc = seq_range(c, f->from_ms, f->to_ms, &lo, &hi, e)) != GH_OK)
		goto out;
	if (before > 0) {
		if (ascending && before + 1 > lo)
			lo = before + 1;
		if (!ascending && before - 1 < hi)
			hi = before - 1;
	}
	if (lo > hi)
		goto out; /* nothing in range */
	used = (size_t)snprintf(sql, sizeof(sql), "SELECT " ROW_COLS " FROM audit_events "
						   "WHERE seq BETWEEN ? AND ?");
	for (i = 0; i < (int)GH_ARRAY_LEN(conds); i++)
		if (conds[i].val && *conds[i].val)
			used += (size_t)snprintf(sql + used, sizeof(sql) - used, " AND %s = ?",
						 conds[i].col);
	snprintf(sql + used, sizeof(sql) - used, ascending ? " ORDER BY seq LIMIT ?"
							   : " ORDER BY seq DESC LIMIT ?");
	if (sqlite3_prepare_v2(c->db, sql, -1, &st, NULL) != SQLITE_OK) {
		rc = store_fail(c, "querying the audit log", e);
		goto out;
	}
	sqlite3_bind_int64(st, bi++, lo);
	sqlite3_bind_int64(st, bi++, hi);
	for (i = 0; i < (int)GH_ARRAY_LEN(conds); i++)
		if (conds[i].val && *conds[i].val)
			store_bind_text(st, bi++, conds[i].val);
	sqlite3_bind_int(st, bi, limit + 1);
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		struct gh_audit_row r;
		struct gh_audit_event ev;

		if (n == limit) {
			/* one more row exists: there is a next page */
			break;
		}
		row_from(st, &r, &ev);
		last = r.seq;
		n++;
		if (fn(ud, &r))
			break;
	}
	if (src != SQLITE_ROW && src != SQLITE_DONE)
		rc = store_fail(c, "querying the audit log", e);
	if (next_before)
		*next_before = src == SQLITE_ROW && n == limit ? last : 0;
out:
	sqlite3_finalize(st);
	store_reader_put(s, c);
	return rc;
}

static void ckpt_from(sqlite3_stmt *st, struct gh_audit_checkpoint *c)
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
}

enum gh_code gh_store_audit_checkpoints(struct gh_store *s,
					int (*fn)(void *ud, const struct gh_audit_checkpoint *c),
					void *ud, struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	sqlite3_stmt *st = store_stmt(c, "SELECT seq, hash, ts, public_key, signature "
					 "FROM audit_checkpoints ORDER BY seq", e);
	enum gh_code rc = GH_OK;
	int src;

	if (!st) {
		store_reader_put(s, c);
		return GH_E_IO;
	}
	while ((src = sqlite3_step(st)) == SQLITE_ROW) {
		struct gh_audit_checkpoint k;

		ckpt_from(st, &k);
		if (fn(ud, &k))
			break;
	}
	if (src != SQLITE_ROW && src != SQLITE_DONE)
		rc = store_fail(c, "reading audit checkpoints", e);
	store_reader_put(s, c);
	return rc;
}

enum gh_code gh_store_audit_anchor(struct gh_store *s, struct gh_audit_checkpoint *out,
				   struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	sqlite3_stmt *st = store_stmt(c, "SELECT seq, prev_hash, ts, public_key, signature "
					 "FROM audit_anchor WHERE id = 1", e);
	enum gh_code rc;
	int src;

	if (!st) {
		store_reader_put(s, c);
		return GH_E_IO;
	}
	src = sqlite3_step(st);
	if (src == SQLITE_ROW) {
		ckpt_from(st, out);
		rc = GH_OK;
	} else if (src == SQLITE_DONE) {
		rc = gh_err_set(e, GH_E_NOTFOUND, "no audit anchor");
	} else {
		rc = store_fail(c, "reading the audit anchor", e);
	}
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

	if (!s->signer)
		return gh_err_set(e, GH_E_INTERNAL, "audit: pruning needs the signing key");
	if ((rc = store_chain_load(s, w, e)) != GH_OK)
		return rc;
	/* Only rows already covered by a signed checkpoint may go. */
	limit_seq = s->chain.ckpt_seq;
	st = store_stmt(w, "SELECT seq, prev_hash FROM audit_events WHERE ts >= ? OR seq > ? "
			   "ORDER BY seq LIMIT 1", e);
	if (!st)
		return GH_E_IO;
	sqlite3_bind_int64(st, 1, a->cutoff_ms);
	sqlite3_bind_int64(st, 2, limit_seq);
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
	st = store_stmt(w, "DELETE FROM audit_events WHERE seq < ?", e);
	if (!st)
		return GH_E_IO;
	sqlite3_bind_int64(st, 1, keep_seq);
	if (sqlite3_step(st) != SQLITE_DONE)
		return store_fail(w, "pruning the audit log", e);
	a->deleted = sqlite3_changes(w->db);
	sqlite3_reset(st);
	if (a->deleted == 0)
		return GH_OK;
	st = store_stmt(w, "DELETE FROM audit_checkpoints WHERE seq < ?", e);
	if (!st)
		return GH_E_IO;
	sqlite3_bind_int64(st, 1, keep_seq);
	if (sqlite3_step(st) != SQLITE_DONE)
		return store_fail(w, "pruning audit checkpoints", e);
	sqlite3_reset(st);
	gh_audit_sign(s->signer, "anchor", keep_seq, prev, now, sig);
	st = store_stmt(w, "INSERT OR REPLACE INTO audit_anchor (id, seq, prev_hash, ts, "
			   "public_key, signature) VALUES (1, ?, ?, ?, ?, ?)", e);
	if (!st)
		return GH_E_IO;
	sqlite3_bind_int64(st, 1, keep_seq);
	sqlite3_bind_blob(st, 2, prev, GH_AUDIT_HASH_LEN, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 3, now);
	sqlite3_bind_blob(st, 4, s->signer->pk, 32, SQLITE_TRANSIENT);
	sqlite3_bind_blob(st, 5, sig, 64, SQLITE_TRANSIENT);
	if (sqlite3_step(st) != SQLITE_DONE)
		return store_fail(w, "writing the audit anchor", e);
	sqlite3_reset(st);
	return GH_OK;
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
