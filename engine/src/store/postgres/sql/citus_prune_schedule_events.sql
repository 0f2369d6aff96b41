-- prune_schedule_events.sql for one owner (`$1`; Citus: one shard): deletes at most `$3`
-- of its schedule events older than `$2` seconds, oldest first; answers how many.
-- Retention: only events older than the retention, oldest first.
DELETE FROM schedule_events WHERE owner_id = $1 AND ctid = ANY (ARRAY(
SELECT ctid FROM schedule_events WHERE owner_id = $1 AND at < now() - make_interval(secs => $2)
ORDER BY at LIMIT $3))
