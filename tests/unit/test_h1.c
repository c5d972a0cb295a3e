/*
 * test_h1.c - the HTTP/1.x response parser of the built-in upstream
 * client: framing by Content-Length, chunks (extensions, trailers) and the
 * end of the connection, interim heads, keep-alive verdicts, bytes after
 * the response, callbacks that stop it, and each bound and malformed
 * reply refused with a reason. Every valid response is also fed one byte
 * at a time and must read the same.
 */
#include "h1.h"

#include "t.h"

struct got {
	char head[4096];
	char body[4096];
	size_t hlen, blen;
	int stop_after;   /* stop at this many callbacks; 0 = never */
	int calls;
};

/* Appends p (n bytes) to dst (cap bytes, *len used) when it fits; the
 * callback's verdict for g: 1 to stop the parser. */
static int take(struct got *g, char *dst, size_t cap, size_t *len, const char *p, size_t n)
{
	if (*len + n < cap) {
		memcpy(dst + *len, p, n);
		*len += n;
		dst[*len] = '\0';
	}
	return g->stop_after && ++g->calls >= g->stop_after;
}

static int on_header(void *ud, const char *line, size_t n)
{
	struct got *g = ud;

	return take(g, g->head, sizeof(g->head), &g->hlen, line, n);
}

static int on_body(void *ud, const char *p, size_t n)
{
	struct got *g = ud;

	return take(g, g->body, sizeof(g->body), &g->blen, p, n);
}

/* Feeds s in pieces of step bytes (0: whole), then the end of the
 * connection when eof and the parser still wants more. The result; *used
 * the bytes taken. */
static enum gh_h1_rc parse(struct gh_h1 *p, struct got *g, const char *s, size_t n, size_t step,
			   int eof, size_t *used)
{
	const struct gh_h1_cb cb = {on_header, on_body, g};
	enum gh_h1_rc rc = GH_H1_MORE;
	size_t off = 0;

	g->hlen = g->blen = 0;
	g->head[0] = g->body[0] = '\0';
	g->calls = 0;
	while (off < n && rc == GH_H1_MORE) {
		size_t k = step && step < n - off ? step : n - off, u = 0;

		rc = gh_h1_feed(p, s + off, k, &u, &cb);
		off += u;
	}
	if (rc == GH_H1_MORE && eof)
		rc = gh_h1_eof(p);
	*used = off;
	return rc;
}

/* s parses to rc with body and keep-alive, whole and byte by byte. */
static void expect(const char *s, int eof, enum gh_h1_rc rc, int status, const char *body,
		   int keep_alive)
{
	size_t steps[] = {0, 1, 7}, i, used;

	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct gh_h1 p;
		struct got g = {.calls = 0};

		gh_h1_init(&p, 0);
		T_EQ_INT(parse(&p, &g, s, strlen(s), steps[i], eof, &used), rc);
		T_EQ_INT(p.status, status);
		if (body)
			T_EQ_STR(g.body, body);
		if (rc == GH_H1_DONE)
			T_EQ_INT(p.keep_alive, keep_alive);
		gh_h1_free(&p);
	}
}

static void test_content_length(void)
{
	expect("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
	       "{\"ok\":true}", 0, GH_H1_DONE, 200, "{\"ok\":true}", 1);
	/* the whole head reaches the callback, line by line as sent */
	{
		struct gh_h1 p;
		struct got g = {.calls = 0};
		size_t used;
		const char *s = "HTTP/1.1 201 Created\r\nX-A: 1\r\nContent-Length: 0\r\n\r\n";

		gh_h1_init(&p, 0);
		T_EQ_INT(parse(&p, &g, s, strlen(s), 3, 0, &used), GH_H1_DONE);
		T_EQ_STR(g.head, s);
		T_EQ_INT((int)used, (int)strlen(s));
		gh_h1_free(&p);
	}
}

