-- Locks (without waiting) up to `limit` due, unfired timers with their jobs.
SELECT owner_id, job_id,
    seq FROM timers WHERE fired_at IS NULL AND fire_at <= ? ORDER BY fire_at LIMIT ?
