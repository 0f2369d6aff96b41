-- Citus: the owners with jobs whose compensation bound passed, read without locking (the
-- deadlines' loop then locks them owner by owner, one shard each).
SELECT DISTINCT owner_id FROM jobs
WHERE wf_cancel_deadline IS NOT NULL AND wf_cancel_deadline <= now()
