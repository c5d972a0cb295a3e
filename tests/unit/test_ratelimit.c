/*
 * test_ratelimit.c - GCRA decisions and reported numbers (redis-cell style
 * tables on an injected clock), the "at most rate + burst per period"
 * bound on random and adversarial arrivals, charges, snapshots across a
 * restart, the bounded table, and exactness under concurrent takes.
 * The concurrency tests are the ones to run under -fsanitize=thread.
 */
#include "ratelimit.h"

#include "err.h"
#include "t.h"
#include "util.h"

#include <pthread.h>
#include <stdatomic.h>

#define MS INT64_C(1000000)
#define SEC (1000 * MS)
#define START (INT64_C(5000) * SEC) /* arbitrary monotonic origin */

static int64_t fixed_clock(void *ud)
{
	return *(const int64_t *)ud;
}

/* A clock shared by threads that moves on by step ns at every read. */
struct moving_clock {
	_Atomic int64_t ns;
	int64_t step;
};

static int64_t moving_clock_read(void *ud)
{
	struct moving_clock *c = ud;

	return atomic_fetch_add(&c->ns, c->step);
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * UINT64_C(2685821657736338717);
}

/* [0, n) */
static int64_t rng_below(uint64_t *s, int64_t n)
{
	return n <= 0 ? 0 : (int64_t)(rng_next(s) % (uint64_t)n);
}

/* ---- tables ---- */

struct step {
	int64_t at_ms;      /* clock = START + at_ms */
	int64_t quantity;
	int allowed;
	int64_t remaining;
	int64_t reset_ms;
	int64_t retry_ms;
};

static void run_table(const struct gh_rl_limit *lim, const struct step *st, size_t n)
{
	struct gh_ratelimit *rl = gh_rl_new(16);
	struct gh_rl_result r;
	int64_t now = START;
	size_t i;
	int rc;

	T_ASSERT(rl);
	gh_rl_set_clock(rl, fixed_clock, &now);
	for (i = 0; i < n; i++) {
		now = START + st[i].at_ms * MS;
		rc = gh_rl_take(rl, "k", lim, st[i].quantity, &r);
		if (rc != GH_OK || r.allowed != st[i].allowed || r.remaining != st[i].remaining ||
		    r.reset_ms != st[i].reset_ms || r.retry_after_ms != st[i].retry_ms ||
		    r.limit != lim->burst + 1) {
			gh_rl_free(rl);
			T_FAIL("step %zu (t=%" PRId64 "ms n=%" PRId64 "): rc=%d allowed=%d "
			       "limit=%" PRId64 " remaining=%" PRId64 " reset=%" PRId64
			       " retry=%" PRId64 ", expected allowed=%d remaining=%" PRId64
			       " reset=%" PRId64 " retry=%" PRId64,
			       i, st[i].at_ms, st[i].quantity, rc, r.allowed, r.limit, r.remaining,
			       r.reset_ms, r.retry_after_ms, st[i].allowed, st[i].remaining,
			       st[i].reset_ms, st[i].retry_ms);
		}
	}
	gh_rl_free(rl);
}

/* The table from redis-cell / throttled: 1 per second, burst 4. */
static void test_table_redis_cell(void)
{
	static const struct gh_rl_limit lim = {1, 1000, 4};
	static const struct step st[] = {
		/* a request larger than burst + 1 never passes */
		{0, 6, 0, 5, 0, -1},
		/* burst + 1 at once, then refused for one interval */
		{0, 1, 1, 4, 1000, 0},
		{0, 1, 1, 3, 2000, 0},
		{0, 1, 1, 2, 3000, 0},
		{0, 1, 1, 1, 4000, 0},
		{0, 1, 1, 0, 5000, 0},
		{0, 1, 0, 0, 5000, 1000},
		/* it drains one cell per second */
		{3000, 1, 1, 2, 3000, 0},
		{3100, 1, 1, 1, 3900, 0},
		{4000, 1, 1, 1, 4000, 0},
		{8000, 1, 1, 4, 1000, 0},
		{9500, 1, 1, 4, 1000, 0},
		/* quantity 0 only looks */
		{9500, 0, 1, 4, 1000, 0},
		/* quantity 2 takes two cells */
		{9500, 2, 1, 2, 3000, 0},
		/* and a big one waits until there is room for all of it */
		{9500, 5, 0, 2, 3000, 3000},
		{12499, 5, 0, 4, 1, 1},
		{12500, 5, 1, 0, 5000, 0},
	};

	run_table(&lim, st, GH_ARRAY_LEN(st));
}

/* 600 requests per minute with burst 20, the example from the config:
 * T = 100 ms, 21 pass at once. */
