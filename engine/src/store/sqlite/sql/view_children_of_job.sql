-- A job's children by position, for its view (see children_of_job.sql).
SELECT id FROM jobs WHERE owner_id = ? AND parent_job_id = ?
ORDER BY length(idempotency_key), idempotency_key
