-- Citus: the owners with attempts available now on queue `$1` for the (activity,
-- provider) pairs `$2[i]`/`$3[i]`, read without locking (a claim then takes them owner
-- by owner, one shard each).
SELECT DISTINCT owner_id FROM attempts
WHERE dispatchable AND status = 'scheduled' AND task_queue = $1 AND available_at <= now()
  AND (activity, provider) IN (SELECT * FROM unnest($2::text[], $3::text[]))
