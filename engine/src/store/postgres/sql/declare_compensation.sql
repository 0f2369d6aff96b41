-- Records the compensation bound a workflow declared (`$3` ms, NULL for none), under its
-- workflow task's CAS.
-- An open job only: a closed job's bound means nothing.
UPDATE jobs SET wf_compensation_ms = $3, updated_at = now()
WHERE owner_id = $1 AND id = $2 AND status IN ('queued', 'running')
