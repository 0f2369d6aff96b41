-- A job's events in order, those numbered above `after_seq`, at most `limit` of them (all when
-- `None`); `None` when the job is not visible in `scope`.
SELECT seq, at, type, attempt_id, actor, data FROM job_events
WHERE owner_id = $1 AND job_id = $2 AND seq > $3 ORDER BY seq LIMIT $4
