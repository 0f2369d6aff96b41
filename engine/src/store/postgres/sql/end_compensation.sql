-- A cancelled workflow returned (its compensation done, or failed): the job ends
-- `cancelled` with `$4` as its error, and leaves the compensation deadlines' index.
-- Invariant 4: closing moves the version (the workflow-task CAS's), so no later task applies.
UPDATE jobs
SET status = 'cancelled', error = $4, version = version + 1, wf_cancel_deadline = NULL,
    updated_at = now(), finished_at = now()
WHERE owner_id = $1 AND id = $2 AND version = $3 AND completed_by IS NULL
  AND status IN ('queued', 'running') AND wf_cancel_requested_at IS NOT NULL
