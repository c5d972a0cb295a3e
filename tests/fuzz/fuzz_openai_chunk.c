/*
 * fuzz_openai_chunk.c - the chunks of an OpenAI chat completion stream
 * read two ways: by the wire's on_event, which reads the common ones from
 * their text without a tree (read_chunk, over jread.c), and by
 * on_event_tree, which reads every chunk through its cJSON tree. Input:
 * one chunk's data per line, fed to two streams in order. Must never
 * crash or leak, and the two streams must end in the very same state
 * after every chunk: the same answer to each chunk, the text and the
 * deltas handed on, every call's id, name and argument text, the finish
 * reason, both token counts, the error.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "provider.h"
#include "provider_int.h"
#include "sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
	struct gh_buf deltas;   /* every text delta handed on, each ended by '|' */
};

static int on_text(void *ud, const char *s, size_t n)
{
	struct seen *v = ud;

	gh_buf_append(&v->deltas, s, n);
	gh_buf_putc(&v->deltas, '|');
	return 0;
}

static void same_state(const struct gh_provider_stream *a, const struct gh_provider_stream *b,
		       const struct seen *va, const struct seen *vb)
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gh_provider_conf conf = {.name = "fuzz", .type = GH_PROVIDER_OPENAI,
					       .max_response_bytes = 1 << 20};
	const struct gh_provider_wire *w = gh_provider_openai.wire;
	struct gh_chat_request req;
	struct gh_chat_events eva, evb;
	struct gh_provider_stream a, b;
	struct seen va, vb;
	size_t off = 0;

	if (size > 1 << 16)
		return 0;
	memset(&req, 0, sizeof(req));
	memset(&eva, 0, sizeof(eva));
	memset(&evb, 0, sizeof(evb));
	eva.text_delta = evb.text_delta = on_text;
	eva.ud = &va;
	evb.ud = &vb;
	gh_buf_init(&va.deltas, 1 << 22);
	gh_buf_init(&vb.deltas, 1 << 22);
	gh_provider_stream_init(&a, &conf, "openai", &req, &eva);
	gh_provider_stream_init(&b, &conf, "openai", &req, &evb);
	while (off < size) {
		const char *line = (const char *)data + off;
		const char *nl = memchr(line, '\n', size - off);
		size_t n = nl ? (size_t)(nl - line) : size - off;
		struct gh_sse_event ev;
		char *copy = malloc(n + 1);
		int ra, rb;

		off += n + (nl ? 1 : 0);
		if (!copy)
			break;
		memcpy(copy, line, n);
		copy[n] = '\0';
		memset(&ev, 0, sizeof(ev));
		ev.type = "message";
		ev.data = copy;
		ev.data_len = strlen(copy);   /* an SSE event's data holds no NUL */
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
	return 0;
}
