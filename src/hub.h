/*
 * hub.h - in-process publish/subscribe of live events, for SSE watchers:
 * GET /api/runs/:id/events follows one run, the admin UI follows the
 * "approvals" topic.
 *
 * Publishing never blocks on a slow subscriber: each subscription has a
 * bounded queue, and when it overflows the subscription is marked lost
 * (the watcher then reloads state instead of seeing a gap). Thread-safe.
 */
#ifndef GH_HUB_H
#define GH_HUB_H

#include <stddef.h>

#include <cjson/cJSON.h>

struct gh_hub;
struct gh_hub_sub;

#define GH_HUB_QUEUE 256

struct gh_hub *gh_hub_new(void);
/* All subscriptions must be gone. NULL ok. */
void gh_hub_free(struct gh_hub *h);

/* 1 when anyone subscribes to anything: a publisher may skip building an
 * event nobody can receive. NULL ok. */
int gh_hub_active(struct gh_hub *h);

/* Delivers (type, payload) to every subscriber of topic. payload is
 * serialised here; the caller keeps it. Cheap while nobody subscribes. */
void gh_hub_publish(struct gh_hub *h, const char *topic, const char *type, const cJSON *payload);

/* The same with the payload already serialised (len bytes of JSON text). */
void gh_hub_publish_raw(struct gh_hub *h, const char *topic, const char *type,
			const char *data, size_t len);

/* Announces that the stored state of run run_id changed (status, an
 * approval decided, a hold released): an event "changed" on the topic
 * gh_hub_state_topic names. Waits subscribe to it; it carries nothing. */
void gh_hub_notify_state(struct gh_hub *h, const char *run_id);
/* "state:<run_id>" into out; the topic is cut to cap. */
void gh_hub_state_topic(const char *run_id, char *out, size_t cap);

/* Other processes (replicas on one database) hear of events through a
 * relay: fn is called with every event published here, on the
 * publishing thread, before local delivery; it must not block (it
 * queues). Events that come back from other processes are handed to
 * gh_hub_deliver, which only delivers locally. Set once, before events
 * are published; fn NULL removes it (when nothing publishes). */
typedef void (*gh_hub_relay_fn)(void *ud, const char *topic, const char *type, const char *data,
				size_t len);
void gh_hub_set_relay(struct gh_hub *h, gh_hub_relay_fn fn, void *ud);
/* Delivers an event to this process's subscribers only. */
void gh_hub_deliver(struct gh_hub *h, const char *topic, const char *type, const char *data,
		    size_t len);

/* NULL on OOM. */
struct gh_hub_sub *gh_hub_subscribe(struct gh_hub *h, const char *topic);
void gh_hub_unsubscribe(struct gh_hub *h, struct gh_hub_sub *s);

/* Waits up to timeout_ms for the next event. Returns 1 with *type and *data
 * (owned by the caller, free()), 0 on timeout, -1 when events were lost
 * (queue overflow; the subscription then keeps going). */
int gh_hub_next(struct gh_hub_sub *s, int timeout_ms, char **type, char **data);

#endif
