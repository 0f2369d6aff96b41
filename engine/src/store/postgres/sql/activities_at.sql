-- A job's activities at the positions `$3`, with their arrival numbers.
-- By job and position on activities_one_per_seq, the owner as a filter (ARRAY_LOOKUPS).
SELECT owner_id, id, job_id, seq, name, providers, options, task_queue, input, status, version,
    completed_by, result, error, finished_at, arrival
FROM activities WHERE job_id = $2 AND seq = ANY($3) AND (owner_id = $1) IS TRUE ORDER BY seq
