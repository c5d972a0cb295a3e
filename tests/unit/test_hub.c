/*
 * test_hub.c - live event fan-out: every subscriber of a topic gets every
 * event in order, other topics get nothing, waiting times out, a full
 * queue reports the loss once and the subscription goes on, and many
 * publishers with subscribers coming and going at the same time (the test
 * to run under -fsanitize=thread).
 */
#include "hub.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "json.h"
#include "t.h"
#include "util.h"

static cJSON *payload_n(int n)
{
	cJSON *p = cJSON_CreateObject();

	cJSON_AddNumberToObject(p, "n", n);
	return p;
}

static void publish_n(struct gh_hub *h, const char *topic, const char *type, int n)
{
	cJSON *p = payload_n(n);

	gh_hub_publish(h, topic, type, p);
	cJSON_Delete(p);
}

/* The "n" of a delivered event's data, or -1. */
static int data_n(const char *data)
{
	cJSON *v = cJSON_Parse(data);
	cJSON *n = cJSON_GetObjectItem(v, "n");
	int r = cJSON_IsNumber(n) ? n->valueint : -1;

	cJSON_Delete(v);
	return r;
}

static void test_fanout(void)
{
	struct gh_hub *h = gh_hub_new();
	struct gh_hub_sub *a, *b, *other;
	cJSON *p = cJSON_Parse("{\"text\":\"h\\u00e9\\\"llo\",\"k\":[1,2]}");
	char *type, *data;
	int i;

	T_ASSERT(h && p);
	a = gh_hub_subscribe(h, "run_1");
	b = gh_hub_subscribe(h, "run_1");
	other = gh_hub_subscribe(h, "run_2");
	T_ASSERT(a && b && other);
	gh_hub_publish(h, "run_1", "text-delta", p);
	/* the caller keeps the payload; subscribers get their own copies */
	cJSON_Delete(p);
	T_EQ_INT(gh_hub_next(a, 1000, &type, &data), 1);
	T_EQ_STR(type, "text-delta");
	T_EQ_STR(data, "{\"text\":\"h\xc3\xa9\\\"llo\",\"k\":[1,2]}");
	free(type);
	free(data);
	T_EQ_INT(gh_hub_next(b, 1000, &type, &data), 1);
	T_EQ_STR(type, "text-delta");
	free(type);
	free(data);
	/* topic isolation */
	T_EQ_INT(gh_hub_next(other, 0, &type, &data), 0);
	T_ASSERT(type == NULL && data == NULL);
	/* order is kept */
	for (i = 0; i < 100; i++)
		publish_n(h, "run_1", "ev", i);
	publish_n(h, "run_2", "mine", 7);
	for (i = 0; i < 100; i++) {
		T_EQ_INT(gh_hub_next(a, 1000, &type, &data), 1);
		T_EQ_INT(data_n(data), i);
		free(type);
		free(data);
	}
	T_EQ_INT(gh_hub_next(other, 1000, &type, &data), 1);
	T_EQ_STR(type, "mine");
	free(type);
	free(data);
	T_EQ_INT(gh_hub_next(other, 0, &type, &data), 0);
	/* an unsubscribed watcher gets nothing more; b still holds 100 events,
	 * freed with it */
	gh_hub_unsubscribe(h, a);
	publish_n(h, "run_1", "late", 1);
	T_EQ_INT(gh_hub_next(b, 0, &type, &data), 1);
	free(type);
	free(data);
	gh_hub_unsubscribe(h, b);
	gh_hub_unsubscribe(h, other);
	gh_hub_unsubscribe(h, NULL);
	/* publishing with nobody listening, or to nothing */
	publish_n(h, "run_1", "nobody", 0);
	publish_n(NULL, "run_1", "x", 0);
	gh_hub_publish(h, NULL, "x", NULL);
	gh_hub_free(h);
	gh_hub_free(NULL);
}

static void test_timeout(void)
{
	struct gh_hub *h = gh_hub_new();
	struct gh_hub_sub *s = gh_hub_subscribe(h, "t");
	char *type = (char *)"x", *data = (char *)"y";
	int64_t t0 = gh_mono_ns(), dt;

	T_EQ_INT(gh_hub_next(s, 150, &type, &data), 0);
	dt = gh_mono_ns() - t0;
	T_ASSERT(type == NULL && data == NULL);
	T_ASSERT(dt >= INT64_C(140000000));
	T_ASSERT(dt < INT64_C(2000000000));
	/* more than a second: the seconds part of the deadline is right */
	t0 = gh_mono_ns();
	T_EQ_INT(gh_hub_next(s, 1100, &type, &data), 0);
	dt = gh_mono_ns() - t0;
	T_ASSERT(dt >= INT64_C(1090000000) && dt < INT64_C(3000000000));
	gh_hub_unsubscribe(h, s);
	gh_hub_free(h);
}

