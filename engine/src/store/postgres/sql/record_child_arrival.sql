-- Records when (in its parent's arrival order) a child job's outcome arrived: `$1` owner,
-- `$2` parent, `$3` child, `$4` the number.
-- An outcome arrives once: a number recorded is never replaced.
UPDATE jobs SET parent_arrival = $4
WHERE owner_id = $1 AND id = $3 AND parent_job_id = $2 AND parent_arrival IS NULL
