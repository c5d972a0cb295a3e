/*
 * test_run.c - the run engine's helpers for the surfaces: the text of a
 * CoreMessage's content, the client calls a stored run waits on, and the
 * bounded wait for a run to settle after an approval (on a real store):
 * it returns once the run leaves "suspended"/"running", gives up at its
 * deadline with the run as it stands, stops when the client has gone, and
 * never shows another owner's run.
 */
#include "run.h"

#include <pthread.h>

#include "json.h"
#include "t.h"
#include "t_store.h"

static void test_content_text(void)
{
	static const char *const cases[][2] = {
		{"\"plain words\"", "plain words"},
		{"[{\"type\":\"text\",\"text\":\"Hello, \"},{\"type\":\"tool-call\",\"text\":\"no\","
		 "\"toolName\":\"f\"},{\"type\":\"text\",\"text\":\"world\"}]", "Hello, world"},
		{"[{\"type\":\"tool-call\",\"toolName\":\"f\"}]", ""},
		{"[]", ""},
		{"{\"type\":\"text\",\"text\":\"an object is not parts\"}", ""},
	};
	size_t i;

	for (i = 0; i < GH_ARRAY_LEN(cases); i++) {
		cJSON *c = cJSON_Parse(cases[i][0]);
		char *t = gh_run_content_text(c);

		T_ASSERT(c);
		T_EQ_STR(t, cases[i][1]);
		free(t);
		cJSON_Delete(c);
	}
	{
		char *t = gh_run_content_text(NULL);

		T_EQ_STR(t, "");
		free(t);
	}
}

static void test_pending_calls(void)
{
	cJSON *state = cJSON_Parse(
		"{\"calls\":["
		"{\"toolCallId\":\"c1\",\"toolName\":\"search\",\"args\":{\"q\":1},"
		"\"state\":\"pending_client\",\"source\":\"client\"},"
		"{\"toolCallId\":\"c2\",\"toolName\":\"mail\",\"args\":{},"
		"\"state\":\"pending_approval\",\"approvalId\":\"ap_1\"},"
		"{\"toolCallId\":\"c3\",\"toolName\":\"lookup\",\"args\":{\"id\":7},"
		"\"state\":\"released\"},"
		"{\"toolCallId\":\"c4\",\"toolName\":\"done\",\"state\":\"done\"},"
		"{\"toolCallId\":\"c5\",\"toolName\":\"no_state\"}]}");
	cJSON *got = gh_run_pending_calls(state), *want, *none;

	want = cJSON_Parse("[{\"toolCallId\":\"c1\",\"toolName\":\"search\",\"args\":{\"q\":1}},"
			   "{\"toolCallId\":\"c3\",\"toolName\":\"lookup\",\"args\":{\"id\":7}}]");
	T_ASSERT(state && got && want);
	T_ASSERT(cJSON_Compare(got, want, 1));
	none = gh_run_pending_calls(NULL);
	T_ASSERT(cJSON_IsArray(none) && cJSON_GetArraySize(none) == 0);
	cJSON_Delete(none);
	cJSON_Delete(want);
	cJSON_Delete(got);
	cJSON_Delete(state);
}

/* ---- gh_run_wait_settled ---- */

static enum gh_code new_run(struct t_store *t, const char *id, const char *status)
{
	cJSON *state = cJSON_Parse("{\"v\":1,\"calls\":[]}");
	struct gh_run_commit c;
	struct gh_err e;
	enum gh_code rc;

	memset(&c, 0, sizeof(c));
	c.run_id = id;
	c.owner = "alice";
	c.key_id = "key_1";
	c.agent_id = "assistant";
	c.resource_id = "res_1";
	c.status = status;
	c.state = state;
	rc = gh_store_run_commit(t->s, &c, &e);
	if (rc != GH_OK)
		fprintf(stderr, "  run commit: %s\n", e.msg);
	cJSON_Delete(state);
	return rc;
}

