-- Locks a job row for this transaction and returns it.
-- The write transaction already holds the database's write lock.
SELECT owner_id, id, idempotency_key, fingerprint, kind, workflow, activity, task_queue, input,
    status, version, result, error, completed_by, created_at, updated_at, finished_at, wf_ready,
    wf_lease_token, wf_parked, parent_job_id, wf_compensation_ms, wf_cancel_requested_at,
    wf_cancel_deadline, wf_cancel_arrival FROM jobs WHERE owner_id = ? AND id = ?
