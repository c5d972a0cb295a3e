/*
 * bench_streams.c - many concurrent native streams (POST /api/agents/:id/
 * stream, SSE) held through gatehouse against the fake upstream pacing its
 * chunks: gatehouse's memory per held stream, the time to first token it
 * adds, and that no chunk is dropped or reordered.
 *
 * Per repetition, two phases with the same ramp (streams opened at a fixed
 * rate until all are open, then held until they end):
 *   direct   N streams straight to the fake's /v1/chat/completions, with the
 *            upstream body gatehouse sends (captured during warm-up);
 *   gateway  N streams through a freshly started gatehouse.
 * Odd repetitions run the gateway phase first and stop gatehouse before
 * the direct one: its idle keep-alive connections would otherwise hold
 * the fake's workers and the direct streams would queue for them.
 * The fake paces every stream (stream.chunk_delay_ms between events,
 * words_per_chunk words per delta) so all N are open at once. Time to first
 * token is from writing the request to reading the first text: the first
 * non-empty delta.content directly, the first "text-delta" through
 * gatehouse. Added TTFT is gateway minus direct at the same percentile.
 * Each stream's request carries a tag (bench-stream-d000042 or -g000042)
 * the fake recognises: it records when it read that request and when it
 * wrote the answer's first text (GET /_timings, CLOCK_MONOTONIC as here),
 * and the stream's time outside the fake is its TTFT minus that span. The
 * fake's own delays (its pacing timer, its workers waiting for a CPU while
 * a thousand streams are paced), which set most of a phase's p99 and differ
 * from one phase to the next, are so taken out of both sides: what remains
 * is the way there and back, through gatehouse or not, measured stream by
 * stream. Added time outside the fake is gateway minus direct at the same
 * percentile.
 * gatehouse's VmRSS is read from /proc before the phase (idle, after
 * warm-up) and every 200 ms during it; growth = the highest reading while
 * all N streams were open, minus the idle reading. gatehouse's and the
 * fake's CPU time over each phase (and gatehouse's while all N were open)
 * come from /proc too. Every stream's text is compared byte for byte with
 * the scripted text, whose words are numbered (w00000 w00001 ...), so a
 * dropped or reordered chunk cannot pass; it must end with "finish" and
 * [DONE].
 *
 * --upstream-host names the fake in gatehouse's provider base_url. The
 * default, 127.0.0.1, needs no lookup; a name from /etc/hosts makes
 * gatehouse resolve it the way a deployment resolves its provider's name
 * (curl answers "localhost" itself, without a lookup).
 *
 * One thread drives every connection with epoll. RLIMIT_NOFILE is raised
 * for this process and its children.
 */
#include <sys/epoll.h>

#include <cjson/cJSON.h>

#include "bench.h"

#define LINE_MAX_B (64u << 10)
#define TEXT_MAX_B (64u << 10)

struct opts {
	int64_t streams;
	int64_t ramp_ms;
	int64_t words;
	int64_t chunk_delay_ms;
	int64_t words_per_chunk;
	int64_t reps;
	int keep;
	const char *upstream_host;  /* how gatehouse names the fake */
};

enum { ST_HEAD, ST_SIZE, ST_DATA, ST_DATA_CRLF, ST_DONE };

struct stream {
	int fd;
	int state;
	int status;
	int64_t remaining;      /* bytes left in the current chunk */
	int64_t t_send, t_first, t_end;
	int64_t f_recv, f_first; /* the fake's read of the request, its first text (0: unknown) */
	char *req;              /* this stream's request (tagged) */
	size_t req_len;
	char *in;               /* raw bytes not yet parsed */
	size_t in_len;
	char *line;             /* the current SSE line (de-chunked) */
	size_t line_len;
	char *text;             /* concatenated text */
	size_t text_len;
	int deltas;
	int finished;           /* "finish" event (gateway) or finish_reason (direct) */
	int done;               /* [DONE] */
	int failed;
	char err[160];
};

struct phase {
	int direct;
	int port;
	const char *path;       /* the request's target */
	const char *auth;       /* its headers besides the body's (or NULL) */
	const char *body;       /* its body: the tag goes after USER_TEXT in it */
	char tag_kind;          /* 'd' direct, 'g' gateway */
	int fake_port;          /* where GET /_timings is asked */
	struct stream *s;
	int n;
	int open, active, ended;
};

static void fail(struct stream *s, const char *why)
{
	if (!s->failed)
		snprintf(s->err, sizeof(s->err), "%s", why);
	s->failed = 1;
}

