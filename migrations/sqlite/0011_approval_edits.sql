-- Approve with edits: the approver may change a call's arguments. The
-- approval then binds to the edited arguments (their SHA-256); args and
-- args_sha256 keep what the model asked. edited_args is redacted for
-- reviewers like args; edited_args_exact is what the tool runs with.
-- Who edited is who decided (decided_by).
ALTER TABLE approvals ADD COLUMN edited_args TEXT;
ALTER TABLE approvals ADD COLUMN edited_args_exact TEXT;
ALTER TABLE approvals ADD COLUMN edited_args_sha256 TEXT;
