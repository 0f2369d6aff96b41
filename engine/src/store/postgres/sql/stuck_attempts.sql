-- Attempts in the given statuses for longer than the given age, oldest first.
SELECT * FROM (
    SELECT owner_id, id, activity_id, job_id, number, activity, task_queue, provider, status,
        worker_id, lease_token, lease_expires_at, read_version, heartbeat_at, started_at,
        unknown_at, finished_at, error, completion_outcome, cancelled_by, cancel_reason, created_at,
           CASE status WHEN 'unknown' THEN unknown_at ELSE started_at END AS since
    FROM attempts
    -- `live`: the partial index of live attempts, whatever the history.
    WHERE live AND status = ANY($1) AND status IN ('started', 'unknown')
) s
WHERE since <= now() - make_interval(secs => $2)
ORDER BY since, id
LIMIT $3