static void text_add(struct stream *s, const char *t, size_t n, int64_t now)
{
	if (n == 0)
		return;
	if (!s->t_first)
		s->t_first = now;
	if (s->text_len + n + 1 > TEXT_MAX_B) {
		fail(s, "text too long");
		return;
	}
	memcpy(s->text + s->text_len, t, n);
	s->text_len += n;
	s->text[s->text_len] = '\0';
	s->deltas++;
}

/* One complete SSE line (without its newline). */
static void sse_line(struct phase *p, struct stream *s, const char *l, size_t n, int64_t now)
{
	cJSON *j, *v;

	if (n < 6 || strncmp(l, "data: ", 6) != 0)
		return;
	l += 6;
	n -= 6;
	if (n == 6 && !strncmp(l, "[DONE]", 6)) {
		s->done = 1;
		return;
	}
	j = cJSON_ParseWithLength(l, n);
	if (!j) {
		fail(s, "event data is not JSON");
		return;
	}
	if (p->direct) {
		v = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
		if (v) {
			cJSON *d = cJSON_GetObjectItemCaseSensitive(v, "delta");
			cJSON *c = cJSON_GetObjectItemCaseSensitive(d, "content");
			cJSON *f = cJSON_GetObjectItemCaseSensitive(v, "finish_reason");

			if (cJSON_IsString(c))
				text_add(s, c->valuestring, strlen(c->valuestring), now);
			if (cJSON_IsString(f))
				s->finished = 1;
		}
	} else {
		const char *type =
			cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "type"));

		v = cJSON_GetObjectItemCaseSensitive(j, "payload");
		if (type && !strcmp(type, "text-delta")) {
			const char *t =
				cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "text"));

			if (t)
				text_add(s, t, strlen(t), now);
		} else if (type && !strcmp(type, "finish")) {
			s->finished = 1;
		} else if (type && !strcmp(type, "error")) {
			char *e = cJSON_PrintUnformatted(v);

			fail(s, e ? e : "error event");
			free(e);
		}
	}
	cJSON_Delete(j);
}

static void body_bytes(struct phase *p, struct stream *s, const char *b, size_t n, int64_t now)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (b[i] == '\n') {
			size_t len = s->line_len;

			if (len && s->line[len - 1] == '\r')
				len--;
			sse_line(p, s, s->line, len, now);
			s->line_len = 0;
		} else if (s->line_len + 1 < LINE_MAX_B) {
			s->line[s->line_len++] = b[i];
		} else {
			fail(s, "SSE line too long");
		}
	}
}

/* Parses what is in s->in; consumes what it can. */
static void parse(struct phase *p, struct stream *s, int64_t now)
{
	size_t off = 0;

	while (off < s->in_len && s->state != ST_DONE && !s->failed) {
		char *base = s->in + off;
		size_t avail = s->in_len - off;

		if (s->state == ST_HEAD) {
			char *e = bench_memfind(base, avail, "\r\n\r\n", 4);

			if (!e)
				break;
			if (avail < 12 || strncmp(base, "HTTP/1.1 ", 9) != 0) {
				fail(s, "bad status line");
				break;
			}
			s->status = (int)strtol(base + 9, NULL, 10);
			if (s->status != 200) {
				char why[160];

				snprintf(why, sizeof(why), "HTTP %d", s->status);
				fail(s, why);
				break;
			}
			if (!bench_memfind(base, (size_t)(e - base), "chunked", 7)) {
				fail(s, "not chunked");
				break;
			}
			off += (size_t)(e - base) + 4;
			s->state = ST_SIZE;
		} else if (s->state == ST_SIZE) {
			char *e = bench_memfind(base, avail, "\r\n", 2);

			if (!e)
				break;
			s->remaining = strtoll(base, NULL, 16);
			off += (size_t)(e - base) + 2;
			s->state = s->remaining == 0 ? ST_DONE : ST_DATA;
			if (s->state == ST_DONE)
				s->t_end = now;
		} else if (s->state == ST_DATA) {
			size_t k = avail < (size_t)s->remaining ? avail : (size_t)s->remaining;

			body_bytes(p, s, base, k, now);
			off += k;
			s->remaining -= (int64_t)k;
			if (s->remaining == 0)
				s->state = ST_DATA_CRLF;
		} else if (s->state == ST_DATA_CRLF) {
			if (avail < 2)
				break;
			off += 2;
			s->state = ST_SIZE;
		}
	}
	memmove(s->in, s->in + off, s->in_len - off);
	s->in_len -= off;
}

