/*
 * pg_events.h - live events across replicas on one PostgreSQL database:
 * what one gatehouse publishes on its hub (hub.h) for the approvals page
 * and for waits on a run's state reaches the hubs of the others, through
 * LISTEN/NOTIFY on the channel "gatehouse_events".
 *
 * It also hears the store's GH_STORE_KEYS_CHANNEL (a key was revoked, or
 * working memory written, on some replica) and tells a hook, so that the
 * cached rows are dropped.
 *
 * Relayed: the "approvals" topic, every "state:<run id>" topic, and the
 * approval events published on a run's own topic. A run's other events
 * (text deltas, tool calls) stay with the replica that runs it: relaying
 * every token through the database would cost more than it gives.
 *
 * One thread per process holds a connection of its own (outside the
 * pool): it sends queued events with pg_notify and hands those of other
 * replicas to the local hub. Publishing never blocks: events queue (at
 * most GH_PG_EVENTS_QUEUE; more are dropped and counted). An event whose
 * payload would pass PostgreSQL's limit (8000 bytes) is sent with "{}"
 * as its data, so that watchers still wake and reload. While the
 * database cannot be reached, events are dropped (counted) and the
 * thread reconnects with back-off; watchers waiting for a state change
 * also re-read the state on their own timeouts, so nothing waits on a
 * lost event for ever.
 *
 * Threading: start/stop from one thread; the relay runs on publishers'.
 */
#ifndef GH_PG_EVENTS_H
#define GH_PG_EVENTS_H

#include <stdint.h>

#include "err.h"
#include "hub.h"

#define GH_PG_EVENTS_QUEUE 4096
#define GH_PG_EVENTS_CHANNEL "gatehouse_events"

struct gh_pg_events;

/* Connects (a failure is reported: the URL was checked already), starts
 * listening and sets itself as hub's relay. url is copied. */
enum gh_code gh_pg_events_start(const char *url, struct gh_hub *hub, struct gh_pg_events **out,
				struct gh_err *e);
/* Removes the relay, stops the thread, closes the connection. NULL ok. */
void gh_pg_events_stop(struct gh_pg_events *ev);

/* Calls fn(ud, what), on the events thread, when a notification on
 * GH_STORE_KEYS_CHANNEL arrives (what: its payload, naming the cache of
 * the table that changed on some replica), and fn(ud, NULL) after each
 * reconnection (any may have been missed). fn NULL: none. */
void gh_pg_events_on_keys(struct gh_pg_events *ev, void (*fn)(void *ud, const char *what),
			  void *ud);

struct gh_pg_events_stats {
	uint64_t sent, received, dropped, oversized, reconnects;
	int connected;
};
void gh_pg_events_stats(struct gh_pg_events *ev, struct gh_pg_events_stats *out);

#endif
