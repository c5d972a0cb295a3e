/*
 * mcp_proto.c - MCP client messages and their parsing; see mcp_proto.h.
 *
 * Threading: stateless functions; a reader belongs to one stream.
 */
#include "mcp_proto.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "json.h"
#include "schema.h"
#include "sse.h"
#include "util.h"

/* ------------------------------------------------------------ messages */

static void invalid(struct gh_mcp_msg *m, const char *why)
{
	m->kind = GH_MCP_INVALID;
	gh_strlcpy(m->error, why, sizeof(m->error));
}

/* An id gatehouse sent: a non-negative integer within int64. */
static int64_t our_id(const cJSON *id)
{
	if (!id || !gh_json_is_int(id) || id->valuedouble < 0)
		return -1;
	return (int64_t)id->valuedouble;
}

enum gh_code gh_mcp_msg_parse(const char *s, size_t n, struct gh_mcp_msg *m)
{
	const cJSON *v, *id, *method, *err;
	struct gh_err e;
	enum gh_code rc;

	memset(m, 0, sizeof(*m));
	m->id = -1;
	m->error_code = 0;
	rc = gh_json_parse_opts(s, n, "upstream message", GH_JSON_UPSTREAM, &m->root, &e);
	if (rc == GH_E_NOMEM)
		return rc;
	if (rc != GH_OK) {
		invalid(m, e.msg);
		return GH_OK;
	}
	if (!cJSON_IsObject(m->root)) {
		invalid(m, cJSON_IsArray(m->root) ? "a JSON-RPC batch (not part of MCP since "
						   "2025-06-18)"
						 : "not a JSON object");
		return GH_OK;
	}
	v = cJSON_GetObjectItemCaseSensitive(m->root, "jsonrpc");
	if (!cJSON_IsString(v) || strcmp(v->valuestring, "2.0")) {
		invalid(m, "\"jsonrpc\" is not \"2.0\"");
		return GH_OK;
	}
	id = cJSON_GetObjectItemCaseSensitive(m->root, "id");
	method = cJSON_GetObjectItemCaseSensitive(m->root, "method");
	if (method) {
		const cJSON *params = cJSON_GetObjectItemCaseSensitive(m->root, "params");

		if (!cJSON_IsString(method) || !*method->valuestring ||
		    strlen(method->valuestring) >= sizeof(m->method)) {
			invalid(m, "\"method\" is not a string of 1..127 bytes");
			return GH_OK;
		}
		if (params && !cJSON_IsObject(params) && !cJSON_IsNull(params)) {
			invalid(m, "\"params\" is not an object");
			return GH_OK;
		}
		gh_strlcpy(m->method, method->valuestring, sizeof(m->method));
		m->params = cJSON_IsObject(params) ? params : NULL;
		if (!id) {
			m->kind = GH_MCP_NOTIFICATION;
			return GH_OK;
		}
		if (!cJSON_IsString(id) && !gh_json_is_int(id)) {
			invalid(m, "a request's \"id\" is not a string or an integer");
			return GH_OK;
		}
		m->kind = GH_MCP_REQUEST;
		m->req_id = id;
		return GH_OK;
	}
	if (!id) {
		invalid(m, "neither \"method\" nor \"id\"");
		return GH_OK;
	}
	m->id = our_id(id);
	err = cJSON_GetObjectItemCaseSensitive(m->root, "error");
	if (err) {
		const cJSON *code = cJSON_GetObjectItemCaseSensitive(err, "code");
		const char *msg = gh_json_str(err, "message");

		if (!cJSON_IsObject(err) || !gh_json_is_int(code)) {
			invalid(m, "\"error\" is not {code, message}");
			return GH_OK;
		}
		m->kind = GH_MCP_ERROR;
		m->error_code = (int64_t)code->valuedouble;
		gh_strlcpy(m->error, msg ? msg : "(no message)", sizeof(m->error));
		return GH_OK;
	}
	m->result = cJSON_GetObjectItemCaseSensitive(m->root, "result");
	if (!m->result) {
		invalid(m, "a response without \"result\" or \"error\"");
		return GH_OK;
	}
	m->kind = GH_MCP_RESPONSE;
	return GH_OK;
}

void gh_mcp_msg_clear(struct gh_mcp_msg *m)
{
	if (!m)
		return;
	cJSON_Delete(m->root);
	memset(m, 0, sizeof(*m));
	m->id = -1;
}

