/*
 * notify_msg.c - what an approval notification says: the generic JSON
 * payload, its Slack form, its e-mail form and the webhook signature; see
 * notify.h. Pure functions, no I/O.
 */
#include "notify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "audit.h"
#include "buf.h"
#include "json.h"
#include "util.h"

#define TEXT_MAX (64 * 1024)
#define MAIL_MAX (256 * 1024)

const char *gh_notify_event_name(int event)
{
	switch (event) {
	case GH_NOTIFY_EV_REQUESTED:
		return "approval-requested";
	case GH_NOTIFY_EV_DECIDED:
		return "approval-decided";
	case GH_NOTIFY_EV_EXPIRED:
		return "approval-expired";
	default:
		return NULL;
	}
}

/* The length of the longest prefix of s[0..n) that is at most max bytes
 * and does not end inside a UTF-8 sequence. */
static size_t utf8_cut(const char *s, size_t n, size_t max)
{
	size_t k;

	if (n <= max)
		return n;
	k = max;
	/* back off continuation bytes to the start of their character */
	while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
		k--;
	return k;
}

char *gh_notify_args_summary(const cJSON *args, const struct gh_strlist *redact, size_t max)
{
	char *full, *out;
	size_t n, k;

	/* the audit log's redaction and canonical form; its own size cap is
	 * far above ours, so what comes back is never its truncation marker */
	full = gh_audit_args_json(args, redact, 1u << 20);
	if (!full)
		return NULL;
	n = strlen(full);
	if (n <= max)
		return full;
	k = utf8_cut(full, n, max >= 3 ? max - 3 : 0);
	out = malloc(k + 4);
	if (out) {
		memcpy(out, full, k);
		memcpy(out + k, "\xe2\x80\xa6", 4); /* "…" */
	}
	free(full);
	return out;
}

/* s cut to max bytes (UTF-8 safe, "…" when cut), as a new string. */
static char *bounded(const char *s, size_t max)
{
	size_t n = strlen(s), k;
	char *out;

	if (n <= max)
		return gh_strdup(s);
	k = utf8_cut(s, n, max - 3);
	out = malloc(k + 4);
	if (out) {
		memcpy(out, s, k);
		memcpy(out + k, "\xe2\x80\xa6", 4);
	}
	return out;
}

