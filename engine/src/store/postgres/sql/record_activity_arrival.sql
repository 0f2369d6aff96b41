-- Records when (in the job's arrival order) an activity's outcome arrived.
-- An outcome arrives once.
UPDATE activities SET arrival = $3 WHERE owner_id = $1 AND id = $2 AND arrival IS NULL
