/*
 * test_sse.c - the SSE parser gatehouse reads upstream streams with, and
 * the writer of its own SSE responses.
 *
 * Each table case is fed whole, split in two at every byte, and one byte
 * at a time; all three must give the same events, comments, feed result
 * and truncation verdict. Events are logged as "type|id|retry|data;" and
 * comments as "#text;", in the order the callbacks saw them.
 */
#include "t.h"

#include <limits.h>
#include <time.h>

#include "buf.h"
#include "sse.h"

struct rec {
	struct gh_buf log;
	int bad;          /* an event broke data_len == strlen(data) */
	int stop_event;   /* stop with stop_value at this event (1-based); 0 = never */
	int stop_comment; /* same for comments */
	int stop_value;
	int events;
	int comments;
};

static void rec_init(struct rec *r)
{
	memset(r, 0, sizeof(*r));
	gh_buf_init(&r->log, 1 << 24);
}

static int on_event(void *ud, const struct gh_sse_event *ev)
{
	struct rec *r = ud;

	if (!ev->type || !ev->data || !ev->id || strlen(ev->data) != ev->data_len)
		r->bad = 1;
	gh_buf_printf(&r->log, "%s|%s|%ld|", ev->type, ev->id, ev->retry_ms);
	gh_buf_append(&r->log, ev->data, ev->data_len);
	gh_buf_putc(&r->log, ';');
	r->events++;
	return r->events == r->stop_event ? r->stop_value : 0;
}

static int on_comment(void *ud, const char *text, size_t len)
{
	struct rec *r = ud;

	if (text[len] != '\0')
		r->bad = 1;
	gh_buf_putc(&r->log, '#');
	gh_buf_append(&r->log, text, len);
	gh_buf_putc(&r->log, ';');
	r->comments++;
	return r->comments == r->stop_comment ? r->stop_value : 0;
}

enum mode { WHOLE, SPLIT, BYTES };

struct outcome {
	char *log;    /* caller frees */
	int rc;       /* last feed's result */
	int finished; /* gh_sse_finish() */
	int bad;
};

/* Feeds in[0..n) as the mode says (SPLIT cuts at k) and finishes. */
static struct outcome run(const char *in, size_t n, enum mode mode, size_t k, size_t max_line,
			  size_t max_event)
{
	struct gh_sse_parser *p = gh_sse_new(max_line, max_event);
	struct outcome o = {NULL, 0, 0, 0};
	struct rec r;
	size_t i;

	rec_init(&r);
	if (!p) {
		o.bad = 1;
		o.log = gh_buf_detach(&r.log);
		return o;
	}
	switch (mode) {
	case WHOLE:
		o.rc = gh_sse_feed(p, in, n, on_event, on_comment, &r);
		break;
	case SPLIT:
		o.rc = gh_sse_feed(p, in, k, on_event, on_comment, &r);
		o.rc = gh_sse_feed(p, in + k, n - k, on_event, on_comment, &r);
		break;
	case BYTES:
		for (i = 0; i < n; i++)
			o.rc = gh_sse_feed(p, in + i, 1, on_event, on_comment, &r);
		break;
	}
	o.finished = gh_sse_finish(p);
	o.bad = r.bad;
	o.log = gh_buf_detach(&r.log);
	gh_sse_free(p);
	return o;
}

struct sse_case {
	const char *name;
	const char *in;
	size_t len;
	const char *want;
	int finished;
};

/* sizeof keeps NUL bytes inside the input */
#define C(name, in, want, fin) {name, in, sizeof(in) - 1, want, fin}

