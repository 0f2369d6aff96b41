-- Job CAS: takes the job's result slot if `version` is current and nobody took it.
-- `attempt_id` is the winning attempt of an activity job (`None` for a workflow).
-- Invariant 4 (job CAS): exactly one result wins the job's slot.
UPDATE jobs SET status = 'succeeded', result = ?, completed_by = ?, version = version + 1,
                updated_at = ?, finished_at = ?
WHERE owner_id = ? AND id = ? AND version = ? AND completed_by IS NULL AND status IN ('queued', 'running')
