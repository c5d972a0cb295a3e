/*
 * mcp_stdio.c - an upstream MCP server that gatehouse runs as a child
 * process and speaks newline-delimited JSON-RPC with on its stdin and
 * stdout; see mcp_int.h.
 *
 * The child is started with posix_spawn: its own process group (so a
 * terminal's Ctrl-C reaches gatehouse, which then stops it in order),
 * default signal dispositions and an empty signal mask (gatehouse blocks
 * SIGINT/SIGTERM and ignores SIGPIPE; a child must not inherit that),
 * every descriptor above 2 closed (gatehouse's sockets and database never
 * reach it, whatever another thread opened meanwhile), and a small
 * environment: PATH, HOME, USER, LOGNAME, SHELL, TERM, LANG, LC_ALL, TZ
 * and TMPDIR from gatehouse's own, plus the config's env (provider keys
 * and other secrets in gatehouse's environment stay there). Every pipe
 * end gatehouse keeps is close-on-exec.
 *
 * Threading: one reader thread per child polls its stdout (messages:
 * answers go to the waiting callers, progress to the call it belongs to,
 * anything else to the upstream's events) and its stderr (each line to
 * gatehouse's log). Callers wait on their own condition variable under
 * the connection's mutex; writes to stdin are serialised by a second
 * mutex and bounded in time (stdin is non-blocking). close() runs on the
 * supervisor: it closes stdin, waits shutdown_grace_ms for the child to
 * exit, then sends SIGTERM to its process group and waits again, then
 * SIGKILL, and reaps it (no zombie), then joins the reader.
 */
#define _GNU_SOURCE

#include "mcp_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "buf.h"
#include "log.h"
#include "util.h"

#define SLICE_MS 50           /* longest wait between two ticks */
#define STDERR_LINE_MAX 2048  /* a longer stderr line is logged in pieces */
#define DRAIN_MS 200          /* stderr read after stdout closed */

extern char **environ;

struct pending {
	int64_t id;
	pthread_cond_t cv;
	int done;
	struct gh_mcp_msg reply;
	/* the latest progress, handed to the waiting thread */
	uint64_t progress_seq;
	double progress, total;
	char message[256];
	int has_message;
	struct pending *next;
};

struct stdio_conn {
	struct mcp_conn base;
	const struct gh_mcp_server_conf *conf;
	struct mcp_events ev;
	pid_t pid;
	int in_fd, out_fd, err_fd;
	int wake[2];                  /* close() tells the reader to stop */
	pthread_t reader;
	int reader_started;
	pthread_mutex_t mu;           /* pending */
	pthread_mutex_t wmu;          /* writes to stdin */
	struct pending *pending;
	int reaped;
	struct gh_mcp_reader *rd;
	struct gh_buf errline;        /* stderr line so far */
};

/* ------------------------------------------------------------ helpers */

void mcp_log_safe(const char *in, size_t n, char *out, size_t cap)
{
	size_t i, o = 0;

	for (i = 0; i < n && o + 1 < cap; i++) {
		unsigned char c = (unsigned char)in[i];

		out[o++] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
	}
	out[o] = '\0';
}

void mcp_msg_other(const struct gh_mcp_server_conf *conf, const struct mcp_events *ev,
		   struct gh_mcp_msg *m, const char *what)
{
	char line[300];

	if (m->kind == GH_MCP_NOTIFICATION && ev->notify) {
		ev->notify(ev->ud, m);
	} else if (m->kind == GH_MCP_REQUEST && ev->request) {
		ev->request(ev->ud, m);
	} else if (m->kind == GH_MCP_INVALID) {
		mcp_log_safe(m->error, strlen(m->error), line, sizeof(line));
		gh_warn("mcp %s: ignored %s that is not a JSON-RPC message: %s", conf->name, what,
			line);
	}
}

