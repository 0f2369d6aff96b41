-- Records when (in the job's arrival order) an activity's outcome arrived.
-- An outcome arrives once.
UPDATE activities SET arrival = ? WHERE owner_id = ? AND id = ? AND arrival IS NULL