static const struct sse_case sse_cases[] = {
	/* fields and values */
	C("data", "data: hello\n\n", "message||-1|hello;", 0),
	C("data without space", "data:hello\n\n", "message||-1|hello;", 0),
	C("only one space stripped", "data:  two\n\n", "message||-1| two;", 0),
	C("tab is kept", "data:\tx\n\n", "message||-1|\tx;", 0),
	C("data lines joined", "data: a\ndata: b\ndata: c\n\n", "message||-1|a\nb\nc;", 0),
	C("colon inside value", "data: {\"a\":\"b:c\"}\n\n", "message||-1|{\"a\":\"b:c\"};", 0),
	C("data without colon", "data\n\n", "message||-1|;", 0),
	C("two empty data lines", "data\ndata:\n\n", "message||-1|\n;", 0),
	C("trailing empty data line", "data: a\ndata:\n\n", "message||-1|a\n;", 0),
	C("event type", "event: ping\ndata: x\n\n", "ping||-1|x;", 0),
	C("event type resets", "event: a\ndata: 1\n\ndata: 2\n\n", "a||-1|1;message||-1|2;", 0),
	C("last event type wins", "event: a\nevent: b\ndata: 1\n\n", "b||-1|1;", 0),
	C("empty event type", "event:\ndata: 1\n\n", "message||-1|1;", 0),
	C("event without colon", "event\ndata: 1\n\n", "message||-1|1;", 0),
	C("no data no event, type reset", "event: a\n\ndata: 1\n\n", "message||-1|1;", 0),
	C("unknown and miscased fields", "foo: bar\nDATA: no\nData: no\n data: no\ndata : no\n"
	  "dat: no\ndatax: no\ndata: yes\n\n", "message||-1|yes;", 0),
	C("blank lines only", "\n\n\r\n\r", "", 0),
	C("empty stream", "", "", 0),
	/* comments */
	C("comment", ": keep-alive\n\n", "#keep-alive;", 0),
	C("comment forms", ":x\n:\n::y\n:  z\n", "#x;#;#:y;# z;", 0),
	C("comment inside event", "data: a\n: ping\ndata: b\n\n", "#ping;message||-1|a\nb;", 0),
	C("comment looking like data", ":data: x\n\n", "#data: x;", 0),
	/* line ends */
	C("crlf", "data: a\r\ndata: b\r\n\r\n", "message||-1|a\nb;", 0),
	C("lone cr", "data: a\rdata: b\r\r", "message||-1|a\nb;", 0),
	C("mixed line ends", "data: a\rdata: b\r\ndata: c\n\r\ndata: d\r\n\n",
	  "message||-1|a\nb\nc;message||-1|d;", 0),
	C("cr cr is two lines", "data: a\r\rdata: b\r\r", "message||-1|a;message||-1|b;", 0),
	C("lf cr is two lines", "data: a\n\rdata: b\n\n", "message||-1|a;message||-1|b;", 0),
	C("cr lf lf", "data: a\r\n\ndata: b\r\n\n", "message||-1|a;message||-1|b;", 0),
	/* byte order mark */
	C("bom", "\xEF\xBB\xBF" "data: x\n\n", "message||-1|x;", 0),
	C("bom only once", "\xEF\xBB\xBF\xEF\xBB\xBF" "data: x\n\ndata: y\n\n",
	  "message||-1|y;", 0),
	C("bom not at start", "data: x\n\n\xEF\xBB\xBF" "data: y\n\n", "message||-1|x;", 0),
	C("partial bom starts the line", "\xEF\xBB" "data: x\n\ndata: y\n\n", "message||-1|y;", 0),
	C("partial bom then comment", "\xEF\n\n: c\n", "#c;", 0),
	C("bom alone", "\xEF\xBB\xBF", "", 0),
	C("partial bom at eof", "\xEF\xBB", "", 1),
	C("bom then comment", "\xEF\xBB\xBF: hi\n", "#hi;", 0),
	/* id */
	C("id kept across events", "id: 7\ndata: a\n\ndata: b\n\n",
	  "message|7|-1|a;message|7|-1|b;", 0),
	C("id without data", "id: 9\n\ndata: z\n\n", "message|9|-1|z;", 0),
	C("id after data", "data: a\nid: 3\n\n", "message|3|-1|a;", 0),
	C("id with nul ignored", "id: 1\ndata: a\n\nid: 2\0x\ndata: b\n\n",
	  "message|1|-1|a;message|1|-1|b;", 0),
	C("empty id resets", "id: 1\ndata: a\n\nid\ndata: b\n\n",
	  "message|1|-1|a;message||-1|b;", 0),
	/* retry */
	C("retry", "retry: 3000\ndata: x\n\n", "message||3000|x;", 0),
	C("retry per event", "retry: 5\ndata: a\n\ndata: b\n\n", "message||5|a;message||-1|b;", 0),
	C("retry invalid", "retry: 3s\ndata: a\n\nretry: -1\ndata: b\n\nretry:\ndata: c\n\n"
	  "retry:  7\ndata: d\n\nretry: +7\ndata: e\n\nretry: 1.5\ndata: f\n\n",
	  "message||-1|a;message||-1|b;message||-1|c;message||-1|d;message||-1|e;"
	  "message||-1|f;", 0),
	C("retry without data not carried", "retry: 10\n\ndata: a\n\n", "message||-1|a;", 0),
	C("invalid retry keeps valid one", "retry: 1\nretry: x\ndata: a\n\n", "message||1|a;", 0),
	C("later retry wins", "retry: 1\nretry: 0\ndata: a\n\n", "message||0|a;", 0),
	/* NUL bytes reach C code as U+FFFD */
	C("nul in data", "data: a\0b\n\n", "message||-1|a\xEF\xBF\xBD" "b;", 0),
	C("nul in type", "event: x\0y\ndata: 1\n\n", "x\xEF\xBF\xBDy||-1|1;", 0),
	C("nul field name ignored", "data\0: a\ndata: b\n\n", "message||-1|b;", 0),
	/* truncation */
	C("no blank line after event", "data: x\n", "", 1),
	C("no line end", "data: x", "", 1),
	C("last event lost", "data: a\n\ndata: b\n", "message||-1|a;", 1),
	C("pending event type", "data: a\n\nevent: x\n", "message||-1|a;", 1),
	C("pending ignored field", "foo\n", "", 1),
	C("trailing comment is clean", "data: a\n\n: bye\n", "message||-1|a;#bye;", 0),
	C("trailing partial comment", "data: a\n\n: by", "message||-1|a;", 1),
	C("ends on cr", "data: a\r\r", "message||-1|a;", 0),
	C("ends on crlf pair", "data: a\r\n\r\n", "message||-1|a;", 0),
	/* real upstreams */
	C("openai chat stream",
	  "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":"
	  "[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n"
	  ": OPENROUTER PROCESSING\n\n"
	  "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
	  "\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
	  "\"arguments\":\"\"}}]}}]}\n\n"
	  "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":"
	  "{\"arguments\":\"{\\\"city\\\":\"}}]}}]}\n\n"
	  "data: [DONE]\n\n",
	  "message||-1|{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":"
	  "[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]};"
	  "#OPENROUTER PROCESSING;"
	  "message||-1|{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":"
	  "\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
	  "\"\"}}]}}]};"
	  "message||-1|{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
	  "\"function\":{\"arguments\":\"{\\\"city\\\":\"}}]}}]};"
	  "message||-1|[DONE];", 0),
	C("anthropic messages stream",
	  "event: message_start\r\n"
	  "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\"}}\r\n\r\n"
	  "event: ping\r\ndata: {\"type\": \"ping\"}\r\n\r\n"
	  "event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"index\":1,"
	  "\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"loc\"}}\r\n\r\n"
	  "event: message_stop\r\ndata: {\"type\":\"message_stop\"}\r\n\r\n",
	  "message_start||-1|{\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\"}};"
	  "ping||-1|{\"type\": \"ping\"};"
	  "content_block_delta||-1|{\"type\":\"content_block_delta\",\"index\":1,\"delta\":"
	  "{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"loc\"}};"
	  "message_stop||-1|{\"type\":\"message_stop\"};", 0),
};

