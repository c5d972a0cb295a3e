/*
 * run_journal.h - every event a run emits in this process, numbered from 0
 * across its continuations, so a client that lost its stream can
 * reconnect (Mastra's observe): it replays from an offset, then follows
 * live, each event once and in order.
 *
 * Events are kept in the native stream's vocabulary (type and payload, as
 * gh_wire_native_type / gh_wire_native_payload make them). A run's
 * journal lives while the run is in flight here and GH_JOURNAL_KEEP_MS
 * after its last turn ended; it holds at most GH_JOURNAL_RUN_BYTES (later
 * events are dropped and a reader reaching them is told so), and all
 * journals together at most GH_JOURNAL_ALL_BYTES (the oldest ended ones
 * go first). Thread-safe: one mutex guards the registry, readers sleep on
 * a condition variable.
 */
#ifndef GH_RUN_JOURNAL_H
#define GH_RUN_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define GH_JOURNAL_KEEP_MS (5 * 60 * 1000)
#define GH_JOURNAL_RUN_BYTES ((size_t)16 << 20)
#define GH_JOURNAL_ALL_BYTES ((size_t)128 << 20)

/* Appends one event of run_id (of owner) to its journal (made on the
 * first event). ends: the event ends the run's turn (finish or error).
 * Copies type and data. Best effort: out of memory drops the event and
 * marks the journal as having a gap. */
void gh_run_journal_add(const char *owner, const char *run_id, const char *type,
			const char *data, size_t len, int ends);

/* Calls fn(ud, seq, type, data, len) for every event of run_id (of owner;
 * NULL = any) from offset on, in order, waiting for new ones while the
 * run's turn goes on; returns when the turn has ended and every event was
 * given, when fn returns nonzero, or when idle(ud) (asked at least every
 * 100 ms while waiting; may be NULL) returns nonzero. in_flight(ud) (may
 * be NULL) tells whether the run is still held somewhere here: a turn
 * whose run is no longer held has ended. GH_E_NOTFOUND: no journal for the
 * run here; GH_E_CONFLICT: events from offset on were dropped. */
enum gh_code gh_run_journal_follow(const char *owner, const char *run_id, int64_t offset,
				   int (*fn)(void *ud, int64_t seq, const char *type,
					     const char *data, size_t len),
				   int (*idle)(void *ud), void *ud, struct gh_err *e);

/* Drops every journal (at exit; no reader may be following). */
void gh_run_journal_reset(void);

#endif
