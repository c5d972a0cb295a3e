/*
 * audit.h - the audit log's events, hash chain, signed checkpoints and
 * verification.
 *
 * Every tool decision, execution and admin action becomes one row of an
 * append-only table. Each row stores prev_hash and
 *     hash = BLAKE2b-256(prev_hash || canonical encoding of the row)
 * where the encoding covers seq and every column in a fixed order, so a
 * modified, deleted, inserted or reordered row breaks the chain. Every N
 * rows or T seconds the writer signs (seq, hash, ts) with an Ed25519 key
 * that lives outside the database; an attacker who rewrites the chain
 * cannot forge those signatures, and truncation below the newest signed
 * checkpoint is caught. Each checkpoint also signs the one before it, and
 * each is copied to a witness outside the database (audit_witness.h), so
 * deleting checkpoints is caught too.
 *
 * The hashing functions are pure and thread-safe; the store's writer calls
 * them. Redaction happens before hashing: secrets never reach the table.
 */
#ifndef GH_AUDIT_H
#define GH_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "err.h"

#define GH_AUDIT_HASH_LEN 32

/* One event as written. Every string may be NULL (stored as NULL). */
struct gh_audit_event {
	int64_t ts;                 /* Unix ms; 0 = now. The writer never stores a time
				     * earlier than the previous row's. */
	const char *event;          /* one of gh_audit_event_names */
	const char *key_id;
	const char *owner;
	const char *admin_user;
	const char *agent_id;
	const char *thread_id;
	const char *run_id;
	const char *tool_call_id;
	const char *tool_name;
	const char *source;         /* memory | server | client | admin | system */
	const char *args;           /* canonical JSON, already redacted */
	const char *outcome;        /* one of gh_audit_outcome_names */
	int64_t duration_ms;        /* -1 = none */
	const char *error;
	const char *reason;
	const char *detail;         /* canonical JSON object or NULL */
};

/* hash = BLAKE2b-256(prev || encoding(seq, ev)). ev->ts must be set. */
void gh_audit_row_hash(const unsigned char prev[GH_AUDIT_HASH_LEN], int64_t seq,
		       const struct gh_audit_event *ev, unsigned char out[GH_AUDIT_HASH_LEN]);

/* The Ed25519 key pair that signs checkpoints. */
struct gh_audit_signer {
	unsigned char pk[32];
	unsigned char sk[64];
};

/* Loads the key from path, or creates it (mode 0600) when the file does not
 * exist. Refuses a key file readable by group or others. */
enum gh_code gh_audit_signer_load(const char *path, int create, struct gh_audit_signer *out,
				  struct gh_err *e);
/* Wipes the secret key. */
void gh_audit_signer_wipe(struct gh_audit_signer *s);

/* The message a checkpoint (kind "ckpt") or anchor (kind "anchor") signs. */
void gh_audit_sign(const struct gh_audit_signer *s, const char *kind, int64_t seq,
		   const unsigned char hash[GH_AUDIT_HASH_LEN], int64_t ts, unsigned char sig[64]);
int gh_audit_sig_ok(const unsigned char pk[32], const char *kind, int64_t seq,
		    const unsigned char hash[GH_AUDIT_HASH_LEN], int64_t ts,
		    const unsigned char sig[64]);

/* Checkpoints chain: each one also signs the checkpoint before it (its row
 * and its signature), so one deleted from the middle of the table breaks
 * the next one's signature. The message is
 *   "gatehouse-audit-ckpt2" NUL seq hash ts prev_seq prev_signature
 * with prev_seq 0 and a zero signature for the first checkpoint of a log.
 * Checkpoints written before chaining (kind "ckpt", gh_audit_sign) stay
 * valid on their own. */
void gh_audit_sign_ckpt(const struct gh_audit_signer *s, int64_t seq,
			const unsigned char hash[GH_AUDIT_HASH_LEN], int64_t ts, int64_t prev_seq,
			const unsigned char prev_sig[64], unsigned char sig[64]);
int gh_audit_ckpt_sig_ok(const unsigned char pk[32], int64_t seq,
			 const unsigned char hash[GH_AUDIT_HASH_LEN], int64_t ts, int64_t prev_seq,
			 const unsigned char prev_sig[64], const unsigned char sig[64]);

/* Redacts args in place: every object member (at any depth) whose name
 * matches one of the configured names, case-insensitively, has its value
 * replaced by "[REDACTED]". */
void gh_audit_redact(cJSON *args, const struct gh_strlist *names);

/* The audit log's vocabulary: every event and every outcome gatehouse
 * writes (NULL-terminated), so filters can offer them. A new event or
 * outcome is added here. */
extern const char *const gh_audit_event_names[];
extern const char *const gh_audit_outcome_names[];

/* Redacted canonical JSON of args, capped at max bytes (a longer value is
 * stored as {"truncated":true,"bytes":N,"blake2b":"..."}). Caller frees.
 * args may be NULL ("null"). */
char *gh_audit_args_json(const cJSON *args, const struct gh_strlist *redact, size_t max);

#endif
