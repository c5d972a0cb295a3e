/*
 * audit_verify.h - checking the audit log, and the shapes an audit row
 * takes outside the database (JSON for the API and NDJSON export, CSV).
 */
#ifndef GH_AUDIT_VERIFY_H
#define GH_AUDIT_VERIFY_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "audit.h"
#include "buf.h"
#include "store.h"

struct gh_audit_verify {
	int ok;                    /* 1 when intact */
	int64_t rows;              /* rows checked */
	int64_t last_seq;          /* last good row */
	int64_t bad_seq;           /* first bad row (0 when ok) */
	int64_t signed_seq;        /* newest checkpoint verified */
	int64_t signed_ts;
	int64_t unsigned_rows;     /* rows after the newest checkpoint */
	int64_t anchor_seq;        /* where the chain starts after pruning (0 = genesis) */
	double seconds;
	char message[512];         /* what is wrong, for people */
	/* The filter index, checked against every row of each indexed block:
	 * a damaged index hides rows from filtered queries, though the rows
	 * themselves are intact (`gatehouse audit reindex` rebuilds it). */
	int chain_ok;              /* the hash chain and checkpoints hold */
	int index_ok;              /* every indexed block's postings match its rows */
	int64_t index_blocks;      /* indexed blocks checked */
	int64_t index_bad_seq;     /* a row where they disagree (0 when ok) */
	char index_message[256];
};

/* Recomputes every hash from the anchor (or genesis), checks that every
 * row chains to the one before, that every checkpoint's signature is valid
 * and matches the chain, and that no signed checkpoint lies beyond the last
 * row (truncation); and checks the filter index against the rows. ok is
 * chain_ok && index_ok. trusted_pk (32 bytes, may be NULL) pins the signing
 * key. Returns GH_OK with rep filled whether or not the log is intact;
 * other codes mean it could not be read. */
enum gh_code gh_audit_verify(struct gh_store *s, const unsigned char *trusted_pk,
			     struct gh_audit_verify *rep, struct gh_err *e);

/* {seq, ts, event, keyId, ..., args, detail, prevHash, hash}. Caller frees. */
cJSON *gh_audit_row_json(const struct gh_audit_row *r);

/* One CSV line (with the newline); spreadsheet formulas are neutralised. */
extern const char gh_audit_csv_header[];
int gh_audit_row_csv(const struct gh_audit_row *r, struct gh_buf *b);

/* The last line of an NDJSON export that stopped before its end (the store
 * failed): {"error":{"code", "message"}} and a newline, so a reader never
 * takes what came before for the whole log. */
int gh_audit_export_error_line(enum gh_code code, struct gh_buf *b);

#endif
