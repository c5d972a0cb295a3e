/*
 * log.c - stderr logging; see log.h. Level and format are atomics that a
 * reload may change while other threads log.
 */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

static _Atomic int min_level = GH_LOG_INFO;
static _Atomic int format = GH_LOG_TEXT;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void gh_log_set_format(enum gh_log_format f)
{
	atomic_store(&format, (int)f);
}

void gh_log_set_level(enum gh_log_level lvl)
{
	atomic_store(&min_level, (int)lvl);
}

enum gh_log_level gh_log_level_from_name(const char *name)
{
	if (!name)
		return GH_LOG_INFO;
	if (!strcmp(name, "debug"))
		return GH_LOG_DEBUG;
	if (!strcmp(name, "warn"))
		return GH_LOG_WARN;
	if (!strcmp(name, "error"))
		return GH_LOG_ERROR;
	return GH_LOG_INFO;
}

/* A bounded line being built; once full, further appends are dropped. */
struct line {
	char b[GH_LOG_LINE_MAX];
	size_t n;
};

static void put(struct line *l, const char *s, size_t n)
{
	if (n > sizeof(l->b) - 1 - l->n)
		n = sizeof(l->b) - 1 - l->n;
	memcpy(l->b + l->n, s, n);
	l->n += n;
}

static void puts_(struct line *l, const char *s)
{
	put(l, s, strlen(s));
}

/* s as the inside of a JSON string, leaving room for the closing quote,
 * the brace and the newline (reserve): control characters are escaped,
 * and a cut never splits an escape or a UTF-8 sequence. */
static void put_json_str(struct line *l, const char *s, size_t reserve)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t cap = sizeof(l->b) - 1 - reserve;

	for (; *p; p++) {
		char esc[8];
		size_t k = 0, need;

		if (*p == '"' || *p == '\\') {
			esc[0] = '\\';
			esc[1] = (char)*p;
			k = 2;
		} else if (*p == '\n' || *p == '\t' || *p == '\r') {
			esc[0] = '\\';
			esc[1] = *p == '\n' ? 'n' : *p == '\t' ? 't' : 'r';
			k = 2;
		} else if (*p < 0x20 || *p == 0x7f) {
			k = (size_t)snprintf(esc, sizeof(esc), "\\u%04x", *p);
		}
		if (k) {
			if (l->n + k > cap)
				break;
			put(l, esc, k);
			continue;
		}
		/* a whole UTF-8 sequence or nothing; a byte that starts none
		 * (or a sequence cut short) becomes U+FFFD, so the line stays
		 * valid UTF-8 whatever a client sent */
		need = *p < 0x80 ? 1 : *p >= 0xc2 && *p < 0xe0 ? 2 : *p >= 0xe0 && *p < 0xf0 ? 3
		       : *p >= 0xf0 && *p < 0xf5 ? 4 : 0;
		for (k = 1; k < need && (p[k] & 0xc0) == 0x80; k++)
			;
		if (!need || k < need) {
			if (l->n + 6 > cap)
				break;
			put(l, "\\ufffd", 6);
			continue;
		}
		if (l->n + need > cap)
			break;
		put(l, (const char *)p, need);
		p += need - 1;
	}
}

static void put_json_field(struct line *l, const char *name, const char *val)
{
	put(l, ",\"", 2);
	puts_(l, name);
	put(l, "\":\"", 3);
	put_json_str(l, val ? val : "", 3);
	put(l, "\"", 1);
}

static void emit(struct line *l)
{
	ssize_t w;

	l->b[l->n++] = '\n';
	w = write(STDERR_FILENO, l->b, l->n);
	(void)w;
}

/* '{"ts":"...","level":"...","msg":"' then msg, closed by json_close */
static void json_open(struct line *l, enum gh_log_level lvl, const char *msg)
{
	char ts[GH_ISO8601_MAX];

	gh_iso8601(gh_now_ms(), ts, sizeof(ts));
	puts_(l, "{\"ts\":\"");
	puts_(l, ts);
	puts_(l, "\",\"level\":\"");
	puts_(l, level_names[lvl]);
	puts_(l, "\",\"msg\":\"");
	/* the message yields to the fields that follow it */
	put_json_str(l, msg, 400);
	put(l, "\"", 1);
}

/* every string before it left room for the brace (and put() for the
 * newline) */
static void json_close(struct line *l)
{
	put(l, "}", 1);
}

void gh_log_request(const struct gh_log_request *lr)
{
	struct line l = {.n = 0};
	char msg[600], num[64];

	if ((int)GH_LOG_INFO < atomic_load(&min_level))
		return;
	if (atomic_load(&format) == GH_LOG_TEXT) {
		gh_log(GH_LOG_INFO, "%s %s %s %d %.2fms%s%s%s%s", lr->request_id, lr->method,
		       lr->path, lr->status, lr->duration_ms,
		       lr->key_id && *lr->key_id ? " key=" : "", lr->key_id ? lr->key_id : "",
		       lr->route ? " route=" : "", lr->route ? lr->route : "");
		return;
	}
	snprintf(msg, sizeof(msg), "%s %.300s %d", lr->method, lr->path, lr->status);
	json_open(&l, GH_LOG_INFO, msg);
	/* the short fields first (the message left them 400 bytes); the path,
	 * as long as a request head allows, last */
	snprintf(num, sizeof(num), ",\"status\":%d,\"duration_ms\":%.3f", lr->status,
		 lr->duration_ms);
	puts_(&l, num);
	put_json_field(&l, "request_id", lr->request_id);
	put_json_field(&l, "method", lr->method);
	if (lr->route)
		put_json_field(&l, "route", lr->route);
	if (lr->key_id && *lr->key_id)
		put_json_field(&l, "key_id", lr->key_id);
	put_json_field(&l, "path", lr->path);
	json_close(&l);
	emit(&l);
}

void gh_log(enum gh_log_level lvl, const char *fmt, ...)
{
	char msg[GH_LOG_LINE_MAX], ts[GH_ISO8601_MAX];
	struct line l = {.n = 0};
	va_list ap;
	int m;

	if ((int)lvl < atomic_load(&min_level))
		return;
	va_start(ap, fmt);
	m = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	if (atomic_load(&format) == GH_LOG_JSON) {
		json_open(&l, lvl, msg);
		json_close(&l);
		emit(&l);
		return;
	}
	gh_iso8601(gh_now_ms(), ts, sizeof(ts));
	snprintf(l.b, sizeof(l.b), "%s %-5s ", ts, level_names[lvl]);
	l.n = strlen(l.b);
	puts_(&l, msg);
	emit(&l);
}
