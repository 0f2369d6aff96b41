-- A job's events in order, those numbered above `after_seq`, at most `limit` of them (all when
-- `None`); `None` when the job is not visible in `scope`.
SELECT seq, at, type, attempt_id, actor, data FROM job_events
WHERE owner_id = ? AND job_id = ? AND seq > ? ORDER BY seq LIMIT coalesce(?, -1)
