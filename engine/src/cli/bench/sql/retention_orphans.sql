-- `--workload retention`: jobs left without any event (0 unless a partition of job_events
-- went while a job of its range was still there).
SELECT count(*) FROM jobs j
WHERE NOT EXISTS (SELECT 1 FROM job_events e WHERE e.owner_id = j.owner_id AND e.job_id = j.id)
