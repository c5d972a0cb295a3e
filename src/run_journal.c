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

#define BLOCK_MIN 512            /* the first block of a journal's records */
#define BLOCK_MAX ((size_t)64 << 10) /* blocks double up to this */
#define PREV_MAX 1024            /* longest data a record is coded against */
#define TYPES_MAX 255            /* interned event types; code 255: inline */

/* A journal's events are packed one after another into blocks, each
 * event a record coded against the data of the record before it, which
 * a stream's events mostly repeat ({"id":"0","text":" w00041"} after
 * {"id":"0","text":" w00040"} is 5 bytes, not 40):
 *
 *   type    1 byte: an index into types[], or 255 and the type, NUL-ended
 *   p, s    varints: bytes of the previous data kept in front (p) and at
 *           the end (s)
 *   m       varint: the length of what is new in between, then its bytes
 *
 * data = prev[0, p) + new + prev[prev_len - s, prev_len). A writer that
 * does not hold the previous data (too long to keep, or a new turn) codes
 * p = s = 0. A block never moves once made and a record is never changed,
 * so a reader decodes without holding mu; it rebuilds each event's data
 * in its own buffers, the previous one kept for the next. A thousand
 * streams of small text deltas cost a few bytes per event, not copies of
 * the same envelope. */
struct block {
	struct block *next;
	size_t used, cap;
	unsigned char data[];
};

