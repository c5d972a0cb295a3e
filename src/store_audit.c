/*
 * store_audit.c - the audit table: appending to the hash chain (writer
 * only), signed checkpoints, retention, and streaming reads for query,
 * export and verify. Threading as in store.c.
 */
#include "store_int.h"

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

/* What the chain goes on from: the newest row's (seq, hash, ts), or the
 * anchor's (seq, prev_hash); hash_ok when the hash has its length. */
struct chain_tip {
	int64_t seq, ts;
	unsigned char hash[GH_AUDIT_HASH_LEN];
	int hash_ok;
};

static int tip_row(struct store_row *sr, void *ud)
{
	struct chain_tip *t = ud;
	size_t n;
	const void *h = store_col_blob(sr, 1, &n);

	t->seq = store_col_int(sr, 0);
	if (store_col_count(sr) > 2)
		t->ts = store_col_int(sr, 2);
	if (h && n == GH_AUDIT_HASH_LEN) {
		memcpy(t->hash, h, n);
		t->hash_ok = 1;
	}
	return 0;
}

/* The newest checkpoint's seq, time and signature (zeros when damaged:
 * verify reports it). */
static int ckpt_tip_row(struct store_row *sr, void *ud)
{
	struct store_chain *c = ud;
	size_t n;
	const void *sig = store_col_blob(sr, 2, &n);

	c->ckpt_seq = store_col_int(sr, 0);
	c->ckpt_ms = store_col_int(sr, 1);
	if (sig && n == 64)
		memcpy(c->ckpt_sig, sig, 64);
	return 0;
}

enum gh_code store_chain_load(struct gh_store *s, struct store_conn *w, struct gh_err *e)
{
	struct store_chain *c = &s->chain;
	struct chain_tip t;
	enum gh_code rc;
	int found = 0;

	if (c->known)
		return GH_OK;
	memset(c, 0, sizeof(*c));
	memset(&t, 0, sizeof(t));
	/* PostgreSQL: every replica appends to the one chain; the head is
	 * read under a lock its transaction holds until it ends, so no two
	 * transactions chain to the same row (SQLite's writer lock does this
	 * there) */
	if (store_is_pg(s) &&
	    (rc = store_exec(w, "SELECT pg_advisory_xact_lock(7451287307373553000)", NULL, 0,
			     "taking the audit chain lock", NULL, e)) != GH_OK)
		return rc;
	rc = store_rows(w, "SELECT seq, hash, ts FROM audit_events ORDER BY seq DESC LIMIT 1",
			NULL, 0, 1, tip_row, &t, &found, "reading the audit chain", e);
	if (rc != GH_OK)
		return rc;
	if (found && !t.hash_ok)
		return gh_err_set(e, GH_E_IO, "audit: the newest row has a damaged hash; "
					      "run gatehouse audit verify");
	if (found) {
		c->last_seq = t.seq;
		memcpy(c->last_hash, t.hash, GH_AUDIT_HASH_LEN);
		c->last_ts = t.ts;
	} else {
		/* Empty table: after a full prune the anchor says where to go on. */
		rc = store_rows(w, "SELECT seq, prev_hash FROM audit_anchor WHERE id = 1", NULL, 0,
				1, tip_row, &t, &found, "reading the audit anchor", e);
		if (rc != GH_OK)
			return rc;
		if (found && t.hash_ok) {
			c->last_seq = t.seq - 1;
			memcpy(c->last_hash, t.hash, GH_AUDIT_HASH_LEN);
		} else {
			memcpy(c->last_hash, genesis, GH_AUDIT_HASH_LEN);
		}
	}
	rc = store_rows(w, "SELECT seq, ts, signature FROM audit_checkpoints "
			   "ORDER BY seq DESC LIMIT 1",
			NULL, 0, 1, ckpt_tip_row, c, NULL, "reading audit checkpoints", e);
	if (rc != GH_OK)
		return rc;
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
	if (((seq + 1) & (GH_AUDIT_BLOCK_ROWS - 1)) == 0 && !store_is_pg(s))
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

static enum gh_code open_call_in(struct gh_store *s, struct store_conn *w,
				 const struct gh_audit_event *ev, const char *approval_id,
				 int64_t *call_id, struct gh_err *e)
{
	return store_insert(w, "INSERT INTO audit_open_calls (opened_at, key_id, owner, "
			       "admin_user, agent_id, thread_id, run_id, tool_call_id, "
			       "tool_name, source, args, approval_id, instance) "
			       "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
			    STORE_ARGS(STORE_INT(gh_now_ms()), STORE_TEXT(ev->key_id),
				       STORE_TEXT(ev->owner), STORE_TEXT(ev->admin_user),
				       STORE_TEXT(ev->agent_id), STORE_TEXT(ev->thread_id),
				       STORE_TEXT(ev->run_id), STORE_TEXT(ev->tool_call_id),
				       STORE_TEXT(ev->tool_name), STORE_TEXT(ev->source),
				       STORE_TEXT(ev->args), STORE_TEXT(approval_id),
				       STORE_INT(s->instance)),
			    "registering an open call", call_id, e);
}

enum gh_code store_audit_call_register(struct gh_store *s, struct store_conn *w,
				       const struct gh_audit_event *call,
				       const char *approval_id, int64_t *call_id,
				       struct gh_err *e)
{
	return open_call_in(s, w, call, approval_id, call_id, e);
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

