/*
 * replica.h - what a gatehouse shares with the other replicas on one
 * PostgreSQL database (database.url), beyond the store itself:
 *   - live events: the hub's approval and run-state events reach every
 *     replica's watchers (pg_events.h);
 *   - leadership: the periodic background work (approval and run expiry,
 *     retention, statistics, resuming runs a dead replica left) is done
 *     by one replica at a time, and moves when it dies (pg_leader.h);
 *   - rate limits: one budget per key across replicas (pg_ratelimit.h).
 * On SQLite (one node) none of this starts and the node leads itself.
 *
 * Threading: start/stop from the main thread; the rest from any.
 */
#ifndef GH_REPLICA_H
#define GH_REPLICA_H

#include <cjson/cJSON.h>

#include "app.h"
#include "err.h"

/* Starts the three for app (its store, hub and rate limiter made) on url.
 * Fails (URL redacted) when a first connection cannot be made. */
enum gh_code gh_replica_start(struct gh_app *app, const char *url, struct gh_err *e);
/* Stops what gh_replica_start started (NULL-safe on a single node). */
void gh_replica_stop(struct gh_app *app);

/* 1 when this process should do the shared background work now: it leads,
 * or it is the only node. */
int gh_replica_leads(const struct gh_app *app);

/* Adds "database": {"backend", and for PostgreSQL the pool, the events
 * relay and leadership} to o. 0 when the database is reachable, else -1
 * (the gateway is degraded). */
int gh_replica_health_json(const struct gh_app *app, cJSON *o);

#endif
