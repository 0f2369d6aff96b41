-- Claim, step 3: a scheduled attempt → started, with its lease.
-- Hands out up to `filter.limit` available scheduled attempts: each becomes `started` with a
-- fresh lease token, once; their activities become `running` and their queued jobs `running`.
-- Locks their jobs without waiting.
-- Dispatch: only a still-scheduled attempt is handed out, once, with a fresh
-- fencing token.
UPDATE attempts SET status = 'started', lease_token = ?, worker_id = ?, started_at = ?, heartbeat_at = ?,
                    read_version = ?, lease_expires_at = ?
WHERE owner_id = ? AND id = ? AND status = 'scheduled'
RETURNING owner_id, id, activity_id, job_id, number, activity, task_queue, provider, status,
    worker_id, lease_token, lease_expires_at, read_version, heartbeat_at, started_at, unknown_at,
    finished_at, error, completion_outcome, cancelled_by, cancel_reason, created_at