/* -------------------------------------------------------------- reader */

struct gh_mcp_reader {
	enum gh_mcp_framing f;
	size_t max;
	struct gh_buf buf;            /* LINES: the line so far; JSON: the body */
	struct gh_sse_parser *sse;    /* SSE */
	int spent;                    /* a fatal result, returned again */
	int stop;                     /* a callback's stop value */
	gh_mcp_msg_fn fn;             /* for the SSE callback */
	void *ud;
};

struct gh_mcp_reader *gh_mcp_reader_new(enum gh_mcp_framing f, size_t max_msg)
{
	struct gh_mcp_reader *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->f = f;
	r->max = max_msg ? max_msg : 1;
	gh_buf_init(&r->buf, r->max);
	if (f == GH_MCP_SSE) {
		/* a line holds "data: " and at most the whole message */
		r->sse = gh_sse_new(r->max + 64, r->max);
		if (!r->sse) {
			free(r);
			return NULL;
		}
	}
	return r;
}

void gh_mcp_reader_free(struct gh_mcp_reader *r)
{
	if (!r)
		return;
	gh_buf_free(&r->buf);
	gh_sse_free(r->sse);
	free(r);
}

/* Parses one message and hands it over; the callback's value, or NOMEM. */
static int deliver(const char *s, size_t n, gh_mcp_msg_fn fn, void *ud)
{
	struct gh_mcp_msg m;
	int rc;

	if (gh_mcp_msg_parse(s, n, &m) != GH_OK)
		return GH_MCP_READ_NOMEM;
	rc = fn ? fn(ud, &m) : 0;
	gh_mcp_msg_clear(&m);
	return rc;
}

static int blank(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
			return 0;
	return 1;
}

static int feed_lines(struct gh_mcp_reader *r, const char *p, size_t n, gh_mcp_msg_fn fn,
		      void *ud)
{
	while (n > 0) {
		const char *nl = memchr(p, '\n', n);
		size_t take = nl ? (size_t)(nl - p) : n;
		int rc, br = gh_buf_append(&r->buf, p, take);

		if (br != GH_BUF_OK)
			return br == GH_BUF_TOOBIG ? GH_MCP_READ_TOOBIG : GH_MCP_READ_NOMEM;
		if (!nl)
			return 0;
		p += take + 1;
		n -= take + 1;
		if (!blank(r->buf.data ? r->buf.data : "", r->buf.len)) {
			size_t len = r->buf.len;

			if (len && r->buf.data[len - 1] == '\r')
				len--;
			rc = deliver(r->buf.data, len, fn, ud);
			gh_buf_reset(&r->buf);
			if (rc)
				return rc;
		} else {
			gh_buf_reset(&r->buf);
		}
	}
	return 0;
}

static int on_sse_event(void *ud, const struct gh_sse_event *ev)
{
	struct gh_mcp_reader *r = ud;

	/* events of other types, and data-less ones (a 2025-11-25 server's
	 * priming event carries only an id), are not messages */
	if (strcmp(ev->type, "message") || blank(ev->data, ev->data_len))
		return 0;
	return deliver(ev->data, ev->data_len, r->fn, r->ud);
}

static int sse_result(int rc)
{
	if (rc == GH_SSE_TOOBIG)
		return GH_MCP_READ_TOOBIG;
	if (rc == GH_SSE_NOMEM)
		return GH_MCP_READ_NOMEM;
	return rc;
}

int gh_mcp_reader_feed(struct gh_mcp_reader *r, const char *p, size_t n, gh_mcp_msg_fn fn,
		       void *ud)
{
	int rc = 0;

	if (r->spent)
		return r->spent;
	if (n == 0)
		return 0;
	switch (r->f) {
	case GH_MCP_LINES:
		rc = feed_lines(r, p, n, fn, ud);
		break;
	case GH_MCP_SSE:
		r->fn = fn;
		r->ud = ud;
		rc = sse_result(gh_sse_feed(r->sse, p, n, on_sse_event, NULL, r));
		break;
	case GH_MCP_JSON:
		rc = gh_buf_append(&r->buf, p, n);
		if (rc != GH_BUF_OK)
			rc = rc == GH_BUF_TOOBIG ? GH_MCP_READ_TOOBIG : GH_MCP_READ_NOMEM;
		break;
	}
	if (rc)
		r->spent = rc;
	return rc;
}

