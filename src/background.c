/*
 * background.c - resumer and maintenance threads; see background.h.
 */
#include "background.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "approvals.h"
#include "log.h"
#include "ratelimit.h"
#include "replica.h"
#include "run.h"
#include "upstream.h"
#include "util.h"

#define RESUMERS 2
#define QUEUE_MAX 4096
#define RETRIES 50

struct item {
	char run_id[GH_ID_MAX];
	int attempts;
	int64_t not_before_ms;
};

struct gh_bg {
	struct gh_app *app;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct item q[QUEUE_MAX];
	size_t n;
	char busy[RESUMERS][GH_ID_MAX];   /* runs being resumed right now */
	int stopping;
	pthread_t resumers[RESUMERS];
	int nresumers;
	pthread_t maint;
	int maint_started;
};

static void push(struct gh_bg *bg, const char *run_id, int attempts, int64_t not_before)
{
	size_t i;

	for (i = 0; i < bg->n; i++)
		if (!strcmp(bg->q[i].run_id, run_id))
			return;
	if (bg->n == QUEUE_MAX) {
		gh_warn("background: resume queue full; run %s waits for the next start", run_id);
		return;
	}
	gh_strlcpy(bg->q[bg->n].run_id, run_id, GH_ID_MAX);
	bg->q[bg->n].attempts = attempts;
	bg->q[bg->n].not_before_ms = not_before;
	bg->n++;
	pthread_cond_broadcast(&bg->cv);
}

void gh_bg_resume(struct gh_bg *bg, const char *run_id)
{
	if (!bg)
		return;
	pthread_mutex_lock(&bg->mu);
	if (!bg->stopping)
		push(bg, run_id, 0, 0);
	pthread_mutex_unlock(&bg->mu);
}

/* Takes the first due item whose run no other resumer holds. */
static int take(struct gh_bg *bg, int slot, struct item *out, int64_t *wait_ms)
{
	int64_t now = gh_now_ms(), soonest = -1;
	size_t i;
	int k;

	for (i = 0; i < bg->n; i++) {
		int held = 0;

		for (k = 0; k < RESUMERS; k++)
			held |= !strcmp(bg->busy[k], bg->q[i].run_id);
		if (held)
			continue;
		if (bg->q[i].not_before_ms > now) {
			int64_t w = bg->q[i].not_before_ms - now;

			if (soonest < 0 || w < soonest)
				soonest = w;
			continue;
		}
		*out = bg->q[i];
		bg->q[i] = bg->q[--bg->n];
		gh_strlcpy(bg->busy[slot], out->run_id, GH_ID_MAX);
		return 1;
	}
	*wait_ms = soonest < 0 ? 1000 : soonest;
	return 0;
}

struct resumer_arg {
	struct gh_bg *bg;
	int slot;
};

static void timed_wait(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t ms)
{
	struct timespec ts;

	gh_deadline(CLOCK_REALTIME, ms, &ts);
	pthread_cond_timedwait(cv, mu, &ts);
}

/* 1 when another request holds the run (it is running): try again. */
static int busy(struct gh_app *app, const char *run_id)
{
	struct gh_run_view v;
	struct gh_err e;
	int running = 0;

	if (gh_run_view_get(app, NULL, run_id, &v, &e) == GH_OK) {
		running = v.status == GH_RUN_RUNNING;
		gh_run_view_clear(&v);
	}
	return running;
}

