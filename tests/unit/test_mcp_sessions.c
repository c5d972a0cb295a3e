/*
 * test_mcp_sessions.c - MCP sessions at /mcp: ids are unguessable and
 * bound to their key, each key holds at most per_key sessions (its least
 * recently used one makes room), idle ones end, and a revoked key's
 * sessions end together; many threads opening and using sessions at once
 * (for -fsanitize=thread).
 */
#include "mcp_sessions.h"

#include <pthread.h>
#include <unistd.h>

#include "t.h"

static void test_open_get_end(void)
{
	struct gh_mcp_sessions *s = gh_mcp_sessions_new(4, 60000);
	struct gh_mcp_session a, b, got;
	struct gh_err e;

	T_ASSERT(s);
	T_EQ_INT(gh_mcp_sessions_open(s, "key_a", "assistant", "2025-11-25", 1, &a, &e), GH_OK);
	T_EQ_INT(gh_mcp_sessions_open(s, "key_a", "assistant", "2025-06-18", 0, &b, &e), GH_OK);
	T_EQ_INT(strlen(a.id), 5 + 64);
	T_ASSERT(strcmp(a.id, b.id) != 0);
	T_EQ_INT(gh_mcp_sessions_get(s, a.id, "key_a", &got), 0);
	T_EQ_STR(got.version, "2025-11-25");
	T_EQ_INT(got.elicit_form, 1);
	/* another key's session is no session */
	T_EQ_INT(gh_mcp_sessions_get(s, a.id, "key_b", &got), -1);
	T_EQ_INT(gh_mcp_sessions_end(s, a.id, "key_b"), -1);
	/* a prefix or a longer id is not the id */
	{
		char shorter[GH_MCP_SID_MAX];

		memcpy(shorter, a.id, strlen(a.id) - 1);
		shorter[strlen(a.id) - 1] = '\0';
		T_EQ_INT(gh_mcp_sessions_get(s, shorter, "key_a", NULL), -1);
	}
	T_EQ_INT(gh_mcp_sessions_end(s, a.id, "key_a"), 0);
	T_EQ_INT(gh_mcp_sessions_get(s, a.id, "key_a", NULL), -1);
	T_EQ_INT(gh_mcp_sessions_end(s, a.id, "key_a"), -1);
	T_EQ_INT(gh_mcp_sessions_count(s), 1);
	gh_mcp_sessions_free(s);
}

static void test_per_key_cap_drops_the_least_recently_used(void)
{
	struct gh_mcp_sessions *s = gh_mcp_sessions_new(2, 60000);
	struct gh_mcp_session a, b, c, other;
	struct gh_err e;

	T_EQ_INT(gh_mcp_sessions_open(s, "k1", "x", "2025-11-25", 0, &a, &e), GH_OK);
	T_EQ_INT(gh_mcp_sessions_open(s, "k1", "x", "2025-11-25", 0, &b, &e), GH_OK);
	T_EQ_INT(gh_mcp_sessions_open(s, "k2", "x", "2025-11-25", 0, &other, &e), GH_OK);
	usleep(2000);
	T_EQ_INT(gh_mcp_sessions_get(s, a.id, "k1", NULL), 0); /* b is now the older */
	T_EQ_INT(gh_mcp_sessions_open(s, "k1", "x", "2025-11-25", 0, &c, &e), GH_OK);
	T_EQ_INT(gh_mcp_sessions_get(s, b.id, "k1", NULL), -1);
	T_EQ_INT(gh_mcp_sessions_get(s, a.id, "k1", NULL), 0);
	T_EQ_INT(gh_mcp_sessions_get(s, c.id, "k1", NULL), 0);
	/* the other key's session was not touched */
	T_EQ_INT(gh_mcp_sessions_get(s, other.id, "k2", NULL), 0);
	T_EQ_INT(gh_mcp_sessions_end_key(s, "k1"), 2);
	T_EQ_INT(gh_mcp_sessions_count(s), 1);
	gh_mcp_sessions_free(s);
}

static void test_idle_sessions_end(void)
{
	struct gh_mcp_sessions *s = gh_mcp_sessions_new(4, 30);
	struct gh_mcp_session a;
	struct gh_err e;

	T_EQ_INT(gh_mcp_sessions_open(s, "k", "x", "2025-11-25", 0, &a, &e), GH_OK);
	usleep(80000);
	T_EQ_INT(gh_mcp_sessions_get(s, a.id, "k", NULL), -1);
	T_EQ_INT(gh_mcp_sessions_count(s), 0);
	gh_mcp_sessions_free(s);
	gh_mcp_sessions_free(NULL);
}

static struct gh_mcp_sessions *shared;

static void *worker(void *arg)
{
	char key[16];
	int i;

	snprintf(key, sizeof(key), "k%d", (int)(intptr_t)arg % 3);
	for (i = 0; i < 300; i++) {
		struct gh_mcp_session x;
		struct gh_err e;

		if (gh_mcp_sessions_open(shared, key, "x", "2025-11-25", 0, &x, &e) != GH_OK)
			continue;
		gh_mcp_sessions_get(shared, x.id, key, NULL);
		gh_mcp_sessions_initialized(shared, x.id);
		if (i % 3 == 0)
			gh_mcp_sessions_end(shared, x.id, key);
		if (i % 50 == 0)
			gh_mcp_sessions_end_key(shared, key);
	}
	return NULL;
}

static void test_threads(void)
{
	pthread_t t[6];
	int i;

	shared = gh_mcp_sessions_new(8, 60000);
	for (i = 0; i < 6; i++)
		pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
	for (i = 0; i < 6; i++)
		pthread_join(t[i], NULL);
	T_ASSERT(gh_mcp_sessions_count(shared) <= 3 * 8);
	gh_mcp_sessions_free(shared);
}

T_MAIN(T(test_open_get_end), T(test_per_key_cap_drops_the_least_recently_used),
       T(test_idle_sessions_end), T(test_threads))
