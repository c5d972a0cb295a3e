/*
 * mcp_sessions.c - MCP client sessions at /mcp; see mcp_sessions.h.
 */
#include "mcp_sessions.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

/* However many keys there are, the table never grows beyond this. */
#define TABLE_MAX 65536

struct gh_mcp_sessions {
	pthread_mutex_t mu;
	int64_t per_key, idle_ms;
	struct gh_mcp_session *v;
	size_t n, cap;
};

struct gh_mcp_sessions *gh_mcp_sessions_new(int64_t per_key, int64_t idle_ms)
{
	struct gh_mcp_sessions *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	pthread_mutex_init(&s->mu, NULL);
	s->per_key = per_key > 0 ? per_key : 1;
	s->idle_ms = idle_ms > 0 ? idle_ms : 1;
	return s;
}

void gh_mcp_sessions_free(struct gh_mcp_sessions *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->mu);
	sodium_memzero(s->v, s->cap * sizeof(*s->v));
	free(s->v);
	free(s);
}

static void drop(struct gh_mcp_sessions *s, size_t i)
{
	s->v[i] = s->v[--s->n];
	sodium_memzero(&s->v[s->n], sizeof(s->v[s->n]));
}

/* Ends sessions idle too long. Under mu. */
static void sweep(struct gh_mcp_sessions *s, int64_t now)
{
	size_t i = 0;

	while (i < s->n) {
		if (now - s->v[i].used_ms > s->idle_ms)
			drop(s, i);
		else
			i++;
	}
}

enum gh_code gh_mcp_sessions_open(struct gh_mcp_sessions *s, const char *key_id,
				  const char *agent_id, const char *version, int elicit_form,
				  struct gh_mcp_session *out, struct gh_err *e)
{
	unsigned char rnd[32];
	int64_t now = gh_now_ms();
	size_t i, mine = 0, lru = 0;
	int have_lru = 0;
	struct gh_mcp_session *ns;
	enum gh_code rc = GH_OK;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&s->mu);
	sweep(s, now);
	for (i = 0; i < s->n; i++) {
		if (strcmp(s->v[i].key_id, key_id))
			continue;
		mine++;
		if (!have_lru || s->v[i].used_ms < s->v[lru].used_ms) {
			lru = i;
			have_lru = 1;
		}
	}
	if (have_lru && (int64_t)mine >= s->per_key)
		drop(s, lru);
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		struct gh_mcp_session *nv;

		if (s->cap >= TABLE_MAX) {
			rc = gh_err_set(e, GH_E_UNAVAILABLE, "too many MCP sessions are open; "
					"try again later");
			goto out;
		}
		if (!(nv = realloc(s->v, cap * sizeof(*nv)))) {
			rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
			goto out;
		}
		s->v = nv;
		s->cap = cap;
	}
	ns = &s->v[s->n++];
	memset(ns, 0, sizeof(*ns));
	randombytes_buf(rnd, sizeof(rnd));
	memcpy(ns->id, "mcps_", 5);
	gh_hex(rnd, sizeof(rnd), ns->id + 5);
	gh_strlcpy(ns->key_id, key_id, sizeof(ns->key_id));
	gh_strlcpy(ns->agent_id, agent_id, sizeof(ns->agent_id));
	gh_strlcpy(ns->version, version, sizeof(ns->version));
	ns->elicit_form = elicit_form;
	ns->created_ms = ns->used_ms = now;
	*out = *ns;
out:
	pthread_mutex_unlock(&s->mu);
	sodium_memzero(rnd, sizeof(rnd));
	return rc;
}

/* Index of id (of key_id when not NULL), or -1. Under mu. */
static long find(struct gh_mcp_sessions *s, const char *id, const char *key_id)
{
	size_t i, n = strlen(id);

	if (n >= GH_MCP_SID_MAX)
		return -1;
	for (i = 0; i < s->n; i++) {
		/* compared in constant time: ids are bearer secrets of a sort */
		if (strlen(s->v[i].id) == n && sodium_memcmp(s->v[i].id, id, n) == 0)
			return key_id && strcmp(s->v[i].key_id, key_id) ? -1 : (long)i;
	}
	return -1;
}

int gh_mcp_sessions_get(struct gh_mcp_sessions *s, const char *id, const char *key_id,
			struct gh_mcp_session *out)
{
	int64_t now = gh_now_ms();
	long i;

	pthread_mutex_lock(&s->mu);
	sweep(s, now);
	i = find(s, id, key_id);
	if (i >= 0) {
		s->v[i].used_ms = now;
		if (out)
			*out = s->v[i];
	}
	pthread_mutex_unlock(&s->mu);
	return i >= 0 ? 0 : -1;
}

void gh_mcp_sessions_initialized(struct gh_mcp_sessions *s, const char *id)
{
	long i;

	pthread_mutex_lock(&s->mu);
	if ((i = find(s, id, NULL)) >= 0)
		s->v[i].initialized = 1;
	pthread_mutex_unlock(&s->mu);
}

int gh_mcp_sessions_end(struct gh_mcp_sessions *s, const char *id, const char *key_id)
{
	long i;

	pthread_mutex_lock(&s->mu);
	if ((i = find(s, id, key_id)) >= 0)
		drop(s, (size_t)i);
	pthread_mutex_unlock(&s->mu);
	return i >= 0 ? 0 : -1;
}

int gh_mcp_sessions_end_key(struct gh_mcp_sessions *s, const char *key_id)
{
	size_t i = 0;
	int n = 0;

	pthread_mutex_lock(&s->mu);
	while (i < s->n) {
		if (!strcmp(s->v[i].key_id, key_id)) {
			drop(s, i);
			n++;
		} else {
			i++;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return n;
}

int gh_mcp_sessions_count(struct gh_mcp_sessions *s)
{
	int n;

	pthread_mutex_lock(&s->mu);
	n = (int)s->n;
	pthread_mutex_unlock(&s->mu);
	return n;
}
