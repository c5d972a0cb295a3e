-- Audit integrity: chained checkpoints and the register of open calls.

-- Checkpoints chain: one written from now on names the checkpoint before it
-- (prev_seq; 0 for the first of a log) and its signature covers that
-- checkpoint's signature, so one deleted from the middle breaks the next.
-- NULL marks checkpoints written before chaining: each still verifies on
-- its own, and the first chained checkpoint signs the newest of them.
ALTER TABLE audit_checkpoints ADD COLUMN prev_seq INTEGER;

-- Calls gatehouse runs itself (memory and server tools), from the row that
-- lets one run (allowed, or the claim of an approved call) to the row that
-- ends it (executed, failed), each change written in the same transaction
-- as that row. What is left here when gatehouse starts was cut off by a
-- crash: each is closed with an "interrupted" audit row. The columns are
-- those the interrupted row repeats.
CREATE TABLE audit_open_calls (
  id            INTEGER PRIMARY KEY,
  opened_at     INTEGER NOT NULL,
  key_id        TEXT,
  owner         TEXT,
  admin_user    TEXT,
  agent_id      TEXT,
  thread_id     TEXT,
  run_id        TEXT,
  tool_call_id  TEXT,
  tool_name     TEXT,
  source        TEXT,
  args          TEXT,
  approval_id   TEXT
) STRICT;