static void test_table_requests_per_minute(void)
{
	static const struct gh_rl_limit lim = {600, 60000, 20};
	struct step st[25];
	size_t i;

	for (i = 0; i < 21; i++)
		st[i] = (struct step){0, 1, 1, (int64_t)(20 - i), (int64_t)(i + 1) * 100, 0};
	st[21] = (struct step){0, 1, 0, 0, 2100, 100};
	st[22] = (struct step){99, 1, 0, 0, 2001, 1};
	st[23] = (struct step){100, 1, 1, 0, 2100, 0};
	st[24] = (struct step){2200, 1, 1, 20, 100, 0};
	run_table(&lim, st, GH_ARRAY_LEN(st));
}

/* 7 per minute: T = ceil(60 s / 7) = 8571428572 ns, which is not a whole
 * number of ms; times are reported rounded up. */
static void test_table_uneven_interval(void)
{
	static const struct gh_rl_limit lim = {7, 60000, 2};
	static const struct step st[] = {
		{0, 1, 1, 2, 8572, 0},      /* reset = T = 8571.428572 ms */
		{0, 1, 1, 1, 17143, 0},     /* 2T */
		{0, 1, 1, 0, 25715, 0},     /* 3T = 25714.285716 ms */
		{0, 1, 0, 0, 25715, 8572},  /* waits one T */
		{8571, 1, 0, 0, 17144, 1},  /* 0.428572 ms short */
		{8572, 1, 1, 0, 25714, 0},  /* 4T - 8572 ms = 25713.714288 ms */
		{60000, 1, 1, 2, 8572, 0},  /* idle again */
	};

	run_table(&lim, st, GH_ARRAY_LEN(st));
}

/* ---- the per-period bound ---- */

struct arrival {
	int64_t at;
	int64_t quantity;
};

struct sim {
	struct gh_ratelimit *rl;
	const struct gh_rl_limit *lim;
	int64_t now;
	struct arrival *ok;  /* allowed takes, in time order */
	size_t nok, cap;
	int failed;
};

static void sim_take(struct sim *sm, int64_t at, int64_t quantity)
{
	struct gh_rl_result r;

	if (at > sm->now)
		sm->now = at;
	if (gh_rl_take(sm->rl, "k", sm->lim, quantity, &r) != GH_OK || sm->nok == sm->cap) {
		sm->failed = 1;
		return;
	}
	if (r.allowed)
		sm->ok[sm->nok++] = (struct arrival){sm->now, quantity};
}

/* From idle at t0: burst + 1 takes, then probes a few ns either side of
 * each ideal emission time t0 + k * P / R. A limiter that lets a cell
 * through early shows up here, which random timing would almost never
 * hit. Returns the time after the probes. */
static int64_t sim_probe(struct sim *sm, int64_t t0, int64_t periods)
{
	int64_t p = sm->lim->period_ms * MS, k, d, ideal, i;

	for (i = 0; i <= sm->lim->burst; i++)
		sim_take(sm, t0, 1);
	for (k = 1; k <= sm->lim->rate * periods; k++) {
		ideal = t0 + k * p / sm->lim->rate;
		for (d = -3; d <= 3 + (k < 8 ? k : 8); d++)
			sim_take(sm, ideal + d, 1);
	}
	return t0 + periods * p;
}

/* Largest sum of allowed cells in any half-open window [t, t + P). */
static int64_t max_in_window(const struct sim *sm)
{
	int64_t p = sm->lim->period_ms * MS, sum = 0, best = 0;
	size_t i, j = 0;

	for (i = 0; i < sm->nok; i++) {
		if (j < i) {
			j = i;
			sum = 0;
		}
		while (j < sm->nok && sm->ok[j].at < sm->ok[i].at + p)
			sum += sm->ok[j++].quantity;
		if (sum > best)
			best = sum;
		sum -= sm->ok[i].quantity;
	}
	return best;
}

