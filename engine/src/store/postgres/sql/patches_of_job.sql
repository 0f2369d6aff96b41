-- The patch markers a workflow job recorded, by patch id.
SELECT patch_id FROM workflow_patches WHERE owner_id = $1 AND job_id = $2 ORDER BY patch_id
