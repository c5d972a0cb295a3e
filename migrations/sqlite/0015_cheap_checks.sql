-- The status of a run and the role of a message are checked with OR
-- chains rather than IN lists: SQLite checks an IN list of three or more
-- values by building a temporary b-tree of them on every INSERT and UPDATE,
-- which cost more than the rest of a run record's insert together. The
-- allowed values are the same. The two tables are rebuilt the way 0012
-- rebuilt runs (migrations run with foreign keys off and are checked after).

CREATE TABLE runs_new (
  id            TEXT PRIMARY KEY,
  owner         TEXT NOT NULL,
  key_id        TEXT NOT NULL,
  agent_id      TEXT NOT NULL,
  thread_id     TEXT,
  resource_id   TEXT,
  status        TEXT NOT NULL CHECK (status = 'running' OR status = 'waiting' OR
                                     status = 'suspended' OR status = 'completed' OR
                                     status = 'failed' OR status = 'cancelled' OR
                                     status = 'expired'),
  prev_status   TEXT,                          -- status before a claim moved it to running
  state         TEXT NOT NULL,                 -- JSON: the run's working context
  output        TEXT,                          -- JSON: final answer once completed
  error         TEXT,
  created_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL,
  wait_until    INTEGER,                       -- waiting: when it expires
  claimed_by    INTEGER                        -- the instance running it (0014)
) STRICT;
INSERT INTO runs_new (id, owner, key_id, agent_id, thread_id, resource_id, status, prev_status,
                      state, output, error, created_at, updated_at, wait_until, claimed_by)
  SELECT id, owner, key_id, agent_id, thread_id, resource_id, status, prev_status,
         state, output, error, created_at, updated_at, wait_until, claimed_by FROM runs;
DROP TABLE runs;
ALTER TABLE runs_new RENAME TO runs;
CREATE INDEX runs_by_owner ON runs (owner, status, updated_at);
CREATE INDEX runs_by_deadline ON runs (wait_until) WHERE wait_until IS NOT NULL;

CREATE TABLE messages_new (
  id            TEXT PRIMARY KEY,
  owner         TEXT NOT NULL,
  thread_id     TEXT NOT NULL,
  seq           INTEGER NOT NULL,              -- order within the thread
  role          TEXT NOT NULL CHECK (role = 'system' OR role = 'user' OR
                                     role = 'assistant' OR role = 'tool'),
  content       TEXT NOT NULL,                 -- JSON: string or array of parts
  run_id        TEXT,
  created_at    INTEGER NOT NULL,
  UNIQUE (owner, thread_id, seq),
  FOREIGN KEY (owner, thread_id) REFERENCES threads (owner, id) ON DELETE CASCADE
) STRICT;
INSERT INTO messages_new (id, owner, thread_id, seq, role, content, run_id, created_at)
  SELECT id, owner, thread_id, seq, role, content, run_id, created_at FROM messages;
DROP TABLE messages;
ALTER TABLE messages_new RENAME TO messages;
