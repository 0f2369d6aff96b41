-- Views: the activities of the jobs (owner `$1[i]`, job `$2[i]`), by job and position;
-- one index probe per job (see ARRAY_LOOKUPS).
SELECT a.* FROM generate_subscripts($1::text[], 1) AS k(i)
CROSS JOIN LATERAL (
    SELECT owner_id, id, job_id, seq, name, providers, options, task_queue, input, status, version,
        completed_by, result, error, finished_at FROM activities x
    WHERE x.job_id = ($2::uuid[])[k.i] AND (x.owner_id = ($1::text[])[k.i]) IS TRUE OFFSET 0
) a
ORDER BY a.job_id, a.seq
