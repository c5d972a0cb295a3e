/*
 * test_run.c - the run engine's view of stored runs for the surfaces: the
 * client calls a stored run waits on, and the bounded wait for a run to
 * settle after an approval (on a real store, woken by the hub as the
 * engine announces state changes): it returns once the run leaves
 * "suspended"/"running", gives up at its deadline with the run as it
 * stands, stops when the client has gone, and never shows another owner's
 * run.
 */
#include "run.h"

#include <pthread.h>

#include "hub.h"
#include "run_int.h"
#include "json.h"
#include "t.h"
#include "t_store.h"

static enum gh_code store_run(struct t_store *t, const char *id, const char *status,
			      const char *state_json);

static void test_pending_calls(void)
{
	static const char state[] =
		"{\"v\":1,\"calls\":["
		"{\"toolCallId\":\"c1\",\"toolName\":\"search\",\"args\":{\"q\":1},"
		"\"state\":\"pending_client\",\"source\":\"client\"},"
		"{\"toolCallId\":\"c2\",\"toolName\":\"mail\",\"args\":{},"
		"\"state\":\"pending_approval\",\"approvalId\":\"ap_1\"},"
		"{\"toolCallId\":\"c3\",\"toolName\":\"lookup\",\"args\":{\"id\":7},"
		"\"state\":\"released\"},"
		"{\"toolCallId\":\"c4\",\"toolName\":\"done\",\"state\":\"done\"},"
		"{\"toolCallId\":\"c5\",\"toolName\":\"no_state\"}]}";
	struct t_store t;
	struct gh_app app;
	struct gh_run_view v;
	struct gh_err e;
	cJSON *got, *want, *none;

	T_EQ_INT(t_store_open(&t), 0);
	memset(&app, 0, sizeof(app));
	app.store = t.s;
	T_EQ_INT(store_run(&t, "run_1", "waiting", state), GH_OK);
	T_EQ_INT(store_run(&t, "run_2", "completed", "{\"v\":1}"), GH_OK);
	T_EQ_INT(gh_run_view_get(&app, "alice", "run_1", &v, &e), GH_OK);
	T_EQ_INT(v.status, GH_RUN_WAITING);
	T_EQ_INT((int)v.ncalls, 5);
	T_EQ_INT((int)gh_run_view_count(&v, GH_CALL_PENDING_APPROVAL), 1);
	T_EQ_STR(v.calls[1].approval_id, "ap_1");
	got = gh_run_view_pending_json(&v);
	want = cJSON_Parse("[{\"toolCallId\":\"c1\",\"toolName\":\"search\",\"args\":{\"q\":1}},"
			   "{\"toolCallId\":\"c3\",\"toolName\":\"lookup\",\"args\":{\"id\":7}}]");
	T_ASSERT(got && want);
	T_ASSERT(cJSON_Compare(got, want, 1));
	gh_run_view_clear(&v);
	T_EQ_INT(gh_run_view_get(&app, "alice", "run_2", &v, &e), GH_OK);
	none = gh_run_view_pending_json(&v);
	T_ASSERT(cJSON_IsArray(none) && cJSON_GetArraySize(none) == 0);
	gh_run_view_clear(&v);
	cJSON_Delete(none);
	cJSON_Delete(want);
	cJSON_Delete(got);
	t_store_close(&t);
}

/* ---- gh_run_wait ---- */

