-- Workflow-task CAS: only the holder of the current task, on the version it read,
-- applies commands; a duplicated or stale task changes nothing. `$5` the horizon of the
-- state the task's worker keeps (sticky execution), or NULL: the next task then carries
-- the whole history, to any worker.
UPDATE jobs
SET version = version + 1, wf_lease_token = NULL, wf_lease_expires_at = NULL,
    wf_sticky_worker = CASE WHEN $5::bigint IS NULL THEN NULL ELSE wf_worker_id END,
    wf_sticky_version = version + 1, wf_sticky_horizon = $5, updated_at = now()
WHERE owner_id = $1 AND id = $2 AND wf_lease_token = $3 AND version = $4
  AND status IN ('queued', 'running')