int gh_mcp_reader_finish(struct gh_mcp_reader *r, gh_mcp_msg_fn fn, void *ud)
{
	int rc = r->spent;

	r->spent = 0;
	if (rc) {
		gh_buf_reset(&r->buf);
		if (r->sse)
			gh_sse_finish(r->sse);
		return rc;
	}
	switch (r->f) {
	case GH_MCP_LINES:
		if (r->buf.len && !blank(r->buf.data, r->buf.len))
			rc = deliver(r->buf.data, r->buf.len, fn, ud);
		break;
	case GH_MCP_SSE:
		rc = gh_sse_finish(r->sse);
		break;
	case GH_MCP_JSON:
		if (!r->buf.len || blank(r->buf.data, r->buf.len))
			rc = 1;
		else
			rc = deliver(r->buf.data, r->buf.len, fn, ud);
		break;
	}
	gh_buf_reset(&r->buf);
	return rc;
}

/* ------------------------------------------------------------ building */

static int put_params(struct gh_buf *b, const cJSON *params)
{
	int rc;

	if (!params)
		return GH_BUF_OK;
	if ((rc = gh_buf_puts(b, ",\"params\":")) != GH_BUF_OK)
		return rc;
	return gh_json_print(params, b);
}

/* Writes into a scratch buffer first so a failure leaves b as it was. */
static int finish_into(struct gh_buf *b, struct gh_buf *t, int rc)
{
	if (rc == GH_BUF_OK)
		rc = gh_buf_append(b, t->data ? t->data : "", t->len);
	gh_buf_free(t);
	return rc;
}

int gh_mcp_build_request(struct gh_buf *b, int64_t id, const char *method, const cJSON *params)
{
	struct gh_buf t;
	int rc;

	gh_buf_init(&t, b->cap);
	rc = gh_buf_printf(&t, "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"method\":", (long long)id);
	if (rc == GH_BUF_OK)
		rc = gh_buf_json_str(&t, method);
	if (rc == GH_BUF_OK)
		rc = put_params(&t, params);
	if (rc == GH_BUF_OK)
		rc = gh_buf_putc(&t, '}');
	return finish_into(b, &t, rc);
}

int gh_mcp_build_notification(struct gh_buf *b, const char *method, const cJSON *params)
{
	struct gh_buf t;
	int rc;

	gh_buf_init(&t, b->cap);
	rc = gh_buf_puts(&t, "{\"jsonrpc\":\"2.0\",\"method\":");
	if (rc == GH_BUF_OK)
		rc = gh_buf_json_str(&t, method);
	if (rc == GH_BUF_OK)
		rc = put_params(&t, params);
	if (rc == GH_BUF_OK)
		rc = gh_buf_putc(&t, '}');
	return finish_into(b, &t, rc);
}

static int put_id(struct gh_buf *t, const cJSON *req_id)
{
	int rc = gh_buf_puts(t, "{\"jsonrpc\":\"2.0\",\"id\":");

	if (rc != GH_BUF_OK)
		return rc;
	if (!req_id)
		return gh_buf_puts(t, "null");
	return gh_json_print(req_id, t);
}

int gh_mcp_build_result(struct gh_buf *b, const cJSON *req_id, const cJSON *result)
{
	struct gh_buf t;
	int rc;

	gh_buf_init(&t, b->cap);
	rc = put_id(&t, req_id);
	if (rc == GH_BUF_OK)
		rc = gh_buf_puts(&t, ",\"result\":");
	if (rc == GH_BUF_OK)
		rc = result ? gh_json_print(result, &t) : gh_buf_puts(&t, "{}");
	if (rc == GH_BUF_OK)
		rc = gh_buf_putc(&t, '}');
	return finish_into(b, &t, rc);
}

int gh_mcp_build_error(struct gh_buf *b, const cJSON *req_id, int code, const char *message)
{
	struct gh_buf t;
	int rc;

	gh_buf_init(&t, b->cap);
	rc = put_id(&t, req_id);
	if (rc == GH_BUF_OK)
		rc = gh_buf_printf(&t, ",\"error\":{\"code\":%d,\"message\":", code);
	if (rc == GH_BUF_OK)
		rc = gh_buf_json_str(&t, message ? message : "");
	if (rc == GH_BUF_OK)
		rc = gh_buf_puts(&t, "}}");
	return finish_into(b, &t, rc);
}