static void test_chunked(void)
{
	expect("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n"
	       "6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n", 0, GH_H1_DONE, 200, "hello world", 1);
	/* bare LF line ends, upper-case hex, a list ending in chunked */
	expect("HTTP/1.1 200 OK\ntransfer-encoding: identity, chunked\n\nA\n0123456789\n0\n\n", 0,
	       GH_H1_DONE, 200, "0123456789", 1);
	/* chunked beside a Content-Length: chunked wins, the connection ends */
	expect("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "2\r\nok\r\n0\r\n\r\n", 0, GH_H1_DONE, 200, "ok", 0);
}

static void test_until_close(void)
{
	/* no length: the body runs to the end of the connection */
	expect("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nto the end", 1, GH_H1_DONE,
	       200, "to the end", 0);
	/* without the end, it is not over */
	expect("HTTP/1.1 200 OK\r\n\r\npartial", 0, GH_H1_MORE, 200, "partial", 0);
}

static void test_keep_alive_verdicts(void)
{
	expect("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", 0,
	       GH_H1_DONE, 200, "", 0);
	expect("HTTP/1.1 200 OK\r\nConnection: Upgrade, CLOSE\r\nContent-Length: 0\r\n\r\n", 0,
	       GH_H1_DONE, 200, "", 0);
	expect("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", 0, GH_H1_DONE, 200, "", 0);
	expect("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", 0,
	       GH_H1_DONE, 200, "ok", 1);
}

static void test_interim_and_bodiless(void)
{
	expect("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
	       "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 0, GH_H1_DONE, 200, "ok", 1);
	expect("HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", 0, GH_H1_DONE, 204, "",
	       1);
	expect("HTTP/1.1 304 Not Modified\r\n\r\n", 0, GH_H1_DONE, 304, "", 1);
	{
		/* the answer to a HEAD has no body whatever its length says */
		struct gh_h1 p;
		struct got g = {.calls = 0};
		size_t used;
		const char *s = "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n";

		gh_h1_init(&p, 1);
		T_EQ_INT(parse(&p, &g, s, strlen(s), 0, 0, &used), GH_H1_DONE);
		gh_h1_free(&p);
	}
}

static void test_bytes_after_the_response(void)
{
	struct gh_h1 p;
	struct got g = {.calls = 0};
	size_t used;
	const char *s = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n";

	gh_h1_init(&p, 0);
	T_EQ_INT(parse(&p, &g, s, strlen(s), 0, 0, &used), GH_H1_DONE);
	T_EQ_INT((int)used, (int)(strlen(s) - strlen("HTTP/1.1 200 OK\r\n")));
	T_EQ_STR(g.body, "ok");
	gh_h1_free(&p);
}

static void test_callback_stops(void)
{
	const struct gh_h1_cb cb = {on_header, on_body, NULL};
	struct gh_h1_cb c = cb;
	struct gh_h1 p;
	struct got g = {.calls = 0};
	size_t used;
	const char *s = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";

	memset(&g, 0, sizeof(g));
	g.stop_after = 2; /* the status line, then the Content-Length line */
	c.ud = &g;
	gh_h1_init(&p, 0);
	T_EQ_INT(gh_h1_feed(&p, s, strlen(s), &used, &c), GH_H1_STOP);
	T_EQ_INT((int)used, (int)strlen("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"));
	T_EQ_STR(g.body, "");
	gh_h1_free(&p);
}

/* s is refused with a reason containing why, whole and byte by byte. */
static void refused(const char *s, int eof, const char *why)
{
	size_t steps[] = {0, 1}, i, used;

	for (i = 0; i < 2; i++) {
		struct gh_h1 p;
		struct got g = {.calls = 0};

		gh_h1_init(&p, 0);
		T_EQ_INT(parse(&p, &g, s, strlen(s), steps[i], eof, &used), GH_H1_ERROR);
		T_CONTAINS(p.err, why);
		gh_h1_free(&p);
	}
}

static void test_malformed(void)
{
	refused("SSH-2.0-OpenSSH\r\n", 0, "not an HTTP/1.x response");
	refused("HTTP/2 200\r\n\r\n", 0, "not an HTTP/1.x response");
	refused("HTTP/1.1 20 OK\r\n\r\n", 0, "not an HTTP/1.x response");
	refused("HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", 0, "bad Content-Length");
	refused("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 0,
		"conflicting Content-Length");
	refused("HTTP/1.1 200 OK\r\nContent-Length: 9999999999999999999\r\n\r\n", 0,
		"bad Content-Length");
	refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 0,
		"unsupported Transfer-Encoding");
	refused("HTTP/1.1 101 Switching Protocols\r\n\r\n", 0, "switched protocols");
	refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0,
		"bad chunk size");
	refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\n", 0,
		"chunk size too large");
	refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokX\r\n", 0,
		"bad chunk end");
	refused("", 1, "closed without a reply");
	refused("HTTP/1.1 200 O", 1, "closed mid-head");
	refused("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nok", 1, "closed mid-body");
	refused("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nok", 1,
		"closed mid-body");
}

static void test_bounds(void)
{
	size_t n = GH_H1_LINE_MAX + 64, i;
	char *s = malloc(GH_H1_HEAD_MAX + 4096);

	T_ASSERT(s);
	/* one header line over 16 KB */
	memcpy(s, "HTTP/1.1 200 OK\r\nX-Long: ", 25);
	for (i = 25; i < n; i++)
		s[i] = 'a';
	memcpy(s + n, "\r\n\r\n", 5);
	refused(s, 0, "line over 16 KB");
	/* many short lines, 256 KB of head in all */
	memcpy(s, "HTTP/1.1 200 OK\r\n", 17);
	for (i = 17; i + 9 < GH_H1_HEAD_MAX + 2048; i += 9)
		memcpy(s + i, "X-A: 12\r\n", 9);
	memcpy(s + i, "\r\n", 3);
	refused(s, 0, "head over 256 KB");
	/* a chunk size line that never ends */
	memcpy(s, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;", 49);
	for (i = 49; i < n; i++)
		s[i] = 'e';
	s[n] = '\0';
	refused(s, 0, "chunk line over 16 KB");
	free(s);
}

T_MAIN(T(test_content_length), T(test_chunked), T(test_until_close),
       T(test_keep_alive_verdicts), T(test_interim_and_bodiless),
       T(test_bytes_after_the_response), T(test_callback_stops), T(test_malformed),
       T(test_bounds))
