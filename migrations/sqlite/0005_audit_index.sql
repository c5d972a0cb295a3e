-- The audit log's filter index. An appended row now goes into one b-tree
-- (audit_events) instead of eight: the writer indexes whole blocks of 4096
-- rows at once, after they are committed, so an audited tool call no longer
-- pays for seven index updates. Queries read the postings of indexed blocks
-- and scan the short unindexed tail. Time ranges need no index: ts never
-- decreases with seq, so a time is found by a binary search over seq.

DROP INDEX audit_by_ts;
DROP INDEX audit_by_key;
DROP INDEX audit_by_agent;
DROP INDEX audit_by_thread;
DROP INDEX audit_by_run;
DROP INDEX audit_by_tool;
DROP INDEX audit_by_event;

-- For each block (seq >> 12) and each value of a filterable column, the
-- block's rows that carry it: sorted 16-bit offsets (seq & 4095, little
-- endian) for up to 255 rows, else a 512-byte bitmap. dim: 1 key_id,
-- 2 agent_id, 3 thread_id, 4 run_id, 5 tool_name, 6 event, 7 outcome,
-- 8 owner. Block order serves `audit verify` and retention; the covering
-- index serves queries, one value's blocks newest first.
CREATE TABLE audit_postings (
  blk   INTEGER NOT NULL,
  dim   INTEGER NOT NULL,
  val   TEXT NOT NULL,
  rows  BLOB NOT NULL,
  PRIMARY KEY (blk, dim, val)
) STRICT, WITHOUT ROWID;
CREATE INDEX audit_postings_by_value ON audit_postings (dim, val, blk, rows);

-- Blocks below next_blk are indexed; the writer advances it. A database
-- upgraded with rows in it is indexed by the server in the background.
CREATE TABLE audit_index_state (
  id        INTEGER PRIMARY KEY CHECK (id = 1),
  next_blk  INTEGER NOT NULL
) STRICT;
INSERT INTO audit_index_state (id, next_blk) VALUES (1, 0);
