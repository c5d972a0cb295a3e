/*
 * log.c - stderr logging; see log.h.
 */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

static _Atomic int min_level = GH_LOG_INFO;

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

void gh_log(enum gh_log_level lvl, const char *fmt, ...)
{
	static const char *const names[] = {"debug", "info", "warn", "error"};
	char line[2048], ts[GH_ISO8601_MAX];
	va_list ap;
	int n, m;
	ssize_t w;

	if ((int)lvl < atomic_load(&min_level))
		return;
	gh_iso8601(gh_now_ms(), ts, sizeof(ts));
	n = snprintf(line, sizeof(line), "%s %-5s ", ts, names[lvl]);
	if (n < 0)
		return;
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	n += m;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	w = write(STDERR_FILENO, line, (size_t)n);
	(void)w;
}
