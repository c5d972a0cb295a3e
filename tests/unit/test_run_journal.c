/*
 * test_run_journal.c - a run's event journal: a reader gets every event
 * from its offset on, once and in order, also while a writer on another
 * thread is still adding them (the test to run under -fsanitize=thread);
 * a turn's end ends the reading; another owner's run is not found; events
 * past the per-run cap are reported, not skipped silently; the streams of
 * one run (native, AG-UI) never mix, and an opened stream is its owner's,
 * taken once, followed until it is ended; every event comes back whole
 * and in order from any offset, though each record is coded against the
 * one before it.
 */
#include "run_journal.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"
#include "t.h"

struct got {
	int64_t seq[4096];
	int n;
	int bad;       /* an event out of order or with the wrong text */
	int stop_at;   /* fn stops after this many (0: never) */
	const char *type;   /* the events' type ("text-delta" when NULL) */
};

static int collect(void *ud, int64_t seq, const char *type, const char *data, size_t len)
{
	struct got *g = ud;
	char want[32];

	snprintf(want, sizeof(want), "{\"n\":%lld}", (long long)seq);
	if (strcmp(type, g->type ? g->type : "text-delta") || len != strlen(want) || memcmp(data, want, len) ||
	    (g->n && g->seq[g->n - 1] != seq - 1))
		g->bad = 1;
	if (g->n < 4096)
		g->seq[g->n++] = seq;
	return g->stop_at && g->n >= g->stop_at;
}

static void add_n(const char *run, int64_t n, int ends)
{
	char data[32];

	snprintf(data, sizeof(data), "{\"n\":%lld}", (long long)n);
	gh_run_journal_add(GH_JOURNAL_NATIVE, "alice", run, "text-delta", data, strlen(data), ends);
}

static void test_replay_from_offset(void)
{
	struct got g;
	struct gh_err e;
	int i;

	memset(&g, 0, sizeof(g));
	for (i = 0; i < 10; i++)
		add_n("run_replay", i, i == 9);
	T_EQ_INT(gh_run_journal_follow(GH_JOURNAL_NATIVE,
				       "alice", "run_replay", 4, collect, NULL, &g, &e), GH_OK);
	T_EQ_INT(g.n, 6);
	T_EQ_INT(g.seq[0], 4);
	T_EQ_INT(g.bad, 0);
	memset(&g, 0, sizeof(g));
	T_EQ_INT(gh_run_journal_follow(GH_JOURNAL_NATIVE,
				       NULL, "run_replay", 0, collect, NULL, &g, &e), GH_OK);
	T_EQ_INT(g.n, 10);
	/* an offset past the end of an ended turn: nothing, at once */
	memset(&g, 0, sizeof(g));
	T_EQ_INT(gh_run_journal_follow(GH_JOURNAL_NATIVE,
				       "alice", "run_replay", 50, collect, NULL, &g, &e), GH_OK);
	T_EQ_INT(g.n, 0);
	/* the reader may stop */
	memset(&g, 0, sizeof(g));
	g.stop_at = 3;
	T_EQ_INT(gh_run_journal_follow(GH_JOURNAL_NATIVE,
				       "alice", "run_replay", 0, collect, NULL, &g, &e), GH_OK);
	T_EQ_INT(g.n, 3);
}

static void test_other_owner_and_unknown_run(void)
{
	struct got g;
	struct gh_err e;

	memset(&g, 0, sizeof(g));
	add_n("run_owned", 0, 1);
	T_EQ_INT(gh_run_journal_follow(GH_JOURNAL_NATIVE,
				       "mallory", "run_owned", 0, collect, NULL, &g, &e),
		 GH_E_NOTFOUND);
	T_EQ_INT(gh_run_journal_follow(GH_JOURNAL_NATIVE,
				       "alice", "run_nothing", 0, collect, NULL, &g, &e),
		 GH_E_NOTFOUND);
	T_EQ_INT(g.n, 0);
}

struct writer {
	int n;
};

static void *write_events(void *ud)
{
	struct writer *w = ud;
	struct gh_run_hold h;
	struct gh_err e;
	int i;

	memset(&h, 0, sizeof(h));
	gh_run_hold(NULL, "alice", "run_live", &h, &e);
	for (i = 0; i < w->n; i++) {
		add_n("run_live", i, i == w->n - 1);
		if (i % 50 == 0)
			usleep(1000);
	}
	gh_run_release(NULL, &h);
	return NULL;
}

