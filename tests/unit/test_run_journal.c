/*
 * test_run_journal.c - a run's event journal: a reader gets every event
 * from its offset on, once and in order, also while a writer on another
 * thread is still adding them (the test to run under -fsanitize=thread);
 * a turn's end ends the reading; another owner's run is not found; events
 * past the per-run cap are reported, not skipped silently.
 */
#include "run_journal.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "run.h"
#include "t.h"

struct got {
	int64_t seq[4096];
	int n;
	int bad;       /* an event out of order or with the wrong text */
	int stop_at;   /* fn stops after this many (0: never) */
};

static int collect(void *ud, int64_t seq, const char *type, const char *data, size_t len)
{
	struct got *g = ud;
	char want[32];

	snprintf(want, sizeof(want), "{\"n\":%lld}", (long long)seq);
	if (strcmp(type, "text-delta") || len != strlen(want) || memcmp(data, want, len) ||
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
	gh_run_journal_add("alice", run, "text-delta", data, strlen(data), ends);
}

static void test_replay_from_offset(void)
{
	struct got g;
	struct gh_err e;
	int i;

	memset(&g, 0, sizeof(g));
	for (i = 0; i < 10; i++)
		add_n("run_replay", i, i == 9);
	T_EQ_INT(gh_run_journal_follow("alice", "run_replay", 4, collect, NULL, &g, &e), GH_OK);
	T_EQ_INT(g.n, 6);
	T_EQ_INT(g.seq[0], 4);
	T_EQ_INT(g.bad, 0);
	memset(&g, 0, sizeof(g));
	T_EQ_INT(gh_run_journal_follow(NULL, "run_replay", 0, collect, NULL, &g, &e), GH_OK);
	T_EQ_INT(g.n, 10);
	/* an offset past the end of an ended turn: nothing, at once */
	memset(&g, 0, sizeof(g));
	T_EQ_INT(gh_run_journal_follow("alice", "run_replay", 50, collect, NULL, &g, &e), GH_OK);
	T_EQ_INT(g.n, 0);
	/* the reader may stop */
	memset(&g, 0, sizeof(g));
	g.stop_at = 3;
	T_EQ_INT(gh_run_journal_follow("alice", "run_replay", 0, collect, NULL, &g, &e), GH_OK);
	T_EQ_INT(g.n, 3);
}

static void test_other_owner_and_unknown_run(void)
{
	struct got g;
	struct gh_err e;

	memset(&g, 0, sizeof(g));
	add_n("run_owned", 0, 1);
	T_EQ_INT(gh_run_journal_follow("mallory", "run_owned", 0, collect, NULL, &g, &e),
		 GH_E_NOTFOUND);
	T_EQ_INT(gh_run_journal_follow("alice", "run_nothing", 0, collect, NULL, &g, &e),
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
		enum gh_code rc = gh_run_journal_follow("alice", "run_live", 0, collect, NULL, &g,
						       &e);

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
		gh_run_journal_add("alice", "run_big", "text-delta", big, sizeof(big) - 1, i == 19);
	memset(&g, 0, sizeof(g));
	T_EQ_INT(gh_run_journal_follow("alice", "run_big", 19, collect, NULL, &g, &e),
		 GH_E_CONFLICT);
	T_CONTAINS(e.msg, "too many");
	gh_run_journal_reset();
	T_EQ_INT(gh_run_journal_follow("alice", "run_big", 0, collect, NULL, &g, &e),
		 GH_E_NOTFOUND);
}

T_MAIN(T(test_replay_from_offset), T(test_other_owner_and_unknown_run),
       T(test_follow_while_written), T(test_too_many_events_are_reported))
