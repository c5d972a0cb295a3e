/*
 * pg_events.c - the hub's events across replicas through LISTEN/NOTIFY.
 * See pg_events.h.
 *
 * A notification's payload is "origin\ntopic\ntype\ndata": origin is this
 * process's random id, so a replica skips its own events (the hub has
 * delivered them locally already).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <libpq-fe.h>
#include <sodium.h>

#include "log.h"
#include "pg.h"
#include "pg_events.h"
#include "store.h"
#include "util.h"

#define PAYLOAD_MAX 7999        /* PostgreSQL refuses 8000 bytes and more */
#define ORIGIN_LEN 16
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000

struct queued {
	struct queued *next;
	size_t len;
	char text[];                /* the payload, NUL-terminated */
};

struct gh_pg_events {
	char *url;                  /* holds the password: never logged */
	struct gh_hub *hub;
	char origin[ORIGIN_LEN + 1];
	int wake;                   /* eventfd: the queue grew, or stop */
	pthread_t th;
	pthread_mutex_t mu;         /* guards the queue and stopping */
	struct queued *head, *tail;
	size_t qlen;
	int stopping;
	PGconn *pc;                 /* the thread's */
	void (*on_keys)(void *ud, const char *what); /* under mu: a cached table
						      * changed, or may have */
	void *on_keys_ud;
	_Atomic uint64_t sent, received, dropped, oversized, reconnects;
	atomic_int connected;
};

/* ------------------------------------------------ publishing side */

/* 1 for the events other replicas' watchers wait for. */
static int relayed(const char *topic, const char *type)
{
	return !strcmp(topic, "approvals") || !strncmp(topic, "state:", 6) ||
	       !strncmp(type, "approval", 8);
}

static void relay(void *ud, const char *topic, const char *type, const char *data, size_t len)
{
	struct gh_pg_events *ev = ud;
	size_t tl = strlen(topic), yl = strlen(type), need;
	struct queued *q;
	uint64_t one = 1;

	if (!relayed(topic, type) || memchr(topic, '\n', tl) || memchr(type, '\n', yl))
		return;
	need = ORIGIN_LEN + 3 + tl + yl + len;
	if (need > PAYLOAD_MAX) {
		/* too long for a notification: watchers still wake and reload */
		data = "{}";
		len = 2;
		need = ORIGIN_LEN + 3 + tl + yl + len;
		atomic_fetch_add(&ev->oversized, 1);
		if (need > PAYLOAD_MAX) {
			atomic_fetch_add(&ev->dropped, 1);
			return;
		}
	}
	if (!(q = malloc(sizeof(*q) + need + 1))) {
		atomic_fetch_add(&ev->dropped, 1);
		return;
	}
	q->next = NULL;
	q->len = need;
	snprintf(q->text, need + 1, "%s\n%s\n%s\n%.*s", ev->origin, topic, type, (int)len, data);
	pthread_mutex_lock(&ev->mu);
	if (ev->qlen >= GH_PG_EVENTS_QUEUE || ev->stopping) {
		pthread_mutex_unlock(&ev->mu);
		free(q);
		atomic_fetch_add(&ev->dropped, 1);
		return;
	}
	if (ev->tail)
		ev->tail->next = q;
	else
		ev->head = q;
	ev->tail = q;
	ev->qlen++;
	pthread_mutex_unlock(&ev->mu);
	if (write(ev->wake, &one, sizeof(one)) < 0 && errno != EAGAIN)
		gh_debug("pg events: wake: %s", strerror(errno));
}

/* ---------------------------------------------------- the thread */

/* Takes the whole queue. */
static struct queued *take_queue(struct gh_pg_events *ev, int *stopping)
{
	struct queued *q;

	pthread_mutex_lock(&ev->mu);
	q = ev->head;
	ev->head = ev->tail = NULL;
	ev->qlen = 0;
	*stopping = ev->stopping;
	pthread_mutex_unlock(&ev->mu);
	return q;
}

static void free_queue(struct queued *q, int count_dropped, struct gh_pg_events *ev)
{
	while (q) {
		struct queued *next = q->next;

		if (count_dropped)
			atomic_fetch_add(&ev->dropped, 1);
		free(q);
		q = next;
	}
}

static void disconnect(struct gh_pg_events *ev, const char *why)
{
	if (!ev->pc)
		return;
	gh_warn("pg events: connection lost (%.*s); reconnecting", (int)strcspn(why, "\n"), why);
	PQfinish(ev->pc);
	ev->pc = NULL;
	atomic_store(&ev->connected, 0);
}

