/*
 * audit_health.c - the audit chain's state in a running server, and the
 * start-up check; see audit_health.h.
 */
#include "audit_health.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "admin_audit.h"
#include "audit_witness.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "util.h"

enum chain { CHAIN_INTACT, CHAIN_BROKEN, CHAIN_BEHIND };

struct gh_audit_health {
	pthread_mutex_t mu;
	enum chain chain;
	char message[512];
	int64_t bad_seq;
	int64_t signed_seq;
	int64_t unsigned_rows;
	int64_t checked_at;
	const char *checked_by;            /* "startup" or "verify" */
	int read_only;
	char *witness_file;                /* NULL: no witness */
	struct gh_witness *witness;        /* the writer (NULL when read-only) */
	/* what start-up found: "ok", "new" (no witness yet), "recreated" (it
	 * was missing though this database's checkpoints were witnessed),
	 * "ahead" (it saw more than the database holds) or "disabled" */
	const char *witness_start;
};

static const char *chain_name(enum chain c)
{
	return c == CHAIN_INTACT ? "intact" : c == CHAIN_BROKEN ? "broken" : "behind_witness";
}

static void checkpoint_hook(void *ud, const struct gh_audit_checkpoint *c,
			    const unsigned char prev_sig[64])
{
	struct gh_audit_health *h = ud;

	/* signing starts (gh_store_audit_sign_with, under the store's
	 * locks) only after the witness is open: no race on h->witness */
	gh_witness_record(h->witness, c, prev_sig);
}

void gh_audit_health_verify_opts(struct gh_audit_health *h, const struct gh_config *cfg,
				 const unsigned char *pk, struct gh_audit_verify_opts *o)
{
	gh_audit_verify_opts_config(cfg, o);
	o->trusted_pk = pk;
	o->witness_file = h ? h->witness_file : NULL;
}

/* Records what start-up found in the signed log itself. */
static void audit_finding(struct gh_app *app, const struct gh_audit_quick *q)
{
	char detail[96];
	struct gh_system_event se = {"audit_check_failed", "system", "broken", q->message, detail,
				     "the start-up check's finding"};

	snprintf(detail, sizeof(detail), "{\"bad_seq\":%lld,\"unsigned_rows\":%lld}",
		 (long long)q->bad_seq, (long long)q->unsigned_rows);
	gh_admin_audit_system(app->store, &se);
}

