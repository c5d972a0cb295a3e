-- Upstream MCP servers. mcp_tool_pins holds the definition of every tool
-- of an upstream as gatehouse first saw it (its SHA-256 digest and the
-- canonical JSON); when the upstream later offers a different definition,
-- it is recorded as pending and the tool is held until an admin accepts it
-- (or stays held once rejected). mcp_servers keeps each upstream's last
-- known state, written by the running server, for `gatehouse mcp list`.

CREATE TABLE mcp_tool_pins (
  server              TEXT NOT NULL,             -- the mcp_servers entry in the config
  tool                TEXT NOT NULL,             -- the upstream's own tool name
  digest              TEXT NOT NULL,             -- of the accepted definition
  definition          TEXT NOT NULL,             -- canonical JSON of it
  pinned_at           INTEGER NOT NULL,          -- first seen
  accepted_at         INTEGER NOT NULL,          -- pinned_at, or when an admin accepted it
  accepted_by         TEXT,                      -- NULL when pinned at first sight
  pending_digest      TEXT,                      -- a different definition now offered
  pending_definition  TEXT,
  pending_since       INTEGER,
  pending_status      TEXT CHECK (pending_status IN ('held', 'rejected')),
  rejected_by         TEXT,
  PRIMARY KEY (server, tool)
) STRICT;

CREATE TABLE mcp_servers (
  name                TEXT PRIMARY KEY,
  transport           TEXT NOT NULL,             -- stdio | http
  state               TEXT NOT NULL,             -- connecting | connected | failing | stopped
  last_error          TEXT,
  next_retry_at       INTEGER,                   -- Unix ms of the next attempt while failing
  session             TEXT,                      -- Mcp-Session-Id, or the child's pid
  protocol_version    TEXT,
  server_info         TEXT,                      -- "name version" as the upstream says
  tools               INTEGER NOT NULL DEFAULT 0,
  connected_at        INTEGER,
  updated_at          INTEGER NOT NULL
) STRICT;