static void status_text(int st, char *out, size_t cap)
{
	if (WIFEXITED(st))
		snprintf(out, cap, "exited with status %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(out, cap, "killed by signal %d", WTERMSIG(st));
	else
		snprintf(out, cap, "ended (status %d)", st);
}

static void sleep_ms(int64_t ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static struct pending *find_pending(struct stdio_conn *c, int64_t id)
{
	struct pending *p;

	for (p = c->pending; p; p = p->next)
		if (p->id == id)
			return p;
	return NULL;
}

/* Fails every request in flight: the connection is gone. Under mu. */
static void fail_all(struct stdio_conn *c, const char *why)
{
	struct pending *p;

	mcp_conn_fail(&c->base, why);
	for (p = c->pending; p; p = p->next)
		pthread_cond_signal(&p->cv);
}

/* ------------------------------------------------------------- reader */

static int on_msg(void *ud, struct gh_mcp_msg *m)
{
	struct stdio_conn *c = ud;

	switch (m->kind) {
	case GH_MCP_RESPONSE:
	case GH_MCP_ERROR: {
		struct pending *p;

		pthread_mutex_lock(&c->mu);
		p = m->id >= 0 ? find_pending(c, m->id) : NULL;
		if (p && !p->done) {
			p->reply = *m;
			m->root = NULL; /* moved */
			p->done = 1;
			pthread_cond_signal(&p->cv);
		}
		pthread_mutex_unlock(&c->mu);
		if (!p)
			gh_debug("mcp %s: an answer to no request in flight (id %lld)",
				 c->conf->name, (long long)m->id);
		break;
	}
	case GH_MCP_NOTIFICATION:
		if (!strcmp(m->method, "notifications/progress")) {
			struct gh_mcp_progress pr;
			struct pending *p;

			if (gh_mcp_parse_progress(m->params, &pr) != 0 || pr.token < 0)
				break;
			pthread_mutex_lock(&c->mu);
			p = find_pending(c, pr.token);
			if (p) {
				p->progress_seq++;
				p->progress = pr.progress;
				p->total = pr.total;
				p->has_message = pr.message != NULL;
				gh_strlcpy(p->message, pr.message ? pr.message : "",
					   sizeof(p->message));
				pthread_cond_signal(&p->cv);
			}
			pthread_mutex_unlock(&c->mu);
			break;
		}
		mcp_msg_other(c->conf, &c->ev, m, "a line on stdout");
		break;
	case GH_MCP_REQUEST:
	case GH_MCP_INVALID:
		mcp_msg_other(c->conf, &c->ev, m, "a line on stdout");
		break;
	}
	return 0;
}

static void log_stderr(struct stdio_conn *c, const char *p, size_t n)
{
	char line[STDERR_LINE_MAX + 1];

	mcp_log_safe(p, n, line, sizeof(line));
	if (line[0])
		gh_info("mcp %s: %s", c->conf->name, line);
}

static void feed_stderr(struct stdio_conn *c, const char *p, size_t n)
{
	while (n > 0) {
		const char *nl = memchr(p, '\n', n);
		size_t take = nl ? (size_t)(nl - p) : n;

		while (take > 0) {
			size_t room = STDERR_LINE_MAX - c->errline.len, k = take < room ? take : room;

			gh_buf_append(&c->errline, p, k);
			p += k;
			n -= k;
			take -= k;
			if (c->errline.len >= STDERR_LINE_MAX) {
				log_stderr(c, c->errline.data, c->errline.len);
				gh_buf_reset(&c->errline);
			}
		}
		if (nl) {
			if (c->errline.len && c->errline.data[c->errline.len - 1] == '\r')
				c->errline.len--;
			log_stderr(c, c->errline.data ? c->errline.data : "", c->errline.len);
			gh_buf_reset(&c->errline);
			p++;
			n--;
		}
	}
}

static void *reader_main(void *arg)
{
	struct stdio_conn *c = arg;
	char buf[8192];
	int out_open = 1, err_open = 1;
	int64_t drain_until = 0;
	char why[256] = "";

	while (out_open || err_open) {
		struct pollfd pf[3];
		int nf = 0, io = -1, ie = -1, iw, timeout = -1, k;

		if (out_open) {
			pf[nf].fd = c->out_fd;
			pf[nf].events = POLLIN;
			io = nf++;
		}
		if (err_open) {
			pf[nf].fd = c->err_fd;
			pf[nf].events = POLLIN;
			ie = nf++;
		}
		pf[nf].fd = c->wake[0];
		pf[nf].events = POLLIN;
		iw = nf++;
		if (drain_until) {
			int64_t left = drain_until - gh_mono_ns() / 1000000;

			if (left <= 0)
				break;
			timeout = (int)left;
		}
		k = poll(pf, (nfds_t)nf, timeout);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			snprintf(why, sizeof(why), "poll failed: %s", strerror(errno));
			break;
		}
		if (pf[iw].revents)
			break; /* close() asked */
		if (io >= 0 && pf[io].revents) {
			ssize_t r = read(c->out_fd, buf, sizeof(buf));

			if (r > 0) {
				int rc = gh_mcp_reader_feed(c->rd, buf, (size_t)r, on_msg, c);

				if (rc == GH_MCP_READ_TOOBIG) {
					snprintf(why, sizeof(why), "it sent a message over %lld bytes "
						 "(max_message_bytes)",
						 (long long)c->conf->max_message_bytes);
					out_open = 0;
				} else if (rc) {
					snprintf(why, sizeof(why), "out of memory reading its output");
					out_open = 0;
				}
			} else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
				gh_mcp_reader_finish(c->rd, on_msg, c);
				snprintf(why, sizeof(why), "it closed its stdout (exited or crashed)");
				out_open = 0;
			}
			if (!out_open) {
				pthread_mutex_lock(&c->mu);
				fail_all(c, why);
				pthread_mutex_unlock(&c->mu);
				if (c->ev.closed)
					c->ev.closed(c->ev.ud, why);
				/* its last words on stderr are worth a moment */
				drain_until = gh_mono_ns() / 1000000 + DRAIN_MS;
			}
		}
		if (ie >= 0 && pf[ie].revents) {
			ssize_t r = read(c->err_fd, buf, sizeof(buf));

			if (r > 0)
				feed_stderr(c, buf, (size_t)r);
			else if (r == 0 || (errno != EINTR && errno != EAGAIN))
				err_open = 0;
		}
	}
	if (c->errline.len)
		log_stderr(c, c->errline.data, c->errline.len);
	gh_buf_reset(&c->errline);
	if (out_open) {
		/* stopped by close() or a poll failure with the child's stdout
		 * still open: fail what waits */
		pthread_mutex_lock(&c->mu);
		fail_all(c, why[0] ? why : "the connection was closed");
		pthread_mutex_unlock(&c->mu);
		if (why[0] && c->ev.closed)
			c->ev.closed(c->ev.ud, why);
	}
	return NULL;
}

