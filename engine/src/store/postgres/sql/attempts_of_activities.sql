-- Views: the attempts of the activities (owner `$1[i]`, activity `$2[i]`), by activity
-- and number; one index probe per activity, as activities_of_jobs.sql.
SELECT t.* FROM generate_subscripts($1::text[], 1) AS k(i)
CROSS JOIN LATERAL (
    SELECT owner_id, id, activity_id, job_id, number, activity, task_queue, provider, status,
        worker_id, lease_token, lease_expires_at, read_version, heartbeat_at, started_at,
        unknown_at, finished_at, error, completion_outcome, cancelled_by, cancel_reason,
        created_at FROM attempts x
    WHERE x.activity_id = ($2::uuid[])[k.i] AND (x.owner_id = ($1::text[])[k.i]) IS TRUE OFFSET 0
) t
ORDER BY t.activity_id, t.number