struct delayed {
	struct gh_hub *h;
	int delay_ms;
};

static void *publish_later(void *arg)
{
	struct delayed *d = arg;

	usleep((useconds_t)d->delay_ms * 1000);
	publish_n(d->h, "t", "late", 42);
	return NULL;
}

/* A waiting subscriber wakes when an event arrives, not at the timeout. */
static void test_wakeup(void)
{
	struct gh_hub *h = gh_hub_new();
	struct gh_hub_sub *s = gh_hub_subscribe(h, "t");
	struct delayed d = {h, 100};
	pthread_t th;
	char *type, *data;
	int64_t t0 = gh_mono_ns(), dt;

	T_EQ_INT(pthread_create(&th, NULL, publish_later, &d), 0);
	T_EQ_INT(gh_hub_next(s, 10000, &type, &data), 1);
	dt = gh_mono_ns() - t0;
	pthread_join(th, NULL);
	T_EQ_INT(data_n(data), 42);
	free(type);
	free(data);
	T_ASSERT(dt < INT64_C(5000000000));
	gh_hub_unsubscribe(h, s);
	gh_hub_free(h);
}

static void test_overflow(void)
{
	struct gh_hub *h = gh_hub_new();
	struct gh_hub_sub *s = gh_hub_subscribe(h, "t"), *calm = gh_hub_subscribe(h, "t");
	char *type, *data;
	int i, rc;

	for (i = 0; i < GH_HUB_QUEUE + 10; i++)
		publish_n(h, "t", "ev", i);
	/* the loss is reported once, then the subscription goes on */
	T_EQ_INT(gh_hub_next(s, 1000, &type, &data), -1);
	T_ASSERT(type == NULL && data == NULL);
	rc = gh_hub_next(s, 0, &type, &data);
	T_ASSERT(rc != -1);
	free(type);
	free(data);
	publish_n(h, "t", "after", 100000);
	for (i = 0; i < GH_HUB_QUEUE + 2; i++) {
		rc = gh_hub_next(s, 0, &type, &data);
		if (rc != 1)
			break;
		rc = !strcmp(type, "after");
		free(type);
		free(data);
		if (rc)
			break;
	}
	T_ASSERT(i < GH_HUB_QUEUE + 2);
	T_EQ_INT(rc, 1);
	T_EQ_INT(gh_hub_next(s, 0, &type, &data), 0);
	/* the other subscriber of the same topic drains its own full queue
	 * and sees the loss when it gets there */
	for (i = 0; i < 5; i++) {
		T_EQ_INT(gh_hub_next(calm, 0, &type, &data), i == 0 ? -1 : 1);
		free(type);
		free(data);
	}
	gh_hub_free(h); /* frees the subscriptions still there */
}

/* After a loss is reported the watcher reloads the state (a fresh
 * snapshot of the run); events queued before the loss are older than that
 * snapshot and must not follow it (a watcher would show text twice). */
static void test_overflow_drops_stale_events(void)
{
	struct gh_hub *h = gh_hub_new();
	struct gh_hub_sub *s = gh_hub_subscribe(h, "t");
	char *type, *data;
	int i, rc, stale = 0, fresh = 0, lost_again = 0;

	for (i = 0; i < GH_HUB_QUEUE + 1; i++)
		publish_n(h, "t", "ev", i);
	rc = gh_hub_next(s, 1000, &type, &data);
	/* the watcher reloads here, then a new event is published */
	publish_n(h, "t", "fresh", 1000000);
	for (i = 0; i < GH_HUB_QUEUE + 8 && !fresh; i++) {
		int r = gh_hub_next(s, 0, &type, &data);

		if (r == 0)
			break;
		if (r == -1) {
			lost_again++;
			continue;
		}
		if (!strcmp(type, "fresh"))
			fresh = 1;
		else if (data_n(data) < GH_HUB_QUEUE) /* queued when the queue overflowed */
			stale++;
		free(type);
		free(data);
	}
	gh_hub_unsubscribe(h, s);
	gh_hub_free(h);
	T_EQ_INT(rc, -1);
	if (stale || !fresh || lost_again)
		T_FAIL("after the loss was reported: %d stale events from before it, the next "
		       "event %s, %d more losses reported",
		       stale, fresh ? "delivered" : "lost", lost_again);
}

/* ---- concurrency ---- */

#define PUBLISHERS 8
#define EVENTS 2000

