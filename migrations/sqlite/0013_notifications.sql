-- Approval notifications: one row per delivery of one event to one target,
-- so what became of each survives a restart and a delivery still pending
-- then is resumed. Rows hold the event's payload (arguments redacted, as
-- in the audit log) and the target's name, never its URL or secret.

CREATE TABLE notification_deliveries (
  id              INTEGER PRIMARY KEY,
  event_id        TEXT NOT NULL,                 -- the payload's id, shared by its targets
  target          TEXT NOT NULL,                 -- notifications.targets name
  kind            TEXT NOT NULL CHECK (kind IN ('webhook', 'smtp')),
  event           TEXT NOT NULL CHECK (event IN
                    ('approval-requested', 'approval-decided', 'approval-expired')),
  approval_id     TEXT NOT NULL,
  payload         TEXT,                          -- JSON; NULL for a delivery dropped unsent
  state           TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
  attempts        INTEGER NOT NULL DEFAULT 0,
  last_code       INTEGER,                       -- HTTP status or SMTP reply of the last try
  last_error      TEXT,
  next_attempt_at INTEGER,                       -- pending: when the next try is due
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL,
  delivered_at    INTEGER
) STRICT;
CREATE INDEX notification_deliveries_by_approval ON notification_deliveries (approval_id, id);
CREATE INDEX notification_deliveries_pending ON notification_deliveries (id)
  WHERE state = 'pending';
