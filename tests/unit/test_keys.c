/*
 * test_keys.c - API key secrets: the generated format, keyed hashing (a
 * different hashing key gives a different hash), the hashing-key file, and
 * authentication against a real store on a temporary file: missing,
 * malformed, invalid and revoked keys each get their own message, and no
 * message ever repeats the secret. Lookups by hash are cached: a change
 * made behind the store's back shows only once the cache is dropped or
 * has aged, and a revocation by another store on the same database (the
 * CLI beside the server; another replica, which is told by a
 * notification) is seen at once.
 */
#include "keys.h"

#include <sys/stat.h>
#include <unistd.h>

#include <libpq-fe.h>
#include <sodium.h>
#include <sqlite3.h>

#include "t.h"
#include "t_store.h"
#include "util.h"

static int base64url(const char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_'))
			return 0;
	return 1;
}

static void test_generate(void)
{
	char s[64][GH_KEY_SECRET_MAX];
	size_t i, j;

	for (i = 0; i < GH_ARRAY_LEN(s); i++) {
		memset(s[i], 'x', GH_KEY_SECRET_MAX);
		gh_keys_generate(s[i]);
		T_EQ_INT(strlen(s[i]), 3 + 43); /* 256 bits, base64url without padding */
		T_ASSERT(!strncmp(s[i], "gh_", 3));
		if (!base64url(s[i] + 3))
			T_FAIL("secret %s has characters outside base64url", s[i]);
		for (j = 0; j < i; j++)
			T_ASSERT(strcmp(s[i], s[j]) != 0);
	}
	sodium_memzero(s, sizeof(s));
}

static void test_hash_keyed(void)
{
	unsigned char k1[32], k2[32], h1[32], h2[32], h3[32];

	memset(k1, 1, sizeof(k1));
	memcpy(k2, k1, sizeof(k2));
	k2[31] ^= 0x80;
	gh_keys_hash(k1, "gh_secret", h1);
	gh_keys_hash(k1, "gh_secret", h2);
	T_ASSERT(!memcmp(h1, h2, 32));
	gh_keys_hash(k2, "gh_secret", h3);
	T_ASSERT(memcmp(h1, h3, 32) != 0); /* a leaked database alone is not enough */
	gh_keys_hash(k1, "gh_secreT", h3);
	T_ASSERT(memcmp(h1, h3, 32) != 0);
	gh_keys_hash(k1, "gh_secret ", h3);
	T_ASSERT(memcmp(h1, h3, 32) != 0);
	/* not the unkeyed hash either */
	crypto_generichash(h3, 32, (const unsigned char *)"gh_secret", 9, NULL, 0);
	T_ASSERT(memcmp(h1, h3, 32) != 0);
}

