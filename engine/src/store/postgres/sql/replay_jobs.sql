-- Replays in one statement: the jobs holding the keys (owner `$1[i]`, key `$2[i]`)
-- locked in (owner, id) order, and a `job_replayed` for each replay (owner `$3[i]`, key
-- `$4[i]`, fingerprint `$5[i]`, actor `$6[i]`, data `$7[i]`) whose fingerprint is its
-- job's; answers the jobs as locked.
WITH found AS MATERIALIZED (
    -- One index probe per key (see ARRAY_LOOKUPS): the jobs as the statement's
    -- snapshot shows them.
    SELECT x.* FROM generate_subscripts($1::text[], 1) AS k(i)
    CROSS JOIN LATERAL (
        SELECT x.owner_id, x.id, x.idempotency_key, x.fingerprint, x.kind, x.workflow, x.activity,
            x.task_queue, x.input, x.status, x.version, x.result, x.error, x.completed_by,
            x.created_at, x.updated_at, x.finished_at, x.wf_ready, x.wf_lease_token,
            x.wf_parked, x.parent_job_id, x.wf_compensation_ms, x.wf_cancel_requested_at,
            x.wf_cancel_deadline, x.wf_cancel_arrival FROM jobs x
        -- By key on jobs_one_per_idempotency_key, the owner as a filter (ARRAY_LOOKUPS).
        WHERE x.idempotency_key = ($2::text[])[k.i] AND (x.owner_id = ($1::text[])[k.i]) IS TRUE OFFSET 0
    ) x
    ORDER BY x.owner_id, x.id
), locked AS (
    -- Locking discipline: jobs in (owner, id) order (the nested loop keeps found's).
    SELECT j.owner_id, j.id, j.idempotency_key, j.fingerprint FROM found f
    CROSS JOIN LATERAL (
        SELECT j.owner_id, j.id, j.idempotency_key, j.fingerprint FROM jobs j
        WHERE j.owner_id = f.owner_id AND j.id = f.id OFFSET 0 FOR UPDATE
    ) j
), replayed AS (
    -- Event order: numbered after the job's last event. The numbers are read from
    -- the statement's snapshot: if it waited on a job whose holder appended events,
    -- they collide with those (job_events_pkey) and the statement fails whole.
    INSERT INTO job_events (owner_id, job_id, seq, type, attempt_id, actor, data)
    SELECT l.owner_id, l.id,
           COALESCE((SELECT max(x.seq) FROM job_events x WHERE x.owner_id = l.owner_id AND x.job_id = l.id),
               0)
           + row_number() OVER (PARTITION BY l.owner_id, l.id ORDER BY r.i),
           'job_replayed', NULL, ($6::text[])[r.i], ($7::jsonb[])[r.i]
    FROM generate_subscripts($3::text[], 1) AS r(i)
    JOIN locked l ON l.owner_id = ($3::text[])[r.i] AND l.idempotency_key = ($4::text[])[r.i]
                 AND l.fingerprint = ($5::text[])[r.i]
)
-- Each replayed job with its activities and attempts, one row per attempt, all
-- as of the statement's snapshot (taken once the calls had arrived): a view
-- that was true at one instant, whatever committed during the lock wait.
SELECT f.owner_id AS j_owner_id, f.id AS j_id, f.idempotency_key AS j_idempotency_key,
    f.fingerprint AS j_fingerprint, f.kind AS j_kind, f.workflow AS j_workflow,
    f.activity AS j_activity, f.task_queue AS j_task_queue, f.input AS j_input,
    f.status AS j_status, f.version AS j_version, f.result AS j_result, f.error AS j_error,
    f.completed_by AS j_completed_by, f.created_at AS j_created_at, f.updated_at AS j_updated_at,
    f.finished_at AS j_finished_at, f.wf_ready AS j_wf_ready, f.wf_lease_token AS j_wf_lease_token,
    f.wf_parked AS j_wf_parked, f.parent_job_id AS j_parent_job_id,
    f.wf_compensation_ms AS j_wf_compensation_ms,
    f.wf_cancel_requested_at AS j_wf_cancel_requested_at,
    f.wf_cancel_deadline AS j_wf_cancel_deadline, f.wf_cancel_arrival AS j_wf_cancel_arrival, a.owner_id AS a_owner_id, a.id AS a_id, a.job_id AS a_job_id,
    a.seq AS a_seq, a.name AS a_name, a.providers AS a_providers, a.options AS a_options,
    a.task_queue AS a_task_queue, a.input AS a_input, a.status AS a_status, a.version AS a_version,
    a.completed_by AS a_completed_by, a.result AS a_result, a.error AS a_error,
    a.finished_at AS a_finished_at, t.*
FROM found f
JOIN locked l ON l.owner_id = f.owner_id AND l.id = f.id
LEFT JOIN LATERAL (
    SELECT owner_id, id, job_id, seq, name, providers, options, task_queue, input, status, version,
        completed_by, result, error,
        finished_at FROM activities a WHERE a.job_id = f.id AND (a.owner_id = f.owner_id) IS TRUE OFFSET 0
) a ON true
LEFT JOIN LATERAL (
    SELECT owner_id, id, activity_id, job_id, number, activity, task_queue, provider, status,
        worker_id, lease_token, lease_expires_at, read_version, heartbeat_at, started_at,
        unknown_at, finished_at, error, completion_outcome, cancelled_by, cancel_reason,
        created_at FROM attempts t WHERE t.activity_id = a.id AND (t.owner_id = a.owner_id) IS TRUE OFFSET 0
) t ON true
ORDER BY f.owner_id, f.id, a.seq, t.number