struct pub_arg {
	struct gh_hub *h;
	int id;
};

static void *publisher(void *arg)
{
	struct pub_arg *a = arg;
	int i;

	for (i = 0; i < EVENTS; i++) {
		cJSON *p = cJSON_CreateObject();

		cJSON_AddNumberToObject(p, "pub", a->id);
		cJSON_AddNumberToObject(p, "n", i);
		gh_hub_publish(a->h, a->id % 2 ? "odd" : "even", "ev", p);
		cJSON_Delete(p);
	}
	return NULL;
}

struct sub_arg {
	struct gh_hub *h;
	const char *topic;
	_Atomic int *stop;
	int received, lost, misrouted, out_of_order;
	int last[PUBLISHERS];
};

static void *subscriber(void *arg)
{
	struct sub_arg *a = arg;
	struct gh_hub_sub *s = gh_hub_subscribe(a->h, a->topic);
	int i, idle = 0;

	for (i = 0; i < PUBLISHERS; i++)
		a->last[i] = -1;
	while (s) {
		char *type, *data;
		int rc = gh_hub_next(s, 20, &type, &data);

		if (rc == 1) {
			cJSON *v = cJSON_Parse(data);
			int pub = (int)gh_json_int(v, "pub", -1), n = (int)gh_json_int(v, "n", -1);

			if (pub < 0 || pub >= PUBLISHERS ||
			    (pub % 2 ? "odd" : "even")[0] != a->topic[0])
				a->misrouted++;
			else if (n <= a->last[pub])
				a->out_of_order++;
			else
				a->last[pub] = n;
			a->received++;
			cJSON_Delete(v);
			free(type);
			free(data);
			idle = 0;
		} else if (rc == -1) {
			a->lost++;
		} else if (atomic_load(a->stop) && ++idle > 3) {
			break;
		}
	}
	gh_hub_unsubscribe(a->h, s);
	return NULL;
}

/* Subscribers that come and go while events fly. */
static void *churn(void *arg)
{
	struct sub_arg *a = arg;

	while (!atomic_load(a->stop)) {
		struct gh_hub_sub *s = gh_hub_subscribe(a->h, a->topic);
		char *type, *data;

		if (gh_hub_next(s, 1, &type, &data) == 1) {
			free(type);
			free(data);
		}
		gh_hub_unsubscribe(a->h, s);
	}
	return NULL;
}

static void test_concurrent(void)
{
	struct gh_hub *h = gh_hub_new();
	pthread_t pubs[PUBLISHERS], subs[2], churner;
	struct pub_arg pa[PUBLISHERS];
	struct sub_arg sa[2], ca;
	_Atomic int stop = 0;
	int i, j;

	memset(sa, 0, sizeof(sa));
	sa[0].h = sa[1].h = h;
	sa[0].topic = "even";
	sa[1].topic = "odd";
	sa[0].stop = sa[1].stop = &stop;
	memset(&ca, 0, sizeof(ca));
	ca.h = h;
	ca.topic = "odd";
	ca.stop = &stop;
	for (i = 0; i < 2; i++)
		T_EQ_INT(pthread_create(&subs[i], NULL, subscriber, &sa[i]), 0);
	T_EQ_INT(pthread_create(&churner, NULL, churn, &ca), 0);
	usleep(20000); /* let the subscribers subscribe */
	for (i = 0; i < PUBLISHERS; i++) {
		pa[i].h = h;
		pa[i].id = i;
		T_EQ_INT(pthread_create(&pubs[i], NULL, publisher, &pa[i]), 0);
	}
	for (i = 0; i < PUBLISHERS; i++)
		pthread_join(pubs[i], NULL);
	atomic_store(&stop, 1);
	for (i = 0; i < 2; i++)
		pthread_join(subs[i], NULL);
	pthread_join(churner, NULL);
	for (i = 0; i < 2; i++) {
		T_EQ_INT(sa[i].misrouted, 0);
		T_EQ_INT(sa[i].out_of_order, 0);
		T_ASSERT(sa[i].received > 0);
		T_ASSERT(sa[i].received <= EVENTS * PUBLISHERS / 2);
		/* nothing lost without saying so */
		if (sa[i].lost == 0) {
			T_EQ_INT(sa[i].received, EVENTS * PUBLISHERS / 2);
			for (j = i; j < PUBLISHERS; j += 2)
				T_EQ_INT(sa[i].last[j], EVENTS - 1);
		}
	}
	gh_hub_free(h);
}

T_MAIN(T(test_fanout), T(test_timeout), T(test_wakeup), T(test_overflow),
       T(test_overflow_drops_stale_events), T(test_concurrent))
