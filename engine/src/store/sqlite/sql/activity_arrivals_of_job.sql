-- The arrival numbers of a job's activities whose outcome has arrived, by position.
SELECT seq, arrival FROM activities WHERE owner_id = ? AND job_id = ? AND arrival IS NOT NULL ORDER BY seq
