-- A cancelled workflow's compensation bound passed before it returned: the job ends
-- `cancelled` with `$3` as its error, and leaves the compensation deadlines' index.
-- Once, and only once overdue by the database's clock: a workflow that returned first
-- closed it (and cleared the deadline); closing moves the version, so no later task applies.
UPDATE jobs
SET status = 'cancelled', error = $3, version = version + 1, wf_cancel_deadline = NULL,
    updated_at = now(), finished_at = now()
WHERE owner_id = $1 AND id = $2 AND completed_by IS NULL AND status IN ('queued', 'running')
  AND wf_cancel_deadline <= now()
