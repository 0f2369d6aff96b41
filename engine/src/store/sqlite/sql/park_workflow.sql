-- Parks a workflow job with a visible error: no more workflow tasks.
UPDATE jobs SET wf_parked = 1, error = ?, updated_at = ? WHERE owner_id = ? AND id = ? AND status IN ('queued', 'running')
