-- children_of_jobs.sql on Citus: the children of the jobs (owner `$1[i]`, parent
-- `$2[i]`), by parent and position.
SELECT owner_id, parent_job_id, id, idempotency_key FROM jobs
WHERE parent_job_id IS NOT NULL
  AND (owner_id, parent_job_id) IN (SELECT * FROM unnest($1::text[], $2::uuid[]))
ORDER BY owner_id, parent_job_id, length(idempotency_key), idempotency_key
