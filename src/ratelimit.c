/*
 * ratelimit.c - GCRA rate limiter over a bounded, striped hash table. See
 * ratelimit.h for the algorithm, the numbers it reports and the contract.
 *
 * Threading: NSTRIPES stripes, each a small chained hash table behind its
 * own mutex. A key always lands in the same stripe (top bits of a keyed
 * SipHash, so nobody can aim many keys at one stripe or one chain). A call
 * holds exactly one stripe lock, with one exception: when the table is
 * full, the caller sweeps dead keys out of the other stripes while holding
 * its own, but only *tries* their locks and skips busy ones, so no thread
 * ever waits while holding a lock and no deadlock is possible. The number
 * of keys is one atomic counter shared by all stripes.
 */
#include "ratelimit.h"

#include "err.h"
#include "util.h"

#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define NSTRIPES 64
#define STRIPE_BITS 6             /* NSTRIPES == 1 << STRIPE_BITS */
#define INITIAL_BUCKETS 8         /* per stripe; a power of two */
#define NS_PER_MS INT64_C(1000000)
/* A table full of live keys is swept at most this often (by the limiter's
 * clock): one sweep walks every key, and new keys fail closed meanwhile. */
#define SWEEP_GAP_NS (100 * NS_PER_MS)

struct entry {
	struct entry *next;
	uint64_t hash;
	int64_t tat;      /* theoretical arrival time, limiter clock ns */
	size_t klen;
	char key[];       /* klen bytes + NUL */
};

struct stripe {
	_Alignas(64) pthread_mutex_t mu; /* one cache line per stripe */
	struct entry **buckets;
	size_t nbuckets;                 /* power of two */
	size_t n;                        /* keys in this stripe */
};

struct gh_ratelimit {
	struct stripe *stripes;
	size_t nready;                   /* stripes initialised (for gh_rl_free) */
	size_t max_entries;
	atomic_size_t count;             /* keys in all stripes */
	_Atomic int64_t next_sweep_ns;
	gh_rl_clock_fn clock;
	void *clock_ud;
	gh_rl_shared_fn shared;          /* limits kept elsewhere (set_shared) */
	void *shared_ud;
	unsigned char hkey[crypto_shorthash_KEYBYTES];
};

/* The limit in clock units: T, burst + 1 and (burst + 1) * T = tau + T. */
struct gcra {
	int64_t t;
	int64_t b1;
	int64_t window;
};

enum op { OP_TAKE, OP_PEEK, OP_CHARGE };

static int64_t mono_clock(void *ud)
{
	(void)ud;
	return gh_mono_ns();
}

/* Saturating arithmetic: a TAT pushed absurdly far by a huge charge pins
 * at the end of time instead of wrapping into the past. */
static int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_add_overflow(a, b, &r))
		return b > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

static int64_t sat_sub(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_sub_overflow(a, b, &r))
		return b < 0 ? INT64_MAX : INT64_MIN;
	return r;
}

/* a, b >= 0 */
static int64_t sat_mul(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_mul_overflow(a, b, &r))
		return INT64_MAX;
	return r;
}

/* Nanoseconds to whole milliseconds, rounded up; 0 for the past. */
static int64_t ceil_ms(int64_t ns)
{
	if (ns <= 0)
		return 0;
	return ns / NS_PER_MS + (ns % NS_PER_MS != 0);
}

/* Checks lim (rate > 0) and converts it; -1 when out of range. T is
 * rounded up so that rate * T >= period: with T rounded down, a client
 * timing its requests to the nanosecond could get rate + burst + 1 cells
 * into one period. */
static int gcra_of(const struct gh_rl_limit *lim, struct gcra *g)
{
	int64_t p;

	if (lim->rate <= 0 || lim->burst < 0 || lim->period_ms <= 0 ||
	    lim->period_ms > INT64_MAX / NS_PER_MS)
		return -1;
	p = lim->period_ms * NS_PER_MS;
	g->t = p / lim->rate + (p % lim->rate != 0);
	if (lim->burst >= INT64_MAX / g->t)
		return -1;
	g->b1 = lim->burst + 1;
	g->window = g->t * g->b1;
	return 0;
}

static uint64_t key_hash(const struct gh_ratelimit *rl, const char *key, size_t klen)
{
	unsigned char h[crypto_shorthash_BYTES];
	uint64_t v = 0;
	size_t i;

	crypto_shorthash(h, (const unsigned char *)key, klen, rl->hkey);
	for (i = 0; i < 8; i++)
		v = v << 8 | h[i];
	return v;
}

static struct stripe *stripe_of(struct gh_ratelimit *rl, uint64_t h)
{
	return &rl->stripes[h >> (64 - STRIPE_BITS)];
}

