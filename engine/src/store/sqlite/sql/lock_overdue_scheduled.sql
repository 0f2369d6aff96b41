-- Locks (without waiting) up to `limit` scheduled attempts past their schedule-to-start
-- deadline, with their jobs.
SELECT owner_id, id FROM attempts WHERE status = 'scheduled' AND start_deadline_at < ? ORDER BY start_deadline_at LIMIT ?
