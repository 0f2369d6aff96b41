-- The five events of each seeded job, as the engine writes them for an activity job that
-- succeeded at its first attempt.
WITH RECURSIVE p (jobs, tag, owner_id, key_prefix, fingerprint, activity, task_queue, input, providers,
                  options, result, worker_id, provider, base_us) AS (
    -- The parameters, by name (README.md).
    SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14
), s (i) AS (
    SELECT 1 UNION ALL SELECT s.i + 1 FROM s, p WHERE s.i < p.jobs
), ids AS (
    -- Job i finished at `at` (µs since the epoch), base + i ms: with ?14 = now - (jobs + 1)
    -- ms, the last one 1 ms ago, as on PostgreSQL. Its ids are UUIDv7-shaped at that time,
    -- so history sorts before newer jobs; the run tag, the kind (job 001, activity 002,
    -- attempt 003) and i make them unique.
    SELECT s.i, p.base_us + s.i * 1000 AS at,
           printf('%08x-%04x-7%s-8001-%012x', (p.base_us / 1000 + s.i) / 65536,
                  (p.base_us / 1000 + s.i) % 65536, p.tag, s.i) AS job_id,
           printf('%08x-%04x-7%s-8002-%012x', (p.base_us / 1000 + s.i) / 65536,
                  (p.base_us / 1000 + s.i) % 65536, p.tag, s.i) AS activity_id,
           printf('%08x-%04x-7%s-8003-%012x', (p.base_us / 1000 + s.i) / 65536,
                  (p.base_us / 1000 + s.i) % 65536, p.tag, s.i) AS attempt_id
    FROM s CROSS JOIN p
), v (seq, type) AS (
    VALUES (1, 'job_created'), (2, 'attempt_scheduled'), (3, 'attempt_started'),
           (4, 'attempt_succeeded'), (5, 'job_succeeded')
)
INSERT INTO job_events (owner_id, job_id, seq, at, type, attempt_id, actor, data)
SELECT p.owner_id, ids.job_id, v.seq, ids.at, v.type, CASE WHEN v.seq > 1 THEN ids.attempt_id END,
       CASE WHEN v.seq <= 2 THEN 'client:' || p.owner_id WHEN v.seq = 5 THEN 'engine' ELSE 'worker:' || p.worker_id END,
       CASE v.seq
           WHEN 1 THEN json_object('kind', 'activity', 'idempotency_key', p.key_prefix || ids.i)
           WHEN 2 THEN json_object('seq', 0, 'number', 1, 'reason', 'first', 'provider', p.provider)
           WHEN 3 THEN json_object('number', 1, 'provider', p.provider, 'lease_expires_at',
                                   strftime('%Y-%m-%dT%H:%M:%S', (ids.at + 30000000) / 1000000, 'unixepoch')
                                   || printf('.%06dZ', (ids.at + 30000000) % 1000000))
           WHEN 4 THEN json_object('number', 1, 'provider', p.provider)
           ELSE json_object('completed_by', ids.attempt_id)
       END
FROM ids CROSS JOIN p CROSS JOIN v
