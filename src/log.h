/*
 * log.h - one-line logs to stderr: "2026-11-21T10:00:00.123Z level msg",
 * or with the json format one object per line: {"ts":"...","level":"...",
 * "msg":"..."} (request lines add request_id, method, path, route, status,
 * duration_ms and key_id). A line is at most GH_LOG_LINE_MAX bytes; a
 * longer message is cut (in json, inside the string, which stays valid).
 *
 * Thread-safe (one write(2) per line). Never pass a secret: API keys,
 * provider keys, passwords and session tokens stay out of logs, and so
 * does any part of one (an API key's visible prefix is 8 characters of its
 * secret); callers log ids instead.
 */
#ifndef GH_LOG_H
#define GH_LOG_H

enum gh_log_level { GH_LOG_DEBUG, GH_LOG_INFO, GH_LOG_WARN, GH_LOG_ERROR };

/* Lines below this level are dropped; default INFO. "GH_LOG=debug" in the
 * environment lowers it at start. */
void gh_log_set_level(enum gh_log_level lvl);
enum gh_log_level gh_log_level_from_name(const char *name); /* INFO when unknown */

enum gh_log_format { GH_LOG_TEXT, GH_LOG_JSON };
void gh_log_set_format(enum gh_log_format f);

#define GH_LOG_LINE_MAX 2048

/* One served request, for the access log line (level info). Strings are
 * borrowed; route (the matched route's pattern) and key_id may be NULL or
 * "". Never anything secret: the key's id, not its prefix. */
struct gh_log_request {
	const char *request_id;
	const char *method;
	const char *path;
	const char *route;
	int status;
	double duration_ms;
	const char *key_id;
};
void gh_log_request(const struct gh_log_request *lr);

void gh_log(enum gh_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define gh_debug(...) gh_log(GH_LOG_DEBUG, __VA_ARGS__)
#define gh_info(...)  gh_log(GH_LOG_INFO, __VA_ARGS__)
#define gh_warn(...)  gh_log(GH_LOG_WARN, __VA_ARGS__)
#define gh_error(...) gh_log(GH_LOG_ERROR, __VA_ARGS__)

#endif