/* -------------------------------------------------------------- writes */

/* Writes the whole line within timeout_ms; stdin is non-blocking. */
static enum gh_code write_line(struct stdio_conn *c, const char *p, size_t n, int64_t timeout_ms,
			       struct gh_err *e)
{
	int64_t end = gh_mono_ns() / 1000000 + timeout_ms;
	enum gh_code rc = GH_OK;

	pthread_mutex_lock(&c->wmu);
	while (n > 0) {
		ssize_t w;

		if (atomic_load(&c->base.dead) || c->in_fd < 0) {
			rc = gh_err_set(e, GH_E_UPSTREAM, "MCP server %s: the connection is closed",
					c->conf->name);
			break;
		}
		w = write(c->in_fd, p, n);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			struct pollfd pf = {c->in_fd, POLLOUT, 0};
			int64_t left = end - gh_mono_ns() / 1000000;

			if (left <= 0) {
				rc = gh_err_set(e, GH_E_TIMEOUT, "MCP server %s: its stdin took no "
								 "input for %lld ms", c->conf->name,
						(long long)timeout_ms);
				break;
			}
			poll(&pf, 1, (int)(left < SLICE_MS ? left : SLICE_MS));
			continue;
		}
		rc = gh_err_set(e, GH_E_UPSTREAM, "MCP server %s: writing to its stdin failed: %s",
				c->conf->name, w < 0 ? strerror(errno) : "nothing written");
		break;
	}
	pthread_mutex_unlock(&c->wmu);
	return rc;
}

