-- Citus: the owners with started attempts whose lease expired, read without locking (the
-- reaper then locks them owner by owner, one shard each).
SELECT DISTINCT owner_id FROM attempts WHERE status = 'started' AND lease_expires_at < now()
