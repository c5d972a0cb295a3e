/*
 * store_ui.h - the reads the admin UI needs beyond what the agent API
 * uses: threads across every owner, a thread's messages and runs without an
 * owner check, counts of recent audit events for the overview, and a look
 * at a session that does not count as activity.
 *
 * Admin-only: callers have checked that the principal is an admin. Every
 * function is a read on the store's reader pool (never the writer) and is
 * thread-safe. cJSON results are owned by the caller.
 */
#ifndef GH_STORE_UI_H
#define GH_STORE_UI_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "err.h"
#include "store.h"

/* Threads of every owner (owner NULL) or of one, newest first, filtered by
 * agent and/or resource (NULL = any); page is 0-based, per_page 1..100.
 * *out is {threads:[{id, owner, resourceId, agentId, title, metadata,
 * createdAt, updatedAt, messageCount}], total, page, perPage, hasMore}. */
enum gh_code gh_store_ui_threads(struct gh_store *s, const char *owner, const char *agent_id,
				 const char *resource_id, int page, int per_page, cJSON **out,
				 struct gh_err *e);

/* One thread, as in gh_store_ui_threads, plus its runs (newest first, at
 * most 100): runs:[{id, status, agentId, keyId, createdAt, updatedAt}].
 * Thread ids are unique per owner: owner NULL finds the thread of any
 * owner, and is GH_E_CONFLICT when several owners have one with this id.
 * GH_E_NOTFOUND when absent. */
enum gh_code gh_store_ui_thread(struct gh_store *s, const char *owner, const char *id,
				cJSON **out, struct gh_err *e);

/* A thread's messages, oldest first. last > 0: the last `last` messages
 * (page and per_page ignored); else one page. *out is {messages:[{id, seq,
 * threadId, role, content, runId, createdAt}], total, page, perPage,
 * hasMore}; with last, hasMore says older messages exist. owner as in
 * gh_store_ui_thread. GH_E_NOTFOUND when the thread does not exist. */
enum gh_code gh_store_ui_messages(struct gh_store *s, const char *owner, const char *thread_id,
				  int page, int per_page, int last, cJSON **out,
				  struct gh_err *e);

/* Audit activity since since_ms: *out is {byEvent:{event: n, ...},
 * toolCalls: distinct tool call ids, buckets:[n...]} where buckets has
 * nbuckets counts of distinct tool calls, bucket i covering
 * [since_ms + i * bucket_ms, since_ms + (i + 1) * bucket_ms). nbuckets
 * 1..168. */
/* The overview's counters of an activity object (gh_store_ui_activity):
 * {toolCalls, executed, failed, denials, rateLimited, approvalsRequested,
 * approved, expired, failedLogins}. Caller frees; NULL on OOM. */
cJSON *gh_store_ui_summary(const cJSON *activity);

enum gh_code gh_store_ui_activity(struct gh_store *s, int64_t since_ms, int64_t bucket_ms,
				  int nbuckets, cJSON **out, struct gh_err *e);

/* The distinct values the audit log holds for dim (GH_AUDIT_DIM_TOOL,
 * _EVENT or _OUTCOME; audit_index.h), for filters that offer them: from the
 * filter index's postings (one seek per value) and the newest rows not yet
 * indexed (at most the newest 8192 of them: while an upgraded log is still
 * being indexed, values only in its older rows show up once indexed). fn
 * gets each value once, in no particular order, at most max values;
 * nonzero from fn stops. */
enum gh_code gh_store_ui_audit_values(struct gh_store *s, int dim, int max,
				      int (*fn)(void *ud, const char *val), void *ud,
				      struct gh_err *e);

/* Pending approvals (not yet decided, whether or not past their expiry). */
enum gh_code gh_store_ui_pending_count(struct gh_store *s, int64_t *n, struct gh_err *e);


#endif
