/*
 * http_audit.c - the audit log over HTTP, for auditors (admins only):
 *   GET /api/audit?key&agent&thread&run&tool&event&outcome&from&to&limit&cursor
 *   GET /api/audit/export?format=ndjson|csv[&filters]   every row, streamed
 *   GET /api/audit/verify                               the chain and checkpoints
 *   GET /api/audit/values                               the values the filters can take
 * An export that fails half way ends without its terminating chunk (and,
 * in NDJSON, with an error line), so it never looks complete. Per
 * request, on the worker thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit_health.h"
#include "audit_index.h"
#include "audit_verify.h"
#include "http.h"
#include "json.h"
#include "log.h"
#include "store_ui.h"
#include "tools.h"
#include "util.h"

static int audit_filter(struct gh_req *r, struct gh_audit_filter *f, char bufs[10][160])
{
	static const char *const names[] = {"key", "agent", "thread", "run", "tool", "event",
					    "outcome", "from", "to", "owner"};
	const char *v[10];
	int i;

	memset(f, 0, sizeof(*f));
	for (i = 0; i < 10; i++) {
		v[i] = gh_http_query(r, names[i], bufs[i], 160);
		if (v[i] && !*v[i])
			v[i] = NULL;
	}
	f->key_id = v[0];
	f->agent_id = v[1];
	f->thread_id = v[2];
	f->run_id = v[3];
	f->tool_name = v[4];
	f->event = v[5];
	f->outcome = v[6];
	/* thread and run ids are chosen per owner: owner tells them apart */
	f->owner = v[9];
	if (v[7] && gh_parse_time(v[7], &f->from_ms) != 0) {
		gh_http_errorf(r, GH_E_BADREQ, "from: expected ISO-8601 UTC or Unix ms");
		return -1;
	}
	if (v[8] && gh_parse_time(v[8], &f->to_ms) != 0) {
		gh_http_errorf(r, GH_E_BADREQ, "to: expected ISO-8601 UTC or Unix ms");
		return -1;
	}
	return 0;
}

static int collect_row(void *ud, const struct gh_audit_row *row)
{
	cJSON_AddItemToArray(ud, gh_audit_row_json(row));
	return 0;
}

