-- A2A tasks. One task per run: a follow-up message with the task's id
-- continues the run that waits for client tool results. context_id is the
-- memory thread of memory-enabled agents. history, artifacts and
-- status_message hold A2A 1.0 JSON (member-based parts, ROLE_* roles); the
-- 0.3 shapes are derived when answering.

CREATE TABLE a2a_tasks (
  id              TEXT PRIMARY KEY,              -- task_...
  context_id      TEXT NOT NULL,
  agent_id        TEXT NOT NULL,
  owner           TEXT NOT NULL,                 -- another owner's task is "not found"
  key_id          TEXT NOT NULL,
  run_id          TEXT NOT NULL,                 -- the run behind the task (runs.id once committed)
  state           TEXT NOT NULL CHECK (state IN
                    ('working', 'input-required', 'completed', 'failed', 'canceled')),
  status_message  TEXT,                          -- JSON message or NULL
  history         TEXT NOT NULL,                 -- JSON array of messages, oldest first
  artifacts       TEXT NOT NULL,                 -- JSON array of artifacts
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL
) STRICT;
CREATE INDEX a2a_tasks_by_context ON a2a_tasks (owner, context_id, updated_at);
CREATE INDEX a2a_tasks_by_context_id ON a2a_tasks (context_id);
