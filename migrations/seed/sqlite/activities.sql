-- The activity of each seeded job (seq 0), succeeded with its winning attempt's result.
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
)
INSERT INTO activities (owner_id, id, job_id, seq, name, providers, options, task_queue, input, status,
                        version, completed_by, result, created_at, updated_at, finished_at)
SELECT p.owner_id, ids.activity_id, ids.job_id, 0, p.activity, p.providers, p.options, p.task_queue,
       p.input, 'succeeded', 1, ids.attempt_id, p.result, ids.at, ids.at, ids.at
FROM ids CROSS JOIN p