enum gh_code gh_audit_serve_open(struct gh_app *app, const struct gh_store_opts *so,
				 const char *witness_file, struct gh_err *e)
{
	struct gh_audit_health *h = calloc(1, sizeof(*h));
	struct gh_store_opts o = *so;
	struct gh_audit_verify_opts vo;
	struct gh_audit_quick q;
	enum gh_code rc;

	app->store = NULL;
	app->audit = NULL;
	app->read_only = 0;
	if (!h)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	pthread_mutex_init(&h->mu, NULL);
	h->checked_by = "startup";
	h->witness_start = "disabled";
	app->audit = h;
	if (witness_file && !(h->witness_file = strdup(witness_file))) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto fail;
	}
	/* unsigned until checked: a checkpoint covers every row before it */
	o.signer = NULL;
	if ((rc = gh_store_open(&o, &app->store, e)) != GH_OK)
		goto fail;
	gh_audit_health_verify_opts(h, gh_app_cfg(app), app->signer.pk, &vo);
	if ((rc = gh_audit_verify_newest(app->store, &vo, &q, e)) != GH_OK)
		goto fail;
	h->checked_at = gh_now_ms();
	gh_metrics_audit_verified(q.ok, h->checked_at);
	if (q.has_checkpoint)
		gh_metrics_audit_checkpoint(q.newest.ts);
	h->chain = q.ok ? CHAIN_INTACT : q.behind_witness ? CHAIN_BEHIND : CHAIN_BROKEN;
	h->bad_seq = q.ok ? 0 : q.bad_seq;
	h->signed_seq = q.has_checkpoint ? q.newest.seq : 0;
	h->unsigned_rows = q.unsigned_rows;
	gh_strlcpy(h->message, q.ok ? "intact" : q.message, sizeof(h->message));
	if (q.behind_witness) {
		gh_error("AUDIT LOG BEHIND ITS WITNESS: %s", q.message);
		gh_store_close(app->store);
		app->store = NULL;
		if (gh_app_cfg(app)->audit.witness.when_behind != GH_WITNESS_READ_ONLY) {
			rc = gh_err_set(e, GH_E_CONFLICT,
					"the audit log is behind its witness, refusing to start: %s. "
					"Compare with `gatehouse audit verify`; restore the database "
					"from a backup, or set audit.witness.when_behind to "
					"\"read_only\" to serve reads meanwhile", q.message);
			goto fail;
		}
		o = *so;
		o.signer = NULL;
		o.readonly = 1;
		o.readonly_reason = "gatehouse is read-only: its audit log is behind its witness "
				    "(see /healthz)";
		if ((rc = gh_store_open(&o, &app->store, e)) != GH_OK)
			goto fail;
		h->read_only = 1;
		app->read_only = 1;
		h->witness_start = "ahead";
		gh_error("audit: serving READ-ONLY (audit.witness.when_behind): every write is "
			 "refused with 503 until the database is restored");
		return GH_OK;
	}
	if (h->witness_file) {
		struct gh_witness_opts wo = {
			.path = h->witness_file,
			.webhook_url = gh_app_cfg(app)->audit.witness.webhook_url,
			.webhook_timeout_ms = gh_app_cfg(app)->audit.witness.webhook_timeout_ms,
			.syslog = gh_app_cfg(app)->audit.witness.syslog,
			.database = gh_app_cfg(app)->database.path,
		};

		if ((rc = gh_witness_open(&wo, &h->witness, e)) != GH_OK)
			goto fail;
		h->witness_start = "ok";
		if (q.witness == GH_WITNESS_MISSING || q.witness == GH_WITNESS_EMPTY) {
			h->witness_start = "new";
			if (q.has_chained) {
				/* this gatehouse wrote those checkpoints, and witnessed
				 * them: the witness was lost, emptied or replaced */
				h->witness_start = "recreated";
				gh_error("audit: the witness %s is %s, though this database's "
					 "checkpoints were witnessed: it starts again now (if it "
					 "lived on a disk that is not mounted, stop and mount it)",
					 h->witness_file,
					 q.witness == GH_WITNESS_MISSING ? "missing" : "empty");
			}
			/* the newest checkpoint, so the witness starts where
			 * the database stands */
			if (q.has_checkpoint)
				gh_witness_record(h->witness, &q.newest, q.newest_prev_sig);
		}
	}
	if (gh_store_pg_pool(app->store) && q.has_checkpoint &&
	    sodium_memcmp(q.newest.public_key, app->signer.pk, sizeof(app->signer.pk)) != 0) {
		/* replicas share one chain and one key: a replica with another
		 * key would sign checkpoints no other replica can verify */
		char mine[17], theirs[17];

		sodium_bin2hex(mine, sizeof(mine), app->signer.pk, 8);
		sodium_bin2hex(theirs, sizeof(theirs), q.newest.public_key, 8);
		rc = gh_err_set(e, GH_E_CONFLICT,
				"this database's audit checkpoints are signed with another key "
				"(%s..., this replica's is %s...): every replica must use the same "
				"audit.signing_key_file (and auth.key_hash_file); copy them from a "
				"replica that serves this database", theirs, mine);
		goto fail;
	}
	if (q.ok && h->signed_seq) {
		gh_info("audit: chain checked from the newest checkpoint (row %lld) in %.1f ms: "
			"intact, %lld rows not yet signed", (long long)h->signed_seq,
			q.seconds * 1000, (long long)q.unsigned_rows);
	} else if (q.ok) {
		gh_info("audit: chain checked in %.1f ms (no checkpoint yet): intact, %lld rows not "
			"yet signed", q.seconds * 1000, (long long)q.unsigned_rows);
	} else {
		gh_error("AUDIT LOG NOT INTACT (found at start in %.1f ms, near row %lld): %s",
			 q.seconds * 1000, (long long)q.bad_seq, q.message);
		gh_error("audit: gatehouse runs on, but run `gatehouse audit verify` and "
			 "investigate; /healthz reports \"degraded\" until a full verify passes");
	}
	gh_store_audit_sign_with(app->store, &app->signer, h->witness ? checkpoint_hook : NULL, h);
	if (!q.ok)
		audit_finding(app, &q);
	return GH_OK;
fail:
	gh_store_close(app->store);
	app->store = NULL;
	gh_audit_serve_close(app);
	return rc;
}

void gh_audit_serve_close(struct gh_app *app)
{
	struct gh_audit_health *h = app->audit;

	if (!h)
		return;
	gh_witness_close(h->witness);
	pthread_mutex_destroy(&h->mu);
	free(h->witness_file);
	free(h);
	app->audit = NULL;
}

void gh_audit_health_note_verify(struct gh_audit_health *h, const struct gh_audit_verify *rep)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	h->chain = rep->chain_ok ? CHAIN_INTACT : rep->behind_witness ? CHAIN_BEHIND : CHAIN_BROKEN;
	h->bad_seq = rep->chain_ok ? 0 : rep->bad_seq;
	h->signed_seq = rep->signed_seq;
	h->unsigned_rows = rep->unsigned_rows;
	gh_strlcpy(h->message, rep->chain_ok ? "intact" : rep->message, sizeof(h->message));
	h->checked_by = "verify";
	h->checked_at = gh_now_ms();
	gh_metrics_audit_verified(rep->chain_ok, h->checked_at);
	pthread_mutex_unlock(&h->mu);
}

