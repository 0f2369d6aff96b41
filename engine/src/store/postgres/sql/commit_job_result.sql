-- Job CAS: takes the job's result slot if `version` is current and nobody took it.
-- `attempt_id` is the winning attempt of an activity job (`None` for a workflow).
-- Invariant 4 (job CAS): exactly one result wins the job's slot.
UPDATE jobs
SET status = 'succeeded', result = $5, completed_by = $4, version = version + 1,
    updated_at = now(), finished_at = now()
WHERE owner_id = $1 AND id = $2 AND version = $3 AND completed_by IS NULL
  AND status IN ('queued', 'running')