static void *resumer_main(void *p)
{
	struct resumer_arg *ra = p;
	struct gh_bg *bg = ra->bg;
	int slot = ra->slot;

	free(ra);
	pthread_mutex_lock(&bg->mu);
	while (!bg->stopping) {
		struct item it;
		int64_t wait_ms = 1000;
		struct gh_run_result res;
		struct gh_err e;
		enum gh_code rc;
		int retry;

		if (!take(bg, slot, &it, &wait_ms)) {
			timed_wait(&bg->cv, &bg->mu, wait_ms);
			continue;
		}
		pthread_mutex_unlock(&bg->mu);
		{
			/* a resumed run takes the config current now, not the one
			 * it was suspended under */
			struct gh_cfg_gen *g = gh_app_cfg_acquire(bg->app), *prev = gh_app_cfg_enter(g);

			rc = gh_run_resume(bg->app, it.run_id, NULL, &res, &e);
			gh_app_cfg_leave(prev);
			gh_app_cfg_release(g);
		}
		if (rc == GH_OK) {
			gh_info("background: run %s resumed: %s", it.run_id,
				gh_run_status_name(res.status));
			gh_run_result_clear(&res);
		}
		retry = rc == GH_E_CONFLICT && it.attempts < RETRIES && busy(bg->app, it.run_id);
		pthread_mutex_lock(&bg->mu);
		bg->busy[slot][0] = '\0';
		if (retry) {
			/* another request holds the run; try again shortly */
			push(bg, it.run_id, it.attempts + 1, gh_now_ms() + 200);
		} else if (rc != GH_OK && rc != GH_E_CONFLICT) {
			gh_warn("background: resuming run %s failed: %s", it.run_id, e.msg);
		}
	}
	pthread_mutex_unlock(&bg->mu);
	return NULL;
}

struct snap {
	char **keys;
	int64_t *tats;
	size_t n, cap;
};

static int snap_cb(void *ud, const char *key, int64_t tat)
{
	struct snap *s = ud;

	if (s->n == s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 256;
		char **k = realloc(s->keys, nc * sizeof(*k));
		int64_t *t;

		if (!k)
			return 1;
		s->keys = k;
		t = realloc(s->tats, nc * sizeof(*t));
		if (!t)
			return 1;
		s->tats = t;
		s->cap = nc;
	}
	if (!(s->keys[s->n] = strdup(key)))
		return 1;
	s->tats[s->n++] = tat;
	return 0;
}

void gh_bg_snapshot_ratelimits(struct gh_app *app)
{
	struct snap s = {0};
	struct gh_err e;
	size_t i;

	/* replicas keep their limits in the database itself */
	if (!app->rl || app->replica)
		return;
	gh_rl_snapshot(app->rl, gh_now_ms(), snap_cb, &s);
	if (gh_store_ratelimit_save(app->store, (const char *const *)s.keys, s.tats, s.n, &e) !=
	    GH_OK)
		gh_warn("rate limits: snapshot not saved: %s", e.msg);
	for (i = 0; i < s.n; i++)
		free(s.keys[i]);
	free(s.keys);
	free(s.tats);
}

static void resume_cb(void *ud, const char *run_id)
{
	gh_bg_resume(ud, run_id);
}

/* Runs whose client tool results are overdue end as expired, on the same
 * one-second beat as approvals (a deadline is stored with its run, so it
 * holds across restarts). */
static void expire_runs(struct gh_app *app)
{
	char ids[64][48];
	size_t n = 0, i;
	struct gh_err e;

	if (gh_store_runs_due(app->store, gh_now_ms(), ids, GH_ARRAY_LEN(ids), &n, &e) != GH_OK) {
		gh_warn("runs: expiry failed: %s", e.msg);
		return;
	}
	for (i = 0; i < n; i++)
		if (gh_run_expire(app, ids[i], &e) != GH_OK && e.code != GH_E_CONFLICT)
			gh_warn("runs: run %s could not be expired: %s", ids[i], e.msg);
}

/* Replicas (PostgreSQL), on the leader: what a replica that died left.
 * A replica is taken for gone when its presence lock was free at two
 * sweeps at least SWEEP_MS apart: a live replica whose connection broke
 * (the database restarted) takes its lock again within about a second. */
#define SWEEP_MS 2000
#define STALLED_MS 5000

struct sweep {
	int64_t last_ms;
	int64_t gone[64];
	size_t ngone;
};

static int was_gone(const struct sweep *sw, int64_t id)
{
	size_t i;

	for (i = 0; i < sw->ngone; i++)
		if (sw->gone[i] == id)
			return 1;
	return 0;
}

