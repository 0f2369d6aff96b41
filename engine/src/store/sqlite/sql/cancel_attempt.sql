-- A live attempt → `cancelled`, with who and why.
-- Attempt status: only a live attempt can be cancelled, once.
UPDATE attempts SET status = 'cancelled', cancelled_by = ?, cancel_reason = ?, cancelled_at = ?, finished_at = ?
WHERE owner_id = ? AND id = ? AND status IN ('scheduled', 'started', 'unknown')
