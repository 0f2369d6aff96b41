-- Records a workflow job's patch marker (one writer at a time); `false` when the job had
-- recorded it already.
-- A job records a patch once: the primary key (owner_id, job_id, patch_id).
INSERT INTO workflow_patches (owner_id, job_id, patch_id, deprecated, recorded_at)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT DO NOTHING
