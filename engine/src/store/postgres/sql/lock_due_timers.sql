-- The timer loop (`$1` limit).
SELECT t.owner_id, t.job_id, t.seq FROM timers t
JOIN jobs j ON j.owner_id = t.owner_id AND j.id = t.job_id
WHERE t.fired_at IS NULL AND t.fire_at <= now()
ORDER BY t.fire_at
LIMIT $1
FOR UPDATE OF j, t SKIP LOCKED
