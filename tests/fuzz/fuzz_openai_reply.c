/*
 * fuzz_openai_reply.c - an OpenAI chat completion reply read two ways:
 * from its text without a tree (the wire's read_reply, over jread.c) and
 * from its cJSON tree (gh_json_parse_opts, then parse_reply). Input: a
 * reply body. Must never crash or leak, and whenever the tree-less reader
 * takes a reply, the tree must take it too and give the very same
 * response: text, every call's id, name, argument text and parsed
 * arguments, the finish reason and both token counts. What the reader
 * leaves to the tree must leave the response empty.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "json.h"
#include "provider.h"
#include "provider_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same_response(const struct gh_chat_response *a, const struct gh_chat_response *b)
{
	size_t i;

	CHECK(a->text && b->text && !strcmp(a->text, b->text));
	CHECK(a->finish == b->finish);
	CHECK(a->input_tokens == b->input_tokens && a->output_tokens == b->output_tokens);
	CHECK(a->ncalls == b->ncalls);
	CHECK(!a->reasoning && !b->reasoning);
	for (i = 0; i < a->ncalls; i++) {
		const struct gh_tool_call *x = &a->calls[i], *y = &b->calls[i];

		CHECK(!strcmp(x->id, y->id) && !strcmp(x->name, y->name));
		CHECK(!strcmp(x->raw_args, y->raw_args));
		CHECK(!x->args == !y->args);
		CHECK(!x->args || cJSON_Compare(x->args, y->args, 1));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gh_provider_conf conf = {.name = "fuzz", .type = GH_PROVIDER_OPENAI};
	const struct gh_provider_wire *w = gh_provider_openai.wire;
	const char *s = (const char *)data;
	struct gh_chat_response a, b;
	struct gh_err e;
	cJSON *tree = NULL;
	int read;

	if (size > 1 << 16)
		return 0;
	read = w->read_reply(s, size, &a);
	CHECK(read == 0 || read == 1);
	memset(&b, 0, sizeof(b));
	if (read == 0) {
		CHECK(!a.text && !a.calls && !a.ncalls);
		/* the tree still reads it (or refuses it) without trouble */
		if (gh_json_parse_opts(s, size, "reply", GH_JSON_UPSTREAM, &tree, &e) == GH_OK &&
		    w->parse_reply(&conf, tree, &b, &e) == GH_OK)
			CHECK(b.text);
	} else {
		CHECK(gh_json_parse_opts(s, size, "reply", GH_JSON_UPSTREAM, &tree, &e) == GH_OK);
		CHECK(w->parse_reply(&conf, tree, &b, &e) == GH_OK);
		same_response(&a, &b);
	}
	cJSON_Delete(tree);
	gh_chat_response_clear(&a);
	gh_chat_response_clear(&b);
	return 0;
}
