/*
 * log.h - one-line logs to stderr: "2026-11-21T10:00:00.123Z level msg".
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

void gh_log(enum gh_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define gh_debug(...) gh_log(GH_LOG_DEBUG, __VA_ARGS__)
#define gh_info(...)  gh_log(GH_LOG_INFO, __VA_ARGS__)
#define gh_warn(...)  gh_log(GH_LOG_WARN, __VA_ARGS__)
#define gh_error(...) gh_log(GH_LOG_ERROR, __VA_ARGS__)

#endif
