-- Records when (in its parent's arrival order) a child job's outcome arrived.
-- An outcome arrives once: a number recorded is never replaced.
UPDATE jobs SET parent_arrival = ?1
WHERE owner_id = ?2 AND id = ?4 AND parent_job_id = ?3 AND parent_arrival IS NULL