cJSON *gh_mcp_initialize_params(const char *version)
{
	cJSON *p = cJSON_CreateObject(), *ci;

	if (!p)
		return NULL;
	cJSON_AddStringToObject(p, "protocolVersion", version);
	cJSON_AddObjectToObject(p, "capabilities");
	ci = cJSON_AddObjectToObject(p, "clientInfo");
	if (ci) {
		cJSON_AddStringToObject(ci, "name", "gatehouse");
		cJSON_AddStringToObject(ci, "version", GH_VERSION);
	}
	if (!ci || !cJSON_GetObjectItemCaseSensitive(p, "capabilities")) {
		cJSON_Delete(p);
		return NULL;
	}
	return p;
}

cJSON *gh_mcp_call_params(const char *name, const cJSON *arguments, int64_t progress_token)
{
	cJSON *p = cJSON_CreateObject(), *a;

	if (!p)
		return NULL;
	cJSON_AddStringToObject(p, "name", name);
	a = arguments ? cJSON_Duplicate(arguments, 1) : cJSON_CreateObject();
	if (!a) {
		cJSON_Delete(p);
		return NULL;
	}
	cJSON_AddItemToObject(p, "arguments", a);
	if (progress_token >= 0) {
		cJSON *meta = cJSON_AddObjectToObject(p, "_meta");

		if (!meta) {
			cJSON_Delete(p);
			return NULL;
		}
		cJSON_AddNumberToObject(meta, "progressToken", (double)progress_token);
	}
	return p;
}

/* ------------------------------------------------------------- results */

enum gh_code gh_mcp_parse_init(const cJSON *result, struct gh_mcp_init *out, struct gh_err *e)
{
	const char *v = gh_json_str(result, "protocolVersion");
	const cJSON *caps = cJSON_GetObjectItemCaseSensitive(result, "capabilities");
	const cJSON *tools = cJSON_GetObjectItemCaseSensitive(caps, "tools");
	const cJSON *info = cJSON_GetObjectItemCaseSensitive(result, "serverInfo");
	char shown[40];

	memset(out, 0, sizeof(out[0]));
	if (!cJSON_IsObject(result))
		return gh_err_set(e, GH_E_UPSTREAM, "initialize: the result is not an object");
	if (!v) {
		return gh_err_set(e, GH_E_UPSTREAM, "initialize: no protocolVersion in the result");
	}
	if (strcmp(v, GH_MCP_PROTO_LATEST) && strcmp(v, GH_MCP_PROTO_PREVIOUS)) {
		size_t i;

		gh_strlcpy(shown, v, sizeof(shown));
		for (i = 0; shown[i]; i++)
			if ((unsigned char)shown[i] < 0x20 || shown[i] == 0x7f)
				shown[i] = '?';
		return gh_err_set(e, GH_E_UPSTREAM,
				  "initialize: the server speaks protocol \"%s\"; gatehouse speaks "
				  "%s and %s", shown, GH_MCP_PROTO_LATEST, GH_MCP_PROTO_PREVIOUS);
	}
	if (caps && !cJSON_IsObject(caps))
		return gh_err_set(e, GH_E_UPSTREAM, "initialize: capabilities is not an object");
	gh_strlcpy(out->version, v, sizeof(out->version));
	out->has_tools = cJSON_IsObject(tools);
	out->tools_list_changed = out->has_tools && gh_json_bool(tools, "listChanged", 0);
	if (cJSON_IsObject(info)) {
		const char *n = gh_json_str(info, "name"), *ver = gh_json_str(info, "version");

		gh_strlcpy(out->server_name, n ? n : "", sizeof(out->server_name));
		gh_strlcpy(out->server_version, ver ? ver : "", sizeof(out->server_version));
	}
	return GH_OK;
}

