/*
 * test_notify.c - what an approval notification says: the webhook
 * signature (against values computed independently with Python's hmac),
 * the generic payload (redacted, bounded argument summary; link to the
 * admin UI), the Slack form, the e-mail message (headers present, no
 * header injection through any value, CRLF line ends), and the store's
 * record of deliveries (pending ones beyond the queue marked failed;
 * retention prunes finished ones only).
 */
#include "notify.h"

#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "t.h"
#include "t_store.h"

static void test_sign_matches_reference(void)
{
	char sig[GH_NOTIFY_SIG_MAX];
	char longkey[101];

	/* python3: hmac.new(b"whsec-unit-0123456789", b'1700000000.{"a":1}',
	 * hashlib.sha256).hexdigest() */
	gh_notify_sign("whsec-unit-0123456789", 1700000000, "{\"a\":1}", 7, sig);
	T_EQ_STR(sig, "v1=d84a80e81c4598f77148d402afce995d57587e40825561201d21d0094e238d2c");
	/* a key longer than SHA-256's block is hashed first, as HMAC says */
	memset(longkey, 'k', 100);
	longkey[100] = '\0';
	gh_notify_sign(longkey, 42, "body", 4, sig);
	T_EQ_STR(sig, "v1=223f2501de0aa237f5d24c2198117830bb359779c7f7dfb4fda6d5f3b08e8d79");
	/* the timestamp is signed too */
	gh_notify_sign(longkey, 43, "body", 4, sig);
	T_ASSERT(strcmp(sig, "v1=223f2501de0aa237f5d24c2198117830bb359779c7f7dfb4fda6d5f3b08e8d79"));
}

static void approval(struct gh_approval *a, const char *args)
{
	memset(a, 0, sizeof(*a));
	gh_strlcpy(a->id, "apr_1", sizeof(a->id));
	gh_strlcpy(a->key_id, "key_1", sizeof(a->key_id));
	gh_strlcpy(a->owner, "team-a", sizeof(a->owner));
	gh_strlcpy(a->agent_id, "assistant", sizeof(a->agent_id));
	gh_strlcpy(a->run_id, "run_1", sizeof(a->run_id));
	gh_strlcpy(a->tool_name, "send_email", sizeof(a->tool_name));
	gh_strlcpy(a->source, "server", sizeof(a->source));
	gh_strlcpy(a->approver, "admin", sizeof(a->approver));
	gh_strlcpy(a->status, "pending", sizeof(a->status));
	gh_strlcpy(a->args_sha256, "ab", sizeof(a->args_sha256));
	a->rule = "policy default: approval.require send_*";
	a->args = cJSON_Parse(args);
	a->created_at = 1700000000000;
	a->expires_at = 1700003600000;
}

static void test_summary_redacted_and_bounded(void)
{
	char *redact_v[] = {"password"};
	struct gh_strlist redact = {redact_v, 1};
	cJSON *args = cJSON_Parse("{\"to\":\"bob@example.com\",\"password\":\"hunter2\"}");
	char *s = gh_notify_args_summary(args, &redact, 300), big[2000];
	size_t i, n;

	T_ASSERT(s);
	T_CONTAINS(s, "bob@example.com");
	T_CONTAINS(s, "password");
	T_ASSERT(!strstr(s, "hunter2"));
	free(s);
	cJSON_Delete(args);
	/* a long value is cut on a character boundary, with an ellipsis */
	n = 0;
	n += (size_t)snprintf(big, sizeof(big), "{\"t\":\"");
	for (i = 0; i < 400; i++)
		n += (size_t)snprintf(big + n, sizeof(big) - n, "\xc3\xa9"); /* é */
	snprintf(big + n, sizeof(big) - n, "\"}");
	args = cJSON_Parse(big);
	s = gh_notify_args_summary(args, &redact, 300);
	T_ASSERT(s);
	T_ASSERT(strlen(s) <= 300);
	T_ASSERT(strlen(s) >= 290);
	T_EQ_STR(s + strlen(s) - 3, "\xe2\x80\xa6");
	/* the byte before the ellipsis ends a whole "é" */
	T_EQ_INT((unsigned char)s[strlen(s) - 4], 0xa9);
	free(s);
	cJSON_Delete(args);
}

