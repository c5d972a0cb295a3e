/*
 * pg_ratelimit.h - rate limits shared by every replica on one PostgreSQL
 * database: the same GCRA as ratelimit.h, with each key's theoretical
 * arrival time in rate_limit_state, decided and advanced by one atomic
 * statement (an upsert whose update only happens when the cells fit), on
 * the database's clock, so replicas whose clocks differ still share one
 * limit.
 *
 * Why not leased budgets: a lease hands a replica a share of a key's
 * cells ahead of time, so a key used on one replica at a time (the usual
 * case behind a load balancer with keep-alive) is refused while its
 * other share idles elsewhere, and the bound then only holds per lease
 * period. One statement per limited request keeps the bound exact at the
 * cost of a round trip to the database (measured in tests/bench).
 *
 * Times are whole milliseconds, as rate_limit_state stores them: a cell
 * takes T = ceil(period_ms / rate) ms, so a limit of more than 1000 cells a
 * second for one key is held at 1000. The results mean what ratelimit.h
 * says.
 *
 * Threading: as the connection given (one thread at a time).
 */
#ifndef GH_PG_RATELIMIT_H
#define GH_PG_RATELIMIT_H

#include <stdint.h>

#include "err.h"
#include "pg.h"
#include "ratelimit.h"

/* Takes quantity (>= 0) cells of key when they fit, as gh_rl_take. Errors
 * from the database (GH_E_UNAVAILABLE, ...): callers fail closed. */
enum gh_code gh_pg_rl_take(struct gh_pg_conn *c, const char *key, const struct gh_rl_limit *lim,
			   int64_t quantity, struct gh_rl_result *out, struct gh_err *e);

/* Consumes quantity cells unconditionally, as gh_rl_charge. */
enum gh_code gh_pg_rl_charge(struct gh_pg_conn *c, const char *key,
			     const struct gh_rl_limit *lim, int64_t quantity, struct gh_err *e);

/* Would quantity cells fit now? Consumes nothing, as gh_rl_peek. */
enum gh_code gh_pg_rl_peek(struct gh_pg_conn *c, const char *key, const struct gh_rl_limit *lim,
			   int64_t quantity, struct gh_rl_result *out, struct gh_err *e);

/* A gh_rl_shared_fn (ratelimit.h) over a pool (struct gh_pg_pool *):
 * every replica given one database shares its limits. A connection is
 * taken from the pool for each call; database errors are logged. */
int gh_pg_rl_shared(void *pool, int op, const char *key, const struct gh_rl_limit *lim,
		    int64_t quantity, struct gh_rl_result *out);

#endif
