-- Appends events to job histories, in order.
-- The caller holds each job's lock, so numbering after the current maximum is safe.
INSERT INTO job_events (owner_id, job_id, seq, type, attempt_id, actor, data)
SELECT e.owner_id, e.job_id,
       COALESCE((SELECT max(seq) FROM job_events x
                 WHERE x.owner_id = e.owner_id AND x.job_id = e.job_id), 0)
       + row_number() OVER (PARTITION BY e.owner_id, e.job_id ORDER BY e.ord),
       e.type, e.attempt_id, e.actor, e.data
FROM unnest($1::text[], $2::uuid[], $3::text[], $4::uuid[], $5::text[], $6::jsonb[])
     WITH ORDINALITY AS e(owner_id, job_id, type, attempt_id, actor, data, ord)