enum gh_code gh_mcp_parse_tools_page(const cJSON *result, const cJSON **tools,
				     const char **cursor, struct gh_err *e)
{
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(result, "tools");
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(result, "nextCursor");

	*tools = NULL;
	*cursor = NULL;
	if (!cJSON_IsObject(result) || !cJSON_IsArray(t))
		return gh_err_set(e, GH_E_UPSTREAM, "tools/list: the result has no \"tools\" array");
	if (c && !cJSON_IsNull(c)) {
		if (!cJSON_IsString(c) || !*c->valuestring || strlen(c->valuestring) > 4096)
			return gh_err_set(e, GH_E_UPSTREAM,
					  "tools/list: nextCursor is not a string of 1..4096 bytes");
		*cursor = c->valuestring;
	}
	*tools = t;
	return GH_OK;
}

static int has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 1;
	return 0;
}

/* A name safe to quote in messages: control characters become '?'. */
static void shown_name(const char *s, char *out, size_t cap)
{
	size_t i;

	gh_strlcpy(out, s ? s : "", cap);
	for (i = 0; out[i]; i++)
		if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f || out[i] == '"')
			out[i] = '?';
}

static enum gh_code copy_schema(cJSON *def, const char *key, const cJSON *schema,
				const char *name, struct gh_err *e)
{
	char msg[GH_SCHEMA_MSG_MAX];
	cJSON *dup;

	if (!cJSON_IsObject(schema))
		return gh_err_set(e, GH_E_UPSTREAM, "tool \"%s\": %s is not an object", name, key);
	if (gh_schema_check(schema, msg, sizeof(msg)) != 0)
		return gh_err_set(e, GH_E_UPSTREAM,
				  "tool \"%s\": gatehouse cannot enforce its %s: %s", name, key,
				  msg);
	if (!strcmp(key, "inputSchema")) {
		const char *type = gh_json_str(schema, "type");

		if (type && strcmp(type, "object"))
			return gh_err_set(e, GH_E_UPSTREAM,
					  "tool \"%s\": inputSchema has type \"%.32s\", not "
					  "\"object\"", name, type);
	}
	if (!(dup = cJSON_Duplicate(schema, 1)))
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	cJSON_AddItemToObject(def, key, dup);
	return GH_OK;
}

static const char *const hint_names[] = {"readOnlyHint", "destructiveHint", "idempotentHint",
					 "openWorldHint"};