static int open_stream(struct phase *p, struct stream *s, int ep)
{
	struct sockaddr_in a;
	struct epoll_event ev;
	int one = 1;
	size_t w = 0;

	s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->fd < 0)
		return -1;
	setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)p->port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(s->fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(s->fd);
		s->fd = -1;
		return -1;
	}
	s->t_send = bench_ns();
	while (w < s->req_len) {
		ssize_t k = write(s->fd, s->req + w, s->req_len - w);

		if (k <= 0) {
			close(s->fd);
			s->fd = -1;
			return -1;
		}
		w += (size_t)k;
	}
	fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) | O_NONBLOCK);
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.ptr = s;
	return epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &ev);
}

struct phase_result {
	int ok, failed, wrong_text, unfinished;
	struct bench_stats ttft;      /* ms */
	struct bench_stats outside;   /* ms: TTFT less the fake's own span */
	struct bench_stats there;     /* ms: request written to the fake reading it */
	struct bench_stats back;      /* ms: the fake writing the first text to it read */
	int timed;                    /* streams with the fake's times */
	int64_t rss_idle_kb, rss_peak_kb, rss_after_kb;
	int64_t threads;
	int64_t all_open_ms;          /* how long all N were open at once */
	double seconds;               /* the phase, first open to last end */
	double gh_cpu_s, fake_cpu_s;  /* CPU the processes used meanwhile */
	double hold_cpu;              /* gatehouse's CPU (cores) while all N were open */
	char first_err[200];
};

#define USER_TEXT "Tell me a long story."
#define TAG_PREFIX "bench-stream-"

static char *http_request(const char *path, int port, const char *auth, const char *body);

/* Stream i's request: the phase's body with the stream's tag after USER_TEXT. */
static char *tagged_request(const struct phase *p, int i, size_t *len)
{
	const char *at = strstr(p->body, USER_TEXT);
	size_t pre, cap = strlen(p->body) + 64;
	char *body = malloc(cap), *req;

	if (!at)
		bench_die("the request body has no \"" USER_TEXT "\" to tag");
	if (!body)
		bench_die("out of memory");
	pre = (size_t)(at - p->body) + strlen(USER_TEXT);
	snprintf(body, cap, "%.*s " TAG_PREFIX "%c%06d%s", (int)pre, p->body, p->tag_kind, i,
		 p->body + pre);
	req = http_request(p->path, p->port, p->auth, body);
	free(body);
	*len = strlen(req);
	return req;
}

/* The fake's times for this phase's streams (GET /_timings), then forgotten. */
static void read_timings(struct phase *p)
{
	char *txt = bench_http_ok(p->fake_port, "GET", "/_timings", NULL, NULL);
	cJSON *arr = cJSON_Parse(txt), *t;
	size_t plen = strlen(TAG_PREFIX);

	free(txt);
	cJSON_ArrayForEach(t, arr) {
		const char *tag = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "tag"));
		char *end;
		long i;

		if (!tag || strncmp(tag, TAG_PREFIX, plen) || tag[plen] != p->tag_kind)
			continue;
		i = strtol(tag + plen + 1, &end, 10);
		if (*end || i < 0 || i >= p->n)
			continue;
		p->s[i].f_recv = (int64_t)cJSON_GetNumberValue(
			cJSON_GetObjectItemCaseSensitive(t, "recv_ns"));
		p->s[i].f_first = (int64_t)cJSON_GetNumberValue(
			cJSON_GetObjectItemCaseSensitive(t, "first_ns"));
	}
	cJSON_Delete(arr);
	free(bench_http_ok(p->fake_port, "POST", "/_timings", NULL, "{}"));
}

