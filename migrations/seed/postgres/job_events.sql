-- The five events of each seeded job, as the engine writes them for an activity job that
-- succeeded at its first attempt.
WITH p AS (
    -- The parameters, by name (README.md).
    SELECT $1::bigint AS jobs, $2::text AS tag, $3::text AS owner_id, $4::text AS key_prefix,
           $5::text AS fingerprint, $6::text AS activity, $7::text AS task_queue,
           $8::text::jsonb AS input, $9::text[] AS providers, $10::text::jsonb AS options,
           $11::text::jsonb AS result, $12::text AS worker_id, $13::text AS provider
), ids AS (
    -- Job i finished at `at`, i ms after job i - 1, the last one 1 ms before now(). Its
    -- ids are UUIDv7-shaped at that time, so history sorts before newer jobs; the run tag,
    -- the kind (job 001, activity 002, attempt 003) and i make them unique.
    SELECT s.i, s.at,
           (lpad(to_hex((extract(epoch FROM s.at) * 1000)::bigint), 12, '0') || '7' || p.tag || '8001'
            || lpad(to_hex(s.i), 12, '0'))::uuid AS job_id,
           (lpad(to_hex((extract(epoch FROM s.at) * 1000)::bigint), 12, '0') || '7' || p.tag || '8002'
            || lpad(to_hex(s.i), 12, '0'))::uuid AS activity_id,
           (lpad(to_hex((extract(epoch FROM s.at) * 1000)::bigint), 12, '0') || '7' || p.tag || '8003'
            || lpad(to_hex(s.i), 12, '0'))::uuid AS attempt_id
    FROM p CROSS JOIN LATERAL (
        SELECT i, now() - make_interval(secs => (p.jobs - i + 1)::float8 / 1000.0) AS at
        FROM generate_series(1::bigint, p.jobs) AS i
    ) s
)
INSERT INTO job_events (owner_id, job_id, seq, at, type, attempt_id, actor, data)
SELECT p.owner_id, ids.job_id, v.seq, ids.at, v.type, CASE WHEN v.seq > 1 THEN ids.attempt_id END,
       CASE WHEN v.seq <= 2 THEN 'client:' || p.owner_id WHEN v.seq = 5 THEN 'engine' ELSE 'worker:' || p.worker_id END,
       CASE v.seq
           WHEN 1 THEN jsonb_build_object('kind', 'activity', 'idempotency_key', p.key_prefix || ids.i)
           WHEN 2 THEN jsonb_build_object('seq', 0, 'number', 1, 'reason', 'first', 'provider', p.provider)
           WHEN 3 THEN jsonb_build_object('number', 1, 'provider', p.provider,
                                          'lease_expires_at', ids.at + interval '30 seconds')
           WHEN 4 THEN jsonb_build_object('number', 1, 'provider', p.provider)
           ELSE jsonb_build_object('completed_by', ids.attempt_id)
       END
FROM ids CROSS JOIN p
     CROSS JOIN (VALUES (1, 'job_created'), (2, 'attempt_scheduled'), (3, 'attempt_started'),
                        (4, 'attempt_succeeded'), (5, 'job_succeeded')) AS v(seq, type)
