-- Views: the children of the jobs (owner `$1[i]`, parent `$2[i]`), by parent and position
-- (see children_of_job.sql); one probe of jobs_children per parent (see ARRAY_LOOKUPS).
SELECT c.* FROM generate_subscripts($1::text[], 1) AS k(i)
CROSS JOIN LATERAL (
    SELECT owner_id, parent_job_id, id, idempotency_key FROM jobs x
    WHERE x.owner_id = ($1::text[])[k.i] AND x.parent_job_id = ($2::uuid[])[k.i] OFFSET 0
) c
ORDER BY c.owner_id, c.parent_job_id, length(c.idempotency_key), c.idempotency_key
