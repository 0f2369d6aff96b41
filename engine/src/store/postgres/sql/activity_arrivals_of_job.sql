-- The arrival numbers of a job's activities whose outcome has arrived, by position.
-- By job on activities_one_per_seq, the owner as a filter (ARRAY_LOOKUPS).
SELECT seq, arrival FROM activities
WHERE job_id = $2 AND (owner_id = $1) IS TRUE AND arrival IS NOT NULL ORDER BY seq
