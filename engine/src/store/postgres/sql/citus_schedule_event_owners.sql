-- Citus: the owners with schedule events older than `$1` seconds (database clock), read
-- without locking (retention then deletes them owner by owner, one shard each).
SELECT DISTINCT owner_id FROM schedule_events WHERE at < now() - make_interval(secs => $1)
