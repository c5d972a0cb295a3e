/*
 * audit_health.h - what the running server knows about its audit log's
 * integrity, and how serve opens its store so it never signs a chain it
 * has not checked.
 *
 * At start the store is opened without its signing key and checked from
 * the newest checkpoint (audit_verify.h's quick check: milliseconds,
 * whatever the size of the log). Then:
 *  - intact: the writer signs from there on, each checkpoint witnessed;
 *  - broken: the same, but loudly (log, /healthz "degraded", the admin
 *    UI's Overview banner, and an audit row recording what was found, so
 *    the finding stays in the signed log);
 *  - behind its witness (checkpoints the witness saw are gone): serve
 *    refuses to start, or with audit.witness.when_behind "read_only"
 *    serves reads only, from a store without a writer.
 * The state shown is the start-up check's until a full verify (the admin
 * API's /api/audit/verify) replaces it.
 *
 * Thread-safe: /healthz and verify read and update it from any worker.
 */
#ifndef GH_AUDIT_HEALTH_H
#define GH_AUDIT_HEALTH_H

#include <cjson/cJSON.h>

#include "app.h"
#include "audit_verify.h"
#include "err.h"
#include "store.h"

struct gh_audit_health;

/* Opens app->store from so (its signer and checkpoint hook are set here;
 * so->signer must be NULL), checks the chain, opens the witness
 * (witness_file NULL: none), and decides as above. Sets app->store,
 * app->audit and app->read_only. GH_E_CONFLICT when serve must not start
 * (the database is behind its witness; e says why and what to do). */
enum gh_code gh_audit_serve_open(struct gh_app *app, const struct gh_store_opts *so,
				 const char *witness_file, struct gh_err *e);
/* After gh_store_close: stops the witness (writing what is queued) and
 * frees app->audit. */
void gh_audit_serve_close(struct gh_app *app);

/* A full verify's result replaces the start-up check's. */
void gh_audit_health_note_verify(struct gh_audit_health *h, const struct gh_audit_verify *rep);

/* Adds {chain, message, badSeq, checkedBy, checkedAt, signedSeq,
 * unsignedRows, readOnly, witness:{state, seq, written, errors, message}}
 * to o as "audit". Returns 1 when nothing needs attention (chain intact,
 * writable, witness working). h NULL: returns 1 and adds nothing. */
int gh_audit_health_json(struct gh_audit_health *h, cJSON *o);

/* The verify options serve uses (config, signing key, witness). */
void gh_audit_health_verify_opts(struct gh_audit_health *h, const struct gh_config *cfg,
				 const unsigned char *pk, struct gh_audit_verify_opts *o);

/* The CLI's writes (keys, admin accounts) sign a checkpoint when the
 * command ends, so they do not wait, unsigned, for the server: when the
 * signing key at key_file is readable and the chain checks out from its
 * newest checkpoint (the same check as serve's), s (opened writable,
 * without a signer) starts signing, witnessed at witness_file (NULL:
 * none). Returns what to free with gh_audit_cli_close after gh_store_close,
 * or NULL when it does not sign (why goes to the log). */
struct gh_audit_cli;
struct gh_audit_cli *gh_audit_cli_sign(struct gh_store *s, const struct gh_config *cfg,
				       const char *key_file, const char *witness_file);
void gh_audit_cli_close(struct gh_audit_cli *c);

#endif