	return rc == GH_OK ? open_call_in(s, w, a->ev, NULL, &a->call_id, e) : rc;
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
	int64_t instance;               /* whose calls (0: all) */
	int64_t call_id;                /* or this one call (0: by instance) */
	int n;
	int more;
};

/* Closes one open call (a row of audit_open_calls) with an "interrupted"
 * audit row; a failure to append stops the scan with rc (and e) set. */
struct interrupted_rows {
	struct gh_store *s;
	struct store_conn *w;
	int n;
	enum gh_code rc;
	struct gh_err *e;
	const char *reason;
};

static int interrupted_row(struct store_row *sr, void *ud)
{
	struct interrupted_rows *x = ud;
	struct gh_audit_event ev;
	cJSON *d = cJSON_CreateObject();
	char opened[GH_ISO8601_MAX], *detail = NULL;
	const char *src_name = store_col_text(sr, 10);
	const char *apr = store_col_text(sr, 12);

	if (!d)
		return STORE_ROW_NOMEM;
	gh_iso8601(store_col_int(sr, 1), opened, sizeof(opened));
	cJSON_AddStringToObject(d, "opened_at", opened);
	if (apr)
		cJSON_AddStringToObject(d, "approval_id", apr);
	detail = gh_json_dump(d);
	cJSON_Delete(d);
	if (!detail)
		return STORE_ROW_NOMEM;
	memset(&ev, 0, sizeof(ev));
	ev.event = "interrupted";
	ev.key_id = store_col_text(sr, 2);
	ev.owner = store_col_text(sr, 3);
	ev.admin_user = store_col_text(sr, 4);
	ev.agent_id = store_col_text(sr, 5);
	ev.thread_id = store_col_text(sr, 6);
	ev.run_id = store_col_text(sr, 7);
	ev.tool_call_id = store_col_text(sr, 8);
	ev.tool_name = store_col_text(sr, 9);
	ev.source = src_name;
	ev.args = store_col_text(sr, 11);
	/* a memory tool's effect commits with its end: none happened */
	ev.outcome = src_name && !strcmp(src_name, "memory") ? "no_effect" : "unknown";
	ev.duration_ms = -1;
	ev.reason = x->reason;
	ev.detail = detail;
	x->rc = store_audit_append_in(x->s, x->w, &ev, NULL, x->e);
	free(detail);
	if (x->rc != GH_OK)
		return 1;
	x->n++;
	return 0;
}

static enum gh_code interrupted_job(struct gh_store *s, struct store_conn *w, void *arg,
				    struct gh_err *e)
{
	struct interrupted_arg *a = arg;
	struct interrupted_rows x = {s, w, 0, GH_OK, e,
				     a->call_id ? "the database could not be reached when the call "
						  "ended: its end was not recorded"
						: "gatehouse stopped before the end of the call was "
						  "recorded"};
	enum gh_code rc;

