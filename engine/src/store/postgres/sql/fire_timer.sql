-- Fires a due timer once.
-- A timer fires once.
UPDATE timers SET fired_at = now()
WHERE owner_id = $1 AND job_id = $2 AND seq = $3 AND fired_at IS NULL AND fire_at <= now()