/* Runs one phase; pid (>0) is sampled for RSS and CPU, fake_pid for CPU. */
static struct phase_result run_phase(struct phase *p, const struct opts *o, pid_t pid,
				     pid_t fake_pid, const char *expect)
{
	int64_t cpu_gh = pid > 0 ? bench_cpu_ns(pid) : 0, cpu_fake = bench_cpu_ns(fake_pid);
	int64_t cpu_hold = 0;
	struct phase_result res;
	struct epoll_event evs[256];
	int ep = epoll_create1(EPOLL_CLOEXEC), i;
	int64_t t0, deadline, next_rss = 0, all_open_since = 0;
	int64_t interval = o->streams > 1 ? o->ramp_ms * 1000000 / (o->streams - 1) : 0;
	int64_t *ttft, *outside, *there, *back;
	size_t nt = 0, no = 0;

	memset(&res, 0, sizeof(res));
	if (ep < 0)
		bench_die("epoll_create1: %s", strerror(errno));
	p->s = calloc((size_t)p->n, sizeof(*p->s));
	ttft = calloc((size_t)p->n, sizeof(*ttft));
	outside = calloc((size_t)p->n, sizeof(*outside));
	there = calloc((size_t)p->n, sizeof(*there));
	back = calloc((size_t)p->n, sizeof(*back));
	if (!p->s || !ttft || !outside || !there || !back)
		bench_die("out of memory");
	free(bench_http_ok(p->fake_port, "POST", "/_timings", NULL, "{}"));
	for (i = 0; i < p->n; i++) {
		p->s[i].fd = -1;
		p->s[i].req = tagged_request(p, i, &p->s[i].req_len);
		p->s[i].in = malloc(LINE_MAX_B);
		p->s[i].line = malloc(LINE_MAX_B);
		p->s[i].text = malloc(TEXT_MAX_B);
		if (!p->s[i].in || !p->s[i].line || !p->s[i].text)
			bench_die("out of memory");
		p->s[i].text[0] = '\0';
	}
	res.rss_idle_kb = pid > 0 ? bench_rss_kb(pid) : 0;
	p->open = p->ended = p->active = 0;
	t0 = bench_ns(); /* the ramp starts now that every request is ready */
	deadline = t0 + (o->ramp_ms + o->words / o->words_per_chunk * o->chunk_delay_ms + 60000) *
			     1000000;
	while (p->ended < p->n && bench_ns() < deadline) {
		int64_t now = bench_ns();
		int n;

		/* open the streams that are due */
		while (p->open < p->n && now >= t0 + interval * p->open) {
			struct stream *s = &p->s[p->open++];

			if (open_stream(p, s, ep) != 0) {
				fail(s, "cannot connect");
				p->ended++;
			} else {
				p->active++;
			}
		}
		if (p->open == p->n && p->active == p->n && !all_open_since) {
			all_open_since = now;
			cpu_hold = pid > 0 ? bench_cpu_ns(pid) : 0;
		}
		if (all_open_since && p->active < p->n && !res.all_open_ms) {
			res.all_open_ms = (now - all_open_since) / 1000000;
			if (pid > 0 && now > all_open_since)
				res.hold_cpu = (double)(bench_cpu_ns(pid) - cpu_hold) /
					       (double)(now - all_open_since);
		}
		if (pid > 0 && now >= next_rss) {
			int64_t kb = bench_rss_kb(pid);

			/* the peak counts only while every stream is open */
			if (p->active == p->n && kb > res.rss_peak_kb)
				res.rss_peak_kb = kb;
			if (p->active == p->n)
				res.threads = bench_threads(pid);
			next_rss = now + 200000000;
		}
		n = epoll_wait(ep, evs, 256, 5);
		now = bench_ns();
		for (i = 0; i < n; i++) {
			struct stream *s = evs[i].data.ptr;
			ssize_t k;

			for (;;) {
				if (s->in_len == LINE_MAX_B) {
					fail(s, "input buffer full");
					break;
				}
				k = read(s->fd, s->in + s->in_len, LINE_MAX_B - s->in_len);
				if (k > 0) {
					s->in_len += (size_t)k;
					parse(p, s, now);
					continue;
				}
				if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
					break;
				/* EOF or error: the stream is over */
				if (s->state != ST_DONE)
					fail(s, k == 0 ? "connection closed mid-stream"
						       : "read error");
				s->state = ST_DONE;
				break;
			}
			if (s->state == ST_DONE || s->failed) {
				epoll_ctl(ep, EPOLL_CTL_DEL, s->fd, NULL);
				close(s->fd);
				s->fd = -1;
				p->active--;
				p->ended++;
			}
		}
	}
	if (all_open_since && !res.all_open_ms)
		res.all_open_ms = (bench_ns() - all_open_since) / 1000000;
	read_timings(p);
	res.seconds = (double)(bench_ns() - t0) / 1e9;
	res.gh_cpu_s = pid > 0 ? (double)(bench_cpu_ns(pid) - cpu_gh) / 1e9 : 0;
	res.fake_cpu_s = (double)(bench_cpu_ns(fake_pid) - cpu_fake) / 1e9;
	for (i = 0; i < p->n; i++) {
		struct stream *s = &p->s[i];

		if (s->fd >= 0) {
			fail(s, "did not end before the deadline");
			close(s->fd);
		}
		if (!s->failed && strcmp(s->text, expect) != 0) {
			res.wrong_text++;
			fail(s, "text differs from the scripted text (dropped or reordered chunk)");
		} else if (!s->failed && (!s->finished || (!p->direct && !s->done))) {
			res.unfinished++;
			fail(s, "no finish event or [DONE]");
		}
		if (s->failed) {
			res.failed++;
			if (!res.first_err[0])
				snprintf(res.first_err, sizeof(res.first_err), "stream %d: %s", i,
					 s->err);
		} else {
			res.ok++;
		}
		if (s->t_first)
			ttft[nt++] = s->t_first - s->t_send;
		if (s->t_first && s->f_recv && s->f_first >= s->f_recv &&
		    s->f_recv >= s->t_send && s->f_first <= s->t_first) {
			there[no] = s->f_recv - s->t_send;
			back[no] = s->t_first - s->f_first;
			outside[no++] = (s->t_first - s->t_send) - (s->f_first - s->f_recv);
		}
		free(s->req);
		free(s->in);
		free(s->line);
		free(s->text);
	}
	res.ttft = bench_summary(ttft, nt, 1e6);
	res.outside = bench_summary(outside, no, 1e6);
	res.there = bench_summary(there, no, 1e6);
	res.back = bench_summary(back, no, 1e6);
	free(there);
	free(back);
	res.timed = (int)no;
	free(outside);
	res.rss_after_kb = pid > 0 ? bench_rss_kb(pid) : 0;
	free(ttft);
	free(p->s);
	close(ep);
	return res;
}