static void test_payload_fields_and_link(void)
{
	char *redact_v[] = {"password"};
	struct gh_strlist redact = {redact_v, 1};
	struct gh_approval a;
	cJSON *p;

	approval(&a, "{\"to\":\"bob@example.com\",\"password\":\"hunter2\"}");
	p = gh_notify_payload("ntf_1", GH_NOTIFY_EV_REQUESTED, &a, "alice", &redact,
			      "https://gate.example.com//");
	T_ASSERT(p);
	T_EQ_STR(gh_json_str(p, "id"), "ntf_1");
	T_EQ_STR(gh_json_str(p, "event"), "approval-requested");
	T_EQ_STR(gh_json_str(p, "approval_id"), "apr_1");
	T_EQ_STR(gh_json_str(p, "tool"), "send_email");
	T_EQ_STR(gh_json_str(p, "agent"), "assistant");
	T_EQ_STR(gh_json_str(p, "key_name"), "alice");
	T_EQ_STR(gh_json_str(p, "rule"), "policy default: approval.require send_*");
	T_EQ_STR(gh_json_str(p, "link"), "https://gate.example.com/admin/#/approvals/apr_1");
	T_EQ_STR(gh_json_str(p, "expires_at"), "2023-11-14T23:13:20.000Z");
	T_ASSERT(cJSON_IsNull(cJSON_GetObjectItem(p, "decided_by")));
	T_ASSERT(!strstr(gh_json_str(p, "args_summary"), "hunter2"));
	cJSON_Delete(p);
	/* no public_url: no link; decided: who and why */
	gh_strlcpy(a.status, "denied", sizeof(a.status));
	gh_strlcpy(a.decided_by, "admin:carol", sizeof(a.decided_by));
	a.decided_at = 1700000100000;
	a.reason = "not today";
	p = gh_notify_payload("ntf_2", GH_NOTIFY_EV_DECIDED, &a, NULL, &redact, NULL);
	T_ASSERT(p);
	T_ASSERT(cJSON_IsNull(cJSON_GetObjectItem(p, "link")));
	T_ASSERT(cJSON_IsNull(cJSON_GetObjectItem(p, "key_name")));
	T_EQ_STR(gh_json_str(p, "decided_by"), "admin:carol");
	T_EQ_STR(gh_json_str(p, "reason"), "not today");
	T_EQ_STR(gh_json_str(p, "status"), "denied");
	cJSON_Delete(p);
	T_ASSERT(!gh_notify_payload("ntf_3", 3, &a, NULL, &redact, NULL));
	a.reason = NULL;
	a.rule = NULL;
	cJSON_Delete(a.args);
}

static void test_slack_form(void)
{
	char *redact_v[] = {"password"};
	struct gh_strlist redact = {redact_v, 1};
	struct gh_approval a;
	cJSON *p, *s, *blocks, *b;
	char *dump;

	approval(&a, "{\"q\":\"<b>&\"}");
	p = gh_notify_payload("ntf_1", GH_NOTIFY_EV_REQUESTED, &a, "alice", &redact,
			      "https://gate.example.com");
	s = gh_notify_slack(p);
	T_ASSERT(s);
	T_CONTAINS(gh_json_str(s, "text"), "Approval requested: send_email (agent assistant, "
					   "key alice)");
	blocks = cJSON_GetObjectItem(s, "blocks");
	T_ASSERT(cJSON_IsArray(blocks));
	b = cJSON_GetArrayItem(blocks, 0);
	T_EQ_STR(gh_json_str(b, "type"), "section");
	/* mrkdwn control characters in values are escaped */
	T_CONTAINS(gh_json_str(cJSON_GetObjectItem(b, "text"), "text"), "&lt;b&gt;&amp;");
	dump = gh_json_dump(s);
	T_CONTAINS(dump, "\"url\":\"https://gate.example.com/admin/#/approvals/apr_1\"");
	free(dump);
	cJSON_Delete(s);
	cJSON_Delete(p);
	a.rule = NULL;
	cJSON_Delete(a.args);
}

static void test_header_value_strips_line_breaks(void)
{
	char v[64];

	gh_notify_header_value(v, sizeof(v), "hi\r\nBcc: evil@example.com\x7f\t");
	T_EQ_STR(v, "hi  Bcc: evil@example.com  ");
	gh_notify_header_value(v, 5, "abcdefgh");
	T_EQ_STR(v, "abcd");
}

/* The message's header block (up to the first empty line). */
static char *head_of(const char *msg)
{
	const char *end = strstr(msg, "\r\n\r\n");
	size_t n = end ? (size_t)(end - msg) + 2 : strlen(msg);
	char *h = malloc(n + 1);

	memcpy(h, msg, n);
	h[n] = '\0';
	return h;
}

