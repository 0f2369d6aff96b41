-- Closes an open activity (`failed` or `cancelled`), moving its version so that no later
-- result can take the slot.
-- Invariant 4: closing the slot moves the version, so every later result loses.
UPDATE activities SET status = ?, error = ?, version = version + 1, updated_at = ?, finished_at = ?
WHERE owner_id = ? AND id = ? AND completed_by IS NULL AND status NOT IN ('succeeded', 'failed', 'cancelled')
