-- The job holding an idempotency key.
-- By key on jobs_one_per_idempotency_key, the owner as a filter (ARRAY_LOOKUPS).
SELECT owner_id, id, idempotency_key, fingerprint, kind, workflow, activity, task_queue, input,
    status, version, result, error, completed_by, created_at, updated_at, finished_at, wf_ready,
    wf_lease_token, wf_parked, parent_job_id, wf_compensation_ms, wf_cancel_requested_at,
    wf_cancel_deadline, wf_cancel_arrival FROM jobs WHERE idempotency_key = $2 AND (owner_id = $1) IS TRUE