enum gh_code gh_mcp_tool_def_parse(const cJSON *tool, struct gh_mcp_tool_def *out,
				   struct gh_err *e)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(tool, "name");
	const cJSON *v;
	char shown[GH_MCP_UPSTREAM_NAME_MAX + 1];
	struct gh_buf canon;
	unsigned char hash[crypto_hash_sha256_BYTES];
	enum gh_code rc;
	cJSON *def = NULL;
	size_t i;

	memset(out, 0, sizeof(*out));
	if (!cJSON_IsObject(tool))
		return gh_err_set(e, GH_E_UPSTREAM, "a tool is not an object");
	if (!cJSON_IsString(name) || !*name->valuestring ||
	    strlen(name->valuestring) > GH_MCP_UPSTREAM_NAME_MAX || has_control(name->valuestring))
		return gh_err_set(e, GH_E_UPSTREAM, "a tool's name is not a string of 1..%d "
						    "printable bytes", GH_MCP_UPSTREAM_NAME_MAX);
	shown_name(name->valuestring, shown, sizeof(shown));
	if (!(def = cJSON_CreateObject()) || !cJSON_AddStringToObject(def, "name", name->valuestring)) {
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto fail;
	}
	v = cJSON_GetObjectItemCaseSensitive(tool, "title");
	if (v && !cJSON_IsNull(v)) {
		if (!cJSON_IsString(v) || strlen(v->valuestring) > 1024) {
			rc = gh_err_set(e, GH_E_UPSTREAM, "tool \"%s\": title is not a string of at "
							  "most 1024 bytes", shown);
			goto fail;
		}
		cJSON_AddStringToObject(def, "title", v->valuestring);
	}
	v = cJSON_GetObjectItemCaseSensitive(tool, "description");
	if (v && !cJSON_IsNull(v)) {
		if (!cJSON_IsString(v) || strlen(v->valuestring) > GH_MCP_DESCRIPTION_MAX) {
			rc = gh_err_set(e, GH_E_UPSTREAM, "tool \"%s\": description is not a string "
							  "of at most %d bytes", shown,
					GH_MCP_DESCRIPTION_MAX);
			goto fail;
		}
		cJSON_AddStringToObject(def, "description", v->valuestring);
	}
	v = cJSON_GetObjectItemCaseSensitive(tool, "inputSchema");
	if (!v) {
		rc = gh_err_set(e, GH_E_UPSTREAM, "tool \"%s\": no inputSchema", shown);
		goto fail;
	}
	if ((rc = copy_schema(def, "inputSchema", v, shown, e)) != GH_OK)
		goto fail;
	v = cJSON_GetObjectItemCaseSensitive(tool, "outputSchema");
	if (v && !cJSON_IsNull(v) && (rc = copy_schema(def, "outputSchema", v, shown, e)) != GH_OK)
		goto fail;
	v = cJSON_GetObjectItemCaseSensitive(tool, "annotations");
	if (v && !cJSON_IsNull(v)) {
		cJSON *a;

		if (!cJSON_IsObject(v)) {
			rc = gh_err_set(e, GH_E_UPSTREAM, "tool \"%s\": annotations is not an object",
					shown);
			goto fail;
		}
		if (!(a = cJSON_AddObjectToObject(def, "annotations"))) {
			rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
			goto fail;
		}
		if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(v, "title")) &&
		    strlen(gh_json_str(v, "title")) <= 1024)
			cJSON_AddStringToObject(a, "title", gh_json_str(v, "title"));
		for (i = 0; i < GH_ARRAY_LEN(hint_names); i++) {
			const cJSON *h = cJSON_GetObjectItemCaseSensitive(v, hint_names[i]);

			if (cJSON_IsBool(h))
				cJSON_AddBoolToObject(a, hint_names[i], cJSON_IsTrue(h));
		}
	}
	gh_buf_init(&canon, (size_t)1 << 30);
	if (gh_json_canonical(def, &canon) != GH_BUF_OK) {
		gh_buf_free(&canon);
		rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		goto fail;
	}
	crypto_hash_sha256(hash, (const unsigned char *)(canon.data ? canon.data : ""), canon.len);
	gh_buf_free(&canon);
	gh_hex(hash, sizeof(hash), out->digest);
	out->def = def;
	out->name = gh_json_str(def, "name");
	out->title = gh_json_str(def, "title");
	out->description = gh_json_str(def, "description");
	out->input_schema = cJSON_GetObjectItemCaseSensitive(def, "inputSchema");
	out->output_schema = cJSON_GetObjectItemCaseSensitive(def, "outputSchema");
	out->annotations = cJSON_GetObjectItemCaseSensitive(def, "annotations");
	return GH_OK;
fail:
	cJSON_Delete(def);
	memset(out, 0, sizeof(*out));
	return rc;
}

void gh_mcp_tool_def_clear(struct gh_mcp_tool_def *d)
{
	if (!d)
		return;
	cJSON_Delete(d->def);
	memset(d, 0, sizeof(*d));
}

enum gh_mcp_hint gh_mcp_hint_of(const cJSON *annotations)
{
	const cJSON *ro = cJSON_GetObjectItemCaseSensitive(annotations, "readOnlyHint");
	const cJSON *de = cJSON_GetObjectItemCaseSensitive(annotations, "destructiveHint");

	if (cJSON_IsTrue(ro))
		return GH_MCP_HINT_READONLY;
	if (cJSON_IsFalse(de))
		return GH_MCP_HINT_NOT_DESTRUCTIVE;
	if (cJSON_IsTrue(de))
		return GH_MCP_HINT_DESTRUCTIVE;
	return GH_MCP_HINT_DEFAULT;
}

