-- A job's timers by position.
SELECT seq, fire_at, fired_at, arrival FROM timers WHERE owner_id = $1 AND job_id = $2 ORDER BY seq