/* ----------------------------------------------------------- set-up */

static void write_config(const char *path, const char *host, int fake_port, int64_t streams)
{
	char buf[4096];

	bench_fmt(buf, sizeof(buf),
		  "{\n"
		  " \"server\": {\"listen\": \"127.0.0.1:0\", \"threads\": %lld, "
		  "\"max_streams\": %lld, \"max_body_bytes\": 65536, "
		  /* every stream comes from one loopback address */
		  "\"max_connections_per_address\": 0},\n"
		  " \"database\": {\"path\": \"gatehouse.db\"},\n"
		  " \"providers\": {\"fake\": {\"type\": \"openai\", "
		  "\"base_url\": \"http://%s:%d/v1\", \"api_key\": \"sk-bench\", "
		  "\"timeout_ms\": 600000, \"max_retries\": 0}},\n"
		  " \"agents\": {\"s\": {\"provider\": \"fake\", \"model\": \"stream-m\", "
		  "\"instructions\": \"Tell stories.\", \"tools\": [], "
		  "\"memory\": {\"enabled\": false}, \"max_steps\": 2}},\n"
		  " \"policies\": {\"default\": {\"agents\": [\"*\"], "
		  "\"tools\": {\"allow\": [\"*\"]}}}\n"
		  "}\n",
		  (long long)(streams + 100 > 1100 ? streams + 100 : 1100),
		  (long long)(streams > 1000 ? streams : 1000), host, fake_port);
	bench_write_file(path, buf);
}

static char *expected_text(int64_t words)
{
	char *t = malloc((size_t)words * 8 + 1);
	size_t n = 0;
	int64_t i;

	if (!t)
		bench_die("out of memory");
	for (i = 0; i < words; i++)
		n += (size_t)snprintf(t + n, 9, "%sw%05lld", i ? " " : "", (long long)i);
	t[n] = '\0';
	return t;
}

static void script(int fake_port, const char *text, const struct opts *o)
{
	size_t cap = strlen(text) + 512;
	char *b = malloc(cap);

	if (!b)
		bench_die("out of memory");
	free(bench_http_ok(fake_port, "POST", "/_reset", NULL, "{}"));
	snprintf(b, cap,
		 "{\"model\":\"stream-m\",\"replies\":[{\"text\":\"%s\",\"repeat\":true,"
		 "\"stream\":{\"chunk_delay_ms\":%lld,\"words_per_chunk\":%lld}}]}",
		 text, (long long)o->chunk_delay_ms, (long long)o->words_per_chunk);
	free(bench_http_ok(fake_port, "POST", "/_script", NULL, b));
	free(b);
}

