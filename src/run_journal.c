/*
 * run_journal.c - the events of runs in flight, for reconnecting readers;
 * see run_journal.h.
 */
#include "run_journal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "run.h"
#include "util.h"

#define FOLLOW_TICK_MS 100
#define BUCKETS 1024            /* journals by run id */
#define PRUNE_EVERY_MS 1000

#define BLOCK_MIN 1024           /* the first block of a journal's events */
#define BLOCK_MAX ((size_t)64 << 10) /* blocks double up to this */

/* A journal's events are packed one after another into blocks, each
 * event a record: its data's length (4 bytes, unaligned), its type and
 * its data, both NUL-terminated. A block never moves once made, so a
 * reader uses a record without holding mu; a thousand streams of small
 * text deltas cost a few bytes of overhead per event, not three mallocs. */
struct block {
	struct block *next;
	size_t used, cap;
	char data[];
};

struct journal {
	struct journal *next;
	char stream[GH_JOURNAL_STREAM_MAX];
	char owner[GH_NAME_MAX + 1];
	char run_id[GH_NAME_MAX + 1];   /* an engine run id, or a client's runId */
	const char **ev;        /* event i's record; the array may grow, records stay */
	struct block *blocks, *last;
	size_t n, cap, bytes;
	int64_t dropped_from;   /* first seq dropped (-1: none) */
	int live;               /* a turn is going on */
	int opened;             /* by gh_run_journal_open: its owner only, ended by
				 * gh_run_journal_end */
	int64_t ended_at;       /* Unix ms the last turn ended */
	int readers;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct journal *buckets[BUCKETS];
static size_t all_bytes;
static int64_t pruned_at;

static size_t bucket_of(const char *run_id)
{
	uint32_t h = 2166136261u;   /* FNV-1a */

	for (; *run_id; run_id++)
		h = (h ^ (unsigned char)*run_id) * 16777619u;
	return h % BUCKETS;
}

static void journal_free(struct journal *j)
{
	struct block *b, *next;

	for (b = j->blocks; b; b = next) {
		next = b->next;
		free(b);
	}
	free(j->ev);
	free(j);
}

/* An event's type, data and length, from its record. */
static void record_read(const char *rec, const char **type, const char **data, size_t *len)
{
	uint32_t n;

	memcpy(&n, rec, sizeof(n));
	*type = rec + sizeof(n);
	*data = *type + strlen(*type) + 1;
	*len = n;
}

static void unlink_free(struct journal **pp)
{
	struct journal *j = *pp;

	*pp = j->next;
	all_bytes -= j->bytes;
	journal_free(j);
}

/* Drops ended journals past their keep time (and, while over the global
 * budget, the oldest ended ones), unless someone reads them; at most once
 * a second. Under mu. */
static void prune(int64_t now)
{
	struct journal **pp, **oldest;
	size_t i;

	if (now - pruned_at < PRUNE_EVERY_MS && all_bytes <= GH_JOURNAL_ALL_BYTES)
		return;
	pruned_at = now;
	for (i = 0; i < BUCKETS; i++)
		for (pp = &buckets[i]; *pp;) {
			if (!(*pp)->live && !(*pp)->readers &&
			    now - (*pp)->ended_at > GH_JOURNAL_KEEP_MS)
				unlink_free(pp);
			else
				pp = &(*pp)->next;
		}
	while (all_bytes > GH_JOURNAL_ALL_BYTES) {
		oldest = NULL;
		for (i = 0; i < BUCKETS; i++)
			for (pp = &buckets[i]; *pp; pp = &(*pp)->next)
				if (!(*pp)->live && !(*pp)->readers &&
				    (!oldest || (*pp)->ended_at < (*oldest)->ended_at))
					oldest = pp;
		if (!oldest)
			break;
		unlink_free(oldest);
	}
}

/* The journal of (stream, owner, run_id); owner NULL: any. Under mu. */
static struct journal **find(const char *stream, const char *owner, const char *run_id)
{
	struct journal **pp;

