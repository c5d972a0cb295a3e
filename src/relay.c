/*
 * relay.c - one thread that reads streamed upstream replies (see relay.h).
 *
 * The relay's epoll set holds each job's upstream connection (data: the
 * job) and, while watched, the client's connection (data: the job with
 * its low bit set), plus an eventfd (data: 0) through which workers ask
 * for ticks and hand over new jobs. Only the relay thread changes the
 * epoll set: it adds a new job's descriptors (or, when it cannot, hands
 * the job straight back as refused) and removes a job's when it leaves.
 * A job's worker is told after the whole batch of events has been
 * handled, so no later event of the same batch can reach a job whose
 * worker has already gone on.
 *
 * Locking: mu guards the lists of new jobs and of ticks asked for, and
 * each job's finished and queued; a worker waits on its job's condition
 * variable under it. Everything else of a job belongs to its worker until
 * gh_relay_start and after it is back, and to the relay thread in between.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "relay.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define EVENTS_MAX 64
/* A worker whose tick the relay has not run yet asks again this much later. */
#define ASK_AGAIN_NS 10000000LL

static struct {
	pthread_once_t once;
	int ok;
	int ep, efd;
	pthread_mutex_t mu;
	struct gh_relay_job *incoming; /* jobs to add to the epoll set */
	struct gh_relay_job *queue;    /* ticks asked for */
} R = {.once = PTHREAD_ONCE_INIT, .ep = -1, .efd = -1, .mu = PTHREAD_MUTEX_INITIALIZER};

static void *relay_main(void *ud);

static void relay_init(void)
{
	struct epoll_event ev;
	pthread_attr_t at;
	pthread_t th;

	R.ep = epoll_create1(EPOLL_CLOEXEC);
	R.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (R.ep < 0 || R.efd < 0)
		goto fail;
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.u64 = 0;
	if (epoll_ctl(R.ep, EPOLL_CTL_ADD, R.efd, &ev) != 0)
		goto fail;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &at, relay_main, NULL) != 0) {
		pthread_attr_destroy(&at);
		goto fail;
	}
	pthread_attr_destroy(&at);
	R.ok = 1;
	return;
fail:
	gh_warn("relay: cannot start (%s); each stream's worker reads its upstream",
		strerror(errno));
	if (R.ep >= 0)
		close(R.ep);
	if (R.efd >= 0)
		close(R.efd);
	R.ep = R.efd = -1;
}

/* Out of the epoll set, to be handed back after the batch. */
static void leave(struct gh_relay_job *j, struct gh_relay_job **left)
{
	epoll_ctl(R.ep, EPOLL_CTL_DEL, j->fd, NULL);
	gh_relay_unwatch(j);
	j->left = 1;
	j->next_left = *left;
	*left = j;
}

static void unqueue(struct gh_relay_job *j)
{
	struct gh_relay_job **p;

	for (p = &R.queue; *p; p = &(*p)->next_queued)
		if (*p == j) {
			*p = j->next_queued;
			break;
		}
	j->queued = 0;
}

/* Hands the jobs that left back to their workers. */
static void hand_back(struct gh_relay_job *left)
{
	pthread_mutex_lock(&R.mu);
	while (left) {
		struct gh_relay_job *j = left;

		left = j->next_left;
		if (j->queued)
			unqueue(j);
		j->finished = 1;
		pthread_cond_signal(&j->back); /* j is its worker's from here */
	}
	pthread_mutex_unlock(&R.mu);
}

/* Adds a new job's descriptors: 0, or -1 (refused) when its connection
 * cannot be added. */
static int take(struct gh_relay_job *j)
{
	struct epoll_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.u64 = (uint64_t)(uintptr_t)j;
	if (epoll_ctl(R.ep, EPOLL_CTL_ADD, j->fd, &ev) != 0) {
		gh_warn("relay: cannot watch an upstream connection (%s); its worker reads it",
			strerror(errno));
		return -1;
	}
	if (j->wake > 0) {
		ev.events = EPOLLIN | EPOLLRDHUP;
		ev.data.u64 = (uint64_t)(uintptr_t)j | 1;
		if (epoll_ctl(R.ep, EPOLL_CTL_ADD, j->wake, &ev) != 0)
			j->wake = 0; /* ticks by the clock still notice a hang-up */
	}
	return 0;
}

