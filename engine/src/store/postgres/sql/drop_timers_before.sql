-- Drops a job's unfired timers at positions before `$3`: a run that continued as new waits on them no more.
-- Only unfired timers: a fired one is history.
DELETE FROM timers WHERE owner_id = $1 AND job_id = $2 AND seq < $3 AND fired_at IS NULL
