-- Workflow-task CAS: only the holder of the current task, on the version it read,
-- applies commands; a duplicated or stale task changes nothing. `?6` the horizon of the
-- state the task's worker keeps (sticky execution), or NULL: the next task then carries
-- the whole history, to any worker.
UPDATE jobs SET version = version + 1, wf_lease_token = NULL, wf_lease_expires_at = NULL,
    wf_sticky_worker = CASE WHEN ?6 IS NULL THEN NULL ELSE wf_worker_id END,
    wf_sticky_version = version + 1, wf_sticky_horizon = ?6, updated_at = ?1
WHERE owner_id = ?2 AND id = ?3 AND wf_lease_token = ?4 AND version = ?5
  AND status IN ('queued', 'running')