static void test_mail_headers_cannot_be_injected(void)
{
	const char *to[] = {"rev1@example.com", "rev2@example.com\r\nBcc: x@evil.example"};
	struct gh_notify_mail m = {
		.from = "gatehouse@example.com",
		.to = to,
		.nto = 2,
		.subject = "[gatehouse] send_email\r\nBcc: evil@example.com\nX-Evil: 1",
		.body = "line one\nline two\r\n.\r\nafter a dot\rbare cr",
		.message_id = "ntf_1.7",
		.date_ms = 1700000000000,
		.event = "approval-requested\r\nX-Evil: 2",
		.approval_id = "apr_1",
	};
	char *msg = gh_notify_mail_build(&m), *head, *p;

	T_ASSERT(msg);
	head = head_of(msg);
	T_ASSERT(!strncmp(head, "Date: Tue, 14 Nov 2023 22:13:20 +0000\r\n", 39));
	T_CONTAINS(head, "\r\nFrom: <gatehouse@example.com>\r\n");
	T_CONTAINS(head, "\r\nTo: <rev1@example.com>,\r\n <rev2@example.com  Bcc: x@evil.example>\r\n");
	T_CONTAINS(head, "\r\nSubject: [gatehouse] send_email  Bcc: evil@example.com X-Evil: 1\r\n");
	T_CONTAINS(head, "\r\nMessage-ID: <ntf_1.7@example.com>\r\n");
	T_CONTAINS(head, "\r\nX-Gatehouse-Event: approval-requested  X-Evil: 2\r\n");
	T_CONTAINS(head, "\r\nMIME-Version: 1.0\r\n");
	/* no header line starts with an injected name */
	T_ASSERT(!strstr(head, "\r\nBcc:"));
	T_ASSERT(!strstr(head, "\r\nX-Evil:"));
	/* every line break in the header block is CRLF */
	for (p = head; *p; p++) {
		if (*p == '\n')
			T_ASSERT(p > head && p[-1] == '\r');
		if (*p == '\r')
			T_ASSERT(p[1] == '\n');
	}
	/* the body: CRLF ends, a bare CR dropped */
	T_CONTAINS(msg, "\r\n\r\nline one\r\nline two\r\n.\r\nafter a dotbare cr\r\n");
	free(head);
	free(msg);
}

static void test_mail_subject_encoded_when_not_ascii(void)
{
	const char *to[] = {"r@example.com"};
	struct gh_notify_mail m = {
		.from = "g@example.com", .to = to, .nto = 1,
		.subject = "Approval: caf\xc3\xa9", .body = "b", .message_id = "x", .date_ms = 0,
	};
	char *msg = gh_notify_mail_build(&m);

	T_ASSERT(msg);
	/* base64 of "Approval: café" */
	T_CONTAINS(msg, "\r\nSubject: =?UTF-8?B?QXBwcm92YWw6IGNhZsOp?=\r\n");
	free(msg);
}

static void test_text_and_subject(void)
{
	char *redact_v[] = {"password"};
	struct gh_strlist redact = {redact_v, 1};
	struct gh_approval a;
	cJSON *p;
	char *text, *subj;

	approval(&a, "{\"to\":\"bob@example.com\"}");
	gh_strlcpy(a.status, "approved", sizeof(a.status));
	gh_strlcpy(a.decided_by, "admin:carol", sizeof(a.decided_by));
	a.reason = "ok\r\nBcc: nobody";
	p = gh_notify_payload("ntf_1", GH_NOTIFY_EV_DECIDED, &a, "alice", &redact,
			      "https://gate.example.com");
	subj = gh_notify_subject(p);
	text = gh_notify_text(p);
	T_EQ_STR(subj, "[gatehouse] Approved by admin:carol: send_email (agent assistant)");
	T_ASSERT(text);
	T_CONTAINS(text, "Approved by admin:carol.\r\n\r\n");
	T_CONTAINS(text, "Key:        alice (key_1)\r\n");
	T_CONTAINS(text, "Reason:     ok  Bcc: nobody\r\n");
	T_CONTAINS(text, "Open:       https://gate.example.com/admin/#/approvals/apr_1\r\n");
	free(subj);
	free(text);
	cJSON_Delete(p);
	a.reason = NULL;
	a.rule = NULL;
	cJSON_Delete(a.args);
}

static int count_cb(void *ud, const struct gh_notify_row *r)
{
	(void)r;
	(*(int *)ud)++;
	return 0;
}

static int first_cb(void *ud, const struct gh_notify_row *r)
{
	struct gh_notify_row *out = ud;

	*out = *r;
	out->payload = r->payload ? strdup(r->payload) : NULL;
	out->last_error = r->last_error ? strdup(r->last_error) : NULL;
	return 1;
}

/* 2026-09-21 in Unix ms, as the notifier stores times */
#define T_NOTIFY_NOW 1790000000000LL

