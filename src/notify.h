/*
 * notify.h - approval notifications: webhooks (a signed JSON payload or a
 * Slack-compatible one) and e-mail over SMTP when an approval is
 * requested, decided or expires.
 *
 * gh_notify_approval never blocks and never touches the database: it
 * builds the event and queues one delivery per target that wants it in a
 * bounded in-memory queue (a full queue drops the delivery, logged and
 * recorded). One delivery thread records each delivery in the store
 * (notification_deliveries), sends it with a timeout, and retries a
 * failure with exponential backoff and jitter up to max_attempts. A
 * delivery still pending at shutdown stays pending in the store and is
 * resumed at the next start. Secrets (webhook secret, SMTP password) and
 * target URLs never reach logs, errors, the audit log or the store.
 *
 * The notifier lives for the process; its targets are those of the config
 * generation current when it acts (app.h), so a reload changes them
 * without a restart: an event queued after the reload goes to the new
 * targets, and a queued or retried delivery is sent at its next attempt
 * to the target of its name in the current config (new URL, secret,
 * kind and retry settings), or ends failed when there is none any more
 * ("target removed by reload") or it no longer takes that event. An
 * attempt already on the wire finishes against the target it started
 * with.
 *
 * The message builders (gh_notify_payload .. gh_notify_mail) are pure and
 * thread-safe; the notifier's functions are thread-safe.
 */
#ifndef GH_NOTIFY_H
#define GH_NOTIFY_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "app.h"
#include "config.h"
#include "err.h"
#include "store.h"

struct gh_notify;

/* Starts the delivery thread (idle while there is nothing to send, with
 * or without targets: a reload may add the first) and queues the
 * deliveries a previous run left pending. Stop it before the app's last
 * generation goes (gh_app_cfg_fini). */
enum gh_code gh_notify_start(struct gh_app *app, struct gh_notify **out, struct gh_err *e);

/* Stops the thread: a request in flight is aborted (its delivery stays
 * pending), queued deliveries not yet recorded are recorded pending, so
 * the next start resumes them. NULL ok. */
void gh_notify_stop(struct gh_notify *n);

/* Queues event (GH_NOTIFY_EV_*) of approval a (borrowed) for every
 * target of the current config that wants it. Never blocks on I/O; NULL
 * n is a no-op. Call it after the approval's transaction committed. */
void gh_notify_approval(struct gh_notify *n, int event, const struct gh_approval *a);

/* Counters since start. */
struct gh_notify_stats {
	uint64_t queued;      /* in memory now, in flight included */
	uint64_t delivered;
	uint64_t failed;      /* gave up after max_attempts, or permanently refused */
	uint64_t dropped;     /* the queue was full */
	uint64_t retries;     /* attempts after the first */
};
void gh_notify_stats(struct gh_notify *n, struct gh_notify_stats *out);

/* ------------------------------------------------- message builders */

/* The event's name: "approval-requested", "approval-decided" or
 * "approval-expired"; NULL for anything else. */
const char *gh_notify_event_name(int event);

/* The redacted arguments as compact canonical JSON, cut at max bytes (on
 * a UTF-8 boundary, "…" appended when cut). Caller frees. */
char *gh_notify_args_summary(const cJSON *args, const struct gh_strlist *redact, size_t max);

#define GH_NOTIFY_SUMMARY_MAX 300

/* The generic JSON payload of event for approval a: {id, type, event,
 * approval_id, status, tool, source, agent, key_id, key_name, owner, rule,
 * approver, args_summary, args_sha256, run_id, thread_id, created_at,
 * expires_at, decided_at, decided_by, reason, link}. id is the event's
 * id; key_name and public_url may be NULL (link null). Caller frees. */
cJSON *gh_notify_payload(const char *id, int event, const struct gh_approval *a,
			 const char *key_name, const struct gh_strlist *redact,
			 const char *public_url);

/* A Slack-compatible body ({text, blocks}) for payload. Caller frees. */
cJSON *gh_notify_slack(const cJSON *payload);

/* A short subject line and a plain-text body (lines end "\r\n") for
 * payload, for e-mail. Caller frees both. */
char *gh_notify_subject(const cJSON *payload);
char *gh_notify_text(const cJSON *payload);

/* The signature header value: "v1=" + hex HMAC-SHA256 keyed by secret
 * over "<ts>.<body>" (ts in decimal Unix seconds). */
#define GH_NOTIFY_SIG_MAX (3 + 64 + 1)
void gh_notify_sign(const char *secret, int64_t ts, const char *body, size_t len,
		    char out[GH_NOTIFY_SIG_MAX]);

/* Copies src into dst (cap bytes) for use in a header: CR, LF and other
 * control characters become spaces, so nothing can start a new header. */
void gh_notify_header_value(char *dst, size_t cap, const char *src);

/* An RFC 5322 message (CRLF line ends) with Date (date_ms), From, To,
 * Subject (RFC 2047 encoded when not ASCII), Message-ID <id@domain of
 * from>, MIME headers and body. Every header value is passed through
 * gh_notify_header_value; body lines get CRLF ends. Caller frees. */
struct gh_notify_mail {
	const char *from;
	const char *const *to;
	size_t nto;
	const char *subject;
	const char *body;
	const char *message_id;      /* left part of Message-ID */
	int64_t date_ms;
	const char *event, *approval_id; /* X-Gatehouse-Event / -Approval; may be NULL */
};
char *gh_notify_mail_build(const struct gh_notify_mail *m);

#endif
