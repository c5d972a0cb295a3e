/*
 * tool_http.c - configured HTTP server tools: the validated arguments are
 * POSTed as JSON to the tool's one configured URL and the JSON response is
 * the result. Nothing in a request or a model's output can change where the
 * call goes; redirects are not followed; the response is capped. Tool calls
 * are not retried (a tool may not be idempotent). Thread-safe.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "tools.h"
#include "upstream.h"

/* First n printable bytes of a body, for error messages. */
static void excerpt(const struct gh_buf *b, char *out, size_t cap)
{
	size_t i, n = b->len < cap - 1 ? b->len : cap - 1;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)b->data[i];

		out[i] = (c >= 0x20 && c < 0x7f) ? (char)c : ' ';
	}
	out[n] = '\0';
}

enum gh_code gh_tool_http_exec(const struct gh_tool_conf *t, const cJSON *args,
			       int (*tick)(void *ud), void *ud, cJSON **result, int *is_error,
			       char *detail, size_t detail_cap, struct gh_err *e)
{
	struct gh_upstream_header hdrs[34];
	struct gh_upstream_req req;
	struct gh_upstream_resp resp;
	struct gh_err ue;
	char *body = NULL;
	size_t nh = 0, i;
	enum gh_code rc;
	cJSON *r = NULL;

	*result = NULL;
	*is_error = 0;
	if (detail && detail_cap)
		detail[0] = '\0';
	body = gh_json_dump(args);
	if (!body)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	hdrs[nh++] = (struct gh_upstream_header){"Content-Type", "application/json"};
	hdrs[nh++] = (struct gh_upstream_header){"Accept", "application/json"};
	for (i = 0; i < t->nheaders && nh < sizeof(hdrs) / sizeof(hdrs[0]); i++)
		hdrs[nh++] = (struct gh_upstream_header){t->headers[i].name, t->headers[i].value};
	memset(&req, 0, sizeof(req));
	req.url = t->url;
	req.method = "POST";
	req.headers = hdrs;
	req.nheaders = nh;
	req.body = body;
	req.body_len = strlen(body);
	req.timeout_ms = t->timeout_ms;
	req.connect_timeout_ms = t->timeout_ms < 5000 ? t->timeout_ms : 5000;
	req.max_response = (size_t)t->max_response_bytes;
	req.on_tick = tick;
	req.ud = ud;
	req.max_retries = 0;
	gh_upstream_resp_init(&resp, (size_t)t->max_response_bytes);
	rc = gh_upstream_do(&req, &resp, &ue);
	free(body);
	if (rc == GH_E_CANCELLED) {
		gh_upstream_resp_free(&resp);
		return gh_err_set(e, GH_E_CANCELLED, "cancelled");
	}
	if (rc != GH_OK) {
		/* the tool's address is for the audit log only */
		*is_error = 1;
		r = gh_json_error_result("tool %s failed: %s", t->name, resp.error);
		if (detail && detail_cap)
			snprintf(detail, detail_cap, "tool %s failed: %s", t->name, ue.msg);
	} else if (resp.status < 200 || resp.status > 299) {
		char ex[201];

		excerpt(&resp.body, ex, sizeof(ex));
		*is_error = 1;
		r = gh_json_error_result("tool %s answered HTTP %ld%s%s%s", t->name, resp.status,
			       resp.status >= 300 && resp.status < 400
				       ? " (redirects are not followed)" : "",
			       ex[0] ? ": " : "", ex);
	} else {
		struct gh_err pe;

		if (gh_json_parse_opts(resp.body.data ? resp.body.data : "", resp.body.len,
				       "tool response", GH_JSON_UPSTREAM, &r, &pe) != GH_OK) {
			*is_error = 1;
			r = gh_json_error_result("tool %s answered with a body that is not JSON", t->name);
		}
	}
	gh_upstream_resp_free(&resp);
	if (!r)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	*result = r;
	return GH_OK;
}
