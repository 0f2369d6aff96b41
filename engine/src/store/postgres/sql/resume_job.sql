-- Resumes a job (`$1` owner, `$2` id, `$3` the version read): a `failed` job, or a parked
-- workflow, runs again under its own id and key, its error cleared; a workflow gets a
-- fresh workflow task. A child whose parent saw it fail (`parent_arrival`) keeps, once,
-- the outcome its parent saw.
-- Job status: only a failed job, or an open parked workflow, at the version read, resumes; of concurrent resumes one matches.
UPDATE jobs
SET status = 'running', error = NULL, finished_at = NULL, version = version + 1,
    wf_parked = false, wf_ready = (kind = 'workflow'), wf_lease_token = NULL,
    wf_lease_expires_at = NULL,
    parent_seen_error = CASE
        WHEN status = 'failed' AND parent_arrival IS NOT NULL AND parent_seen_finished_at IS NULL
        THEN error ELSE parent_seen_error END,
    parent_seen_finished_at = CASE
        WHEN status = 'failed' AND parent_arrival IS NOT NULL AND parent_seen_finished_at IS NULL
        THEN finished_at ELSE parent_seen_finished_at END,
    updated_at = now()
WHERE owner_id = $1 AND id = $2 AND version = $3 AND completed_by IS NULL
  AND (status = 'failed'
       OR (kind = 'workflow' AND wf_parked AND status IN ('queued', 'running')))
