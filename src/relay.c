/*
 * relay.c - the threads that read streamed upstream replies (see relay.h).
 *
 * There is one relay per two CPUs (at least one, at most RELAYS_MAX); a
 * new job goes to the next relay in turn and stays with it. Each relay's
 * epoll set holds its jobs' upstream connections (data: the job) and,
 * while watched, their clients' connections (data: the job with its low
 * bit set), plus an eventfd (data: 0) through which workers ask for ticks
 * and hand over new jobs. Only a relay's thread changes its epoll set: it
 * adds a new job's descriptors (or, when it cannot, hands the job straight
 * back as refused) and removes a job's when it leaves. A job's worker is told
 * after the whole batch of events has been handled, so no later event of
 * the same batch can reach a job whose worker has already gone on.
 *
 * Locking: a relay's mu guards its lists of new jobs and of ticks asked
 * for, and each of its jobs' finished and queued; a worker waits on its
 * job's condition variable under it. Everything else of a job belongs to
 * its worker until gh_relay_start and after it is back, and to the relay
 * thread in between.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "relay.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define EVENTS_MAX 64
#define RELAYS_MAX 8
/* A worker whose tick the relay has not run yet asks again this much later. */
#define ASK_AGAIN_NS 10000000LL

struct relay {
	int ep, efd;
	pthread_mutex_t mu;
	struct gh_relay_job *incoming; /* jobs to add to the epoll set */
	struct gh_relay_job *queue;    /* ticks asked for */
	char buf[GH_RELAY_BUF];        /* the jobs' reads (relay.h) */
};

static struct {
	pthread_once_t once;
	_Atomic int want;       /* relays to start (0: one per two CPUs) */
	int n;                  /* relays running */
	_Atomic unsigned turn;  /* the next job's relay */
	struct relay r[RELAYS_MAX];
} R = {.once = PTHREAD_ONCE_INIT};

static void *relay_main(void *ud);

/* Starts relay l: 0, or -1 with errno set. */
static int relay_open(struct relay *l, int i)
{
	struct epoll_event ev;
	pthread_attr_t at;
	pthread_t th;
	char name[16];
	int rc;

	l->ep = epoll_create1(EPOLL_CLOEXEC);
	l->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.u64 = 0;
	if (l->ep < 0 || l->efd < 0 || epoll_ctl(l->ep, EPOLL_CTL_ADD, l->efd, &ev) != 0)
		goto fail;
	pthread_mutex_init(&l->mu, NULL);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &at, relay_main, l);
	pthread_attr_destroy(&at);
	if (rc != 0) {
		pthread_mutex_destroy(&l->mu);
		errno = rc;
		goto fail;
	}
	snprintf(name, sizeof(name), "gatehouse-rel%c", (char)('0' + i)); /* i < 10 */
	pthread_setname_np(th, name);
	return 0;
fail:
	rc = errno;
	if (l->ep >= 0)
		close(l->ep);
	if (l->efd >= 0)
		close(l->efd);
	l->ep = l->efd = -1;
	errno = rc;
	return -1;
}

/* One relay per two CPUs: the relays' reads and writes to clients are
 * most of a streaming gateway's CPU, and one thread would cap it at one
 * CPU. Not one per CPU: each send wakes the client's reader (and each
 * read followed the upstream's send), so the relays share their CPUs with
 * that work; on 2 CPUs a second relay only added context switches. */
static void relay_init(void)
{
	long half = sysconf(_SC_NPROCESSORS_ONLN) / 2;
	int want = atomic_load(&R.want);

	if (!want)
		want = half < 1 ? 1 : half > RELAYS_MAX ? RELAYS_MAX : (int)half;

	while (R.n < want && relay_open(&R.r[R.n], R.n) == 0)
		R.n++;
	if (R.n < want)
		gh_warn("relay: cannot start more than %d of %d relay threads (%s)%s", R.n, want,
			strerror(errno),
			R.n ? "" : "; each stream's worker reads its upstream");
}

/* Out of the epoll set, to be handed back after the batch. */
static void leave(struct gh_relay_job *j, struct gh_relay_job **left)
{
	epoll_ctl(j->relay->ep, EPOLL_CTL_DEL, j->fd, NULL);
	gh_relay_unwatch(j);
	j->left = 1;
	j->next_left = *left;
	*left = j;
}

static void unqueue(struct gh_relay_job *j)
{
	struct gh_relay_job **p;

	for (p = &j->relay->queue; *p; p = &(*p)->next_queued)
		if (*p == j) {
			*p = j->next_queued;
			break;
		}
	j->queued = 0;
}

/* Hands the jobs that left back to their workers. */
static void hand_back(struct relay *l, struct gh_relay_job *left)
{
	pthread_mutex_lock(&l->mu);
	while (left) {
		struct gh_relay_job *j = left;

		left = j->next_left;
		if (j->queued)
			unqueue(j);
		j->finished = 1;
		pthread_cond_signal(&j->back); /* j is its worker's from here */
	}
	pthread_mutex_unlock(&l->mu);
}

/* Adds a new job's descriptors: 0, or -1 (refused) when its connection
 * cannot be added. */
