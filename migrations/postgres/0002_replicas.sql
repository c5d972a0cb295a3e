-- Which replica holds a run while it is running, and which one opened a
-- call that has not ended yet: the instance number each process draws when
-- its store opens, and holds a session advisory lock on for as long as it
-- lives. Work whose holder's lock is free belongs to a dead replica and is
-- recovered by a live one (store_threads.c, store_audit.c).
ALTER TABLE runs ADD COLUMN claimed_by bigint;
ALTER TABLE audit_open_calls ADD COLUMN instance bigint;
