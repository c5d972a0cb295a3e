/*
 * fuzz_mcp_upstream.c - everything an upstream MCP server sends gatehouse:
 * the reader (stdout lines, SSE events, a JSON body) and the parsers of
 * what comes out of it (initialize and tools/list results, tool
 * definitions and their exposed names, tools/call results, progress).
 *
 * The input is the byte stream, read in the framing its length picks (its
 * first bytes, peeked, pick the chunk sizes, so corpus files stay plain
 * streams). Checks:
 *   - fed whole or in chunks of sizes taken from the input, each framing
 *     delivers the same messages (kind, id, method, hashed) and the same
 *     verdict, with roomy and with tight bounds;
 *   - a tool definition that parses has a 64-hex digest, re-parses from
 *     its own kept form to the same digest, and its exposed name is at
 *     most 64 characters of [A-Za-z0-9_-];
 *   - a tools/call result that parses is an object with a content array
 *     and an isError that agrees with *is_error;
 *   - every message built back from a request's id parses as a response.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "mcp_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                 \
	do {                     \
		if (!(c))        \
			abort(); \
	} while (0)

struct seen {
	uint64_t hash;
	size_t n;
	int parse;             /* run the result parsers too (one pass of each input) */
	const cJSON *schema;   /* an output schema to check results against */
	cJSON *keep;           /* ...owned here */
};

static void mix(struct seen *s, const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++) {
		s->hash ^= b[i];
		s->hash *= 0x100000001b3ull;
	}
}

static void check_name(const char *prefix, const char *name)
{
	char out[GH_MCP_NAME_MAX + 1], why[128];
	size_t i;

	if (gh_mcp_expose_name(prefix, name, out, why, sizeof(why)) != 0) {
		CHECK(out[0] == '\0' && why[0]);
		return;
	}
	CHECK(strlen(out) >= 1 && strlen(out) <= GH_MCP_NAME_MAX);
	for (i = 0; out[i]; i++)
		CHECK((out[i] >= 'a' && out[i] <= 'z') || (out[i] >= 'A' && out[i] <= 'Z') ||
		      (out[i] >= '0' && out[i] <= '9') || out[i] == '_' || out[i] == '-');
}

static void check_tool(struct seen *s, const cJSON *tool)
{
	struct gh_mcp_tool_def d, d2;
	struct gh_err e;
	size_t i;

	if (gh_mcp_tool_def_parse(tool, &d, &e) != GH_OK) {
		CHECK(d.def == NULL && e.msg[0]);
		return;
	}
	CHECK(strlen(d.digest) == 64);
	for (i = 0; i < 64; i++)
		CHECK((d.digest[i] >= '0' && d.digest[i] <= '9') ||
		      (d.digest[i] >= 'a' && d.digest[i] <= 'f'));
	CHECK(d.name && cJSON_IsObject(d.input_schema));
	/* what gatehouse keeps and pins parses back to itself */
	CHECK(gh_mcp_tool_def_parse(d.def, &d2, &e) == GH_OK);
	CHECK(!strcmp(d.digest, d2.digest));
	gh_mcp_tool_def_clear(&d2);
	(void)gh_mcp_hint_of(d.annotations);
	check_name("srv_", d.name);
	check_name("", d.name);
	if (d.output_schema && !s->keep) {
		s->keep = cJSON_Duplicate(d.output_schema, 1);
		s->schema = s->keep;
	}
	gh_mcp_tool_def_clear(&d);
}

static void check_result(struct seen *s, const cJSON *result)
{
	struct gh_mcp_init in;
	struct gh_err e;
	const cJSON *tools, *it;
	const char *cursor;
	cJSON *out = NULL;
	int is_error = 0, k;

	if (gh_mcp_parse_init(result, &in, &e) == GH_OK)
		CHECK(!strcmp(in.version, GH_MCP_PROTO_LATEST) ||
		      !strcmp(in.version, GH_MCP_PROTO_PREVIOUS));
	if (gh_mcp_parse_tools_page(result, &tools, &cursor, &e) == GH_OK) {
		CHECK(cJSON_IsArray(tools));
		CHECK(!cursor || *cursor);
		cJSON_ArrayForEach(it, tools)
			check_tool(s, it);
	}
	for (k = 0; k < 2; k++) {
		const cJSON *schema = k ? s->schema : NULL;

		if (gh_mcp_parse_call_result(result, schema, &out, &is_error, &e) == GH_OK) {
			const cJSON *ie = cJSON_GetObjectItemCaseSensitive(out, "isError");

			CHECK(cJSON_IsObject(out));
			CHECK(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(out, "content")));
			CHECK(is_error == cJSON_IsTrue(ie));
			cJSON_Delete(out);
		} else {
			CHECK(out == NULL);
		}
	}
}