static void test_window_bound(void)
{
	static const struct gh_rl_limit lims[] = {
		{7, 60000, 2},    /* T not a whole number of ns */
		{600, 60000, 20}, /* the documented example */
		{3, 1000, 0},     /* no burst */
		{13, 1000, 4},
		{1000, 1000, 5},
	};
	size_t li;

	for (li = 0; li < GH_ARRAY_LEN(lims); li++) {
		const struct gh_rl_limit *lim = &lims[li];
		int64_t p = lim->period_ms * MS, t = p / lim->rate, at, best, i;
		uint64_t seed = UINT64_C(0x9e3779b97f4a7c15) + li;
		struct sim sm = {0};

		sm.rl = gh_rl_new(16);
		sm.lim = lim;
		sm.cap = 200000;
		sm.ok = calloc(sm.cap, sizeof(*sm.ok));
		T_ASSERT(sm.rl && sm.ok);
		gh_rl_set_clock(sm.rl, fixed_clock, &sm.now);

		at = sim_probe(&sm, START, 2);
		/* random arrivals: same-instant bursts, gaps around T, idle spells */
		for (i = 0; i < 30000; i++) {
			int64_t kind = rng_below(&seed, 100), q = 1;

			if (kind < 35)
				;
			else if (kind < 75)
				at += rng_below(&seed, 2 * t + 1);
			else if (kind < 97)
				at += rng_below(&seed, t / 10 + 1);
			else
				at += rng_below(&seed, 2 * p);
			if (rng_below(&seed, 10) == 0)
				q = 1 + rng_below(&seed, lim->burst + 2);
			sim_take(&sm, at, q);
		}
		sim_probe(&sm, sm.now + 3 * p, 2);

		best = max_in_window(&sm);
		free(sm.ok);
		gh_rl_free(sm.rl);
		T_ASSERT(!sm.failed);
		if (best > lim->rate + lim->burst)
			T_FAIL("rate %" PRId64 "/%" PRId64 "ms burst %" PRId64 ": %" PRId64
			       " cells in one period", lim->rate, lim->period_ms, lim->burst, best);
		/* the probes reach the bound: the limiter is not stricter than it says */
		T_EQ_INT(best, lim->rate + lim->burst);
	}
}

/* A client retrying every millisecond for ten minutes at 600/min, burst
 * 20, gets 21 at once and then exactly one per 100 ms. */
static void test_steady_rate(void)
{
	static const struct gh_rl_limit lim = {600, 60000, 20};
	struct gh_ratelimit *rl = gh_rl_new(4);
	struct gh_rl_result r;
	int64_t now = START, ms, allowed = 0, first_minute = 0;

	T_ASSERT(rl);
	gh_rl_set_clock(rl, fixed_clock, &now);
	for (ms = 0; ms < 600000; ms++) {
		now = START + ms * MS;
		T_EQ_INT(gh_rl_take(rl, "k", &lim, 1, &r), GH_OK);
		allowed += r.allowed;
		if (ms < 60000)
			first_minute += r.allowed;
	}
	gh_rl_free(rl);
	T_EQ_INT(first_minute, 600 + 20);
	T_EQ_INT(allowed, 21 + 5999);
}

static void test_quantity_over_burst_never_allowed(void)
{
	static const struct gh_rl_limit lim = {10, 1000, 4};
	struct gh_ratelimit *rl = gh_rl_new(4);
	struct gh_rl_result r;
	int64_t now = START;
	int i;

	T_ASSERT(rl);
	gh_rl_set_clock(rl, fixed_clock, &now);
	for (i = 0; i < 50; i++) {
		now = START + i * 7 * SEC;
		T_EQ_INT(gh_rl_take(rl, "k", &lim, 6, &r), GH_OK);
		T_EQ_INT(r.allowed, 0);
		T_EQ_INT(r.retry_after_ms, -1);
		T_EQ_INT(r.remaining, 5);
		T_EQ_INT(gh_rl_peek(rl, "k", &lim, 6, &r), GH_OK);
		T_EQ_INT(r.allowed, 0);
		T_EQ_INT(r.retry_after_ms, -1);
	}
	/* refusals store nothing */
	T_EQ_INT(gh_rl_count(rl), 0);
	/* burst + 1 in one go is fine, from idle */
	T_EQ_INT(gh_rl_take(rl, "k", &lim, 5, &r), GH_OK);
	T_EQ_INT(r.allowed, 1);
	T_EQ_INT(r.remaining, 0);
	T_EQ_INT(r.reset_ms, 500);
	gh_rl_free(rl);
}

static void test_peek_consumes_nothing(void)
{
	static const struct gh_rl_limit lim = {10, 1000, 2};
	struct gh_ratelimit *rl = gh_rl_new(4);
	struct gh_rl_result r;
	int64_t now = START;
	int i;

	T_ASSERT(rl);
	gh_rl_set_clock(rl, fixed_clock, &now);
	for (i = 0; i < 100; i++) {
		T_EQ_INT(gh_rl_peek(rl, "k", &lim, 1, &r), GH_OK);
		T_EQ_INT(r.allowed, 1);
		T_EQ_INT(r.remaining, 3);
		T_EQ_INT(r.reset_ms, 0);
	}
	T_EQ_INT(gh_rl_count(rl), 0);
	for (i = 0; i < 3; i++) {
		T_EQ_INT(gh_rl_take(rl, "k", &lim, 1, &r), GH_OK);
		T_EQ_INT(r.allowed, 1);
	}
	T_EQ_INT(gh_rl_peek(rl, "k", &lim, 1, &r), GH_OK);
	T_EQ_INT(r.allowed, 0);
	T_EQ_INT(r.remaining, 0);
	T_EQ_INT(r.reset_ms, 300);
	T_EQ_INT(r.retry_after_ms, 100);
	gh_rl_free(rl);
}

