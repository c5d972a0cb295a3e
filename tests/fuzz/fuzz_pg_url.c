/*
 * fuzz_pg_url.c - what gatehouse does with a database.url before and
 * while it connects (gh_pg_url_check, gh_pg_url_redact) and the
 * placeholder rewrite every PostgreSQL statement goes through
 * (gh_pg_sql_rewrite).
 *
 * The input is "url\nsql" (no newline: the whole input is the URL, and
 * also the SQL). Checks:
 *   - redaction always NUL-terminates within its buffer, never grows past
 *     the cap, and never keeps the password libpq finds in a URL;
 *   - a URL the check refuses gets a message without that password;
 *   - a rewrite that succeeds keeps every byte outside the placeholders,
 *     writes only $1..$999 for them, and reports the largest number used.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "pg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The password libpq reads from url, or "" (none, or not parsed). */
static void password_of(const char *url, char *out, size_t cap)
{
	PQconninfoOption *opts = PQconninfoParse(url, NULL), *o;

	out[0] = '\0';
	for (o = opts; o && o->keyword; o++)
		if (!strcmp(o->keyword, "password") && o->val && strlen(o->val) < cap)
			memcpy(out, o->val, strlen(o->val) + 1);
	PQconninfoFree(opts);
}

static void check_url(const char *url)
{
	char red[128], pw[256];
	struct gh_err e;

	memset(red, 'x', sizeof(red));
	gh_pg_url_redact(url, red, sizeof(red));
	CHECK(memchr(red, '\0', sizeof(red)));
	password_of(url, pw, sizeof(pw));
	/* only URLs are redacted (gatehouse refuses libpq's key=value form);
	 * a password of a few bytes can be anywhere in the URL by chance */
	if (gh_pg_is_url(url) && strlen(pw) >= 6 && strlen(url) < sizeof(red) &&
	    !strstr(url + 1, "://"))
		CHECK(!strstr(red, pw));
	/* a non-URL gets a fixed message that quotes nothing of it */
	if (gh_pg_url_check(url, "database.url", &e) != GH_OK && gh_pg_is_url(url) &&
	    strlen(pw) >= 6)
		CHECK(!strstr(e.msg, pw));
}

static void check_sql(const char *sql)
{
	size_t cap = strlen(sql) * 4 + 8, i, o;
	char *out = malloc(cap);
	int n = -1, top = 0;

	if (!out)
		return;
	if (gh_pg_sql_rewrite(sql, out, cap, &n) == 0) {
		/* walking both: every ? became $K; everything else is as it was */
		for (i = 0, o = 0; out[o]; o++) {
			if (out[o] == '$' && sql[i] == '?') {
				long k = strtol(out + o + 1, NULL, 10);

				CHECK(k >= 1 && k <= 999);
				if (k > top)
					top = k;
				i++;
				while (sql[i] >= '0' && sql[i] <= '9')
					i++;
				while (out[o + 1] >= '0' && out[o + 1] <= '9')
					o++;
				continue;
			}
			CHECK(out[o] == sql[i]);
			i++;
		}
		CHECK(sql[i] == '\0');
		CHECK(n == top);
	}
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *url = malloc(size + 1), *nl;
	const char *sql;

	if (!url)
		return 0;
	memcpy(url, data, size);
	url[size] = '\0';
	if (strlen(url) != size) {
		free(url);
		return 0;
	}
	nl = strchr(url, '\n');
	sql = url;
	if (nl) {
		*nl = '\0';
		sql = nl + 1;
	}
	check_url(url);
	check_sql(sql);
	free(url);
	return 0;
}
