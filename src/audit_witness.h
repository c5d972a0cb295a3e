/*
 * audit_witness.h - a copy of every signed checkpoint kept outside the
 * database, the way transparency logs are witnessed.
 *
 * Whoever can write the database can delete rows and the checkpoints that
 * cover them, and with the signing key can even re-sign a shorter or
 * rewritten chain. What they cannot do is take back what a witness
 * already saw: every checkpoint, once committed, is appended to the
 * witness file (an append-only text file, by default "<db>-witness", best
 * kept on another disk or host) and optionally sent to a webhook and to
 * syslog. `audit verify` then proves that the database still holds every
 * checkpoint the witness saw, and `serve` refuses to start on a database
 * that is behind its witness.
 *
 * The file has one line per checkpoint, self-contained (the line alone
 * proves that a checkpoint was validly signed):
 *
 *   gatehouse-witness 1 seq=N ts=MS prev=P hash=HEX64 key=HEX64 sig=HEX128 prevsig=HEX128
 *
 * prev and prevsig are "-" for a checkpoint written before checkpoints
 * chained. Lines are appended with one write each (O_APPEND), so a server
 * and a CLI may share the file; they are not necessarily in seq order.
 *
 * Threading: one witness thread per gh_witness writes the file (and
 * fsyncs it), then the webhook and syslog; gh_witness_record only queues,
 * so the database writer never waits for a disk or a network. The reading
 * functions are pure and safe from any thread.
 */
#ifndef GH_AUDIT_WITNESS_H
#define GH_AUDIT_WITNESS_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "store.h"

/* Longest line the witness writes (and the longest it reads). */
#define GH_WITNESS_LINE_MAX 600

struct gh_witness_entry {
	struct gh_audit_checkpoint c;      /* chained and prev_seq as in the database */
	unsigned char prev_sig[64];        /* chained: the signature it chains to */
};

/* One line (with its newline) into out; returns its length, or 0 when cap
 * is too small. */
size_t gh_witness_format(const struct gh_audit_checkpoint *c, const unsigned char prev_sig[64],
			 char *out, size_t cap);
/* Parses one line (without or with its newline). 0 ok, -1 not a witness
 * line. */
int gh_witness_parse(const char *line, size_t len, struct gh_witness_entry *out);
/* 1 when the entry's signature is valid (and by trusted_pk when given). */
int gh_witness_entry_valid(const struct gh_witness_entry *w, const unsigned char *trusted_pk);

/* Calls fn for every well-formed line of path, in file order; a line that
 * is not one (a torn last line after a crash, or damage) counts into
 * *bad_lines. GH_E_NOTFOUND when the file does not exist. Reads at most
 * GH_WITNESS_FILE_MAX bytes. */
#define GH_WITNESS_FILE_MAX (INT64_C(1) << 30)
enum gh_code gh_witness_read(const char *path,
			     int (*fn)(void *ud, const struct gh_witness_entry *w), void *ud,
			     int64_t *bad_lines, struct gh_err *e);
/* The entry with the highest seq among the lines in the last 64 KiB of
 * path (cheap: for start-up). *found 0 when the file has no entry;
 * GH_E_NOTFOUND when it does not exist. */
enum gh_code gh_witness_newest(const char *path, struct gh_witness_entry *out, int *found,
			       struct gh_err *e);

/* ------------------------------------------------------------ writing */

struct gh_witness_opts {
	const char *path;                  /* the file; required */
	const char *webhook_url;           /* NULL: none. POSTed one JSON object per checkpoint */
	int64_t webhook_timeout_ms;
	int syslog;                        /* also log each checkpoint to syslog (LOG_AUTH) */
	const char *database;              /* named in webhook and syslog messages */
};

struct gh_witness;

/* Opens (creating, mode 0600) the file for appending, so a path that
 * cannot be written is an error at start, and starts the witness thread.
 * Strings in o are copied. */
enum gh_code gh_witness_open(const struct gh_witness_opts *o, struct gh_witness **out,
			     struct gh_err *e);
/* Queues a committed checkpoint for the file and the sinks; never blocks
 * on them. When the queue is full the entry is dropped and counted (the
 * next one is witnessed). Thread-safe. */
void gh_witness_record(struct gh_witness *w, const struct gh_audit_checkpoint *c,
		       const unsigned char prev_sig[64]);
/* gh_witness_record shaped for gh_store_opts.on_checkpoint (ud: the witness). */
void gh_witness_on_checkpoint(void *ud, const struct gh_audit_checkpoint *c,
			      const unsigned char prev_sig[64]);

struct gh_witness_stats {
	int64_t written;                   /* lines in the file (fsynced) */
	int64_t file_errors;
	int64_t dropped;                   /* queue full */
	int64_t sent;                      /* webhook deliveries */
	int64_t send_errors;
	int64_t last_seq;                  /* newest checkpoint written to the file */
	int failing;                       /* the last write to the file failed */
	char last_error[256];              /* "" when none */
};
void gh_witness_stats(struct gh_witness *w, struct gh_witness_stats *out);
const char *gh_witness_path(const struct gh_witness *w);

/* Writes what is queued (waiting at most the webhook timeout plus a few
 * seconds for the sinks), stops the thread and closes the file. NULL ok. */
void gh_witness_close(struct gh_witness *w);

#endif
