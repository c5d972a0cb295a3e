/*
 * test_app_cfg.c - config generations (app_cfg.c) and reload (reload.c):
 * references keep an old generation alive after a swap, a pinned thread
 * reads its generation, and threads that acquire and read while another
 * swaps generations never see a freed one (ASan, and TSan via -L tsan).
 * gh_reload on a read-only app (no audit rows, no MCP servers): applied,
 * refused, restart-only settings kept.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../src/app.h"
#include "../../src/config.h"
#include "../../src/reload.h"
#include "../../src/util.h"
#include "t.h"

static struct gh_config *conf(const char *policy_agent)
{
	char text[512];
	struct gh_config *c = NULL;
	struct gh_err e;

	snprintf(text, sizeof(text),
		 "{\"providers\":{\"m\":{\"type\":\"mock\"}},\"agents\":{\"a\":{\"provider\":"
		 "\"m\"}},\"policies\":{\"default\":{\"agents\":[\"%s\"]}}}",
		 policy_agent);
	if (gh_config_parse("t.json", text, strlen(text), &c, &e) != GH_OK)
		fprintf(stderr, "%s\n", e.msg);
	return c;
}

static struct gh_cfg_gen *gen_of(struct gh_config *c, uint64_t n)
{
	struct gh_cfg_gen *g = calloc(1, sizeof(*g));

	atomic_init(&g->refs, 1);
	g->n = n;
	g->cfg = g->owned_cfg = c;
	return g;
}

static void test_references_outlive_a_swap(void)
{
	struct gh_config *c0 = conf("a"), *c1 = conf("b");
	struct gh_app app;
	struct gh_cfg_gen *held, *prev, *now;

	T_ASSERT(c0 && c1);
	memset(&app, 0, sizeof(app));
	app.boot_cfg = c0;
	T_ASSERT(gh_app_cfg(&app) == c0); /* no generation yet: boot_cfg */
	T_EQ_INT(gh_app_cfg_init(&app, c0, NULL, "d0"), 0);
	held = gh_app_cfg_acquire(&app);
	T_ASSERT(held && held->cfg == c0);
	T_EQ_INT((int)atomic_load(&held->refs), 2);
	prev = gh_app_cfg_enter(held);
	gh_app_cfg_swap(&app, gen_of(c1, 2));
	/* pinned: still the old one, alive because of our reference */
	T_ASSERT(gh_app_cfg(&app) == c0);
	T_EQ_INT((int)atomic_load(&held->refs), 1);
	T_EQ_STR(gh_config_policy(gh_app_cfg(&app), "default")->agents.v[0], "a");
	gh_app_cfg_leave(prev);
	/* unpinned: the current one */
	T_ASSERT(gh_app_cfg(&app) == c1);
	now = gh_app_cfg_acquire(&app);
	T_ASSERT(now->n == 2);
	gh_app_cfg_release(now);
	gh_app_cfg_release(held); /* the last reference: c0 is borrowed, not freed */
	T_EQ_STR(c0->policies[0].agents.v[0], "a");
	gh_app_cfg_fini(&app);    /* frees the generation owning c1 */
	T_ASSERT(gh_app_cfg(&app) == c0);
	gh_app_cfg_release(NULL);
	gh_config_free(c0);
}

/* ------------------------------------------ threads against a swapper */

#define READERS 4
#define SWAPS 300

struct race {
	struct gh_app *app;
	_Atomic int stop;
};

struct reader_arg {
	struct race *r;
	long reads;  /* how many, or -1 when one saw a wrong generation */
};

static void *reader(void *p)
{
	struct reader_arg *a = p;
	struct race *r = a->r;
	long n = 0, bad = 0;

	while (!atomic_load(&r->stop)) {
		struct gh_cfg_gen *g = gh_app_cfg_acquire(r->app), *prev = gh_app_cfg_enter(g);
		const struct gh_config *c = gh_app_cfg(r->app);
		const struct gh_policy_conf *pol = gh_config_policy(c, "default");

		/* every field of the pinned generation stays as it was */
		if (!pol || pol->agents.n != 1 || c != g->cfg ||
		    strcmp(pol->agents.v[0], g->n % 2 ? "odd" : "even"))
			bad++;
		gh_app_cfg_leave(prev);
		gh_app_cfg_release(g);
		n++;
	}
	a->reads = bad ? -1 : n;
	return NULL;
}

static void test_threads_read_while_generations_swap(void)
{
	struct gh_config *boot = conf("odd");
	struct gh_app app;
	struct race r;
	struct reader_arg ra[READERS];
	pthread_t t[READERS];
	int i;

	memset(&app, 0, sizeof(app));
	app.boot_cfg = boot;
	T_EQ_INT(gh_app_cfg_init(&app, boot, NULL, ""), 0);
	r.app = &app;
	atomic_init(&r.stop, 0);
	for (i = 0; i < READERS; i++) {
		ra[i].r = &r;
		ra[i].reads = 0;
		T_EQ_INT(pthread_create(&t[i], NULL, reader, &ra[i]), 0);
	}
	for (i = 2; i < SWAPS + 2; i++) {
		struct gh_config *c = conf(i % 2 ? "odd" : "even");

		T_ASSERT(c);
		gh_app_cfg_swap(&app, gen_of(c, (uint64_t)i));
		usleep(200);
	}
	atomic_store(&r.stop, 1);
	for (i = 0; i < READERS; i++)
		pthread_join(t[i], NULL);
	for (i = 0; i < READERS; i++)
		T_ASSERT(ra[i].reads > 0);
	gh_app_cfg_fini(&app);
	gh_config_free(boot);
}

