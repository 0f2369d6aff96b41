-- The seeded jobs: succeeded activity jobs, each with the result of its winning attempt.
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
INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, kind, activity, task_queue, input, status,
                  version, result, completed_by, created_at, updated_at, finished_at)
SELECT p.owner_id, ids.job_id, p.key_prefix || ids.i, p.fingerprint, 'activity', p.activity, p.task_queue,
       p.input, 'succeeded', 2, p.result, ids.attempt_id, ids.at, ids.at, ids.at
FROM ids CROSS JOIN p
