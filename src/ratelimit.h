/*
 * ratelimit.h - rate limits per API key (requests), per key x tool (tool
 * calls) and per key (LLM tokens), by GCRA, the generic cell rate
 * algorithm (the one redis-cell uses).
 *
 * A limit is "rate cells per period, with a burst". Each cell has an
 * emission interval T = ceil(period / rate) (in ns) and the limiter
 * tolerates a delay of tau = T * burst. A key's whole state is its
 * theoretical arrival time (TAT): the instant at which its bucket would be
 * empty again. With now = the injected clock, a take of n cells computes
 *
 *     base    = max(TAT, now)
 *     new_tat = base + n * T
 *     allowed   iff   new_tat - now <= tau + T   (= (burst + 1) * T)
 *
 * and stores new_tat when allowed. So from idle at most burst + 1 cells
 * pass at once, then one every T, and over any half-open window [t, t+P)
 * of one period P at most rate + burst cells pass. T is rounded up so that
 * rate * T >= P keeps that bound exact (it costs at most 1 ns per cell).
 *
 * The numbers reported (the RateLimit-* headers and Retry-After) are, with
 * ahead = the TAT after this call (new_tat when consumed, else base) - now:
 *
 *     limit          = burst + 1
 *     remaining      = floor(((burst + 1) * T - ahead) / T), at least 0
 *     reset_ms       = ceil(ahead / 1 ms)
 *     retry_after_ms = 0 when allowed; -1 when n > burst + 1 (never fits);
 *                      else ceil((new_tat - (burst + 1) * T - now) / 1 ms)
 *
 * Times are rounded up to whole milliseconds, so a client that waits
 * retry_after_ms (or reset_ms) finds the cells there.
 *
 * Threading: every function but gh_rl_new/gh_rl_free/gh_rl_set_clock may
 * be called from any number of threads at once. Keys live in a hash table
 * split into stripes, each behind its own mutex; a call locks only its
 * key's stripe and reads the clock once, under that lock, so concurrent
 * takes on one key are decided exactly as if they had come one by one.
 * The table holds at most max_entries keys: when full, keys whose TAT has
 * passed (they carry no state) are dropped, and if none can be, a take that
 * would need a new key fails closed (not allowed, retry after 1 s).
 *
 * Keys are strings of at most GH_RL_KEY_MAX bytes, copied. Callers put the
 * kind of limit into the key ("req:<key id>", "tool:<key id>:<tool>",
 * "tok:<key id>"): a TAT means something only under the limit it was taken
 * with. Keys are not secrets: use the API key's id, never the key itself.
 *
 * All int-returning functions return GH_OK or a GH_E_* code from err.h.
 */
#ifndef GH_RATELIMIT_H
#define GH_RATELIMIT_H

#include <stddef.h>
#include <stdint.h>

#define GH_RL_KEY_MAX 256         /* bytes, without the terminator */
#define GH_RL_FULL_RETRY_MS 1000  /* retry_after_ms when the table is full */

/* rate cells per period_ms, plus burst. rate 0 = unlimited (period_ms and
 * burst are then ignored). Otherwise rate >= 1, period_ms >= 1, burst >= 0,
 * and period_ms * 1e6 and T * (burst + 1) must fit in int64 (periods up to
 * about 292 years); anything else is GH_E_BADREQ. */
struct gh_rl_limit {
	int64_t rate;
	int64_t period_ms;
	int64_t burst;
};

/* What one call decided. For an unlimited limit (rate 0): allowed = 1 and
 * everything else 0 (send no RateLimit headers). */
struct gh_rl_result {
	int allowed;
	int64_t limit;          /* burst + 1, what RateLimit-Limit reports */
	int64_t remaining;      /* cells that could still pass right now */
	int64_t reset_ms;       /* ms until the bucket is full again (RateLimit-Reset) */
	int64_t retry_after_ms; /* ms until this request would pass; 0 when allowed;
	                         * -1 when it never can (quantity > burst + 1) */
};

/* Returns monotonic nanoseconds. ud is the pointer given to set_clock. */
typedef int64_t (*gh_rl_clock_fn)(void *ud);

struct gh_ratelimit;

/* A limiter holding at most max_entries keys (>= 1), clocked by gh_mono_ns.
 * NULL on OOM or max_entries 0. Free with gh_rl_free. */
struct gh_ratelimit *gh_rl_new(size_t max_entries);

/* Frees the limiter and every key. NULL ok. No call may be in flight. */
void gh_rl_free(struct gh_ratelimit *rl);