/* One stream through gatehouse, to warm it up and capture the upstream body. */
static char *warm_and_capture(int gh_port, int fake_port, const char *auth, const char *body)
{
	struct bconn c;
	struct bresp r;
	char *txt, *out;
	cJSON *arr, *last;

	if (bconn_open(&c, gh_port, 120000) != 0)
		bench_die("cannot connect to gatehouse");
	if (bconn_request(&c, "POST", "/api/agents/s/stream", auth, body, strlen(body), &r) != 0 ||
	    r.status != 200 || !strstr(r.body, "text-delta"))
		bench_die("warm-up stream failed: %d %.300s", r.status, r.body ? r.body : "");
	bresp_free(&r);
	bconn_close(&c);
	txt = bench_http_ok(fake_port, "GET", "/_requests?model=stream-m", NULL, NULL);
	arr = cJSON_Parse(txt);
	free(txt);
	last = cJSON_GetArrayItem(arr, cJSON_GetArraySize(arr) - 1);
	last = cJSON_GetObjectItemCaseSensitive(last, "body");
	if (!cJSON_IsObject(last) ||
	    !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(last, "stream")))
		bench_die("gatehouse's upstream request was not a stream");
	out = cJSON_PrintUnformatted(last);
	cJSON_Delete(arr);
	return out;
}

static char *http_request(const char *path, int port, const char *auth, const char *body)
{
	size_t cap = strlen(body) + 1024;
	char *r = malloc(cap);

	if (!r)
		bench_die("out of memory");
	snprintf(r, cap,
		 "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
		 "Accept: text/event-stream\r\n%sContent-Length: %zu\r\n"
		 "Connection: close\r\n\r\n%s",
		 path, port, auth ? auth : "", strlen(body), body);
	return r;
}

/* One measure's p50 and p99 of each run (--reps: at most 16), direct and
 * through gatehouse, and gatehouse's addition run by run. */
struct series {
	double d50[16], d99[16], g50[16], g99[16], a50[16], a99[16];
};

static void series_add(struct series *s, int64_t r, const struct bench_stats *d,
		       const struct bench_stats *g)
{
	s->d50[r] = d->p50;
	s->d99[r] = d->p99;
	s->g50[r] = g->p50;
	s->g99[r] = g->p99;
	s->a50[r] = g->p50 - d->p50;
	s->a99[r] = g->p99 - d->p99;
}

/* The medians over n runs: a row each for direct, gatehouse and added. */
static void series_print(const struct series *s, size_t n, int prec, const char *direct,
			 const char *gateway, const char *added)
{
	printf("  %-31s %8.*f  %8.*f\n", direct, prec, bench_median(s->d50, n), prec,
	       bench_median(s->d99, n));
	printf("  %-31s %8.*f  %8.*f\n", gateway, prec, bench_median(s->g50, n), prec,
	       bench_median(s->g99, n));
	printf("  %-31s %8.*f  %8.*f\n", added, prec, bench_median(s->a50, n), prec,
	       bench_median(s->a99, n));
}

static void print_phase(const char *name, const struct phase_result *r)
{
	printf("    %-9s ok %d/%d, failed %d (wrong text %d, unfinished %d); TTFT p50 %.2f p90 "
	       "%.2f p99 %.2f max %.2f ms; all open together for %lld ms\n",
	       name, r->ok, r->ok + r->failed, r->failed, r->wrong_text, r->unfinished,
	       r->ttft.p50, r->ttft.p90, r->ttft.p99, r->ttft.max, (long long)r->all_open_ms);
	printf("              outside the fake (%d streams timed by it): p50 %.3f p90 %.3f "
	       "p99 %.3f max %.3f ms\n", r->timed, r->outside.p50, r->outside.p90,
	       r->outside.p99, r->outside.max);
	printf("              of which to the fake p50 %.3f p99 %.3f ms, back from it p50 %.3f "
	       "p99 %.3f ms\n", r->there.p50, r->there.p99, r->back.p50, r->back.p99);
	printf("              CPU over the %.1f s phase: gatehouse %.1f s (%.0f%% of a core; "
	       "%.0f%% while all were open), fake %.1f s (%.0f%%)\n", r->seconds, r->gh_cpu_s,
	       100 * r->gh_cpu_s / r->seconds, 100 * r->hold_cpu, r->fake_cpu_s,
	       100 * r->fake_cpu_s / r->seconds);
	if (r->first_err[0])
		printf("      first failure: %s\n", r->first_err);
}

