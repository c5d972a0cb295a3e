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
#include "config.h"
#include "store.h"

struct gh_audit_verify {
	int ok;                    /* 1 when intact */
	int64_t rows;              /* rows checked */
	int64_t last_seq;          /* last good row */
	int64_t bad_seq;           /* first bad row (0 when ok) */
	int64_t signed_seq;        /* newest checkpoint verified */
	int64_t signed_ts;
	int64_t unsigned_rows;     /* rows after the newest checkpoint */
	int64_t unsigned_since;    /* time of the oldest of them (0 when none) */
	int64_t anchor_seq;        /* where the chain starts after pruning (0 = genesis) */
	int64_t checkpoints;       /* checkpoints verified */
	int64_t chained_from;      /* first checkpoint that chains (0: none) */
	/* The witness (opts.witness_file): every checkpoint it saw must be in
	 * the database; its absence is a failure only when required. */
	int witness_read;          /* the file was read */
	int behind_witness;        /* !chain_ok because the witness saw more */
	int64_t witness_entries;   /* well-formed lines */
	int64_t witness_seq;       /* newest checkpoint it saw */
	int64_t witness_pruned;    /* entries below the retention anchor */
	int64_t witness_invalid;   /* lines badly formed or not validly signed (ignored) */
	char witness_note[256];    /* why it was not read, "" when it was */
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

struct gh_audit_verify_opts {
	const unsigned char *trusted_pk;   /* 32 bytes pinning the signing key, or NULL */
	/* The tail rule: the rows after the newest checkpoint may number at
	 * most max_unsigned_rows, and the oldest of them be at most
	 * max_unsigned_ms old (at now_ms; 0 = the clock). 0 = no limit. */
	int64_t max_unsigned_rows;
	int64_t max_unsigned_ms;
	int64_t now_ms;
	const char *witness_file;          /* NULL: no witness */
	int witness_required;              /* a missing witness file fails */
};

/* Fills the options the configuration implies: the tail rule from
 * audit.checkpoint_rows / checkpoint_seconds / unsigned_grace_seconds. */
void gh_audit_verify_opts_config(const struct gh_config *cfg, struct gh_audit_verify_opts *o);

/* Recomputes every hash from the anchor (or genesis), checks that every
 * row chains to the one before, that every checkpoint's signature is valid,
 * chains to the checkpoint before it and matches the chain, that no signed
 * checkpoint lies beyond the last row (truncation), the tail rule, and that
 * every checkpoint the witness saw is in the database; and checks the
 * filter index against the rows. ok is chain_ok && index_ok. Returns GH_OK
 * with rep filled whether or not the log is intact; other codes mean it
 * could not be read. */
enum gh_code gh_audit_verify_ex(struct gh_store *s, const struct gh_audit_verify_opts *o,
				struct gh_audit_verify *rep, struct gh_err *e);
/* gh_audit_verify_ex with only trusted_pk (may be NULL) set. */
enum gh_code gh_audit_verify(struct gh_store *s, const unsigned char *trusted_pk,
			     struct gh_audit_verify *rep, struct gh_err *e);

/* Checks whether the checkpoint c (the idx-th of ks, ascending) is validly
 * signed, by trusted_pk when given, and chains to ks[idx - 1]: a chained
 * checkpoint must name the one before it in ks (0 when it is the first),
 * and an unchained one (written before checkpoints chained) may not
 * follow a chained one. 0 when it holds, else -1 with why filled. */
int gh_audit_ckpt_check(const struct gh_audit_checkpoint *ks, size_t idx,
			const unsigned char *trusted_pk, char *why, size_t cap);

/* The quick check from the newest checkpoint: what serve does at start and
 * the CLI before it signs. Cost: two checkpoints, the rows after the newest
 * (at most max_unsigned_rows + 1) and the witness file's last 64 KiB,
 * whatever the size of the log. */
enum gh_audit_witness_state {
	GH_WITNESS_NOT_USED,      /* no witness file configured */
	GH_WITNESS_AGREES,        /* its newest checkpoint is in the database */
	GH_WITNESS_EMPTY,         /* the file holds no checkpoint yet */
	GH_WITNESS_MISSING,       /* no file */
	GH_WITNESS_AHEAD          /* it saw a checkpoint the database lacks */
};

struct gh_audit_quick {
	int ok;                    /* what was checked holds */
	int behind_witness;        /* !ok because of the witness */
	int64_t bad_seq;
	char message[512];
	int64_t rows_checked;
	int64_t last_seq;
	int has_checkpoint;
	struct gh_audit_checkpoint newest;   /* the newest checkpoint, when has_checkpoint */
	unsigned char newest_prev_sig[64];   /* the signature it chains to (zeros: none) */
	int64_t unsigned_rows;
	int64_t unsigned_since;
	int has_chained;           /* the newest checkpoint chains: this gatehouse wrote it */
	enum gh_audit_witness_state witness;
	int64_t witness_seq;       /* the newest checkpoint the witness saw */
	double seconds;
};

/* Checks the newest checkpoint (signature, chain link to the one before,
 * that it covers its row), that every row after it chains and hashes
 * right, the retention anchor, the tail rule, and that the witness's
 * newest checkpoint is in the database. GH_OK with q filled whatever it
 * finds. */
enum gh_code gh_audit_verify_newest(struct gh_store *s, const struct gh_audit_verify_opts *o,
				    struct gh_audit_quick *q, struct gh_err *e);

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
