-- Closes an open job (`failed` or `cancelled`) if `version` is current.
-- Invariant 4: closing moves the version, so no later result takes the slot.
UPDATE jobs SET status = ?, error = ?, version = version + 1, updated_at = ?, finished_at = ?
WHERE owner_id = ? AND id = ? AND version = ? AND completed_by IS NULL AND status IN ('queued', 'running')