static enum gh_code send_msg(struct stdio_conn *c, struct gh_buf *b, int64_t timeout_ms,
			     struct gh_err *e)
{
	if (gh_buf_putc(b, '\n') != GH_BUF_OK)
		return gh_err_set(e, GH_E_TOOBIG, "MCP server %s: the message is too large",
				  c->conf->name);
	return write_line(c, b->data, b->len, timeout_ms, e);
}

static enum gh_code stdio_request(struct mcp_conn *base, int64_t id, const char *method,
				  const cJSON *params, const struct mcp_req_opts *o,
				  struct gh_mcp_msg *reply, struct gh_err *e)
{
	struct stdio_conn *c = (struct stdio_conn *)base;
	struct pending p;
	struct pending **pp;
	struct gh_buf b;
	uint64_t seen = 0;
	int64_t start = gh_mono_ns(), waited_ms;
	enum gh_code rc;

	memset(reply, 0, sizeof(*reply));
	memset(&p, 0, sizeof(p));
	p.id = id;
	gh_cond_init_mono(&p.cv);
	gh_buf_init(&b, (size_t)c->conf->max_message_bytes);
	if (gh_mcp_build_request(&b, id, method, params) != GH_BUF_OK) {
		rc = gh_err_set(e, GH_E_TOOBIG, "MCP server %s: the %s request is over %lld bytes",
				c->conf->name, method, (long long)c->conf->max_message_bytes);
		goto out_nolist;
	}
	pthread_mutex_lock(&c->mu);
	if (atomic_load(&c->base.dead)) {
		rc = gh_err_set(e, GH_E_UPSTREAM, "MCP server %s: %s", c->conf->name,
				c->base.why[0] ? c->base.why : "the connection is closed");
		pthread_mutex_unlock(&c->mu);
		goto out_nolist;
	}
	p.next = c->pending;
	c->pending = &p;
	pthread_mutex_unlock(&c->mu);
	if ((rc = send_msg(c, &b, o->timeout_ms, e)) != GH_OK)
		goto out;
	pthread_mutex_lock(&c->mu);
	for (;;) {
		struct timespec ts;

		/* progress first: the last one may come just before the answer
		 * (a waiter that falls behind sees only the latest: progress is
		 * a level, not a log) */
		if (p.progress_seq != seen && o->progress) {
			struct gh_mcp_progress pr = {id, p.progress, p.total,
						     p.has_message ? p.message : NULL};
			char msg[sizeof(p.message)];

			seen = p.progress_seq;
			gh_strlcpy(msg, p.message, sizeof(msg));
			pr.message = p.has_message ? msg : NULL;
			pthread_mutex_unlock(&c->mu);
			o->progress(o->ud, &pr);
			pthread_mutex_lock(&c->mu);
			continue;
		}
		if (p.done) {
			rc = GH_OK;
			break;
		}
		if (atomic_load(&c->base.dead)) {
			rc = gh_err_set(e, GH_E_UPSTREAM, "MCP server %s: %s", c->conf->name,
					c->base.why[0] ? c->base.why : "the connection closed");
			break;
		}
		waited_ms = (gh_mono_ns() - start) / 1000000;
		if (waited_ms >= o->timeout_ms) {
			rc = gh_err_set(e, GH_E_TIMEOUT, "MCP server %s: no answer to %s within %lld "
							 "ms", c->conf->name, method,
					(long long)o->timeout_ms);
			break;
		}
		if (o->tick) {
			int stop;

			pthread_mutex_unlock(&c->mu);
			stop = o->tick(o->ud);
			pthread_mutex_lock(&c->mu);
			if (stop && !p.done) {
				rc = gh_err_set(e, GH_E_CANCELLED, "cancelled");
				break;
			}
			if (p.done)
				continue;
		}
		gh_deadline(CLOCK_MONOTONIC,
			    o->timeout_ms - waited_ms < SLICE_MS ? o->timeout_ms - waited_ms : SLICE_MS,
			    &ts);
		pthread_cond_timedwait(&p.cv, &c->mu, &ts);
	}
	pthread_mutex_unlock(&c->mu);
out:
	pthread_mutex_lock(&c->mu);
	for (pp = &c->pending; *pp; pp = &(*pp)->next) {
		if (*pp == &p) {
			*pp = p.next;
			break;
		}
	}
	pthread_mutex_unlock(&c->mu);
	if (rc == GH_OK)
		*reply = p.reply;
	else
		gh_mcp_msg_clear(&p.reply);
out_nolist:
	pthread_cond_destroy(&p.cv);
	gh_buf_free(&b);
	return rc;
}

