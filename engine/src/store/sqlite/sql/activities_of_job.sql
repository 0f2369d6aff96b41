-- A job's activities in order.
SELECT owner_id, id, job_id, seq, name, providers, options, task_queue, input, status, version,
    completed_by, result, error,
    finished_at FROM activities WHERE owner_id = ? AND job_id = ? ORDER BY seq
