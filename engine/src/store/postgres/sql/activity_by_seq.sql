-- An activity by its position in the job.
-- By job on activities_one_per_seq, the owner as a filter (ARRAY_LOOKUPS).
SELECT owner_id, id, job_id, seq, name, providers, options, task_queue, input, status, version,
    completed_by, result, error,
    finished_at FROM activities WHERE job_id = $2 AND seq = $3 AND (owner_id = $1) IS TRUE
