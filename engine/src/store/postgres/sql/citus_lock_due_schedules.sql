-- lock_due_schedules.sql for one owner (`$1`; Citus: one shard), `$2` limit.
-- Scheduler loop: each due schedule is taken by one engine only (SKIP LOCKED), and
-- only once due by the database's clock (the transaction's now(), which the pass
-- computes its ticks from), whatever the engine's clock.
SELECT owner_id, name, cron, timezone, job, overlap, catchup_window_s, paused, next_fire_at,
    last_fired_at, last_job_id, fired_count, skipped_overlap_count, skipped_too_old_count, version,
    created_at, updated_at FROM schedules
WHERE owner_id = $1 AND NOT paused AND next_fire_at <= now()
ORDER BY next_fire_at LIMIT $2
FOR UPDATE SKIP LOCKED
