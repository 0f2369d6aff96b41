-- Citus: the owners with workflow tasks to hand out on queue `$1` for the workflows `$2`,
-- read without locking (a claim then takes them owner by owner, one shard each).
SELECT DISTINCT owner_id FROM jobs
WHERE wf_open AND status IN ('queued', 'running') AND task_queue = $1 AND workflow = ANY($2)
  AND ((wf_ready AND wf_lease_token IS NULL) OR wf_lease_expires_at < now())
