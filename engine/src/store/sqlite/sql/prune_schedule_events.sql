-- Retention of schedules' history: deletes at most `limit` schedule events written more than
-- `retention` ago by the database clock, oldest first; answers how many. Schedules themselves
-- are never deleted by retention.
-- Retention: only events older than the retention, oldest first (schedule_events_by_time).
DELETE FROM schedule_events WHERE rowid IN (SELECT rowid FROM schedule_events WHERE at < ? ORDER BY at LIMIT ?)
