-- Workflow-task claim, step 2: the task leased to the worker.
-- Hands out up to `filter.limit` workflow tasks (ready and unleased, or with an expired
-- lease), each with a fresh lease token. Locks their jobs without waiting.
-- Dispatch: a workflow task is handed to one worker; an expired one again.
UPDATE jobs SET wf_ready = 0, wf_lease_token = ?, wf_worker_id = ?, wf_lease_expires_at = ?,
                status = CASE WHEN status = 'queued' THEN 'running' ELSE status END, updated_at = ?
WHERE owner_id = ? AND id = ?
RETURNING owner_id, id, idempotency_key, fingerprint, kind, workflow, activity, task_queue, input,
    status, version, result, error, completed_by, created_at, updated_at, finished_at, wf_ready,
    wf_lease_token, wf_parked, parent_job_id, wf_compensation_ms, wf_cancel_requested_at,
    wf_cancel_deadline, wf_cancel_arrival,
    -- Sticky execution: the worker that keeps the job's state at its current version gets only what arrived after its horizon.
    wf_run, wf_run_from, wf_run_input, wf_run_started_at,
    CASE WHEN wf_sticky_worker = ? AND wf_sticky_version = version THEN wf_sticky_horizon END AS since_arrival
