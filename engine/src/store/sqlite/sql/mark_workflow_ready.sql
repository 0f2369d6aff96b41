-- Marks a workflow job ready for its next task and wakes pollers.
UPDATE jobs SET wf_ready = 1, updated_at = ?
WHERE owner_id = ? AND id = ? AND kind = 'workflow' AND status IN ('queued', 'running')
