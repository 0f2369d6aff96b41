-- Citus: the owners with scheduled attempts past their schedule-to-start deadline, read
-- without locking (the reaper then locks them owner by owner, one shard each).
SELECT DISTINCT owner_id FROM attempts
WHERE status = 'scheduled' AND start_deadline_at IS NOT NULL AND start_deadline_at < now()
