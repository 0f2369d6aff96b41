-- Jobs matching the query, newest first, with their activities and attempts.
SELECT owner_id, id, idempotency_key, fingerprint, kind, workflow, activity, task_queue, input,
    status, version, result, error, completed_by, created_at, updated_at, finished_at, wf_ready,
    wf_lease_token, wf_parked, parent_job_id, wf_compensation_ms, wf_cancel_requested_at,
    wf_cancel_deadline, wf_cancel_arrival FROM jobs
WHERE ($1::text IS NULL OR owner_id = $1)
  AND ($2::text IS NULL OR status = $2)
  AND ($3::text IS NULL OR workflow = $3)
  AND ($4::text IS NULL OR activity = $4)
  AND ($5::uuid IS NULL OR id < $5)
  AND ($7::timestamptz IS NULL OR created_at >= $7)
  AND ($8::timestamptz IS NULL OR created_at < $8)
ORDER BY id DESC
LIMIT $6