/* Tokens per minute: 1000/min with a 1000-token bucket (T = 60 ms). The
 * response's usage is charged after the fact and later takes wait it off. */
static void test_charge_then_take(void)
{
	static const struct gh_rl_limit lim = {1000, 60000, 999};
	struct gh_ratelimit *rl = gh_rl_new(4);
	struct gh_rl_result r;
	int64_t now = START;

	T_ASSERT(rl);
	gh_rl_set_clock(rl, fixed_clock, &now);
	T_EQ_INT(gh_rl_take(rl, "tok:a", &lim, 500, &r), GH_OK);
	T_EQ_INT(r.allowed, 1);
	T_EQ_INT(r.remaining, 500);

	/* 3000 tokens used: the TAT is now 3500 * 60 ms = 210 s ahead */
	T_EQ_INT(gh_rl_charge(rl, "tok:a", &lim, 3000), GH_OK);
	T_EQ_INT(gh_rl_take(rl, "tok:a", &lim, 1, &r), GH_OK);
	T_EQ_INT(r.allowed, 0);
	T_EQ_INT(r.remaining, 0);
	T_EQ_INT(r.reset_ms, 210000);
	/* 3501 T - 1000 T = 2501 * 60 ms */
	T_EQ_INT(r.retry_after_ms, 150060);

	now = START + 150059 * MS;
	T_EQ_INT(gh_rl_take(rl, "tok:a", &lim, 1, &r), GH_OK);
	T_EQ_INT(r.allowed, 0);
	T_EQ_INT(r.retry_after_ms, 1);
	now = START + 150060 * MS;
	T_EQ_INT(gh_rl_take(rl, "tok:a", &lim, 1, &r), GH_OK);
	T_EQ_INT(r.allowed, 1);
	T_EQ_INT(r.remaining, 0);

	/* a charge on a key nobody took from yet still counts */
	T_EQ_INT(gh_rl_charge(rl, "tok:b", &lim, 1500), GH_OK);
	T_EQ_INT(gh_rl_take(rl, "tok:b", &lim, 1, &r), GH_OK);
	T_EQ_INT(r.allowed, 0);
	T_EQ_INT(r.retry_after_ms, 501 * 60);
	/* a charge of 0 changes nothing */
	T_EQ_INT(gh_rl_charge(rl, "tok:c", &lim, 0), GH_OK);
	T_EQ_INT(gh_rl_take(rl, "tok:c", &lim, 1000, &r), GH_OK);
	T_EQ_INT(r.allowed, 1);
	/* an absurd charge pins the key rather than wrapping around */
	T_EQ_INT(gh_rl_charge(rl, "tok:d", &lim, INT64_MAX / 2), GH_OK);
	now = START + 1000 * SEC;
	T_EQ_INT(gh_rl_take(rl, "tok:d", &lim, 1, &r), GH_OK);
	T_EQ_INT(r.allowed, 0);
	T_ASSERT(r.retry_after_ms > 1000000000);
	gh_rl_free(rl);
}

/* ---- snapshot / restore ---- */

struct saved {
	char key[GH_RL_KEY_MAX + 1];
	int64_t tat_wall_ms;
};

struct saved_list {
	struct saved items[16];
	size_t n;
	int stop_after;  /* 0 = never */
};

static int save_one(void *ud, const char *key, int64_t tat_wall_ms)
{
	struct saved_list *l = ud;

	if (l->n == GH_ARRAY_LEN(l->items))
		return GH_E_TOOBIG;
	gh_strlcpy(l->items[l->n].key, key, sizeof(l->items[l->n].key));
	l->items[l->n].tat_wall_ms = tat_wall_ms;
	l->n++;
	return l->stop_after && (int)l->n >= l->stop_after ? GH_E_CANCELLED : 0;
}

static const struct saved *saved_find(const struct saved_list *l, const char *key)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (strcmp(l->items[i].key, key) == 0)
			return &l->items[i];
	return NULL;
}