static enum gh_code connect_listen(struct gh_pg_events *ev, struct gh_err *e)
{
	enum gh_code rc;
	PGresult *r;
	int ok;

	if ((rc = gh_pg_connect(ev->url, 5, &ev->pc, e)) != GH_OK)
		return rc;
	r = PQexec(ev->pc, "LISTEN " GH_PG_EVENTS_CHANNEL "; LISTEN " GH_STORE_KEYS_CHANNEL);
	ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	if (!ok) {
		PQfinish(ev->pc);
		ev->pc = NULL;
		return gh_err_set(e, GH_E_UNAVAILABLE, "database: cannot LISTEN on %s",
				  GH_PG_EVENTS_CHANNEL);
	}
	atomic_store(&ev->connected, 1);
	return GH_OK;
}

/* Hands one notification's payload to the hub unless it is our own. */
static void deliver(struct gh_pg_events *ev, const char *p)
{
	const char *topic, *type, *data;
	char t[256], y[128];
	size_t tl, yl;

	if (strncmp(p, ev->origin, ORIGIN_LEN) == 0 && p[ORIGIN_LEN] == '\n')
		return;
	if (!(topic = strchr(p, '\n')) || !(type = strchr(++topic, '\n')))
		return;
	tl = (size_t)(type - topic);
	if (!(data = strchr(++type, '\n')))
		return;
	yl = (size_t)(data - type);
	data++;
	if (tl >= sizeof(t) || yl >= sizeof(y))
		return;
	memcpy(t, topic, tl);
	t[tl] = '\0';
	memcpy(y, type, yl);
	y[yl] = '\0';
	/* counted first: a watcher woken by the delivery may read the stats */
	atomic_fetch_add(&ev->received, 1);
	gh_hub_deliver(ev->hub, t, y, data, strlen(data));
}

/* Tells the on_keys hook, if any, which cached table changed (what, the
 * notification's payload), or that any may have (NULL). */
static void keys_changed(struct gh_pg_events *ev, const char *what)
{
	void (*fn)(void *, const char *);
	void *ud;

	pthread_mutex_lock(&ev->mu);
	fn = ev->on_keys;
	ud = ev->on_keys_ud;
	pthread_mutex_unlock(&ev->mu);
	if (fn)
		fn(ud, what);
}

static int drain_notifies(struct gh_pg_events *ev)
{
	PGnotify *n;

	if (!PQconsumeInput(ev->pc))
		return -1;
	while ((n = PQnotifies(ev->pc))) {
		if (!strcmp(n->relname, GH_STORE_KEYS_CHANNEL))
			keys_changed(ev, n->extra ? n->extra : "");
		else
			deliver(ev, n->extra);
		PQfreemem(n);
	}
	return 0;
}

/* Sends q (and frees it); -1 when the connection broke. */
static int send_queue(struct gh_pg_events *ev, struct queued *q)
{
	const char *vals[2] = {GH_PG_EVENTS_CHANNEL, NULL};
	int rc = 0;

	while (q) {
		struct queued *next = q->next;

		if (rc == 0) {
			PGresult *r;

			vals[1] = q->text;
			r = PQexecParams(ev->pc, "SELECT pg_notify($1, $2)", 2, NULL, vals, NULL, NULL,
					 0);
			if (PQresultStatus(r) == PGRES_TUPLES_OK) {
				atomic_fetch_add(&ev->sent, 1);
			} else {
				atomic_fetch_add(&ev->dropped, 1);
				if (PQstatus(ev->pc) != CONNECTION_OK)
					rc = -1;
			}
			PQclear(r);
		} else {
			atomic_fetch_add(&ev->dropped, 1);
		}
		free(q);
		q = next;
	}
	return rc;
}

/* Waits for the socket or the wake-up, at most ms. */
static void wait_for(struct gh_pg_events *ev, int ms)
{
	struct pollfd fds[2] = {{ev->wake, POLLIN, 0}, {ev->pc ? PQsocket(ev->pc) : -1, POLLIN, 0}};
	uint64_t v;

	if (poll(fds, ev->pc ? 2 : 1, ms) > 0 && (fds[0].revents & POLLIN) &&
	    read(ev->wake, &v, sizeof(v)) < 0 && errno != EAGAIN)
		gh_debug("pg events: wake: %s", strerror(errno));
}

