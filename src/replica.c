/*
 * replica.c - events, leadership and rate limits shared by the replicas
 * on one PostgreSQL database. See replica.h.
 */
#include "replica.h"

#include <stdlib.h>

#include "pg.h"
#include "pg_events.h"
#include "pg_leader.h"
#include "pg_ratelimit.h"
#include "ratelimit.h"
#include "store.h"

/* How often a follower tries to take the lead, and a leader checks it
 * still holds it: a dead leader's work moves within about this. */
#define LEADER_CHECK_MS 1000

struct gh_replica {
	struct gh_pg_events *events;
	struct gh_pg_leader *leader;
};

/* A cached table changed on some replica (or may have, what NULL): this
 * one's cached rows of it go. */
static void caches_changed(void *store, const char *what)
{
	gh_store_caches_changed(store, what);
}

enum gh_code gh_replica_start(struct gh_app *app, const char *url, struct gh_err *e)
{
	struct gh_replica *r;
	enum gh_code rc;

	if (!(r = calloc(1, sizeof(*r))))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	if ((rc = gh_pg_events_start(url, app->hub, &r->events, e)) != GH_OK ||
	    (rc = gh_pg_leader_start(url, "gatehouse background work", LEADER_CHECK_MS,
				     gh_store_instance(app->store), &r->leader, e)) != GH_OK) {
		gh_pg_events_stop(r->events);
		free(r);
		return rc;
	}
	gh_pg_events_on_keys(r->events, caches_changed, app->store);
	if (app->rl)
		gh_rl_set_shared(app->rl, gh_pg_rl_shared, gh_store_pg_pool(app->store));
	app->replica = r;
	return GH_OK;
}

void gh_replica_stop(struct gh_app *app)
{
	struct gh_replica *r = app->replica;

	if (!r)
		return;
	/* leadership first: another replica takes the work over at once */
	gh_pg_leader_stop(r->leader);
	gh_pg_events_stop(r->events);
	app->replica = NULL;
	free(r);
}

int gh_replica_leads(const struct gh_app *app)
{
	return !app->replica || gh_pg_leader_is(app->replica->leader);
}

/* One round trip: can a request reach the database now? */
static int reachable(struct gh_pg_pool *pool)
{
	struct gh_pg_conn *c;
	struct gh_err e;
	enum gh_code rc;

	if (gh_pg_acquire(pool, &c, &e) != GH_OK)
		return 0;
	rc = gh_pg_run(c, "SELECT 1", "checking the database", &e);
	gh_pg_release(pool, c);
	return rc == GH_OK;
}

int gh_replica_health_json(const struct gh_app *app, cJSON *o)
{
	struct gh_pg_pool *pool = gh_store_pg_pool(app->store);
	cJSON *d = cJSON_AddObjectToObject(o, "database"), *x;
	struct gh_pg_stats ps;
	struct gh_pg_events_stats es;
	struct gh_pg_leader_stats ls;
	int ok;

	if (!d)
		return 0;
	if (!pool) {
		cJSON_AddStringToObject(d, "backend", "sqlite");
		return 0;
	}
	ok = reachable(pool);
	cJSON_AddStringToObject(d, "backend", "postgres");
	cJSON_AddBoolToObject(d, "reachable", ok);
	gh_pg_pool_stats(pool, &ps);
	x = cJSON_AddObjectToObject(d, "pool");
	cJSON_AddNumberToObject(x, "size", ps.size);
	cJSON_AddNumberToObject(x, "open", ps.open);
	cJSON_AddNumberToObject(x, "busy", ps.busy);
	cJSON_AddNumberToObject(x, "connectFailures", (double)ps.connect_failures);
	if (app->replica) {
		gh_pg_events_stats(app->replica->events, &es);
		x = cJSON_AddObjectToObject(d, "events");
		cJSON_AddBoolToObject(x, "connected", es.connected);
		cJSON_AddNumberToObject(x, "sent", (double)es.sent);
		cJSON_AddNumberToObject(x, "received", (double)es.received);
		cJSON_AddNumberToObject(x, "dropped", (double)es.dropped);
		gh_pg_leader_stats(app->replica->leader, &ls);
		cJSON_AddBoolToObject(d, "leader", ls.leader);
	}
	return ok ? 0 : -1;
}
