/*
 * store_keys.c - the api_keys table, and the cache of key lookups every
 * request begins with. Threading as in store.c; the cache takes its own
 * mutex.
 *
 * A request authenticates by the keyed hash of its secret. The row it
 * finds changes only when the key is revoked or its last use is noted,
 * so found rows are kept (GH_STORE_KEY_CACHE_MS at most) instead of a
 * read transaction per request. A revocation must still hold at once:
 * every kept row carries the keys generation read before it was looked
 * up, and a revocation moves the generation once its transaction has
 * ended, in every process on the database (store_caches.c), so a row read
 * before the revocation is never used after it. Unknown keys are never
 * kept: a made-up key costs a lookup, as before.
 */
#include "store_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "log.h"
#include "util.h"

#define KEY_SLOTS 128                 /* direct-mapped by the hash's first bytes */

struct keyslot {
	unsigned char hash[32];
	struct gh_key k;
	int64_t at_ms;                /* monotonic, when it was read */
	uint64_t gen;                 /* keys generation read before it */
	int used;
};

struct store_keycache {
	pthread_mutex_t mu;
	struct keyslot slot[KEY_SLOTS];
};

void store_keys_cache_open(struct gh_store *s)
{
	struct store_keycache *kc;

	if (!s->gen[STORE_CACHE_KEYS] || !(kc = calloc(1, sizeof(*kc))))
		return;
	pthread_mutex_init(&kc->mu, NULL);
	s->keycache = kc;
}

void store_keys_cache_close(struct gh_store *s)
{
	if (s->keycache) {
		pthread_mutex_destroy(&s->keycache->mu);
		free(s->keycache);
		s->keycache = NULL;
	}
}

static struct keyslot *slot_of(struct store_keycache *kc, const unsigned char hash[32])
{
	return &kc->slot[(hash[0] | (unsigned)hash[1] << 8) % KEY_SLOTS];
}

struct key_arg {
	const struct gh_key *k;
	const unsigned char *hash;
	const char *id;
	int64_t now;
};

static enum gh_code insert_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	struct key_arg *a = arg;

	(void)s;
	return store_exec(w, "INSERT INTO api_keys (id, name, owner, policy, role, prefix, hash, "
			     "created_at) VALUES (?,?,?,?,?,?,?,?)",
			  STORE_ARGS(STORE_TEXT(a->k->id), STORE_TEXT(a->k->name),
				     STORE_TEXT(a->k->owner),
				     STORE_TEXT(a->k->policy[0] ? a->k->policy : NULL),
				     STORE_TEXT(a->k->admin ? "admin" : "user"),
				     STORE_TEXT(a->k->prefix), STORE_BLOB(a->hash, 32),
				     STORE_INT(a->k->created_at)),
			  "creating the key", NULL, e);
}

enum gh_code gh_store_key_insert(struct gh_store *s, const struct gh_key *k,
				 const unsigned char hash[32], struct gh_err *e)
{
	struct key_arg a = {.k = k, .hash = hash};

	return store_write(s, insert_job, &a, e);
}

#define KEY_COLS "id, name, owner, coalesce(policy, ''), role, prefix, created_at, " \
		 "coalesce(last_used_at, 0), coalesce(revoked_at, 0)"

#define K(KIND, FIELD) STORE_COL(KIND, struct gh_key, FIELD)
static const struct store_col key_cols[] = { /* KEY_COLS, in order; role is read by hand */
	K(TEXT, id), K(TEXT, name), K(TEXT, owner), K(TEXT, policy), STORE_COL_SKIPPED,
	K(TEXT, prefix), K(INT, created_at), K(INT, last_used_at), K(INT, revoked_at),
};
#undef K

static int key_from(struct store_row *sr, void *ud)
{
	struct gh_key *k = ud;
	const char *role = store_col_text(sr, 4);

	memset(k, 0, sizeof(*k));
	store_cols_read(sr, key_cols, GH_ARRAY_LEN(key_cols), k);
	k->admin = role && !strcmp(role, "admin");
	return 0;
}

/* Every request's first read: it does not wait for queued writes (the
 * only one about a key is its last use; a revocation commits at once). */
static enum gh_code key_lookup(struct gh_store *s, const char *sql, struct store_arg by,
			       struct gh_key *out, struct gh_err *e)
{
	return store_get_now(s, sql, &by, 1, key_from, out, sizeof(*out), "looking up a key", e,
			     "no such key");
}

enum gh_code gh_store_key_by_hash(struct gh_store *s, const unsigned char hash[32],
				  struct gh_key *out, struct gh_err *e)
{
	struct store_keycache *kc = s->keycache;
	struct keyslot *sl;
	uint64_t gen = 0;
	int64_t now = 0;
	enum gh_code rc;