cJSON *gh_notify_payload(const char *id, int event, const struct gh_approval *a,
			 const char *key_name, const struct gh_strlist *redact,
			 const char *public_url)
{
	const char *name = gh_notify_event_name(event);
	cJSON *o;
	char *summary, *reason = NULL, *link = NULL;
	int ok;

	if (!name)
		return NULL;
	o = cJSON_CreateObject();
	summary = gh_notify_args_summary(a->args, redact, GH_NOTIFY_SUMMARY_MAX);
	if (a->reason)
		reason = bounded(a->reason, GH_NOTIFY_SUMMARY_MAX);
	if (public_url && *public_url) {
		size_t n = strlen(public_url), cap;

		while (n > 0 && public_url[n - 1] == '/')
			n--;
		cap = n + sizeof("/admin/#/approvals/") + strlen(a->id);
		link = malloc(cap);
		if (link)
			snprintf(link, cap, "%.*s/admin/#/approvals/%s", (int)n, public_url, a->id);
	}
	ok = o && summary && (!a->reason || reason) && (!public_url || !*public_url || link);
	if (ok) {
		cJSON_AddStringToObject(o, "id", id);
		cJSON_AddStringToObject(o, "type", "gatehouse.approval");
		cJSON_AddStringToObject(o, "event", name);
		cJSON_AddStringToObject(o, "approval_id", a->id);
		cJSON_AddStringToObject(o, "status", a->status);
		cJSON_AddStringToObject(o, "tool", a->tool_name);
		cJSON_AddStringToObject(o, "source", a->source);
		cJSON_AddStringToObject(o, "agent", a->agent_id);
		cJSON_AddStringToObject(o, "key_id", a->key_id);
		gh_json_add_str(o, "key_name", key_name);
		cJSON_AddStringToObject(o, "owner", a->owner);
		gh_json_add_str(o, "rule", a->rule);
		cJSON_AddStringToObject(o, "approver", a->approver);
		cJSON_AddStringToObject(o, "args_summary", summary);
		cJSON_AddStringToObject(o, "args_sha256", a->args_sha256);
		cJSON_AddStringToObject(o, "run_id", a->run_id);
		gh_json_add_str(o, "thread_id", a->thread_id[0] ? a->thread_id : NULL);
		gh_json_add_time(o, "created_at", a->created_at);
		gh_json_add_time(o, "expires_at", a->expires_at);
		gh_json_add_time(o, "decided_at", a->decided_at);
		gh_json_add_str(o, "decided_by", a->decided_by[0] ? a->decided_by : NULL);
		gh_json_add_str(o, "reason", reason);
		gh_json_add_str(o, "link", link);
	}
	free(summary);
	free(reason);
	free(link);
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static const char *str(const cJSON *p, const char *key)
{
	const char *s = gh_json_str(p, key);

	return s ? s : "";
}

/* What happened, in a few words: "Approval requested", "Approved by
 * admin:alice", "Denied by key:key_1", "Expired without a decision". */
static int headline(struct gh_buf *b, const cJSON *p)
{
	const char *ev = str(p, "event"), *st = str(p, "status"), *by = gh_json_str(p, "decided_by");

	if (!strcmp(ev, "approval-requested"))
		return gh_buf_puts(b, "Approval requested");
	if (!strcmp(ev, "approval-expired") || !strcmp(st, "expired"))
		return gh_buf_puts(b, "Approval expired without a decision");
	return gh_buf_printf(b, "%s by %s", !strcmp(st, "approved") ? "Approved" : "Denied",
			     by ? by : "someone");
}

/* Slack mrkdwn: &, < and > are the only characters it wants escaped. */
static int mrkdwn(struct gh_buf *b, const char *s)
{
	int rc = GH_BUF_OK;

	for (; *s && rc == GH_BUF_OK; s++) {
		if (*s == '&')
			rc = gh_buf_puts(b, "&amp;");
		else if (*s == '<')
			rc = gh_buf_puts(b, "&lt;");
		else if (*s == '>')
			rc = gh_buf_puts(b, "&gt;");
		else if (*s == '`')
			rc = gh_buf_putc(b, '\'');
		else
			rc = gh_buf_putc(b, *s);
	}
	return rc;
}

static cJSON *text_obj(const char *type, const char *text)
{
	cJSON *o = cJSON_CreateObject();

	if (o) {
		cJSON_AddStringToObject(o, "type", type);
		cJSON_AddStringToObject(o, "text", text);
	}
	return o;
}

cJSON *gh_notify_slack(const cJSON *p)
{
	struct gh_buf t, d;
	cJSON *o = NULL, *blocks, *sec, *fields, *ctx, *els;
	const char *link = gh_json_str(p, "link");
	int rc;

	gh_buf_init(&t, TEXT_MAX);
	gh_buf_init(&d, TEXT_MAX);
	/* text: the notification's plain fallback */
	rc = headline(&t, p);
	if (rc == GH_BUF_OK)
		rc = gh_buf_printf(&t, ": %s (agent %s, key %s)", str(p, "tool"), str(p, "agent"),
				   gh_json_str(p, "key_name") ? str(p, "key_name")
							      : str(p, "key_id"));
	/* the section: headline, tool and why */
	if (rc == GH_BUF_OK)
		rc = gh_buf_puts(&d, "*");
	if (rc == GH_BUF_OK)
		rc = headline(&d, p) == GH_BUF_OK ? gh_buf_puts(&d, "*: `") : GH_BUF_TOOBIG;
	if (rc == GH_BUF_OK)
		rc = mrkdwn(&d, str(p, "tool"));
	if (rc == GH_BUF_OK)
		rc = gh_buf_puts(&d, "`\n");
	if (rc == GH_BUF_OK && gh_json_str(p, "rule")) {
		rc = gh_buf_puts(&d, "Rule: ");
		if (rc == GH_BUF_OK)
			rc = mrkdwn(&d, str(p, "rule"));
		if (rc == GH_BUF_OK)
			rc = gh_buf_puts(&d, "\n");
	}
	if (rc == GH_BUF_OK)
		rc = gh_buf_puts(&d, "Arguments: `");
	if (rc == GH_BUF_OK)
		rc = mrkdwn(&d, str(p, "args_summary"));
	if (rc == GH_BUF_OK)
		rc = gh_buf_puts(&d, "`");
	if (rc != GH_BUF_OK || !t.data || !d.data)
		goto out;
	o = cJSON_CreateObject();
	if (!o)
		goto out;
	cJSON_AddStringToObject(o, "text", t.data);
	blocks = cJSON_AddArrayToObject(o, "blocks");
	sec = cJSON_CreateObject();
	if (!blocks || !sec) {
		cJSON_Delete(sec);
		goto fail;
	}
	cJSON_AddStringToObject(sec, "type", "section");
	cJSON_AddItemToObject(sec, "text", text_obj("mrkdwn", d.data));
	fields = cJSON_AddArrayToObject(sec, "fields");
	cJSON_AddItemToArray(blocks, sec);
	{
		static const struct {
			const char *label, *key;
		} f[] = {{"Agent", "agent"},     {"Key", "key_name"},     {"Owner", "owner"},
			 {"Status", "status"},   {"Expires", "expires_at"}, {"Decided by", "decided_by"}};
		char line[512];

		for (size_t i = 0; fields && i < GH_ARRAY_LEN(f); i++) {
			const char *v = gh_json_str(p, f[i].key);
			struct gh_buf x;

			if (!v)
				continue;
			gh_buf_init(&x, sizeof(line));
			if (gh_buf_printf(&x, "*%s*\n", f[i].label) == GH_BUF_OK &&
			    mrkdwn(&x, v) == GH_BUF_OK && x.data) {
				gh_strlcpy(line, x.data, sizeof(line));
				cJSON_AddItemToArray(fields, text_obj("mrkdwn", line));
			}
			gh_buf_free(&x);
		}
	}
	if (link) {
		cJSON *act = cJSON_CreateObject(), *btn = cJSON_CreateObject();

		if (act && btn) {
			cJSON_AddStringToObject(act, "type", "actions");
			els = cJSON_AddArrayToObject(act, "elements");
			cJSON_AddStringToObject(btn, "type", "button");
			cJSON_AddItemToObject(btn, "text", text_obj("plain_text", "Open in gatehouse"));
			cJSON_AddStringToObject(btn, "url", link);
			cJSON_AddItemToArray(els, btn);
			cJSON_AddItemToArray(blocks, act);
		} else {
			cJSON_Delete(act);
			cJSON_Delete(btn);
		}
	}
	ctx = cJSON_CreateObject();
	if (ctx) {
		char line[160];

		snprintf(line, sizeof(line), "gatehouse approval %s", str(p, "approval_id"));
		cJSON_AddStringToObject(ctx, "type", "context");
		els = cJSON_AddArrayToObject(ctx, "elements");
		cJSON_AddItemToArray(els, text_obj("plain_text", line));
		cJSON_AddItemToArray(blocks, ctx);
	}
	goto out;
fail:
	cJSON_Delete(o);
	o = NULL;
out:
	gh_buf_free(&t);
	gh_buf_free(&d);
	return o;
}

char *gh_notify_subject(const cJSON *p)
{
	struct gh_buf b;
	char *s;

	gh_buf_init(&b, 1024);
	if (gh_buf_puts(&b, "[gatehouse] ") != GH_BUF_OK || headline(&b, p) != GH_BUF_OK ||
	    gh_buf_printf(&b, ": %s (agent %s)", str(p, "tool"), str(p, "agent")) != GH_BUF_OK) {
		gh_buf_free(&b);
		return NULL;
	}
	s = gh_buf_detach(&b);
	if (s)
		gh_notify_header_value(s, strlen(s) + 1, s);
	return s;
}

/* One "Label: value" body line; the value's control characters become
 * spaces, so it stays one line. */
static int text_line(struct gh_buf *b, const char *label, const char *v)
{
	char line[1024];

	if (!v)
		return GH_BUF_OK;
	gh_notify_header_value(line, sizeof(line), v);
	return gh_buf_printf(b, "%-11s %s\r\n", label, line);
}

char *gh_notify_text(const cJSON *p)
{
	struct gh_buf b;
	int rc;
	char key[256];
	const char *kn = gh_json_str(p, "key_name");

	gh_buf_init(&b, TEXT_MAX);
	if (kn)
		snprintf(key, sizeof(key), "%s (%s)", kn, str(p, "key_id"));
	else
		gh_strlcpy(key, str(p, "key_id"), sizeof(key));
	rc = headline(&b, p);
	if (rc == GH_BUF_OK)
		rc = gh_buf_puts(&b, ".\r\n\r\n");
	if (rc == GH_BUF_OK)
		rc = text_line(&b, "Tool:", str(p, "tool"));
	if (rc == GH_BUF_OK)
		rc = text_line(&b, "Agent:", str(p, "agent"));
	if (rc == GH_BUF_OK)
		rc = text_line(&b, "Key:", key);
	if (rc == GH_BUF_OK)
		rc = text_line(&b, "Owner:", str(p, "owner"));
	if (rc == GH_BUF_OK)
		rc = text_line(&b, "Rule:", gh_json_str(p, "rule"));
	if (rc == GH_BUF_OK)
		rc = text_line(&b, "Arguments:", str(p, "args_summary"));
	if (rc == GH_BUF_OK)
		rc = text_line(&b, "Status:", str(p, "status"));
	if (rc == GH_BUF_OK)
		rc = text_line(&b, "Expires:", gh_json_str(p, "expires_at"));
	if (rc == GH_BUF_OK)
		rc = text_line(&b, "Decided by:", gh_json_str(p, "decided_by"));
	if (rc == GH_BUF_OK)
		rc = text_line(&b, "Reason:", gh_json_str(p, "reason"));
	if (rc == GH_BUF_OK && gh_json_str(p, "link"))
		rc = text_line(&b, "Open:", gh_json_str(p, "link"));
	if (rc == GH_BUF_OK)
		rc = gh_buf_printf(&b, "\r\nApproval %s, run %s.\r\n", str(p, "approval_id"),
				   str(p, "run_id"));
	if (rc != GH_BUF_OK) {
		gh_buf_free(&b);
		return NULL;
	}
	return gh_buf_detach(&b);
}

void gh_notify_sign(const char *secret, int64_t ts, const char *body, size_t len,
		    char out[GH_NOTIFY_SIG_MAX])
{
	crypto_auth_hmacsha256_state st;
	unsigned char mac[crypto_auth_hmacsha256_BYTES];
	char pre[32];
	int n = snprintf(pre, sizeof(pre), "%lld.", (long long)ts);

	crypto_auth_hmacsha256_init(&st, (const unsigned char *)secret, strlen(secret));
	crypto_auth_hmacsha256_update(&st, (const unsigned char *)pre, (unsigned long long)n);
	crypto_auth_hmacsha256_update(&st, (const unsigned char *)body, len);
	crypto_auth_hmacsha256_final(&st, mac);
	sodium_memzero(&st, sizeof(st));
	memcpy(out, "v1=", 3);
	gh_hex(mac, sizeof(mac), out + 3);
}

void gh_notify_header_value(char *dst, size_t cap, const char *src)
{
	size_t i, n;

	if (!cap)
		return;
	n = strlen(src);
	if (n >= cap)
		n = utf8_cut(src, n, cap - 1);
	/* memmove: dst may be src */
	memmove(dst, src, n);
	dst[n] = '\0';
	for (i = 0; i < n; i++)
		if ((unsigned char)dst[i] < 0x20 || dst[i] == 0x7f)
			dst[i] = ' ';
}

static int ascii(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s >= 0x7f)
			return 0;
	return 1;
}