static void test_follow_while_written(void)
{
	struct writer w = {2000};
	struct got g;
	struct gh_err e;
	pthread_t th;
	int i;

	memset(&g, 0, sizeof(g));
	/* a reader that starts before the writer's first event finds no
	 * journal; one that starts after it follows to the end */
	T_ASSERT(pthread_create(&th, NULL, write_events, &w) == 0);
	for (i = 0; i < 2000; i++) {
		enum gh_code rc = gh_run_journal_follow(GH_JOURNAL_NATIVE, "alice", "run_live", 0,
							collect, NULL, &g, &e);

		if (rc == GH_OK)
			break;
		T_EQ_INT(rc, GH_E_NOTFOUND);
		usleep(1000);
	}
	pthread_join(th, NULL);
	T_EQ_INT(g.bad, 0);
	T_EQ_INT(g.n, 2000);
	T_EQ_INT(g.seq[1999], 1999);
}

static void test_too_many_events_are_reported(void)
{
	static char big[1 << 20];
	struct got g;
	struct gh_err e;
	int i;

	memset(big, 'x', sizeof(big) - 1);
	/* 16 MiB a run: the 17th MiB and what follows are dropped */
	for (i = 0; i < 20; i++)
		gh_run_journal_add(GH_JOURNAL_NATIVE, "alice", "run_big", "text-delta", big,
				   sizeof(big) - 1, i == 19);
	memset(&g, 0, sizeof(g));
	T_EQ_INT(gh_run_journal_follow(GH_JOURNAL_NATIVE,
				       "alice", "run_big", 19, collect, NULL, &g, &e),
		 GH_E_CONFLICT);
	T_CONTAINS(e.msg, "too many");
	gh_run_journal_reset();
	T_EQ_INT(gh_run_journal_follow(GH_JOURNAL_NATIVE,
				       "alice", "run_big", 0, collect, NULL, &g, &e),
		 GH_E_NOTFOUND);
}

static void add_agui(const char *owner, const char *run, int64_t n)
{
	char data[32];

	snprintf(data, sizeof(data), "{\"n\":%lld}", (long long)n);
	gh_run_journal_add(GH_JOURNAL_AGUI, owner, run, "AGUI", data, strlen(data), 0);
}

static void test_streams_of_a_run_do_not_mix(void)
{
	struct got g;
	struct gh_err e;
	int i;

	T_EQ_INT(gh_run_journal_open(GH_JOURNAL_AGUI, "alice", "run_two", &e), GH_OK);
	for (i = 0; i < 5; i++) {
		add_n("run_two", i, i == 4);
		add_agui("alice", "run_two", i);
	}
	add_agui("alice", "run_two", 5);
	gh_run_journal_end(GH_JOURNAL_AGUI, "alice", "run_two");
	memset(&g, 0, sizeof(g));
	T_EQ_INT(gh_run_journal_follow(GH_JOURNAL_NATIVE, "alice", "run_two", 0, collect, NULL, &g,
				       &e), GH_OK);
	T_EQ_INT(g.n, 5);
	T_EQ_INT(g.bad, 0);
	memset(&g, 0, sizeof(g));
	g.type = "AGUI";
	T_EQ_INT(gh_run_journal_follow(GH_JOURNAL_AGUI, "alice", "run_two", 2, collect, NULL, &g,
				       &e), GH_OK);
	T_EQ_INT(g.n, 4);
	T_EQ_INT(g.seq[0], 2);
	T_EQ_INT(g.bad, 0);
	/* a stream no one wrote is not found, though the run has another */
	T_EQ_INT(gh_run_journal_follow(GH_JOURNAL_AGUI, "alice", "run_replay", 0, collect, NULL,
				       &g, &e), GH_E_NOTFOUND);
}