static void sweep_replicas(struct gh_app *app, struct gh_bg *bg, struct sweep *sw, int64_t now)
{
	int64_t gone[GH_ARRAY_LEN(sw->gone)];
	size_t n = 0, i;
	struct gh_err e;

	if (!app->replica || now - sw->last_ms < SWEEP_MS)
		return;
	sw->last_ms = now;
	if (gh_store_replicas_gone(app->store, gone, GH_ARRAY_LEN(gone), &n, &e) != GH_OK) {
		gh_warn("replicas: %s", e.msg);
		return;
	}
	for (i = 0; i < n; i++) {
		int runs = 0, calls = 0;

		if (!was_gone(sw, gone[i]))
			continue;
		if (gh_store_replica_recover(app->store, gone[i], resume_cb, bg, &runs, &calls, &e) !=
		    GH_OK) {
			gh_warn("replicas: recovering the work of replica %lld: %s",
				(long long)gone[i], e.msg);
			continue;
		}
		gh_warn("replicas: replica %lld is gone: %d of its runs resume here, %d of its "
			"calls were cut off (recorded as interrupted)",
			(long long)gone[i], runs, calls);
	}
	memcpy(sw->gone, gone, n * sizeof(gone[0]));
	sw->ngone = n;
	/* approvals decided on a replica that died before it resumed */
	if (gh_store_runs_stalled(app->store, now - STALLED_MS, 64, resume_cb, bg, &e) != GH_OK)
		gh_warn("replicas: %s", e.msg);
}

/* Closes this process's upstream connections that no request used for
 * server.upstream_idle_ms (under the config current now: a reload applies
 * at the next round). */
static void idle_upstreams(struct gh_app *app)
{
	struct gh_cfg_gen *g = gh_app_cfg_acquire(app), *prev = gh_app_cfg_enter(g);
	int64_t ms = gh_app_cfg(app)->server.upstream_idle_ms;

	gh_app_cfg_leave(prev);
	gh_app_cfg_release(g);
	gh_upstream_idle_close(ms);
}

static void *maint_main(void *p)
{
	struct gh_bg *bg = p;
	struct gh_app *app = bg->app;
	int64_t last_snap = gh_now_ms(), last_prune = 0, last_analyze = gh_now_ms();
	int64_t last_nprune = 0;
	struct sweep sw;

	memset(&sw, 0, sizeof(sw));

	pthread_mutex_lock(&bg->mu);
	while (!bg->stopping) {
		int64_t now, keep_ms, prune_every, nkeep_ms;
		struct gh_err e;
		int n = 0;
		struct gh_cfg_gen *g, *prev;

		timed_wait(&bg->cv, &bg->mu, 1000);
		if (bg->stopping)
			break;
		pthread_mutex_unlock(&bg->mu);
		idle_upstreams(app);
		/* this process's own calls whose end could not be written */
		if (gh_store_audit_close_unclosed(app->store, &n, &e) == GH_OK && n)
			gh_warn("audit: %d calls whose end could not be written are recorded as "
				"interrupted", n);
		if (!gh_replica_leads(app)) {
			/* another replica does this round's work */
			pthread_mutex_lock(&bg->mu);
			continue;
		}
		/* each round under the config current then */
		g = gh_app_cfg_acquire(app);
		prev = gh_app_cfg_enter(g);
		/* retention: prune hourly, or more often for short retention windows */
		keep_ms = gh_app_cfg(app)->audit.retention_seconds > 0
				  ? gh_app_cfg(app)->audit.retention_seconds * 1000
				  : gh_app_cfg(app)->audit.retention_days * 86400000LL;
		prune_every = keep_ms / 4 < 3600000 ? keep_ms / 4 : 3600000;
		now = gh_now_ms();
		if (gh_approvals_expire(app, resume_cb, bg, &n, &e) != GH_OK)
			gh_warn("approvals: expiry failed: %s", e.msg);
		expire_runs(app);
		sweep_replicas(app, bg, &sw, now);
		if (now - last_snap >= 30000) {
			gh_bg_snapshot_ratelimits(app);
			last_snap = now;
		}
		if (now - last_analyze >= 3600000) {
			if (gh_store_analyze(app->store, &e) != GH_OK)
				gh_warn("database: statistics not refreshed: %s", e.msg);
			last_analyze = now;
		}
		if (keep_ms > 0 && app->has_signer && now - last_prune >= prune_every) {
			int64_t deleted = 0;

			if (gh_store_audit_prune(app->store, now - keep_ms, &deleted, &e) != GH_OK)
				gh_warn("audit: retention pruning failed: %s", e.msg);
			last_prune = now;
		}
		/* finished notification deliveries, on the same terms; pending
		 * ones are never pruned */
		nkeep_ms = gh_app_cfg(app)->notifications.retention_seconds > 0
				   ? gh_app_cfg(app)->notifications.retention_seconds * 1000
				   : gh_app_cfg(app)->notifications.retention_days * 86400000LL;
		if (nkeep_ms > 0 &&
		    now - last_nprune >= (nkeep_ms / 4 < 3600000 ? nkeep_ms / 4 : 3600000)) {
			if (gh_store_notify_prune(app->store, now - nkeep_ms, NULL, &e) != GH_OK)
				gh_warn("notifications: retention pruning failed: %s", e.msg);
			last_nprune = now;
		}
		gh_app_cfg_leave(prev);
		gh_app_cfg_release(g);
		pthread_mutex_lock(&bg->mu);
	}
	pthread_mutex_unlock(&bg->mu);
	return NULL;
}

