-- Records the compensation bound a workflow declared (ms, NULL for none), under its
-- workflow task's CAS.
-- An open job only: a closed job's bound means nothing.
UPDATE jobs SET wf_compensation_ms = ?, updated_at = ?
WHERE owner_id = ? AND id = ? AND status IN ('queued', 'running')