static void test_opened_stream_is_its_owners_once(void)
{
	struct got g;
	struct gh_err e;

	T_EQ_INT(gh_run_journal_open(GH_JOURNAL_AGUI, "alice", "run_mine", &e), GH_OK);
	T_EQ_INT(gh_run_journal_open(GH_JOURNAL_AGUI, "alice", "run_mine", &e), GH_E_CONFLICT);
	/* another owner's run of the same id is another journal */
	T_EQ_INT(gh_run_journal_open(GH_JOURNAL_AGUI, "bob", "run_mine", &e), GH_OK);
	add_agui("alice", "run_mine", 0);
	add_agui("bob", "run_mine", 0);
	add_agui("bob", "run_mine", 1);
	gh_run_journal_end(GH_JOURNAL_AGUI, "alice", "run_mine");
	gh_run_journal_end(GH_JOURNAL_AGUI, "bob", "run_mine");
	memset(&g, 0, sizeof(g));
	g.type = "AGUI";
	T_EQ_INT(gh_run_journal_follow(GH_JOURNAL_AGUI, "alice", "run_mine", 0, collect, NULL, &g,
				       &e), GH_OK);
	T_EQ_INT(g.n, 1);
	memset(&g, 0, sizeof(g));
	g.type = "AGUI";
	T_EQ_INT(gh_run_journal_follow(GH_JOURNAL_AGUI, "bob", "run_mine", 0, collect, NULL, &g,
				       &e), GH_OK);
	T_EQ_INT(g.n, 2);
	T_EQ_INT(g.bad, 0);
	T_EQ_INT(gh_run_journal_follow(GH_JOURNAL_AGUI, "mallory", "run_mine", 0, collect, NULL,
				       &g, &e), GH_E_NOTFOUND);
	/* ended with events: still kept, so not taken again */
	T_EQ_INT(gh_run_journal_open(GH_JOURNAL_AGUI, "alice", "run_mine", &e), GH_E_CONFLICT);
	/* ended with none (refused before its first event): gone, free again */
	T_EQ_INT(gh_run_journal_open(GH_JOURNAL_AGUI, "alice", "run_none", &e), GH_OK);
	gh_run_journal_end(GH_JOURNAL_AGUI, "alice", "run_none");
	T_EQ_INT(gh_run_journal_follow(GH_JOURNAL_AGUI, "alice", "run_none", 0, collect, NULL, &g,
				       &e), GH_E_NOTFOUND);
	T_EQ_INT(gh_run_journal_open(GH_JOURNAL_AGUI, "alice", "run_none", &e), GH_OK);
	gh_run_journal_end(GH_JOURNAL_AGUI, "alice", "run_none");
}

/* A client's runId may be as long as any name (128 characters), longer
 * than an engine run id: it is kept whole. */
static void test_long_client_run_id(void)
{
	char run[GH_NAME_MAX + 2];
	struct got g;
	struct gh_err e;

	memset(run, 'r', GH_NAME_MAX);
	run[GH_NAME_MAX] = '\0';
	T_EQ_INT(gh_run_journal_open(GH_JOURNAL_AGUI, "alice", run, &e), GH_OK);
	add_agui("alice", run, 0);
	add_agui("alice", run, 1);
	gh_run_journal_end(GH_JOURNAL_AGUI, "alice", run);
	memset(&g, 0, sizeof(g));
	g.type = "AGUI";
	T_EQ_INT(gh_run_journal_follow(GH_JOURNAL_AGUI, "alice", run, 0, collect, NULL, &g, &e),
		 GH_OK);
	T_EQ_INT(g.n, 2);
	T_EQ_INT(g.bad, 0);
	run[GH_NAME_MAX] = 'r';
	run[GH_NAME_MAX + 1] = '\0';
	T_EQ_INT(gh_run_journal_open(GH_JOURNAL_AGUI, "alice", run, &e), GH_E_BADREQ);
}

/* An opened stream's run is held nowhere (gh_run_in_flight says no): its
 * reader still waits for gh_run_journal_end. */
static void *write_agui(void *ud)
{
	struct writer *w = ud;
	int i;

	for (i = 0; i < w->n; i++) {
		add_agui("alice", "run_agui_live", i);
		if (i % 50 == 0)
			usleep(1000);
	}
	gh_run_journal_end(GH_JOURNAL_AGUI, "alice", "run_agui_live");
	return NULL;
}

