-- Records when (in the job's arrival order) a signal arrived.
-- An outcome arrives once.
UPDATE signals SET arrival = ? WHERE owner_id = ? AND job_id = ? AND seq = ? AND arrival IS NULL
