-- Locks the job of an attempt visible in `scope` and returns it (one round trip for what
-- `locate_attempt` + `lock_job` would do).
-- Owner isolation: an attempt outside the scope is not found.
SELECT owner_id, id, idempotency_key, fingerprint, kind, workflow, activity, task_queue, input,
    status, version, result, error, completed_by, created_at, updated_at, finished_at, wf_ready,
    wf_lease_token, wf_parked, parent_job_id, wf_compensation_ms, wf_cancel_requested_at,
    wf_cancel_deadline, wf_cancel_arrival FROM jobs
WHERE (owner_id, id) = (SELECT owner_id, job_id FROM attempts
                        WHERE id = $1 AND ($2::text IS NULL OR owner_id = $2))
FOR UPDATE
