-- The activities of a workflow job's run (`?3` its first position) whose outcome arrived after place `?4`.
-- By arrival on activities_by_arrival: the new part of a long history without reading the rest.
SELECT owner_id, id, job_id, seq, name, providers, options, task_queue, input, status, version,
    completed_by, result, error, finished_at, arrival
FROM activities WHERE owner_id = ?1 AND job_id = ?2 AND arrival > ?4 AND seq >= ?3
ORDER BY arrival