	if (kc) {
		gen = atomic_load(s->gen[STORE_CACHE_KEYS]);
		now = gh_mono_ns() / 1000000;
		sl = slot_of(kc, hash);
		pthread_mutex_lock(&kc->mu);
		if (sl->used && sl->gen == gen && now - sl->at_ms < GH_STORE_KEY_CACHE_MS &&
		    sodium_memcmp(sl->hash, hash, 32) == 0) {
			*out = sl->k;
			pthread_mutex_unlock(&kc->mu);
			return GH_OK;
		}
		pthread_mutex_unlock(&kc->mu);
	}
	rc = key_lookup(s, "SELECT " KEY_COLS " FROM api_keys WHERE hash = ?",
			STORE_BLOB(hash, 32), out, e);
	if (kc && rc == GH_OK) {
		sl = slot_of(kc, hash);
		pthread_mutex_lock(&kc->mu);
		memcpy(sl->hash, hash, 32);
		sl->k = *out;
		sl->at_ms = now;
		sl->gen = gen;
		sl->used = 1;
		pthread_mutex_unlock(&kc->mu);
	}
	return rc;
}

enum gh_code gh_store_key_by_id(struct gh_store *s, const char *id, struct gh_key *out,
				struct gh_err *e)
{
	/* not a request's lookup: it sees a last use still queued */
	struct store_arg by = STORE_TEXT(id);

	return store_get(s, "SELECT " KEY_COLS " FROM api_keys WHERE id = ?", &by, 1, key_from,
			 out, sizeof(*out), "looking up a key", e, "no key with id \"%s\"", id);
}

STORE_EACH(key, struct gh_key, key_from, STORE_NO_CLEAR, 0)

enum gh_code gh_store_key_list(struct gh_store *s, int (*fn)(void *ud, const struct gh_key *k),
			       void *ud, struct gh_err *e)
{
	struct key_each x = {fn, ud};

	return store_read(s, "SELECT " KEY_COLS " FROM api_keys ORDER BY created_at DESC, id",
			  NULL, 0, 0, key_each_row, &x, NULL, "listing keys", e);
}

static enum gh_code revoke_job(struct gh_store *s, struct store_conn *w, void *arg,
			       struct gh_err *e)
{
	struct key_arg *a = arg;
	int64_t revoked = 0;
	int seen = 0;
	enum gh_code rc;

	rc = store_rows(w, "SELECT coalesce(revoked_at, 0) FROM api_keys WHERE id = ?",
			STORE_ARGS(STORE_TEXT(a->id)), 1, store_row_int, &revoked, &seen,
			"revoking the key", e);
	if (rc != GH_OK)
		return rc;
	if (seen == 0)
		return gh_err_set(e, GH_E_NOTFOUND, "no key with id %s", a->id);
	if (revoked != 0)
		return gh_err_set(e, GH_E_CONFLICT, "key %s is already revoked", a->id);
	rc = store_exec(w, "UPDATE api_keys SET revoked_at = ? WHERE id = ?",
			STORE_ARGS(STORE_INT(a->now), STORE_TEXT(a->id)), "revoking the key", NULL,
			e);
	return rc == GH_OK ? store_cache_wrote(s, w, STORE_CACHE_KEYS, e) : rc;
}

enum gh_code gh_store_key_revoke(struct gh_store *s, const char *id, struct gh_err *e)
{
	struct key_arg a = {.id = id, .now = gh_now_ms()};

	return store_write(s, revoke_job, &a, e);
}

struct touch_arg {
	char id[48];
	int64_t now;
};

static enum gh_code touch_job(struct gh_store *s, struct store_conn *w, void *arg,
			      struct gh_err *e)
{
	struct touch_arg *a = arg;

	(void)s;
	return store_exec(w, "UPDATE api_keys SET last_used_at = ? WHERE id = ?",
			  STORE_ARGS(STORE_INT(a->now), STORE_TEXT(a->id)), "recording key use",
			  NULL, e);
}

void gh_store_key_touch(struct gh_store *s, const char *id, int64_t now_ms)
{
	struct touch_arg *a = malloc(sizeof(*a));

	if (!a)
		return;
	gh_strlcpy(a->id, id, sizeof(a->id));
	a->now = now_ms;
	store_write_async(s, touch_job, a, free);
	if (s->keycache) {
		/* the kept row says so too, or every request would note it */
		struct store_keycache *kc = s->keycache;
		size_t i;

		pthread_mutex_lock(&kc->mu);
		for (i = 0; i < KEY_SLOTS; i++)
			if (kc->slot[i].used && !strcmp(kc->slot[i].k.id, id))
				kc->slot[i].k.last_used_at = now_ms;
		pthread_mutex_unlock(&kc->mu);
	}
}