static void test_snapshot_restore(void)
{
	static const struct gh_rl_limit lreq = {10, 1000, 4};      /* T = 100 ms */
	static const struct gh_rl_limit ltool = {5, 60000, 0};     /* T = 12 s */
	static const struct gh_rl_limit ltok = {1000, 60000, 999}; /* T = 60 ms */
	static const char *keys[] = {"req:a", "tool:a:send_email", "tok:a"};
	static const struct gh_rl_limit *lims[] = {&lreq, &ltool, &ltok};
	static const int64_t qty[] = {1, 1, 300};
	const int64_t wall = INT64_C(1700000000000);
	struct gh_ratelimit *a = gh_rl_new(32), *b = gh_rl_new(32);
	struct saved_list saved = {0}, partial = {0};
	struct gh_rl_result ra, rb;
	int64_t now_a = START, now_b = 42 * SEC;
	const struct saved *sv;
	int i, allowed = 0, denied = 0;
	size_t k;

	T_ASSERT(a && b);
	gh_rl_set_clock(a, fixed_clock, &now_a);
	gh_rl_set_clock(b, fixed_clock, &now_b);

	T_EQ_INT(gh_rl_take(a, "req:idle", &lreq, 1, &ra), GH_OK);
	now_a += 10 * SEC; /* req:idle is in the past now */
	for (i = 0; i < 3; i++)
		T_EQ_INT(gh_rl_take(a, "req:a", &lreq, 1, &ra), GH_OK);
	T_EQ_INT(gh_rl_take(a, "tool:a:send_email", &ltool, 1, &ra), GH_OK);
	T_EQ_INT(gh_rl_charge(a, "tok:a", &ltok, 5000), GH_OK);

	T_EQ_INT(gh_rl_snapshot(a, wall, save_one, &saved), GH_OK);
	T_EQ_INT(saved.n, 3);
	T_ASSERT(saved_find(&saved, "req:idle") == NULL);
	sv = saved_find(&saved, "req:a");
	T_ASSERT(sv);
	T_EQ_INT(sv->tat_wall_ms, wall + 300);
	sv = saved_find(&saved, "tool:a:send_email");
	T_ASSERT(sv);
	T_EQ_INT(sv->tat_wall_ms, wall + 12000);
	sv = saved_find(&saved, "tok:a");
	T_ASSERT(sv);
	T_EQ_INT(sv->tat_wall_ms, wall + 300000);

	/* the callback can stop the walk; its code comes back */
	partial.stop_after = 1;
	T_EQ_INT(gh_rl_snapshot(a, wall, save_one, &partial), GH_E_CANCELLED);
	T_EQ_INT(partial.n, 1);

	/* one second later, a fresh process with another monotonic origin */
	now_a += 1 * SEC;
	for (k = 0; k < saved.n; k++)
		T_EQ_INT(gh_rl_restore(b, saved.items[k].key, saved.items[k].tat_wall_ms,
				       wall + 1000), GH_OK);
	/* req:a (300 ms ahead) went idle during the second of downtime */
	T_EQ_INT(gh_rl_count(b), 2);
	T_EQ_INT(gh_rl_restore(b, "req:gone", wall + 500, wall + 1000), GH_OK);
	T_EQ_INT(gh_rl_count(b), 2);

	for (i = 0; i < 40; i++) {
		for (k = 0; k < GH_ARRAY_LEN(keys); k++) {
			T_EQ_INT(gh_rl_take(a, keys[k], lims[k], qty[k], &ra), GH_OK);
			T_EQ_INT(gh_rl_take(b, keys[k], lims[k], qty[k], &rb), GH_OK);
			if (ra.allowed != rb.allowed || ra.remaining != rb.remaining ||
			    ra.reset_ms != rb.reset_ms || ra.retry_after_ms != rb.retry_after_ms)
				T_FAIL("round %d key %s: before restart allowed=%d remaining=%"
				       PRId64 " reset=%" PRId64 " retry=%" PRId64
				       ", after allowed=%d remaining=%" PRId64 " reset=%" PRId64
				       " retry=%" PRId64, i, keys[k], ra.allowed, ra.remaining,
				       ra.reset_ms, ra.retry_after_ms, rb.allowed, rb.remaining,
				       rb.reset_ms, rb.retry_after_ms);
			allowed += ra.allowed;
			denied += !ra.allowed;
		}
		now_a += 250 * MS;
		now_b += 250 * MS;
	}
	/* the comparison saw both outcomes */
	T_ASSERT(allowed > 0 && denied > 0);

	/* restoring an earlier TAT over a live key keeps the later one (1 s) */
	T_EQ_INT(gh_rl_restore(b, "tool:a:send_email", wall + 1, wall), GH_OK);
	T_EQ_INT(gh_rl_peek(b, "tool:a:send_email", &ltool, 1, &rb), GH_OK);
	T_EQ_INT(rb.reset_ms, 1000);
	/* and a later one replaces it */
	T_EQ_INT(gh_rl_restore(b, "tool:a:send_email", wall + 5000, wall), GH_OK);
	T_EQ_INT(gh_rl_peek(b, "tool:a:send_email", &ltool, 1, &rb), GH_OK);
	T_EQ_INT(rb.reset_ms, 5000);
	gh_rl_free(a);
	gh_rl_free(b);
}

