-- The timers of a workflow job's run (`$3` its first position) by position.
SELECT seq, fire_at, fired_at, arrival FROM timers
WHERE owner_id = $1 AND job_id = $2 AND seq >= $3 ORDER BY seq