static void check_case(const struct sse_case *c)
{
	struct outcome o;
	size_t k;
	int i;

	for (i = 0; i < 3; i++) {
		size_t kmax = i == SPLIT ? c->len : 0;

		for (k = 0; k <= kmax; k++) {
			int ok;

			o = run(c->in, c->len, (enum mode)i, k, 4096, 65536);
			ok = !o.bad && o.rc == GH_SSE_OK && o.finished == c->finished &&
			     strcmp(o.log, c->want) == 0;
			if (!ok) {
				fprintf(stderr, "  case \"%s\" mode %d split %zu: rc %d finish %d "
					"(want %d)%s\n    got:  \"%s\"\n    want: \"%s\"\n",
					c->name, i, k, o.rc, o.finished, c->finished,
					o.bad ? " bad event" : "", o.log, c->want);
				free(o.log);
				T_FAIL("case \"%s\"", c->name);
			}
			free(o.log);
		}
	}
}

static void test_table(void)
{
	size_t i;

	for (i = 0; i < sizeof(sse_cases) / sizeof(sse_cases[0]); i++)
		check_case(&sse_cases[i]);
}

/* A CRLF cut between its CR and LF must stay one line end: if the LF were
 * read as an empty line, "a" and "b" would arrive as two events. */
static void test_crlf_split_across_chunks(void)
{
	struct gh_sse_parser *p = gh_sse_new(1024, 1024);
	struct rec r;

	rec_init(&r);
	T_ASSERT(p);
	T_EQ_INT(gh_sse_feed(p, "data: a\r", 8, on_event, on_comment, &r), GH_SSE_OK);
	T_EQ_INT(gh_sse_feed(p, "\n", 1, on_event, on_comment, &r), GH_SSE_OK);
	T_EQ_INT(gh_sse_feed(p, "data: b\r", 8, on_event, on_comment, &r), GH_SSE_OK);
	T_EQ_INT(gh_sse_feed(p, "\ndata: c\r\n\r", 11, on_event, on_comment, &r), GH_SSE_OK);
	T_EQ_INT(r.events, 1);
	T_EQ_INT(gh_sse_feed(p, "\n", 1, on_event, on_comment, &r), GH_SSE_OK);
	T_EQ_INT(r.events, 1);
	T_EQ_STR(r.log.data, "message||-1|a\nb\nc;");
	T_EQ_INT(gh_sse_finish(p), 0);
	gh_buf_free(&r.log);
	gh_sse_free(p);
}

