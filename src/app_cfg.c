/*
 * app_cfg.c - generations of the running config (app.h).
 *
 * The current generation is a pointer under app->gen_mu; acquiring takes
 * the mutex only long enough to load the pointer and add a reference, so
 * a reload's swap can never free a generation between the load and the
 * increment. Releases are lock-free (atomic decrement); the last one frees
 * the generation on the releasing thread. A thread pins the generation
 * it runs under in a thread-local pointer, which gh_app_cfg reads; an
 * unpinned read loads the current pointer (atomically, no reference).
 */
#include "app.h"

#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "mcp.h"

static _Thread_local struct gh_cfg_gen *pinned;

int gh_app_cfg_init(struct gh_app *app, const struct gh_config *cfg, struct gh_mcp *mcp,
		    const char *digest)
{
	struct gh_cfg_gen *g = calloc(1, sizeof(*g));

	if (!g)
		return -1;
	atomic_init(&g->refs, 1);
	g->n = 1;
	g->cfg = cfg;
	g->mcp = g->owned_mcp = mcp;
	snprintf(g->digest, sizeof(g->digest), "%s", digest ? digest : "");
	pthread_mutex_init(&app->gen_mu, NULL);
	atomic_store(&app->gen, g);
	app->gen_inited = 1;
	return 0;
}

void gh_app_cfg_fini(struct gh_app *app)
{
	struct gh_cfg_gen *g;

	if (!app->gen_inited)
		return;
	pthread_mutex_lock(&app->gen_mu);
	g = atomic_exchange(&app->gen, NULL);
	pthread_mutex_unlock(&app->gen_mu);
	gh_app_cfg_release(g);
	pthread_mutex_destroy(&app->gen_mu);
	app->gen_inited = 0;
}

struct gh_cfg_gen *gh_app_cfg_acquire(struct gh_app *app)
{
	struct gh_cfg_gen *g;

	if (!app->gen_inited)
		return NULL;
	pthread_mutex_lock(&app->gen_mu);
	g = atomic_load(&app->gen);
	if (g)
		atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
	pthread_mutex_unlock(&app->gen_mu);
	return g;
}

void gh_app_cfg_release(struct gh_cfg_gen *g)
{
	if (!g || atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) != 1)
		return;
	/* the last holder: nothing can reach g any more */
	gh_debug("config generation %llu released%s", (unsigned long long)g->n,
		 g->owned_mcp ? "; stopping its upstream MCP servers" : "");
	gh_mcp_stop(g->owned_mcp);
	gh_app_cfg_release(g->mcp_from);
	gh_config_free(g->owned_cfg);
	free(g);
}

void gh_app_cfg_swap(struct gh_app *app, struct gh_cfg_gen *g)
{
	struct gh_cfg_gen *old;

	pthread_mutex_lock(&app->gen_mu);
	old = atomic_exchange(&app->gen, g);
	pthread_mutex_unlock(&app->gen_mu);
	gh_app_cfg_release(old);
}

struct gh_cfg_gen *gh_app_cfg_enter(struct gh_cfg_gen *g)
{
	struct gh_cfg_gen *prev = pinned;

	pinned = g;
	return prev;
}

void gh_app_cfg_leave(struct gh_cfg_gen *prev)
{
	pinned = prev;
}

const struct gh_config *gh_app_cfg(const struct gh_app *app)
{
	struct gh_cfg_gen *g;

	if (pinned)
		return pinned->cfg;
	g = app->gen_inited ? atomic_load(&app->gen) : NULL;
	return g ? g->cfg : app->boot_cfg;
}

struct gh_mcp *gh_app_mcp(const struct gh_app *app)
{
	struct gh_cfg_gen *g;

	if (pinned)
		return pinned->mcp;
	g = app->gen_inited ? atomic_load(&app->gen) : NULL;
	return g ? g->mcp : app->boot_mcp;
}
