-- Marks a workflow job ready for its next task and wakes pollers.
UPDATE jobs SET wf_ready = true, updated_at = now()
WHERE owner_id = $1 AND id = $2 AND kind = 'workflow' AND status IN ('queued', 'running')
RETURNING task_queue
