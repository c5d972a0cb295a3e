-- Runs that wait for client tool results have a deadline: wait_until is
-- when a waiting run expires (Unix ms; NULL while it waits on nothing the
-- client owes), and "expired" is the status it then ends in. SQLite cannot
-- change a CHECK constraint in place, so the table is rebuilt (gatehouse
-- applies migrations with foreign keys off and checks them after, so the
-- tool calls that reference runs stay as they are).

CREATE TABLE runs_new (
  id            TEXT PRIMARY KEY,
  owner         TEXT NOT NULL,
  key_id        TEXT NOT NULL,
  agent_id      TEXT NOT NULL,
  thread_id     TEXT,
  resource_id   TEXT,
  status        TEXT NOT NULL CHECK (status IN
                  ('running', 'waiting', 'suspended', 'completed', 'failed', 'cancelled',
                   'expired')),
  prev_status   TEXT,                          -- status before a claim moved it to running
  state         TEXT NOT NULL,                 -- JSON: the run's working context
  output        TEXT,                          -- JSON: final answer once completed
  error         TEXT,
  created_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL,
  wait_until    INTEGER                        -- waiting: when it expires
) STRICT;
INSERT INTO runs_new (id, owner, key_id, agent_id, thread_id, resource_id, status, prev_status,
                      state, output, error, created_at, updated_at)
  SELECT id, owner, key_id, agent_id, thread_id, resource_id, status, prev_status,
         state, output, error, created_at, updated_at FROM runs;
DROP TABLE runs;
ALTER TABLE runs_new RENAME TO runs;
CREATE INDEX runs_by_owner ON runs (owner, status, updated_at);
CREATE INDEX runs_by_deadline ON runs (wait_until) WHERE wait_until IS NOT NULL;
