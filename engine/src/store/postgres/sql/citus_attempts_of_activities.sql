-- attempts_of_activities.sql on Citus: the attempts of the activities (owner `$1[i]`,
-- activity `$2[i]`), by activity and number.
SELECT owner_id, id, activity_id, job_id, number, activity, task_queue, provider, status,
    worker_id, lease_token, lease_expires_at, read_version, heartbeat_at, started_at,
    unknown_at, finished_at, error, completion_outcome, cancelled_by, cancel_reason,
    created_at FROM attempts
WHERE (owner_id, activity_id) IN (SELECT * FROM unnest($1::text[], $2::uuid[]))
ORDER BY activity_id, number
