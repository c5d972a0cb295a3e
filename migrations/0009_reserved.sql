-- Version 9 is reserved for the MCP tables, which come in their own
-- migration (0009_mcp.sql); this file only keeps the versions contiguous
-- until then and is removed when that migration arrives. Two migrations
-- with one version are refused at start.
SELECT 1;
