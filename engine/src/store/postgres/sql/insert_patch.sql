-- Records a workflow job's patch marker (the caller holds the job's row lock); `false`
-- when the job had recorded it already.
-- A job records a patch once: the primary key (owner_id, job_id, patch_id).
INSERT INTO workflow_patches (owner_id, job_id, patch_id, deprecated)
VALUES ($1, $2, $3, $4)
ON CONFLICT DO NOTHING
