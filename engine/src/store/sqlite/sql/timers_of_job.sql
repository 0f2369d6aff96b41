-- A job's timers by position.
SELECT seq, fire_at, fired_at, arrival FROM timers WHERE owner_id = ? AND job_id = ? ORDER BY seq
