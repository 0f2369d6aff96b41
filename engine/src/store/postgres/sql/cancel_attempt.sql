-- A live attempt → `cancelled`, with who and why.
-- Attempt status: only a live attempt can be cancelled, once.
UPDATE attempts
SET status = 'cancelled', cancelled_by = $3, cancel_reason = $4,
    cancelled_at = now(), finished_at = now()
WHERE owner_id = $1 AND id = $2 AND status IN ('scheduled', 'started', 'unknown')
