-- A workflow job's children at some positions (`?3` their keys `{parent}:child:{seq}`, a
-- JSON array), with their outcomes' numbers in the parent's arrival order.
SELECT owner_id, id, idempotency_key, fingerprint, kind, workflow, activity, task_queue, input,
    status, version, result, error, completed_by, created_at, updated_at, finished_at, wf_ready,
    wf_lease_token, wf_parked, parent_job_id, wf_compensation_ms, wf_cancel_requested_at,
    wf_cancel_deadline, wf_cancel_arrival, parent_arrival, parent_seen_error,
    parent_seen_finished_at FROM jobs
WHERE owner_id = ?1 AND idempotency_key IN (SELECT value FROM json_each(?3)) AND parent_job_id = ?2
