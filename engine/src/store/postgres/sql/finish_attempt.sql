-- Ends an attempt that is in one of `from`, recording its error and what its completion
-- answered.
-- Attempt status: an attempt ends once, from the statuses the caller saw.
UPDATE attempts
SET status = $4, error = COALESCE($5, error), completion_outcome = $6,
    -- The first finish time is kept (LEAST skips NULL; Citus refuses now() in COALESCE).
    finished_at = LEAST(finished_at, now()),
    lease_expires_at = NULL
WHERE owner_id = $1 AND id = $2 AND status = ANY($3)