/* The key's entry in s (locked), or NULL. */
static struct entry *find(struct stripe *s, uint64_t h, const char *key, size_t klen)
{
	struct entry *e;

	for (e = s->buckets[h & (s->nbuckets - 1)]; e; e = e->next)
		if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0)
			return e;
	return NULL;
}

/* Drops the keys of s (locked) whose TAT is not after now. */
static void prune(struct gh_ratelimit *rl, struct stripe *s, int64_t now)
{
	struct entry **link, *e;
	size_t i, freed = 0;

	for (i = 0; i < s->nbuckets; i++) {
		link = &s->buckets[i];
		while ((e = *link) != NULL) {
			if (e->tat <= now) {
				*link = e->next;
				free(e);
				freed++;
			} else {
				link = &e->next;
			}
		}
	}
	s->n -= freed;
	atomic_fetch_sub_explicit(&rl->count, freed, memory_order_relaxed);
}

/* Prunes every stripe but own (locked by the caller), at most once per
 * SWEEP_GAP_NS across all threads. Busy stripes are skipped, never waited
 * for. */
static void sweep(struct gh_ratelimit *rl, struct stripe *own, int64_t now)
{
	int64_t next = atomic_load_explicit(&rl->next_sweep_ns, memory_order_relaxed);
	size_t i;

	if (now < next || !atomic_compare_exchange_strong(&rl->next_sweep_ns, &next,
							  sat_add(now, SWEEP_GAP_NS)))
		return;
	for (i = 0; i < NSTRIPES; i++) {
		struct stripe *s = &rl->stripes[i];

		if (s == own || pthread_mutex_trylock(&s->mu) != 0)
			continue;
		prune(rl, s, now);
		pthread_mutex_unlock(&s->mu);
	}
}

/* Claims one slot of max_entries; 0 when the table is full. */
static int reserve(struct gh_ratelimit *rl)
{
	if (atomic_fetch_add_explicit(&rl->count, 1, memory_order_relaxed) < rl->max_entries)
		return 1;
	atomic_fetch_sub_explicit(&rl->count, 1, memory_order_relaxed);
	return 0;
}

/* Doubles the bucket array of s (locked). On OOM the chains just get
 * longer, which is still correct. */
static void grow(struct stripe *s)
{
	struct entry **nb, *e, *next;
	size_t n = s->nbuckets * 2, i;

	if (s->nbuckets > ((size_t)-1) / 2 / sizeof(*nb))
		return;
	nb = calloc(n, sizeof(*nb));
	if (!nb)
		return;
	for (i = 0; i < s->nbuckets; i++) {
		for (e = s->buckets[i]; e; e = next) {
			next = e->next;
			e->next = nb[e->hash & (n - 1)];
			nb[e->hash & (n - 1)] = e;
		}
	}
	free(s->buckets);
	s->buckets = nb;
	s->nbuckets = n;
}

/* Adds a key that is not in s (locked). GH_OK, GH_E_NOMEM, or
 * GH_E_UNAVAILABLE when the table stays full after dropping dead keys. */
static int add(struct gh_ratelimit *rl, struct stripe *s, uint64_t h, const char *key,
	       size_t klen, int64_t tat, int64_t now)
{
	struct entry *e;
	size_t b;

	if (!reserve(rl)) {
		prune(rl, s, now);
		if (!reserve(rl)) {
			sweep(rl, s, now);
			if (!reserve(rl))
				return GH_E_UNAVAILABLE;
		}
	}
	e = malloc(sizeof(*e) + klen + 1);
	if (!e) {
		atomic_fetch_sub_explicit(&rl->count, 1, memory_order_relaxed);
		return GH_E_NOMEM;
	}
	e->hash = h;
	e->tat = tat;
	e->klen = klen;
	memcpy(e->key, key, klen);
	e->key[klen] = '\0';
	if (s->n >= s->nbuckets)
		grow(s);
	b = h & (s->nbuckets - 1);
	e->next = s->buckets[b];
	s->buckets[b] = e;
	s->n++;
	return GH_OK;
}

/* Length of key, or -1 when NULL or over GH_RL_KEY_MAX. */
static int key_len(const char *key, size_t *klen)
{
	if (!key)
		return -1;
	*klen = strnlen(key, GH_RL_KEY_MAX + 1);
	return *klen > GH_RL_KEY_MAX ? -1 : 0;
}

static void clear(struct gh_rl_result *out)
{
	if (out)
		memset(out, 0, sizeof(*out));
}

/* Fills out from the key's TAT after the call (tat) and the TAT this
 * request needed (new_tat); formulas in ratelimit.h. */
