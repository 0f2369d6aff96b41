-- The one attempt of each seeded activity: the first, at the first provider, which won.
-- A finished attempt keeps its worker and lease token and holds no lease.
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
INSERT INTO attempts (owner_id, id, activity_id, job_id, number, activity, task_queue, provider, status,
                      available_at, worker_id, lease_token, lease_expires_at, read_version, heartbeat_at,
                      started_at, finished_at, completion_outcome, created_at)
SELECT p.owner_id, ids.attempt_id, ids.activity_id, ids.job_id, 1, p.activity, p.task_queue, p.provider,
       'succeeded', ids.at, p.worker_id, gen_random_uuid(), NULL, 0, ids.at, ids.at, ids.at, 'won', ids.at
FROM ids CROSS JOIN p
