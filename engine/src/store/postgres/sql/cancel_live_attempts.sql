-- Every live attempt of an activity but `except` → `cancelled`, with who and why; returns each
-- one cancelled with the status it had.
-- Attempt status: only live attempts are cancelled, once each.
WITH live AS (
    SELECT owner_id, id, status FROM attempts
    WHERE owner_id = $1 AND activity_id = $2 AND ($3::uuid IS NULL OR id <> $3)
      AND live AND status IN ('scheduled', 'started', 'unknown')
    FOR UPDATE
)
UPDATE attempts t
SET status = 'cancelled', cancelled_by = $4, cancel_reason = $5, cancelled_at = now(), finished_at = now()
FROM live WHERE t.owner_id = live.owner_id AND t.id = live.id
RETURNING t.id, live.status AS was