static void *events_main(void *arg)
{
	struct gh_pg_events *ev = arg;
	int backoff = 0, stopping = 0;
	struct gh_err e;

	for (;;) {
		struct queued *q = take_queue(ev, &stopping);

		if (stopping) {
			free_queue(q, 0, ev);
			break;
		}
		if (!ev->pc) {
			/* what waited for the connection is stale by now */
			free_queue(q, 1, ev);
			if (connect_listen(ev, &e) != GH_OK) {
				gh_debug("pg events: %s", e.msg);
				backoff = backoff ? backoff * 2 : BACKOFF_MIN_MS;
				if (backoff > BACKOFF_MAX_MS)
					backoff = BACKOFF_MAX_MS;
				wait_for(ev, backoff);
				continue;
			}
			if (backoff)
				atomic_fetch_add(&ev->reconnects, 1);
			backoff = 0;
			/* what changed while nobody listened was not heard */
			keys_changed(ev, NULL);
			continue;
		}
		if (send_queue(ev, q) != 0 || drain_notifies(ev) != 0) {
			disconnect(ev, PQerrorMessage(ev->pc));
			continue;
		}
		wait_for(ev, 1000);
		if (drain_notifies(ev) != 0)
			disconnect(ev, PQerrorMessage(ev->pc));
	}
	if (ev->pc)
		PQfinish(ev->pc);
	ev->pc = NULL;
	return NULL;
}

enum gh_code gh_pg_events_start(const char *url, struct gh_hub *hub, struct gh_pg_events **out,
				struct gh_err *e)
{
	struct gh_pg_events *ev;
	unsigned char rnd[ORIGIN_LEN / 2];
	enum gh_code rc;

	*out = NULL;
	if (!(ev = calloc(1, sizeof(*ev))))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	ev->hub = hub;
	ev->wake = -1;
	pthread_mutex_init(&ev->mu, NULL);
	randombytes_buf(rnd, sizeof(rnd));
	sodium_bin2hex(ev->origin, sizeof(ev->origin), rnd, sizeof(rnd));
	if (!(ev->url = strdup(url))) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto fail;
	}
	if ((ev->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		rc = gh_err_set(e, GH_E_INTERNAL, "pg events: eventfd: %s", strerror(errno));
		goto fail;
	}
	if ((rc = connect_listen(ev, e)) != GH_OK)
		goto fail;
	if (pthread_create(&ev->th, NULL, events_main, ev) != 0) {
		rc = gh_err_set(e, GH_E_INTERNAL, "pg events: cannot start its thread");
		goto fail;
	}
	gh_hub_set_relay(hub, relay, ev);
	*out = ev;
	return GH_OK;
fail:
	if (ev->pc)
		PQfinish(ev->pc);
	if (ev->wake >= 0)
		close(ev->wake);
	if (ev->url) {
		sodium_memzero(ev->url, strlen(ev->url));
		free(ev->url);
	}
	pthread_mutex_destroy(&ev->mu);
	free(ev);
	return rc;
}

void gh_pg_events_stop(struct gh_pg_events *ev)
{
	uint64_t one = 1;

	if (!ev)
		return;
	gh_hub_set_relay(ev->hub, NULL, NULL);
	pthread_mutex_lock(&ev->mu);
	ev->stopping = 1;
	pthread_mutex_unlock(&ev->mu);
	if (write(ev->wake, &one, sizeof(one)) < 0 && errno != EAGAIN)
		gh_debug("pg events: wake: %s", strerror(errno));
	pthread_join(ev->th, NULL);
	free_queue(ev->head, 0, ev);
	close(ev->wake);
	sodium_memzero(ev->url, strlen(ev->url));
	free(ev->url);
	pthread_mutex_destroy(&ev->mu);
	free(ev);
}

void gh_pg_events_on_keys(struct gh_pg_events *ev, void (*fn)(void *ud, const char *what),
			  void *ud)
{
	pthread_mutex_lock(&ev->mu);
	ev->on_keys = fn;
	ev->on_keys_ud = ud;
	pthread_mutex_unlock(&ev->mu);
}

void gh_pg_events_stats(struct gh_pg_events *ev, struct gh_pg_events_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!ev)
		return;
	out->sent = atomic_load(&ev->sent);
	out->received = atomic_load(&ev->received);
	out->dropped = atomic_load(&ev->dropped);
	out->oversized = atomic_load(&ev->oversized);
	out->reconnects = atomic_load(&ev->reconnects);
	out->connected = atomic_load(&ev->connected);
}