static void test_opened_stream_followed_until_ended(void)
{
	struct writer w = {500};
	struct got g;
	struct gh_err e;
	pthread_t th;

	T_EQ_INT(gh_run_journal_open(GH_JOURNAL_AGUI, "alice", "run_agui_live", &e), GH_OK);
	T_ASSERT(pthread_create(&th, NULL, write_agui, &w) == 0);
	memset(&g, 0, sizeof(g));
	g.type = "AGUI";
	T_EQ_INT(gh_run_journal_follow(GH_JOURNAL_AGUI, "alice", "run_agui_live", 0, collect, NULL,
				       &g, &e), GH_OK);
	pthread_join(th, NULL);
	T_EQ_INT(g.bad, 0);
	T_EQ_INT(g.n, 500);
}

/* ------------------------------------------ records coded against the last */

#define RT_EVENTS 3000

/* The events test_every_event_comes_back_whole writes, kept to compare. */
static struct {
	char type[24];
	char *data;
	size_t len;
} rt[RT_EVENTS];

static uint32_t rt_seed = 12345;

static uint32_t rt_rand(void)
{
	rt_seed = rt_seed * 1103515245u + 12345u;
	return rt_seed >> 8;
}

/* Event i's data: mostly the previous one with a few bytes changed, cut or
 * grown (a stream's deltas), sometimes empty, the same again, unrelated,
 * or longer than a record is coded against. */
static void rt_make(int i)
{
	size_t len, k, plen = i ? rt[i - 1].len : 0;
	const char *prev = i ? rt[i - 1].data : "";
	uint32_t kind = rt_rand() % 10;

	len = kind == 0 ? 0 : kind == 1 ? plen : kind == 2 ? 2000 + rt_rand() % 3000
	      : kind == 3 ? rt_rand() % 40 : plen + rt_rand() % 9;
	if (len > plen + 8 && kind != 2 && kind != 3)
		len = plen + 8;
	rt[i].data = malloc(len + 1);
	T_ASSERT(rt[i].data != NULL);
	for (k = 0; k < len; k++)
		rt[i].data[k] = kind >= 4 && k < plen ? prev[k] : (char)('a' + rt_rand() % 26);
	if (kind >= 4 && len)
		for (k = rt_rand() % 3; k > 0; k--)
			rt[i].data[rt_rand() % len] = (char)('A' + rt_rand() % 26);
	rt[i].data[len] = '\0';
	rt[i].len = len;
	/* 300 types in all: more than the journal interns, so some travel
	 * whole in their records */
	snprintf(rt[i].type, sizeof(rt[i].type), "type-%u", (unsigned)(i < 1500 ? i % 7 : i % 300));
}

struct rt_got {
	int64_t from, next;
	int bad;
};

static int rt_check(void *ud, int64_t seq, const char *type, const char *data, size_t len)
{
	struct rt_got *g = ud;

	if (seq != g->next || seq >= RT_EVENTS || strcmp(type, rt[seq].type) ||
	    len != rt[seq].len || memcmp(data, rt[seq].data, len) || data[len] != '\0')
		g->bad = 1;
	g->next = seq + 1;
	return 0;
}

static void test_every_event_comes_back_whole(void)
{
	static const int64_t froms[] = {0, 1, 2, 999, 1500, 2998, 2999};
	struct gh_err e;
	size_t i;

	gh_run_journal_reset();
	for (i = 0; i < RT_EVENTS; i++) {
		rt_make((int)i);
		/* two turns: the second's first record is coded whole */
		gh_run_journal_add(GH_JOURNAL_NATIVE, "alice", "run_rt", rt[i].type, rt[i].data,
				   rt[i].len, i == 1499 || i == RT_EVENTS - 1);
	}
	for (i = 0; i < sizeof(froms) / sizeof(froms[0]); i++) {
		struct rt_got g = {froms[i], froms[i], 0};

		T_EQ_INT(gh_run_journal_follow(GH_JOURNAL_NATIVE, "alice", "run_rt", froms[i],
					       rt_check, NULL, &g, &e), GH_OK);
		T_EQ_INT(g.bad, 0);
		T_EQ_INT(g.next, RT_EVENTS);
	}
	for (i = 0; i < RT_EVENTS; i++)
		free(rt[i].data);
	gh_run_journal_reset();
}

T_MAIN(T(test_replay_from_offset), T(test_other_owner_and_unknown_run),
       T(test_follow_while_written), T(test_streams_of_a_run_do_not_mix),
       T(test_opened_stream_is_its_owners_once), T(test_opened_stream_followed_until_ended),
       T(test_long_client_run_id), T(test_too_many_events_are_reported),
       T(test_every_event_comes_back_whole))
