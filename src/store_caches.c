/*
 * store_caches.c - the generations that keep the rows cached across
 * requests right (store_int.h): key lookups (store_keys.c) and working
 * memory (store_memory.c).
 *
 * On SQLite every process that writes the database maps the first page of
 * its lock file, shared: its content was never used, so its words hold the
 * generations, one per cache (growing a file another process maps is safe;
 * it never shrinks). On PostgreSQL each process has its own, moved by its
 * own writes and by the notifications on GH_STORE_KEYS_CHANNEL that every
 * replica's events connection hears; the payload names the cache.
 *
 * Threading: generations are atomics; caches_wrote belongs to whoever
 * holds the writer.
 */
#include "store_int.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

#define GEN_MAP_BYTES 4096            /* the lock file's first page */

/* What a notification says changed, by cache. */
static const char *const payload[STORE_NCACHES] = {GH_STORE_CACHE_KEYS, GH_STORE_CACHE_WM};

/* SQLite: maps the lock file's first page; 0 or -1 (after a warning). */
static int map_gens(struct gh_store *s)
{
	struct stat st;
	void *m;

	if (s->lock_fd < 0 || fstat(s->lock_fd, &st) != 0)
		return -1;
	if (st.st_size < GEN_MAP_BYTES && ftruncate(s->lock_fd, GEN_MAP_BYTES) != 0) {
		gh_warn("database: %s: cannot grow the lock file (%s): key lookups and working "
			"memory are not cached", s->lock_path, strerror(errno));
		return -1;
	}
	m = mmap(NULL, GEN_MAP_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, s->lock_fd, 0);
	if (m == MAP_FAILED) {
		gh_warn("database: %s: cannot map the lock file (%s): key lookups and working "
			"memory are not cached", s->lock_path, strerror(errno));
		return -1;
	}
	s->gen_map = m;
	return 0;
}

void store_caches_open(struct gh_store *s)
{
	int i;

	if (!store_is_pg(s) && map_gens(s) != 0)
		return;
	for (i = 0; i < STORE_NCACHES; i++)
		s->gen[i] = store_is_pg(s) ? &s->gen_own[i] : (_Atomic uint64_t *)s->gen_map + i;
	store_keys_cache_open(s);
	store_wm_cache_open(s);
}

void store_caches_close(struct gh_store *s)
{
	int i;

	store_wm_cache_close(s);
	store_keys_cache_close(s);
	for (i = 0; i < STORE_NCACHES; i++)
		s->gen[i] = NULL;
	if (s->gen_map)
		munmap(s->gen_map, GEN_MAP_BYTES);
	s->gen_map = NULL;
}

enum gh_code store_cache_wrote(struct gh_store *s, struct store_conn *w, enum store_cache c,
			       struct gh_err *e)
{
	const struct store_arg arg = STORE_TEXT(payload[c]);

	s->caches_wrote |= 1u << c;
	if (!store_is_pg(s))
		return GH_OK;
	/* delivered at commit, to every replica's events connection */
	return store_rows(w, "SELECT pg_notify('" GH_STORE_KEYS_CHANNEL "', ?)", &arg, 1, 0,
			  store_row_none, NULL, NULL, "notifying the replicas", e);
}

void store_caches_moved(struct gh_store *s)
{
	int i;

	for (i = 0; i < STORE_NCACHES; i++)
		if (s->caches_wrote & (1u << i) && s->gen[i])
			atomic_fetch_add(s->gen[i], 1);
	s->caches_wrote = 0;
}

void gh_store_caches_changed(struct gh_store *s, const char *what)
{
	int i;

	for (i = 0; s && i < STORE_NCACHES; i++)
		if (s->gen[i] && (!what || !strcmp(what, payload[i])))
			atomic_fetch_add(s->gen[i], 1);
}
