-- A job's timers at the positions `$3`.
SELECT seq, fire_at, fired_at, arrival FROM timers
WHERE owner_id = $1 AND job_id = $2 AND seq = ANY($3) ORDER BY seq
