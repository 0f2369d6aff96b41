-- The submission of an activity job in one statement: job (dedup insert), activity 0,
-- attempt 1 and the job's first events, each inserted only from the row before it.
WITH j AS (
    INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, kind, activity, task_queue, input,
        wf_ready)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, false)
    ON CONFLICT (owner_id, idempotency_key) DO NOTHING
    RETURNING owner_id, id, status, version, created_at, updated_at
), a AS (
    INSERT INTO activities (owner_id, id, job_id, seq, name, providers, options, task_queue, input)
    SELECT j.owner_id, $9, j.id, 0, $10, $11, $12, $7, $13 FROM j
    RETURNING owner_id, id, job_id
), t AS (
    INSERT INTO attempts (owner_id, id, activity_id, job_id, number, activity, task_queue,
                          provider, available_at, start_deadline_at)
    SELECT a.owner_id, $14, a.id, a.job_id, $15, $10, $7, $16,
           now() + make_interval(secs => $17),
           now() + make_interval(secs => $17) + make_interval(secs => $18)
    FROM a
    RETURNING owner_id, id, activity_id, job_id, number, activity, task_queue, provider, status,
        worker_id, lease_token, lease_expires_at, read_version, heartbeat_at, started_at,
        unknown_at, finished_at, error, completion_outcome, cancelled_by, cancel_reason, created_at
), e AS (
    INSERT INTO job_events (owner_id, job_id, seq, type, attempt_id, actor, data)
    SELECT j.owner_id, j.id, ev.ord, ev.type, ev.attempt_id, ev.actor, ev.data
    FROM j, unnest($19::text[], $20::uuid[], $21::text[], $22::jsonb[])
            WITH ORDINALITY AS ev(type, attempt_id, actor, data, ord)
)
SELECT t.owner_id, t.id, t.activity_id, t.job_id, t.number, t.activity, t.task_queue, t.provider,
    t.status, t.worker_id, t.lease_token, t.lease_expires_at, t.read_version, t.heartbeat_at,
    t.started_at, t.unknown_at, t.finished_at, t.error, t.completion_outcome, t.cancelled_by,
    t.cancel_reason, t.created_at, j.status AS job_status, j.version AS job_version,
       j.created_at AS job_created_at, j.updated_at AS job_updated_at
FROM j, t
