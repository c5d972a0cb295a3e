/*
 * pg_leader.c - leadership by a session-level advisory lock. See
 * pg_leader.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>
#include <sodium.h>

#include "log.h"
#include "pg.h"
#include "pg_leader.h"
#include "util.h"

#define BACKOFF_MAX_MS 2000

struct gh_pg_leader {
	char *url;                  /* holds the password: never logged */
	char name[64];
	long long key;              /* the advisory lock's */
	long long presence;         /* this process's own lock (0: none) */
	int check_ms;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stopping;               /* under mu */
	PGconn *pc;                 /* the thread's */
	atomic_int leader, backend_pid;
	_Atomic uint64_t gained, lost;
};

/* FNV-1a of "gatehouse:" name: the lock's key, the same in every replica. */
static long long key_of(const char *name)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	const char *p;

	for (p = "gatehouse:"; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
	for (p = name; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
	return (long long)h;
}

/* Runs a one-row query; the first column as text into out (cap bytes).
 * -1 when it failed. */
static int query1(PGconn *pc, const char *sql, char *out, size_t cap)
{
	PGresult *r = PQexec(pc, sql);
	int ok = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;

	if (ok)
		gh_strlcpy(out, PQgetvalue(r, 0, 0), cap);
	PQclear(r);
	return ok ? 0 : -1;
}

/* Takes this process's presence lock on a new connection: while it is
 * held, other replicas know this one is alive. -1 when the query failed. */
static int take_presence(struct gh_pg_leader *l)
{
	char sql[96], v[16];

	if (!l->presence)
		return 0;
	snprintf(sql, sizeof(sql), "SELECT pg_try_advisory_lock(%lld)", l->presence);
	if (query1(l->pc, sql, v, sizeof(v)) != 0)
		return -1;
	if (strcmp(v, "t"))
		gh_warn("leader %s: the presence lock %lld is held by another session", l->name,
			l->presence);
	return 0;
}

static void lose(struct gh_pg_leader *l, const char *why)
{
	if (atomic_exchange(&l->leader, 0)) {
		atomic_fetch_add(&l->lost, 1);
		gh_warn("leader %s: lost (%.*s)", l->name, (int)strcspn(why, "\n"), why);
	}
	if (l->pc)
		PQfinish(l->pc);
	l->pc = NULL;
	atomic_store(&l->backend_pid, 0);
}

/* One round: connect when needed, then try the lock or check the
 * connection that holds it. The back-off to wait after it (0: none). */
static int round_once(struct gh_pg_leader *l, int backoff)
{
	char sql[96], v[16];
	struct gh_err e;

	if (!l->pc) {
		if (gh_pg_connect(l->url, 5, &l->pc, &e) != GH_OK) {
			gh_debug("leader %s: %s", l->name, e.msg);
			backoff = backoff ? backoff * 2 : l->check_ms;
			return backoff > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff;
		}
		atomic_store(&l->backend_pid, PQbackendPID(l->pc));
		if (take_presence(l) != 0) {
			lose(l, PQerrorMessage(l->pc));
			return 0;
		}
	}
	if (atomic_load(&l->leader)) {
		if (query1(l->pc, "SELECT 1", v, sizeof(v)) != 0)
			lose(l, PQerrorMessage(l->pc));
		return 0;
	}
	snprintf(sql, sizeof(sql), "SELECT pg_try_advisory_lock(%lld)", l->key);
	if (query1(l->pc, sql, v, sizeof(v)) != 0) {
		lose(l, PQerrorMessage(l->pc));
		return 0;
	}
	if (!strcmp(v, "t")) {
		atomic_store(&l->leader, 1);
		atomic_fetch_add(&l->gained, 1);
		gh_info("leader %s: this replica leads", l->name);
	}
	return 0;
}

static void *leader_main(void *arg)
{
	struct gh_pg_leader *l = arg;
	struct timespec until;
	int backoff = 0;

	pthread_mutex_lock(&l->mu);
	while (!l->stopping) {
		pthread_mutex_unlock(&l->mu);
		backoff = round_once(l, backoff);
		gh_deadline(CLOCK_MONOTONIC, backoff ? backoff : l->check_ms, &until);
		pthread_mutex_lock(&l->mu);
		while (!l->stopping && pthread_cond_timedwait(&l->cv, &l->mu, &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&l->mu);
	if (l->pc) {
		/* closing the session frees the lock for the next replica */
		PQfinish(l->pc);
		l->pc = NULL;
	}
	atomic_store(&l->leader, 0);
	return NULL;
}

enum gh_code gh_pg_leader_start(const char *url, const char *name, int check_ms,
				int64_t presence, struct gh_pg_leader **out, struct gh_err *e)
{
	struct gh_pg_leader *l;
	enum gh_code rc;

	*out = NULL;
	if (!(l = calloc(1, sizeof(*l))) || !(l->url = strdup(url))) {
		free(l);
		return gh_err_set(e, GH_E_NOMEM, "out of memory");
	}
	gh_strlcpy(l->name, name, sizeof(l->name));
	l->key = key_of(name);
	l->presence = (long long)presence;
	l->check_ms = check_ms < 10 ? 10 : check_ms;
	pthread_mutex_init(&l->mu, NULL);
	gh_cond_init_mono(&l->cv);
	if ((rc = gh_pg_connect(url, 5, &l->pc, e)) != GH_OK)
		goto fail;
	atomic_store(&l->backend_pid, PQbackendPID(l->pc));
	if (take_presence(l) != 0) {
		rc = gh_err_set(e, GH_E_UNAVAILABLE, "leader %s: %s", name,
				PQerrorMessage(l->pc));
		goto fail;
	}
	if (pthread_create(&l->th, NULL, leader_main, l) != 0) {
		rc = gh_err_set(e, GH_E_INTERNAL, "leader %s: cannot start its thread", name);
		goto fail;
	}
	*out = l;
	return GH_OK;
fail:
	if (l->pc)
		PQfinish(l->pc);
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
	sodium_memzero(l->url, strlen(l->url));
	free(l->url);
	free(l);
	return rc;
}

void gh_pg_leader_stop(struct gh_pg_leader *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->stopping = 1;
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
	pthread_join(l->th, NULL);
	pthread_cond_destroy(&l->cv);
	pthread_mutex_destroy(&l->mu);
	sodium_memzero(l->url, strlen(l->url));
	free(l->url);
	free(l);
}

int gh_pg_leader_is(struct gh_pg_leader *l)
{
	return !l || atomic_load(&l->leader);
}

void gh_pg_leader_stats(struct gh_pg_leader *l, struct gh_pg_leader_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!l)
		return;
	out->leader = atomic_load(&l->leader);
	out->backend_pid = atomic_load(&l->backend_pid);
	out->gained = atomic_load(&l->gained);
	out->lost = atomic_load(&l->lost);
}
