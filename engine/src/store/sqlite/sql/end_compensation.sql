-- A cancelled workflow returned (its compensation done, or failed): the job ends
-- `cancelled` with its error, and leaves the compensation deadlines' index.
-- Invariant 4: closing moves the version (the workflow-task CAS's), so no later task applies.
UPDATE jobs
SET status = 'cancelled', error = ?1, version = version + 1, wf_cancel_deadline = NULL,
    updated_at = ?2, finished_at = ?2
WHERE owner_id = ?3 AND id = ?4 AND version = ?5 AND completed_by IS NULL
  AND status IN ('queued', 'running') AND wf_cancel_requested_at IS NOT NULL
