-- Inserts a job unless `(owner, idempotency key)` exists (invariant 1). Returns the inserted
-- row, or `None` when the key was taken.
-- Invariant 1: one job per (owner, idempotency key); the loser inserts nothing.
INSERT INTO jobs (owner_id, id, idempotency_key, fingerprint, kind, workflow, activity, task_queue,
    input,
                  created_at, updated_at, wf_ready, parent_job_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (owner_id, idempotency_key) DO NOTHING
RETURNING owner_id, id, idempotency_key, fingerprint, kind, workflow, activity, task_queue, input,
    status, version, result, error, completed_by, created_at, updated_at, finished_at, wf_ready,
    wf_lease_token, wf_parked, parent_job_id, wf_compensation_ms, wf_cancel_requested_at,
    wf_cancel_deadline, wf_cancel_arrival