static enum gh_code stdio_notify(struct mcp_conn *base, const char *method, const cJSON *params,
				 int64_t timeout_ms, struct gh_err *e)
{
	struct stdio_conn *c = (struct stdio_conn *)base;
	struct gh_buf b;
	enum gh_code rc;

	gh_buf_init(&b, (size_t)c->conf->max_message_bytes);
	if (gh_mcp_build_notification(&b, method, params) != GH_BUF_OK)
		rc = gh_err_set(e, GH_E_TOOBIG, "MCP server %s: the notification is too large",
				c->conf->name);
	else
		rc = send_msg(c, &b, timeout_ms, e);
	gh_buf_free(&b);
	return rc;
}

static enum gh_code stdio_respond(struct mcp_conn *base, const char *body, size_t len,
				  struct gh_err *e)
{
	struct stdio_conn *c = (struct stdio_conn *)base;
	struct gh_buf b;
	enum gh_code rc;

	gh_buf_init(&b, len + 2);
	if (gh_buf_append(&b, body, len) != GH_BUF_OK)
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
	else
		rc = send_msg(c, &b, 5000, e);
	gh_buf_free(&b);
	return rc;
}

static void stdio_agreed(struct mcp_conn *base, const char *version)
{
	(void)base;
	(void)version;
}

static void stdio_listen(struct mcp_conn *base)
{
	(void)base; /* the reader reads everything from the start */
}

/* ------------------------------------------------------------ closing */

/* Waits up to ms for the child to exit; 1 when reaped (status in *st). */
static int wait_exit(pid_t pid, int64_t ms, int *st)
{
	int64_t end = gh_mono_ns() / 1000000 + ms;

	for (;;) {
		pid_t r = waitpid(pid, st, WNOHANG);

		if (r == pid)
			return 1;
		if (r < 0 && errno != EINTR)
			return 1; /* not ours any more (reaped elsewhere): nothing to wait for */
		if (gh_mono_ns() / 1000000 >= end)
			return 0;
		sleep_ms(10);
	}
}

static void stdio_close(struct mcp_conn *base, char *why, size_t cap)
{
	struct stdio_conn *c = (struct stdio_conn *)base;
	int st = 0, done;
	const char *how = "";
	char status[64] = "";

	pthread_mutex_lock(&c->mu);
	fail_all(c, "the connection was closed");
	pthread_mutex_unlock(&c->mu);
	/* no writer is inside write_line once dead is set and wmu is taken */
	pthread_mutex_lock(&c->wmu);
	if (c->in_fd >= 0) {
		close(c->in_fd);
		c->in_fd = -1;
	}
	pthread_mutex_unlock(&c->wmu);
	if (!c->reaped) {
		int64_t grace = c->conf->shutdown_grace_ms;

		done = wait_exit(c->pid, grace, &st);
		if (!done) {
			how = " after SIGTERM";
			kill(-c->pid, SIGTERM);
			done = wait_exit(c->pid, grace, &st);
		}
		if (!done) {
			how = " after SIGKILL";
			kill(-c->pid, SIGKILL);
			done = wait_exit(c->pid, 5000, &st);
		}
		/* whatever the child left in its process group goes with it */
		kill(-c->pid, SIGKILL);
		c->reaped = 1;
		if (done)
			status_text(st, status, sizeof(status));
		else
			snprintf(status, sizeof(status), "did not exit even after SIGKILL");
		if (why && cap)
			snprintf(why, cap, "pid %d %s%s", (int)c->pid, status, how);
	}
	if (c->reader_started) {
		ssize_t w;

		do
			w = write(c->wake[1], "x", 1);
		while (w < 0 && errno == EINTR);
		pthread_join(c->reader, NULL);
		c->reader_started = 0;
	}
}

