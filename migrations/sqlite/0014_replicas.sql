-- Which gatehouse process holds a run while it is running, and which one
-- opened a call that has not ended yet. On one node only that node's own
-- restart cleans them up; on a database shared by replicas (PostgreSQL)
-- the work a dead replica left is recovered by a live one, and never the
-- work of a replica that is still alive. The value is the process's
-- instance number, drawn at random when its store opens.
ALTER TABLE runs ADD COLUMN claimed_by INTEGER;
ALTER TABLE audit_open_calls ADD COLUMN instance INTEGER;