static void test_hashkey_file(void)
{
	char dir[] = "/tmp/gh_test_hashkey_XXXXXX", path[128];
	unsigned char a[32], b[32];
	struct gh_err e;
	struct stat st;
	FILE *f;

	T_ASSERT(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/key_hash", dir);
	T_EQ_INT(gh_keys_load_hashkey(path, 0, a, &e), GH_E_IO);
	T_CONTAINS(e.msg, "cannot open the key hashing secret");
	T_EQ_INT(gh_keys_load_hashkey(path, 1, a, &e), GH_OK);
	T_EQ_INT(stat(path, &st), 0);
	T_EQ_INT(st.st_mode & 0777, 0600);
	T_EQ_INT(st.st_size, 32);
	T_EQ_INT(gh_keys_load_hashkey(path, 1, b, &e), GH_OK);
	T_ASSERT(!memcmp(a, b, 32));
	T_ASSERT(!sodium_is_zero(a, 32));
	T_EQ_INT(chmod(path, 0640), 0);
	T_EQ_INT(gh_keys_load_hashkey(path, 1, b, &e), GH_E_IO);
	T_CONTAINS(e.msg, "must not be readable by group or others");
	T_EQ_INT(chmod(path, 0600), 0);
	f = fopen(path, "w");
	T_ASSERT(f != NULL);
	fputs("short", f);
	fclose(f);
	T_EQ_INT(gh_keys_load_hashkey(path, 1, b, &e), GH_E_IO);
	T_CONTAINS(e.msg, "not a key hashing secret");
	unlink(path);
	rmdir(dir);
}

static enum gh_code auth(struct t_store *t, const unsigned char *hk, const char *header,
			 struct gh_key *k, struct gh_err *e)
{
	gh_err_clear(e);
	memset(k, 0, sizeof(*k));
	return gh_keys_authenticate(t->s, hk, header, k, e);
}

static void test_authenticate(void)
{
	struct t_store t;
	unsigned char hk[32], other[32];
	char secret[GH_KEY_SECRET_MAX], header[160], longkey[200];
	struct gh_key k, got;
	struct gh_err e;

	randombytes_buf(hk, sizeof(hk));
	randombytes_buf(other, sizeof(other));
	T_EQ_INT(t_store_open(&t), 0);
	memset(&k, 0, sizeof(k));
	gh_strlcpy(k.name, "ci", sizeof(k.name));
	gh_strlcpy(k.owner, "alice", sizeof(k.owner));
	gh_strlcpy(k.policy, "self-approve", sizeof(k.policy));
	k.admin = 1;
	T_EQ_INT(gh_keys_create(t.s, hk, &k, secret, &e), GH_OK);
	T_ASSERT(!strncmp(k.id, "key_", 4));
	T_EQ_INT(strlen(k.prefix), GH_KEY_PREFIX_LEN);
	T_ASSERT(!strncmp(k.prefix, secret, GH_KEY_PREFIX_LEN));
	T_ASSERT(k.created_at > 0);

	/* the good key, written the ways clients write it */
	snprintf(header, sizeof(header), "Bearer %s", secret);
	T_EQ_INT(auth(&t, hk, header, &got, &e), GH_OK);
	T_EQ_STR(got.id, k.id);
	T_EQ_STR(got.name, "ci");
	T_EQ_STR(got.owner, "alice");
	T_EQ_STR(got.policy, "self-approve");
	T_EQ_INT(got.admin, 1);
	T_EQ_STR(got.prefix, k.prefix);
	T_EQ_INT(got.revoked_at, 0);
	snprintf(header, sizeof(header), "bearer %s", secret);
	T_EQ_INT(auth(&t, hk, header, &got, &e), GH_OK);
	snprintf(header, sizeof(header), "BEARER   %s  ", secret);
	T_EQ_INT(auth(&t, hk, header, &got, &e), GH_OK);

	/* missing */
	T_EQ_INT(auth(&t, hk, NULL, &got, &e), GH_E_AUTH);
	T_CONTAINS(e.msg, "missing API key");
	T_EQ_INT(auth(&t, hk, "", &got, &e), GH_E_AUTH);
	T_CONTAINS(e.msg, "missing API key");
	/* malformed */
	snprintf(header, sizeof(header), "Basic %s", secret);
	T_EQ_INT(auth(&t, hk, header, &got, &e), GH_E_AUTH);
	T_CONTAINS(e.msg, "malformed Authorization header");
	T_ASSERT(!strstr(e.msg, secret));
	T_EQ_INT(auth(&t, hk, secret, &got, &e), GH_E_AUTH); /* no scheme */
	T_CONTAINS(e.msg, "malformed Authorization header");
	T_ASSERT(!strstr(e.msg, secret + 3));
	T_EQ_INT(auth(&t, hk, "Bearer", &got, &e), GH_E_AUTH);
	T_CONTAINS(e.msg, "malformed");
	/* invalid */
	T_EQ_INT(auth(&t, hk, "Bearer ", &got, &e), GH_E_AUTH);
	T_CONTAINS(e.msg, "invalid API key");
	T_EQ_INT(auth(&t, hk, "Bearer gh_not_a_real_key_at_all", &got, &e), GH_E_AUTH);
	T_EQ_STR(e.msg, "invalid API key");
	snprintf(header, sizeof(header), "Bearer %sx", secret);
	T_EQ_INT(auth(&t, hk, header, &got, &e), GH_E_AUTH);
	T_EQ_STR(e.msg, "invalid API key");
	memset(longkey, 'a', sizeof(longkey));
	memcpy(longkey, "Bearer ", 7);
	longkey[sizeof(longkey) - 1] = '\0';
	T_EQ_INT(auth(&t, hk, longkey, &got, &e), GH_E_AUTH);
	T_EQ_STR(e.msg, "invalid API key");
	/* the right secret under another hashing key (another install) */
	snprintf(header, sizeof(header), "Bearer %s", secret);
	T_EQ_INT(auth(&t, other, header, &got, &e), GH_E_AUTH);
	T_EQ_STR(e.msg, "invalid API key");

	/* revoked: told apart from unknown, naming only the prefix */
	T_EQ_INT(gh_store_key_revoke(t.s, k.id, &e), GH_OK);
	T_EQ_INT(auth(&t, hk, header, &got, &e), GH_E_AUTH);
	T_CONTAINS(e.msg, "was revoked");
	T_CONTAINS(e.msg, k.prefix);
	T_ASSERT(!strstr(e.msg, secret));
	T_EQ_INT(gh_store_key_revoke(t.s, k.id, &e), GH_E_CONFLICT);
	T_CONTAINS(e.msg, "already revoked");
	T_EQ_INT(gh_store_key_revoke(t.s, "key_nope", &e), GH_E_NOTFOUND);
	sodium_memzero(secret, sizeof(secret));
	t_store_close(&t);
}

struct listed {
	char ids[8][48];
	int n;
};

static int list_cb(void *ud, const struct gh_key *k)
{
	struct listed *l = ud;

	if (l->n < 8)
		gh_strlcpy(l->ids[l->n++], k->id, sizeof(l->ids[0]));
	return 0;
}

static void test_store_keys(void)
{
	struct t_store t;
	unsigned char hk[32];
	char secret[GH_KEY_SECRET_MAX];
	struct gh_key a, b, got;
	struct gh_err e;
	struct listed l = {0};
	int64_t before = gh_now_ms();

	randombytes_buf(hk, sizeof(hk));
	T_EQ_INT(t_store_open(&t), 0);
	memset(&a, 0, sizeof(a));
	gh_strlcpy(a.name, "first", sizeof(a.name));
	gh_strlcpy(a.owner, "o", sizeof(a.owner));
	T_EQ_INT(gh_keys_create(t.s, hk, &a, secret, &e), GH_OK);
	usleep(5000);
	b = a;
	gh_strlcpy(b.name, "second", sizeof(b.name));
	T_EQ_INT(gh_keys_create(t.s, hk, &b, secret, &e), GH_OK);
	T_ASSERT(strcmp(a.id, b.id) != 0);
	/* "" policy reads back as "" (the policy named "default") and user role */
	T_EQ_INT(gh_store_key_by_id(t.s, a.id, &got, &e), GH_OK);
	T_EQ_STR(got.policy, "");
	T_EQ_INT(got.admin, 0);
	T_EQ_INT(got.last_used_at, 0);
	T_EQ_INT(gh_store_key_by_id(t.s, "key_missing", &got, &e), GH_E_NOTFOUND);
	/* newest first */
	T_EQ_INT(gh_store_key_list(t.s, list_cb, &l, &e), GH_OK);
	T_EQ_INT(l.n, 2);
	T_EQ_STR(l.ids[0], b.id);
	T_EQ_STR(l.ids[1], a.id);
	/* use is recorded without waiting; a later read by id sees it */
	gh_store_key_touch(t.s, a.id, before + 1);
	T_EQ_INT(gh_store_key_revoke(t.s, b.id, &e), GH_OK);
	T_EQ_INT(gh_store_key_by_id(t.s, a.id, &got, &e), GH_OK);
	T_EQ_INT(got.last_used_at, before + 1);
	T_EQ_INT(gh_store_key_by_id(t.s, b.id, &got, &e), GH_OK);
	T_ASSERT(got.revoked_at >= before);
	/* the same hash twice is a conflict, not a second key */
	{
		unsigned char h[32];
		struct gh_key c = a;

		gh_keys_hash(hk, "gh_fixed", h);
		gh_strlcpy(c.id, "key_c1", sizeof(c.id));
		T_EQ_INT(gh_store_key_insert(t.s, &c, h, &e), GH_OK);
		gh_strlcpy(c.id, "key_c2", sizeof(c.id));
		T_EQ_INT(gh_store_key_insert(t.s, &c, h, &e), GH_E_CONFLICT);
	}
	sodium_memzero(secret, sizeof(secret));
	t_store_close(&t);
}

/* Renames a key in the database without the store knowing (a direct
 * write, as nothing in gatehouse renames keys). */
static void rename_behind(struct t_store *t, const char *id, const char *name)
{
	char sql[256];

	snprintf(sql, sizeof(sql), "UPDATE api_keys SET name = '%s' WHERE id = '%s'", name, id);
	T_EQ_INT(t_store_sql_behind(t, sql), 0);
}

static void test_lookup_cache(void)
{
	struct t_store t, other;
	unsigned char hk[32];
	char secret[GH_KEY_SECRET_MAX], header[160];
	struct gh_key k, got;
	struct gh_err e;
	PGconn *listener = NULL;

	randombytes_buf(hk, sizeof(hk));
	T_EQ_INT(t_store_open(&t), 0);
	memset(&k, 0, sizeof(k));
	gh_strlcpy(k.name, "ci", sizeof(k.name));
	gh_strlcpy(k.owner, "alice", sizeof(k.owner));
	T_EQ_INT(gh_keys_create(t.s, hk, &k, secret, &e), GH_OK);
	snprintf(header, sizeof(header), "Bearer %s", secret);
	T_EQ_INT(auth(&t, hk, header, &got, &e), GH_OK);
	T_EQ_STR(got.name, "ci");

	/* kept: a change behind the store's back is not seen ... */
	rename_behind(&t, k.id, "renamed");
	T_EQ_INT(auth(&t, hk, header, &got, &e), GH_OK);
	T_EQ_STR(got.name, "ci");
	/* ... until the cache is dropped */
	gh_store_caches_changed(t.s, GH_STORE_CACHE_KEYS);
	T_EQ_INT(auth(&t, hk, header, &got, &e), GH_OK);
	T_EQ_STR(got.name, "renamed");
	/* ... or the row has aged */
	rename_behind(&t, k.id, "aged");
	T_EQ_INT(auth(&t, hk, header, &got, &e), GH_OK);
	T_EQ_STR(got.name, "renamed");
	usleep((GH_STORE_KEY_CACHE_MS + 50) * 1000);
	T_EQ_INT(auth(&t, hk, header, &got, &e), GH_OK);
	T_EQ_STR(got.name, "aged");

	/* a second store on the same database (the CLI beside the server;
	 * another replica) revokes the key the first has just used */
	memset(&other, 0, sizeof(other));
	memcpy(other.path, t.path, sizeof(other.path));
	T_EQ_INT(t_store_reopen(&other, 0, 0, &e), GH_OK);
	if (t_store_pg())
		T_ASSERT((listener = t_pg_listen(GH_STORE_KEYS_CHANNEL)) != NULL);
	T_EQ_INT(auth(&t, hk, header, &got, &e), GH_OK);
	T_EQ_INT(gh_store_key_revoke(other.s, k.id, &e), GH_OK);
	if (t_store_pg()) {
		/* every replica hears it: each one's events connection drops
		 * its cache (gh_pg_events_on_keys); here, a listener of our own */
		PGnotify *n = t_pg_notified(listener);

		T_ASSERT(n != NULL);
		if (n) {
			T_EQ_STR(n->relname, GH_STORE_KEYS_CHANNEL);
			T_EQ_STR(n->extra, GH_STORE_CACHE_KEYS);
			gh_store_caches_changed(t.s, n->extra);
			PQfreemem(n);
		}
		PQfinish(listener);
	}
	T_EQ_INT(auth(&t, hk, header, &got, &e), GH_E_AUTH);
	T_CONTAINS(e.msg, "was revoked");
	gh_store_close(other.s);
	sodium_memzero(secret, sizeof(secret));
	t_store_close(&t);
}

T_MAIN(T(test_generate), T(test_hash_keyed), T(test_hashkey_file), T(test_authenticate),
       T(test_store_keys), T(test_lookup_cache))