/* Feeds in, one byte at a time when bytewise, and returns the last result. */
static int feed_all(struct gh_sse_parser *p, const char *in, size_t n, int bytewise,
		    struct rec *r)
{
	size_t i;
	int rc = GH_SSE_OK;

	if (!bytewise)
		return gh_sse_feed(p, in, n, on_event, on_comment, r);
	for (i = 0; i < n; i++)
		rc = gh_sse_feed(p, in + i, 1, on_event, on_comment, r);
	return rc;
}

static void test_line_limit(void)
{
	int bytewise;

	for (bytewise = 0; bytewise < 2; bytewise++) {
		struct gh_sse_parser *p = gh_sse_new(10, 1024);
		struct rec r;

		rec_init(&r);
		T_ASSERT(p);
		/* exactly max_line bytes, terminator not counted */
		T_EQ_INT(feed_all(p, "data: 1234\r\n\r\n", 14, bytewise, &r), GH_SSE_OK);
		T_EQ_STR(r.log.data, "message||-1|1234;");
		T_EQ_INT(feed_all(p, "data: 12345\n\n", 13, bytewise, &r), GH_SSE_TOOBIG);
		T_EQ_INT(r.events, 1);
		/* spent: even a valid event is refused now */
		T_EQ_INT(gh_sse_feed(p, "data: x\n\n", 9, on_event, on_comment, &r), GH_SSE_TOOBIG);
		T_EQ_INT(r.events, 1);
		T_EQ_INT(gh_sse_finish(p), 1);
		gh_buf_free(&r.log);
		gh_sse_free(p);
	}
}

/* A line with no end in sight fails as soon as it passes max_line, not
 * when (if ever) its line end arrives. */
static void test_long_line_fails_before_its_end(void)
{
	struct gh_sse_parser *p = gh_sse_new(1000, 1 << 20);
	char *big = malloc(5000);
	size_t i;
	int rc = GH_SSE_OK;

	T_ASSERT(p && big);
	memset(big, 'x', 5000);
	memcpy(big, "data: ", 6);
	for (i = 0; i < 5000 && rc == GH_SSE_OK; i++)
		rc = gh_sse_feed(p, big + i, 1, on_event, on_comment, NULL);
	T_EQ_INT(rc, GH_SSE_TOOBIG);
	T_EQ_INT(i, 1001);
	/* a single huge chunk fails too */
	gh_sse_finish(p);
	T_EQ_INT(gh_sse_feed(p, big, 5000, on_event, on_comment, NULL), GH_SSE_TOOBIG);
	free(big);
	gh_sse_free(p);
}