static int take(struct relay *l, struct gh_relay_job *j)
{
	struct epoll_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.u64 = (uint64_t)(uintptr_t)j;
	if (epoll_ctl(l->ep, EPOLL_CTL_ADD, j->fd, &ev) != 0) {
		gh_warn("relay: cannot watch an upstream connection (%s); its worker reads it",
			strerror(errno));
		return -1;
	}
	if (j->wake > 0) {
		ev.events = EPOLLIN | EPOLLRDHUP;
		ev.data.u64 = (uint64_t)(uintptr_t)j | 1;
		if (epoll_ctl(l->ep, EPOLL_CTL_ADD, j->wake, &ev) != 0)
			j->wake = 0; /* ticks by the clock still notice a hang-up */
	}
	return 0;
}

/* The eventfd: new jobs to add, ticks to run. */
static void run_control(struct relay *l, struct gh_relay_job **left)
{
	struct gh_relay_job *q, *in, *j;
	uint64_t n;

	if (read(l->efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		gh_warn("relay: eventfd: %s", strerror(errno));
	pthread_mutex_lock(&l->mu);
	in = l->incoming;
	l->incoming = NULL;
	/* a worker may ask again as soon as its job is off the queue: the
	 * relay walks its own links */
	for (q = NULL, j = l->queue; j; j = j->next_queued) {
		j->queued = 0;
		j->next_tick = q;
		q = j;
	}
	l->queue = NULL;
	pthread_mutex_unlock(&l->mu);
	while (in) {
		j = in;
		in = j->next_new;
		if (take(l, j) != 0) {
			j->refused = j->left = 1;
			j->next_left = *left;
			*left = j;
		}
	}
	while (q) {
		j = q;
		q = j->next_tick;
		if (!j->left && j->ready(j, GH_RELAY_TICK, l->buf))
			leave(j, left);
	}
}

static void *relay_main(void *ud)
{
	struct relay *l = ud;
	struct epoll_event ev[EVENTS_MAX];

	for (;;) {
		struct gh_relay_job *left = NULL;
		int n = epoll_wait(l->ep, ev, EVENTS_MAX, -1), i, control = 0;

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
			if (j->ready(j, d & 1 ? GH_RELAY_STIRRED : GH_RELAY_READABLE, l->buf))
				leave(j, &left);
		}
		if (control)
			run_control(l, &left);
		if (left)
			hand_back(l, left);
	}
	return NULL;
}

void gh_relay_threads(int n)
{
	atomic_store(&R.want, n < 1 ? 1 : n > RELAYS_MAX ? RELAYS_MAX : n);
}

int gh_relay_start(struct gh_relay_job *j)
{
	pthread_condattr_t ca;
	uint64_t one = 1;
	struct relay *l;

	pthread_once(&R.once, relay_init);
	if (!R.n)
		return -1;
	l = &R.r[atomic_fetch_add(&R.turn, 1) % (unsigned)R.n];
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&j->back, &ca);
	pthread_condattr_destroy(&ca);
	j->relay = l;
	j->finished = j->queued = j->left = j->refused = 0;
	j->next_left = NULL;
	pthread_mutex_lock(&l->mu);
	j->next_new = l->incoming;
	l->incoming = j;
	pthread_mutex_unlock(&l->mu);
	if (write(l->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		gh_warn("relay: eventfd: %s", strerror(errno));
	return 0;
}

/* Asks the relay for j's tick, unless one is asked for already. */
static void ask(struct gh_relay_job *j)
{
	struct relay *l = j->relay;
	uint64_t one = 1;
	int wake = 0;

	pthread_mutex_lock(&l->mu);
	if (!j->finished && !j->queued) {
		j->queued = 1;
		j->next_queued = l->queue;
		l->queue = j;
		wake = 1;
	}
	pthread_mutex_unlock(&l->mu);
	if (wake && write(l->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		gh_warn("relay: eventfd: %s", strerror(errno));
}

void gh_relay_wait(struct gh_relay_job *j)
{
	struct relay *l = j->relay;
	int64_t asked = 0;

	pthread_mutex_lock(&l->mu);
	while (!j->finished) {
		int64_t due = atomic_load(&j->due_ns);
		struct timespec ts;

		if (asked && due <= asked)
			due = asked + ASK_AGAIN_NS;
		ts.tv_sec = (time_t)(due / 1000000000LL);
		ts.tv_nsec = (long)(due % 1000000000LL);
		if (pthread_cond_timedwait(&j->back, &l->mu, &ts) == ETIMEDOUT && !j->finished) {
			pthread_mutex_unlock(&l->mu);
			asked = gh_mono_ns();
			ask(j);
			pthread_mutex_lock(&l->mu);
		}
	}
	pthread_mutex_unlock(&l->mu);
	pthread_cond_destroy(&j->back);
}

void gh_relay_unwatch(struct gh_relay_job *j)
{
	if (j->wake > 0) {
		epoll_ctl(j->relay->ep, EPOLL_CTL_DEL, j->wake, NULL);
		j->wake = 0;
	}
}