static void report(struct gh_rl_result *out, const struct gcra *g, int64_t now, int64_t tat,
		   int64_t new_tat, int64_t quantity, int allowed)
{
	int64_t ahead = sat_sub(tat, now), room = sat_sub(g->window, ahead);

	out->allowed = allowed;
	out->limit = g->b1;
	out->remaining = room > 0 ? room / g->t : 0;
	out->reset_ms = ceil_ms(ahead);
	if (allowed)
		out->retry_after_ms = 0;
	else if (quantity > g->b1)
		out->retry_after_ms = -1;
	else
		out->retry_after_ms = ceil_ms(sat_sub(sat_sub(new_tat, g->window), now));
}

/* take, peek and charge: one stripe lock, one clock read. */
static int run(struct gh_ratelimit *rl, const char *key, const struct gh_rl_limit *lim,
	       int64_t quantity, enum op op, struct gh_rl_result *out)
{
	struct gcra g;
	struct stripe *s;
	struct entry *e;
	size_t klen;
	uint64_t h;
	int64_t now, base, new_tat, tat;
	int fits, rc = GH_OK;

	clear(out);
	if (!rl || !lim || quantity < 0 || key_len(key, &klen) != 0)
		return GH_E_BADREQ;
	if (lim->rate == 0) {
		if (out)
			out->allowed = 1;
		return GH_OK;
	}
	if (gcra_of(lim, &g) != 0)
		return GH_E_BADREQ;
	if (rl->shared) {
		rc = rl->shared(rl->shared_ud, op == OP_TAKE ? 0 : op == OP_PEEK ? 1 : 2, key, lim,
				quantity, out);
		if (rc != GH_OK)
			clear(out);
		return rc;
	}

	h = key_hash(rl, key, klen);
	s = stripe_of(rl, h);
	pthread_mutex_lock(&s->mu);
	now = rl->clock(rl->clock_ud);
	e = find(s, h, key, klen);
	base = e && e->tat > now ? e->tat : now;
	new_tat = sat_add(base, sat_mul(quantity, g.t));
	fits = sat_sub(new_tat, now) <= g.window;
	tat = base;
	if (op == OP_CHARGE || (op == OP_TAKE && fits)) {
		if (e)
			e->tat = new_tat;
		else if (new_tat > now)
			rc = add(rl, s, h, key, klen, new_tat, now);
		if (rc == GH_OK)
			tat = new_tat;
	}
	pthread_mutex_unlock(&s->mu);

	if (!out)
		return rc;
	if (rc == GH_E_UNAVAILABLE) {
		/* full of live keys: fail closed, but as a normal refusal */
		out->limit = g.b1;
		out->retry_after_ms = GH_RL_FULL_RETRY_MS;
		return GH_OK;
	}
	if (rc != GH_OK)
		return rc;
	report(out, &g, now, tat, new_tat, quantity, fits);
	return GH_OK;
}

struct gh_ratelimit *gh_rl_new(size_t max_entries)
{
	struct gh_ratelimit *rl = NULL, *ret = NULL;
	size_t i;

	if (max_entries == 0 || sodium_init() < 0)
		return NULL;
	rl = calloc(1, sizeof(*rl));
	if (!rl)
		goto out;
	rl->max_entries = max_entries;
	rl->clock = mono_clock;
	atomic_init(&rl->count, 0);
	atomic_init(&rl->next_sweep_ns, INT64_MIN);
	randombytes_buf(rl->hkey, sizeof(rl->hkey));
	rl->stripes = aligned_alloc(_Alignof(struct stripe), NSTRIPES * sizeof(struct stripe));
	if (!rl->stripes)
		goto out;
	memset(rl->stripes, 0, NSTRIPES * sizeof(struct stripe));
	for (i = 0; i < NSTRIPES; i++) {
		struct stripe *s = &rl->stripes[i];

		s->buckets = calloc(INITIAL_BUCKETS, sizeof(*s->buckets));
		if (!s->buckets)
			goto out;
		s->nbuckets = INITIAL_BUCKETS;
		if (pthread_mutex_init(&s->mu, NULL) != 0) {
			free(s->buckets);
			goto out;
		}
		rl->nready++;
	}
	ret = rl;
	rl = NULL;
out:
	gh_rl_free(rl);
	return ret;
}

void gh_rl_free(struct gh_ratelimit *rl)
{
	struct entry *e, *next;
	size_t i, b;

	if (!rl)
		return;
	for (i = 0; i < rl->nready; i++) {
		struct stripe *s = &rl->stripes[i];

		for (b = 0; b < s->nbuckets; b++) {
			for (e = s->buckets[b]; e; e = next) {
				next = e->next;
				free(e);
			}
		}
		free(s->buckets);
		pthread_mutex_destroy(&s->mu);
	}
	free(rl->stripes);
	sodium_memzero(rl->hkey, sizeof(rl->hkey));
	free(rl);
}