/* Nine lines of "data: 0123456789" make 98 bytes of data (8 joining LFs). */
static void test_event_limit(void)
{
	char in[512];
	size_t n = 0, i;
	int bytewise;

	memcpy(in, "data: first\n\n", 13);
	n = 13;
	for (i = 0; i < 9; i++) {
		memcpy(in + n, "data: 0123456789\n", 17);
		n += 17;
	}
	in[n++] = '\n';
	for (bytewise = 0; bytewise < 2; bytewise++) {
		struct gh_sse_parser *p = gh_sse_new(100, 98);
		struct rec r;

		rec_init(&r);
		T_ASSERT(p);
		T_EQ_INT(feed_all(p, in, n, bytewise, &r), GH_SSE_OK);
		T_EQ_INT(r.events, 2);
		T_CONTAINS(r.log.data, "|0123456789\n0123456789\n");
		T_EQ_INT(gh_sse_finish(p), 0);
		gh_sse_free(p);
		gh_buf_free(&r.log);

		p = gh_sse_new(100, 97);
		rec_init(&r);
		T_ASSERT(p);
		T_EQ_INT(feed_all(p, in, n, bytewise, &r), GH_SSE_TOOBIG);
		/* the event before the big one was delivered */
		T_EQ_STR(r.log.data, "message||-1|first;");
		T_EQ_INT(gh_sse_feed(p, "\n", 1, on_event, on_comment, &r), GH_SSE_TOOBIG);
		T_EQ_INT(r.events, 1);
		gh_sse_free(p);
		gh_buf_free(&r.log);
	}
}

/* Empty data lines still count: each adds a LF to the event's data. */
static void test_event_limit_empty_lines(void)
{
	struct gh_sse_parser *p = gh_sse_new(100, 1000);
	int i, rc = GH_SSE_OK;

	T_ASSERT(p);
	for (i = 0; i < 5000 && rc == GH_SSE_OK; i++)
		rc = gh_sse_feed(p, "data\n", 5, on_event, on_comment, NULL);
	T_EQ_INT(rc, GH_SSE_TOOBIG);
	T_EQ_INT(i, 1002);
	gh_sse_free(p);
}

static void test_event_stop(void)
{
	static const char in[] = "data: 1\n\ndata: 2\n\ndata: 3\n\n";
	struct gh_sse_parser *p = gh_sse_new(100, 100);
	struct rec r;

	rec_init(&r);
	r.stop_event = 2;
	r.stop_value = 7;
	T_ASSERT(p);
	T_EQ_INT(gh_sse_feed(p, in, sizeof(in) - 1, on_event, on_comment, &r), 7);
	T_EQ_STR(r.log.data, "message||-1|1;message||-1|2;");
	/* the parser is spent: the third event never arrives */
	T_EQ_INT(gh_sse_feed(p, "\n", 1, on_event, on_comment, &r), 7);
	T_EQ_INT(r.events, 2);
	T_EQ_INT(gh_sse_finish(p), 1);
	gh_buf_free(&r.log);
	gh_sse_free(p);
}

static void test_comment_stop(void)
{
	static const char in[] = ": a\n: b\ndata: x\n\n";
	struct gh_sse_parser *p = gh_sse_new(100, 100);
	struct rec r;

	rec_init(&r);
	r.stop_comment = 2;
	r.stop_value = 3;
	T_ASSERT(p);
	T_EQ_INT(gh_sse_feed(p, in, sizeof(in) - 1, on_event, on_comment, &r), 3);
	T_EQ_STR(r.log.data, "#a;#b;");
	gh_buf_free(&r.log);
	gh_sse_free(p);
}

