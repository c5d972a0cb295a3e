/*
 * audit_verify.c - recomputes the audit log's hash chain and checks its
 * signed checkpoints and retention anchor; also the one JSON/CSV shape of
 * an audit row shared by the API, export and the CLI.
 *
 * Streaming: rows are read in order through the store's scan, so memory
 * does not grow with the table (checkpoints, one per N rows, are loaded;
 * the filter index one block at a time).
 * Safe from any thread.
 */
#include "audit_verify.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "audit_index.h"
#include "audit_witness.h"
#include "json.h"
#include "util.h"

struct ckpts {
	struct gh_audit_checkpoint *v;
	size_t n, cap;
};

static int ckpt_cb(void *ud, const struct gh_audit_checkpoint *c)
{
	struct ckpts *k = ud;

	if (k->n == k->cap) {
		size_t nc = k->cap ? k->cap * 2 : 64;
		struct gh_audit_checkpoint *p = realloc(k->v, nc * sizeof(*p));

		if (!p)
			return 1;
		k->v = p;
		k->cap = nc;
	}
	k->v[k->n++] = *c;
	return 0;
}

struct scan {
	struct gh_audit_verify *rep;
	/* the filter index of the block being read: its stored postings
	 * (owned by the store, valid until the next block) */
	const struct gh_audit_blockmap *stored;
	int64_t blk;
	const unsigned char *trusted_pk;
	struct ckpts *k;
	size_t next_ckpt;
	int64_t expect_seq;
	unsigned char prev[GH_AUDIT_HASH_LEN];
	int64_t tail_ts;           /* time of the first row after the newest checkpoint */
	int failed;
	int nomem;
};

static int fail(struct scan *s, int64_t seq, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct scan *s, int64_t seq, const char *fmt, ...)
{
	va_list ap;

	s->failed = 1;
	s->rep->ok = 0;
	s->rep->bad_seq = seq;
	va_start(ap, fmt);
	vsnprintf(s->rep->message, sizeof(s->rep->message), fmt, ap);
	va_end(ap);
	return 1;
}

int gh_audit_ckpt_check(const struct gh_audit_checkpoint *ks, size_t idx,
			const unsigned char *trusted_pk, char *why, size_t cap)
{
	const struct gh_audit_checkpoint *c = &ks[idx], *p = idx ? &ks[idx - 1] : NULL;

	if (!c->ok_sizes) {
		snprintf(why, cap, "checkpoint at row %lld is damaged", (long long)c->seq);
		return -1;
	}
	if (trusted_pk && sodium_memcmp(c->public_key, trusted_pk, 32) != 0) {
		snprintf(why, cap, "checkpoint at row %lld is signed by an unknown key",
			 (long long)c->seq);
		return -1;
	}
	if (!c->chained) {
		/* written before checkpoints chained: it stands on its own */
		if (p && p->chained) {
			snprintf(why, cap, "checkpoint at row %lld does not chain to the checkpoint "
				 "before it (row %lld), though that one does: it was not written by "
				 "gatehouse", (long long)c->seq, (long long)p->seq);
			return -1;
		}
		if (!gh_audit_sig_ok(c->public_key, "ckpt", c->seq, c->hash, c->ts, c->signature))
			goto bad_sig;
		return 0;
	}
	if ((p && c->prev_seq > p->seq) || (!p && c->prev_seq > 0)) {
		snprintf(why, cap, "the checkpoint at row %lld signs a checkpoint at row %lld that "
			 "is missing: signed checkpoints were deleted", (long long)c->seq,
			 (long long)c->prev_seq);
		return -1;
	}
	if (p && c->prev_seq < p->seq) {
		snprintf(why, cap, "the checkpoint at row %lld does not chain to the checkpoint "
			 "before it (row %lld): a checkpoint was inserted", (long long)c->seq,
			 (long long)p->seq);
		return -1;
	}
	if (!gh_audit_ckpt_sig_ok(c->public_key, c->seq, c->hash, c->ts, c->prev_seq,
				  p ? p->signature : NULL, c->signature))
		goto bad_sig;
	return 0;
bad_sig:
	snprintf(why, cap, "checkpoint at row %lld has a bad signature (forged or altered)",
		 (long long)c->seq);
	return -1;
}

static int check_ckpt(struct scan *s, size_t idx)
{
	const struct gh_audit_checkpoint *c = &s->k->v[idx];
	char why[256];

	if (gh_audit_ckpt_check(s->k->v, idx, s->trusted_pk, why, sizeof(why)) != 0)
		return fail(s, c->seq, "%s", why);
	s->rep->checkpoints++;
	if (c->chained && !s->rep->chained_from)
		s->rep->chained_from = c->seq;
	return 0;
}