/* Subject: as it is when ASCII, else RFC 2047 "=?UTF-8?B?...?=" words of
 * at most 45 input bytes each (whole characters), folded. */
static int put_subject(struct gh_buf *b, const char *s)
{
	size_t n = strlen(s), i = 0;
	int rc = gh_buf_puts(b, "Subject: ");

	if (rc != GH_BUF_OK)
		return rc;
	if (ascii(s))
		return gh_buf_printf(b, "%s\r\n", s);
	while (i < n && rc == GH_BUF_OK) {
		size_t k = utf8_cut(s + i, n - i, 45);
		char enc[sodium_base64_ENCODED_LEN(45, sodium_base64_VARIANT_ORIGINAL)];

		if (k == 0)
			k = n - i < 4 ? n - i : 4; /* a broken sequence: take it as it is */
		sodium_bin2base64(enc, sizeof(enc), (const unsigned char *)s + i, k,
				  sodium_base64_VARIANT_ORIGINAL);
		rc = gh_buf_printf(b, "%s=?UTF-8?B?%s?=", i ? "\r\n " : "", enc);
		i += k;
	}
	return rc == GH_BUF_OK ? gh_buf_puts(b, "\r\n") : rc;
}

/* "Wed, 25 Nov 2026 12:00:00 +0000" */
static void mail_date(int64_t ms, char *out, size_t cap)
{
	static const char *const days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
	static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
					     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	snprintf(out, cap, "%s, %02d %s %04d %02d:%02d:%02d +0000", days[tm.tm_wday % 7],
		 tm.tm_mday, months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
		 tm.tm_sec);
}