int gh_mcp_expose_name(const char *prefix, const char *name, char out[GH_MCP_NAME_MAX + 1],
		       char *why, size_t cap)
{
	size_t o = 0, i;
	const char *parts[2] = {prefix ? prefix : "", name ? name : ""};
	int k;

	for (k = 0; k < 2; k++) {
		for (i = 0; parts[k][i]; i++) {
			unsigned char c = (unsigned char)parts[k][i];

			if (o >= GH_MCP_NAME_MAX) {
				if (why && cap)
					snprintf(why, cap, "\"%s%.*s…\" is longer than %d characters",
						 prefix ? prefix : "", 24, name ? name : "",
						 GH_MCP_NAME_MAX);
				out[0] = '\0';
				return -1;
			}
			out[o++] = (char)(((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
					   (c >= '0' && c <= '9') || c == '_' || c == '-')
						  ? c : '_');
		}
	}
	out[o] = '\0';
	if (o == 0) {
		if (why && cap)
			snprintf(why, cap, "the tool name is empty");
		return -1;
	}
	if (why && cap)
		why[0] = '\0';
	return 0;
}

enum gh_code gh_mcp_parse_call_result(const cJSON *result, const cJSON *output_schema,
				      cJSON **out, int *is_error, struct gh_err *e)
{
	const cJSON *content = cJSON_GetObjectItemCaseSensitive(result, "content");
	const cJSON *sc = cJSON_GetObjectItemCaseSensitive(result, "structuredContent");
	const cJSON *ie = cJSON_GetObjectItemCaseSensitive(result, "isError");
	const cJSON *it;
	char msg[GH_SCHEMA_MSG_MAX];
	cJSON *o = NULL, *c;

	*out = NULL;
	*is_error = 0;
	if (!cJSON_IsObject(result))
		return gh_err_set(e, GH_E_UPSTREAM, "tools/call: the result is not an object");
	if (content && !cJSON_IsNull(content) && !cJSON_IsArray(content))
		return gh_err_set(e, GH_E_UPSTREAM, "tools/call: content is not an array");
	cJSON_ArrayForEach(it, content) {
		if (!cJSON_IsObject(it) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(it, "type")))
			return gh_err_set(e, GH_E_UPSTREAM,
					  "tools/call: a content block is not an object with a type");
	}
	if (sc && !cJSON_IsNull(sc) && !cJSON_IsObject(sc))
		return gh_err_set(e, GH_E_UPSTREAM, "tools/call: structuredContent is not an object");
	if (ie && !cJSON_IsBool(ie))
		return gh_err_set(e, GH_E_UPSTREAM, "tools/call: isError is not a boolean");
	if (cJSON_IsNull(sc))
		sc = NULL;
	*is_error = cJSON_IsTrue(ie);
	o = cJSON_CreateObject();
	c = cJSON_IsArray(content) ? cJSON_Duplicate(content, 1) : cJSON_CreateArray();
	if (!o || !c) {
		cJSON_Delete(o);
		cJSON_Delete(c);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	cJSON_AddItemToObject(o, "content", c);
	if (sc) {
		cJSON *d = cJSON_Duplicate(sc, 1);

		if (!d) {
			cJSON_Delete(o);
			return gh_err_set(e, GH_E_NOMEM, "out of memory");
		}
		cJSON_AddItemToObject(o, "structuredContent", d);
	}
	if (ie)
		cJSON_AddBoolToObject(o, "isError", *is_error);
	/* the spec: a tool with an output schema MUST return conforming
	 * structured results, and clients SHOULD validate them */
	if (output_schema && !*is_error) {
		const char *why = NULL;

		if (!sc)
			why = "no structuredContent, though the tool declares an outputSchema";
		else if (gh_schema_validate(output_schema, sc, msg, sizeof(msg)) != 0)
			why = msg;
		if (why) {
			char text[GH_SCHEMA_MSG_MAX + 96];
			cJSON *blk = cJSON_CreateObject();

			snprintf(text, sizeof(text),
				 "the tool's result does not match its outputSchema: %s", why);
			cJSON_DeleteItemFromObjectCaseSensitive(o, "isError");
			cJSON_AddBoolToObject(o, "isError", 1);
			if (blk) {
				cJSON_AddStringToObject(blk, "type", "text");
				cJSON_AddStringToObject(blk, "text", text);
				cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(o, "content"),
						     blk);
			}
			*is_error = 1;
		}
	}
	*out = o;
	return GH_OK;
}

int gh_mcp_parse_progress(const cJSON *params, struct gh_mcp_progress *out)
{
	const cJSON *tok = cJSON_GetObjectItemCaseSensitive(params, "progressToken");
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(params, "progress");
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(params, "total");

	memset(out, 0, sizeof(*out));
	out->token = -1;
	out->total = -1;
	if (!cJSON_IsObject(params) || !cJSON_IsNumber(p) || !isfinite(p->valuedouble))
		return -1;
	out->token = our_id(tok);
	out->progress = p->valuedouble;
	if (cJSON_IsNumber(t) && isfinite(t->valuedouble))
		out->total = t->valuedouble;
	out->message = gh_json_str(params, "message");
	return 0;
}
