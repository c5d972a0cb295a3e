/*
 * pg_ratelimit.c - GCRA in one statement per take. See pg_ratelimit.h.
 */
#include <string.h>

#include "pg_ratelimit.h"

#include "log.h"

/* now, the TAT after (when the cells were taken: NULL when not), and the
 * TAT before (NULL for a new key). $1 key, $2 the cells' time (n * T),
 * $3 the window ((burst + 1) * T). The upsert's update runs only when
 * the cells fit; it locks the key's row either way, so concurrent takes
 * on one key, from any replica, are decided one after the other. */
static const char SQL_TAKE[] =
	"WITH clock AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms), "
	"old AS (SELECT tat_ms FROM rate_limit_state WHERE key = ?1::text), "
	"up AS (INSERT INTO rate_limit_state AS r (key, tat_ms) "
	"  SELECT ?1, clock.ms + ?2::bigint FROM clock WHERE ?2 <= ?3::bigint "
	"  ON CONFLICT (key) DO UPDATE SET tat_ms = greatest(r.tat_ms, excluded.tat_ms - ?2) + ?2 "
	"  WHERE greatest(r.tat_ms, excluded.tat_ms - ?2) + ?2 - (excluded.tat_ms - ?2) <= ?3 "
	"  RETURNING r.tat_ms) "
	"SELECT clock.ms, (SELECT tat_ms FROM up), (SELECT tat_ms FROM old) FROM clock";

static const char SQL_CHARGE[] =
	"INSERT INTO rate_limit_state AS r (key, tat_ms) "
	"SELECT ?1::text, (extract(epoch FROM clock_timestamp()) * 1000)::bigint + ?2::bigint "
	"ON CONFLICT (key) DO UPDATE "
	"SET tat_ms = greatest(r.tat_ms, excluded.tat_ms - ?2) + ?2";

static const char SQL_PEEK[] =
	"SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint, "
	"(SELECT tat_ms FROM rate_limit_state WHERE key = ?1::text)";

/* T and the window in ms; -1 for a limit ratelimit.h would refuse. */
static int gcra_ms(const struct gh_rl_limit *lim, int64_t *t, int64_t *window)
{
	if (lim->rate <= 0 || lim->burst < 0 || lim->period_ms <= 0)
		return -1;
	*t = lim->period_ms / lim->rate + (lim->period_ms % lim->rate != 0);
	if (lim->burst >= INT64_MAX / *t - 1)
		return -1;
	*window = *t * (lim->burst + 1);
	return 0;
}

/* What take and peek check first: out cleared, then allowed for an
 * unlimited limit (nothing to ask the database), GH_E_BADREQ for a bad
 * key, limit or quantity; else T and the window (both 0 on the other
 * paths, which an optimising compiler cannot tell are never read). */
static enum gh_code begin(const char *key, const struct gh_rl_limit *lim, int64_t quantity,
			  int64_t *t, int64_t *window, struct gh_rl_result *out, struct gh_err *e)
{
	memset(out, 0, sizeof(*out));
	*t = 1;
	*window = 0;
	if (lim->rate == 0) {
		out->allowed = 1;
		return GH_OK;
	}
	if (!key || strlen(key) > GH_RL_KEY_MAX || quantity < 0 || gcra_ms(lim, t, window) != 0)
		return gh_err_set(e, GH_E_BADREQ, "rate limit: bad key, limit or quantity");
	return GH_OK;
}

static void fill(struct gh_rl_result *out, int64_t t, int64_t window, int64_t b1, int64_t ahead)
{
	int64_t room = window - ahead;

	out->limit = b1;
	out->remaining = room > 0 ? room / t : 0;
	out->reset_ms = ahead > 0 ? ahead : 0;
}