static void test_store_pending_and_overflow(void)
{
	struct t_store t;
	struct gh_notify_row r, got;
	struct gh_err e;
	int64_t id[3];
	int i, n = 0;

	T_EQ_INT(t_store_open(&t), 0);
	for (i = 0; i < 3; i++) {
		memset(&r, 0, sizeof(r));
		snprintf(r.event_id, sizeof(r.event_id), "ntf_%d", i);
		gh_strlcpy(r.target, "hook", sizeof(r.target));
		gh_strlcpy(r.kind, "webhook", sizeof(r.kind));
		gh_strlcpy(r.event, "approval-requested", sizeof(r.event));
		gh_strlcpy(r.approval_id, "apr_1", sizeof(r.approval_id));
		r.payload = "{}";
		gh_strlcpy(r.state, "pending", sizeof(r.state));
		r.created_at = r.updated_at = 1000 + i;
		/* a real time in ms: beyond a 32-bit integer */
		r.next_attempt_at = T_NOTIFY_NOW + i;
		T_EQ_INT(gh_store_notify_insert(t.s, &r, &id[i], &e), GH_OK);
	}
	/* the first becomes delivered */
	r.id = id[0];
	gh_strlcpy(r.state, "delivered", sizeof(r.state));
	r.attempts = 2;
	r.last_code = 200;
	r.next_attempt_at = 0;
	r.delivered_at = T_NOTIFY_NOW + 2000;
	T_EQ_INT(gh_store_notify_update(t.s, &r, &e), GH_OK);
	/* room for one of the two pending: the other is failed */
	T_EQ_INT(gh_store_notify_pending(t.s, 1, "no room", count_cb, &n, &e), GH_OK);
	T_EQ_INT(n, 1);
	memset(&got, 0, sizeof(got));
	T_EQ_INT(gh_store_notify_list(t.s, "apr_1", 10, first_cb, &got, &e), GH_OK);
	T_EQ_INT(got.id, id[2]);
	T_EQ_STR(got.state, "failed");
	T_EQ_STR(got.last_error, "no room");
	gh_notify_row_clear(&got);
	n = 0;
	T_EQ_INT(gh_store_notify_list(t.s, "apr_2", 10, count_cb, &n, &e), GH_OK);
	T_EQ_INT(n, 0);
	n = 0;
	T_EQ_INT(gh_store_notify_list(t.s, NULL, 10, count_cb, &n, &e), GH_OK);
	T_EQ_INT(n, 3);
	t_store_close(&t);
}

static void add_row(struct t_store *t, const char *event_id, const char *state,
		    int64_t updated_at)
{
	struct gh_notify_row r;
	struct gh_err e;

	memset(&r, 0, sizeof(r));
	gh_strlcpy(r.event_id, event_id, sizeof(r.event_id));
	gh_strlcpy(r.target, "hook", sizeof(r.target));
	gh_strlcpy(r.kind, "webhook", sizeof(r.kind));
	gh_strlcpy(r.event, "approval-requested", sizeof(r.event));
	gh_strlcpy(r.approval_id, "apr_1", sizeof(r.approval_id));
	r.payload = "{}";
	gh_strlcpy(r.state, state, sizeof(r.state));
	r.created_at = 1000;
	r.updated_at = updated_at;
	T_EQ_INT(gh_store_notify_insert(t->s, &r, NULL, &e), GH_OK);
}

static int ids_cb(void *ud, const struct gh_notify_row *r)
{
	char *out = ud;
	size_t len = strlen(out);

	snprintf(out + len, 256 - len, "%s%s", len ? "," : "", r->event_id);
	return 0;
}

static void test_store_prune_keeps_pending_and_recent(void)
{
	struct t_store t;
	struct gh_err e;
	char left[256] = "";
	int64_t deleted = -1;

	T_EQ_INT(t_store_open(&t), 0);
	add_row(&t, "old_delivered", "delivered", 2000);
	add_row(&t, "old_failed", "failed", 2000);
	/* pending for long (retried, or waiting for a restart): never pruned */
	add_row(&t, "old_pending", "pending", 1000);
	add_row(&t, "new_delivered", "delivered", 9000);
	add_row(&t, "new_failed", "failed", 5000);
	T_EQ_INT(gh_store_notify_prune(t.s, 5000, &deleted, &e), GH_OK);
	T_EQ_INT(deleted, 2);
	T_EQ_INT(gh_store_notify_list(t.s, NULL, 10, ids_cb, left, &e), GH_OK);
	T_EQ_STR(left, "new_failed,new_delivered,old_pending");
	/* nothing more to prune: nothing goes */
	T_EQ_INT(gh_store_notify_prune(t.s, 5000, &deleted, &e), GH_OK);
	T_EQ_INT(deleted, 0);
	t_store_close(&t);
}

T_MAIN(T(test_sign_matches_reference), T(test_summary_redacted_and_bounded),
       T(test_payload_fields_and_link), T(test_slack_form), T(test_header_value_strips_line_breaks),
       T(test_mail_headers_cannot_be_injected), T(test_mail_subject_encoded_when_not_ascii),
       T(test_text_and_subject), T(test_store_pending_and_overflow),
       T(test_store_prune_keeps_pending_and_recent))
