-- Inserts an attempt unless the activity already has a live one (invariant 2) or the number is
-- taken. `None` when refused.
-- Invariant 2: the partial unique index refuses a second live attempt; the refused
-- insert returns no row.
INSERT INTO attempts (owner_id, id, activity_id, job_id, number, activity, task_queue, provider,
                      available_at, start_deadline_at, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT DO NOTHING
RETURNING owner_id, id, activity_id, job_id, number, activity, task_queue, provider, status,
    worker_id, lease_token, lease_expires_at, read_version, heartbeat_at, started_at, unknown_at,
    finished_at, error, completion_outcome, cancelled_by, cancel_reason, created_at
