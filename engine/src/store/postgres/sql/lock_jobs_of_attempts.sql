-- Completions in a batch: locks the jobs of the attempts `$1` (distinct ids) in
-- (owner, id) order, each job once. Each id is looked up by index, one at a time (see
-- ARRAY_LOOKUPS), whatever the tables' size or statistics when the plan was cached.
WITH found AS MATERIALIZED (
    SELECT a.owner_id, a.job_id, array_agg(a.id) AS attempt_ids
    FROM generate_subscripts($1::uuid[], 1) AS x(i)
    CROSS JOIN LATERAL (SELECT a.owner_id, a.job_id,
        a.id FROM attempts a WHERE a.id = ($1::uuid[])[x.i] OFFSET 0) a
    GROUP BY a.owner_id, a.job_id
    ORDER BY a.owner_id, a.job_id
), locked AS MATERIALIZED (
    -- Locking discipline: jobs in (owner, id) order (the nested loop keeps found's).
    SELECT j.*, f.attempt_ids FROM found f
    CROSS JOIN LATERAL (
        SELECT j.owner_id, j.id, j.idempotency_key, j.fingerprint, j.kind, j.workflow, j.activity,
            j.task_queue, j.input, j.status, j.version, j.result, j.error, j.completed_by,
            j.created_at, j.updated_at, j.finished_at, j.wf_ready, j.wf_lease_token,
            j.wf_parked, j.parent_job_id, j.wf_compensation_ms, j.wf_cancel_requested_at,
            j.wf_cancel_deadline, j.wf_cancel_arrival FROM jobs j WHERE j.owner_id = f.owner_id AND j.id = f.job_id OFFSET 0 FOR UPDATE
    ) j
)
SELECT l.owner_id AS j_owner_id, l.id AS j_id, l.idempotency_key AS j_idempotency_key,
    l.fingerprint AS j_fingerprint, l.kind AS j_kind, l.workflow AS j_workflow,
    l.activity AS j_activity, l.task_queue AS j_task_queue, l.input AS j_input,
    l.status AS j_status, l.version AS j_version, l.result AS j_result, l.error AS j_error,
    l.completed_by AS j_completed_by, l.created_at AS j_created_at, l.updated_at AS j_updated_at,
    l.finished_at AS j_finished_at, l.wf_ready AS j_wf_ready, l.wf_lease_token AS j_wf_lease_token,
    l.wf_parked AS j_wf_parked, l.parent_job_id AS j_parent_job_id,
    l.wf_compensation_ms AS j_wf_compensation_ms,
    l.wf_cancel_requested_at AS j_wf_cancel_requested_at,
    l.wf_cancel_deadline AS j_wf_cancel_deadline, l.wf_cancel_arrival AS j_wf_cancel_arrival, c.owner_id AS c_owner_id, c.activity AS c_activity,
    c.contract_hash AS c_contract_hash, c.output_schema AS c_output_schema, t.*
FROM locked l
CROSS JOIN LATERAL unnest(l.attempt_ids) AS u(id)
-- Lock order: each attempt after its job. Locked, so read as it is now (after
-- any wait for its job), not as the statement's snapshot saw it.
CROSS JOIN LATERAL (
    SELECT owner_id, id, activity_id, job_id, number, activity, task_queue, provider, status,
        worker_id, lease_token, lease_expires_at, read_version, heartbeat_at, started_at,
        unknown_at, finished_at, error, completion_outcome, cancelled_by, cancel_reason,
        created_at FROM attempts a WHERE a.id = u.id AND a.owner_id = l.owner_id OFFSET 0 FOR UPDATE
) t
-- The current output contract (the owner's own, else the platform's), so that
-- judging the results needs no statement of its own.
LEFT JOIN LATERAL (
    SELECT c.owner_id, c.activity, c.contract_hash, c.output_schema FROM contracts c
    WHERE c.owner_id IN (l.owner_id, '*') AND c.activity = t.activity
    ORDER BY (c.owner_id = l.owner_id) DESC, c.registered_at DESC
    LIMIT 1
) c ON true
