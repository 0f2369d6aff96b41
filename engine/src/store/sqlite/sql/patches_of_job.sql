-- The patch markers a workflow job recorded, by patch id.
SELECT patch_id FROM workflow_patches WHERE owner_id = ? AND job_id = ? ORDER BY patch_id
