-- The owner cancels a workflow job that declared a compensation bound: records the
-- request and its deadline (now + the bound), moves the version and drops the workflow
-- task in flight (it replayed without the cancel: its completion is stale), so that the
-- next task replays with the cancel. The deadline is computed in UTC wall time (timestamp
-- + interval is immutable), which Citus accepts beside a column reference.
-- Cancel once, of an open job at the version read under its lock, with a bound declared.
UPDATE jobs
SET wf_cancel_requested_at = now(),
    wf_cancel_deadline = timezone('UTC', timezone('UTC', now())
        + wf_compensation_ms * interval '1 millisecond'),
    version = version + 1, wf_lease_token = NULL, wf_lease_expires_at = NULL,
    updated_at = now()
WHERE owner_id = $1 AND id = $2 AND version = $3 AND status IN ('queued', 'running')
  AND kind = 'workflow' AND wf_compensation_ms IS NOT NULL AND wf_cancel_requested_at IS NULL
