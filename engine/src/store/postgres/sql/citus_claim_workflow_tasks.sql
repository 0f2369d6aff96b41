-- claim_workflow_tasks.sql for one owner (Citus: one shard): `$1` queue, `$2` workflows,
-- `$3` owner, `$4` limit, `$5` worker, `$6` lease seconds, `$7` one fresh lease token per
-- task it may hand out (Citus refuses a volatile function in an UPDATE).
WITH picked AS (
    SELECT owner_id, id, updated_at FROM jobs
    -- wf_open: the partial index's predicate (see the hot_job_updates migration).
    WHERE wf_open AND status IN ('queued', 'running')
      AND task_queue = $1 AND workflow = ANY($2)
      -- Owner isolation, and the one shard this statement reaches.
      AND owner_id = $3
      AND ((wf_ready AND wf_lease_token IS NULL) OR wf_lease_expires_at < now())
    ORDER BY updated_at, id
    LIMIT $4
    FOR UPDATE SKIP LOCKED
), numbered AS (
    SELECT id, ($7::uuid[])[row_number() OVER (ORDER BY updated_at, id)] AS token FROM picked
)
UPDATE jobs j
SET wf_ready = false, wf_lease_token = p.token, wf_worker_id = $5,
    wf_lease_expires_at = now() + make_interval(secs => $6),
    status = CASE WHEN j.status = 'queued' THEN 'running' ELSE j.status END,
    updated_at = now()
FROM numbered p
WHERE j.owner_id = $3 AND j.id = p.id
RETURNING j.owner_id, j.id, j.idempotency_key, j.fingerprint, j.kind, j.workflow, j.activity,
    j.task_queue, j.input, j.status, j.version, j.result, j.error, j.completed_by, j.created_at,
    j.updated_at, j.finished_at, j.wf_ready, j.wf_lease_token, j.wf_parked, j.parent_job_id,
    j.wf_compensation_ms, j.wf_cancel_requested_at, j.wf_cancel_deadline, j.wf_cancel_arrival,
    -- Sticky execution: the worker that keeps the job's state at its current version gets only what arrived after its horizon.
    j.wf_run, j.wf_run_from, j.wf_run_input, j.wf_run_started_at,
    CASE WHEN j.wf_sticky_worker = $5 AND j.wf_sticky_version = j.version THEN j.wf_sticky_horizon END AS since_arrival
