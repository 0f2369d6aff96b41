-- Workflow-task CAS: ends the task held by `token` if the job's version is still
-- `read_version` (moving it); `false` for a stale or duplicated task.
-- Workflow-task CAS: only the holder of the current task, on the version it read,
-- applies commands; a duplicated or stale task changes nothing.
UPDATE jobs
SET version = version + 1, wf_lease_token = NULL, wf_lease_expires_at = NULL, updated_at = now()
WHERE owner_id = $1 AND id = $2 AND wf_lease_token = $3 AND version = $4
  AND status IN ('queued', 'running')