/* Replaces the clock (fn NULL = back to gh_mono_ns); ud is borrowed and
 * passed to every fn call. Call before the limiter is shared with other
 * threads. fn may be called from any thread, under a stripe lock: it must
 * be thread-safe, quick, and must not call back into the limiter. */
void gh_rl_set_clock(struct gh_ratelimit *rl, gh_rl_clock_fn fn, void *ud);

/* Limits kept somewhere every replica sees (the PostgreSQL database,
 * pg_ratelimit.h) instead of in this process: once set, take, peek and
 * charge go to fn with the same arguments (op 0 take, 1 peek, 2 charge;
 * out NULL for charge) and return what it returns; a failure there
 * (GH_E_UNAVAILABLE: the database cannot be reached) leaves out saying
 * not allowed, so callers fail closed. The table here then stays empty.
 * Call before the limiter is shared with other threads; fn must be
 * thread-safe. */
typedef int (*gh_rl_shared_fn)(void *ud, int op, const char *key, const struct gh_rl_limit *lim,
			       int64_t quantity, struct gh_rl_result *out);
void gh_rl_set_shared(struct gh_ratelimit *rl, gh_rl_shared_fn fn, void *ud);

/* Consumes quantity (>= 0) cells for key when they fit; fills out either
 * way (quantity 0 consumes nothing and just reports). Returns GH_OK with the
 * decision in out->allowed; when the key is new, would be allowed but the
 * table is full of live keys: GH_OK, not allowed, remaining 0,
 * retry_after_ms GH_RL_FULL_RETRY_MS. Errors: GH_E_BADREQ (NULL argument,
 * key over GH_RL_KEY_MAX, bad limit, quantity < 0), GH_E_NOMEM; out then
 * says not allowed with all numbers 0. key is borrowed. */
int gh_rl_take(struct gh_ratelimit *rl, const char *key, const struct gh_rl_limit *lim,
	       int64_t quantity, struct gh_rl_result *out);

/* Would quantity cells fit now? Consumes nothing and never adds a key;
 * out->remaining and out->reset_ms describe the bucket as it is. Errors as
 * for gh_rl_take. */
int gh_rl_peek(struct gh_ratelimit *rl, const char *key, const struct gh_rl_limit *lim,
	       int64_t quantity, struct gh_rl_result *out);

/* Consumes quantity cells unconditionally, for usage known only after the
 * fact (an LLM response's usage.total_tokens): the TAT may move past the
 * burst window and later takes wait it off. Returns GH_OK, GH_E_BADREQ as
 * for take, GH_E_NOMEM, or GH_E_UNAVAILABLE when the key is new and the
 * table is full of live keys. On any failure the usage is not recorded:
 * callers log it. */
int gh_rl_charge(struct gh_ratelimit *rl, const char *key, const struct gh_rl_limit *lim,
		 int64_t quantity);

/* Number of keys held, live or expired (for metrics: near max_entries
 * means takes on new keys may be failing closed). While other calls run it
 * may briefly read up to one above max_entries per call in flight. */
size_t gh_rl_count(struct gh_ratelimit *rl);

/* Snapshot for persistence across restarts. Calls fn once per key whose
 * TAT is still ahead of the clock, with the TAT as wall-clock Unix ms:
 * now_wall_ms + ceil((tat - now_mono) / 1 ms), where now_mono is read once
 * at the start (pass now_wall_ms = gh_now_ms() taken just before). Keys
 * already in the past carry no state and are skipped. Stripes are locked
 * one at a time and only to copy them: fn runs with no lock held, so it may
 * block (e.g. write to the store). key is borrowed for the call only. fn
 * returns 0 to go on; any other value stops the walk and is returned.
 * Returns GH_OK, fn's value, GH_E_NOMEM or GH_E_BADREQ (NULL argument).
 * Takes running meanwhile are not stopped: the snapshot is per-stripe
 * consistent, not a single instant. */
typedef int (*gh_rl_snapshot_fn)(void *ud, const char *key, int64_t tat_wall_ms);
int gh_rl_snapshot(struct gh_ratelimit *rl, int64_t now_wall_ms, gh_rl_snapshot_fn fn,
		   void *ud);

/* The inverse of one snapshot callback: sets key's TAT to
 * now_mono + (tat_wall_ms - now_wall_ms) ms. A TAT already past is
 * ignored (GH_OK); if the key already has a later TAT, that one is kept.
 * Returns GH_OK, GH_E_BADREQ (NULL, key too long), GH_E_NOMEM, or
 * GH_E_UNAVAILABLE when the table is full of live keys. key is borrowed. */
int gh_rl_restore(struct gh_ratelimit *rl, const char *key, int64_t tat_wall_ms,
		  int64_t now_wall_ms);

#endif
