-- Records when (in the job's arrival order) a signal arrived.
-- An outcome arrives once.
UPDATE signals SET arrival = $4 WHERE owner_id = $1 AND job_id = $2 AND seq = $3 AND arrival IS NULL
