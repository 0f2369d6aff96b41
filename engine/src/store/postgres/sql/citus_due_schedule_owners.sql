-- Citus: the owners with unpaused schedules due now, read without locking (the scheduler
-- then locks them owner by owner, one shard each).
SELECT DISTINCT owner_id FROM schedules WHERE NOT paused AND next_fire_at <= now()
