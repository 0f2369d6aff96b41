-- A job's activities in order.
-- By job on activities_one_per_seq, the owner as a filter (ARRAY_LOOKUPS).
SELECT owner_id, id, job_id, seq, name, providers, options, task_queue, input, status, version,
    completed_by, result, error,
    finished_at FROM activities WHERE job_id = $2 AND (owner_id = $1) IS TRUE ORDER BY seq
