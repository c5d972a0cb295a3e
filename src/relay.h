/*
 * relay.h - the threads that read streamed upstream replies for the
 * workers that asked for them.
 *
 * A stream's reply comes in many small reads (a model's tokens). Read by
 * the stream's own worker, each read wakes that worker: a thousand streams
 * are a thousand threads taking turns on the CPUs, two context switches
 * and a poll per token. A worker may instead hand its upstream connection
 * to a relay: one epoll set per relay thread (one per two CPUs) holds such
 * connections (and the clients', to notice a hang-up), and the relay
 * thread runs the job's callback for each read, so the events of many
 * streams are handled in one wake-up. The worker sleeps until its job
 * leaves the relay and only keeps time: when a tick is due (heartbeats,
 * the transfer's deadline) it asks the relay to run it, so a job's
 * callback only ever runs on its relay's thread while the job is there.
 *
 * The callback must never block: what it writes to the client goes out
 * without waiting, and when it cannot, the job leaves the relay and its
 * worker finishes the reply itself (see GH_RELAY_PASSED).
 */
#ifndef GH_RELAY_H
#define GH_RELAY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* What a stream's consumer is told about the relay (gh_upstream_req's
 * on_relay and the layers above it pass these along):
 *   ENTER   on the worker, before the job goes to the relay: from now on
 *           writes to the client must not block. Nonzero: the consumer
 *           cannot (the worker keeps reading itself).
 *   PASS    on the relay thread, before each pass (a read, a tick): take
 *           on the worker's thread context (its pinned configuration).
 *   PASSED  on the relay thread, after it: give that context back.
 *           Nonzero: a write is waiting for the client to read, and the
 *           job must go back to its worker.
 *   LEAVE   on the worker once the job is back: writes block again and
 *           what waits is written. A write that fails there marks the
 *           client gone, as any write does: the sink's next event or tick
 *           decides what that means for the run (a kept AG-UI run goes on
 *           without its client). */
enum gh_relay_op { GH_RELAY_ENTER, GH_RELAY_PASS, GH_RELAY_PASSED, GH_RELAY_LEAVE };

/* Why a job's callback runs. */
enum gh_relay_why {
	GH_RELAY_READABLE, /* the upstream connection has bytes (or closed) */
	GH_RELAY_STIRRED,  /* the watched client connection stirred */
	GH_RELAY_TICK      /* the worker's clock said a tick is due */
};

/* The bytes of the buffer a callback may read into. */
#define GH_RELAY_BUF 4096

struct relay;

struct gh_relay_job {
	int fd;   /* the upstream connection */
	int wake; /* the client's connection, watched while > 0 */
	/* On the relay thread: 0 keeps the job, nonzero sends it back to
	 * its worker. buf (GH_RELAY_BUF bytes) is the relay's, for this
	 * call only. */
	int (*ready)(struct gh_relay_job *j, enum gh_relay_why why, char *buf);
	/* The next time the worker asks for a tick (CLOCK_MONOTONIC ns);
	 * the callback moves it. */
	_Atomic int64_t due_ns;

	/* the relay's own */
	struct relay *relay;      /* the relay that has it */
	pthread_cond_t back;      /* the worker waits on it */
	int finished;             /* back with its worker (under the relay's lock) */
	int queued;               /* a tick asked for and not yet run (same) */
	int left;                 /* out of the epoll set (relay thread only) */
	int refused;              /* the relay could not watch it: back at once */
	struct gh_relay_job *next_new, *next_queued; /* under the relay's lock */
	struct gh_relay_job *next_tick, *next_left;  /* relay thread only */
};

/* Before the first gh_relay_start: n relay threads (1..8) instead of one
 * per two CPUs. Later calls change nothing. */
void gh_relay_threads(int n);

/* Hands j (fd, wake, ready and due_ns set) to the next relay in turn: 0,
 * or -1 when there is no relay (no thread could start) and the caller
 * reads the reply itself. */
int gh_relay_start(struct gh_relay_job *j);

/* On the worker, after gh_relay_start: sleeps until j is back, asking for
 * a tick each time due_ns passes. j->refused: the relay could not watch
 * its connection and did nothing with it. */
void gh_relay_wait(struct gh_relay_job *j);

/* From j's callback: stop watching the client's connection. */
void gh_relay_unwatch(struct gh_relay_job *j);

#endif