struct settler {
	struct gh_store *s;
	int after_ms;
	enum gh_code rc;
};

static void sleep_ms(int ms)
{
	usleep((useconds_t)ms * 1000);
}

/* The background resumer's part: suspended -> running -> completed. */
static void *settle(void *ud)
{
	struct settler *w = ud;
	struct gh_err e;

	sleep_ms(w->after_ms);
	w->rc = gh_store_run_transition(w->s, "run_1", "suspended", "running", &e);
	if (w->rc == GH_OK) {
		sleep_ms(w->after_ms);
		w->rc = gh_store_run_transition(w->s, "run_1", "running", "completed", &e);
	}
	return NULL;
}

static int64_t ms_since(int64_t start_ns)
{
	return (gh_mono_ns() - start_ns) / 1000000;
}

static void test_wait_settles(void)
{
	struct t_store t;
	struct gh_app app;
	struct gh_run_row row;
	struct gh_err e;
	struct settler w;
	pthread_t th;
	int64_t start;
	enum gh_code rc;

	T_EQ_INT(t_store_open(&t), 0);
	memset(&app, 0, sizeof(app));
	app.store = t.s;
	T_EQ_INT(new_run(&t, "run_1", "suspended"), GH_OK);
	w.s = t.s;
	w.after_ms = 150;
	w.rc = GH_E_INTERNAL;
	T_EQ_INT(pthread_create(&th, NULL, settle, &w), 0);
	start = gh_mono_ns();
	rc = gh_run_wait_settled(&app, "alice", "run_1", 5000, NULL, NULL, &row, &e);
	pthread_join(th, NULL);
	T_EQ_INT(w.rc, GH_OK);
	T_EQ_INT(rc, GH_OK);
	T_EQ_STR(row.status, "completed");
	T_EQ_STR(row.owner, "alice");
	/* through "running" without stopping there, long before the deadline */
	T_ASSERT(ms_since(start) >= 250 && ms_since(start) < 2500);
	gh_run_row_clear(&row);
	t_store_close(&t);
}

static int gone_second_time(void *ud)
{
	int *asked = ud;

	return ++*asked >= 2;
}

static void test_wait_ends_early(void)
{
	struct t_store t;
	struct gh_app app;
	struct gh_run_row row;
	struct gh_err e;
	int64_t start;
	int asked = 0;

	T_EQ_INT(t_store_open(&t), 0);
	memset(&app, 0, sizeof(app));
	app.store = t.s;
	T_EQ_INT(new_run(&t, "run_1", "suspended"), GH_OK);

	/* the deadline: the run as it stands */
	start = gh_mono_ns();
	T_EQ_INT(gh_run_wait_settled(&app, NULL, "run_1", 300, NULL, NULL, &row, &e),
		 GH_E_TIMEOUT);
	T_ASSERT(ms_since(start) >= 300 && ms_since(start) < 2000);
	T_EQ_STR(row.status, "suspended");
	T_CONTAINS(e.msg, "run_1");
	gh_run_row_clear(&row);

	/* the client left: asked between polls, stops at the first yes */
	start = gh_mono_ns();
	T_EQ_INT(gh_run_wait_settled(&app, "alice", "run_1", 10000, gone_second_time, &asked,
				     &row, &e), GH_E_CANCELLED);
	T_EQ_INT(asked, 2);
	T_ASSERT(ms_since(start) < 2000);
	T_EQ_STR(row.status, "suspended");
	gh_run_row_clear(&row);

	/* another owner's run is not there */
	T_EQ_INT(gh_run_wait_settled(&app, "bob", "run_1", 1000, NULL, NULL, &row, &e),
		 GH_E_NOTFOUND);
	T_EQ_STR(row.status, "");
	gh_run_row_clear(&row);
	t_store_close(&t);
}

T_MAIN(T(test_content_text), T(test_pending_calls), T(test_wait_settles),
       T(test_wait_ends_early))
