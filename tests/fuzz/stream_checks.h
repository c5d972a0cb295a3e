/*
 * stream_checks.h - a provider wire's stream events read two ways, by its
 * on_event (which takes the common ones from their text, without a tree)
 * and by its on_event_tree (every event through its cJSON tree): the two
 * streams must end every event in the very same state.
 */
#ifndef GH_FUZZ_STREAM_CHECKS_H
#define GH_FUZZ_STREAM_CHECKS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "provider.h"
#include "provider_int.h"
#include "sse.h"

/* What a stream handed on: every text delta and every tool delta, each
 * ended by '|'. */
struct seen {
	struct gh_buf deltas;
};

static inline int seen_text(void *ud, const char *s, size_t n)
{
	struct seen *v = ud;

	gh_buf_append(&v->deltas, s, n);
	gh_buf_putc(&v->deltas, '|');
	return 0;
}

static inline int seen_tool(void *ud, int index, const char *id, const char *name,
			    const char *frag)
{
	struct seen *v = ud;

	gh_buf_put_int(&v->deltas, index);
	gh_buf_printf(&v->deltas, "/%s/%s/%s|", id ? id : "-", name ? name : "-",
		      frag ? frag : "-");
	return 0;
}

static inline void same_state(const struct gh_provider_stream *a,
			      const struct gh_provider_stream *b, const struct seen *va,
			      const struct seen *vb)
{
	size_t i;

	CHECK(a->text.len == b->text.len && (!a->text.len ||
					     !memcmp(a->text.data, b->text.data, a->text.len)));
	CHECK(va->deltas.len == vb->deltas.len &&
	      (!va->deltas.len || !memcmp(va->deltas.data, vb->deltas.data, va->deltas.len)));
	CHECK(a->finish == b->finish && a->have_finish == b->have_finish);
	CHECK(a->input_tokens == b->input_tokens && a->output_tokens == b->output_tokens);
	CHECK(a->done == b->done && a->cancelled == b->cancelled && a->budget == b->budget);
	CHECK(a->err.code == b->err.code && !strcmp(a->err.msg, b->err.msg));
	CHECK(a->ncalls == b->ncalls);
	for (i = 0; i < a->ncalls; i++) {
		const struct gh_provider_acc *x = &a->calls[i], *y = &b->calls[i];

		CHECK(x->key == y->key);
		CHECK(!x->id == !y->id && (!x->id || !strcmp(x->id, y->id)));
		CHECK(!x->name == !y->name && (!x->name || !strcmp(x->name, y->name)));
		CHECK(x->args.len == y->args.len &&
		      (!x->args.len || !memcmp(x->args.data, y->args.data, x->args.len)));
	}
}

/* Feeds one event per line of data to two streams of wire w, one read by
 * on_event, the other by on_event_tree, and checks them after each. With
 * named, a line "name<TAB>data" gives the event's name (its SSE event:
 * field); otherwise, and for a line without a tab, it is "message". */
static inline void stream_differential(const struct gh_provider_wire *w,
				       enum gh_provider_type type, const char *label,
				       const uint8_t *data, size_t size, int named)
{
	struct gh_provider_conf conf = {.name = "fuzz", .type = type,
					.max_response_bytes = 1 << 20};
	struct gh_chat_request req;
	struct gh_chat_events eva, evb;
	struct gh_provider_stream a, b;
	struct seen va, vb;
	size_t off = 0;

	if (size > 1 << 16)
		return;
	memset(&req, 0, sizeof(req));
	memset(&eva, 0, sizeof(eva));
	memset(&evb, 0, sizeof(evb));
	eva.text_delta = evb.text_delta = seen_text;
	eva.tool_delta = evb.tool_delta = seen_tool;
	eva.ud = &va;
	evb.ud = &vb;
	gh_buf_init(&va.deltas, 1 << 22);
	gh_buf_init(&vb.deltas, 1 << 22);
	gh_provider_stream_init(&a, &conf, label, &req, &eva);
	gh_provider_stream_init(&b, &conf, label, &req, &evb);
	while (off < size) {
		const char *line = (const char *)data + off;
		const char *nl = memchr(line, '\n', size - off);
		size_t n = nl ? (size_t)(nl - line) : size - off;
		char *copy = malloc(n + 1), *tab;
		struct gh_sse_event ev;
		int ra, rb;

		off += n + (nl ? 1 : 0);
		if (!copy)
			break;
		memcpy(copy, line, n);
		copy[n] = '\0';
		memset(&ev, 0, sizeof(ev));
		ev.type = "message";
		ev.data = copy;
		if (named && (tab = strchr(copy, '\t'))) {
			*tab = '\0';
			ev.type = copy;
			ev.data = tab + 1;
		}
		ev.data_len = strlen(ev.data);   /* an SSE event's data holds no NUL */
		ev.id = "";
		ev.retry_ms = -1;
		ra = w->on_event(&a, &ev);
		rb = w->on_event_tree(&b, &ev);
		free(copy);
		CHECK(ra == rb);
		same_state(&a, &b, &va, &vb);
		if (ra)
			break;
	}
	gh_provider_stream_free(&a);
	gh_provider_stream_free(&b);
	gh_buf_free(&va.deltas);
	gh_buf_free(&vb.deltas);
}

#endif
