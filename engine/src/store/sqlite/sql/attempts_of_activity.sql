-- An activity's attempts in number order.
SELECT owner_id, id, activity_id, job_id, number, activity, task_queue, provider, status, worker_id,
    lease_token, lease_expires_at, read_version, heartbeat_at, started_at, unknown_at, finished_at,
    error, completion_outcome, cancelled_by, cancel_reason,
    created_at FROM attempts WHERE owner_id = ? AND activity_id = ? ORDER BY number
