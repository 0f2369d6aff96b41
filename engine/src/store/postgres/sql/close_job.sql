-- Closes an open job (`failed` or `cancelled`) if `version` is current.
-- Invariant 4: closing moves the version, so no later result takes the slot.
UPDATE jobs
SET status = $4, error = $5, version = version + 1,
    updated_at = now(), finished_at = now()
WHERE owner_id = $1 AND id = $2 AND version = $3 AND completed_by IS NULL
  AND status IN ('queued', 'running')
