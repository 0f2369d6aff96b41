-- Locks (without waiting) up to `limit` unpaused schedules due by the transaction's clock
-- ([`StoreTx::now`]), earliest first.
-- Scheduler loop: the write transaction is the only writer, so each due schedule
-- is taken by one engine at a time, and only once due by the transaction's clock
-- (which the pass computes its ticks from), whatever the engine's clock.
SELECT owner_id, name, cron, timezone, job, overlap, catchup_window_s, paused, next_fire_at,
    last_fired_at, last_job_id, fired_count, skipped_overlap_count, skipped_too_old_count, version,
    created_at,
    updated_at FROM schedules WHERE NOT paused AND next_fire_at <= ? ORDER BY next_fire_at LIMIT ?
