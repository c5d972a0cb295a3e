/*
 * front.c - the connection front; see front.h for why and how.
 *
 * Threading: the front has no thread of its own. Its epoll set takes the
 * place of CivetWeb's listening socket, so CivetWeb's master thread polls
 * it, and each accept() the master makes on it runs one round of the
 * front (serve): new connections are accepted, heads peeked, deadlines
 * enforced, and the next connection whose head is complete is returned.
 * A connection whose head came with it (the usual case) so costs no more
 * thread wake-ups than CivetWeb alone. The listening socket, the epoll
 * set, the connections waiting for their head (the pending list, kept in
 * deadline order: every connection gets the same timeout, so accept order
 * is deadline order) and the hand-off queue are guarded by f->run_mu,
 * which serve holds and gh_front_stop takes; the per-address counts,
 * which CivetWeb's workers also touch, by f->mu; the list of attached
 * fronts that accept() consults by reg_mu.
 */
/* accept4, dup2 flags, POLLRDHUP-style EPOLLRDHUP */
#define _GNU_SOURCE

#include "front.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define NBUCKETS 4096
#define ACCEPT_BATCH 256
#define EMFILE_PAUSE_NS 100000000LL /* out of descriptors: stop accepting 100 ms */

struct addr_key {
	unsigned char b[16];           /* IPv6, or IPv4 mapped (::ffff:a.b.c.d) */
};

/* A connection the front holds: waiting for its head (pending list), or
 * waiting for CivetWeb's accept (hand-off queue). */
struct conn {
	int fd;
	socklen_t peer_len;
	struct sockaddr_storage peer;
	struct addr_key key;
	int64_t deadline_ns;
	size_t seen;                   /* bytes of head looked at so far */
	struct conn *prev, *next;
};

struct count {
	struct addr_key key;
	int64_t n;
	struct count *next;
};