	for (pp = &buckets[bucket_of(run_id)]; *pp; pp = &(*pp)->next)
		if (!strcmp((*pp)->run_id, run_id) && !strcmp((*pp)->stream, stream) &&
		    (!owner || !strcmp((*pp)->owner, owner)))
			return pp;
	return NULL;
}

/* The journal an event of owner's goes to: an opened one only its owner
 * writes, others whoever continues the run. Under mu. */
static struct journal *find_for_add(const char *stream, const char *owner, const char *run_id)
{
	struct journal *j;

	for (j = buckets[bucket_of(run_id)]; j; j = j->next)
		if (!strcmp(j->run_id, run_id) && !strcmp(j->stream, stream) &&
		    (!j->opened || !strcmp(j->owner, owner)))
			return j;
	return NULL;
}

/* A new, live journal, first in its bucket; NULL when out of memory or a
 * name is too long to be kept whole. Under mu. */
static struct journal *make(const char *stream, const char *owner, const char *run_id)
{
	struct journal *j;

	if (strlen(run_id) >= sizeof(j->run_id) || strlen(owner) >= sizeof(j->owner) ||
	    strlen(stream) >= sizeof(j->stream) || !(j = calloc(1, sizeof(*j))))
		return NULL;
	gh_strlcpy(j->stream, stream, sizeof(j->stream));
	gh_strlcpy(j->owner, owner, sizeof(j->owner));
	gh_strlcpy(j->run_id, run_id, sizeof(j->run_id));
	j->dropped_from = -1;
	j->live = 1;
	j->next = buckets[bucket_of(run_id)];
	buckets[bucket_of(run_id)] = j;
	return j;
}

/* Appends under mu; -1 when the event could not be kept. */
static int append(struct journal *j, const char *type, const char *data, size_t len)
{
	size_t tlen = strlen(type), need = sizeof(uint32_t) + tlen + 1 + len + 1;
	uint32_t n32 = (uint32_t)len;
	struct block *b = j->last;
	char *rec;

	if (j->dropped_from >= 0 || j->bytes + len > GH_JOURNAL_RUN_BYTES)
		return -1;
	if (j->n == j->cap) {
		size_t cap = j->cap ? j->cap * 2 : 64;
		const char **ev = realloc(j->ev, cap * sizeof(*ev));

		if (!ev)
			return -1;
		j->ev = ev;
		j->cap = cap;
	}
	if (!b || b->cap - b->used < need) {
		size_t cap = !b ? BLOCK_MIN : b->cap < BLOCK_MAX ? b->cap * 2 : BLOCK_MAX;

		if (cap < need)
			cap = need;
		if (!(b = malloc(sizeof(*b) + cap)))
			return -1;
		b->next = NULL;
		b->used = 0;
		b->cap = cap;
		if (j->last)
			j->last->next = b;
		else
			j->blocks = b;
		j->last = b;
	}
	rec = b->data + b->used;
	memcpy(rec, &n32, sizeof(n32));
	memcpy(rec + sizeof(n32), type, tlen + 1);
	memcpy(rec + sizeof(n32) + tlen + 1, data, len);
	rec[need - 1] = '\0';
	b->used += need;
	j->ev[j->n++] = rec;
	j->bytes += len + tlen;
	all_bytes += len + tlen;
	return 0;
}

void gh_run_journal_add(const char *stream, const char *owner, const char *run_id,
			const char *type, const char *data, size_t len, int ends)
{
	struct journal *j;
	int64_t now = gh_now_ms();

	if (!owner)
		owner = "";
	pthread_mutex_lock(&mu);
	prune(now);
	j = find_for_add(stream, owner, run_id);
	if (!j)
		j = make(stream, owner, run_id);
	if (j) {
		if (append(j, type, data, len) != 0 && j->dropped_from < 0)
			j->dropped_from = (int64_t)j->n;
		j->live = !ends;
		if (ends)
			j->ended_at = now;
	}
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

enum gh_code gh_run_journal_open(const char *stream, const char *owner, const char *run_id,
				 struct gh_err *e)
{
	struct journal **pp, *j;
	enum gh_code rc = GH_OK;

	pthread_mutex_lock(&mu);
	prune(gh_now_ms());
	pp = find(stream, owner, run_id);
	if (pp && ((*pp)->live || (*pp)->n)) {
		rc = gh_err_set(e, GH_E_CONFLICT, "run %s has a %s stream here already", run_id,
				stream);
	} else {
		if (pp && !(*pp)->readers)
			unlink_free(pp);        /* ended with no events: nothing to keep */
		if (strlen(run_id) > GH_NAME_MAX)
			rc = gh_err_set(e, GH_E_BADREQ, "run id: at most %d characters", GH_NAME_MAX);
		else if (!(j = make(stream, owner, run_id)))
			rc = gh_err_set(e, GH_E_NOMEM, "out of memory");
		else
			j->opened = 1;
	}
	pthread_mutex_unlock(&mu);
	return rc;
}

void gh_run_journal_end(const char *stream, const char *owner, const char *run_id)
{
	struct journal **pp;

	pthread_mutex_lock(&mu);
	if ((pp = find(stream, owner, run_id)) && (*pp)->live) {
		(*pp)->live = 0;
		(*pp)->ended_at = gh_now_ms();
		if (!(*pp)->n && !(*pp)->readers)
			unlink_free(pp);        /* refused before its first event */
	}
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

static void wait_tick(void)
{
	struct timespec ts;

	gh_deadline(CLOCK_REALTIME, FOLLOW_TICK_MS, &ts);
	pthread_cond_timedwait(&cv, &mu, &ts);
}

enum gh_code gh_run_journal_follow(const char *stream, const char *owner, const char *run_id,
				   int64_t offset,
				   int (*fn)(void *ud, int64_t seq, const char *type,
					     const char *data, size_t len),
				   int (*idle)(void *ud), void *ud, struct gh_err *e)
{
	struct journal **pp, *j;
	enum gh_code rc = GH_OK;
	size_t next = offset > 0 ? (size_t)offset : 0;

	pthread_mutex_lock(&mu);
	pp = find(stream, owner, run_id);
	if (!pp) {
		pthread_mutex_unlock(&mu);
		return gh_err_set(e, GH_E_NOTFOUND, "run %s has no stream to observe here (none "
				  "in the last %d minutes)", run_id, GH_JOURNAL_KEEP_MS / 60000);
	}
	j = *pp;
	j->readers++;
	for (;;) {
		/* records never move, but the array of them may grow: read
		 * each one's place under mu */
		while (next < j->n) {
			const char *rec = j->ev[next], *type, *data;
			size_t len;
			int stop;

			pthread_mutex_unlock(&mu);
			record_read(rec, &type, &data, &len);
			stop = fn(ud, (int64_t)next, type, data, len);
			pthread_mutex_lock(&mu);
			next++;
			if (stop)
				goto out;
		}
		if (j->dropped_from >= 0 && next >= (size_t)j->dropped_from) {
			rc = gh_err_set(e, GH_E_CONFLICT, "run %s: events from %zu on were too many "
					"to keep", run_id, next);
			goto out;
		}
		if (!j->live || (!j->opened && !gh_run_in_flight(NULL, run_id)))
			break;
		wait_tick();
		if (next >= j->n && idle) {
			int stop;

			pthread_mutex_unlock(&mu);
			stop = idle(ud);
			pthread_mutex_lock(&mu);
			if (stop)
				goto out;
		}
	}
out:
	j->readers--;
	pthread_mutex_unlock(&mu);
	return rc;
}

void gh_run_journal_reset(void)
{
	size_t i;

	pthread_mutex_lock(&mu);
	for (i = 0; i < BUCKETS; i++)
		while (buckets[i])
			unlink_free(&buckets[i]);
	all_bytes = 0;
	pthread_mutex_unlock(&mu);
}
