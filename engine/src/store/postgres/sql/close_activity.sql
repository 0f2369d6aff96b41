-- Closes an open activity (`failed` or `cancelled`), moving its version so that no later
-- result can take the slot.
-- Invariant 4: closing the slot moves the version, so every later result loses.
UPDATE activities
SET status = $3, error = $4, version = version + 1,
    updated_at = now(), finished_at = now()
WHERE owner_id = $1 AND id = $2 AND completed_by IS NULL
  AND status NOT IN ('succeeded', 'failed', 'cancelled')