static int on_msg(void *ud, struct gh_mcp_msg *m)
{
	struct seen *s = ud;
	struct gh_buf b;
	struct gh_mcp_progress p;

	s->n++;
	mix(s, &m->kind, sizeof(m->kind));
	mix(s, &m->id, sizeof(m->id));
	mix(s, m->method, strlen(m->method) + 1);
	if (!s->parse)
		return 0;
	switch (m->kind) {
	case GH_MCP_RESPONSE:
		CHECK(m->result);
		check_result(s, m->result);
		break;
	case GH_MCP_ERROR:
		CHECK(strlen(m->error) < sizeof(m->error));
		break;
	case GH_MCP_NOTIFICATION:
		if (gh_mcp_parse_progress(m->params, &p) == 0)
			CHECK(p.token >= -1);
		break;
	case GH_MCP_REQUEST:
		/* the answer gatehouse would send parses as a response */
		gh_buf_init(&b, 1 << 20);
		if (gh_mcp_build_result(&b, m->req_id, NULL) == GH_BUF_OK) {
			struct gh_mcp_msg r;

			CHECK(gh_mcp_msg_parse(b.data, b.len, &r) == GH_OK);
			CHECK(r.kind == GH_MCP_RESPONSE);
			gh_mcp_msg_clear(&r);
		}
		gh_buf_free(&b);
		break;
	case GH_MCP_INVALID:
		CHECK(m->error[0]);
		break;
	}
	return 0;
}

struct outcome {
	uint64_t hash;
	size_t n;
	int rc, fin;
};

static struct outcome run(enum gh_mcp_framing f, const uint8_t *in, size_t n, int chunked,
			  size_t max, int parse)
{
	struct gh_mcp_reader *r = gh_mcp_reader_new(f, max);
	struct seen s;
	struct outcome o;
	size_t off = 0, k = 0, npick = n < 8 ? n : 8;

	CHECK(r);
	memset(&s, 0, sizeof(s));
	s.hash = 0xcbf29ce484222325ull;
	s.parse = parse;
	o.rc = 0;
	if (!chunked) {
		o.rc = gh_mcp_reader_feed(r, (const char *)in, n, on_msg, &s);
	} else {
		while (off < n) {
			unsigned b = in[k++ % npick];
			size_t len = (b & 0x80) ? 1 + (size_t)(b & 0x7f) * 32 : 1 + b % 13;
			int rc;

			if (len > n - off)
				len = n - off;
			rc = gh_mcp_reader_feed(r, (const char *)in + off, len, on_msg, &s);
			/* once failed, the reader stays failed with the same code */
			CHECK(o.rc == 0 || rc == o.rc);
			o.rc = rc;
			off += len;
		}
	}
	o.fin = gh_mcp_reader_finish(r, on_msg, &s);
	o.hash = s.hash;
	o.n = s.n;
	cJSON_Delete(s.keep);
	gh_mcp_reader_free(r);
	return o;
}

static void same(struct outcome a, struct outcome b)
{
	CHECK(a.hash == b.hash);
	CHECK(a.n == b.n);
	CHECK(a.rc == b.rc);
	CHECK(a.fin == b.fin);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum gh_mcp_framing fr[] = {GH_MCP_LINES, GH_MCP_SSE, GH_MCP_JSON};
	/* the length picks the framing (a mutation that adds or drops a byte
	 * reads the same bytes another way), and every other length also
	 * tries tight bounds */
	enum gh_mcp_framing f = fr[size % 3];

	/* whole (with the parsers) and in chunks: the same messages */
	same(run(f, data, size, 0, 1 << 20, 1), run(f, data, size, 1, 1 << 20, 0));
	/* tight bounds: long messages fail, identically */
	if ((size / 3) % 2)
		same(run(f, data, size, 0, 64, 0), run(f, data, size, 1, 64, 0));
	return 0;
}