static int queue_cb(void *ud, const char *run_id)
{
	struct gh_bg *bg = ud;

	push(bg, run_id, 0, 0);
	return 0;
}

enum gh_code gh_bg_start(struct gh_app *app, struct gh_bg **out, struct gh_err *e)
{
	struct gh_bg *bg = calloc(1, sizeof(*bg));
	int i;

	*out = NULL;
	if (!bg)
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	bg->app = app;
	pthread_mutex_init(&bg->mu, NULL);
	pthread_cond_init(&bg->cv, NULL);
	pthread_mutex_lock(&bg->mu);
	if (gh_store_runs_with_status(app->store, gh_run_status_name(GH_RUN_SUSPENDED),
				      queue_cb, bg, e) != GH_OK) {
		pthread_mutex_unlock(&bg->mu);
		gh_bg_stop(bg);
		return e->code;
	}
	pthread_mutex_unlock(&bg->mu);
	for (i = 0; i < RESUMERS; i++) {
		struct resumer_arg *ra = malloc(sizeof(*ra));

		if (ra) {
			ra->bg = bg;
			ra->slot = i;
		}
		if (!ra || pthread_create(&bg->resumers[i], NULL, resumer_main, ra) != 0) {
			free(ra);
			gh_bg_stop(bg);
			return gh_err_set(e, GH_E_INTERNAL, "cannot start background threads");
		}
		bg->nresumers++;
	}
	if (pthread_create(&bg->maint, NULL, maint_main, bg) != 0) {
		gh_bg_stop(bg);
		return gh_err_set(e, GH_E_INTERNAL, "cannot start background threads");
	}
	bg->maint_started = 1;
	*out = bg;
	return GH_OK;
}

void gh_bg_stop(struct gh_bg *bg)
{
	int i;

	if (!bg)
		return;
	pthread_mutex_lock(&bg->mu);
	bg->stopping = 1;
	pthread_cond_broadcast(&bg->cv);
	pthread_mutex_unlock(&bg->mu);
	for (i = 0; i < bg->nresumers; i++)
		pthread_join(bg->resumers[i], NULL);
	if (bg->maint_started)
		pthread_join(bg->maint, NULL);
	gh_bg_snapshot_ratelimits(bg->app);
	pthread_mutex_destroy(&bg->mu);
	pthread_cond_destroy(&bg->cv);
	free(bg);
}