/* ---- the bounded table ---- */

static void test_max_entries(void)
{
	static const struct gh_rl_limit lim = {1, 60000, 0};
	struct gh_ratelimit *rl = gh_rl_new(4);
	struct gh_rl_result r;
	int64_t now = START;
	char key[32];
	int i;

	T_ASSERT(rl);
	gh_rl_set_clock(rl, fixed_clock, &now);
	for (i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		T_EQ_INT(gh_rl_take(rl, key, &lim, 1, &r), GH_OK);
		T_EQ_INT(r.allowed, 1);
	}
	T_EQ_INT(gh_rl_count(rl), 4);

	/* full of live keys: a new key fails closed */
	T_EQ_INT(gh_rl_take(rl, "k4", &lim, 1, &r), GH_OK);
	T_EQ_INT(r.allowed, 0);
	T_EQ_INT(r.retry_after_ms, GH_RL_FULL_RETRY_MS);
	T_EQ_INT(r.limit, 1);
	T_EQ_INT(r.remaining, 0);
	T_EQ_INT(gh_rl_charge(rl, "k4", &lim, 1), GH_E_UNAVAILABLE);
	T_EQ_INT(gh_rl_restore(rl, "k4", 2000, 1000), GH_E_UNAVAILABLE);
	T_EQ_INT(gh_rl_count(rl), 4);
	/* known keys keep their ordinary answers */
	T_EQ_INT(gh_rl_take(rl, "k0", &lim, 1, &r), GH_OK);
	T_EQ_INT(r.allowed, 0);
	T_EQ_INT(r.retry_after_ms, 60000);

	/* a minute later every key is back to idle and may be dropped */
	now += 60 * SEC;
	for (i = 4; i < 8; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		T_EQ_INT(gh_rl_take(rl, key, &lim, 1, &r), GH_OK);
		T_EQ_INT(r.allowed, 1);
	}
	T_EQ_INT(gh_rl_count(rl), 4);
	gh_rl_free(rl);
}

/* The same with enough keys that dead ones sit in every stripe. */
static void test_max_entries_many(void)
{
	static const struct gh_rl_limit lim = {1, 1000, 0};
	struct gh_ratelimit *rl = gh_rl_new(1000);
	struct gh_rl_result r;
	int64_t now = START;
	char key[32];
	int i, round;

	T_ASSERT(rl);
	gh_rl_set_clock(rl, fixed_clock, &now);
	for (round = 0; round < 3; round++) {
		for (i = 0; i < 1000; i++) {
			snprintf(key, sizeof(key), "r%d:%d", round, i);
			T_EQ_INT(gh_rl_take(rl, key, &lim, 1, &r), GH_OK);
			if (!r.allowed)
				T_FAIL("round %d key %d refused with %zu keys held", round, i,
				       gh_rl_count(rl));
		}
		T_EQ_INT(gh_rl_count(rl), 1000);
		T_EQ_INT(gh_rl_take(rl, "one-more", &lim, 1, &r), GH_OK);
		T_EQ_INT(r.allowed, 0);
		T_EQ_INT(r.retry_after_ms, GH_RL_FULL_RETRY_MS);
		now += 1 * SEC;
	}
	gh_rl_free(rl);
}

