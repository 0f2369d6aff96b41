-- A cancelled workflow's compensation bound passed before it returned: the job ends
-- `cancelled` with its error, and leaves the compensation deadlines' index.
-- Once, and only once overdue by the store's clock: a workflow that returned first
-- closed it (and cleared the deadline); closing moves the version, so no later task applies.
UPDATE jobs
SET status = 'cancelled', error = ?1, version = version + 1, wf_cancel_deadline = NULL,
    updated_at = ?2, finished_at = ?2
WHERE owner_id = ?3 AND id = ?4 AND completed_by IS NULL AND status IN ('queued', 'running')
  AND wf_cancel_deadline <= ?2