	a->more = 0;
	if (a->call_id) {
		rc = store_rows(w, "SELECT id, opened_at, key_id, owner, admin_user, "
				   "agent_id, thread_id, run_id, tool_call_id, tool_name, "
				   "source, args, approval_id FROM audit_open_calls WHERE id = ?",
				STORE_ARGS(STORE_INT(a->call_id)), 0, interrupted_row, &x, NULL,
				"reading open calls", e);
		if (rc == GH_OK)
			rc = x.rc;
		if (rc == GH_OK && x.n)
			rc = store_exec(w, "DELETE FROM audit_open_calls WHERE id = ?",
					STORE_ARGS(STORE_INT(a->call_id)), "closing an open call",
					NULL, e);
		a->n = x.n;
		return rc;
	}
	/* the row being read stays valid while the audit row is appended:
	 * they are other tables, and the delete comes after the scan */
	if (a->instance)
		rc = store_rows(w, "SELECT id, opened_at, key_id, owner, admin_user, "
				   "agent_id, thread_id, run_id, tool_call_id, tool_name, "
				   "source, args, approval_id FROM audit_open_calls "
				   "WHERE instance = ? ORDER BY id LIMIT ?",
				STORE_ARGS(STORE_INT(a->instance), STORE_INT(INTERRUPTED_BATCH)), 0,
				interrupted_row, &x, NULL, "reading open calls", e);
	else
		rc = store_rows(w, "SELECT id, opened_at, key_id, owner, admin_user, "
				   "agent_id, thread_id, run_id, tool_call_id, tool_name, "
				   "source, args, approval_id FROM audit_open_calls "
				   "ORDER BY id LIMIT ?",
				STORE_ARGS(STORE_INT(INTERRUPTED_BATCH)), 0, interrupted_row, &x,
				NULL, "reading open calls", e);
	if (rc == GH_OK)
		rc = x.rc;
	if (rc != GH_OK)
		return rc;
	if (a->instance)
		rc = store_exec(w, "DELETE FROM audit_open_calls WHERE id IN (SELECT id FROM "
				   "audit_open_calls WHERE instance = ? ORDER BY id LIMIT ?)",
				STORE_ARGS(STORE_INT(a->instance), STORE_INT(x.n)),
				"closing interrupted calls", NULL, e);
	else
		rc = store_exec(w, "DELETE FROM audit_open_calls WHERE id IN (SELECT id FROM "
				   "audit_open_calls ORDER BY id LIMIT ?)",
				STORE_ARGS(STORE_INT(x.n)), "closing interrupted calls", NULL, e);
	if (rc != GH_OK)
		return rc;
	a->n = x.n;
	a->more = x.n == INTERRUPTED_BATCH;
	return GH_OK;
}

enum gh_code store_audit_interrupted_of(struct gh_store *s, int64_t instance, int *n,
					struct gh_err *e)
{
	struct interrupted_arg a;
	enum gh_code rc;

	*n = 0;
	do {
		memset(&a, 0, sizeof(a));
		a.instance = instance;
		if ((rc = store_write(s, interrupted_job, &a, e)) != GH_OK)
			return rc;
		*n += a.n;
	} while (a.more);
	return GH_OK;
}

void gh_store_audit_call_unclosed(struct gh_store *s, int64_t call_id)
{
	if (!call_id)
		return;
	pthread_mutex_lock(&s->unclosed_mu);
	if (s->nunclosed < GH_ARRAY_LEN(s->unclosed))
		s->unclosed[s->nunclosed++] = call_id;
	else
		gh_warn("audit: call %lld stays open until gatehouse restarts: too many calls "
			"wait to be closed", (long long)call_id);
	pthread_mutex_unlock(&s->unclosed_mu);
}

enum gh_code gh_store_audit_close_unclosed(struct gh_store *s, int *n, struct gh_err *e)
{
	int64_t ids[GH_ARRAY_LEN(s->unclosed)];
	size_t k, i, left = 0;
	int closed = 0;
	enum gh_code rc = GH_OK;