struct gh_front {
	struct gh_front_conf conf;
	int lfd, port;
	int ep;                        /* epoll set; CivetWeb polls it as its listener */
	int wake_fd;                   /* eventfd: CivetWeb's poll returns (a stop) */
	int ready_fd;                  /* eventfd: readable while the queue is not empty */
	int timer_fd;                  /* timerfd: the next head deadline or pause end */
	int civet_fd;                  /* CivetWeb's listener descriptor, now ep's twin */
	int stopped;                   /* run_mu */
	int64_t armed_ns;              /* when timer_fd fires; 0 = disarmed (run_mu) */
	int64_t paused_until_ns;       /* accept paused (EMFILE); 0 = accepting (run_mu) */
	pthread_mutex_t run_mu;
	struct conn *head, *tail;      /* pending (run_mu) */
	struct conn *q_head, *q_tail;  /* hand-off queue (run_mu) */
	pthread_mutex_t mu;
	struct count *buckets[NBUCKETS]; /* open connections per address (mu) */
	char buf[GH_FRONT_HEAD_MAX];   /* peek buffer (run_mu) */
	struct gh_front *next_attached;
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct gh_front *attached;  /* fronts accept() answers for (reg_mu) */
static _Atomic int peer_fd[65536]; /* fd + 1 by peer port; 0 = unknown */

/* ------------------------------------------------ per-address counts */

static void key_of(const struct sockaddr_storage *ss, struct addr_key *k)
{
	memset(k, 0, sizeof(*k));
	if (ss->ss_family == AF_INET) {
		k->b[10] = 0xff;
		k->b[11] = 0xff;
		memcpy(k->b + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	} else if (ss->ss_family == AF_INET6) {
		memcpy(k->b, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	}
}

static struct count **bucket(struct gh_front *f, const struct addr_key *k)
{
	uint32_t h = 2166136261u;
	size_t i;

	for (i = 0; i < sizeof(k->b); i++)
		h = (h ^ k->b[i]) * 16777619u;
	return &f->buckets[h % NBUCKETS];
}

/* Counts one more connection for k; 0 when k is at the cap (or on OOM:
 * refused rather than uncounted). */
static int count_take(struct gh_front *f, const struct addr_key *k)
{
	struct count **b, *c;
	int ok = 0;

	pthread_mutex_lock(&f->mu);
	b = bucket(f, k);
	for (c = *b; c && memcmp(&c->key, k, sizeof(*k)); c = c->next)
		;
	if (!c && (c = calloc(1, sizeof(*c)))) {
		c->key = *k;
		c->next = *b;
		*b = c;
	}
	if (c && c->n < f->conf.max_per_address) {
		c->n++;
		ok = 1;
	}
	pthread_mutex_unlock(&f->mu);
	return ok;
}

static void count_put(struct gh_front *f, const struct addr_key *k)
{
	struct count **p, *c;

	if (f->conf.max_per_address <= 0)
		return;
	pthread_mutex_lock(&f->mu);
	for (p = bucket(f, k); (c = *p) && memcmp(&c->key, k, sizeof(*k)); p = &c->next)
		;
	if (c && --c->n <= 0) {
		*p = c->next;
		free(c);
	}
	pthread_mutex_unlock(&f->mu);
}

void gh_front_closed(struct gh_front *f, const char *remote_addr)
{
	struct sockaddr_storage ss;

	if (!f || !remote_addr || f->conf.max_per_address <= 0)
		return;
	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, remote_addr, &((struct sockaddr_in *)&ss)->sin_addr) == 1)
		ss.ss_family = AF_INET;
	else if (inet_pton(AF_INET6, remote_addr, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1)
		ss.ss_family = AF_INET6;
	else
		return;
	{
		struct addr_key k;

		key_of(&ss, &k);
		count_put(f, &k);
	}
}

/* ------------------------------------------------------- connections */

/* A short answer the front gives itself, then the connection is closed.
 * Best effort: the socket is non-blocking and the answer fits its buffer. */
static void reply(int fd, int status, const char *reason, const char *code, const char *msg)
{
	char body[384], out[768];
	int bl, n;

	bl = snprintf(body, sizeof(body), "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}", code,
		      msg);
	if (bl < 0 || (size_t)bl >= sizeof(body))
		return;
	n = snprintf(out, sizeof(out), "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
		     "Content-Length: %d\r\n%sCache-Control: no-store\r\nConnection: close\r\n\r\n"
		     "%s", status, reason, bl, status == 503 ? "Retry-After: 1\r\n" : "", body);
	if (n > 0 && (size_t)n < sizeof(out))
		(void)send(fd, out, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void unlink_pending(struct gh_front *f, struct conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		f->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		f->tail = c->prev;
	c->prev = c->next = NULL;
}

/* Closes a pending connection (closing also takes it out of the epoll set). */
static void drop(struct gh_front *f, struct conn *c)
{
	unlink_pending(f, c);
	close(c->fd);
	count_put(f, &c->key);
	free(c);
}

/* Its head is here: to the queue CivetWeb's accept() reads. The queue's
 * eventfd keeps the epoll set readable while the queue is not empty, so
 * CivetWeb's poll comes back for each connection in it. */
static void enqueue(struct gh_front *f, struct conn *c)
{
	uint64_t one = 1;

	c->next = NULL;
	if (f->q_tail) {
		f->q_tail->next = c;
	} else {
		f->q_head = c;
		if (write(f->ready_fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
			gh_warn("front: cannot signal CivetWeb: %s", strerror(errno));
	}
	f->q_tail = c;
}

/* A pending connection's head is complete. */
static void hand_off(struct gh_front *f, struct conn *c)
{
	epoll_ctl(f->ep, EPOLL_CTL_DEL, c->fd, NULL);
	unlink_pending(f, c);
	enqueue(f, c);
}

enum head_state { HEAD_MORE, HEAD_DONE };

/* Whether buf[0..n) holds a whole request head, looking only at what is
 * new since seen. As CivetWeb reads heads: a blank line ends one ("\r\n\r\n",
 * or "\n\n"), and a control byte makes it malformed, which CivetWeb
 * answers at once, so it is handed over too. */
static enum head_state head_state(const char *buf, size_t n, size_t seen)
{
	size_t i = seen > 3 ? seen - 3 : 0;

	for (; i < n; i++) {
		unsigned char ch = (unsigned char)buf[i];

		if ((ch < 0x20 && ch != '\r' && ch != '\n' && ch != '\t') || ch == 0x7f)
			return HEAD_DONE;
		if (ch == '\n' && i + 1 < n && buf[i + 1] == '\n')
			return HEAD_DONE;
		if (ch == '\r' && i + 3 < n && !memcmp(buf + i, "\r\n\r\n", 4))
			return HEAD_DONE;
	}
	return HEAD_MORE;
}

static void on_readable(struct gh_front *f, struct conn *c, uint32_t events)
{
	ssize_t n = recv(c->fd, f->buf, sizeof(f->buf), MSG_PEEK | MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
		if (events & (EPOLLHUP | EPOLLERR))
			drop(f, c);
		return;
	}
	if (n <= 0) {
		drop(f, c); /* gone before its head was complete */
		return;
	}
	if (head_state(f->buf, (size_t)n, c->seen) == HEAD_DONE) {
		hand_off(f, c);
		return;
	}
	c->seen = (size_t)n;
	if ((size_t)n >= sizeof(f->buf)) {
		reply(c->fd, 431, "Request Header Fields Too Large", "bad_request",
		      "the request head is larger than 16384 bytes");
		drop(f, c);
	} else if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
		drop(f, c); /* the client stopped sending: the head will never end */
	}
}

/* A new connection: counted for its address, then handed on at once when
 * its head came with it, else held until it does. */
static void admit(struct gh_front *f, int s, const struct sockaddr_storage *peer, socklen_t pl)
{
	struct epoll_event ev;
	struct conn *c;
	struct addr_key k;
	ssize_t n;

	key_of(peer, &k);
	if (f->conf.max_per_address > 0 && !count_take(f, &k)) {
		char msg[160];

		snprintf(msg, sizeof(msg), "too many connections from your address "
			 "(server.max_connections_per_address = %lld); retry shortly",
			 (long long)f->conf.max_per_address);
		reply(s, 503, "Service Unavailable", "unavailable", msg);
		close(s);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(s);
		count_put(f, &k);
		return;
	}
	c->fd = s;
	c->peer = *peer;
	c->peer_len = pl;
	c->key = k;
	n = recv(s, f->buf, sizeof(f->buf), MSG_PEEK | MSG_DONTWAIT);
	if (n > 0 && head_state(f->buf, (size_t)n, 0) == HEAD_DONE) {
		enqueue(f, c);
		return;
	}
	/* anything else (part of a head, nothing yet, an error or the end) is
	 * judged by on_readable: epoll reports a socket that is already
	 * readable as soon as it is added */
	c->deadline_ns = gh_mono_ns() + f->conf.head_timeout_ms * 1000000LL;
	c->prev = f->tail;
	if (f->tail)
		f->tail->next = c;
	else
		f->head = c;
	f->tail = c;
	memset(&ev, 0, sizeof(ev));
	/* edge-triggered: the head is only peeked, so the socket stays readable */
	ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
	ev.data.ptr = c;
	if (epoll_ctl(f->ep, EPOLL_CTL_ADD, s, &ev) != 0)
		drop(f, c);
}

static void accept_some(struct gh_front *f)
{
	int i;

	for (i = 0; i < ACCEPT_BATCH; i++) {
		struct sockaddr_storage peer;
		socklen_t pl = sizeof(peer);
		int s = accept4(f->lfd, (struct sockaddr *)&peer, &pl, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (s >= 0) {
			admit(f, s, &peer, pl);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
			/* the listener would stay readable: wait for descriptors to
			 * be freed instead of spinning */
			gh_warn("front: cannot accept (%s); pausing 100 ms", strerror(errno));
			epoll_ctl(f->ep, EPOLL_CTL_DEL, f->lfd, NULL);
			f->paused_until_ns = gh_mono_ns() + EMFILE_PAUSE_NS;
		}
		return;
	}
}

/* Closes the connections whose head did not come in time: 408 when part
 * of one came, a silent close when nothing did (an idle pre-connection). */
static void expire(struct gh_front *f, int64_t now)
{
	while (f->head && f->head->deadline_ns <= now) {
		struct conn *c = f->head;

		if (c->seen)
			reply(c->fd, 408, "Request Timeout", "request_timeout",
			      "the request head did not arrive within server.head_timeout_ms");
		drop(f, c);
	}
}

/* Sets timer_fd to the earliest of the oldest head's deadline and the end
 * of an accept pause, when that moved. */
static void arm(struct gh_front *f)
{
	int64_t next = f->head ? f->head->deadline_ns : 0;
	struct itimerspec its;

	if (f->paused_until_ns && (!next || f->paused_until_ns < next))
		next = f->paused_until_ns;
	if (next == f->armed_ns)
		return;
	memset(&its, 0, sizeof(its));
	its.it_value.tv_sec = next / 1000000000;
	its.it_value.tv_nsec = next % 1000000000;
	if (timerfd_settime(f->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
		f->armed_ns = next;
	else
		gh_warn("front: timerfd: %s", strerror(errno));
}

static void drain(int fd)
{
	uint64_t v;

	if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		gh_debug("front: %s", strerror(errno));
}

/* One round of the front, on CivetWeb's master thread (its accept() on
 * the epoll set): the events ready now are handled, then the next
 * connection in the queue is returned, or -1 (EAGAIN) when there is none
 * yet. Events beyond one batch keep the set readable for the next round;
 * so does the queue's eventfd. */
static int serve(struct gh_front *f, struct sockaddr *addr, socklen_t *len)
{
	struct epoll_event evs[64];
	struct conn *c = NULL;
	int fd = -1, n, i;

	pthread_mutex_lock(&f->run_mu);
	if (f->stopped)
		goto out;
	if (!f->q_head) {
		n = epoll_wait(f->ep, evs, (int)GH_ARRAY_LEN(evs), 0);
		for (i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;

			if (p == &f->lfd)
				accept_some(f);
			else if (p == &f->wake_fd)
				drain(f->wake_fd);
			else if (p == &f->timer_fd) {
				drain(f->timer_fd);
				f->armed_ns = 0; /* fired: arm() sets the next */
			} else if (p != &f->ready_fd)
				on_readable(f, p, evs[i].events);
		}
		if (n < 0 && errno != EINTR)
			gh_warn("front: epoll_wait: %s", strerror(errno));
		expire(f, gh_mono_ns());
		if (f->paused_until_ns && gh_mono_ns() >= f->paused_until_ns) {
			struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &f->lfd};

			f->paused_until_ns = 0;
			epoll_ctl(f->ep, EPOLL_CTL_ADD, f->lfd, &ev);
		}
		arm(f);
	}
	if ((c = f->q_head)) {
		f->q_head = c->next;
		if (!f->q_head) {
			f->q_tail = NULL;
			drain(f->ready_fd);
		}
		fd = c->fd;
		if (addr && len) {
			memcpy(addr, &c->peer, *len < c->peer_len ? *len : c->peer_len);
			*len = c->peer_len;
		}
		free(c);
	}
out:
	pthread_mutex_unlock(&f->run_mu);
	if (fd < 0)
		errno = EAGAIN;
	return fd;
}

/* ------------------------------------------------------------ listen */

/* Splits "HOST:PORT", "[V6]:PORT" or "PORT". */
static int split_listen(const char *spec, char *host, size_t hcap, char *port, size_t pcap)
{
	const char *colon, *p;
	size_t hl;

	if (spec[0] == '[') {
		const char *close = strchr(spec, ']');

		if (!close || close[1] != ':')
			return -1;
		hl = (size_t)(close - spec - 1);
		if (hl >= hcap)
			return -1;
		memcpy(host, spec + 1, hl);
		host[hl] = '\0';
		p = close + 2;
	} else if ((colon = strrchr(spec, ':'))) {
		hl = (size_t)(colon - spec);
		if (hl >= hcap || memchr(spec, ':', hl))
			return -1;
		memcpy(host, spec, hl);
		host[hl] = '\0';
		p = colon + 1;
	} else {
		host[0] = '\0';
		p = spec;
	}
	if (!*p || strlen(p) >= pcap || strlen(p) > 5 || strspn(p, "0123456789") != strlen(p) ||
	    strtol(p, NULL, 10) > 65535)
		return -1;
	memcpy(port, p, strlen(p) + 1);
	return 0;
}

static int bind_one(const struct addrinfo *ai)
{
	int s = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		       ai->ai_protocol);
	int on = 1, err;

	if (s < 0)
		return -1;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	if (ai->ai_family == AF_INET6)
		setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
	if (bind(s, ai->ai_addr, ai->ai_addrlen) == 0 && listen(s, 1024) == 0)
		return s;
	err = errno;
	close(s);
	errno = err;
	return -1;
}

/* Binds listen; IPv4 addresses are tried first (a bare port means
 * 0.0.0.0, as CivetWeb read it). Returns the socket or -1 with errno. */
static int open_listener(const char *listen_spec)
{
	struct addrinfo hints, *res = NULL, *ai;
	char host[256], port[8];
	int s = -1, pass, rc, err = EINVAL;

	if (split_listen(listen_spec, host, sizeof(host), port, sizeof(port)) != 0) {
		errno = EINVAL;
		return -1;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	if ((rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res)) != 0) {
		errno = rc == EAI_SYSTEM ? errno : EADDRNOTAVAIL;
		return -1;
	}
	for (pass = 0; pass < 2 && s < 0; pass++) {
		for (ai = res; ai && s < 0; ai = ai->ai_next) {
			if ((ai->ai_family == AF_INET) != (pass == 0))
				continue;
			s = bind_one(ai);
			if (s < 0)
				err = errno;
		}
	}
	freeaddrinfo(res);
	if (s < 0)
		errno = err;
	return s;
}

static int local_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t l = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &l) != 0)
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

static int watch(struct gh_front *f, int fd, void *tag)
{
	struct epoll_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.ptr = tag;
	return epoll_ctl(f->ep, EPOLL_CTL_ADD, fd, &ev);
}

enum gh_code gh_front_start(const char *listen_spec, const struct gh_front_conf *conf,
			    struct gh_front **out, struct gh_err *e)
{
	struct gh_front *f = calloc(1, sizeof(*f));
	enum gh_code rc;

	*out = NULL;
	if (!f)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	f->conf = *conf;
	f->lfd = f->ep = f->wake_fd = f->ready_fd = f->timer_fd = f->civet_fd = -1;
	pthread_mutex_init(&f->run_mu, NULL);
	pthread_mutex_init(&f->mu, NULL);
	if ((f->lfd = open_listener(listen_spec)) < 0) {
		rc = gh_err_set(e, GH_E_IO, "%s", strerror(errno));
		goto fail;
	}
	f->port = local_port(f->lfd);
	f->ep = epoll_create1(EPOLL_CLOEXEC);
	f->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	f->ready_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	f->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (f->ep < 0 || f->wake_fd < 0 || f->ready_fd < 0 || f->timer_fd < 0) {
		rc = gh_err_set(e, GH_E_IO, "cannot set up the connection front: %s",
				strerror(errno));
		goto fail;
	}
	if (watch(f, f->lfd, &f->lfd) != 0 || watch(f, f->wake_fd, &f->wake_fd) != 0 ||
	    watch(f, f->ready_fd, &f->ready_fd) != 0 || watch(f, f->timer_fd, &f->timer_fd) != 0) {
		rc = gh_err_set(e, GH_E_IO, "epoll: %s", strerror(errno));
		goto fail;
	}
	*out = f;
	return GH_OK;
fail:
	gh_front_stop(f);
	gh_front_free(f);
	return rc;
}

int gh_front_port(const struct gh_front *f)
{
	return f->port;
}

/* CivetWeb's listening socket: the one of this process listening on
 * 127.0.0.1:port. */
static int is_listener(int fd, void *ud)
{
	int port = *(const int *)ud, acc = 0;
	struct sockaddr_in a;
	socklen_t al = sizeof(a), accl = sizeof(acc);

	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &accl) != 0 || !acc)
		return 0;
	return getsockname(fd, (struct sockaddr *)&a, &al) == 0 && a.sin_family == AF_INET &&
	       ntohs(a.sin_port) == port && a.sin_addr.s_addr == htonl(INADDR_LOOPBACK);
}

static int find_listener(int port)
{
	return gh_fd_find(is_listener, &port);
}

enum gh_code gh_front_attach(struct gh_front *f, int civet_port, struct gh_err *e)
{
	int fd = find_listener(civet_port), k;
	uint64_t one = 1;
	struct sockaddr_in a;

	if (fd < 0)
		return gh_err_set(e, GH_E_IO, "cannot find CivetWeb's listening socket");
	pthread_mutex_lock(&reg_mu);
	f->civet_fd = fd;
	f->next_attached = attached;
	attached = f;
	/* one wake up front: CivetWeb's first poll on the epoll set returns at
	 * once and its accept() runs the front's first round */
	if (write(f->wake_fd, &one, sizeof(one)) != (ssize_t)sizeof(one) ||
	    dup2(f->ep, fd) < 0) {
		pthread_mutex_unlock(&reg_mu);
		return gh_err_set(e, GH_E_IO, "cannot take over CivetWeb's listener: %s",
				  strerror(errno));
	}
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	pthread_mutex_unlock(&reg_mu);
	/* A poll CivetWeb started on the loopback socket before the dup2 still
	 * waits on it: a connection wakes that poll, which then finds the
	 * epoll set readable. */
	k = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (k >= 0) {
		memset(&a, 0, sizeof(a));
		a.sin_family = AF_INET;
		a.sin_port = htons((uint16_t)civet_port);
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		(void)connect(k, (struct sockaddr *)&a, sizeof(a));
		close(k);
	}
	return GH_OK;
}

void gh_front_wake(struct gh_front *f)
{
	uint64_t one = 1;

	if (f && f->wake_fd >= 0 && write(f->wake_fd, &one, sizeof(one)) < 0)
		gh_debug("front: wake: %s", strerror(errno));
}

void gh_front_stop(struct gh_front *f)
{
	struct conn *c, *next;

	if (!f)
		return;
	pthread_mutex_lock(&f->run_mu);
	f->stopped = 1;
	if (f->lfd >= 0) {
		close(f->lfd);
		f->lfd = -1;
	}
	while (f->head)
		drop(f, f->head);
	c = f->q_head;
	f->q_head = f->q_tail = NULL;
	pthread_mutex_unlock(&f->run_mu);
	for (; c; c = next) {
		next = c->next;
		close(c->fd);
		count_put(f, &c->key);
		free(c);
	}
}

void gh_front_free(struct gh_front *f)
{
	struct gh_front **p;
	size_t i;

	if (!f)
		return;
	pthread_mutex_lock(&reg_mu);
	for (p = &attached; *p && *p != f; p = &(*p)->next_attached)
		;
	if (*p)
		*p = f->next_attached;
	pthread_mutex_unlock(&reg_mu);
	for (i = 0; i < NBUCKETS; i++) {
		struct count *c, *next;

		for (c = f->buckets[i]; c; c = next) {
			next = c->next;
			free(c);
		}
	}
	if (f->ep >= 0)
		close(f->ep);
	if (f->wake_fd >= 0)
		close(f->wake_fd);
	if (f->ready_fd >= 0)
		close(f->ready_fd);
	if (f->timer_fd >= 0)
		close(f->timer_fd);
	pthread_mutex_destroy(&f->run_mu);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

/* ------------------------------------------------------------ accept */

typedef int (*accept_fn)(int, struct sockaddr *, socklen_t *);
static _Atomic(accept_fn) real_accept;

int accept(int fd, struct sockaddr *addr, socklen_t *len);

/*
 * gatehouse defines accept(): the dynamic linker binds CivetWeb's call to
 * this definition. On the descriptor a front took over it runs a round of
 * the front and returns its next connection; any other is the real
 * accept. Either way the socket is recorded by its peer port, because
 * CivetWeb 1.15 has no call that gives a connection's socket and the
 * client-gone check needs it.
 */
int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct sockaddr_storage peer;
	socklen_t pl = sizeof(peer);
	struct gh_front *f;
	int s;

	pthread_mutex_lock(&reg_mu);
	for (f = attached; f && f->civet_fd != fd; f = f->next_attached)
		;
	pthread_mutex_unlock(&reg_mu);
	/* f stays valid outside reg_mu: only CivetWeb's master thread accepts
	 * on its descriptor, and gh_front_free comes after mg_stop joined it */
	if (f) {
		s = serve(f, addr, len);
	} else {
		accept_fn real = atomic_load(&real_accept);

		if (!real) {
			real = (accept_fn)(uintptr_t)dlsym(RTLD_NEXT, "accept");
			if (!real) {
				errno = ENOSYS;
				return -1;
			}
			atomic_store(&real_accept, real);
		}
		s = real(fd, addr, len);
	}
	if (s >= 0 && addr && len && *len <= sizeof(peer)) {
		memcpy(&peer, addr, *len); /* both ways fill it in */
		pl = *len;
	} else if (s >= 0 && getpeername(s, (struct sockaddr *)&peer, &pl) != 0) {
		pl = 0;
	}
	if (s >= 0 && pl >= sizeof(sa_family_t)) {
		int port = peer.ss_family == AF_INET
				   ? ntohs(((struct sockaddr_in *)&peer)->sin_port)
			   : peer.ss_family == AF_INET6
				   ? ntohs(((struct sockaddr_in6 *)&peer)->sin6_port)
				   : -1;

		if (port >= 0)
			atomic_store(&peer_fd[port], s + 1);
	}
	return s;
}

int gh_front_fd_hint(int port)
{
	return port >= 0 && port < 65536 ? atomic_load(&peer_fd[port]) - 1 : -1;
}
