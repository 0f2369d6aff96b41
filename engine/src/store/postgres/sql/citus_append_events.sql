-- append_events.sql for the events of one owner (`$1`; Citus: one shard): jobs `$2[i]`,
-- types `$3[i]`, attempts `$4[i]`, actors `$5[i]`, data `$6[i]`.
-- Event order: the caller holds each job's lock, so numbering after the current
-- maximum is safe.
INSERT INTO job_events (owner_id, job_id, seq, type, attempt_id, actor, data)
SELECT $1::text, e.job_id,
       COALESCE((SELECT max(seq) FROM job_events x
                 WHERE x.owner_id = $1::text AND x.job_id = e.job_id), 0)
       + row_number() OVER (PARTITION BY e.job_id ORDER BY e.ord),
       e.type, e.attempt_id, e.actor, e.data
FROM unnest($2::uuid[], $3::text[], $4::uuid[], $5::text[], $6::jsonb[])
     WITH ORDINALITY AS e(job_id, type, attempt_id, actor, data, ord)