	pthread_mutex_lock(&s->unclosed_mu);
	k = s->nunclosed;
	memcpy(ids, s->unclosed, k * sizeof(ids[0]));
	s->nunclosed = 0;
	pthread_mutex_unlock(&s->unclosed_mu);
	for (i = 0; i < k; i++) {
		struct interrupted_arg a;

		memset(&a, 0, sizeof(a));
		a.call_id = ids[i];
		if (rc == GH_OK && (rc = store_write(s, interrupted_job, &a, e)) == GH_OK) {
			closed += a.n;
			continue;
		}
		ids[left++] = ids[i]; /* again next time */
	}
	if (left) {
		pthread_mutex_lock(&s->unclosed_mu);
		for (i = 0; i < left; i++)
			if (s->nunclosed < GH_ARRAY_LEN(s->unclosed))
				s->unclosed[s->nunclosed++] = ids[i];
		pthread_mutex_unlock(&s->unclosed_mu);
	}
	if (n)
		*n = closed;
	return rc;
}

enum gh_code gh_store_audit_close_interrupted(struct gh_store *s, int *n, struct gh_err *e)
{
	int64_t gone[256];
	size_t ngone = 0, i;
	int k;
	enum gh_code rc;

	if (!store_is_pg(s))
		return store_audit_interrupted_of(s, 0, n, e);
	/* PostgreSQL: the calls of replicas that are gone, never those of
	 * one still running them (more than this many gone replicas are
	 * left to the leader's sweep, background.c) */
	*n = 0;
	if ((rc = gh_store_replicas_gone(s, gone, GH_ARRAY_LEN(gone), &ngone, e)) != GH_OK)
		return rc;
	for (i = 0; i < ngone; i++) {
		if ((rc = store_audit_interrupted_of(s, gone[i], &k, e)) != GH_OK)
			return rc;
		*n += k;
	}
	return GH_OK;
}

/* ------------------------------------------------------------- reading */

#define ROW_COLS "seq, ts, event, key_id, owner, admin_user, agent_id, thread_id, run_id, " \
		 "tool_call_id, tool_name, source, args, outcome, duration_ms, error, reason, " \
		 "detail, prev_hash, hash"

static void row_from(struct store_row *sr, struct gh_audit_row *r, struct gh_audit_event *ev)
{
	r->seq = store_col_int(sr, 0);
	ev->ts = store_col_int(sr, 1);
	ev->event = store_col_text(sr, 2);
	ev->key_id = store_col_text(sr, 3);
	ev->owner = store_col_text(sr, 4);
	ev->admin_user = store_col_text(sr, 5);
	ev->agent_id = store_col_text(sr, 6);
	ev->thread_id = store_col_text(sr, 7);
	ev->run_id = store_col_text(sr, 8);
	ev->tool_call_id = store_col_text(sr, 9);
	ev->tool_name = store_col_text(sr, 10);
	ev->source = store_col_text(sr, 11);
	ev->args = store_col_text(sr, 12);
	ev->outcome = store_col_text(sr, 13);
	ev->duration_ms = store_col_isnull(sr, 14) ? -1 : store_col_int(sr, 14);
	ev->error = store_col_text(sr, 15);
	ev->reason = store_col_text(sr, 16);
	ev->detail = store_col_text(sr, 17);
	r->prev_hash = store_col_blob(sr, 18, &r->prev_len);
	r->hash = store_col_blob(sr, 19, &r->hash_len);
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

/* A scan's rows handed on: to block_fn first at each new block (with its
 * stored postings when the block is indexed), then to row_fn. A failure to
 * load postings stops the scan with rc (and e) set. */
struct scan_rows {
	struct store_conn *c;
	struct gh_audit_blockmap *b;
	int64_t next, blk;
	gh_audit_row_fn row_fn;
	gh_audit_block_fn block_fn;
	void *ud;
	enum gh_code rc;
	struct gh_err *e;
	int64_t last;                   /* the last row handed on */
	int stopped;                    /* a callback stopped the scan */
};

int store_audit_scan_page = 10000;

static int scan_row(struct store_row *sr, void *ud)
{
	struct scan_rows *x = ud;
	struct gh_audit_row r;
	struct gh_audit_event ev;

	row_from(sr, &r, &ev);
	x->last = r.seq;
	if (x->block_fn && r.seq >> GH_AUDIT_BLOCK_SHIFT != x->blk) {
		const char *why = NULL;
		int64_t blk = r.seq >> GH_AUDIT_BLOCK_SHIFT;

		x->blk = blk;
		if (blk < x->next &&
		    (x->rc = store_audit_block_load(x->c, blk, x->b, &why, x->e)) != GH_OK)
			return x->stopped = 1;
		if (x->block_fn(x->ud, blk, blk < x->next ? x->b : NULL, why))
			return x->stopped = 1;
	}
	if (x->row_fn(x->ud, &r))
		return x->stopped = 1;
	return 0;
}

/* The rows from from_seq to to_seq (0: the end) on x->c. SQLite steps one
 * statement through them; PostgreSQL hands a statement's rows over all at
 * once, so there they are read a page at a time (in the caller's read
 * transaction, when it holds one): memory stays flat however long the
 * log. */
static enum gh_code scan_range(struct gh_store *s, struct scan_rows *x, int64_t from_seq,
			       int64_t to_seq, struct gh_err *e)
{
	int64_t hi = to_seq > 0 ? to_seq : INT64_MAX;
	enum gh_code rc;
	int n = 0;

	if (!store_is_pg(s))
		return store_rows(x->c, "SELECT " ROW_COLS " FROM audit_events "
					"WHERE seq >= ? AND seq <= ? ORDER BY seq",
				  STORE_ARGS(STORE_INT(from_seq), STORE_INT(hi)), 0, scan_row, x,
				  NULL, "reading the audit log", e);
	do {
		rc = store_rows(x->c, "SELECT " ROW_COLS " FROM audit_events "
				      "WHERE seq >= ? AND seq <= ? ORDER BY seq LIMIT ?",
				STORE_ARGS(STORE_INT(from_seq), STORE_INT(hi),
					   STORE_INT(store_audit_scan_page)),
				0, scan_row, x, &n, "reading the audit log", e);
		from_seq = x->last + 1;
	} while (rc == GH_OK && !x->stopped && n == store_audit_scan_page && x->last < hi);
	return rc;
}

static enum gh_code scan(struct gh_store *s, int64_t from_seq, int64_t to_seq,
			 gh_audit_row_fn row_fn, gh_audit_block_fn block_fn,
			 const struct scan_head *head, void *ud, struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	struct scan_rows x = {c, NULL, 0, -1, row_fn, block_fn, ud, GH_OK, e, 0, 0};
	enum gh_code rc = GH_OK;
	int began = 0;

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
		if (!(x.b = gh_audit_blockmap_new())) {
			rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
			goto out;
		}
		if ((rc = store_audit_index_next(c, &x.next, e)) != GH_OK)
			goto out;
	}
	rc = scan_range(s, &x, from_seq, to_seq, e);
	if (rc == GH_OK)
		rc = x.rc;
out:
	if (began)
		store_read_end(c);
	gh_audit_blockmap_free(x.b);
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

/* The first row at or after a probe: its seq and ts. */
struct seq_ts {
	int64_t seq, ts;
};

static int seq_ts_row(struct store_row *sr, void *ud)
{
	struct seq_ts *p = ud;

	p->seq = store_col_int(sr, 0);
	p->ts = store_col_int(sr, 1);
	return 0;
}

enum gh_code store_audit_seq_at(struct store_conn *c, int64_t ms, int64_t *seq,
				struct gh_err *e)
{
	struct seq_ts b = {0, 0};
	int64_t lo, hi;
	enum gh_code rc;
	int found = 0;

	/* two subqueries: SQLite answers a lone min() or max() from the
	 * b-tree's edge, but both in one SELECT scan the table */
	rc = store_rows(c, "SELECT coalesce((SELECT min(seq) FROM audit_events), 1), "
			   "coalesce((SELECT max(seq) FROM audit_events), 0)",
			NULL, 0, 1, seq_ts_row, &b, &found, "querying the audit log", e);
	if (rc != GH_OK)
		return rc;
	if (!found)
		return gh_err_set(e, GH_E_IO, "database: querying the audit log: no bounds");
	lo = b.seq;
	hi = b.ts + 1;
	/* the smallest x such that every row before x has ts < ms and every
	 * row from x on has ts >= ms; a probe reads the first row at or after
	 * its midpoint (seq may have gaps where retention cut) */
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;
		struct seq_ts p = {0, 0};

		rc = store_rows(c, "SELECT seq, ts FROM audit_events WHERE seq >= ? "
				   "ORDER BY seq LIMIT 1",
				STORE_ARGS(STORE_INT(mid)), 1, seq_ts_row, &p, &found,
				"querying the audit log", e);
		if (rc != GH_OK)
			return rc;
		if (found && p.ts < ms)
			lo = p.seq + 1;
		else
			hi = mid;
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
static int page_add(struct page *p, struct store_row *sr)
{
	struct gh_audit_row r;
	struct gh_audit_event ev;

	if (p->n == p->limit) {
		p->more = 1;
		return 1;
	}
	row_from(sr, &r, &ev);
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
/* The row of page_seq: handed to the page when it matches every
 * condition; done says whether the page is. */
struct page_one {
	struct page *p;
	int done;
};

static int page_one_row(struct store_row *sr, void *ud)
{
	struct page_one *x = ud;
	struct page *p = x->p;
	struct gh_audit_row r;
	struct gh_audit_event ev;
	int i;

	row_from(sr, &r, &ev);
	for (i = 0; i < p->nconds; i++) {
		const char *v = gh_audit_dim_value(&ev, p->conds[i].dim);

		if (!v || strcmp(v, p->conds[i].val) != 0)
			return 0;
	}
	x->done = page_add(p, sr);
	return 0;
}

static int page_seq(void *ud, int64_t seq)
{
	struct page_one x = {ud, 0};

	if (store_rows(x.p->c, "SELECT " ROW_COLS " FROM audit_events WHERE seq = ?",
		       STORE_ARGS(STORE_INT(seq)), 1, page_one_row, &x, NULL,
		       "querying the audit log", x.p->e) != GH_OK) {
		x.p->failed = 1;
		return -1;
	}
	return x.done;
}

/* Rows in [lo, hi] matched by SQL, without the index (the unindexed tail,
 * or no filter at all). Each combination of conditions is a distinct SQL
 * text, so it is prepared per call; every value is bound, never spliced. */
static int page_row(struct store_row *sr, void *ud)
{
	return page_add(ud, sr);
}

static enum gh_code page_scan(struct page *p, int64_t lo, int64_t hi, int asc)
{
	char sql[1024];
	size_t used;
	struct store_arg args[GH_AUDIT_DIM_LAST + 3];
	int i, n = 0;

	used = (size_t)snprintf(sql, sizeof(sql), "SELECT " ROW_COLS " FROM audit_events "
						   "WHERE seq BETWEEN ? AND ?");
	for (i = 0; i < p->nconds; i++)
		used += (size_t)snprintf(sql + used, sizeof(sql) - used, " AND %s = ?",
					 gh_audit_dim_name(p->conds[i].dim));
	snprintf(sql + used, sizeof(sql) - used,
		 asc ? " ORDER BY seq LIMIT ?" : " ORDER BY seq DESC LIMIT ?");
	args[n++] = STORE_INT(lo);
	args[n++] = STORE_INT(hi);
	for (i = 0; i < p->nconds; i++)
		args[n++] = STORE_TEXT(p->conds[i].val);
	args[n++] = STORE_INT(p->limit + 1 - p->n);
	return store_rows_once(p->c, sql, args, n, 0, page_row, p, NULL, "querying the audit log",
			       p->e);
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
static void ckpt_from(struct store_row *sr, int with_prev, struct gh_audit_checkpoint *c)
{
	size_t nh, npk, nsig;
	const void *h = store_col_blob(sr, 1, &nh);
	const void *pk = store_col_blob(sr, 3, &npk);
	const void *sig = store_col_blob(sr, 4, &nsig);

	memset(c, 0, sizeof(*c));
	c->seq = store_col_int(sr, 0);
	c->ts = store_col_int(sr, 2);
	c->ok_sizes = nh == 32 && npk == 32 && nsig == 64;
	if (c->ok_sizes) {
		memcpy(c->hash, h, 32);
		memcpy(c->public_key, pk, 32);
		memcpy(c->signature, sig, 64);
	}
	if (with_prev && !store_col_isnull(sr, 5)) {
		c->chained = 1;
		c->prev_seq = store_col_int(sr, 5);
	}
}

/* Checkpoints handed to fn (nonzero stops, and sets stopped); n counts
 * them and first is the first one's seq. */
struct ckpt_rows {
	int wp, n, stopped;
	int64_t first;
	int (*fn)(void *ud, const struct gh_audit_checkpoint *k);
	void *ud;
};

static int ckpt_row(struct store_row *sr, void *ud)
{
	struct ckpt_rows *x = ud;
	struct gh_audit_checkpoint k;

	ckpt_from(sr, x->wp, &k);
	if (x->n++ == 0)
		x->first = k.seq;
	x->stopped = x->fn(x->ud, &k) != 0;
	return x->stopped;
}

/* One checkpoint (or the anchor) read into the gh_audit_checkpoint ud. */
static int ckpt_one_row(struct store_row *sr, void *ud)
{
	ckpt_from(sr, store_col_count(sr) > 5, ud);
	return 0;
}

/* Audit rows handed to fn (nonzero stops). */
struct audit_rows {
	gh_audit_row_fn fn;
	void *ud;
};

static int audit_row(struct store_row *sr, void *ud)
{
	struct audit_rows *x = ud;
	struct gh_audit_row r;
	struct gh_audit_event ev;

	row_from(sr, &r, &ev);
	return x->fn(x->ud, &r) ? 1 : 0;
}

/* Checkpoints chain from schema version 8 on; a read-only connection to
 * an older database (not yet migrated) reads them without prev_seq. */
#define CKPT_CHAINED_SCHEMA 8
#define CKPT_COLS "seq, hash, ts, public_key, signature, prev_seq"
#define CKPT_COLS_OLD "seq, hash, ts, public_key, signature"

static int with_prev(struct gh_store *s)
{
	/* PostgreSQL's schema starts where SQLite's 0013 arrived */
	return store_is_pg(s) || gh_store_schema_version(s) >= CKPT_CHAINED_SCHEMA;
}

enum gh_code gh_store_audit_checkpoint_at(struct gh_store *s, int64_t seq,
					  struct gh_audit_checkpoint *out, struct gh_err *e)
{
	return with_prev(s)
		? store_get(s, "SELECT " CKPT_COLS " FROM audit_checkpoints WHERE seq = ?",
			    STORE_ARGS(STORE_INT(seq)), ckpt_one_row, out, sizeof(*out),
			    "reading audit checkpoints", e, "no checkpoint at row %lld",
			    (long long)seq)
		: store_get(s, "SELECT " CKPT_COLS_OLD " FROM audit_checkpoints WHERE seq = ?",
			    STORE_ARGS(STORE_INT(seq)), ckpt_one_row, out, sizeof(*out),
			    "reading audit checkpoints", e, "no checkpoint at row %lld",
			    (long long)seq);
}

enum gh_code gh_store_audit_newest(struct gh_store *s, gh_audit_ckpt_fn anchor_fn,
				   gh_audit_ckpt_fn ckpt_fn, gh_audit_row_fn row_fn, void *ud,
				   struct gh_err *e)
{
	struct store_conn *c = store_reader(s);
	struct gh_audit_checkpoint a;
	struct ckpt_rows k = {with_prev(s), 0, 0, 1, ckpt_fn, ud};
	struct audit_rows r = {row_fn, ud};
	int64_t from, from_floor = 0;
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
	rc = k.wp ? store_rows(c, "SELECT " CKPT_COLS " FROM audit_checkpoints "
				  "ORDER BY seq DESC LIMIT 2",
			       NULL, 0, 0, ckpt_row, &k, NULL, "reading audit checkpoints", e)
		  : store_rows(c, "SELECT " CKPT_COLS_OLD " FROM audit_checkpoints "
				  "ORDER BY seq DESC LIMIT 2",
			       NULL, 0, 0, ckpt_row, &k, NULL, "reading audit checkpoints", e);
	if (rc != GH_OK)
		goto out;
	if (k.stopped)
		goto out;
	from = k.first;
	if (k.n == 0) {
		/* no checkpoint: the rows start at the first one kept */
		rc = store_rows(c, "SELECT coalesce(min(seq), 1) FROM audit_events", NULL, 0, 1,
				store_row_int, &from, NULL, "reading the audit log", e);
		if (rc != GH_OK)
			goto out;
	}
	if (from < from_floor)
		from = from_floor;
	rc = store_rows(c, "SELECT " ROW_COLS " FROM audit_events WHERE seq >= ? ORDER BY seq",
			STORE_ARGS(STORE_INT(from)), 0, audit_row, &r, NULL,
			"reading the audit log", e);
out:
	store_read_end(c);
	store_reader_put(s, c);
	return rc;
}

static enum gh_code ckpts_on(struct gh_store *s, struct store_conn *c,
			     int (*fn)(void *ud, const struct gh_audit_checkpoint *k), void *ud,
			     struct gh_err *e)
{
	struct ckpt_rows k = {with_prev(s), 0, 0, 1, fn, ud};

	return k.wp ? store_rows(c, "SELECT " CKPT_COLS " FROM audit_checkpoints ORDER BY seq",
				 NULL, 0, 0, ckpt_row, &k, NULL, "reading audit checkpoints", e)
		    : store_rows(c, "SELECT " CKPT_COLS_OLD " FROM audit_checkpoints ORDER BY seq",
				 NULL, 0, 0, ckpt_row, &k, NULL, "reading audit checkpoints", e);
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
	int found = 0;
	enum gh_code rc = store_rows(c, "SELECT seq, prev_hash, ts, public_key, signature "
					"FROM audit_anchor WHERE id = 1",
				     NULL, 0, 1, ckpt_one_row, out, &found,
				     "reading the audit anchor", e);

	if (rc == GH_OK && !found)
		rc = gh_err_set(e, GH_E_NOTFOUND, "no audit anchor");
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

/* The log's first and last seq and its row count. */
struct bounds {
	int64_t first, last, count;
};

static int bounds_row(struct store_row *sr, void *ud)
{
	struct bounds *b = ud;

	b->first = store_col_int(sr, 0);
	b->last = store_col_int(sr, 1);
	b->count = store_col_int(sr, 2);
	return 0;
}

enum gh_code gh_store_audit_bounds(struct gh_store *s, int64_t *first, int64_t *last,
				   int64_t *count, struct gh_err *e)
{
	struct bounds b = {0, 0, 0};
	enum gh_code rc = store_read(s, "SELECT coalesce(min(seq), 0), coalesce(max(seq), 0), "
					"count(*) FROM audit_events",
				     NULL, 0, 1, bounds_row, &b, NULL, "reading the audit log", e);

	if (rc == GH_OK) {
		*first = b.first;
		*last = b.last;
		*count = b.count;
	}
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
	struct chain_tip t;
	int64_t keep_seq = 0, limit_seq;
	unsigned char prev[GH_AUDIT_HASH_LEN], sig[64];
	enum gh_code rc;
	int64_t now = gh_now_ms();
	int deleted = 0, found = 0;

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
	memset(&t, 0, sizeof(t));
	rc = store_rows(w, "SELECT seq, prev_hash FROM audit_events WHERE seq >= ? "
			   "ORDER BY seq LIMIT 1",
			STORE_ARGS(STORE_INT(keep_seq)), 1, tip_row, &t, &found,
			"pruning the audit log", e);
	if (rc != GH_OK)
		return rc;
	if (!found) {
		/* Every row is old and signed (a quiet log): all of them go, and
		 * the anchor says the chain goes on after the last one. */
		if (s->chain.last_seq == 0 || s->chain.ckpt_seq != s->chain.last_seq)
			return GH_OK;
		keep_seq = s->chain.last_seq + 1;
		memcpy(prev, s->chain.last_hash, GH_AUDIT_HASH_LEN);
	} else {
		keep_seq = t.seq;
		if (!t.hash_ok)
			return gh_err_set(e, GH_E_IO, "audit: row %lld has a damaged prev_hash",
					  (long long)keep_seq);
		memcpy(prev, t.hash, GH_AUDIT_HASH_LEN);
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
	/* the one anchor row, id 1, made or replaced */
	return store_exec(w, "INSERT INTO audit_anchor (id, seq, prev_hash, ts, public_key, "
			     "signature) VALUES (1, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE "
			     "SET seq = excluded.seq, prev_hash = excluded.prev_hash, "
			     "ts = excluded.ts, public_key = excluded.public_key, "
			     "signature = excluded.signature",
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
