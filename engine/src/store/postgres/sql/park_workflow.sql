-- Parks a workflow job with a visible error: no more workflow tasks.
UPDATE jobs SET wf_parked = true, error = $3, updated_at = now()
WHERE owner_id = $1 AND id = $2 AND status IN ('queued', 'running')
