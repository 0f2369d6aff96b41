-- claim_attempts.sql for one owner (Citus: one shard): `$1` queue, `$2` owner, `$3`/`$4`
-- activity and provider arrays, `$5` limit, `$6` worker, `$7` one fresh lease token per
-- attempt it may hand out (Citus refuses a volatile function in an UPDATE).
-- Every row is reached by an index range or probe, or by the ctid of a row this
-- statement locked, whatever the tables' size when the plan was cached (see
-- ARRAY_LOOKUPS): PostgreSQL keeps one plan for it.
WITH candidates AS (
    -- Per registered (activity, provider): an index range in dispatch order
    -- that stops at the limit, whatever the backlog.
    SELECT c.owner_id, c.id, c.job_id, c.activity_id, c.available_at, c.row_ctid
    FROM generate_subscripts($3::text[], 1) AS pair(i)
    CROSS JOIN LATERAL (
        SELECT a.owner_id, a.id, a.job_id, a.activity_id, a.available_at, a.ctid AS row_ctid
        FROM attempts a
        -- `dispatchable` names the partial index (status = 'scheduled').
        WHERE a.dispatchable AND a.status = 'scheduled' AND a.task_queue = $1
          AND a.activity = ($3::text[])[pair.i] AND a.provider = ($4::text[])[pair.i]
          AND a.available_at <= now()
          -- Owner isolation, and the one shard this statement reaches.
          AND a.owner_id = $2
        ORDER BY a.available_at, a.id
        LIMIT $5
        FOR UPDATE OF a SKIP LOCKED
    ) c
),
-- Their jobs, without waiting: an attempt whose job another transaction
-- holds is left for the next claim (lock order stays job-safe, no waits).
locked_jobs AS (
    SELECT j.owner_id, j.id, j.row_ctid FROM (SELECT DISTINCT owner_id, job_id FROM candidates) c
    CROSS JOIN LATERAL (
        SELECT j.owner_id, j.id, j.ctid AS row_ctid FROM jobs j
        WHERE j.owner_id = $2 AND j.id = c.job_id OFFSET 0
        FOR UPDATE SKIP LOCKED
    ) j
),
picked AS (
    SELECT c.owner_id, c.id, c.activity_id, c.row_ctid,
        ($7::uuid[])[row_number() OVER (ORDER BY c.available_at, c.id)] AS token
    FROM candidates c
    JOIN locked_jobs l ON l.owner_id = c.owner_id AND l.id = c.job_id
    ORDER BY c.available_at, c.id
    LIMIT $5
),
started AS (
    UPDATE attempts t
    SET status = 'started', lease_token = p.token, worker_id = $6,
        started_at = now(), heartbeat_at = now(), read_version = act.version,
        -- In UTC wall time: immutable arithmetic, which Citus accepts in an UPDATE.
        lease_expires_at = LEAST(
            timezone('UTC', timezone('UTC', now())
                + make_interval(secs => (act.options->>'heartbeat_timeout_s')::float8)),
            timezone('UTC', timezone('UTC', now())
                + make_interval(secs => (act.options->>'start_to_close_timeout_s')::float8)))
    FROM picked p
    -- The attempt's activity, locked (its job is held, so nobody waits) so
    -- that it is read as it is now and its ctid holds.
    CROSS JOIN LATERAL (
        SELECT x.ctid AS act_ctid, x.version, x.options, x.seq, x.input FROM activities x
        WHERE x.owner_id = $2 AND x.id = p.activity_id OFFSET 0
        FOR UPDATE
    ) act
    -- The rows are locked by this statement, so their ctid holds: a direct hit,
    -- whatever the statistics say.
    WHERE t.ctid = p.row_ctid AND t.owner_id = $2 AND t.id = p.id AND t.status = 'scheduled'
    RETURNING t.owner_id, t.id, t.activity_id, t.job_id, t.number, t.activity, t.task_queue,
        t.provider, t.status, t.worker_id, t.lease_token, t.lease_expires_at, t.read_version,
        t.heartbeat_at, t.started_at, t.unknown_at, t.finished_at, t.error, t.completion_outcome,
        t.cancelled_by, t.cancel_reason, t.created_at, act.seq AS activity_seq,
        act.input AS activity_input,
              act.options AS activity_options, act.act_ctid
),
-- Activity status: scheduled → running with its attempt.
running_activities AS (
    UPDATE activities a SET status = 'running', updated_at = now()
    FROM started s
    WHERE a.ctid = s.act_ctid AND a.owner_id = $2 AND a.id = s.activity_id AND a.status = 'scheduled'
),
-- Job status: queued → running with its first attempt.
running_jobs AS (
    UPDATE jobs j SET status = 'running', updated_at = now()
    FROM started s JOIN locked_jobs l ON l.owner_id = s.owner_id AND l.id = s.job_id
    WHERE j.ctid = l.row_ctid AND j.owner_id = $2 AND j.id = s.job_id AND j.status = 'queued'
)
SELECT * FROM started
