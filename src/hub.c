/*
 * hub.c - live event fan-out; see hub.h.
 *
 * One mutex guards the subscriber list; each subscription has its own
 * mutex, condition variable and ring of serialised events, so a publisher
 * holds a subscription's lock only to copy pointers in. A count of
 * subscriptions, read without the lock, lets publishers skip the lock (and
 * callers skip building events) while nobody watches: the usual case.
 */
#include "hub.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "util.h"

struct item {
	char *type;
	char *data;
};

struct gh_hub_sub {
	char *topic;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct item q[GH_HUB_QUEUE];
	unsigned head, len;
	int lost;
	struct gh_hub_sub *next;
};

struct gh_hub {
	pthread_mutex_t mu;
	struct gh_hub_sub *subs;
	atomic_int nsubs;
	gh_hub_relay_fn relay;          /* written before relay_on is set */
	void *relay_ud;
	atomic_int relay_on;
};

struct gh_hub *gh_hub_new(void)
{
	struct gh_hub *h = calloc(1, sizeof(*h));

	if (h)
		pthread_mutex_init(&h->mu, NULL);
	return h;
}

void gh_hub_free(struct gh_hub *h)
{
	if (!h)
		return;
	while (h->subs)
		gh_hub_unsubscribe(h, h->subs);
	pthread_mutex_destroy(&h->mu);
	free(h);
}

void gh_hub_set_relay(struct gh_hub *h, gh_hub_relay_fn fn, void *ud)
{
	atomic_store(&h->relay_on, 0);
	h->relay = fn;
	h->relay_ud = ud;
	atomic_store(&h->relay_on, fn != NULL);
}

/* 1 when events go to other processes too. */
static int relaying(struct gh_hub *h)
{
	return h && atomic_load(&h->relay_on);
}

void gh_hub_publish_raw(struct gh_hub *h, const char *topic, const char *type,
			const char *data, size_t len)
{
	if (!topic)
		return;
	if (relaying(h))
		h->relay(h->relay_ud, topic, type, data, len);
	gh_hub_deliver(h, topic, type, data, len);
}

void gh_hub_deliver(struct gh_hub *h, const char *topic, const char *type, const char *data,
		    size_t len)
{
	struct gh_hub_sub *s;

	if (!gh_hub_active(h) || !topic)
		return;
	pthread_mutex_lock(&h->mu);
	for (s = h->subs; s; s = s->next) {
		char *t, *d;

		if (strcmp(s->topic, topic))
			continue;
		t = strdup(type);
		d = malloc(len + 1);
		if (d) {
			memcpy(d, data, len);
			d[len] = '\0';
		}
		pthread_mutex_lock(&s->mu);
		if (s->len == GH_HUB_QUEUE) {
			/* the watcher fell behind: what is queued is stale (it will
			 * reload state), so drop it and start again from this event */
			while (s->len) {
				free(s->q[s->head].type);
				free(s->q[s->head].data);
				s->head = (s->head + 1) % GH_HUB_QUEUE;
				s->len--;
			}
			s->lost = 1;
		}
		if (!t || !d) {
			s->lost = 1;
			free(t);
			free(d);
		} else {
			struct item *it = &s->q[(s->head + s->len) % GH_HUB_QUEUE];

			it->type = t;
			it->data = d;
			s->len++;
			pthread_cond_signal(&s->cv);
		}
		pthread_mutex_unlock(&s->mu);
	}
	pthread_mutex_unlock(&h->mu);
}

void gh_hub_publish(struct gh_hub *h, const char *topic, const char *type, const cJSON *payload)
{
	char *data;

	if ((!gh_hub_active(h) && !relaying(h)) || !topic)
		return;
	if (!(data = gh_json_dump(payload)))
		return;
	gh_hub_publish_raw(h, topic, type, data, strlen(data));
	free(data);
}

void gh_hub_state_topic(const char *run_id, char *out, size_t cap)
{
	snprintf(out, cap, "state:%s", run_id ? run_id : "");
}

void gh_hub_notify_state(struct gh_hub *h, const char *run_id)
{
	char topic[96];

	if ((!gh_hub_active(h) && !relaying(h)) || !run_id)
		return;
	gh_hub_state_topic(run_id, topic, sizeof(topic));
	gh_hub_publish_raw(h, topic, "changed", "{}", 2);
}

struct gh_hub_sub *gh_hub_subscribe(struct gh_hub *h, const char *topic)
{
	struct gh_hub_sub *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->topic = strdup(topic);
	if (!s->topic) {
		free(s);
		return NULL;
	}
	pthread_mutex_init(&s->mu, NULL);
	gh_cond_init_mono(&s->cv);
	pthread_mutex_lock(&h->mu);
	s->next = h->subs;
	h->subs = s;
	atomic_fetch_add(&h->nsubs, 1);
	pthread_mutex_unlock(&h->mu);
	return s;
}

int gh_hub_active(struct gh_hub *h)
{
	return h && atomic_load(&h->nsubs) > 0;
}

void gh_hub_unsubscribe(struct gh_hub *h, struct gh_hub_sub *s)
{
	struct gh_hub_sub **pp;

	if (!s)
		return;
	pthread_mutex_lock(&h->mu);
	for (pp = &h->subs; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			atomic_fetch_sub(&h->nsubs, 1);
			break;
		}
	}
	pthread_mutex_unlock(&h->mu);
	while (s->len) {
		free(s->q[s->head].type);
		free(s->q[s->head].data);
		s->head = (s->head + 1) % GH_HUB_QUEUE;
		s->len--;
	}
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s->topic);
	free(s);
}

int gh_hub_next(struct gh_hub_sub *s, int timeout_ms, char **type, char **data)
{
	struct timespec ts;
	int rc = 0;

	*type = *data = NULL;
	gh_deadline(CLOCK_MONOTONIC, timeout_ms, &ts);
	pthread_mutex_lock(&s->mu);
	while (!s->len && !s->lost) {
		if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT)
			break;
	}
	if (s->lost) {
		/* reported once; events after the loss stay queued */
		s->lost = 0;
		rc = -1;
	} else if (s->len) {
		*type = s->q[s->head].type;
		*data = s->q[s->head].data;
		s->head = (s->head + 1) % GH_HUB_QUEUE;
		s->len--;
		rc = 1;
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}
