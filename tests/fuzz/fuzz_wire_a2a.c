/*
 * fuzz_wire_a2a.c - the A2A wire (wire_a2a.c): params.message parsed in
 * either dialect (parts, tool definitions, tool results, ids), the history
 * length, the A2A-Version check, and a task rendered in both dialects after
 * being brought up to date from a view of its run. Input: the params of a
 * send, optionally with "calls" (a run's tool calls, as stored) and
 * "status" (the run's status) to build that view from. Must never crash or
 * leak; what is accepted is well-formed: a stored message of role
 * ROLE_USER with one stored part per part, results the engine's own
 * normaliser takes, a rendered task with its id and a state.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "messages.h"
#include "run_int.h"
#include "wire_a2a.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                  \
	do {                      \
		if (!(c))         \
			abort();  \
	} while (0)

static void check_results(const cJSON *results)
{
	cJSON *msgs = gh_a2a_results_messages(results), *norm = NULL;
	struct gh_err e;

	CHECK(msgs);
	CHECK(gh_messages_normalize(msgs, &norm, &e) == GH_OK);
	cJSON_Delete(norm);
	cJSON_Delete(msgs);
}

/* A view of the task's run, from the input's "calls" and "status". */
static void view_from(const cJSON *params, struct gh_run_view *v, struct gh_run_call *calls,
		      size_t cap)
{
	const cJSON *c;
	enum gh_run_status st;

	memset(v, 0, sizeof(*v));
	strcpy(v->id, "run_1");
	v->status = GH_RUN_WAITING;
	if (gh_run_status_parse(gh_json_str(params, "status"), &st) == 0)
		v->status = st;
	v->text = gh_json_str(params, "text") ? gh_json_str(params, "text") : "";
	v->last_step_text = (char *)(uintptr_t)v->text;
	v->error = gh_json_str(params, "error");
	v->step = gh_json_int(params, "step", 1);
	v->calls = calls;
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(params, "calls")) {
		if (v->ncalls == cap)
			break;
		gh_run_call_read(c, &calls[v->ncalls++]);
	}
}

/* A task waiting on its run says what for: a tool-calls part when the
 * client owes results, one approval-required part per approval. */
static void check_waiting(const struct gh_a2a_task *t, const struct gh_run_view *v)
{
	const cJSON *p;
	size_t calls = 0, approvals = 0, i;
	int client = 0;

	for (i = 0; i < v->ncalls; i++)
		client |= gh_call_state_client(v->calls[i].state);
	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(t->status_message, "parts")) {
		const char *ty = gh_json_str(cJSON_GetObjectItemCaseSensitive(p, "metadata"), "type");

		calls += ty && !strcmp(ty, "tool-calls");
		approvals += ty && !strcmp(ty, "approval-required");
	}
	CHECK(calls == (size_t)client);
	CHECK(approvals == gh_run_view_count(v, GH_CALL_PENDING_APPROVAL));
}

static void check_task(const cJSON *params, struct gh_a2a_incoming *in)
{
	struct gh_a2a_task t;
	struct gh_run_view v;
	struct gh_run_call calls[16];
	cJSON *out;
	char why[512];
	int d;

	memset(&t, 0, sizeof(t));
	strcpy(t.id, "task_1");
	strcpy(t.context_id, "ctx_1");
	strcpy(t.run_id, "run_1");
	strcpy(t.state, GH_A2A_WORKING);
	t.history = cJSON_CreateArray();
	t.artifacts = cJSON_CreateArray();
	CHECK(t.history && t.artifacts);
	cJSON_AddItemToArray(t.history, in->stored);
	in->stored = NULL;
	view_from(params, &v, calls, sizeof(calls) / sizeof(calls[0]));
	gh_a2a_task_sync(&t, &v);
	CHECK(!strcmp(t.state, gh_a2a_state_of_run(v.status)));
	if (!strcmp(t.state, GH_A2A_INPUT_REQUIRED))
		check_waiting(&t, &v);
	gh_a2a_describe_wait(&t, why, sizeof(why));
	for (d = GH_A2A_V03; d <= GH_A2A_V10; d++) {
		out = gh_a2a_task_out(&t, (enum gh_a2a_dialect)d, gh_json_int(params, "historyLength",
									       -1));
		CHECK(out && !strcmp(gh_json_str(out, "id"), "task_1"));
		CHECK(gh_json_str(cJSON_GetObjectItemCaseSensitive(out, "status"), "state"));
		cJSON_Delete(out);
	}
	gh_a2a_task_clear(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gh_a2a_incoming in;
	cJSON *params = NULL;
	struct gh_err e;
	int64_t hl;
	const char *ver;

	if (gh_json_parse((const char *)data, size, "input", &params, &e) != GH_OK)
		return 0;
	gh_a2a_history_len(cJSON_GetObjectItemCaseSensitive(params, "configuration"),
			   "params.configuration", &hl, &e);
	if ((ver = gh_json_str(params, "version")))
		gh_a2a_version_supported(ver);
	if (gh_a2a_parse_message(params, &in, &e) == 0) {
		const cJSON *parts = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(params, "message"), "parts");
		const cJSON *stored = cJSON_GetObjectItemCaseSensitive(in.stored, "parts");

		CHECK(!strcmp(gh_json_str(in.stored, "role"), "ROLE_USER"));
		CHECK(cJSON_GetArraySize(stored) == cJSON_GetArraySize(parts));
		if (in.results)
			check_results(in.results);
		check_task(params, &in);
	} else {
		CHECK(e.msg[0]);
	}
	gh_a2a_incoming_free(&in);
	cJSON_Delete(params);
	return 0;
}