static void stdio_destroy(struct mcp_conn *base)
{
	struct stdio_conn *c = (struct stdio_conn *)base;

	if (c->reader_started)
		stdio_close(base, NULL, 0);
	if (c->in_fd >= 0)
		close(c->in_fd);
	if (c->out_fd >= 0)
		close(c->out_fd);
	if (c->err_fd >= 0)
		close(c->err_fd);
	if (c->wake[0] >= 0)
		close(c->wake[0]);
	if (c->wake[1] >= 0)
		close(c->wake[1]);
	gh_mcp_reader_free(c->rd);
	gh_buf_free(&c->errline);
	pthread_mutex_destroy(&c->mu);
	pthread_mutex_destroy(&c->wmu);
	free(c);
}

static const struct mcp_conn_ops stdio_ops = {
	stdio_request, stdio_notify, stdio_respond, stdio_agreed, stdio_listen, stdio_close,
	stdio_destroy,
};

/* ------------------------------------------------------------ opening */

/* Signals a child starts with at their default disposition, whatever
 * gatehouse does with them. */
static const int default_signals[] = {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT,
				      SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM};

static const char *const passed_env[] = {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM",
					 "LANG", "LC_ALL", "TZ", "TMPDIR"};

/* The child's environment: NULL-terminated "NAME=value" strings, each
 * allocated; free with free_env. Config entries win over passed ones. */
static char **make_env(const struct gh_mcp_server_conf *conf)
{
	size_t cap = GH_ARRAY_LEN(passed_env) + conf->nenv + 1, n = 0, i, j;
	char **v = calloc(cap, sizeof(*v));

	if (!v)
		return NULL;
	for (i = 0; i < GH_ARRAY_LEN(passed_env); i++) {
		const char *val = getenv(passed_env[i]);
		int overridden = 0;

		for (j = 0; j < conf->nenv && !overridden; j++)
			overridden = !strcmp(conf->env[j].name, passed_env[i]);
		if (!val || overridden)
			continue;
		if (asprintf(&v[n], "%s=%s", passed_env[i], val) < 0)
			goto fail;
		n++;
	}
	for (j = 0; j < conf->nenv; j++) {
		if (asprintf(&v[n], "%s=%s", conf->env[j].name, conf->env[j].value) < 0)
			goto fail;
		n++;
	}
	return v;
fail:
	v[n] = NULL;
	for (i = 0; i < n; i++) {
		sodium_memzero(v[i], strlen(v[i]));
		free(v[i]);
	}
	free(v);
	return NULL;
}

static void free_env(char **v)
{
	size_t i;

	for (i = 0; v && v[i]; i++) {
		sodium_memzero(v[i], strlen(v[i]));
		free(v[i]);
	}
	free(v);
}

enum gh_code mcp_stdio_open(const struct gh_mcp_server_conf *conf, const struct mcp_events *ev,
			    struct mcp_conn **out, struct gh_err *e)
{
	struct stdio_conn *c = calloc(1, sizeof(*c));
	int in[2] = {-1, -1}, outp[2] = {-1, -1}, errp[2] = {-1, -1}, spawn_rc;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, dflt;
	char **argv = NULL, **envp = NULL;
	enum gh_code rc = GH_E_NOMEM;
	size_t i;
	int fa_ok = 0, attr_ok = 0;