static void index_fail(struct scan *s, int64_t seq, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void index_fail(struct scan *s, int64_t seq, const char *fmt, ...)
{
	va_list ap;

	s->stored = NULL; /* one report per log is enough */
	if (!s->rep->index_ok)
		return;
	s->rep->index_ok = 0;
	s->rep->index_bad_seq = seq;
	va_start(ap, fmt);
	vsnprintf(s->rep->index_message, sizeof(s->rep->index_message), fmt, ap);
	va_end(ap);
}

static int block_cb(void *ud, int64_t blk, const struct gh_audit_blockmap *stored,
		    const char *why)
{
	struct scan *s = ud;

	s->stored = NULL;
	s->blk = blk;
	if (why) {
		index_fail(s, blk << GH_AUDIT_BLOCK_SHIFT,
			   "the filter index of rows %lld..%lld is damaged: %s",
			   (long long)(blk << GH_AUDIT_BLOCK_SHIFT),
			   (long long)(((blk + 1) << GH_AUDIT_BLOCK_SHIFT) - 1), why);
		return 0;
	}
	if (stored && s->rep->index_ok) {
		s->stored = stored;
		s->rep->index_blocks++;
	}
	return 0;
}

/* The postings must list the row under exactly the values it has: under
 * each of them (else filtered pages miss it), and under nothing else in
 * a column where it has none. */
static void index_row(struct scan *s, const struct gh_audit_row *r)
{
	unsigned off = (unsigned)(r->seq & (GH_AUDIT_BLOCK_ROWS - 1));
	int d;

	for (d = 1; d <= GH_AUDIT_DIM_LAST; d++) {
		const char *v = gh_audit_dim_value(r->ev, d);
		const char *listed = gh_audit_blockmap_value_at(s->stored, d, off);

		if (v == listed || (v && listed && !strcmp(v, listed)))
			continue;
		if (v)
			index_fail(s, r->seq, "row %lld is missing from the filter index under "
				   "%s", (long long)r->seq, gh_audit_dim_name(d));
		else
			index_fail(s, r->seq, "the filter index lists row %lld under a %s it "
				   "does not have", (long long)r->seq, gh_audit_dim_name(d));
		return;
	}
}

static int row_cb(void *ud, const struct gh_audit_row *r)
{
	struct scan *s = ud;
	unsigned char h[GH_AUDIT_HASH_LEN];

	if (r->seq != s->expect_seq) {
		if (r->seq > s->expect_seq)
			return fail(s, s->expect_seq, "row %lld is missing (the next row is %lld): "
				    "rows were deleted", (long long)s->expect_seq, (long long)r->seq);
		return fail(s, r->seq, "row %lld is out of order", (long long)r->seq);
	}
	if (r->prev_len != GH_AUDIT_HASH_LEN || r->hash_len != GH_AUDIT_HASH_LEN)
		return fail(s, r->seq, "row %lld has a damaged hash column", (long long)r->seq);
	/* hashes are public: a plain compare (constant time buys nothing here
	 * and costs a sixth of verify's time) */
	if (memcmp(r->prev_hash, s->prev, GH_AUDIT_HASH_LEN) != 0)
		return fail(s, r->seq, "row %lld does not chain to row %lld (prev_hash differs): a "
			    "row was deleted, inserted or reordered", (long long)r->seq,
			    (long long)r->seq - 1);
	gh_audit_row_hash(s->prev, r->seq, r->ev, h);
	if (memcmp(h, r->hash, GH_AUDIT_HASH_LEN) != 0)
		return fail(s, r->seq, "row %lld was modified (its content does not match its "
			    "hash)", (long long)r->seq);
	memcpy(s->prev, h, GH_AUDIT_HASH_LEN);
	/* skip checkpoints older than the anchor */
	while (s->next_ckpt < s->k->n && s->k->v[s->next_ckpt].seq < r->seq)
		s->next_ckpt++;
	if (s->next_ckpt < s->k->n && s->k->v[s->next_ckpt].seq == r->seq) {
		const struct gh_audit_checkpoint *c = &s->k->v[s->next_ckpt];

		if (check_ckpt(s, s->next_ckpt))
			return 1;
		if (sodium_memcmp(c->hash, h, GH_AUDIT_HASH_LEN) != 0)
			return fail(s, r->seq, "the chain does not match the signed checkpoint at "
				    "row %lld: rows up to %lld were rewritten", (long long)r->seq,
				    (long long)r->seq);
		s->rep->signed_seq = c->seq;
		s->rep->signed_ts = c->ts;
		s->next_ckpt++;
		s->tail_ts = 0;
	} else if (!s->tail_ts) {
		s->tail_ts = r->ev->ts ? r->ev->ts : 1;
	}
	if (s->stored)
		index_row(s, r);
	s->rep->rows++;
	s->rep->last_seq = r->seq;
	s->expect_seq++;
	return 0;
}

void gh_audit_verify_opts_config(const struct gh_config *cfg, struct gh_audit_verify_opts *o)
{
	memset(o, 0, sizeof(*o));
	/* a committed log never leaves checkpoint_rows rows unsigned (the
	 * writer signs in the transaction that reaches them), nor rows older
	 * than checkpoint_seconds while it runs; the grace covers a crash and
	 * the restart after it */
	o->max_unsigned_rows = cfg->audit.checkpoint_rows;
	o->max_unsigned_ms = (cfg->audit.checkpoint_seconds + cfg->audit.unsigned_grace_seconds) *
			     1000;
}

struct wit {
	struct gh_witness_entry *v;
	size_t n, cap;
	int nomem;
};

static int wit_cb(void *ud, const struct gh_witness_entry *w)
{
	struct wit *x = ud;

	if (x->n == x->cap) {
		size_t nc = x->cap ? x->cap * 2 : 64;
		struct gh_witness_entry *p = realloc(x->v, nc * sizeof(*p));

		if (!p) {
			x->nomem = 1;
			return 1;
		}
		x->v = p;
		x->cap = nc;
	}
	x->v[x->n++] = *w;
	return 0;
}

static int wit_cmp(const void *a, const void *b)
{
	const struct gh_witness_entry *x = a, *y = b;

	return x->c.seq < y->c.seq ? -1 : x->c.seq > y->c.seq;
}

static const struct gh_audit_checkpoint *find_ckpt(const struct ckpts *k, int64_t seq)
{
	size_t lo = 0, hi = k->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (k->v[mid].seq < seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < k->n && k->v[lo].seq == seq ? &k->v[lo] : NULL;
}

/* The witness is read before the database's snapshot is taken: every
 * line in it was written after its checkpoint committed, so every
 * checkpoint it names is in that snapshot unless it was removed. */
static enum gh_code read_witness(const struct gh_audit_verify_opts *o, struct wit *x,
				 struct gh_audit_verify *rep, struct gh_err *e)
{
	enum gh_code r = gh_witness_read(o->witness_file, wit_cb, x, &rep->witness_invalid, e);

	if (r == GH_E_NOTFOUND) {
		snprintf(rep->witness_note, sizeof(rep->witness_note), "no witness at %s",
			 o->witness_file);
		return GH_OK;
	}
	if (r != GH_OK)
		return r;
	if (x->nomem)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	rep->witness_read = 1;
	if (x->n)
		qsort(x->v, x->n, sizeof(*x->v), wit_cmp);
	return GH_OK;
}

/* Every checkpoint the witness saw (validly signed) must be in the
 * database, byte for byte, unless retention pruned its rows. 0 when so. */
static int check_witness(struct scan *s, const struct gh_audit_verify_opts *o,
			 const struct wit *x)
{
	struct gh_audit_verify *rep = s->rep;
	int64_t bad = 0, newest_db = s->k->n ? s->k->v[s->k->n - 1].seq : 0;
	size_t i;

	if (!rep->witness_read) {
		if (o->witness_required)
			return fail(s, 0, "the witness %s is missing: nothing proves that no signed "
				    "checkpoint was removed", o->witness_file);
		return 0;
	}
	for (i = 0; i < x->n; i++) {
		const struct gh_witness_entry *w = &x->v[i];
		const struct gh_audit_checkpoint *c;
		char ts[GH_ISO8601_MAX];

		if (!gh_witness_entry_valid(w, o->trusted_pk)) {
			rep->witness_invalid++; /* not evidence of anything */
			continue;
		}
		rep->witness_entries++;
		if (w->c.seq > rep->witness_seq)
			rep->witness_seq = w->c.seq;
		if (rep->anchor_seq && w->c.seq < rep->anchor_seq) {
			rep->witness_pruned++;
			continue;
		}
		if (bad)
			continue;
		c = find_ckpt(s->k, w->c.seq);
		gh_iso8601(w->c.ts, ts, sizeof(ts));
		if (c && !sodium_memcmp(c->signature, w->c.signature, 64))
			continue;
		bad = w->c.seq;
		rep->behind_witness = 1;
		if (c)
			fail(s, w->c.seq, "the checkpoint at row %lld is not the one the witness saw "
			     "(signed %s): the log was rewritten and signed again", (long long)bad, ts);
		else if (w->c.seq > newest_db)
			fail(s, w->c.seq <= rep->last_seq ? w->c.seq : rep->last_seq + 1,
			     "the witness saw a signed checkpoint at row %lld (signed %s), newer than "
			     "any in the database (row %lld): the database is behind its witness; "
			     "rows or checkpoints were removed", (long long)bad, ts,
			     (long long)newest_db);
		else
			fail(s, w->c.seq, "the witness saw a signed checkpoint at row %lld (signed "
			     "%s) that the database does not have: signed checkpoints were deleted",
			     (long long)bad, ts);
	}
	return bad ? 1 : 0;
}

/* The rows after the newest checkpoint are covered by no signature; the
 * writer signs within checkpoint_rows rows and checkpoint_seconds, so a
 * longer or older tail means its signatures were deleted (or rows were
 * appended without the key). */
static int check_tail(struct scan *s, const struct gh_audit_verify_opts *o)
{
	struct gh_audit_verify *rep = s->rep;
	int64_t now = o->now_ms ? o->now_ms : gh_now_ms(), first = rep->last_seq - rep->unsigned_rows + 1;

	if (rep->unsigned_rows <= 0)
		return 0;
	if (o->max_unsigned_rows > 0 && rep->unsigned_rows > o->max_unsigned_rows)
		return fail(s, first, "rows %lld..%lld (%lld rows) follow the newest signed "
			    "checkpoint (row %lld), more than the writer ever leaves unsigned (%lld): "
			    "signed checkpoints were deleted, or rows were added without the signing "
			    "key", (long long)first, (long long)rep->last_seq,
			    (long long)rep->unsigned_rows, (long long)rep->signed_seq,
			    (long long)o->max_unsigned_rows);
	if (o->max_unsigned_ms > 0 && rep->unsigned_since > 0 &&
	    now - rep->unsigned_since > o->max_unsigned_ms) {
		char ts[GH_ISO8601_MAX];

		gh_iso8601(rep->unsigned_since, ts, sizeof(ts));
		return fail(s, first, "rows %lld..%lld are covered by no signed checkpoint and the "
			    "oldest of them (%s) is older than the writer ever leaves a row unsigned "
			    "(%lld s): signed checkpoints were deleted, rows were added without the "
			    "signing key, or gatehouse stopped without signing them (a crash) and "
			    "has not run since", (long long)first, (long long)rep->last_seq, ts,
			    (long long)(o->max_unsigned_ms / 1000));
	}
	return 0;
}

/* The retention anchor, in the rows' snapshot: where the chain starts. */
static int anchor_cb(void *ud, const struct gh_audit_checkpoint *a)
{
	struct scan *s = ud;

	if (!a->ok_sizes ||
	    (s->trusted_pk && sodium_memcmp(a->public_key, s->trusted_pk, 32) != 0) ||
	    !gh_audit_sig_ok(a->public_key, "anchor", a->seq, a->hash, a->ts, a->signature))
		return fail(s, a->seq, "the retention anchor at row %lld is not validly signed",
			    (long long)a->seq);
	s->expect_seq = a->seq;
	memcpy(s->prev, a->hash, GH_AUDIT_HASH_LEN);
	s->rep->anchor_seq = a->seq;
	return 0;
}

static int ckpt_scan_cb(void *ud, const struct gh_audit_checkpoint *c)
{
	struct scan *s = ud;

	if (ckpt_cb(s->k, c)) {
		s->nomem = 1;
		return 1;
	}
	return 0;
}

enum gh_code gh_audit_verify_ex(struct gh_store *st, const struct gh_audit_verify_opts *o,
				struct gh_audit_verify *rep, struct gh_err *e)
{
	struct ckpts k = {0};
	struct wit x = {0};
	struct scan s;
	enum gh_code rc;
	int64_t t0 = gh_mono_ns(), signed_to;

	memset(rep, 0, sizeof(*rep));
	memset(&s, 0, sizeof(s));
	rep->ok = 1;
	rep->index_ok = 1;
	s.rep = rep;
	s.trusted_pk = o->trusted_pk;
	s.k = &k;
	s.expect_seq = 1;
	if (o->witness_file && (rc = read_witness(o, &x, rep, e)) != GH_OK)
		goto out;
	rc = gh_store_audit_scan_verify(st, anchor_cb, ckpt_scan_cb, row_cb, block_cb, &s, e);
	if (rc != GH_OK)
		goto out;
	if (s.nomem) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto out;
	}
	if (s.failed)
		goto done;
	/* signed checkpoints beyond the last row: rows were cut off */
	while (s.next_ckpt < k.n) {
		size_t i = s.next_ckpt++;
		const struct gh_audit_checkpoint *c = &k.v[i];

		if (c->seq < s.expect_seq)
			continue;
		if (check_ckpt(&s, i))
			goto done;
		fail(&s, s.expect_seq, "rows %lld..%lld are missing: a signed checkpoint covers row "
		     "%lld but the log ends at row %lld (truncated)", (long long)s.expect_seq,
		     (long long)c->seq, (long long)c->seq, (long long)s.expect_seq - 1);
		goto done;
	}
	/* rows up to the anchor's are covered by its signature */
	signed_to = rep->signed_seq > rep->anchor_seq - 1 ? rep->signed_seq : rep->anchor_seq - 1;
	rep->unsigned_rows = rep->last_seq > signed_to ? rep->last_seq - signed_to : 0;
	rep->unsigned_since = rep->unsigned_rows ? s.tail_ts : 0;
	if (o->witness_file && check_witness(&s, o, &x))
		goto done;
	check_tail(&s, o);
done:
	rep->chain_ok = rep->ok;
	rep->ok = rep->chain_ok && rep->index_ok;
	rep->seconds = (double)(gh_mono_ns() - t0) / 1e9;
	rc = GH_OK;
out:
	free(k.v);
	free(x.v);
	return rc;
}

enum gh_code gh_audit_verify(struct gh_store *st, const unsigned char *trusted_pk,
			     struct gh_audit_verify *rep, struct gh_err *e)
{
	struct gh_audit_verify_opts o;

	memset(&o, 0, sizeof(o));
	o.trusted_pk = trusted_pk;
	return gh_audit_verify_ex(st, &o, rep, e);
}

/* ------------------------------------------------------ quick check */

static const unsigned char genesis[GH_AUDIT_HASH_LEN];

struct quick {
	struct gh_audit_quick *q;
	const struct gh_audit_verify_opts *o;
	struct gh_audit_checkpoint k[2];      /* newest first, as read */
	size_t nk;
	int64_t floor;                        /* the anchor's row (0: none) */
	unsigned char anchor_hash[GH_AUDIT_HASH_LEN];
	const unsigned char *floor_prev;      /* the hash the first row chains from */
	int64_t expect;
	unsigned char prev[GH_AUDIT_HASH_LEN];
	int started;
	int anchor_bad;
};

static int qfail(struct quick *x, int64_t seq, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int qfail(struct quick *x, int64_t seq, const char *fmt, ...)
{
	va_list ap;

	x->q->ok = 0;
	x->q->bad_seq = seq;
	va_start(ap, fmt);
	vsnprintf(x->q->message, sizeof(x->q->message), fmt, ap);
	va_end(ap);
	return 1;
}

static int quick_anchor(void *ud, const struct gh_audit_checkpoint *a)
{
	struct quick *x = ud;

	if (!a->ok_sizes ||
	    (x->o->trusted_pk && sodium_memcmp(a->public_key, x->o->trusted_pk, 32) != 0) ||
	    !gh_audit_sig_ok(a->public_key, "anchor", a->seq, a->hash, a->ts, a->signature)) {
		x->anchor_bad = 1;
		return qfail(x, a->seq, "the retention anchor at row %lld is not validly signed",
			     (long long)a->seq);
	}
	x->floor = a->seq;
	memcpy(x->anchor_hash, a->hash, GH_AUDIT_HASH_LEN);
	x->floor_prev = x->anchor_hash;
	return 0;
}

static int quick_ckpt(void *ud, const struct gh_audit_checkpoint *c)
{
	struct quick *x = ud;

	if (x->nk < 2)
		x->k[x->nk++] = *c;
	return 0;
}

/* The newest checkpoint counts unless retention pruned its rows. */
static const struct gh_audit_checkpoint *quick_newest(const struct quick *x)
{
	return x->nk && (!x->floor || x->k[0].seq >= x->floor) ? &x->k[0] : NULL;
}

static int quick_row(void *ud, const struct gh_audit_row *r)
{
	struct quick *x = ud;
	struct gh_audit_quick *q = x->q;
	const struct gh_audit_checkpoint *c = quick_newest(x);
	unsigned char h[GH_AUDIT_HASH_LEN];

	if (r->prev_len != GH_AUDIT_HASH_LEN || r->hash_len != GH_AUDIT_HASH_LEN)
		return qfail(x, r->seq, "row %lld has a damaged hash column", (long long)r->seq);
	if (!x->started) {
		x->started = 1;
		if (c) {
			if (r->seq != c->seq)
				return qfail(x, c->seq, "row %lld, which the newest signed checkpoint "
					     "covers, is missing (truncated)", (long long)c->seq);
			if (memcmp(r->hash, c->hash, GH_AUDIT_HASH_LEN))
				return qfail(x, c->seq, "the chain does not match the signed "
					     "checkpoint at row %lld: rows up to %lld were rewritten",
					     (long long)c->seq, (long long)c->seq);
		} else {
			int64_t first = x->floor ? x->floor : 1;

			if (r->seq != first)
				return qfail(x, first, "row %lld is missing (the next row is %lld): "
					     "rows were deleted", (long long)first, (long long)r->seq);
			if (memcmp(r->prev_hash, x->floor_prev, GH_AUDIT_HASH_LEN))
				return qfail(x, r->seq, "row %lld does not chain to where the log "
					     "starts", (long long)r->seq);
		}
		memcpy(x->prev, r->prev_hash, GH_AUDIT_HASH_LEN);
		x->expect = r->seq;
	}
	if (r->seq != x->expect) {
		if (r->seq > x->expect)
			return qfail(x, x->expect, "row %lld is missing (the next row is %lld): rows "
				     "were deleted", (long long)x->expect, (long long)r->seq);
		return qfail(x, r->seq, "row %lld is out of order", (long long)r->seq);
	}
	if (memcmp(r->prev_hash, x->prev, GH_AUDIT_HASH_LEN))
		return qfail(x, r->seq, "row %lld does not chain to row %lld (prev_hash differs): "
			     "a row was deleted, inserted or reordered", (long long)r->seq,
			     (long long)r->seq - 1);
	gh_audit_row_hash(x->prev, r->seq, r->ev, h);
	if (memcmp(h, r->hash, GH_AUDIT_HASH_LEN))
		return qfail(x, r->seq, "row %lld was modified (its content does not match its "
			     "hash)", (long long)r->seq);
	memcpy(x->prev, h, GH_AUDIT_HASH_LEN);
	q->rows_checked++;
	q->last_seq = r->seq;
	x->expect++;
	if (!c || r->seq != c->seq) {
		if (!q->unsigned_rows++)
			q->unsigned_since = r->ev->ts ? r->ev->ts : 1;
		/* enough to break the tail rule: no need to read on */
		if (x->o->max_unsigned_rows > 0 && q->unsigned_rows > x->o->max_unsigned_rows)
			return 1;
	}
	return 0;
}

static void quick_witness(struct quick *x, struct gh_store *st, struct gh_err *e)
{
	struct gh_audit_quick *q = x->q;
	struct gh_witness_entry w;
	struct gh_audit_checkpoint c;
	char ts[GH_ISO8601_MAX];
	int found = 0;
	enum gh_code rc = gh_witness_newest(x->o->witness_file, &w, &found, e);

	if (rc == GH_E_NOTFOUND) {
		q->witness = GH_WITNESS_MISSING;
		return;
	}
	if (rc != GH_OK || !found || !gh_witness_entry_valid(&w, x->o->trusted_pk)) {
		/* unreadable, empty, or nothing validly signed at its end */
		q->witness = GH_WITNESS_EMPTY;
		return;
	}
	q->witness = GH_WITNESS_AGREES;
	q->witness_seq = w.c.seq;
	if (x->floor && w.c.seq < x->floor)
		return; /* its rows were pruned since */
	gh_iso8601(w.c.ts, ts, sizeof(ts));
	rc = gh_store_audit_checkpoint_at(st, w.c.seq, &c, e);
	if (rc == GH_OK && !sodium_memcmp(c.signature, w.c.signature, 64))
		return;
	q->witness = GH_WITNESS_AHEAD;
	q->behind_witness = 1;
	if (rc == GH_OK)
		qfail(x, w.c.seq, "the checkpoint at row %lld is not the one the witness saw (signed "
		      "%s): the log was rewritten and signed again", (long long)w.c.seq, ts);
	else if (!q->has_checkpoint || w.c.seq > q->newest.seq)
		qfail(x, q->last_seq + 1 < w.c.seq ? q->last_seq + 1 : w.c.seq,
		      "the database is behind its witness: the witness saw a signed checkpoint at "
		      "row %lld (signed %s), the database's newest is at row %lld; rows or "
		      "checkpoints were removed", (long long)w.c.seq, ts,
		      (long long)(q->has_checkpoint ? q->newest.seq : 0));
	else
		qfail(x, w.c.seq, "the witness saw a signed checkpoint at row %lld (signed %s) that "
		      "the database does not have: signed checkpoints were deleted",
		      (long long)w.c.seq, ts);
}

enum gh_code gh_audit_verify_newest(struct gh_store *st, const struct gh_audit_verify_opts *o,
				    struct gh_audit_quick *q, struct gh_err *e)
{
	struct quick x;
	const struct gh_audit_checkpoint *c;
	enum gh_code rc;
	int64_t t0 = gh_mono_ns(), now = o->now_ms ? o->now_ms : gh_now_ms();

	memset(q, 0, sizeof(*q));
	memset(&x, 0, sizeof(x));
	q->ok = 1;
	x.q = q;
	x.o = o;
	x.floor_prev = genesis;
	rc = gh_store_audit_newest(st, quick_anchor, quick_ckpt, quick_row, &x, e);
	if (rc != GH_OK)
		return rc;
	if (x.anchor_bad)
		goto done;
	if (x.nk) {
		q->has_checkpoint = 1;
		q->newest = x.k[0];
		q->has_chained = x.k[0].chained;
		if (x.nk == 2 && x.k[0].chained && x.k[0].prev_seq == x.k[1].seq)
			memcpy(q->newest_prev_sig, x.k[1].signature, 64);
	}
	c = quick_newest(&x);
	if (c && q->ok) {
		/* its signature, and its link to the one before */
		struct gh_audit_checkpoint asc[2];
		char why[256];
		size_t n = 0;

		if (x.nk == 2)
			asc[n++] = x.k[1];
		asc[n++] = x.k[0];
		if (gh_audit_ckpt_check(asc, n - 1, o->trusted_pk, why, sizeof(why)) != 0)
			qfail(&x, c->seq, "%s", why);
		else if (!x.started)
			qfail(&x, c->seq, "rows up to %lld are missing: a signed checkpoint covers "
			      "row %lld but the log ends before it (truncated)", (long long)c->seq,
			      (long long)c->seq);
	}
	if (q->ok && o->witness_file)
		quick_witness(&x, st, e);
	if (q->ok && q->unsigned_rows > 0) {
		int64_t first = q->last_seq - q->unsigned_rows + 1;

		if (o->max_unsigned_rows > 0 && q->unsigned_rows > o->max_unsigned_rows)
			qfail(&x, first, "more than %lld rows after row %lld are covered by no signed "
			      "checkpoint, more than the writer ever leaves unsigned: signed "
			      "checkpoints were deleted, or rows were added without the signing key",
			      (long long)o->max_unsigned_rows, (long long)first - 1);
		else if (o->max_unsigned_ms > 0 && now - q->unsigned_since > o->max_unsigned_ms) {
			char ts[GH_ISO8601_MAX];

			gh_iso8601(q->unsigned_since, ts, sizeof(ts));
			qfail(&x, first, "rows %lld..%lld are covered by no signed checkpoint and the "
			      "oldest of them (%s) is older than the writer ever leaves a row "
			      "unsigned (%lld s): signed checkpoints were deleted, rows were added "
			      "without the signing key, or gatehouse stopped without signing them "
			      "(a crash) and has not run since", (long long)first,
			      (long long)q->last_seq, ts, (long long)(o->max_unsigned_ms / 1000));
		}
	}
done:
	q->seconds = (double)(gh_mono_ns() - t0) / 1e9;
	return GH_OK;
}

/* ------------------------------------------------------- row shapes */

static void hex_field(cJSON *o, const char *k, const unsigned char *p, size_t n)
{
	char hex[2 * GH_AUDIT_HASH_LEN + 1];

	if (!p || n != GH_AUDIT_HASH_LEN) {
		cJSON_AddNullToObject(o, k);
		return;
	}
	gh_hex(p, n, hex);
	cJSON_AddStringToObject(o, k, hex);
}

static void json_field(cJSON *o, const char *k, const char *s)
{
	cJSON *v = gh_json_parse_stored(s);

	if (v)
		cJSON_AddItemToObject(o, k, v);
	else
		gh_json_add_str(o, k, s);
}

cJSON *gh_audit_row_json(const struct gh_audit_row *r)
{
	const struct gh_audit_event *ev = r->ev;
	cJSON *o = cJSON_CreateObject();
	char ts[GH_ISO8601_MAX];

	if (!o)
		return NULL;
	cJSON_AddNumberToObject(o, "seq", (double)r->seq);
	gh_iso8601(ev->ts, ts, sizeof(ts));
	cJSON_AddStringToObject(o, "ts", ts);
	gh_json_add_str(o, "event", ev->event);
	gh_json_add_str(o, "keyId", ev->key_id);
	gh_json_add_str(o, "owner", ev->owner);
	gh_json_add_str(o, "adminUser", ev->admin_user);
	gh_json_add_str(o, "agentId", ev->agent_id);
	gh_json_add_str(o, "threadId", ev->thread_id);
	gh_json_add_str(o, "runId", ev->run_id);
	gh_json_add_str(o, "toolCallId", ev->tool_call_id);
	gh_json_add_str(o, "toolName", ev->tool_name);
	gh_json_add_str(o, "source", ev->source);
	json_field(o, "args", ev->args);
	gh_json_add_str(o, "outcome", ev->outcome);
	if (ev->duration_ms >= 0)
		cJSON_AddNumberToObject(o, "durationMs", (double)ev->duration_ms);
	else
		cJSON_AddNullToObject(o, "durationMs");
	gh_json_add_str(o, "error", ev->error);
	gh_json_add_str(o, "reason", ev->reason);
	json_field(o, "detail", ev->detail);
	hex_field(o, "prevHash", r->prev_hash, r->prev_len);
	hex_field(o, "hash", r->hash, r->hash_len);
	return o;
}

static int csv_field(struct gh_buf *b, const char *s, int last)
{
	int rc = GH_BUF_OK;

	if (s) {
		const char *p;
		int quote = strpbrk(s, ",\"\r\n") != NULL;

		/* A leading = + - @ makes spreadsheets evaluate the cell:
		 * prefix a quote so exported values stay text. */
		if (strchr("=+-@\t", s[0]) && s[0])
			rc |= gh_buf_putc(b, '\'');
		if (quote)
			rc |= gh_buf_putc(b, '"');
		for (p = s; *p; p++) {
			if (*p == '"')
				rc |= gh_buf_putc(b, '"');
			rc |= gh_buf_putc(b, *p);
		}
		if (quote)
			rc |= gh_buf_putc(b, '"');
	}
	rc |= gh_buf_putc(b, last ? '\n' : ',');
	return rc ? -1 : 0;
}

const char gh_audit_csv_header[] =
	"seq,ts,event,key_id,owner,admin_user,agent_id,thread_id,run_id,tool_call_id,"
	"tool_name,source,args,outcome,duration_ms,error,reason,detail,prev_hash,hash\n";

int gh_audit_row_csv(const struct gh_audit_row *r, struct gh_buf *b)
{
	const struct gh_audit_event *ev = r->ev;
	char seq[24], ts[GH_ISO8601_MAX], dur[24], ph[65], h[65];

	snprintf(seq, sizeof(seq), "%lld", (long long)r->seq);
	gh_iso8601(ev->ts, ts, sizeof(ts));
	if (ev->duration_ms >= 0)
		snprintf(dur, sizeof(dur), "%lld", (long long)ev->duration_ms);
	else
		dur[0] = '\0';
	if (r->prev_len == 32)
		gh_hex(r->prev_hash, 32, ph);
	else
		ph[0] = '\0';
	if (r->hash_len == 32)
		gh_hex(r->hash, 32, h);
	else
		h[0] = '\0';
	return csv_field(b, seq, 0) | csv_field(b, ts, 0) | csv_field(b, ev->event, 0) |
	       csv_field(b, ev->key_id, 0) | csv_field(b, ev->owner, 0) |
	       csv_field(b, ev->admin_user, 0) | csv_field(b, ev->agent_id, 0) |
	       csv_field(b, ev->thread_id, 0) | csv_field(b, ev->run_id, 0) |
	       csv_field(b, ev->tool_call_id, 0) | csv_field(b, ev->tool_name, 0) |
	       csv_field(b, ev->source, 0) | csv_field(b, ev->args, 0) |
	       csv_field(b, ev->outcome, 0) | csv_field(b, dur, 0) | csv_field(b, ev->error, 0) |
	       csv_field(b, ev->reason, 0) | csv_field(b, ev->detail, 0) | csv_field(b, ph, 0) |
	       csv_field(b, h, 1);
}

int gh_audit_export_error_line(enum gh_code code, struct gh_buf *b)
{
	int rc = gh_buf_puts(b, "{\"error\":{\"code\":");

	if (rc == GH_BUF_OK)
		rc = gh_buf_json_str(b, gh_code_name(code));
	if (rc == GH_BUF_OK)
		rc = gh_buf_puts(b, ",\"message\":\"the export stopped before its end; what came "
				 "before is incomplete\"}}\n");
	return rc;
}
