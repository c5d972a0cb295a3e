/*
 * background.h - work that happens outside requests: continuing runs whose
 * approvals were decided, expiring approvals, snapshotting rate-limit
 * state, pruning the audit log and finished notification deliveries by
 * retention.
 *
 * Two resumer threads take run ids from a de-duplicated queue; one
 * maintenance thread wakes every second. Started and stopped by serve;
 * gh_bg_resume is thread-safe.
 */
#ifndef GH_BACKGROUND_H
#define GH_BACKGROUND_H

#include "app.h"
#include "err.h"

/* Starts the threads and queues every suspended run (their approvals may
 * have been decided while gatehouse was down). */
enum gh_code gh_bg_start(struct gh_app *app, struct gh_bg **out, struct gh_err *e);

/* Queues run_id for resumption (no-op when already queued). */
void gh_bg_resume(struct gh_bg *bg, const char *run_id);

/* Stops the threads (waiting for a resumption in progress), saves the
 * rate-limit state one last time. NULL ok. */
void gh_bg_stop(struct gh_bg *bg);

/* Saves the rate limiter's state to the store now. */
void gh_bg_snapshot_ratelimits(struct gh_app *app);

#endif