	*out = NULL;
	if (!c)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	c->in_fd = c->out_fd = c->err_fd = c->wake[0] = c->wake[1] = -1;
	c->conf = conf;
	c->ev = *ev;
	c->base.ops = &stdio_ops;
	atomic_init(&c->base.refs, 1);
	atomic_init(&c->base.dead, 0);
	atomic_init(&c->base.failing, 0);
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->wmu, NULL);
	gh_buf_init(&c->errline, STDERR_LINE_MAX + 1);
	c->rd = gh_mcp_reader_new(GH_MCP_LINES, (size_t)conf->max_message_bytes);
	argv = calloc(conf->args.n + 2, sizeof(*argv));
	envp = make_env(conf);
	if (!c->rd || !argv || !envp) {
		gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto fail;
	}
	argv[0] = conf->command;
	for (i = 0; i < conf->args.n; i++)
		argv[i + 1] = conf->args.v[i];
	if (pipe2(in, O_CLOEXEC) || pipe2(outp, O_CLOEXEC) || pipe2(errp, O_CLOEXEC) ||
	    pipe2(c->wake, O_CLOEXEC)) {
		rc = gh_err_set(e, GH_E_IO, "MCP server %s: cannot make pipes: %s", conf->name,
				strerror(errno));
		goto fail;
	}
	if (posix_spawn_file_actions_init(&fa) != 0) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto fail;
	}
	fa_ok = 1;
	if (posix_spawnattr_init(&attr) != 0) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto fail;
	}
	attr_ok = 1;
	sigemptyset(&none);
	sigemptyset(&dflt);
	for (i = 0; i < GH_ARRAY_LEN(default_signals); i++)
		sigaddset(&dflt, default_signals[i]);
	if (posix_spawn_file_actions_adddup2(&fa, in[0], 0) ||
	    posix_spawn_file_actions_adddup2(&fa, outp[1], 1) ||
	    posix_spawn_file_actions_adddup2(&fa, errp[1], 2) ||
	    posix_spawn_file_actions_addclosefrom_np(&fa, 3) ||
	    (conf->cwd && posix_spawn_file_actions_addchdir_np(&fa, conf->cwd)) ||
	    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
						    POSIX_SPAWN_SETPGROUP) ||
	    posix_spawnattr_setsigmask(&attr, &none) ||
	    posix_spawnattr_setsigdefault(&attr, &dflt) || posix_spawnattr_setpgroup(&attr, 0)) {
		rc = gh_err_set(e, GH_E_INTERNAL, "MCP server %s: cannot prepare the child",
				conf->name);
		goto fail;
	}
	spawn_rc = posix_spawnp(&c->pid, conf->command, &fa, &attr, argv, envp);
	if (spawn_rc != 0) {
		rc = gh_err_set(e, GH_E_UPSTREAM, "MCP server %s: cannot start \"%s\": %s",
				conf->name, conf->command, strerror(spawn_rc));
		goto fail;
	}
	close(in[0]);
	close(outp[1]);
	close(errp[1]);
	in[0] = outp[1] = errp[1] = -1;
	c->in_fd = in[1];
	c->out_fd = outp[0];
	c->err_fd = errp[0];
	in[1] = outp[0] = errp[0] = -1;
	fcntl(c->in_fd, F_SETFL, fcntl(c->in_fd, F_GETFL) | O_NONBLOCK);
	snprintf(c->base.session, sizeof(c->base.session), "pid %d", (int)c->pid);
	if (pthread_create(&c->reader, NULL, reader_main, c) != 0) {
		char why[128];

		rc = gh_err_set(e, GH_E_INTERNAL, "MCP server %s: cannot start its reader thread",
				conf->name);
		stdio_close(&c->base, why, sizeof(why));
		goto fail;
	}
	c->reader_started = 1;
	gh_info("mcp %s: started %s (pid %d)", conf->name, conf->command, (int)c->pid);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	free(argv);
	free_env(envp);
	*out = &c->base;
	return GH_OK;
fail:
	if (fa_ok)
		posix_spawn_file_actions_destroy(&fa);
	if (attr_ok)
		posix_spawnattr_destroy(&attr);
	for (i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (outp[i] >= 0)
			close(outp[i]);
		if (errp[i] >= 0)
			close(errp[i]);
	}
	free(argv);
	free_env(envp);
	c->reader_started = 0;
	c->reaped = 1;
	stdio_destroy(&c->base);
	return rc;
}