static void test_bad_arguments(void)
{
	static const struct gh_rl_limit ok = {1, 1000, 0};
	static const struct gh_rl_limit bad[] = {
		{-1, 1000, 0},
		{1, 0, 0},
		{1, -5, 0},
		{1, 1000, -1},
		{1, INT64_MAX / 1000, 0},       /* period overflows ns */
		{1, 1000, INT64_MAX / 1000},    /* (burst + 1) * T overflows */
	};
	static const struct gh_rl_limit unlimited = {0, 0, 0};
	struct gh_ratelimit *rl = gh_rl_new(4);
	struct gh_rl_result r;
	char key[GH_RL_KEY_MAX + 2];
	size_t i;

	T_ASSERT(rl);
	T_ASSERT(gh_rl_new(0) == NULL);
	gh_rl_free(NULL);

	memset(key, 'x', sizeof(key) - 1);
	key[sizeof(key) - 1] = '\0'; /* 257 bytes */
	T_EQ_INT(gh_rl_take(rl, key, &ok, 1, &r), GH_E_BADREQ);
	T_EQ_INT(r.allowed, 0);
	T_EQ_INT(gh_rl_charge(rl, key, &ok, 1), GH_E_BADREQ);
	T_EQ_INT(gh_rl_restore(rl, key, 2000, 1000), GH_E_BADREQ);
	key[GH_RL_KEY_MAX] = '\0'; /* 256 bytes is fine */
	T_EQ_INT(gh_rl_take(rl, key, &ok, 1, &r), GH_OK);
	T_EQ_INT(r.allowed, 1);

	T_EQ_INT(gh_rl_take(rl, NULL, &ok, 1, &r), GH_E_BADREQ);
	T_EQ_INT(gh_rl_take(rl, "k", NULL, 1, &r), GH_E_BADREQ);
	T_EQ_INT(gh_rl_take(rl, "k", &ok, -1, &r), GH_E_BADREQ);
	T_EQ_INT(gh_rl_take(rl, "k", &ok, 1, NULL), GH_E_BADREQ);
	T_EQ_INT(gh_rl_take(NULL, "k", &ok, 1, &r), GH_E_BADREQ);
	T_EQ_INT(gh_rl_snapshot(rl, 0, NULL, NULL), GH_E_BADREQ);
	for (i = 0; i < GH_ARRAY_LEN(bad); i++) {
		r.allowed = 1;
		if (gh_rl_take(rl, "k", &bad[i], 1, &r) != GH_E_BADREQ || r.allowed)
			T_FAIL("limit %zu accepted", i);
	}

	/* rate 0: always allowed, nothing to report, nothing stored */
	for (i = 0; i < 100; i++) {
		T_EQ_INT(gh_rl_take(rl, "free", &unlimited, 1000000, &r), GH_OK);
		T_EQ_INT(r.allowed, 1);
		T_EQ_INT(r.limit, 0);
	}
	T_EQ_INT(gh_rl_count(rl), 1);
	gh_rl_free(rl);
}

/* ---- concurrency ---- */

#define NTHREADS 8

struct worker {
	struct gh_ratelimit *rl;
	const struct gh_rl_limit *lim;
	const char *key;     /* shared key */
	char own[32];        /* this thread's key, or "" */
	int attempts;
	int64_t allowed, own_allowed;
	int64_t seen[64];    /* remaining values of allowed takes, counted */
	int errors;
};

static void *hammer(void *arg)
{
	struct worker *w = arg;
	struct gh_rl_result r;
	int i;

	for (i = 0; i < w->attempts; i++) {
		if (gh_rl_take(w->rl, w->key, w->lim, 1, &r) != GH_OK) {
			w->errors++;
			continue;
		}
		if (r.allowed) {
			w->allowed++;
			if (r.remaining >= 0 && r.remaining < 64)
				w->seen[r.remaining]++;
			else
				w->errors++;
		}
		if (w->own[0]) {
			if (gh_rl_take(w->rl, w->own, w->lim, 1, &r) != GH_OK)
				w->errors++;
			w->own_allowed += r.allowed;
		}
	}
	return NULL;
}

/* Frozen clock: whatever the interleaving, exactly burst + 1 takes pass,
 * and each one saw a different bucket level (no two read the same TAT). */
static void test_concurrent_frozen_clock(void)
{
	static const struct gh_rl_limit lim = {10, 1000, 49};
	struct gh_ratelimit *rl = gh_rl_new(64);
	struct worker w[NTHREADS];
	pthread_t th[NTHREADS];
	int64_t now = START, total = 0, seen[64] = {0};
	int i, j;

	T_ASSERT(rl);
	gh_rl_set_clock(rl, fixed_clock, &now);
	for (i = 0; i < NTHREADS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].rl = rl;
		w[i].lim = &lim;
		w[i].key = "req:shared";
		snprintf(w[i].own, sizeof(w[i].own), "req:own%d", i);
		w[i].attempts = 20000;
		T_EQ_INT(pthread_create(&th[i], NULL, hammer, &w[i]), 0);
	}
	for (i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	gh_rl_free(rl);

	for (i = 0; i < NTHREADS; i++) {
		T_EQ_INT(w[i].errors, 0);
		T_EQ_INT(w[i].own_allowed, 50);
		total += w[i].allowed;
		for (j = 0; j < 64; j++)
			seen[j] += w[i].seen[j];
	}
	T_EQ_INT(total, 50);
	for (j = 0; j < 50; j++)
		if (seen[j] != 1)
			T_FAIL("remaining=%d reported %" PRId64 " times", j, seen[j]);
}