enum gh_code gh_pg_rl_take(struct gh_pg_conn *c, const char *key, const struct gh_rl_limit *lim,
			   int64_t quantity, struct gh_rl_result *out, struct gh_err *e)
{
	int64_t t, window, cells, now, base;
	PGresult *r = NULL;
	enum gh_code rc;

	if ((rc = begin(key, lim, quantity, &t, &window, out, e)) != GH_OK || out->allowed)
		return rc;
	if (quantity > lim->burst + 1) {
		/* never fits: nothing to ask the database */
		out->limit = lim->burst + 1;
		out->retry_after_ms = -1;
		return GH_OK;
	}
	cells = quantity * t;
	rc = gh_pg_exec(c, SQL_TAKE, (const struct gh_pg_arg[]){{GH_PG_TEXT, key, 0},
								 {GH_PG_INT, NULL, cells},
								 {GH_PG_INT, NULL, window}},
			3, "rate limit", &r, e);
	if (rc != GH_OK)
		return rc;
	now = gh_pg_int(r, 0, 0, NULL);
	if (!PQgetisnull(r, 0, 1)) {
		out->allowed = 1;
		fill(out, t, window, lim->burst + 1, gh_pg_int(r, 0, 1, NULL) - now);
	} else {
		base = PQgetisnull(r, 0, 2) ? now : gh_pg_int(r, 0, 2, NULL);
		if (base < now)
			base = now;
		fill(out, t, window, lim->burst + 1, base - now);
		out->retry_after_ms = base + cells - window - now;
		if (out->retry_after_ms < 1)
			out->retry_after_ms = 1;
	}
	PQclear(r);
	return GH_OK;
}

enum gh_code gh_pg_rl_charge(struct gh_pg_conn *c, const char *key,
			     const struct gh_rl_limit *lim, int64_t quantity, struct gh_err *e)
{
	int64_t t, window;

	if (lim->rate == 0 || quantity == 0)
		return GH_OK;
	if (!key || strlen(key) > GH_RL_KEY_MAX || quantity < 0 || gcra_ms(lim, &t, &window) != 0 ||
	    quantity > INT64_MAX / t)
		return gh_err_set(e, GH_E_BADREQ, "rate limit: bad key, limit or quantity");
	return gh_pg_exec(c, SQL_CHARGE, (const struct gh_pg_arg[]){{GH_PG_TEXT, key, 0},
								    {GH_PG_INT, NULL, quantity * t}},
			  2, "rate limit", NULL, e);
}

enum gh_code gh_pg_rl_peek(struct gh_pg_conn *c, const char *key, const struct gh_rl_limit *lim,
			   int64_t quantity, struct gh_rl_result *out, struct gh_err *e)
{
	int64_t t, window, now, base;
	PGresult *r = NULL;
	enum gh_code rc;

	if ((rc = begin(key, lim, quantity, &t, &window, out, e)) != GH_OK || out->allowed)
		return rc;
	rc = gh_pg_exec(c, SQL_PEEK, (const struct gh_pg_arg[]){{GH_PG_TEXT, key, 0}}, 1,
			"rate limit", &r, e);
	if (rc != GH_OK)
		return rc;
	now = gh_pg_int(r, 0, 0, NULL);
	base = PQgetisnull(r, 0, 1) ? now : gh_pg_int(r, 0, 1, NULL);
	PQclear(r);
	if (base < now)
		base = now;
	fill(out, t, window, lim->burst + 1, base - now);
	if (quantity > lim->burst + 1) {
		out->retry_after_ms = -1;
	} else if (base + quantity * t - now <= window) {
		out->allowed = 1;
	} else {
		out->retry_after_ms = base + quantity * t - window - now;
		if (out->retry_after_ms < 1)
			out->retry_after_ms = 1;
	}
	return GH_OK;
}

int gh_pg_rl_shared(void *pool, int op, const char *key, const struct gh_rl_limit *lim,
		    int64_t quantity, struct gh_rl_result *out)
{
	struct gh_pg_conn *c;
	struct gh_err e;
	enum gh_code rc;

	if ((rc = gh_pg_acquire(pool, &c, &e)) != GH_OK)
		return rc;
	if (op == 0)
		rc = gh_pg_rl_take(c, key, lim, quantity, out, &e);
	else if (op == 1)
		rc = gh_pg_rl_peek(c, key, lim, quantity, out, &e);
	else
		rc = gh_pg_rl_charge(c, key, lim, quantity, &e);
	gh_pg_release(pool, c);
	if (rc != GH_OK && rc != GH_E_BADREQ)
		gh_warn("rate limits: %s", e.msg);
	return rc;
}
