-- Many submissions of activity jobs in one statement: insert_activity_job.sql over
-- arrays, one element per job (`$1`–`$17`), and the events of every job (`$18`–`$23`).
WITH i AS (
    SELECT * FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[],
        $7::text[],
                         $8::jsonb[], $9::uuid[], $10::jsonb[], $11::jsonb[], $12::jsonb[],
                             $13::uuid[],
                         $14::int4[], $15::text[], $16::float8[], $17::float8[])
        WITH ORDINALITY AS i(owner_id, job_id, idempotency_key, fingerprint, kind, activity,
            task_queue,
                             input, activity_id, providers, options, activity_input, attempt_id,
                             number, provider, delay_s, start_timeout_s, ord)
), j AS (
    INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, kind, activity, task_queue, input,
        wf_ready)
    SELECT owner_id, job_id, idempotency_key, fingerprint, kind, activity, task_queue, input, false
    FROM i ORDER BY ord
    ON CONFLICT (owner_id, idempotency_key) DO NOTHING
    RETURNING owner_id, id, status, version, created_at, updated_at
), a AS (
    INSERT INTO activities (owner_id, id, job_id, seq, name, providers, options, task_queue, input)
    SELECT i.owner_id, i.activity_id, i.job_id, 0, i.activity,
           ARRAY(SELECT p FROM jsonb_array_elements_text(i.providers) WITH ORDINALITY AS x(p,
               n) ORDER BY n),
           i.options, i.task_queue, i.activity_input
    FROM i JOIN j ON j.owner_id = i.owner_id AND j.id = i.job_id
    RETURNING owner_id, id, job_id
), t AS (
    INSERT INTO attempts (owner_id, id, activity_id, job_id, number, activity, task_queue,
                          provider, available_at, start_deadline_at)
    SELECT i.owner_id, i.attempt_id, a.id, a.job_id, i.number, i.activity, i.task_queue, i.provider,
           now() + make_interval(secs => i.delay_s),
           now() + make_interval(secs => i.delay_s) + make_interval(secs => i.start_timeout_s)
    FROM i JOIN a ON a.owner_id = i.owner_id AND a.id = i.activity_id
    RETURNING owner_id, id, activity_id, job_id, number, activity, task_queue, provider, status,
        worker_id, lease_token, lease_expires_at, read_version, heartbeat_at, started_at,
        unknown_at, finished_at, error, completion_outcome, cancelled_by, cancel_reason, created_at
), e AS (
    INSERT INTO job_events (owner_id, job_id, seq, type, attempt_id, actor, data)
    SELECT j.owner_id, j.id, ev.seq, ev.type, ev.attempt_id, ev.actor, ev.data
    FROM unnest($18::uuid[], $19::int8[], $20::text[], $21::uuid[], $22::text[], $23::jsonb[])
            AS ev(job_id, seq, type, attempt_id, actor, data)
    JOIN j ON j.id = ev.job_id
)
SELECT t.owner_id, t.id, t.activity_id, t.job_id, t.number, t.activity, t.task_queue, t.provider,
    t.status, t.worker_id, t.lease_token, t.lease_expires_at, t.read_version, t.heartbeat_at,
    t.started_at, t.unknown_at, t.finished_at, t.error, t.completion_outcome, t.cancelled_by,
    t.cancel_reason, t.created_at, j.status AS job_status, j.version AS job_version,
       j.created_at AS job_created_at, j.updated_at AS job_updated_at
FROM j JOIN t ON t.owner_id = j.owner_id AND t.job_id = j.id