/* The eventfd: new jobs to add, ticks to run. */
static void run_control(struct gh_relay_job **left)
{
	struct gh_relay_job *q, *in, *j;
	uint64_t n;

	if (read(R.efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		gh_warn("relay: eventfd: %s", strerror(errno));
	pthread_mutex_lock(&R.mu);
	in = R.incoming;
	R.incoming = NULL;
	/* a worker may ask again as soon as its job is off the queue: the
	 * relay walks its own links */
	for (q = NULL, j = R.queue; j; j = j->next_queued) {
		j->queued = 0;
		j->next_tick = q;
		q = j;
	}
	R.queue = NULL;
	pthread_mutex_unlock(&R.mu);
	while (in) {
		j = in;
		in = j->next_new;
		if (take(j) != 0) {
			j->refused = j->left = 1;
			j->next_left = *left;
			*left = j;
		}
	}
	while (q) {
		j = q;
		q = j->next_tick;
		if (!j->left && j->ready(j, GH_RELAY_TICK))
			leave(j, left);
	}
}

static void *relay_main(void *ud)
{
	struct epoll_event ev[EVENTS_MAX];

	(void)ud;
	pthread_setname_np(pthread_self(), "gatehouse-relay");
	for (;;) {
		struct gh_relay_job *left = NULL;
		int n = epoll_wait(R.ep, ev, EVENTS_MAX, -1), i, control = 0;

		if (n < 0) {
			if (errno != EINTR)
				gh_warn("relay: epoll_wait: %s", strerror(errno));
			continue;
		}
		for (i = 0; i < n; i++) {
			uint64_t d = ev[i].data.u64;
			struct gh_relay_job *j = (struct gh_relay_job *)(uintptr_t)(d & ~(uint64_t)1);

			if (!d) {
				control = 1;
				continue;
			}
			if (j->left)
				continue;
			if (j->ready(j, d & 1 ? GH_RELAY_STIRRED : GH_RELAY_READABLE))
				leave(j, &left);
		}
		if (control)
			run_control(&left);
		if (left)
			hand_back(left);
	}
	return NULL;
}

int gh_relay_start(struct gh_relay_job *j)
{
	pthread_condattr_t ca;
	uint64_t one = 1;

	pthread_once(&R.once, relay_init);
	if (!R.ok)
		return -1;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&j->back, &ca);
	pthread_condattr_destroy(&ca);
	j->finished = j->queued = j->left = j->refused = 0;
	j->next_left = NULL;
	pthread_mutex_lock(&R.mu);
	j->next_new = R.incoming;
	R.incoming = j;
	pthread_mutex_unlock(&R.mu);
	if (write(R.efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		gh_warn("relay: eventfd: %s", strerror(errno));
	return 0;
}

/* Asks the relay for j's tick, unless one is asked for already. */
static void ask(struct gh_relay_job *j)
{
	uint64_t one = 1;
	int wake = 0;

	pthread_mutex_lock(&R.mu);
	if (!j->finished && !j->queued) {
		j->queued = 1;
		j->next_queued = R.queue;
		R.queue = j;
		wake = 1;
	}
	pthread_mutex_unlock(&R.mu);
	if (wake && write(R.efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		gh_warn("relay: eventfd: %s", strerror(errno));
}

void gh_relay_wait(struct gh_relay_job *j)
{
	int64_t asked = 0;

	pthread_mutex_lock(&R.mu);
	while (!j->finished) {
		int64_t due = atomic_load(&j->due_ns);
		struct timespec ts;

		if (asked && due <= asked)
			due = asked + ASK_AGAIN_NS;
		ts.tv_sec = (time_t)(due / 1000000000LL);
		ts.tv_nsec = (long)(due % 1000000000LL);
		if (pthread_cond_timedwait(&j->back, &R.mu, &ts) == ETIMEDOUT && !j->finished) {
			pthread_mutex_unlock(&R.mu);
			asked = gh_mono_ns();
			ask(j);
			pthread_mutex_lock(&R.mu);
		}
	}
	pthread_mutex_unlock(&R.mu);
	pthread_cond_destroy(&j->back);
}

void gh_relay_unwatch(struct gh_relay_job *j)
{
	if (j->wake > 0) {
		epoll_ctl(R.ep, EPOLL_CTL_DEL, j->wake, NULL);
		j->wake = 0;
	}
}
