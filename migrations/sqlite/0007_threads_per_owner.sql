-- Thread ids are unique per owner, not across owners: a client names its
-- threads (Mastra's memory.thread, A2A's contextId, X-Gatehouse-Thread),
-- and one owner's name must neither collide with nor reveal another's.
-- A thread is (owner, id); its messages carry the owner too. Renaming a
-- table rewrites the foreign keys that point at it, so the old messages
-- follow threads_old until both are dropped, children first.

ALTER TABLE messages RENAME TO messages_old;
ALTER TABLE threads RENAME TO threads_old;
DROP INDEX threads_by_owner;
DROP INDEX threads_by_agent;

CREATE TABLE threads (
  id            TEXT NOT NULL,
  owner         TEXT NOT NULL,
  resource_id   TEXT NOT NULL,
  agent_id      TEXT NOT NULL,
  title         TEXT,
  metadata      TEXT,                          -- JSON object or NULL
  created_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL,
  PRIMARY KEY (owner, id)
) STRICT;
CREATE INDEX threads_by_owner ON threads (owner, resource_id, updated_at);
CREATE INDEX threads_by_agent ON threads (owner, agent_id, updated_at);
CREATE INDEX threads_by_id ON threads (id);   -- admins look a thread up by id alone
INSERT INTO threads (id, owner, resource_id, agent_id, title, metadata, created_at, updated_at)
  SELECT id, owner, resource_id, agent_id, title, metadata, created_at, updated_at
  FROM threads_old;

CREATE TABLE messages (
  id            TEXT PRIMARY KEY,
  owner         TEXT NOT NULL,
  thread_id     TEXT NOT NULL,
  seq           INTEGER NOT NULL,              -- order within the thread
  role          TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
  content       TEXT NOT NULL,                 -- JSON: string or array of parts
  run_id        TEXT,
  created_at    INTEGER NOT NULL,
  UNIQUE (owner, thread_id, seq),
  FOREIGN KEY (owner, thread_id) REFERENCES threads (owner, id) ON DELETE CASCADE
) STRICT;
INSERT INTO messages (id, owner, thread_id, seq, role, content, run_id, created_at)
  SELECT m.id, t.owner, m.thread_id, m.seq, m.role, m.content, m.run_id, m.created_at
  FROM messages_old m JOIN threads_old t ON t.id = m.thread_id;

DROP TABLE messages_old;
DROP TABLE threads_old;