static void audit_query(struct gh_req *r)
{
	struct gh_audit_filter f;
	char bufs[10][160], lim[16], cur[32];
	int64_t limit = 50, cursor = 0, next = 0;
	cJSON *o, *rows;
	struct gh_err e;

	if (audit_filter(r, &f, bufs) != 0)
		return;
	if ((gh_http_query(r, "limit", lim, sizeof(lim)) &&
	     gh_parse_i64(lim, 1, 1000, &limit) != 0) ||
	    (gh_http_query(r, "cursor", cur, sizeof(cur)) && *cur &&
	     gh_parse_i64(cur, 1, INT64_MAX, &cursor) != 0)) {
		gh_http_errorf(r, GH_E_BADREQ, "limit must be 1..1000 and cursor a row number");
		return;
	}
	o = cJSON_CreateObject();
	rows = cJSON_AddArrayToObject(o, "rows");
	if (gh_store_audit_query(r->app->store, &f, cursor, (int)limit, 0, collect_row, rows, &next,
				 &e) != GH_OK) {
		cJSON_Delete(o);
		gh_http_error(r, &e);
		return;
	}
	if (next) {
		char n[24];

		snprintf(n, sizeof(n), "%lld", (long long)next);
		cJSON_AddStringToObject(o, "nextCursor", n);
	} else {
		cJSON_AddNullToObject(o, "nextCursor");
	}
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

/* Most values one filter offers; a log holding more tools than this is
 * filtered by typing the name. */
#define VALUES_MAX 1000

/* Appends val to the string array ud unless it is there already, or too
 * long for a filter (audit_filter's 160 bytes). */
static int add_value(void *ud, const char *val)
{
	cJSON *arr = ud, *it;

	if (!val || !*val || strlen(val) >= 160)
		return 0;
	cJSON_ArrayForEach(it, arr)
		if (!strcmp(it->valuestring, val))
			return 0;
	cJSON_AddItemToArray(arr, cJSON_CreateString(val));
	return 0;
}

static int by_text(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The values a filter of dim can take: the known ones (NULL-terminated
 * known, in their order) and then those the log holds besides. With
 * sorted, all of them in byte order. NULL on failure (answered). */
static cJSON *filter_values(struct gh_req *r, int dim, const char *const *known, int sorted)
{
	cJSON *arr = cJSON_CreateArray(), *it;
	struct gh_err e;
	size_t n = 0, i;
	const char **v;

	if (!arr) {
		gh_http_errorf(r, GH_E_NOMEM, "out of memory");
		return NULL;
	}
	for (i = 0; known && known[i]; i++)
		add_value(arr, known[i]);
	if (gh_store_ui_audit_values(r->app->store, dim, VALUES_MAX, add_value, arr, &e) !=
	    GH_OK) {
		cJSON_Delete(arr);
		gh_http_error(r, &e);
		return NULL;
	}
	if (!sorted || !(v = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof(*v))))
		return arr;
	cJSON_ArrayForEach(it, arr)
		v[n++] = it->valuestring;
	qsort(v, n, sizeof(*v), by_text);
	it = cJSON_CreateStringArray(v, (int)n);
	free(v);
	if (!it)
		return arr;
	cJSON_Delete(arr);
	return it;
}

/* What the audit filters can offer: events and outcomes are gatehouse's
 * vocabulary (plus anything else the log holds, such as rows an older or
 * newer version wrote); tools are the configured and memory tools plus
 * every tool the log names (client tools among them). */
static void audit_values(struct gh_req *r)
{
	const struct gh_config *cfg = gh_app_cfg(r->app);
	const char **tools = calloc(cfg->ntools + 8, sizeof(*tools));
	cJSON *o = cJSON_CreateObject(), *a;
	size_t i, n = 0;

	if (!tools || !o) {
		free(tools);
		cJSON_Delete(o);
		gh_http_errorf(r, GH_E_NOMEM, "out of memory");
		return;
	}
	for (i = 0; i < cfg->ntools; i++)
		tools[n++] = cfg->tools[i].name;
	for (i = 0; gh_memory_tool_names[i] && n < cfg->ntools + 7; i++)
		tools[n++] = gh_memory_tool_names[i];
	if (!(a = filter_values(r, GH_AUDIT_DIM_EVENT, gh_audit_event_names, 0)))
		goto out;
	cJSON_AddItemToObject(o, "events", a);
	if (!(a = filter_values(r, GH_AUDIT_DIM_OUTCOME, gh_audit_outcome_names, 0)))
		goto out;
	cJSON_AddItemToObject(o, "outcomes", a);
	if (!(a = filter_values(r, GH_AUDIT_DIM_TOOL, tools, 1)))
		goto out;
	cJSON_AddItemToObject(o, "tools", a);
	gh_http_json(r, 200, o);
out:
	free(tools);
	cJSON_Delete(o);
}

struct export_ctx {
	struct gh_req *r;
	int csv;
	struct gh_buf b;
	int failed;                   /* the client is gone, or out of memory */
};

static int export_row(void *ud, const struct gh_audit_row *row)
{
	struct export_ctx *x = ud;

	if (x->csv) {
		if (gh_audit_row_csv(row, &x->b) != 0)
			return x->failed = 1;
	} else {
		cJSON *j = gh_audit_row_json(row);

		if (!j || gh_json_print(j, &x->b) != GH_BUF_OK || gh_buf_putc(&x->b, '\n')) {
			cJSON_Delete(j);
			return x->failed = 1;
		}
		cJSON_Delete(j);
	}
	if (x->b.len >= 65536) {
		if (gh_http_chunked_write(x->r, x->b.data, x->b.len) != 0)
			return x->failed = 1;
		gh_buf_reset(&x->b);
	}
	return 0;
}

/* The export stopped half way (the store failed): what was read goes out,
 * then, in NDJSON, a last line {"error":{code, message}}, and the body ends
 * without its terminating chunk, so no client takes it for complete. */
static void export_failed(struct export_ctx *x, const struct gh_err *e)
{
	gh_warn("%s: audit export stopped: %s", x->r->id, e->msg);
	if (!x->csv)
		gh_audit_export_error_line(e->code, &x->b);
	if (x->b.len)
		gh_http_chunked_write(x->r, x->b.data, x->b.len);
	gh_http_chunked_abort(x->r);
}

/* Streams every matching row, oldest first, a page at a time: memory
 * stays flat however large the log is. */
static void audit_export(struct gh_req *r)
{
	struct gh_audit_filter f;
	char bufs[10][160], fmt[16], hdr[256];
	const char *format = gh_http_query(r, "format", fmt, sizeof(fmt));
	struct export_ctx x;
	int64_t cursor = 0, next = 0;
	struct gh_err e;

	if (audit_filter(r, &f, bufs) != 0)
		return;
	memset(&x, 0, sizeof(x));
	x.r = r;
	if (format && !strcmp(format, "csv"))
		x.csv = 1;
	else if (format && *format && strcmp(format, "ndjson")) {
		gh_http_errorf(r, GH_E_BADREQ, "format: expected ndjson or csv");
		return;
	}
	snprintf(hdr, sizeof(hdr), "Content-Disposition: attachment; "
		 "filename=\"gatehouse-audit.%s\"\r\n", x.csv ? "csv" : "ndjson");
	if (gh_http_chunked_begin(r, x.csv ? "text/csv; charset=utf-8" : "application/x-ndjson",
				  hdr) != 0)
		return;
	gh_buf_init(&x.b, 1 << 22);
	if (x.csv)
		gh_buf_puts(&x.b, gh_audit_csv_header);
	do {
		if (gh_store_audit_query(r->app->store, &f, cursor, 1000, 1, export_row, &x, &next,
					 &e) != GH_OK) {
			if (!x.failed)
				export_failed(&x, &e);
			x.failed = 1;
			break;
		}
		cursor = next;
	} while (next && !x.failed);
	if (!x.failed) {
		if (x.b.len)
			gh_http_chunked_write(r, x.b.data, x.b.len);
		gh_http_chunked_end(r);
	}
	gh_buf_free(&x.b);
}

static void audit_verify(struct gh_req *r)
{
	struct gh_audit_verify rep;
	struct gh_err e;
	cJSON *o;
	char ts[GH_ISO8601_MAX];

	struct gh_audit_verify_opts vo;

	gh_audit_health_verify_opts(r->app->audit, gh_app_cfg(r->app), r->app->signer.pk, &vo);
	if (gh_audit_verify_ex(r->app->store, &vo, &rep, &e) != GH_OK) {
		gh_http_error(r, &e);
		return;
	}
	gh_audit_health_note_verify(r->app->audit, &rep);
	o = cJSON_CreateObject();
	cJSON_AddBoolToObject(o, "ok", rep.ok);
	cJSON_AddNumberToObject(o, "rows", (double)rep.rows);
	cJSON_AddNumberToObject(o, "lastSeq", (double)rep.last_seq);
	if (rep.chain_ok)
		cJSON_AddNullToObject(o, "badSeq");
	else
		cJSON_AddNumberToObject(o, "badSeq", (double)rep.bad_seq);
	cJSON_AddStringToObject(o, "message", rep.chain_ok ? (rep.ok ? "intact" :
		"rows intact; the filter index is damaged (gatehouse audit reindex)") : rep.message);
	cJSON_AddNumberToObject(o, "signedSeq", (double)rep.signed_seq);
	if (rep.signed_ts) {
		gh_iso8601(rep.signed_ts, ts, sizeof(ts));
		cJSON_AddStringToObject(o, "signedAt", ts);
	} else {
		cJSON_AddNullToObject(o, "signedAt");
	}
	cJSON_AddNumberToObject(o, "unsignedRows", (double)rep.unsigned_rows);
	cJSON_AddNumberToObject(o, "anchorSeq", (double)rep.anchor_seq);
	{
		cJSON *ix = cJSON_AddObjectToObject(o, "index");

		if (ix) {
			cJSON_AddBoolToObject(ix, "ok", rep.index_ok);
			cJSON_AddNumberToObject(ix, "blocks", (double)rep.index_blocks);
			if (rep.index_ok) {
				cJSON_AddNullToObject(ix, "badSeq");
				cJSON_AddNullToObject(ix, "message");
			} else {
				cJSON_AddNumberToObject(ix, "badSeq", (double)rep.index_bad_seq);
				cJSON_AddStringToObject(ix, "message", rep.index_message);
			}
		}
	}
	cJSON_AddNumberToObject(o, "seconds", rep.seconds);
	{
		char pk[65];

		gh_hex(r->app->signer.pk, 32, pk);
		cJSON_AddStringToObject(o, "publicKey", pk);
	}
	gh_http_json(r, 200, o);
	cJSON_Delete(o);
}

const struct gh_route gh_routes_audit[] = {
	{"GET", "/api/audit", GH_AUTH_ADMIN, audit_query},
	{"GET", "/api/audit/export", GH_AUTH_ADMIN, audit_export},
	{"GET", "/api/audit/verify", GH_AUTH_ADMIN, audit_verify},
	{"GET", "/api/audit/values", GH_AUTH_ADMIN, audit_values},
	{NULL, NULL, GH_AUTH_NONE, NULL},
};
