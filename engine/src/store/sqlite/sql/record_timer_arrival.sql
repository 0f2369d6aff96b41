-- Records when (in the job's arrival order) a timer fired.
-- An outcome arrives once.
UPDATE timers SET arrival = ? WHERE owner_id = ? AND job_id = ? AND seq = ? AND arrival IS NULL
