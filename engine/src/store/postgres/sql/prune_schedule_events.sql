-- Retention of schedules' history: deletes at most `limit` schedule events written more than
-- `retention` ago by the database clock, oldest first; answers how many. Schedules themselves
-- are never deleted by retention.
-- Retention: only events older than the retention, oldest first (schedule_events_by_time).
DELETE FROM schedule_events WHERE ctid = ANY (ARRAY(
SELECT ctid FROM schedule_events WHERE at < now() - make_interval(secs => $1) ORDER BY at LIMIT $2))