struct journal {
	struct journal *next;
	char stream[GH_JOURNAL_STREAM_MAX];
	char owner[GH_NAME_MAX + 1];
	char run_id[GH_NAME_MAX + 1];   /* an engine run id, or a client's runId */
	struct block *blocks, *last;
	size_t n, bytes;
	char *prev;             /* the last event's data, when kept (writer's) */
	size_t prev_len, prev_cap;
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
static char *types[TYPES_MAX];  /* interned event types, kept until reset */
static int ntypes;

static size_t bucket_of(const char *run_id)
{
	return gh_hash_str(run_id) % BUCKETS;
}

static void journal_free(struct journal *j)
{
	struct block *b, *next;

	for (b = j->blocks; b; b = next) {
		next = b->next;
		free(b);
	}
	free(j->prev);
	free(j);
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

/* The code of type in types[], interned on first use; TYPES_MAX when the
 * table is full or out of memory (the record then carries the type).
 * Under mu. */
static int type_code(const char *type)
{
	int i;

	for (i = 0; i < ntypes; i++)
		if (!strcmp(types[i], type))
			return i;
	if (ntypes == TYPES_MAX || !(types[ntypes] = strdup(type)))
		return TYPES_MAX;
	return ntypes++;
}

static size_t varint_len(size_t v)
{
	size_t n = 1;

	for (; v >= 0x80; v >>= 7)
		n++;
	return n;
}

static unsigned char *varint_put(unsigned char *p, size_t v)
{
	for (; v >= 0x80; v >>= 7)
		*p++ = (unsigned char)(v | 0x80);
	*p++ = (unsigned char)v;
	return p;
}

/* Reads a varint at *p (below end) into *v; -1 on a malformed one. */
static int varint_get(const unsigned char **p, const unsigned char *end, size_t *v)
{
	size_t x = 0;
	int shift;

	for (shift = 0; *p < end && shift < 63; shift += 7) {
		unsigned char c = *(*p)++;

		x |= (size_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -1;
}

/* Keeps data as the previous event's for the next record, or forgets it
 * (too long, or out of memory). */
static void keep_prev(struct journal *j, const char *data, size_t len)
{
	if (len > PREV_MAX) {
		j->prev_len = 0;
		return;
	}
	if (len > j->prev_cap) {
		size_t cap = len < 64 ? 64 : len * 2 > PREV_MAX ? PREV_MAX : len * 2;
		char *p = realloc(j->prev, cap);

		if (!p) {
			j->prev_len = 0;
			return;
		}
		j->prev = p;
		j->prev_cap = cap;
	}
	if (len)
		memcpy(j->prev, data, len);
	j->prev_len = len;
}

/* A turn ended: the next one's first record is coded whole. */
static void forget_prev(struct journal *j)
{
	free(j->prev);
	j->prev = NULL;
	j->prev_len = j->prev_cap = 0;
}

/* Appends under mu; -1 when the event could not be kept. */
static int append(struct journal *j, const char *type, const char *data, size_t len)
{
	size_t tlen = strlen(type), p = 0, s = 0, m, need, lim;
	int code = type_code(type);
	struct block *b = j->last;
	unsigned char *w;

	if (j->dropped_from >= 0 || j->bytes + len > GH_JOURNAL_RUN_BYTES)
		return -1;
	lim = len < j->prev_len ? len : j->prev_len;
	while (p < lim && data[p] == j->prev[p])
		p++;
	while (s < lim - p && data[len - 1 - s] == j->prev[j->prev_len - 1 - s])
		s++;
	m = len - p - s;
	need = 1 + (code == TYPES_MAX ? tlen + 1 : 0) + varint_len(p) + varint_len(s) +
	       varint_len(m) + m;
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
	w = b->data + b->used;
	*w++ = (unsigned char)code;
	if (code == TYPES_MAX) {
		memcpy(w, type, tlen + 1);
		w += tlen + 1;
	}
	w = varint_put(w, p);
	w = varint_put(w, s);
	w = varint_put(w, m);
	if (m)
		memcpy(w, data + p, m);
	b->used += need;
	j->n++;
	j->bytes += len + tlen;
	all_bytes += len + tlen;
	keep_prev(j, data, len);
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
		if (ends) {
			j->ended_at = now;
			forget_prev(j);
		}
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
		forget_prev(*pp);
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

/* A reader's place in a journal and the data it rebuilt. */
struct cursor {
	struct block *b;        /* the block of the next record (NULL: the first) */
	size_t off;
	char *cur, *prev;       /* this event's data and the one before */
	size_t cur_cap, prev_cap, prev_len;
};

/* Decodes the record at c (complete, written before the reader learned
 * of it) into c->cur and steps past it; -1 when it is malformed or out of
 * memory. used: how much of its block was written, read under mu. */
static int decode(struct cursor *c, size_t used, const char **type, size_t *len)
{
	const unsigned char *rp = c->b->data + c->off, *end = c->b->data + used;
	size_t p, s, m, n;
	char *t;

	if (rp >= end)
		return -1;
	if (*rp == TYPES_MAX) {
		const unsigned char *nul = memchr(rp + 1, '\0', (size_t)(end - rp - 1));

		if (!nul)
			return -1;
		*type = (const char *)rp + 1;
		rp = nul + 1;
	} else {
		*type = types[*rp++];   /* interned before the record was written */
	}
	if (varint_get(&rp, end, &p) || varint_get(&rp, end, &s) || varint_get(&rp, end, &m) ||
	    p > c->prev_len || s > c->prev_len - p || m > (size_t)(end - rp))
		return -1;
	n = p + m + s;
	if (n + 1 > c->cur_cap) {
		size_t cap = n + 1 < 256 ? 256 : n + 1;

		if (!(t = realloc(c->cur, cap)))
			return -1;
		c->cur = t;
		c->cur_cap = cap;
	}
	if (p)
		memcpy(c->cur, c->prev, p);
	if (m)
		memcpy(c->cur + p, rp, m);
	if (s)
		memcpy(c->cur + p + m, c->prev + c->prev_len - s, s);
	c->cur[n] = '\0';
	c->off = (size_t)(rp + m - c->b->data);
	*len = n;
	return 0;
}

/* After decode: this event's data becomes the previous one (the two
 * buffers swap roles). */
static void step(struct cursor *c, size_t len)
{
	char *t = c->prev;
	size_t cap = c->prev_cap;

	c->prev = c->cur;
	c->prev_cap = c->cur_cap;
	c->prev_len = len;
	c->cur = t;
	c->cur_cap = cap;
}

enum gh_code gh_run_journal_follow(const char *stream, const char *owner, const char *run_id,
				   int64_t offset,
				   int (*fn)(void *ud, int64_t seq, const char *type,
					     const char *data, size_t len),
				   int (*idle)(void *ud), void *ud, struct gh_err *e)
{
	struct journal **pp, *j;
	struct cursor c;
	enum gh_code rc = GH_OK;
	size_t next = 0, from = offset > 0 ? (size_t)offset : 0;

	memset(&c, 0, sizeof(c));
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
		/* each record is decoded from the one before, so the reading
		 * starts at the first even when the caller skips some; the
		 * next record's block and how much of it is written are read
		 * under mu */
		while (next < j->n) {
			const char *type;
			size_t len, used;
			int stop = 0, bad;

			if (!c.b) {
				c.b = j->blocks;
				c.off = 0;
			}
			while (c.b && c.off >= c.b->used) {
				c.b = c.b->next;
				c.off = 0;
			}
			if (!c.b) {
				rc = gh_err_set(e, GH_E_INTERNAL, "run %s: event %zu is missing", run_id,
						next);
				goto out;
			}
			used = c.b->used;
			pthread_mutex_unlock(&mu);
			bad = decode(&c, used, &type, &len);
			if (!bad) {
				if (next >= from)
					stop = fn(ud, (int64_t)next, type, c.cur, len);
				step(&c, len);
			}
			pthread_mutex_lock(&mu);
			if (bad) {
				rc = gh_err_set(e, GH_E_NOMEM, "run %s: out of memory reading event %zu",
						run_id, next);
				goto out;
			}
			next++;
			if (stop)
				goto out;
		}
		if (j->dropped_from >= 0 && next >= (size_t)j->dropped_from) {
			rc = gh_err_set(e, GH_E_CONFLICT, "run %s: events from %lld on were too many "
					"to keep", run_id, (long long)j->dropped_from);
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
	free(c.cur);
	free(c.prev);
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
	for (i = 0; i < (size_t)ntypes; i++)
		free(types[i]);
	ntypes = 0;
	pthread_mutex_unlock(&mu);
}
