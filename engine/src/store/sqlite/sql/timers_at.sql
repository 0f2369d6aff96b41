-- A job's timers at the positions `?3` (a JSON array).
SELECT seq, fire_at, fired_at, arrival FROM timers
WHERE owner_id = ?1 AND job_id = ?2 AND seq IN (SELECT value FROM json_each(?3)) ORDER BY seq