/* Stops gatehouse once (pid 0 after). */
static void stop_gatehouse(struct bench_proc *gp)
{
	if (gp->pid <= 0)
		return;
	if (bench_stop(gp->pid, 60000) != 0)
		fprintf(stderr, "bench: gatehouse did not exit cleanly (see %s)\n", gp->err);
	gp->pid = 0;
}

int main(int argc, char **argv)
{
	struct opts o = {.streams = 1000, .ramp_ms = 5000, .words = 150, .chunk_delay_ms = 100,
			 .words_per_chunk = 1, .reps = 3, .upstream_host = "127.0.0.1"};
	char gh[PATH_MAX], fake[PATH_MAX], dir[PATH_MAX], cfg[PATH_MAX], key[256], auth[320];
	const char *v, *user_body =
		"{\"messages\":[{\"role\":\"user\",\"content\":\"" USER_TEXT "\"}]}";
	struct series ttft, outside;
	double grow[16], per[16];
	int no_peak = 0;
	char *text, *up_body = NULL;
	struct bench_proc fp, gp;
	int64_t r, nofile;
	int i, problems = 0;

	for (i = 1; i < argc; i++) {
		if ((v = bench_opt(argc, argv, &i, "--streams")))
			o.streams = bench_num(v, 1, 10000, "--streams");
		else if ((v = bench_opt(argc, argv, &i, "--ramp-ms")))
			o.ramp_ms = bench_num(v, 0, 600000, "--ramp-ms");
		else if ((v = bench_opt(argc, argv, &i, "--words")))
			o.words = bench_num(v, 1, 5000, "--words");
		else if ((v = bench_opt(argc, argv, &i, "--chunk-delay-ms")))
			o.chunk_delay_ms = bench_num(v, 0, 10000, "--chunk-delay-ms");
		else if ((v = bench_opt(argc, argv, &i, "--words-per-chunk")))
			o.words_per_chunk = bench_num(v, 1, 1000, "--words-per-chunk");
		else if ((v = bench_opt(argc, argv, &i, "--reps")))
			o.reps = bench_num(v, 1, 16, "--reps");
		else if ((v = bench_opt(argc, argv, &i, "--upstream-host")))
			o.upstream_host = v;
		else if (!strcmp(argv[i], "--keep"))
			o.keep = 1;
		else
			bench_die("usage: bench_streams [--streams 1000] [--ramp-ms 5000] "
				  "[--words 150]\n       [--chunk-delay-ms 100] "
				  "[--words-per-chunk 1] [--reps 3]\n       [--upstream-host 127.0.0.1] [--keep]");
	}
	bench_init();
	nofile = bench_nofile(4 * o.streams + 1024);
	if (nofile < 3 * o.streams + 256)
		bench_die("RLIMIT_NOFILE is %lld; %lld streams need about %lld (ulimit -n)",
			  (long long)nofile, (long long)o.streams,
			  (long long)(3 * o.streams + 256));
	bench_paths(gh, fake, sizeof(gh));
	bench_tmpdir(dir, sizeof(dir), "streams");
	bench_fmt(cfg, sizeof(cfg), "%s/gatehouse.json", dir);
	text = expected_text(o.words);

	printf("bench_streams: %lld concurrent native streams, %lld words each, one every %lld ms "
	       "(%lld words per chunk), opened over %lld ms\n",
	       (long long)o.streams, (long long)o.words, (long long)o.chunk_delay_ms,
	       (long long)o.words_per_chunk, (long long)o.ramp_ms);
	bench_print_host();
	printf("RLIMIT_NOFILE %lld; gatehouse's provider: http://%s:<port>/v1\n", (long long)nofile,
	       o.upstream_host);
	/* the fake serves at most 1024 connections at once */
	bench_fake_start(fake, dir, (int)(o.streams + 24 < 1024 ? o.streams + 24 : 1024), &fp);
	write_config(cfg, o.upstream_host, fp.port, o.streams);
	bench_key_create(gh, dir, cfg, "bench", 0, key, sizeof(key));
	bench_fmt(auth, sizeof(auth), "Authorization: Bearer %s\r\n", key);
	script(fp.port, text, &o);

	for (r = 0; r < o.reps; r++) {
		struct phase pd, pg;
		struct phase_result rd, rg;
		int64_t idle;

		bench_gh_start(gh, dir, cfg, "warn", &gp);
		if (!up_body) {
			up_body = warm_and_capture(gp.port, fp.port, auth, user_body);
		} else {
			char *b = warm_and_capture(gp.port, fp.port, auth, user_body);

			free(b);
		}
		memset(&pd, 0, sizeof(pd));
		pd.direct = 1;
		pd.port = fp.port;
		pd.path = "/v1/chat/completions";
		pd.body = up_body;
		pd.tag_kind = 'd';
		pd.fake_port = fp.port;
		pd.n = (int)o.streams;
		memset(&pg, 0, sizeof(pg));
		pg.port = gp.port;
		pg.path = "/api/agents/s/stream";
		pg.auth = auth;
		pg.body = user_body;
		pg.tag_kind = 'g';
		pg.fake_port = fp.port;
		pg.n = (int)o.streams;
		bench_sleep_ms(1000);
		idle = bench_rss_kb(gp.pid);
		printf("\n  run %lld: gatehouse idle after warm-up: VmRSS %.1f MB, %lld threads\n",
		       (long long)r + 1, (double)idle / 1024, (long long)bench_threads(gp.pid));
		if (r % 2 == 0) {
			rd = run_phase(&pd, &o, 0, fp.pid, text);
			rg = run_phase(&pg, &o, gp.pid, fp.pid, text);
		} else {
			rg = run_phase(&pg, &o, gp.pid, fp.pid, text);
			/* gatehouse's idle connections to the fake each hold one
			 * of its workers: it goes before the direct phase, or
			 * the direct streams would queue for them */
			stop_gatehouse(&gp);
			bench_sleep_ms(1000);
			rd = run_phase(&pd, &o, 0, fp.pid, text);
		}
		print_phase("direct", &rd);
		print_phase("gateway", &rg);
		printf("    gatehouse VmRSS: idle %.1f MB, peak with all %lld streams open %.1f MB "
		       "(+%.1f MB, %.1f KB per stream), after %.1f MB; %lld threads\n",
		       (double)rg.rss_idle_kb / 1024, (long long)o.streams,
		       (double)rg.rss_peak_kb / 1024,
		       (double)(rg.rss_peak_kb - rg.rss_idle_kb) / 1024,
		       (double)(rg.rss_peak_kb - rg.rss_idle_kb) / (double)o.streams,
		       (double)rg.rss_after_kb / 1024, (long long)rg.threads);
		series_add(&ttft, r, &rd.ttft, &rg.ttft);
		series_add(&outside, r, &rd.outside, &rg.outside);
		if (rd.timed < rd.ok || rg.timed < rg.ok)
			printf("    (the fake timed %d of %d direct and %d of %d gateway streams)\n",
			       rd.timed, rd.ok, rg.timed, rg.ok);
		grow[r] = (double)(rg.rss_peak_kb - rg.rss_idle_kb) / 1024;
		per[r] = (double)(rg.rss_peak_kb - rg.rss_idle_kb) / (double)o.streams;
		problems += rd.failed + rg.failed;
		if (!rg.rss_peak_kb) {
			printf("    (the %lld streams were never all open at once: no peak "
			       "reading)\n", (long long)o.streams);
			no_peak = 1;
		}
		stop_gatehouse(&gp);
	}
	printf("\n%lld streams, median over %lld runs      p50 ms    p99 ms\n",
	       (long long)o.streams, (long long)o.reps);
	series_print(&ttft, (size_t)r, 2, "TTFT direct from the fake", "TTFT through gatehouse",
		     "added");
	series_print(&outside, (size_t)r, 3, "outside the fake, direct",
		     "outside the fake, gatehouse", "added outside the fake");
	printf("  gatehouse RSS growth with all streams open: %.1f MB (%.1f KB per stream)\n",
	       bench_median(grow, (size_t)r), bench_median(per, (size_t)r));
	printf("  targets: RSS growth <= 64 MB: %s; added TTFT p99 <= 1 ms: %s (outside the "
	       "fake: %s); every stream's text intact: %s\n",
	       no_peak ? "n/a" : bench_median(grow, (size_t)r) <= 64 ? "met" : "NOT met",
	       bench_median(ttft.a99, (size_t)r) <= 1 ? "met" : "NOT met",
	       bench_median(outside.a99, (size_t)r) <= 1 ? "met" : "NOT met",
	       problems ? "NO" : "yes");
	bench_stop(fp.pid, 10000);
	free(text);
	free(up_body);
	if (o.keep)
		printf("kept %s\n", dir);
	else
		bench_rmrf(dir);
	return problems ? 1 : 0;
}
