/*
 * fuzz_traceparent.c - the W3C traceparent/tracestate parser gatehouse
 * runs on every traced request's headers.
 *
 * The input is "traceparent\ntracestate" (no newline: no tracestate).
 * Checks:
 *   - a refused header leaves the context zeroed (not valid);
 *   - an accepted one has non-zero ids, formats as a 55-byte version-00
 *     header that parses back to the same ids and flags, and, for a
 *     version-00 input, formats back to the input without its blanks;
 *   - a kept tracestate is at most GH_TRACESTATE_MAX printable bytes and
 *     is the input's (after leading blanks), else it is empty.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "otel.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int zeroed(const struct gh_trace_ctx *c)
{
	static const struct gh_trace_ctx z;

	return !memcmp(c, &z, sizeof(z));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *tp = malloc(size + 1), *ts, *nl;
	struct gh_trace_ctx c, back;
	char out[GH_TRACEPARENT_LEN + 1];
	size_t i, n;

	if (!tp)
		return 0;
	memcpy(tp, data, size);
	tp[size] = '\0';
	nl = memchr(tp, '\n', size);
	ts = NULL;
	if (nl) {
		*nl = '\0';
		ts = nl + 1;
	}
	if (gh_traceparent_parse(tp, ts, &c) != 0) {
		CHECK(zeroed(&c));
		free(tp);
		return 0;
	}
	CHECK(c.valid);
	for (i = 0, n = 0; i < 16; i++)
		n |= c.trace_id[i];
	CHECK(n);
	for (i = 0, n = 0; i < 8; i++)
		n |= c.span_id[i];
	CHECK(n);
	gh_traceparent_format(&c, out, sizeof(out));
	CHECK(strlen(out) == GH_TRACEPARENT_LEN);
	CHECK(gh_traceparent_parse(out, NULL, &back) == 0);
	CHECK(!memcmp(back.trace_id, c.trace_id, 16) && !memcmp(back.span_id, c.span_id, 8) &&
	      back.flags == c.flags);
	{
		const char *p = tp;

		while (*p == ' ' || *p == '\t')
			p++;
		if (p[0] == '0' && p[1] == '0')
			CHECK(!strncmp(p, out, GH_TRACEPARENT_LEN));
	}
	n = strlen(c.tracestate);
	CHECK(n <= GH_TRACESTATE_MAX);
	for (i = 0; i < n; i++)
		CHECK(c.tracestate[i] >= 0x20 && c.tracestate[i] <= 0x7e);
	if (n) {
		const char *p = ts;

		CHECK(p);
		while (*p == ' ' || *p == '\t')
			p++;
		CHECK(!strcmp(p, c.tracestate));
	}
	free(tp);
	return 0;
}