int gh_audit_health_json(struct gh_audit_health *h, cJSON *o)
{
	struct gh_witness_stats ws;
	cJSON *a, *w;
	char ts[GH_ISO8601_MAX];
	int good;
	const char *wstate;

	if (!h)
		return 1;
	gh_witness_stats(h->witness, &ws);
	if (!h->witness_file)
		wstate = "disabled";
	else if (h->read_only)
		wstate = "ahead";
	else if (ws.failing)
		wstate = "failing";
	else if (!strcmp(h->witness_start, "new"))
		wstate = "ok"; /* a first witness is nothing to worry about */
	else
		wstate = h->witness_start;
	a = cJSON_AddObjectToObject(o, "audit");
	if (!a)
		return 0;
	pthread_mutex_lock(&h->mu);
	cJSON_AddStringToObject(a, "chain", chain_name(h->chain));
	cJSON_AddStringToObject(a, "message", h->message);
	if (h->chain == CHAIN_INTACT)
		cJSON_AddNullToObject(a, "badSeq");
	else
		cJSON_AddNumberToObject(a, "badSeq", (double)h->bad_seq);
	cJSON_AddStringToObject(a, "checkedBy", h->checked_by);
	gh_iso8601(h->checked_at, ts, sizeof(ts));
	cJSON_AddStringToObject(a, "checkedAt", ts);
	cJSON_AddNumberToObject(a, "signedSeq", (double)h->signed_seq);
	cJSON_AddNumberToObject(a, "unsignedRows", (double)h->unsigned_rows);
	cJSON_AddBoolToObject(a, "readOnly", h->read_only);
	good = h->chain == CHAIN_INTACT && !h->read_only && !ws.failing &&
	       strcmp(wstate, "recreated") != 0;
	pthread_mutex_unlock(&h->mu);
	w = cJSON_AddObjectToObject(a, "witness");
	if (w) {
		/* no paths here: /healthz answers anyone */
		cJSON_AddStringToObject(w, "state", wstate);
		cJSON_AddNumberToObject(w, "written", (double)ws.written);
		cJSON_AddNumberToObject(w, "lastSeq", (double)ws.last_seq);
		cJSON_AddNumberToObject(w, "errors", (double)(ws.file_errors + ws.send_errors));
		cJSON_AddNumberToObject(w, "dropped", (double)ws.dropped);
		if (ws.file_errors + ws.send_errors)
			cJSON_AddStringToObject(w, "lastError", "see the server log");
	}
	return good;
}

/* ---------------------------------------------------------------- CLI */

struct gh_audit_cli {
	struct gh_audit_signer signer;
	struct gh_witness *witness;
};

static void cli_hook(void *ud, const struct gh_audit_checkpoint *c,
		     const unsigned char prev_sig[64])
{
	struct gh_audit_cli *x = ud;

	gh_witness_record(x->witness, c, prev_sig);
}

struct gh_audit_cli *gh_audit_cli_sign(struct gh_store *s, const struct gh_config *cfg,
				       const char *key_file, const char *witness_file)
{
	struct gh_audit_cli *x = calloc(1, sizeof(*x));
	struct gh_audit_verify_opts vo;
	struct gh_audit_quick q;
	struct gh_err e;

	if (!x)
		return NULL;
	if (gh_audit_signer_load(key_file, 0, &x->signer, &e) != GH_OK) {
		/* the server signs these rows when it next commits */
		gh_debug("audit: the CLI does not sign: %s", e.msg);
		free(x);
		return NULL;
	}
	gh_audit_verify_opts_config(cfg, &vo);
	vo.trusted_pk = x->signer.pk;
	vo.witness_file = witness_file;
	if (gh_audit_verify_newest(s, &vo, &q, &e) != GH_OK || !q.ok) {
		gh_warn("audit: not signing a checkpoint: %s (run gatehouse audit verify)",
			q.ok ? e.msg : q.message);
		goto fail;
	}
	if (witness_file && (q.witness == GH_WITNESS_MISSING || q.witness == GH_WITNESS_EMPTY) &&
	    q.has_chained) {
		/* not the CLI's to start again quietly: serve does, and says so */
		gh_warn("audit: not signing a checkpoint: the witness %s is %s, though this "
			"database's checkpoints were witnessed", witness_file,
			q.witness == GH_WITNESS_MISSING ? "missing" : "empty");
		goto fail;
	}
	if (witness_file) {
		struct gh_witness_opts wo = {
			.path = witness_file,
			.webhook_url = cfg->audit.witness.webhook_url,
			.webhook_timeout_ms = cfg->audit.witness.webhook_timeout_ms,
			.syslog = cfg->audit.witness.syslog,
			.database = cfg->database.path,
		};

		if (gh_witness_open(&wo, &x->witness, &e) != GH_OK) {
			gh_warn("audit: not signing a checkpoint: %s", e.msg);
			goto fail;
		}
		if ((q.witness == GH_WITNESS_MISSING || q.witness == GH_WITNESS_EMPTY) &&
		    q.has_checkpoint)
			gh_witness_record(x->witness, &q.newest, q.newest_prev_sig);
	}
	gh_store_audit_sign_with(s, &x->signer, x->witness ? cli_hook : NULL, x);
	return x;
fail:
	gh_audit_signer_wipe(&x->signer);
	free(x);
	return NULL;
}

void gh_audit_cli_close(struct gh_audit_cli *x)
{
	if (!x)
		return;
	gh_witness_close(x->witness);
	gh_audit_signer_wipe(&x->signer);
	free(x);
}
