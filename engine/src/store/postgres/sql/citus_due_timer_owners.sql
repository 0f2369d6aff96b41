-- Citus: the owners with due, unfired timers, read without locking (the timer loop then
-- locks them owner by owner, one shard each).
SELECT DISTINCT owner_id FROM timers WHERE fired_at IS NULL AND fire_at <= now()