static void test_null_callbacks(void)
{
	static const char in[] = ": c\ndata: x\n\n";
	struct gh_sse_parser *p = gh_sse_new(100, 100);

	T_ASSERT(p);
	T_EQ_INT(gh_sse_feed(p, in, sizeof(in) - 1, NULL, NULL, NULL), GH_SSE_OK);
	T_EQ_INT(gh_sse_feed(p, NULL, 0, NULL, NULL, NULL), GH_SSE_OK);
	T_EQ_INT(gh_sse_finish(p), 0);
	gh_sse_free(p);
	gh_sse_free(NULL);
}

/* A retry: too large for a long still counts, as the largest one. */
static void test_retry_saturates(void)
{
	static const char in[] = "retry: 99999999999999999999999999\ndata: a\n\n";
	struct gh_sse_parser *p = gh_sse_new(100, 100);
	char want[64];
	struct rec r;

	rec_init(&r);
	T_ASSERT(p);
	T_EQ_INT(gh_sse_feed(p, in, sizeof(in) - 1, on_event, on_comment, &r), GH_SSE_OK);
	snprintf(want, sizeof(want), "message||%ld|a;", LONG_MAX);
	T_EQ_STR(r.log.data, want);
	gh_buf_free(&r.log);
	gh_sse_free(p);
}

/* finish() readies the parser for a new stream: BOM checked again, id,
 * failure and pending event forgotten. */
static void test_finish_resets(void)
{
	static const char first[] =
		"\xEF\xBB\xBF" "id: 5\ndata: a\n\nevent: t\nretry: 9\ndata: x\ndata: half";
	static const char second[] = "\xEF\xBB\xBF" "data: b\n\n";
	struct gh_sse_parser *p = gh_sse_new(12, 100);
	struct rec r;

	rec_init(&r);
	T_ASSERT(p);
	T_EQ_INT(gh_sse_feed(p, first, sizeof(first) - 1, on_event, on_comment, &r), GH_SSE_OK);
	T_EQ_INT(gh_sse_finish(p), 1);
	T_EQ_INT(gh_sse_feed(p, second, sizeof(second) - 1, on_event, on_comment, &r), GH_SSE_OK);
	T_EQ_INT(gh_sse_finish(p), 0);
	T_EQ_STR(r.log.data, "message|5|-1|a;message||-1|b;");
	/* a failed stream is truncated, and the next one starts clean */
	T_EQ_INT(gh_sse_feed(p, "data: 0123456789\n", 17, on_event, on_comment, &r),
		 GH_SSE_TOOBIG);
	T_EQ_INT(gh_sse_finish(p), 1);
	T_EQ_INT(gh_sse_feed(p, "data: c\n\n", 9, on_event, on_comment, &r), GH_SSE_OK);
	T_EQ_INT(gh_sse_finish(p), 0);
	T_EQ_INT(r.events, 3);
	gh_buf_free(&r.log);
	gh_sse_free(p);
}

/* 4 MiB of one event, one byte per feed: a parser that rescans what it
 * holds on every feed would need hours; a linear one takes well under a
 * second even under sanitizers. */
static void test_bytewise_is_linear(void)
{
	const size_t n = 4u << 20;
	struct gh_sse_parser *p = gh_sse_new(n, n);
	char *in = malloc(n);
	struct rec r;
	clock_t t0;
	double secs;
	size_t i;
	int rc = GH_SSE_OK;

	rec_init(&r);
	T_ASSERT(p && in);
	/* lines of "data: xxx...x\n", 100 bytes each, then the blank line */
	for (i = 0; i + 100 <= n - 1; i += 100) {
		memcpy(in + i, "data: ", 6);
		memset(in + i + 6, 'x', 93);
		in[i + 99] = '\n';
	}
	memset(in + i, '\n', n - i);
	t0 = clock();
	for (i = 0; i < n && rc == GH_SSE_OK; i++)
		rc = gh_sse_feed(p, in + i, 1, on_event, on_comment, &r);
	secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
	T_EQ_INT(rc, GH_SSE_OK);
	T_EQ_INT(r.events, 1);
	T_ASSERT(secs < 10.0);
	free(in);
	gh_buf_free(&r.log);
	gh_sse_free(p);
}

