-- Responses of the OpenAI Responses API surface (POST /v1/responses with
-- "store": true), kept so that GET /v1/responses/:id answers them and a
-- later request's previous_response_id continues their conversation. A
-- response is its key's: another key gets "not found".

CREATE TABLE responses (
  id            TEXT PRIMARY KEY,              -- resp_...
  owner         TEXT NOT NULL,
  key_id        TEXT NOT NULL,
  agent_id      TEXT NOT NULL,
  run_id        TEXT NOT NULL,                 -- the run that answered it
  previous_id   TEXT,                          -- previous_response_id, or NULL
  body          TEXT NOT NULL,                 -- the Response object, JSON
  conversation  TEXT NOT NULL,                 -- JSON array of CoreMessages: every
                                               -- input item so far and this output
  created_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX responses_by_key ON responses (key_id, created_at);
