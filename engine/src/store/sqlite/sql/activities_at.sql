-- A job's activities at the positions `?3` (a JSON array), with their arrival numbers.
SELECT owner_id, id, job_id, seq, name, providers, options, task_queue, input, status, version,
    completed_by, result, error, finished_at, arrival
FROM activities WHERE owner_id = ?1 AND job_id = ?2 AND seq IN (SELECT value FROM json_each(?3))
ORDER BY seq