/* body with every line ending CRLF (a bare CR is dropped, a bare LF
 * gets its CR) and no line longer than 998 bytes (longer ones wrap). */
static int put_body(struct gh_buf *b, const char *s)
{
	size_t col = 0;
	int rc = GH_BUF_OK;

	for (; *s && rc == GH_BUF_OK; s++) {
		if (*s == '\r')
			continue;
		if (*s == '\n') {
			rc = gh_buf_puts(b, "\r\n");
			col = 0;
			continue;
		}
		if (col == 998) {
			rc = gh_buf_puts(b, "\r\n");
			col = 0;
		}
		if (rc == GH_BUF_OK)
			rc = gh_buf_putc(b, *s);
		col++;
	}
	if (rc == GH_BUF_OK && col)
		rc = gh_buf_puts(b, "\r\n");
	return rc;
}

char *gh_notify_mail_build(const struct gh_notify_mail *m)
{
	struct gh_buf b;
	char v[1024], date[64];
	const char *domain = strchr(m->from, '@');
	int rc;
	size_t i;

	gh_buf_init(&b, MAIL_MAX);
	mail_date(m->date_ms, date, sizeof(date));
	rc = gh_buf_printf(&b, "Date: %s\r\n", date);
	gh_notify_header_value(v, sizeof(v), m->from);
	if (rc == GH_BUF_OK)
		rc = gh_buf_printf(&b, "From: <%s>\r\n", v);
	for (i = 0; i < m->nto && rc == GH_BUF_OK; i++) {
		gh_notify_header_value(v, sizeof(v), m->to[i]);
		rc = gh_buf_printf(&b, "%s<%s>", i ? ",\r\n " : "To: ", v);
	}
	if (rc == GH_BUF_OK && m->nto)
		rc = gh_buf_puts(&b, "\r\n");
	gh_notify_header_value(v, sizeof(v), m->subject ? m->subject : "");
	if (rc == GH_BUF_OK)
		rc = put_subject(&b, v);
	gh_notify_header_value(v, sizeof(v), m->message_id ? m->message_id : "");
	if (rc == GH_BUF_OK) {
		char dom[256];

		gh_notify_header_value(dom, sizeof(dom), domain ? domain + 1 : "gatehouse.invalid");
		rc = gh_buf_printf(&b, "Message-ID: <%s@%s>\r\n", v, dom);
	}
	if (rc == GH_BUF_OK && m->event) {
		gh_notify_header_value(v, sizeof(v), m->event);
		rc = gh_buf_printf(&b, "X-Gatehouse-Event: %s\r\n", v);
	}
	if (rc == GH_BUF_OK && m->approval_id) {
		gh_notify_header_value(v, sizeof(v), m->approval_id);
		rc = gh_buf_printf(&b, "X-Gatehouse-Approval: %s\r\n", v);
	}
	if (rc == GH_BUF_OK)
		rc = gh_buf_puts(&b, "MIME-Version: 1.0\r\n"
				     "Content-Type: text/plain; charset=utf-8\r\n"
				     "Content-Transfer-Encoding: 8bit\r\n"
				     "\r\n");
	if (rc == GH_BUF_OK)
		rc = put_body(&b, m->body ? m->body : "");
	if (rc != GH_BUF_OK) {
		gh_buf_free(&b);
		return NULL;
	}
	return gh_buf_detach(&b);
}
