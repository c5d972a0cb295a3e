/*
 * audit_witness.c - the witness of signed checkpoints; see audit_witness.h.
 */
#include "audit_witness.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "buf.h"
#include "log.h"
#include "upstream.h"
#include "util.h"

#define TAG "gatehouse-witness 1 "
#define QUEUE_MAX 256
#define SEND_TRIES 3
#define TAIL_BYTES 65536

/* ------------------------------------------------------------ lines */

size_t gh_witness_format(const struct gh_audit_checkpoint *c, const unsigned char prev_sig[64],
			 char *out, size_t cap)
{
	char hash[65], key[65], sig[129], psig[129], prev[24];
	int n;

	gh_hex(c->hash, 32, hash);
	gh_hex(c->public_key, 32, key);
	gh_hex(c->signature, 64, sig);
	if (c->chained) {
		static const unsigned char zero[64];

		gh_hex(prev_sig ? prev_sig : zero, 64, psig);
		snprintf(prev, sizeof(prev), "%lld", (long long)c->prev_seq);
	} else {
		gh_strlcpy(psig, "-", sizeof(psig));
		gh_strlcpy(prev, "-", sizeof(prev));
	}
	n = snprintf(out, cap, TAG "seq=%lld ts=%lld prev=%s hash=%s key=%s sig=%s prevsig=%s\n",
		     (long long)c->seq, (long long)c->ts, prev, hash, key, sig, psig);
	return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

/* Reads "name=" then the value up to the next space (or the end) from
 * *p, which moves past it. The value is copied into val (cap bytes); it
 * is printable ASCII, so no NUL or newline can hide inside it. */
static int field(const char **p, const char *end, const char *name, char *val, size_t cap)
{
	size_t nl = strlen(name), vl = 0;
	const char *q = *p;

	if ((size_t)(end - q) < nl + 1 || memcmp(q, name, nl) || q[nl] != '=')
		return -1;
	q += nl + 1;
	while (q + vl < end && q[vl] != ' ') {
		if (q[vl] < '!' || q[vl] > '~')
			return -1;
		vl++;
	}
	if (vl == 0 || vl >= cap)
		return -1;
	memcpy(val, q, vl);
	val[vl] = '\0';
	q += vl;
	if (q < end && ++q == end)
		return -1; /* the space separates: another field follows it */
	*p = q;
	return 0;
}

/* The line's spelling is canonical (what gh_witness_format writes):
 * decimal without sign or leading zeros, lower-case hex. */
static int num(const char *s, int64_t min, int64_t max, int64_t *out)
{
	const char *p;

	if (!*s || (s[0] == '0' && s[1]))
		return -1;
	for (p = s; *p; p++)
		if (*p < '0' || *p > '9')
			return -1;
	return gh_parse_i64(s, min, max, out);
}

static int hex(const char *s, unsigned char *out, size_t n)
{
	const char *p;

	if (strlen(s) != 2 * n)
		return -1;
	for (p = s; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return -1;
	return gh_unhex(s, out, n);
}

int gh_witness_parse(const char *line, size_t len, struct gh_witness_entry *out)
{
	const char *p = line, *end = line + len;
	char seq[24], ts[24], prev[24], hash[72], key[72], sig[136], psig[136];
	int64_t v;

	memset(out, 0, sizeof(*out));
	if (len && line[len - 1] == '\n')
		end--;
	if ((size_t)(end - p) < sizeof(TAG) - 1 || memcmp(p, TAG, sizeof(TAG) - 1))
		return -1;
	p += sizeof(TAG) - 1;
	if (field(&p, end, "seq", seq, sizeof(seq)) || field(&p, end, "ts", ts, sizeof(ts)) ||
	    field(&p, end, "prev", prev, sizeof(prev)) ||
	    field(&p, end, "hash", hash, sizeof(hash)) || field(&p, end, "key", key, sizeof(key)) ||
	    field(&p, end, "sig", sig, sizeof(sig)) ||
	    field(&p, end, "prevsig", psig, sizeof(psig)) || p != end)
		return -1;
	if (num(seq, 1, INT64_MAX, &out->c.seq) || num(ts, 0, INT64_MAX, &v))
		return -1;
	out->c.ts = v;
	if (hex(hash, out->c.hash, 32) || hex(key, out->c.public_key, 32) ||
	    hex(sig, out->c.signature, 64))
		return -1;
	if (!strcmp(prev, "-")) {
		if (strcmp(psig, "-"))
			return -1;
	} else {
		if (num(prev, 0, out->c.seq - 1, &out->c.prev_seq) || hex(psig, out->prev_sig, 64))
			return -1;
		out->c.chained = 1;
	}
	out->c.ok_sizes = 1;
	return 0;
}

int gh_witness_entry_valid(const struct gh_witness_entry *w, const unsigned char *trusted_pk)
{
	const struct gh_audit_checkpoint *c = &w->c;

	if (trusted_pk && memcmp(trusted_pk, c->public_key, 32))
		return 0;
	if (c->chained)
		return gh_audit_ckpt_sig_ok(c->public_key, c->seq, c->hash, c->ts, c->prev_seq,
					    w->prev_sig, c->signature);
	return gh_audit_sig_ok(c->public_key, "ckpt", c->seq, c->hash, c->ts, c->signature);
}

/* Calls fn for each whole line of buf[0..n); a line longer than the
 * maximum, or one that does not parse, counts as bad. The part after
 * the last newline is left (its length returned in *rest). */
static int each_line(const char *buf, size_t n, int (*fn)(void *ud, const struct gh_witness_entry *w),
		     void *ud, int64_t *bad, size_t *rest)
{
	size_t i = 0;

	while (i < n) {
		const char *nl = memchr(buf + i, '\n', n - i);
		struct gh_witness_entry w;
		size_t len;

		if (!nl)
			break;
		len = (size_t)(nl - (buf + i)) + 1;
		if (len > GH_WITNESS_LINE_MAX || gh_witness_parse(buf + i, len, &w) != 0) {
			if (bad)
				(*bad)++;
		} else if (fn(ud, &w)) {
			return 1;
		}
		i += len;
	}
	*rest = n - i;
	return 0;
}

enum gh_code gh_witness_read(const char *path,
			     int (*fn)(void *ud, const struct gh_witness_entry *w), void *ud,
			     int64_t *bad_lines, struct gh_err *e)
{
	char buf[65536];
	size_t have = 0, rest;
	int64_t total = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC), skipping = 0;
	ssize_t r;

	if (bad_lines)
		*bad_lines = 0;
	if (fd < 0)
		return gh_err_set(e, errno == ENOENT ? GH_E_NOTFOUND : GH_E_IO,
				  "witness %s: %s", path, strerror(errno));
	for (;;) {
		r = read(fd, buf + have, sizeof(buf) - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int err = errno;

			close(fd);
			return gh_err_set(e, GH_E_IO, "witness %s: %s", path, strerror(err));
		}
		if (r == 0)
			break;
		total += r;
		if (total > GH_WITNESS_FILE_MAX) {
			close(fd);
			return gh_err_set(e, GH_E_IO, "witness %s: larger than %lld bytes", path,
					  (long long)GH_WITNESS_FILE_MAX);
		}
		have += (size_t)r;
		if (skipping) {
			/* the rest of an overlong line */
			const char *nl = memchr(buf, '\n', have);

			if (!nl) {
				have = 0;
				continue;
			}
			rest = have - (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, rest);
			have = rest;
			skipping = 0;
		}
		if (each_line(buf, have, fn, ud, bad_lines, &rest)) {
			close(fd);
			return GH_OK;
		}
		memmove(buf, buf + have - rest, rest);
		have = rest;
		if (have == sizeof(buf)) {
			if (bad_lines)
				(*bad_lines)++;
			have = 0;
			skipping = 1;
		}
	}
	close(fd);
	if (have && !skipping && bad_lines)
		(*bad_lines)++; /* a torn last line */
	return GH_OK;
}

struct newest {
	struct gh_witness_entry *out;
	int found;
};

static int newest_cb(void *ud, const struct gh_witness_entry *w)
{
	struct newest *n = ud;

	if (!n->found || w->c.seq > n->out->c.seq)
		*n->out = *w;
	n->found = 1;
	return 0;
}

enum gh_code gh_witness_newest(const char *path, struct gh_witness_entry *out, int *found,
			       struct gh_err *e)
{
	struct newest n = {out, 0};
	struct stat st;
	off_t from;
	size_t have = 0, rest, start = 0;
	char *tail;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t r;

	*found = 0;
	if (fd < 0)
		return gh_err_set(e, errno == ENOENT ? GH_E_NOTFOUND : GH_E_IO,
				  "witness %s: %s", path, strerror(errno));
	if (fstat(fd, &st) != 0) {
		int err = errno;

		close(fd);
		return gh_err_set(e, GH_E_IO, "witness %s: %s", path, strerror(err));
	}
	if (!(tail = malloc(TAIL_BYTES))) {
		close(fd);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	from = st.st_size > TAIL_BYTES ? st.st_size - TAIL_BYTES : 0;
	while (have < TAIL_BYTES) {
		r = pread(fd, tail + have, TAIL_BYTES - have, from + (off_t)have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		have += (size_t)r;
	}
	close(fd);
	if (from > 0) {
		/* the first line is probably cut: start after it */
		const char *nl = memchr(tail, '\n', have);

		start = nl ? (size_t)(nl + 1 - tail) : have;
	}
	each_line(tail + start, have - start, newest_cb, &n, NULL, &rest);
	free(tail);
	*found = n.found;
	return GH_OK;
}

/* ------------------------------------------------------------ writing */

struct item {
	struct gh_audit_checkpoint c;
	unsigned char prev_sig[64];
};

struct gh_witness {
	char *path;
	char *webhook_url;
	char *database;
	int64_t webhook_timeout_ms;
	int use_syslog;
	int fd;

	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct item q[QUEUE_MAX];
	size_t head, n;
	int stopping;
	int busy;                      /* the thread holds an item */
	pthread_t thread;
	int started;
	struct gh_witness_stats st;    /* under mu */
};

static void note_error(struct gh_witness *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void note_error(struct gh_witness *w, const char *fmt, ...)
{
	va_list ap;
	char msg[256];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	gh_warn("audit witness: %s", msg);
	pthread_mutex_lock(&w->mu);
	gh_strlcpy(w->st.last_error, msg, sizeof(w->st.last_error));
	pthread_mutex_unlock(&w->mu);
}

static int write_line(struct gh_witness *w, const struct item *it)
{
	char line[GH_WITNESS_LINE_MAX];
	size_t n = gh_witness_format(&it->c, it->prev_sig, line, sizeof(line));
	ssize_t r;

	if (n == 0)
		return -1;
	/* one write: O_APPEND makes it land whole after whatever is there */
	do {
		r = write(w->fd, line, n);
	} while (r < 0 && errno == EINTR);
	if (r != (ssize_t)n) {
		note_error(w, "%s: cannot append checkpoint %lld: %s", w->path,
			   (long long)it->c.seq, r < 0 ? strerror(errno) : "short write");
		return -1;
	}
	if (fdatasync(w->fd) != 0) {
		note_error(w, "%s: cannot sync: %s", w->path, strerror(errno));
		return -1;
	}
	return 0;
}

static int send_webhook(struct gh_witness *w, const struct item *it)
{
	char hash[65], key[65], sig[129], body[1024];
	struct gh_upstream_header h = {"Content-Type", "application/json"};
	struct gh_upstream_req req;
	struct gh_upstream_resp resp;
	struct gh_err e;
	struct gh_buf b;
	int ok = 0, n;

	gh_hex(it->c.hash, 32, hash);
	gh_hex(it->c.public_key, 32, key);
	gh_hex(it->c.signature, 64, sig);
	gh_buf_init(&b, 8192);
	/* the database path is the only string that needs escaping */
	{
		const char *p;

		for (p = w->database ? w->database : ""; *p; p++) {
			if ((*p == '"' || *p == '\\') && gh_buf_putc(&b, '\\') != GH_BUF_OK)
				goto out;
			if ((unsigned char)*p < 0x20)
				continue;
			if (gh_buf_putc(&b, *p) != GH_BUF_OK)
				goto out;
		}
	}
	n = snprintf(body, sizeof(body),
		     "{\"type\":\"gatehouse.audit.checkpoint\",\"database\":\"%s\",\"seq\":%lld,"
		     "\"ts\":%lld,\"prevSeq\":%lld,\"hash\":\"%s\",\"publicKey\":\"%s\","
		     "\"signature\":\"%s\"}",
		     b.data ? b.data : "", (long long)it->c.seq, (long long)it->c.ts,
		     (long long)(it->c.chained ? it->c.prev_seq : -1), hash, key, sig);
	if (n <= 0 || (size_t)n >= sizeof(body))
		goto out;
	memset(&req, 0, sizeof(req));
	req.url = w->webhook_url;
	req.headers = &h;
	req.nheaders = 1;
	req.body = body;
	req.body_len = (size_t)n;
	req.timeout_ms = w->webhook_timeout_ms;
	req.connect_timeout_ms = w->webhook_timeout_ms;
	req.max_response = 4096;
	for (int t = 0; t < SEND_TRIES && !ok; t++) {
		gh_upstream_resp_init(&resp, 4096);
		gh_err_clear(&e);
		if (gh_upstream_do(&req, &resp, &e) == GH_OK && resp.status >= 200 &&
		    resp.status < 300)
			ok = 1;
		else if (t == SEND_TRIES - 1)
			note_error(w, "webhook: checkpoint %lld not delivered: %s",
				   (long long)it->c.seq,
				   e.msg[0] ? e.msg : "the webhook answered with an error status");
		gh_upstream_resp_free(&resp);
		if (!ok && t < SEND_TRIES - 1) {
			int stop;

			pthread_mutex_lock(&w->mu);
			stop = w->stopping;
			pthread_mutex_unlock(&w->mu);
			if (stop)
				break;
			usleep((useconds_t)(200000 << t));
		}
	}
out:
	gh_buf_free(&b);
	return ok ? 0 : -1;
}

static void *witness_main(void *arg)
{
	struct gh_witness *w = arg;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		struct item it;
		int wrote, sent = 0, tried = 0;

		while (!w->n && !w->stopping)
			pthread_cond_wait(&w->cv, &w->mu);
		if (!w->n)
			break;
		it = w->q[w->head];
		w->head = (w->head + 1) % QUEUE_MAX;
		w->n--;
		w->busy = 1;
		pthread_mutex_unlock(&w->mu);
		wrote = write_line(w, &it) == 0;
		if (w->use_syslog) {
			char hash[65], sig[129];

			gh_hex(it.c.hash, 32, hash);
			gh_hex(it.c.signature, 64, sig);
			syslog(LOG_AUTH | LOG_NOTICE,
			       "audit checkpoint database=%s seq=%lld ts=%lld hash=%s sig=%s",
			       w->database ? w->database : "", (long long)it.c.seq,
			       (long long)it.c.ts, hash, sig);
		}
		if (w->webhook_url) {
			tried = 1;
			sent = send_webhook(w, &it) == 0;
		}
		pthread_mutex_lock(&w->mu);
		w->busy = 0;
		w->st.failing = !wrote;
		if (wrote) {
			w->st.written++;
			if (it.c.seq > w->st.last_seq)
				w->st.last_seq = it.c.seq;
		} else {
			w->st.file_errors++;
		}
		if (tried && sent)
			w->st.sent++;
		else if (tried)
			w->st.send_errors++;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

enum gh_code gh_witness_open(const struct gh_witness_opts *o, struct gh_witness **out,
			     struct gh_err *e)
{
	struct gh_witness *w;

	*out = NULL;
	if (!o->path || !*o->path)
		return gh_err_set(e, GH_E_INTERNAL, "witness: no file");
	w = calloc(1, sizeof(*w));
	if (!w)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	w->fd = -1;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->path = strdup(o->path);
	w->webhook_url = o->webhook_url && *o->webhook_url ? strdup(o->webhook_url) : NULL;
	w->database = o->database ? strdup(o->database) : NULL;
	w->webhook_timeout_ms = o->webhook_timeout_ms > 0 ? o->webhook_timeout_ms : 5000;
	w->use_syslog = o->syslog;
	if (!w->path || (o->webhook_url && *o->webhook_url && !w->webhook_url) ||
	    (o->database && !w->database)) {
		gh_witness_close(w);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	w->fd = open(w->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (w->fd < 0) {
		gh_err_set(e, GH_E_IO, "audit witness %s: cannot open for appending: %s", w->path,
			   strerror(errno));
		gh_witness_close(w);
		return GH_E_IO;
	}
	if (w->use_syslog)
		openlog("gatehouse", LOG_PID | LOG_NDELAY, LOG_AUTH);
	if (pthread_create(&w->thread, NULL, witness_main, w) != 0) {
		gh_witness_close(w);
		return gh_err_set(e, GH_E_INTERNAL, "audit witness: cannot start its thread");
	}
	w->started = 1;
	*out = w;
	return GH_OK;
}

void gh_witness_record(struct gh_witness *w, const struct gh_audit_checkpoint *c,
		       const unsigned char prev_sig[64])
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	if (w->n == QUEUE_MAX || w->stopping) {
		w->st.dropped++;
	} else {
		struct item *it = &w->q[(w->head + w->n) % QUEUE_MAX];

		it->c = *c;
		if (prev_sig)
			memcpy(it->prev_sig, prev_sig, 64);
		else
			memset(it->prev_sig, 0, 64);
		w->n++;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
}

void gh_witness_on_checkpoint(void *ud, const struct gh_audit_checkpoint *c,
			      const unsigned char prev_sig[64])
{
	gh_witness_record(ud, c, prev_sig);
}

void gh_witness_stats(struct gh_witness *w, struct gh_witness_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	*out = w->st;
	pthread_mutex_unlock(&w->mu);
}

const char *gh_witness_path(const struct gh_witness *w)
{
	return w ? w->path : NULL;
}

void gh_witness_close(struct gh_witness *w)
{
	if (!w)
		return;
	if (w->started) {
		struct timespec ts;
		int64_t wait_ms = (w->webhook_url ? w->webhook_timeout_ms * SEND_TRIES : 0) + 5000;

		/* let the queue drain, for a bounded time */
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += (time_t)(wait_ms / 1000);
		pthread_mutex_lock(&w->mu);
		while ((w->n || w->busy) &&
		       pthread_cond_timedwait(&w->cv, &w->mu, &ts) != ETIMEDOUT)
			;
		if (w->n) {
			gh_warn("audit witness: %zu checkpoints not witnessed at shutdown", w->n);
			w->st.dropped += (int64_t)w->n;
			w->n = 0;
		}
		w->stopping = 1;
		pthread_cond_broadcast(&w->cv);
		pthread_mutex_unlock(&w->mu);
		pthread_join(w->thread, NULL);
	}
	if (w->fd >= 0)
		close(w->fd);
	if (w->use_syslog && w->started)
		closelog();
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w->path);
	free(w->webhook_url);
	free(w->database);
	free(w);
}
