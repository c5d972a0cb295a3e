/*
 * run_journal.h - every event a run emits in this process, numbered from 0,
 * so a client that lost its stream can reconnect: it replays from an
 * offset, then follows live, each event once and in order.
 *
 * A run may have one journal per stream, named by the surface that writes
 * it: GH_JOURNAL_NATIVE holds the engine's events in the native stream's
 * vocabulary (type and payload, as gh_wire_native_type /
 * gh_wire_native_payload make them), numbered across the run's
 * continuations, for Mastra's observe; GH_JOURNAL_AGUI holds one AG-UI
 * request's wire events (type and serialised JSON) under the client's
 * runId, opened and ended by the surface. Streams of one run never mix.
 *
 * A journal lives while its turn goes on and GH_JOURNAL_KEEP_MS after it
 * ended; it holds at most GH_JOURNAL_RUN_BYTES (later events are dropped
 * and a reader reaching them is told so), and all journals together at
 * most GH_JOURNAL_ALL_BYTES (the oldest ended ones go first). Thread-safe:
 * one mutex guards the registry, readers sleep on a condition variable.
 */
#ifndef GH_RUN_JOURNAL_H
#define GH_RUN_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define GH_JOURNAL_KEEP_MS (5 * 60 * 1000)
#define GH_JOURNAL_RUN_BYTES ((size_t)16 << 20)
#define GH_JOURNAL_ALL_BYTES ((size_t)128 << 20)
#define GH_JOURNAL_STREAM_MAX 16

#define GH_JOURNAL_NATIVE "native"
#define GH_JOURNAL_AGUI "ag-ui"

/* Appends one event of run_id (of owner) to its journal of stream (made
 * on the first event unless opened; an opened journal takes only its
 * owner's events, another one those of whoever continues the run). ends:
 * the event ends the run's turn (finish or error). Copies type and data.
 * Best effort: out of memory drops the event and marks the journal as
 * having a gap. */
void gh_run_journal_add(const char *stream, const char *owner, const char *run_id,
			const char *type, const char *data, size_t len, int ends);

/* Starts the journal of (stream, owner, run_id) for a turn that
 * gh_run_journal_end ends (the run's liveness elsewhere is not asked).
 * GH_E_CONFLICT: one is going on, or ended with events and is still kept;
 * GH_E_NOMEM. */
enum gh_code gh_run_journal_open(const char *stream, const char *owner, const char *run_id,
				 struct gh_err *e);

/* Ends the turn of an opened journal: readers stop after its last event;
 * one without events is dropped. */
void gh_run_journal_end(const char *stream, const char *owner, const char *run_id);

/* Calls fn(ud, seq, type, data, len) for every event of run_id's stream
 * (of owner; NULL = any) from offset on, in order, waiting for new ones
 * while the run's turn goes on; returns when the turn has ended and every
 * event was given, when fn returns nonzero, or when idle(ud) (asked at
 * least every 100 ms while waiting; may be NULL) returns nonzero. The turn
 * of a journal not opened has also ended when its run is no longer in
 * flight here (gh_run_in_flight). GH_E_NOTFOUND: no journal for the run
 * here; GH_E_CONFLICT: events from offset on were dropped. */
enum gh_code gh_run_journal_follow(const char *stream, const char *owner, const char *run_id,
				   int64_t offset,
				   int (*fn)(void *ud, int64_t seq, const char *type,
					     const char *data, size_t len),
				   int (*idle)(void *ud), void *ud, struct gh_err *e);

/* Drops every journal (at exit; no reader may be following). */
void gh_run_journal_reset(void);

#endif
