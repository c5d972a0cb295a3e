/*
 * test_relay.c - the relay threads: a job's callback runs for every read
 * until it says the job is done, its worker asks for ticks when they are
 * due, a stirred client connection is reported and can be unwatched, and
 * many workers hand their jobs over at once, spread over the relays with
 * each job kept by one (the test to run under -fsanitize=thread).
 */
#include "relay.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "t.h"
#include "util.h"

#define FAR_NS (INT64_MAX / 2)

struct reader {
	struct gh_relay_job job; /* first */
	size_t bytes;            /* read so far */
	int ticks, stirred, reads;
	int tick_limit;          /* back after this many ticks (0: never) */
	int64_t every_ns;        /* between ticks */
	pthread_t on;            /* the thread of the first callback */
	int calls, moved;        /* callbacks; those on another thread */
};

static int reader_ready(struct gh_relay_job *j, enum gh_relay_why why, char *buf)
{
	struct reader *rd = (struct reader *)j;
	ssize_t n;

	if (rd->calls++ == 0)
		rd->on = pthread_self();
	else if (!pthread_equal(rd->on, pthread_self()))
		rd->moved++;
	switch (why) {
	case GH_RELAY_READABLE:
		rd->reads++;
		while ((n = recv(j->fd, buf, GH_RELAY_BUF, MSG_DONTWAIT)) > 0)
			rd->bytes += (size_t)n;
		return n == 0 || (n < 0 && errno != EAGAIN); /* the end, or broken */
	case GH_RELAY_STIRRED:
		rd->stirred++;
		gh_relay_unwatch(j);
		return 0;
	case GH_RELAY_TICK:
		if (gh_mono_ns() < atomic_load(&j->due_ns))
			return 0; /* asked early: not due yet */
		rd->ticks++;
		atomic_store(&j->due_ns, gh_mono_ns() + rd->every_ns);
		return rd->tick_limit && rd->ticks >= rd->tick_limit;
	}
	return 1;
}

static void reader_init(struct reader *rd, int fd)
{
	/* three relays, whatever the CPUs: the jobs spread over them */
	gh_relay_threads(3);
	memset(rd, 0, sizeof(*rd));
	rd->job.fd = fd;
	rd->job.wake = 0;
	rd->job.ready = reader_ready;
	atomic_init(&rd->job.due_ns, FAR_NS);
}

struct writer {
	int fd;
	int chunks;
	size_t size;
	int delay_us;
};

static void *writer_main(void *ud)
{
	struct writer *w = ud;
	char buf[4096];
	int i;

	memset(buf, 'x', sizeof(buf));
	for (i = 0; i < w->chunks; i++) {
		size_t off = 0;

		while (off < w->size) {
			ssize_t n = send(w->fd, buf, w->size - off, MSG_NOSIGNAL);

			if (n <= 0)
				break;
			off += (size_t)n;
		}
		if (w->delay_us)
			usleep((useconds_t)w->delay_us);
	}
	close(w->fd);
	return NULL;
}

static void test_reads_until_the_end(void)
{
	int sv[2];
	struct reader rd;
	struct writer w;
	pthread_t th;

	T_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	reader_init(&rd, sv[0]);
	w = (struct writer){sv[1], 50, 1000, 2000};
	T_ASSERT(gh_relay_start(&rd.job) == 0);
	pthread_create(&th, NULL, writer_main, &w);
	gh_relay_wait(&rd.job);
	pthread_join(th, NULL);
	T_EQ_INT(rd.bytes, 50 * 1000);
	T_ASSERT(rd.reads > 1);
	T_EQ_INT(rd.job.refused, 0);
	close(sv[0]);
}

static void test_ticks_are_asked_for_when_due(void)
{
	int sv[2];
	struct reader rd;

	/* nothing ever comes: only the worker's clock moves the job */
	T_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	reader_init(&rd, sv[0]);
	rd.tick_limit = 5;
	rd.every_ns = 10 * 1000000LL;
	atomic_store(&rd.job.due_ns, gh_mono_ns() + rd.every_ns);
	T_ASSERT(gh_relay_start(&rd.job) == 0);
	gh_relay_wait(&rd.job);
	T_EQ_INT(rd.ticks, 5);
	T_EQ_INT(rd.bytes, 0);
	close(sv[0]);
	close(sv[1]);
}

static void test_a_stirred_client_is_reported_once_unwatched(void)
{
	int sv[2], cv[2];
	struct reader rd;
	struct writer w;
	pthread_t th;

	T_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	T_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cv) == 0);
	reader_init(&rd, sv[0]);
	rd.job.wake = cv[0];
	/* the client sends bytes (and keeps its end readable) before the
	 * reply starts */
	T_EQ_INT(send(cv[1], "GET", 3, 0), 3);
	T_ASSERT(gh_relay_start(&rd.job) == 0);
	w = (struct writer){sv[1], 20, 100, 5000};
	pthread_create(&th, NULL, writer_main, &w);
	gh_relay_wait(&rd.job);
	pthread_join(th, NULL);
	T_EQ_INT(rd.stirred, 1);
	T_EQ_INT(rd.job.wake, 0);
	T_EQ_INT(rd.bytes, 20 * 100);
	close(sv[0]);
	close(cv[0]);
	close(cv[1]);
}

#define WORKERS 48

struct worker {
	pthread_t th;
	int ok, moved;
	size_t bytes;
	pthread_t relay; /* the thread that ran its callbacks */
};

static void *worker_main(void *ud)
{
	struct worker *wk = ud;
	int sv[2];
	struct reader rd;
	struct writer w;
	pthread_t th;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return NULL;
	reader_init(&rd, sv[0]);
	rd.every_ns = 5 * 1000000LL;
	atomic_store(&rd.job.due_ns, gh_mono_ns() + rd.every_ns);
	w = (struct writer){sv[1], 40, 300, 1000};
	if (gh_relay_start(&rd.job) == 0) {
		pthread_create(&th, NULL, writer_main, &w);
		gh_relay_wait(&rd.job);
		pthread_join(th, NULL);
		wk->ok = 1;
		wk->bytes = rd.bytes;
		wk->moved = rd.moved;
		wk->relay = rd.on;
	}
	close(sv[0]);
	return NULL;
}

static void test_many_workers_at_once(void)
{
	struct worker wk[WORKERS];
	int i, k, relays = 0;

	memset(wk, 0, sizeof(wk));
	for (i = 0; i < WORKERS; i++)
		T_ASSERT(pthread_create(&wk[i].th, NULL, worker_main, &wk[i]) == 0);
	for (i = 0; i < WORKERS; i++)
		pthread_join(wk[i].th, NULL);
	for (i = 0; i < WORKERS; i++) {
		T_EQ_INT(wk[i].ok, 1);
		T_EQ_INT(wk[i].bytes, 40 * 300);
		T_EQ_INT(wk[i].moved, 0);
	}
	/* handed out in turn: every relay got some of them */
	for (i = 0; i < WORKERS; i++) {
		for (k = 0; k < i && !pthread_equal(wk[k].relay, wk[i].relay); k++)
			;
		relays += k == i;
	}
	T_EQ_INT(relays, 3);
}

T_MAIN(T(test_reads_until_the_end), T(test_ticks_are_asked_for_when_due),
       T(test_a_stirred_client_is_reported_once_unwatched), T(test_many_workers_at_once))
