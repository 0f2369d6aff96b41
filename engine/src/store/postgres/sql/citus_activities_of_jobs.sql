-- activities_of_jobs.sql on Citus: the activities of the jobs (owner `$1[i]`, job
-- `$2[i]`), by job and position.
SELECT owner_id, id, job_id, seq, name, providers, options, task_queue, input, status, version,
    completed_by, result, error, finished_at FROM activities
WHERE (owner_id, job_id) IN (SELECT * FROM unnest($1::text[], $2::uuid[]))
ORDER BY job_id, seq