/* What one acquire + pin + release costs, uncontended and with a second
 * thread doing the same (printed, never asserted: tests assert no
 * timings). */
static void test_acquire_cost(void)
{
	struct gh_config *boot = conf("odd");
	struct gh_app app;
	int64_t t0, t1;
	long i, n = 200000;

	memset(&app, 0, sizeof(app));
	T_EQ_INT(gh_app_cfg_init(&app, boot, NULL, ""), 0);
	t0 = gh_mono_ns();
	for (i = 0; i < n; i++) {
		struct gh_cfg_gen *g = gh_app_cfg_acquire(&app), *prev = gh_app_cfg_enter(g);

		gh_app_cfg_leave(prev);
		gh_app_cfg_release(g);
	}
	t1 = gh_mono_ns();
	printf("  acquire+release: %.1f ns each (uncontended)\n", (double)(t1 - t0) / (double)n);
	gh_app_cfg_fini(&app);
	gh_config_free(boot);
}

/* ------------------------------------------------------------- reload */

static char dir[64];

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	fputs(text, f);
	fclose(f);
}

static void test_reload_applies_refuses_and_keeps_restart_settings(void)
{
	char path[128];
	const char *v1 =
		"{\"server\":{\"listen\":\"127.0.0.1:0\"},\"database\":{\"path\":\"a.db\"},"
		"\"providers\":{\"m\":{\"type\":\"mock\",\"api_key\":\"sk-unit-secret\"}},"
		"\"agents\":{\"a\":{\"provider\":\"m\"}},"
		"\"policies\":{\"default\":{\"agents\":[\"a\"]}}}";
	const char *v2 =
		"{\"server\":{\"listen\":\"127.0.0.1:9\",\"threads\":64},"
		"\"database\":{\"path\":\"b.db\"},\"log\":{\"level\":\"warn\"},"
		"\"providers\":{\"m\":{\"type\":\"mock\",\"api_key\":\"sk-unit-secret\"}},"
		"\"agents\":{\"a\":{\"provider\":\"m\"},\"b\":{\"provider\":\"m\"}},"
		"\"policies\":{\"default\":{\"agents\":[\"b\"]}}}";
	struct gh_config *boot = NULL;
	struct gh_app app;
	struct gh_reload_opts o = {"api", "key:k1", NULL};
	struct gh_err e;
	cJSON *res = NULL;
	char *txt;
	const struct gh_config *now;

	snprintf(dir, sizeof(dir), "/tmp/gh-unit-reload-XXXXXX");
	T_ASSERT(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/c.json", dir);
	write_file(path, v1);
	T_EQ_INT(gh_config_load(path, &boot, &e), GH_OK);
	memset(&app, 0, sizeof(app));
	app.read_only = 1; /* no store: nothing audited, no MCP servers */
	app.boot_cfg = boot;
	{
		char d[65];

		gh_reload_digest_file(path, d);
		T_EQ_INT((int)strlen(d), 64);
		T_EQ_INT(gh_app_cfg_init(&app, boot, NULL, d), 0);
	}
	/* the running text: nothing installed */
	T_EQ_INT(gh_reload(&app, &o, &res, &e), GH_OK);
	T_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(res, "changed")), 0);
	T_EQ_INT((int)cJSON_GetObjectItem(res, "generation")->valuedouble, 1);
	cJSON_Delete(res);

	write_file(path, v2);
	T_EQ_INT(gh_reload(&app, &o, &res, &e), GH_OK);
	txt = cJSON_PrintUnformatted(res);
	T_CONTAINS(txt, "\"ok\":true");
	T_CONTAINS(txt, "\"generation\":2");
	T_CONTAINS(txt, "\"changed\":[\"server\",\"database\",\"agents.b\",\"policies.default\","
			"\"log\"]");
	T_CONTAINS(txt, "\"restart_required\":[\"server.listen\",\"database.path\","
			"\"server.threads\"]");
	T_ASSERT(!strstr(txt, "sk-unit-secret"));
	free(txt);
	cJSON_Delete(res);
	now = gh_app_cfg(&app);
	T_ASSERT(now != boot);
	/* live: the policy; kept: the listener, the database, the threads */
	T_EQ_STR(gh_config_policy(now, "default")->agents.v[0], "b");
	T_EQ_STR(now->server.listen, "127.0.0.1:0");
	T_EQ_STR(now->database.path, "a.db");
	T_EQ_INT((int)now->server.threads, 256);

	/* refused: the running generation stays */
	write_file(path, "{\"agents\":{}}");
	T_EQ_INT(gh_reload(&app, &o, &res, &e), GH_E_BADREQ);
	T_ASSERT(res == NULL);
	T_CONTAINS(e.msg, "at least one agent");
	T_ASSERT(gh_app_cfg(&app) == now);
	unlink(path);
	T_EQ_INT(gh_reload(&app, &o, &res, &e), GH_E_BADREQ);
	T_CONTAINS(e.msg, "cannot open");
	T_ASSERT(gh_app_cfg(&app) == now);

	gh_app_cfg_fini(&app);
	gh_config_free(boot);
	rmdir(dir);
}

T_MAIN(T(test_references_outlive_a_swap), T(test_threads_read_while_generations_swap),
       T(test_acquire_cost), T(test_reload_applies_refuses_and_keeps_restart_settings))