/* Moving clock (every read is 150 us later): eight threads on one key get
 * exactly what the same number of takes gets one after the other, because
 * each take reads the clock once, under the key's lock. */
static void test_concurrent_moving_clock(void)
{
	static const struct gh_rl_limit lim = {1000, 1000, 9}; /* T = 1 ms */
	struct gh_ratelimit *rl = gh_rl_new(64), *seq = gh_rl_new(64);
	struct moving_clock c1 = {START, 150000}, c2 = {START, 150000};
	struct worker w[NTHREADS];
	pthread_t th[NTHREADS];
	struct gh_rl_result r;
	int64_t total = 0, expect = 0;
	int i;

	T_ASSERT(rl && seq);
	gh_rl_set_clock(rl, moving_clock_read, &c1);
	gh_rl_set_clock(seq, moving_clock_read, &c2);
	for (i = 0; i < NTHREADS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].rl = rl;
		w[i].lim = &lim;
		w[i].key = "req:shared";
		w[i].attempts = 5000;
		T_EQ_INT(pthread_create(&th[i], NULL, hammer, &w[i]), 0);
	}
	for (i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < NTHREADS * 5000; i++) {
		T_EQ_INT(gh_rl_take(seq, "req:shared", &lim, 1, &r), GH_OK);
		expect += r.allowed;
	}
	gh_rl_free(rl);
	gh_rl_free(seq);
	for (i = 0; i < NTHREADS; i++) {
		T_EQ_INT(w[i].errors, 0);
		total += w[i].allowed;
	}
	/* 6 s of clock: 10 at once, then about one per ms */
	T_ASSERT(expect >= 6000 && expect <= 10 + 5999);
	T_EQ_INT(total, expect);
}

struct churner {
	struct gh_ratelimit *rl;
	int id;
	int errors;
	unsigned char ever[200];
};

static void *churn(void *arg)
{
	static const struct gh_rl_limit lim = {1, 100, 0};
	struct churner *c = arg;
	struct gh_rl_result r;
	uint64_t seed = 0x1234567ULL + (uint64_t)c->id;
	char key[32];
	int i, k;

	for (i = 0; i < 5000; i++) {
		k = (int)rng_below(&seed, 200);
		snprintf(key, sizeof(key), "tool:%d", k);
		if (gh_rl_take(c->rl, key, &lim, 1, &r) != GH_OK)
			c->errors++;
		else if (r.allowed)
			c->ever[k] = 1;
		if (i % 100 == 0 && gh_rl_charge(c->rl, key, &lim, 1) == GH_E_BADREQ)
			c->errors++;
	}
	return NULL;
}

/* Many keys, a small table and a moving clock: inserts, prunes and sweeps
 * race each other. The table stays bounded and keeps admitting new keys. */
static void test_concurrent_churn(void)
{
	struct gh_ratelimit *rl = gh_rl_new(50);
	struct moving_clock clk = {START, MS};
	struct churner c[NTHREADS];
	pthread_t th[NTHREADS];
	int i, k, distinct = 0;

	T_ASSERT(rl);
	gh_rl_set_clock(rl, moving_clock_read, &clk);
	for (i = 0; i < NTHREADS; i++) {
		memset(&c[i], 0, sizeof(c[i]));
		c[i].rl = rl;
		c[i].id = i;
		T_EQ_INT(pthread_create(&th[i], NULL, churn, &c[i]), 0);
	}
	for (i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	T_ASSERT(gh_rl_count(rl) <= 50);
	gh_rl_free(rl);
	for (k = 0; k < 200; k++) {
		int any = 0;

		for (i = 0; i < NTHREADS; i++)
			any |= c[i].ever[k];
		distinct += any;
	}
	for (i = 0; i < NTHREADS; i++)
		T_EQ_INT(c[i].errors, 0);
	/* with no pruning only the first 50 keys would ever get a slot */
	T_ASSERT(distinct > 50);
}

T_MAIN(T(test_table_redis_cell), T(test_table_requests_per_minute),
       T(test_table_uneven_interval), T(test_window_bound), T(test_steady_rate),
       T(test_quantity_over_burst_never_allowed), T(test_peek_consumes_nothing),
       T(test_charge_then_take), T(test_snapshot_restore), T(test_max_entries),
       T(test_max_entries_many), T(test_bad_arguments), T(test_concurrent_frozen_clock),
       T(test_concurrent_moving_clock), T(test_concurrent_churn))