static void test_write_format(void)
{
	struct gh_buf b;

	gh_buf_init(&b, 1024);
	T_EQ_INT(gh_sse_write(&b, NULL, "{\"a\":1}", 7), GH_BUF_OK);
	T_EQ_STR(b.data, "data: {\"a\":1}\n\n");
	gh_buf_reset(&b);
	T_EQ_INT(gh_sse_write(&b, "message_stop", "x\ny", 3), GH_BUF_OK);
	T_EQ_STR(b.data, "event: message_stop\ndata: x\ndata: y\n\n");
	gh_buf_reset(&b);
	T_EQ_INT(gh_sse_write(&b, NULL, NULL, 0), GH_BUF_OK);
	T_EQ_STR(b.data, "data: \n\n");
	gh_buf_free(&b);
}

struct one {
	int n;
	char type[64];
	char data[256];
	size_t len;
};

static int keep_one(void *ud, const struct gh_sse_event *ev)
{
	struct one *o = ud;

	o->n++;
	snprintf(o->type, sizeof(o->type), "%s", ev->type);
	o->len = ev->data_len < sizeof(o->data) - 1 ? ev->data_len : sizeof(o->data) - 1;
	memcpy(o->data, ev->data, o->len);
	o->data[o->len] = '\0';
	return 0;
}

/* What gatehouse writes, a client's parser reads back as one event. */
static void test_write_round_trip(void)
{
	static const struct {
		const char *type, *payload, *back;
	} trips[] = {
		{NULL, "line1\nline2\n\nline4", "line1\nline2\n\nline4"},
		{"delta", "\nstarts and ends\n", "\nstarts and ends\n"},
		{NULL, "", ""},
		{"done", "[DONE]", "[DONE]"},
		/* CR and CRLF cannot smuggle fields or end the event */
		{"safe", "x\r\nevent: evil\rid: 1\r\r\ndata: y",
		 "x\nevent: evil\nid: 1\n\ndata: y"},
	};
	size_t i;

	for (i = 0; i < sizeof(trips) / sizeof(trips[0]); i++) {
		struct gh_sse_parser *p = gh_sse_new(1024, 1024);
		struct one o = {0, "", "", 0};
		struct gh_buf b;

		gh_buf_init(&b, 4096);
		T_ASSERT(p);
		T_EQ_INT(gh_sse_write(&b, trips[i].type, trips[i].payload,
				      strlen(trips[i].payload)), GH_BUF_OK);
		T_EQ_INT(gh_sse_feed(p, b.data, b.len, keep_one, NULL, &o), GH_SSE_OK);
		T_EQ_INT(gh_sse_finish(p), 0);
		T_EQ_INT(o.n, 1);
		T_EQ_STR(o.type, trips[i].type ? trips[i].type : "message");
		T_EQ_STR(o.data, trips[i].back);
		gh_buf_free(&b);
		gh_sse_free(p);
	}
}

static void test_write_refusals_leave_buffer(void)
{
	struct gh_buf b;

	gh_buf_init(&b, 32);
	T_EQ_INT(gh_sse_write(&b, NULL, "kept", 4), GH_BUF_OK);
	/* a type with a line end would inject fields */
	T_EQ_INT(gh_sse_write(&b, "a\ndata: x", "p", 1), GH_BUF_TOOBIG);
	T_EQ_INT(gh_sse_write(&b, "a\rb", "p", 1), GH_BUF_TOOBIG);
	T_EQ_STR(b.data, "data: kept\n\n");
	/* over the cap half way: nothing of the event stays */
	T_EQ_INT(gh_sse_write(&b, NULL, "0123456789\n0123456789", 21), GH_BUF_TOOBIG);
	T_EQ_STR(b.data, "data: kept\n\n");
	T_EQ_INT(b.len, 12);
	gh_buf_free(&b);
}

T_MAIN(T(test_table), T(test_crlf_split_across_chunks), T(test_line_limit),
       T(test_long_line_fails_before_its_end), T(test_event_limit),
       T(test_event_limit_empty_lines), T(test_event_stop), T(test_comment_stop),
       T(test_null_callbacks), T(test_retry_saturates), T(test_finish_resets),
       T(test_bytewise_is_linear),
       T(test_write_format), T(test_write_round_trip), T(test_write_refusals_leave_buffer))
