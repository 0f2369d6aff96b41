-- Workflow-task claim, step 1: the ready and unleased (or expired) workflow tasks, oldest first.
-- Hands out up to `filter.limit` workflow tasks (ready and unleased, or with an expired
-- lease), each with a fresh lease token. Locks their jobs without waiting.
SELECT owner_id, id FROM jobs
WHERE kind = 'workflow' AND status IN ('queued', 'running') AND wf_parked = 0
  AND task_queue = ?1 AND workflow IN (SELECT value FROM json_each(?2))
  AND (?3 IS NULL OR owner_id = ?3)
  AND ((wf_ready = 1 AND wf_lease_token IS NULL) OR wf_lease_expires_at < ?4)
ORDER BY updated_at, id LIMIT ?5
