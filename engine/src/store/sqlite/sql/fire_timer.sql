-- Fires a due timer once.
-- A timer fires once.
UPDATE timers SET fired_at = ? WHERE owner_id = ? AND job_id = ? AND seq = ? AND fired_at IS NULL AND fire_at <= ?
