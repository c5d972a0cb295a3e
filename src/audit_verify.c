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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "audit_index.h"
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
	int failed;
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

static int check_ckpt(struct scan *s, const struct gh_audit_checkpoint *c)
{
	if (!c->ok_sizes)
		return fail(s, c->seq, "checkpoint at row %lld is damaged", (long long)c->seq);
	if (s->trusted_pk && sodium_memcmp(c->public_key, s->trusted_pk, 32) != 0)
		return fail(s, c->seq, "checkpoint at row %lld is signed by an unknown key",
			    (long long)c->seq);
	if (!gh_audit_sig_ok(c->public_key, "ckpt", c->seq, c->hash, c->ts, c->signature))
		return fail(s, c->seq, "checkpoint at row %lld has a bad signature (forged or "
			    "altered)", (long long)c->seq);
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

		if (check_ckpt(s, c))
			return 1;
		if (sodium_memcmp(c->hash, h, GH_AUDIT_HASH_LEN) != 0)
			return fail(s, r->seq, "the chain does not match the signed checkpoint at "
				    "row %lld: rows up to %lld were rewritten", (long long)r->seq,
				    (long long)r->seq);
		s->rep->signed_seq = c->seq;
		s->rep->signed_ts = c->ts;
		s->next_ckpt++;
	}
	if (s->stored)
		index_row(s, r);
	s->rep->rows++;
	s->rep->last_seq = r->seq;
	s->expect_seq++;
	return 0;
}

enum gh_code gh_audit_verify(struct gh_store *st, const unsigned char *trusted_pk,
			     struct gh_audit_verify *rep, struct gh_err *e)
{
	struct ckpts k = {0};
	struct scan s;
	struct gh_audit_checkpoint anchor;
	enum gh_code rc;
	int64_t t0 = gh_mono_ns();

	memset(rep, 0, sizeof(*rep));
	memset(&s, 0, sizeof(s));
	rep->ok = 1;
	rep->index_ok = 1;
	s.rep = rep;
	s.trusted_pk = trusted_pk;
	s.k = &k;
	s.expect_seq = 1;
	rc = gh_store_audit_anchor(st, &anchor, e);
	if (rc == GH_OK) {
		if (!anchor.ok_sizes ||
		    (trusted_pk && sodium_memcmp(anchor.public_key, trusted_pk, 32) != 0) ||
		    !gh_audit_sig_ok(anchor.public_key, "anchor", anchor.seq, anchor.hash, anchor.ts,
				     anchor.signature)) {
			fail(&s, anchor.seq, "the retention anchor at row %lld is not validly signed",
			     (long long)anchor.seq);
			goto done;
		}
		s.expect_seq = anchor.seq;
		memcpy(s.prev, anchor.hash, GH_AUDIT_HASH_LEN);
		rep->anchor_seq = anchor.seq;
	} else if (rc != GH_E_NOTFOUND) {
		return rc;
	}
	if ((rc = gh_store_audit_checkpoints(st, ckpt_cb, &k, e)) != GH_OK)
		goto out;
	rc = gh_store_audit_scan_indexed(st, s.expect_seq, row_cb, block_cb, &s, e);
	if (rc != GH_OK)
		goto out;
	if (s.failed)
		goto done;
	/* signed checkpoints beyond the last row: rows were cut off */
	while (s.next_ckpt < k.n) {
		const struct gh_audit_checkpoint *c = &k.v[s.next_ckpt++];

		if (c->seq < s.expect_seq)
			continue;
		if (check_ckpt(&s, c))
			goto done;
		fail(&s, s.expect_seq, "rows %lld..%lld are missing: a signed checkpoint covers row "
		     "%lld but the log ends at row %lld (truncated)", (long long)s.expect_seq,
		     (long long)c->seq, (long long)c->seq, (long long)s.expect_seq - 1);
		goto done;
	}
	rep->unsigned_rows = rep->last_seq > rep->signed_seq ? rep->last_seq - rep->signed_seq : 0;
done:
	rep->chain_ok = rep->ok;
	rep->ok = rep->chain_ok && rep->index_ok;
	rep->seconds = (double)(gh_mono_ns() - t0) / 1e9;
	rc = GH_OK;
out:
	free(k.v);
	return rc;
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