void gh_rl_set_clock(struct gh_ratelimit *rl, gh_rl_clock_fn fn, void *ud)
{
	if (!rl)
		return;
	rl->clock = fn ? fn : mono_clock;
	rl->clock_ud = fn ? ud : NULL;
}

void gh_rl_set_shared(struct gh_ratelimit *rl, gh_rl_shared_fn fn, void *ud)
{
	if (!rl)
		return;
	rl->shared = fn;
	rl->shared_ud = fn ? ud : NULL;
}

int gh_rl_take(struct gh_ratelimit *rl, const char *key, const struct gh_rl_limit *lim,
	       int64_t quantity, struct gh_rl_result *out)
{
	if (!out)
		return GH_E_BADREQ;
	return run(rl, key, lim, quantity, OP_TAKE, out);
}

int gh_rl_peek(struct gh_ratelimit *rl, const char *key, const struct gh_rl_limit *lim,
	       int64_t quantity, struct gh_rl_result *out)
{
	if (!out)
		return GH_E_BADREQ;
	return run(rl, key, lim, quantity, OP_PEEK, out);
}

int gh_rl_charge(struct gh_ratelimit *rl, const char *key, const struct gh_rl_limit *lim,
		 int64_t quantity)
{
	return run(rl, key, lim, quantity, OP_CHARGE, NULL);
}

size_t gh_rl_count(struct gh_ratelimit *rl)
{
	return rl ? atomic_load_explicit(&rl->count, memory_order_relaxed) : 0;
}

struct snap_item {
	int64_t tat;
	const char *key;
};

/* Copies the live keys of s under its lock, then hands them to fn with no
 * lock held. */
static int snapshot_stripe(struct gh_ratelimit *rl, struct stripe *s, int64_t now,
			   int64_t now_wall_ms, gh_rl_snapshot_fn fn, void *ud)
{
	struct snap_item *items = NULL;
	struct entry *e;
	size_t n = 0, bytes = 0, i, b;
	char *keys;
	int rc = GH_OK;

	pthread_mutex_lock(&s->mu);
	for (b = 0; b < s->nbuckets; b++) {
		for (e = s->buckets[b]; e; e = e->next) {
			if (e->tat > now) {
				n++;
				bytes += e->klen + 1;
			}
		}
	}
	if (n > 0) {
		if (n > (((size_t)-1) - bytes) / sizeof(*items))
			items = NULL;
		else
			items = malloc(n * sizeof(*items) + bytes);
		if (!items) {
			pthread_mutex_unlock(&s->mu);
			return GH_E_NOMEM;
		}
		keys = (char *)(items + n);
		i = 0;
		for (b = 0; b < s->nbuckets; b++) {
			for (e = s->buckets[b]; e; e = e->next) {
				if (e->tat <= now)
					continue;
				memcpy(keys, e->key, e->klen + 1);
				items[i].tat = e->tat;
				items[i].key = keys;
				keys += e->klen + 1;
				i++;
			}
		}
	}
	pthread_mutex_unlock(&s->mu);

	for (i = 0; i < n && rc == GH_OK; i++) {
		int64_t ahead_ms = ceil_ms(sat_sub(items[i].tat, now));

		rc = fn(ud, items[i].key, sat_add(now_wall_ms, ahead_ms));
	}
	free(items);
	return rc;
}

int gh_rl_snapshot(struct gh_ratelimit *rl, int64_t now_wall_ms, gh_rl_snapshot_fn fn,
		   void *ud)
{
	int64_t now;
	size_t i;
	int rc = GH_OK;

	if (!rl || !fn)
		return GH_E_BADREQ;
	now = rl->clock(rl->clock_ud);
	for (i = 0; i < NSTRIPES && rc == GH_OK; i++)
		rc = snapshot_stripe(rl, &rl->stripes[i], now, now_wall_ms, fn, ud);
	return rc;
}

int gh_rl_restore(struct gh_ratelimit *rl, const char *key, int64_t tat_wall_ms,
		  int64_t now_wall_ms)
{
	struct stripe *s;
	struct entry *e;
	size_t klen;
	uint64_t h;
	int64_t ahead_ms = sat_sub(tat_wall_ms, now_wall_ms), now, tat;
	int rc = GH_OK;

	if (!rl || key_len(key, &klen) != 0)
		return GH_E_BADREQ;
	if (ahead_ms <= 0)
		return GH_OK;
	h = key_hash(rl, key, klen);
	s = stripe_of(rl, h);
	pthread_mutex_lock(&s->mu);
	now = rl->clock(rl->clock_ud);
	tat = sat_add(now, sat_mul(ahead_ms, NS_PER_MS));
	e = find(s, h, key, klen);
	if (!e)
		rc = add(rl, s, h, key, klen, tat, now);
	else if (e->tat < tat)
		e->tat = tat;
	pthread_mutex_unlock(&s->mu);
	return rc;
}
