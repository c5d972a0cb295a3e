-- What became of an approved call: the engine records the outcome of its
-- execution on the approval, in the transaction that appends the audit row
-- saying so (executed, failed, client_result, or denied when the approval
-- no longer applied), so the approvals API reports what the audit log
-- says. exec_outcome: ok | error | not_run; NULL while the call has not
-- finished (executed_at, set before a server tool starts, tells "running").
ALTER TABLE approvals ADD COLUMN exec_outcome TEXT CHECK (exec_outcome IN ('ok', 'error', 'not_run'));
ALTER TABLE approvals ADD COLUMN exec_error TEXT;
ALTER TABLE approvals ADD COLUMN exec_finished_at INTEGER;
ALTER TABLE approvals ADD COLUMN exec_audit_seq INTEGER;
