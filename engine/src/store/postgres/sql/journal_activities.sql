-- The activities of a workflow job's run (`$3` its first position), with their arrival numbers.
-- By job on activities_one_per_seq, the owner as a filter (ARRAY_LOOKUPS).
SELECT owner_id, id, job_id, seq, name, providers, options, task_queue, input, status, version,
    completed_by, result, error, finished_at, arrival
FROM activities WHERE job_id = $2 AND (owner_id = $1) IS TRUE AND seq >= $3 ORDER BY seq
