/*
 * front.h - the connection front: gatehouse's own listening socket, in
 * front of CivetWeb's worker pool.
 *
 * CivetWeb 1.15 gives each connection a worker thread from the moment it
 * is accepted, and a worker waits up to request_timeout_ms for the request
 * head: a hundred idle sockets, or a few dozen sending a byte a second,
 * held every worker and left even /healthz unanswered. The front accepts
 * connections itself and holds them in one epoll set, at the cost of a
 * socket and a few dozen bytes each, until their request head has arrived
 * (peeked, not read: CivetWeb reads it as usual). Only then is the
 * connection handed to CivetWeb, so a worker is never spent waiting for a
 * head. The front also enforces
 *   - a deadline for the head (server.head_timeout_ms; 408, or a silent
 *     close when nothing came at all), and
 *   - a cap on the open connections of one client address, counted until
 *     CivetWeb closes the connection (server.max_connections_per_address;
 *     503 beyond it), so one address cannot hold every worker with slow
 *     bodies or idle keep-alive connections either.
 * Keep-alive connections and SSE streams stay with their worker after the
 * first request, as before: CivetWeb bounds the wait for a later request's
 * head by keep_alive_timeout_ms, which gatehouse sets to the same deadline.
 *
 * The hand-off: CivetWeb listens on an ephemeral loopback port; the front
 * finds that socket and puts its epoll set in its place (dup2), so
 * CivetWeb's accept loop polls the set. gatehouse defines accept(): for
 * that descriptor it runs one round of the front on CivetWeb's master
 * thread (accepting, peeking at heads, enforcing deadlines and caps) and
 * returns the next connection whose head is complete, or fails with
 * EAGAIN, which CivetWeb ignores. A request that comes with its
 * connection thus costs the same thread wake-ups as with CivetWeb alone.
 * The loopback port is closed by the dup2, so nothing can bypass the
 * front.
 *
 * Threading: the front has no thread; its state is guarded by its own
 * mutex (CivetWeb's master thread runs it, gh_front_stop takes it over),
 * the per-address counts by a second one (workers report closed
 * connections).
 */
#ifndef GH_FRONT_H
#define GH_FRONT_H

#include <stdint.h>

#include "err.h"

/* Largest request head the front waits for (and CivetWeb's
 * max_request_size): a longer one is answered 431. */
#define GH_FRONT_HEAD_MAX 16384

struct gh_front_conf {
	int64_t head_timeout_ms;          /* accept to complete head; > 0 */
	int64_t max_per_address;          /* open connections per client address; 0 = no cap */
};

struct gh_front;

/* Binds listen ("HOST:PORT", "[V6]:PORT" or "PORT"; port 0 picks one) and
 * starts the acceptor. On failure returns GH_E_IO with strerror's words in
 * e and *out NULL. The caller owns *out (gh_front_stop, then
 * gh_front_free). */
enum gh_code gh_front_start(const char *listen, const struct gh_front_conf *conf,
			    struct gh_front **out, struct gh_err *e);

/* The port actually bound. */
int gh_front_port(const struct gh_front *f);

/* Takes over CivetWeb's listening socket on 127.0.0.1:civet_port (see
 * above). Called once, right after mg_start. */
enum gh_code gh_front_attach(struct gh_front *f, int civet_port, struct gh_err *e);

/* CivetWeb closed a connection from remote_addr (its text form): one
 * fewer open connection for that address. */
void gh_front_closed(struct gh_front *f, const char *remote_addr);

/* Makes CivetWeb's accept loop wake (it notices a stop between polls). */
void gh_front_wake(struct gh_front *f);

/* Stops accepting and closes every connection still waiting for its head
 * or for CivetWeb. CivetWeb may still run: its accept() fails from then on. */
void gh_front_stop(struct gh_front *f);

/* After mg_stop: detaches from accept() and frees. NULL is a no-op. */
void gh_front_free(struct gh_front *f);

/* The socket of the connection from peer port port as handed to CivetWeb
 * (a hint, to be checked by the caller), or -1. */
int gh_front_fd_hint(int port);

#endif