static enum gh_code store_run(struct t_store *t, const char *id, const char *status,
			      const char *state_json)
{
	cJSON *state = cJSON_Parse(state_json);
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

static enum gh_code new_run(struct t_store *t, const char *id, const char *status)
{
	return store_run(t, id, status, "{\"v\":1,\"calls\":[]}");
}

struct settler {
	struct gh_store *s;
	struct gh_hub *hub;
	int after_ms;
	enum gh_code rc;
};

static void sleep_ms(int ms)
{
	usleep((useconds_t)ms * 1000);
}

/* The background resumer's part: suspended -> running -> completed, each
 * change announced on the hub as the engine does. */
static void *settle(void *ud)
{
	struct settler *w = ud;
	struct gh_err e;

	sleep_ms(w->after_ms);
	w->rc = gh_store_run_transition(w->s, "run_1", "suspended", "running", &e);
	gh_hub_notify_state(w->hub, "run_1");
	if (w->rc == GH_OK) {
		sleep_ms(w->after_ms);
		w->rc = gh_store_run_transition(w->s, "run_1", "running", "completed", &e);
		gh_hub_notify_state(w->hub, "run_1");
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
	struct gh_run_view row;
	struct gh_err e;
	struct settler w;
	pthread_t th;
	int64_t start;
	enum gh_code rc;

	T_EQ_INT(t_store_open(&t), 0);
	memset(&app, 0, sizeof(app));
	app.store = t.s;
	app.hub = gh_hub_new();
	T_EQ_INT(new_run(&t, "run_1", "suspended"), GH_OK);
	w.s = t.s;
	w.hub = app.hub;
	w.after_ms = 150;
	w.rc = GH_E_INTERNAL;
	T_EQ_INT(pthread_create(&th, NULL, settle, &w), 0);
	start = gh_mono_ns();
	rc = gh_run_wait(&app, "alice", "run_1", GH_UNTIL_SETTLED, 5000, NULL, NULL, &row, &e);
	pthread_join(th, NULL);
	T_EQ_INT(w.rc, GH_OK);
	T_EQ_INT(rc, GH_OK);
	T_EQ_STR(gh_run_status_name(row.status), "completed");
	T_EQ_STR(row.owner, "alice");
	/* through "running" without stopping there, long before the deadline */
	T_ASSERT(ms_since(start) >= 250 && ms_since(start) < 2500);
	gh_run_view_clear(&row);
	gh_hub_free(app.hub);
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
	struct gh_run_view row;
	struct gh_err e;
	int64_t start;
	int asked = 0;

	T_EQ_INT(t_store_open(&t), 0);
	memset(&app, 0, sizeof(app));
	app.store = t.s;
	T_EQ_INT(new_run(&t, "run_1", "suspended"), GH_OK);

	/* the deadline: the run as it stands */
	start = gh_mono_ns();
	T_EQ_INT(gh_run_wait(&app, NULL, "run_1", GH_UNTIL_SETTLED, 300, NULL, NULL, &row, &e),
		 GH_E_TIMEOUT);
	T_ASSERT(ms_since(start) >= 300 && ms_since(start) < 2000);
	T_EQ_STR(gh_run_status_name(row.status), "suspended");
	T_CONTAINS(e.msg, "run_1");
	gh_run_view_clear(&row);

	/* the client left: asked between wake-ups, stops at the first yes */
	start = gh_mono_ns();
	T_EQ_INT(gh_run_wait(&app, "alice", "run_1", GH_UNTIL_SETTLED, 10000, gone_second_time,
			     &asked, &row, &e), GH_E_CANCELLED);
	T_EQ_INT(asked, 2);
	T_ASSERT(ms_since(start) < 2000);
	T_EQ_STR(gh_run_status_name(row.status), "suspended");
	gh_run_view_clear(&row);

	/* another owner's run is not there */
	T_EQ_INT(gh_run_wait(&app, "bob", "run_1", GH_UNTIL_SETTLED, 1000, NULL, NULL, &row, &e),
		 GH_E_NOTFOUND);
	T_EQ_STR(row.id, "");
	gh_run_view_clear(&row);
	t_store_close(&t);
}

/* ---- holds and gh_run_cancel ---- */

struct releaser {
	struct gh_app *app;
	struct gh_run_hold *h;
	int after_ms;
};

static void *release_later(void *ud)
{
	struct releaser *w = ud;

	sleep_ms(w->after_ms);
	gh_run_release(w->app, w->h);
	return NULL;
}

static void test_cancel(void)
{
	struct t_store t;
	struct gh_app app;
	struct gh_run_view v;
	struct gh_run_hold h, h2;
	struct gh_err e;
	enum gh_cancel_outcome how;
	struct releaser w;
	pthread_t th;
	int64_t start;

	T_EQ_INT(t_store_open(&t), 0);
	memset(&app, 0, sizeof(app));
	app.store = t.s;
	app.hub = gh_hub_new();

	/* a run waiting for the client is cancelled at once */
	T_EQ_INT(new_run(&t, "run_w", "waiting"), GH_OK);
	T_EQ_INT(gh_run_cancel(&app, "alice", "run_w", &how, &e), GH_OK);
	T_EQ_INT(how, GH_CANCEL_DONE);
	T_EQ_INT(gh_run_view_get(&app, "alice", "run_w", &v, &e), GH_OK);
	T_EQ_STR(gh_run_status_name(v.status), "cancelled");
	gh_run_view_clear(&v);
	/* a final run cannot be, and says what it is */
	T_EQ_INT(gh_run_cancel(&app, "alice", "run_w", &how, &e), GH_E_CONFLICT);
	T_CONTAINS(e.msg, "cancelled");
	/* another owner's run is not there */
	T_EQ_INT(new_run(&t, "run_s", "suspended"), GH_OK);
	T_EQ_INT(gh_run_cancel(&app, "bob", "run_s", &how, &e), GH_E_NOTFOUND);

	/* a new run held by a request is in flight here before it is stored */
	memset(&h, 0, sizeof(h));
	T_EQ_INT(gh_run_hold(&app, "alice", "run_new", &h, &e), GH_OK);
	T_EQ_INT(gh_run_in_flight("alice", "run_new"), 1);
	T_EQ_INT(gh_run_in_flight("bob", "run_new"), 0);
	T_EQ_INT(gh_run_view_get(&app, "alice", "run_new", &v, &e), GH_E_NOTFOUND);
	T_EQ_INT(gh_run_hold_cancelled(&h), 0);
	T_EQ_INT(gh_run_cancel(&app, "bob", "run_new", &how, &e), GH_E_NOTFOUND);
	T_EQ_INT(gh_run_cancel(&app, "alice", "run_new", &how, &e), GH_OK);
	T_EQ_INT(how, GH_CANCEL_SIGNALLED);
	T_EQ_INT(gh_run_hold_cancelled(&h), 1);
	/* the engine's own hold, taken after the cancel, stops too */
	memset(&h2, 0, sizeof(h2));
	T_EQ_INT(gh_run_hold(&app, "alice", "run_new", &h2, &e), GH_OK);
	T_EQ_INT(gh_run_hold_cancelled(&h2), 1);
	gh_run_release(&app, &h2);

	/* waiting until the request lets go: woken when it does */
	w.app = &app;
	w.h = &h;
	w.after_ms = 150;
	T_EQ_INT(pthread_create(&th, NULL, release_later, &w), 0);
	start = gh_mono_ns();
	T_EQ_INT(gh_run_wait(&app, "alice", "run_new", GH_UNTIL_IDLE, 5000, NULL, NULL, &v, &e),
		 GH_E_NOTFOUND);
	pthread_join(th, NULL);
	T_ASSERT(ms_since(start) >= 100 && ms_since(start) < 1000);
	gh_run_view_clear(&v);

	/* a stored run resumed in the background cannot be stopped */
	T_EQ_INT(gh_store_run_transition(t.s, "run_s", "suspended", "running", &e), GH_OK);
	memset(&h2, 0, sizeof(h2));
	T_EQ_INT(gh_run_hold_as(&app, "alice", "run_s", 0, &h2, &e), GH_OK);
	T_EQ_INT(gh_run_cancel(&app, "alice", "run_s", &how, &e), GH_E_CONFLICT);
	T_EQ_INT(gh_run_hold_cancelled(&h2), 0);
	gh_run_release(&app, &h2);
	gh_hub_free(app.hub);
	t_store_close(&t);
}

/* Many holds at once, as a thousand held streams make: each is found by
 * its own id and owner, a second hold of the same run outlives the first
 * one's release, releases in any order leave the others in place, and a
 * cancel reaches the holds of that run only. */
#define MANY_HOLDS 3000

struct holder {
	struct gh_app *app;
	int base;
	int bad;
};

static void *hold_release(void *ud)
{
	struct holder *w = ud;
	struct gh_run_hold h;
	struct gh_err e;
	char id[32];
	int i;

	for (i = 0; i < 500; i++) {
		snprintf(id, sizeof(id), "run_t%d_%d", w->base, i);
		memset(&h, 0, sizeof(h));
		if (gh_run_hold(w->app, "carol", id, &h, &e) != GH_OK ||
		    !gh_run_in_flight("carol", id)) {
			w->bad++;
			continue;
		}
		gh_run_release(w->app, &h);
		w->bad += gh_run_in_flight("carol", id);
	}
	return NULL;
}

static void test_many_holds(void)
{
	static struct gh_run_hold h[MANY_HOLDS];
	struct gh_run_hold twin;
	struct gh_app app;
	struct gh_err e;
	struct holder w[4];
	pthread_t th[4];
	enum gh_cancel_outcome how;
	char id[32];
	int i, missing = 0, extra = 0;

	memset(&app, 0, sizeof(app));
	app.hub = gh_hub_new();
	memset(h, 0, sizeof(h));
	for (i = 0; i < MANY_HOLDS; i++) {
		snprintf(id, sizeof(id), "run_many_%d", i);
		T_EQ_INT(gh_run_hold(&app, i % 2 ? "alice" : "bob", id, &h[i], &e), GH_OK);
	}
	T_EQ_INT(gh_run_in_flight("alice", "run_many_1"), 1);
	T_EQ_INT(gh_run_in_flight("bob", "run_many_1"), 0);
	T_EQ_INT(gh_run_in_flight(NULL, "run_many_2998"), 1);
	T_EQ_INT(gh_run_in_flight(NULL, "run_many_3000"), 0);
	/* the same run held twice: in flight until both let go */
	memset(&twin, 0, sizeof(twin));
	T_EQ_INT(gh_run_hold(&app, "alice", "run_many_7", &twin, &e), GH_OK);
	gh_run_release(&app, &h[7]);
	T_EQ_INT(gh_run_in_flight("alice", "run_many_7"), 1);
	/* a cancel stops that run's holds and no other's */
	T_EQ_INT(gh_run_cancel(&app, "alice", "run_many_7", &how, &e), GH_OK);
	T_EQ_INT(how, GH_CANCEL_SIGNALLED);
	T_EQ_INT(gh_run_hold_cancelled(&twin), 1);
	T_EQ_INT(gh_run_hold_cancelled(&h[9]), 0);
	gh_run_release(&app, &twin);
	T_EQ_INT(gh_run_in_flight("alice", "run_many_7"), 0);
	/* every third released, then the others from the end */
	for (i = 0; i < MANY_HOLDS; i += 3)
		if (i != 7)
			gh_run_release(&app, &h[i]);
	for (i = 0; i < MANY_HOLDS; i++) {
		snprintf(id, sizeof(id), "run_many_%d", i);
		if (i % 3 == 0 || i == 7)
			extra += gh_run_in_flight(NULL, id);
		else
			missing += !gh_run_in_flight(NULL, id);
	}
	T_EQ_INT(extra, 0);
	T_EQ_INT(missing, 0);
	/* threads holding and releasing beside the ones still held */
	for (i = 0; i < 4; i++) {
		w[i] = (struct holder){&app, i, 0};
		T_ASSERT(pthread_create(&th[i], NULL, hold_release, &w[i]) == 0);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		T_EQ_INT(w[i].bad, 0);
	}
	for (i = MANY_HOLDS - 1; i >= 0; i--)
		gh_run_release(&app, &h[i]); /* a released hold's second release does nothing */
	for (i = 0; i < MANY_HOLDS; i += 97) {
		snprintf(id, sizeof(id), "run_many_%d", i);
		T_EQ_INT(gh_run_in_flight(NULL, id), 0);
	}
	gh_hub_free(app.hub);
}

struct claimer {
	struct gh_store *s;
	const char *run_id;
	pthread_barrier_t *go;
	enum gh_code rc;
};

static void *claim(void *ud)
{
	struct claimer *c = ud;
	struct gh_err e;

	pthread_barrier_wait(c->go);
	c->rc = gh_store_run_transition(c->s, c->run_id, "suspended", "running", &e);
	return NULL;
}

/* Two gatehouse processes (two stores on one database: replicas on
 * PostgreSQL) claim the same suspended run at the same moment, four
 * requests at a time: exactly one claim wins, every time. */
static void test_claim_race_one_winner(void)
{
	struct t_store t, t2;
	struct gh_err e;
	int round;

	T_EQ_INT(t_store_open(&t), 0);
	t2 = t;
	T_EQ_INT(t_store_reopen(&t2, 0, 0, &e), GH_OK);
	for (round = 0; round < 30; round++) {
		struct claimer c[4];
		pthread_t th[4];
		pthread_barrier_t go;
		char id[32];
		int i, won = 0;

		snprintf(id, sizeof(id), "run_race_%d", round);
		T_EQ_INT(new_run(&t, id, "suspended"), GH_OK);
		pthread_barrier_init(&go, NULL, 4);
		for (i = 0; i < 4; i++) {
			c[i] = (struct claimer){i % 2 ? t2.s : t.s, id, &go, GH_E_INTERNAL};
			T_ASSERT(pthread_create(&th[i], NULL, claim, &c[i]) == 0);
		}
		for (i = 0; i < 4; i++) {
			pthread_join(th[i], NULL);
			T_ASSERT(c[i].rc == GH_OK || c[i].rc == GH_E_CONFLICT);
			won += c[i].rc == GH_OK;
		}
		pthread_barrier_destroy(&go);
		T_EQ_INT(won, 1);
	}
	gh_store_close(t2.s);
	t_store_close(&t);
}

T_MAIN(T(test_pending_calls), T(test_cancel), T(test_many_holds), T(test_wait_settles),
       T(test_wait_ends_early), T(test_claim_race_one_winner))
