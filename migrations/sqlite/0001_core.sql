-- gatehouse core schema: API keys, threads and messages, runs and their
-- tool calls, memory, and the audit log with its hash chain.
-- Times are Unix milliseconds. Ids are prefixed random strings.

CREATE TABLE api_keys (
  id            TEXT PRIMARY KEY,              -- key_...
  name          TEXT NOT NULL,
  owner         TEXT NOT NULL,                 -- keys of one owner share threads and memory
  policy        TEXT,                          -- NULL: the policy named "default"
  role          TEXT NOT NULL DEFAULT 'user' CHECK (role IN ('user', 'admin')),
  prefix        TEXT NOT NULL,                 -- first characters of the secret, for listing
  hash          BLOB NOT NULL UNIQUE,          -- keyed BLAKE2b-256 of the secret
  created_at    INTEGER NOT NULL,
  last_used_at  INTEGER,
  revoked_at    INTEGER
) STRICT;

CREATE TABLE threads (
  id            TEXT PRIMARY KEY,
  owner         TEXT NOT NULL,
  resource_id   TEXT NOT NULL,
  agent_id      TEXT NOT NULL,
  title         TEXT,
  metadata      TEXT,                          -- JSON object or NULL
  created_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX threads_by_owner ON threads (owner, resource_id, updated_at);
CREATE INDEX threads_by_agent ON threads (owner, agent_id, updated_at);

CREATE TABLE messages (
  id            TEXT PRIMARY KEY,
  thread_id     TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
  seq           INTEGER NOT NULL,              -- order within the thread
  role          TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
  content       TEXT NOT NULL,                 -- JSON: string or array of parts
  run_id        TEXT,
  created_at    INTEGER NOT NULL,
  UNIQUE (thread_id, seq)
) STRICT;

CREATE TABLE runs (
  id            TEXT PRIMARY KEY,
  owner         TEXT NOT NULL,
  key_id        TEXT NOT NULL,
  agent_id      TEXT NOT NULL,
  thread_id     TEXT,
  resource_id   TEXT,
  status        TEXT NOT NULL CHECK (status IN
                  ('running', 'waiting', 'suspended', 'completed', 'failed', 'cancelled')),
  prev_status   TEXT,                          -- status before a claim moved it to running
  state         TEXT NOT NULL,                 -- JSON: the run's working context
  output        TEXT,                          -- JSON: final answer once completed
  error         TEXT,
  created_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX runs_by_owner ON runs (owner, status, updated_at);

-- Tool calls a run hands out and waits for (client tools, approvals): a
-- result is matched to its run by tool_call_id alone.
CREATE TABLE run_tool_calls (
  tool_call_id  TEXT PRIMARY KEY,
  run_id        TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  owner         TEXT NOT NULL,
  tool_name     TEXT NOT NULL,
  source        TEXT NOT NULL,                 -- client | server | memory
  status        TEXT NOT NULL CHECK (status IN ('pending', 'answered')),
  created_at    INTEGER NOT NULL,
  answered_at   INTEGER
) STRICT;
CREATE INDEX run_tool_calls_by_run ON run_tool_calls (run_id);

CREATE TABLE memories (
  id            INTEGER PRIMARY KEY,
  owner         TEXT NOT NULL,
  resource_id   TEXT NOT NULL,
  content       TEXT NOT NULL,
  tags          TEXT NOT NULL DEFAULT '',      -- space separated
  created_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX memories_by_resource ON memories (owner, resource_id);

CREATE VIRTUAL TABLE memories_fts USING fts5 (
  content, tags, content = 'memories', content_rowid = 'id', tokenize = 'porter unicode61'
);
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
  INSERT INTO memories_fts (rowid, content, tags) VALUES (new.id, new.content, new.tags);
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
  INSERT INTO memories_fts (memories_fts, rowid, content, tags)
    VALUES ('delete', old.id, old.content, old.tags);
END;

CREATE TABLE working_memory (
  owner         TEXT NOT NULL,
  resource_id   TEXT NOT NULL,
  content       TEXT NOT NULL,
  updated_at    INTEGER NOT NULL,
  PRIMARY KEY (owner, resource_id)
) STRICT;

-- The audit log: append-only, one hash chain. hash = BLAKE2b-256(prev_hash
-- || canonical encoding of the row); see src/audit.c.
CREATE TABLE audit_events (
  seq           INTEGER PRIMARY KEY,
  ts            INTEGER NOT NULL,
  event         TEXT NOT NULL,
  key_id        TEXT,
  owner         TEXT,
  admin_user    TEXT,
  agent_id      TEXT,
  thread_id     TEXT,
  run_id        TEXT,
  tool_call_id  TEXT,
  tool_name     TEXT,
  source        TEXT,
  args          TEXT,                          -- canonical JSON, redacted
  outcome       TEXT,
  duration_ms   INTEGER,
  error         TEXT,
  reason        TEXT,
  detail        TEXT,                          -- canonical JSON with extra facts
  prev_hash     BLOB NOT NULL,
  hash          BLOB NOT NULL
) STRICT;
CREATE INDEX audit_by_ts     ON audit_events (ts);
CREATE INDEX audit_by_key    ON audit_events (key_id, seq);
CREATE INDEX audit_by_agent  ON audit_events (agent_id, seq);
CREATE INDEX audit_by_thread ON audit_events (thread_id, seq);
CREATE INDEX audit_by_run    ON audit_events (run_id, seq);
CREATE INDEX audit_by_tool   ON audit_events (tool_name, seq);
CREATE INDEX audit_by_event  ON audit_events (event, seq);

-- Signed checkpoints: Ed25519 over (seq, hash of that row, ts).
CREATE TABLE audit_checkpoints (
  seq           INTEGER PRIMARY KEY,           -- the audit row it covers up to
  hash          BLOB NOT NULL,
  ts            INTEGER NOT NULL,
  public_key    BLOB NOT NULL,
  signature     BLOB NOT NULL
) STRICT;

-- Where the chain starts after retention pruned older rows: the first kept
-- row's seq and the hash it chains from, signed like a checkpoint.
CREATE TABLE audit_anchor (
  id            INTEGER PRIMARY KEY CHECK (id = 1),
  seq           INTEGER NOT NULL,
  prev_hash     BLOB NOT NULL,
  ts            INTEGER NOT NULL,
  public_key    BLOB NOT NULL,
  signature     BLOB NOT NULL
) STRICT;
