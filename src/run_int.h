/*
 * run_int.h - what the engine's own files (run.c, run_view.c) share about
 * a run's working state; nothing else includes it.
 *
 * A run's working state is one JSON document, persisted in runs.state:
 *
 *   { "v": 1,
 *     "context":     [CoreMessages sent to the model, without the system prompt],
 *     "persisted":   how many of them are already in the thread,
 *     "client_tools": [client tool definitions, as given with the first request],
 *     "step": n, "max_steps": n,
 *     "usage": {"input": n, "output": n},
 *     "journal": true when the native API started the run: its events go to
 *                the run journal, for Mastra's observe (run_journal.h),
 *     "calls": [the current step's tool calls while some still wait:
 *               {toolCallId, toolName, args, source, state, approvalId?,
 *                expiresAt?, result?, isError?}] }
 *
 * A call's state is one of the names of enum gh_call_state ("new",
 * "pending_client", "pending_approval", "released", "done"). When every
 * call of a step is done the tool message is appended and the loop goes
 * on. The stored output of a completed run is {text, finishReason, usage}.
 */
#ifndef GH_RUN_INT_H
#define GH_RUN_INT_H

#include "run.h"

const char *gh_call_state_name(enum gh_call_state s);
enum gh_call_state gh_call_state_of(const cJSON *call);

/* A stored call as a struct gh_run_call borrowing from c. */
void gh_run_call_read(const cJSON *c, struct gh_run_call *out);

/* gh_run_hold, saying whether gh_run_cancel may stop the run (a request's
 * run) or not (a resumption in the background). */
enum gh_code gh_run_hold_as(struct gh_app *app, const char *owner, const char *run_id,
			    int cancellable, struct gh_run_hold *h, struct gh_err *e);

/* The hub topic on which a run's state changes are announced (a private
 * topic: GET /api/runs/:id/events follows the run's id itself). */
void gh_run_notify(struct gh_app *app, const char *run_id);

#endif
