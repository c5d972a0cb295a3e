-- Governance: human approvals of tool calls, and rate-limit state that
-- survives a restart.

CREATE TABLE approvals (
  id             TEXT PRIMARY KEY,             -- apr_...
  key_id         TEXT NOT NULL,
  owner          TEXT NOT NULL,
  agent_id       TEXT NOT NULL,
  thread_id      TEXT,
  run_id         TEXT NOT NULL,
  tool_call_id   TEXT NOT NULL UNIQUE,
  tool_name      TEXT NOT NULL,
  source         TEXT NOT NULL,                -- memory | server | client
  args           TEXT NOT NULL,                -- canonical JSON, redacted, for reviewers
  args_sha256    TEXT NOT NULL,                -- of the exact (unredacted) canonical arguments
  policy_name    TEXT,
  policy_version TEXT NOT NULL,
  approver       TEXT NOT NULL CHECK (approver IN ('admin', 'caller')),
  rule           TEXT NOT NULL,                -- which rule asked for approval
  status         TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
  created_at     INTEGER NOT NULL,
  expires_at     INTEGER NOT NULL,
  decided_at     INTEGER,
  decided_by     TEXT,                         -- "admin:<user>" or "key:<id>" or "system"
  reason         TEXT,
  executed_at    INTEGER                       -- set once, before an approved server tool runs
) STRICT;
CREATE INDEX approvals_by_status ON approvals (status, created_at);
CREATE INDEX approvals_by_run ON approvals (run_id);
CREATE INDEX approvals_by_owner ON approvals (owner, status, created_at);

CREATE TABLE rate_limit_state (
  key            TEXT PRIMARY KEY,
  tat_ms         INTEGER NOT NULL              -- theoretical arrival time, wall clock
) STRICT;
